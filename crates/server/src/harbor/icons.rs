//! Harbor's getIcon (`GET /icons/{digest}`): the icons of artifact types that
//! artifact and accessory listings name by digest. Berth draws its own (small
//! PNGs, `scripts/draw-icons.py`), and an icon's digest is the sha256 of the
//! bytes served, so a client may check what it got.

use std::sync::LazyLock;

use axum::Json;
use axum::extract::Path;
use base64::Engine;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{ApiError, HarborResult};
use crate::operations::{Routes, Surface};

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor).get("/icons/{digest}", get_icon)
}

/// One icon: its name, its bytes and the digest listings name it by.
struct Icon {
    name: &'static str,
    png: &'static [u8],
    digest: String,
}

/// Every icon, by name.
static ICONS: LazyLock<Vec<Icon>> = LazyLock::new(|| {
    [
        ("image", &include_bytes!("icons/image.png")[..]),
        ("chart", include_bytes!("icons/chart.png")),
        ("cnab", include_bytes!("icons/cnab.png")),
        ("wasm", include_bytes!("icons/wasm.png")),
        ("sbom", include_bytes!("icons/sbom.png")),
        ("signature", include_bytes!("icons/signature.png")),
        ("cnai", include_bytes!("icons/cnai.png")),
        ("default", include_bytes!("icons/default.png")),
    ]
    .into_iter()
    .map(|(name, png)| Icon {
        name,
        png,
        digest: format!("sha256:{}", hex::encode(Sha256::digest(png))),
    })
    .collect()
});

/// The digest of the icon called `name` (one of [`ICONS`]).
fn digest_of(name: &str) -> &'static str {
    ICONS
        .iter()
        .find(|icon| icon.name == name)
        .or_else(|| ICONS.last())
        .map_or("", |icon| icon.digest.as_str())
}

/// The icon digest of an artifact of Harbor type `kind` (`IMAGE`, `CHART`, ...).
pub(crate) fn of_type(kind: &str) -> &'static str {
    digest_of(match kind {
        "IMAGE" => "image",
        "CHART" => "chart",
        "CNAB" => "cnab",
        "WASM" => "wasm",
        "SBOM" => "sbom",
        "CNAI" => "cnai",
        _ => "default",
    })
}

/// The icon digest of an accessory of `accessory_type` (`signature.cosign`, ...).
pub(crate) fn of_accessory(accessory_type: Option<&str>) -> &'static str {
    digest_of(match accessory_type {
        Some(kind) if kind.starts_with("signature.") => "signature",
        Some(kind) if kind.starts_with("sbom.") => "sbom",
        _ => "default",
    })
}

/// Harbor's Icon.
#[derive(Debug, Serialize)]
pub struct IconJson {
    #[serde(rename = "content-type")]
    content_type: &'static str,
    content: String,
}

/// `GET /icons/{digest}`: the icon as base64 PNG; 404 for a digest no
/// listing names. Anyone may read icons, as in Harbor.
pub async fn get_icon(Path(digest): Path<String>) -> HarborResult<Json<IconJson>> {
    let icon = ICONS
        .iter()
        .find(|icon| icon.digest == digest)
        .ok_or_else(|| ApiError::not_found(format!("icon {digest} not found")))?;
    Ok(Json(IconJson {
        content_type: "image/png",
        content: base64::engine::general_purpose::STANDARD.encode(icon.png),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_has_an_icon_of_its_own_and_each_is_a_png() {
        let kinds = ["IMAGE", "CHART", "CNAB", "WASM", "SBOM", "CNAI", "UNKNOWN"];
        let mut digests: Vec<&str> = kinds.iter().map(|kind| of_type(kind)).collect();
        digests.push(of_accessory(Some("signature.cosign")));
        digests.sort_unstable();
        digests.dedup();
        assert_eq!(digests.len(), kinds.len() + 1);
        assert_eq!(of_accessory(Some("sbom.harbor")), of_type("SBOM"));
        assert_eq!(of_accessory(None), of_type("UNKNOWN"));
        for icon in ICONS.iter() {
            assert!(icon.png.starts_with(b"\x89PNG\r\n\x1a\n"), "{}", icon.name);
        }
    }
}
