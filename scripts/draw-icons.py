"""Draws the artifact icons Berth serves at /api/v2.0/icons/{digest}.

Usage: python3 scripts/draw-icons.py crates/server/src/harbor/icons

Each icon is a 32x32 RGBA PNG: a rounded square in the type's colour with a
white pictogram, written with zlib alone (no imaging library), so the bytes
are the same on every machine.
"""

import math
import struct
import sys
import zlib

SIZE = 32


def png(pixels):
    raw = b"".join(b"\x00" + bytes(v for px in row for v in px) for row in pixels)

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", SIZE, SIZE, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def inside_rounded(x, y, radius=6):
    lo, hi = radius, SIZE - 1 - radius
    cx = min(max(x, lo), hi)
    cy = min(max(y, lo), hi)
    return (x - cx) ** 2 + (y - cy) ** 2 <= radius * radius


def draw(colour, glyph):
    white = (255, 255, 255, 255)
    clear = (0, 0, 0, 0)
    rows = []
    for y in range(SIZE):
        row = []
        for x in range(SIZE):
            if not inside_rounded(x, y):
                row.append(clear)
            elif glyph(x, y):
                row.append(white)
            else:
                row.append(colour + (255,))
        rows.append(row)
    return png(rows)


def ring(x, y, r_out, r_in, cx=15.5, cy=15.5):
    d = math.hypot(x - cx, y - cy)
    return r_in <= d <= r_out


def image(x, y):
    # A container: a box outline with two slats.
    box = 7 <= x <= 24 and 9 <= y <= 22
    inner = 9 <= x <= 22 and 11 <= y <= 20
    slat = inner and x in (13, 18)
    return (box and not inner) or slat


def chart(x, y):
    # A helm wheel: a ring, a hub and eight spokes.
    d = math.hypot(x - 15.5, y - 15.5)
    if ring(x, y, 10.5, 8.5) or d <= 3:
        return True
    if d <= 13 and d >= 3:
        angle = math.degrees(math.atan2(y - 15.5, x - 15.5)) % 45
        return angle < 7 or angle > 38
    return False


def cnab(x, y):
    # A bundle: three stacked bars.
    return 7 <= x <= 24 and any(top <= y <= top + 3 for top in (8, 14, 20))


def wasm(x, y):
    # A square with a notch cut in its top edge.
    block = 7 <= x <= 24 and 7 <= y <= 24
    notch = 12 <= x <= 19 and 7 <= y <= 12
    return block and not notch


def sbom(x, y):
    # A list: bullets and lines.
    rows = any(top <= y <= top + 1 for top in (9, 15, 21))
    return rows and (8 <= x <= 9 or 12 <= x <= 24)


def signature(x, y):
    # A check mark.
    return (abs((y - 16) - (x - 8)) <= 1 and 8 <= x <= 14) or (abs((y - 22) + (x - 14)) <= 1 and 14 <= x <= 24)


def cnai(x, y):
    # Three linked nodes.
    nodes = [(10, 10), (22, 12), (14, 22)]
    if any(math.hypot(x - nx, y - ny) <= 3 for nx, ny in nodes):
        return True
    for (ax, ay), (bx, by) in zip(nodes, nodes[1:] + nodes[:1]):
        length = math.hypot(bx - ax, by - ay)
        t = ((x - ax) * (bx - ax) + (y - ay) * (by - ay)) / (length * length)
        if 0 <= t <= 1 and math.hypot(x - (ax + t * (bx - ax)), y - (ay + t * (by - ay))) <= 0.8:
            return True
    return False


def unknown(x, y):
    # A blank page with a folded corner.
    page = 9 <= x <= 22 and 7 <= y <= 24
    fold = x - 9 + 24 - y < 0 or (x > 17 and y < 12 and x - 17 > y - 7)
    return page and not fold


ICONS = {
    "image": ((0x1F, 0x6F, 0xB8), image),
    "chart": ((0x0F, 0x16, 0x89), chart),
    "cnab": ((0x2E, 0x8B, 0x57), cnab),
    "wasm": ((0x65, 0x4F, 0xF0), wasm),
    "sbom": ((0x00, 0x80, 0x80), sbom),
    "signature": ((0xE0, 0x7B, 0x00), signature),
    "cnai": ((0x44, 0x44, 0x55), cnai),
    "default": ((0x80, 0x80, 0x80), unknown),
}

if __name__ == "__main__":
    out = sys.argv[1]
    for name, (colour, glyph) in ICONS.items():
        with open(f"{out}/{name}.png", "wb") as f:
            f.write(draw(colour, glyph))
