#!/usr/bin/env python3
"""End-to-end test of Berth's container image, built offline by scripts/image.

    python3 scripts/image-test.py BERTH_BINARY

Builds the image from BERTH_BINARY with `scripts/image` into a temporary
directory; starts BERTH_BINARY as a registry on a free loopback port with a
fresh data directory; pushes the oci-archive to it with skopeo as
library/berth:test and checks the manifest digest the registry serves is the
archive's; pulls it back into an OCI layout and checks the digest again (and
every blob's hash); unpacks it with umoci and checks the image configuration
(user 65532:65532, BERTH_DATA_DIR=/data, port 9000, volume /data, entrypoint,
labels) and the rootfs (passwd/group, CA bundle, /tmp, /data). Then, under
chroot as user 65532 with the image's environment, as a container would run
it: `berth --version`; `berth --ip 127.0.0.1 --port P --data-dir /data` as a
server (/livez, /readyz, /v2/ as admin), `berth healthcheck --port P` (exit 0
while it serves, 1 once it is stopped) and a SIGTERM stop (exit 0, as `docker stop` asks). Prints the image
size (archive bytes, the layers' compressed sizes, the unpacked rootfs).

Needs root (buildah's storage, umoci unpacking files owned by 65532, chroot)
and buildah, skopeo, umoci, chroot: a missing one is a failure, never a skip.
Every process it starts is stopped and its temporary directory removed, also
on failure or interruption.
"""

import base64
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ADMIN_PASSWORD = "Image-test-1"
TOOLS = ["buildah", "skopeo", "umoci", "chroot", "ldd", "git"]
NONROOT = "65532:65532"

checks = 0


def log(text):
    print(f"image-test: {text}", flush=True)


def ok(text):
    global checks
    checks += 1
    print(f"image-test:   ok  {text}", flush=True)


class Failure(Exception):
    pass


def check(condition, text):
    if not condition:
        raise Failure(text)
    ok(text)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args, timeout=600, **kwargs):
    """Runs a command; its output is returned, a failure raises with the output."""
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kwargs)
    if result.returncode != 0:
        raise Failure(
            f"{' '.join(args)} exited {result.returncode}:\n{result.stdout}{result.stderr}"
        )
    return result.stdout


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def http_status(url, auth=None, timeout=2):
    request = urllib.request.Request(url)
    if auth:
        token = base64.b64encode(auth.encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


class Processes:
    """The servers this test started, stopped whatever happens."""

    def __init__(self):
        self.running = []

    def start(self, args, logfile, env):
        out = open(logfile, "w")
        process = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
        out.close()
        self.running.append(process)
        return process

    def stop(self, process, timeout=20):
        """SIGTERM, then SIGKILL after `timeout` seconds; the exit code."""
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process in self.running:
            self.running.remove(process)
        return process.returncode

    def stop_all(self):
        for process in list(self.running):
            self.stop(process, timeout=5)


def wait_healthy(process, port, logfile, what):
    url = f"http://127.0.0.1:{port}/api/v2.0/health"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            if http_status(url, timeout=1)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    with open(logfile) as f:
        tail = f.read()[-4000:]
    raise Failure(f"{what} did not answer 200 on {url} (exit {process.poll()}):\n{tail}")


def archive_manifest_digest(archive):
    """The manifest digest an oci-archive's index.json names (it must name exactly one)."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        index = json.load(member)
    manifests = index.get("manifests", [])
    if len(manifests) != 1:
        raise Failure(f"{archive}: index.json names {len(manifests)} manifests, not 1")
    return manifests[0]["digest"], manifests[0].get("annotations", {})


def layout_blob(layout, digest):
    algorithm, hexdigest = digest.split(":", 1)
    return os.path.join(layout, "blobs", algorithm, hexdigest)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1] if __doc__ else "usage: image-test.py BERTH_BINARY")
    binary = os.path.abspath(sys.argv[1])

    log("tools: " + ", ".join(TOOLS) + ", running as root")
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        raise Failure("missing: " + ", ".join(missing)
                      + " (apt-get install buildah skopeo umoci coreutils libc-bin git)")
    if os.geteuid() != 0:
        raise Failure("must run as root (buildah's storage, umoci unpack, chroot)")
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        raise Failure(f"no executable berth at {binary}")
    ok("buildah, skopeo, umoci and chroot present; root")

    work = tempfile.mkdtemp(prefix="berth-image-test.")
    processes = Processes()
    try:
        scenario(binary, work, processes)
    finally:
        processes.stop_all()
        shutil.rmtree(work, ignore_errors=True)


def scenario(binary, work, processes):
    archive = os.path.join(work, "berth.tar")

    # --- build ----------------------------------------------------------------------------------
    log(f"scripts/image --binary {binary}")
    started = time.monotonic()
    out = run([os.path.join(REPO, "scripts", "image"), "--binary", binary,
               "--output", archive, "--tag", "berth:test"], timeout=900)
    sys.stdout.write(out)
    check(os.path.getsize(archive) > 0,
          f"oci-archive written ({os.path.getsize(archive)} bytes, "
          f"{time.monotonic() - started:.1f} s)")
    archive_digest, annotations = archive_manifest_digest(archive)
    check(annotations.get("org.opencontainers.image.ref.name") == "berth:test",
          f"the archive holds one manifest, {archive_digest}, named berth:test")

    # --- push to a berth, pull back -------------------------------------------------------------
    port = free_port()
    host = f"127.0.0.1:{port}"
    creds = f"admin:{ADMIN_PASSWORD}"
    server_log = os.path.join(work, "server.log")
    log(f"starting {binary} on {host}")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "HARBOR_ADMIN_PASSWORD": ADMIN_PASSWORD, "BERTH_LOG": "warn"}
    server = processes.start(
        [binary, "--ip", "127.0.0.1", "--port", str(port),
         "--data-dir", os.path.join(work, "data")], server_log, env)
    wait_healthy(server, port, server_log, "the registry")
    ok(f"the registry answers 200 on /api/v2.0/health")

    reference = f"docker://{host}/library/berth:test"
    digest_file = os.path.join(work, "pushed.digest")
    log(f"skopeo copy oci-archive:{archive} {reference}")
    run(["skopeo", "--insecure-policy", "copy", "--quiet", "--dest-tls-verify=false",
         "--dest-creds", creds, "--digestfile", digest_file,
         f"oci-archive:{archive}", reference])
    with open(digest_file) as f:
        pushed = f.read().strip()
    check(pushed == archive_digest, f"pushed manifest digest {pushed} is the archive's")
    raw = subprocess.run(
        ["skopeo", "inspect", "--raw", "--tls-verify=false", "--creds", creds, reference],
        capture_output=True, timeout=120, check=True).stdout
    served = "sha256:" + hashlib.sha256(raw).hexdigest()
    check(served == pushed, f"the registry serves library/berth:test as {served}")
    status, body = http_status(f"http://{host}/v2/library/berth/tags/list", auth=creds)
    check(status == 200 and "test" in json.loads(body).get("tags", []),
          "GET /v2/library/berth/tags/list lists test")

    layout = os.path.join(work, "layout")
    log(f"skopeo copy {reference} oci:{layout}:test")
    run(["skopeo", "--insecure-policy", "copy", "--quiet", "--src-tls-verify=false",
         "--src-creds", creds, reference, f"oci:{layout}:test"])
    with open(os.path.join(layout, "index.json")) as f:
        index = json.load(f)
    pulled = [m["digest"] for m in index["manifests"]
              if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == "test"]
    check(pulled == [pushed], f"pulled manifest digest {pulled[0] if pulled else None} "
                              "is the pushed one")
    with open(layout_blob(layout, pushed), "rb") as f:
        manifest = json.loads(f.read())
    blobs = [manifest["config"]] + manifest["layers"]
    for blob in [{"digest": pushed}] + blobs:
        path = layout_blob(layout, blob["digest"])
        if sha256_file(path) != blob["digest"]:
            raise Failure(f"pulled blob {path} does not hash to {blob['digest']}")
        if "size" in blob and os.path.getsize(path) != blob["size"]:
            raise Failure(f"pulled blob {blob['digest']} is not {blob['size']} bytes")
    ok(f"every pulled blob (manifest, config, {len(manifest['layers'])} layer(s)) "
       "hashes to its digest")
    processes.stop(server)

    # --- the image's configuration ---------------------------------------------------------------
    with open(layout_blob(layout, manifest["config"]["digest"])) as f:
        image = json.load(f)
    config = image.get("config", {})
    check(config.get("User") == NONROOT, f"user {config.get('User')}")
    image_env = dict(item.split("=", 1) for item in config.get("Env", []))
    check(image_env.get("BERTH_DATA_DIR") == "/data", "env BERTH_DATA_DIR=/data")
    check("9000/tcp" in config.get("ExposedPorts", {}), "exposes 9000/tcp")
    check("/data" in config.get("Volumes", {}), "volume /data")
    check(config.get("Entrypoint") == ["/usr/local/bin/berth"] and not config.get("Cmd"),
          "entrypoint [\"/usr/local/bin/berth\"], no cmd")
    labels = config.get("Labels", {})
    revision = labels.get("org.opencontainers.image.revision", "")
    check(re.fullmatch(r"[0-9a-f]{40}", revision) is not None,
          f"label org.opencontainers.image.revision={revision}")
    version = labels.get("org.opencontainers.image.version", "")
    check(bool(version), f"label org.opencontainers.image.version={version}")
    if "Healthcheck" in config:
        ok(f"healthcheck {config['Healthcheck'].get('Test')}")
    else:
        log("note: no HEALTHCHECK in the OCI image config (the OCI format has no field for "
            "it; scripts/image --format docker keeps it)")

    # --- unpack ----------------------------------------------------------------------------------
    bundle = os.path.join(work, "bundle")
    log(f"umoci unpack --image {layout}:test {bundle}")
    run(["umoci", "unpack", "--image", f"{layout}:test", bundle])
    rootfs = os.path.join(bundle, "rootfs")

    def stat(path):
        return os.lstat(os.path.join(rootfs, path.lstrip("/")))

    berth = stat("/usr/local/bin/berth")
    check(berth.st_uid == 0 and berth.st_mode & 0o777 == 0o755,
          "/usr/local/bin/berth is root's, mode 755")
    with open(os.path.join(rootfs, "etc/passwd")) as f:
        passwd = f.read()
    with open(os.path.join(rootfs, "etc/group")) as f:
        group = f.read()
    check(re.search(r"^nonroot:x:65532:65532:", passwd, re.M) is not None
          and re.search(r"^nonroot:x:65532:", group, re.M) is not None,
          "/etc/passwd and /etc/group have nonroot 65532")
    ca = stat("/etc/ssl/certs/ca-certificates.crt")
    with open(os.path.join(rootfs, "etc/ssl/certs/ca-certificates.crt")) as f:
        certificates = f.read().count("BEGIN CERTIFICATE")
    check(ca.st_size > 0 and certificates > 0,
          f"/etc/ssl/certs/ca-certificates.crt ({certificates} certificates)")
    tmp = stat("/tmp")
    check(tmp.st_mode & 0o7777 == 0o1777, "/tmp is mode 1777")
    data = stat("/data")
    check((data.st_uid, data.st_gid) == (65532, 65532), "/data belongs to 65532:65532")

    # --- run it, as a container would: chroot, user 65532, the image's environment ---------------
    chroot = ["chroot", f"--userspec={NONROOT}", rootfs]
    image_env["HARBOR_ADMIN_PASSWORD"] = ADMIN_PASSWORD
    result = subprocess.run(chroot + ["/usr/local/bin/berth", "--version"], env=image_env,
                            capture_output=True, text=True, timeout=60)
    printed = result.stdout.strip()
    check(result.returncode == 0 and printed.startswith("berth "),
          f"chroot ... berth --version: {printed or result.stderr.strip()}")
    match = re.match(r"berth (\S+)", printed)
    check(match is not None and match.group(1) == version,
          f"--version's version is the label's ({version})")

    port2 = free_port()
    inner_log = os.path.join(work, "image-server.log")
    log(f"chroot --userspec={NONROOT} ROOTFS /usr/local/bin/berth --ip 127.0.0.1 "
        f"--port {port2} --data-dir /data")
    inner = processes.start(chroot + ["/usr/local/bin/berth", "--ip", "127.0.0.1",
                                      "--port", str(port2), "--data-dir", "/data"],
                            inner_log, image_env)
    wait_healthy(inner, port2, inner_log, "the image's berth")
    ok(f"the image's berth serves on 127.0.0.1:{port2} as 65532")
    for probe in ("/livez", "/readyz"):
        status, _ = http_status(f"http://127.0.0.1:{port2}{probe}")
        check(status == 200, f"GET {probe} is 200")
    status, _ = http_status(f"http://127.0.0.1:{port2}/v2/", auth=f"admin:{ADMIN_PASSWORD}")
    check(status == 200, "GET /v2/ as admin (HARBOR_ADMIN_PASSWORD) is 200")
    written = [os.lstat(os.path.join(dirpath, name))
               for dirpath, _, names in os.walk(os.path.join(rootfs, "data")) for name in names]
    check(written and all(s.st_uid == 65532 for s in written),
          f"the server wrote {len(written)} file(s) under /data, all 65532's")
    healthcheck = chroot + ["/usr/local/bin/berth", "healthcheck", "--port", str(port2)]
    result = subprocess.run(healthcheck, env=image_env, capture_output=True, text=True,
                            timeout=60)
    check(result.returncode == 0,
          f"berth healthcheck --port {port2} exits 0 while it serves (got "
          f"{result.returncode}: {(result.stdout + result.stderr).strip()})")
    code = processes.stop(inner)
    if code != 0:
        with open(inner_log) as f:
            sys.stdout.write(f.read()[-4000:])
    check(code == 0, f"SIGTERM stops it with exit 0 (got {code})")
    result = subprocess.run(healthcheck, env=image_env, capture_output=True, text=True,
                            timeout=60)
    check(result.returncode == 1,
          f"berth healthcheck exits 1 once it is stopped (got {result.returncode})")

    # --- size ------------------------------------------------------------------------------------
    layers = sum(layer["size"] for layer in manifest["layers"])
    unpacked = sum(os.lstat(os.path.join(dirpath, name)).st_size
                   for dirpath, _, names in os.walk(rootfs) for name in names)
    mib = 1 << 20
    kinds = ", ".join(sorted({layer["mediaType"].rsplit(".", 1)[-1] for layer in manifest["layers"]}))
    log(f"size: archive {os.path.getsize(archive)} bytes ({os.path.getsize(archive) / mib:.1f} "
        f"MiB); {len(manifest['layers'])} layer(s) ({kinds}) {layers} bytes ({layers / mib:.1f} "
        f"MiB); unpacked rootfs {unpacked} bytes ({unpacked / mib:.1f} MiB), of which the "
        f"binary {berth.st_size} bytes")


if __name__ == "__main__":
    # A SIGTERM (a CI timeout) unwinds like an exception, so the cleanup runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        main()
    except Failure as failure:
        print(f"image-test: FAILED: {failure}", file=sys.stderr, flush=True)
        print(f"image-test: {checks} passed, 1 failed", flush=True)
        sys.exit(1)
    except Exception as err:  # a tool that failed, timed out or gave something unreadable
        traceback.print_exc()
        print(f"image-test: FAILED: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        print(f"image-test: {checks} passed, 1 failed", flush=True)
        sys.exit(1)
    print(f"image-test: {checks} passed, 0 failed", flush=True)
