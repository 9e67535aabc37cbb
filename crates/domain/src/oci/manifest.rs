//! Image manifests and indexes (OCI and Docker schema 2): what the store needs
//! to know about a manifest body.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::reference::Digest;

/// Media types the registry understands.
pub mod media_type {
    /// OCI image manifest.
    pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
    /// OCI image index.
    pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
    /// Docker image manifest, schema 2.
    pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
    /// Docker manifest list.
    pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
    /// OCI image config.
    pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
    /// Docker image config.
    pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
    /// The OCI empty descriptor.
    pub const OCI_EMPTY: &str = "application/vnd.oci.empty.v1+json";

    /// Whether `media_type` is a manifest type this registry stores.
    pub fn is_manifest(media_type: &str) -> bool {
        matches!(
            media_type,
            OCI_MANIFEST | OCI_INDEX | DOCKER_MANIFEST | DOCKER_LIST
        )
    }

    /// Whether `media_type` is an index or manifest list.
    pub fn is_index(media_type: &str) -> bool {
        matches!(media_type, OCI_INDEX | DOCKER_LIST)
    }
}

/// The most descriptors (layers or children) a manifest may list.
pub const MAX_DESCRIPTORS: usize = 10_000;

/// Why a manifest body was refused (`MANIFEST_INVALID`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ManifestError(pub String);

/// A content descriptor.
#[derive(Debug, Clone, PartialEq)]
pub struct Descriptor {
    /// Media type of the content.
    pub media_type: String,
    /// Content digest.
    pub digest: Digest,
    /// Size in bytes.
    pub size: i64,
    /// Platform of an index entry, as sent.
    pub platform: Option<Value>,
    /// External URLs (foreign layers).
    pub urls: Option<Vec<String>>,
    /// Annotations, as sent.
    pub annotations: Option<Value>,
    /// The artifact type of an index entry or subject.
    pub artifact_type: Option<String>,
}

impl Descriptor {
    /// Whether the content lives elsewhere (a foreign, non-distributable layer).
    pub fn is_foreign(&self) -> bool {
        self.media_type.contains(".foreign.") || self.media_type.contains("nondistributable")
    }
}

/// The shape of a manifest.
#[derive(Debug, Clone, PartialEq)]
pub enum ManifestKind {
    /// An image manifest: a config and layers.
    Image {
        /// The config blob.
        config: Descriptor,
        /// The layers, in order.
        layers: Vec<Descriptor>,
    },
    /// An index: child manifests.
    Index {
        /// The children.
        manifests: Vec<Descriptor>,
    },
}

/// A parsed manifest or index.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The manifest's own media type.
    pub media_type: String,
    /// Image or index.
    pub kind: ManifestKind,
    /// The OCI `subject` (this is a referrer of it).
    pub subject: Option<Descriptor>,
    /// The OCI `artifactType`.
    pub artifact_type: Option<String>,
    /// The manifest's annotations.
    pub annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawManifest {
    schema_version: Option<i64>,
    media_type: Option<String>,
    config: Option<RawDescriptor>,
    layers: Option<Vec<RawDescriptor>>,
    manifests: Option<Vec<RawDescriptor>>,
    subject: Option<RawDescriptor>,
    artifact_type: Option<String>,
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawDescriptor {
    media_type: String,
    digest: String,
    size: i64,
    platform: Option<Value>,
    urls: Option<Vec<String>>,
    annotations: Option<Value>,
    artifact_type: Option<String>,
}

impl RawDescriptor {
    fn into_descriptor(self, what: &str) -> Result<Descriptor, ManifestError> {
        let digest = Digest::parse(&self.digest)
            .map_err(|_| ManifestError(format!("{what} has an invalid digest {}", self.digest)))?;
        if self.size < 0 {
            return Err(ManifestError(format!("{what} has a negative size")));
        }
        Ok(Descriptor {
            media_type: self.media_type,
            digest,
            size: self.size,
            platform: self.platform,
            urls: self.urls.filter(|u| !u.is_empty()),
            annotations: self.annotations,
            artifact_type: self.artifact_type,
        })
    }
}

impl Manifest {
    /// Parses a manifest body. The media type is the body's `mediaType`, else the
    /// request's `Content-Type`, else inferred from the shape.
    pub fn parse(body: &[u8], content_type: Option<&str>) -> Result<Self, ManifestError> {
        let raw: RawManifest = serde_json::from_slice(body)
            .map_err(|e| ManifestError(format!("manifest is not valid JSON: {e}")))?;
        if raw.schema_version != Some(2) {
            return Err(ManifestError(
                "only schemaVersion 2 manifests are supported".into(),
            ));
        }
        let content_type = content_type
            .map(|c| c.split(';').next().unwrap_or("").trim())
            .filter(|c| media_type::is_manifest(c));
        let media_type = match (raw.media_type.as_deref(), content_type) {
            (Some(body_type), Some(header)) if body_type != header => {
                return Err(ManifestError(format!(
                    "mediaType {body_type} does not match Content-Type {header}"
                )));
            }
            (Some(body_type), _) => body_type.to_string(),
            (None, Some(header)) => header.to_string(),
            (None, None) if raw.manifests.is_some() => media_type::OCI_INDEX.to_string(),
            (None, None) => media_type::OCI_MANIFEST.to_string(),
        };
        if !media_type::is_manifest(&media_type) {
            return Err(ManifestError(format!(
                "unsupported manifest media type {media_type}"
            )));
        }
        let kind = if media_type::is_index(&media_type) {
            if raw.config.is_some() || raw.layers.is_some() {
                return Err(ManifestError("an index has no config or layers".into()));
            }
            let manifests = raw
                .manifests
                .ok_or_else(|| ManifestError("an index needs `manifests`".into()))?
                .into_iter()
                .map(|d| d.into_descriptor("manifests entry"))
                .collect::<Result<Vec<_>, _>>()?;
            ManifestKind::Index { manifests }
        } else {
            if raw.manifests.is_some() {
                return Err(ManifestError("an image manifest has no `manifests`".into()));
            }
            let config = raw
                .config
                .ok_or_else(|| ManifestError("an image manifest needs `config`".into()))?
                .into_descriptor("config")?;
            let layers = raw
                .layers
                .unwrap_or_default()
                .into_iter()
                .map(|d| d.into_descriptor("layer"))
                .collect::<Result<Vec<_>, _>>()?;
            ManifestKind::Image { config, layers }
        };
        let count = match &kind {
            ManifestKind::Image { layers, .. } => layers.len(),
            ManifestKind::Index { manifests } => manifests.len(),
        };
        if count > MAX_DESCRIPTORS {
            return Err(ManifestError(format!(
                "a manifest may list at most {MAX_DESCRIPTORS} layers or manifests"
            )));
        }
        if content_size(&kind).is_none() {
            return Err(ManifestError(format!(
                "the sizes of the manifest's descriptors add up to more than {} bytes",
                i64::MAX
            )));
        }
        let subject = raw
            .subject
            .map(|d| d.into_descriptor("subject"))
            .transpose()?;
        Ok(Self {
            media_type,
            kind,
            subject,
            artifact_type: raw.artifact_type.filter(|t| !t.is_empty()),
            annotations: raw.annotations,
        })
    }

    /// The config's media type for an image; the manifest's own type for an index
    /// (Harbor's `media_type` of an artifact).
    pub fn config_media_type(&self) -> &str {
        match &self.kind {
            ManifestKind::Image { config, .. } => &config.media_type,
            ManifestKind::Index { .. } => &self.media_type,
        }
    }

    /// OCI `artifactType`, else the config media type (the referrers API rule).
    pub fn effective_artifact_type(&self) -> &str {
        self.artifact_type
            .as_deref()
            .unwrap_or_else(|| self.config_media_type())
    }

    /// Harbor's artifact `type`: IMAGE, CHART, CNAB, WASM, SBOM, CNAI or UNKNOWN.
    pub fn harbor_type(&self) -> &'static str {
        if matches!(self.kind, ManifestKind::Index { .. }) {
            return "IMAGE";
        }
        match self.effective_artifact_type() {
            media_type::OCI_CONFIG | media_type::DOCKER_CONFIG => "IMAGE",
            "application/vnd.cncf.helm.config.v1+json" => "CHART",
            "application/vnd.cnab.config.v1+json" => "CNAB",
            "application/vnd.wasm.config.v1+json"
            | "application/vnd.module.wasm.config.v1+json" => "WASM",
            "application/vnd.goharbor.harbor.sbom.v1" => "SBOM",
            "application/vnd.cnai.model.manifest.v1+json"
            | "application/vnd.cnai.model.config.v1+json" => "CNAI",
            _ => "UNKNOWN",
        }
    }

    /// Harbor's accessory type for a manifest with a `subject` (hidden from listings).
    pub fn accessory_type(&self) -> Option<&'static str> {
        self.subject.as_ref()?;
        Some(match self.effective_artifact_type() {
            "application/vnd.dev.cosign.artifact.sig.v1+json" => "signature.cosign",
            "application/vnd.cncf.notary.signature" => "signature.notation",
            "application/vnd.goharbor.harbor.sbom.v1" => "sbom.harbor",
            _ => "subject.accessory",
        })
    }

    /// The blobs this manifest depends on: config and non-foreign layers (images only).
    pub fn blob_dependencies(&self) -> Vec<&Descriptor> {
        match &self.kind {
            ManifestKind::Image { config, layers } => std::iter::once(config)
                .chain(layers.iter().filter(|l| !l.is_foreign()))
                .collect(),
            ManifestKind::Index { .. } => Vec::new(),
        }
    }

    /// The child manifests of an index.
    pub fn children(&self) -> &[Descriptor] {
        match &self.kind {
            ManifestKind::Index { manifests } => manifests,
            ManifestKind::Image { .. } => &[],
        }
    }

    /// Harbor's artifact size: the manifest plus its config and layers; for an
    /// index the manifest plus its children's descriptor sizes (saturating at
    /// `i64::MAX`; [`Manifest::parse`] refuses sizes whose sum overflows).
    pub fn artifact_size(&self, body_len: usize) -> i64 {
        let own = i64::try_from(body_len).unwrap_or(i64::MAX);
        own.saturating_add(content_size(&self.kind).unwrap_or(i64::MAX))
    }
}

/// The declared sizes of an image's config and layers, or of an index's
/// children, added up; `None` when the sum does not fit in an `i64`.
fn content_size(kind: &ManifestKind) -> Option<i64> {
    let (first, rest) = match kind {
        ManifestKind::Image { config, layers } => (config.size, layers),
        ManifestKind::Index { manifests } => (0, manifests),
    };
    rest.iter()
        .try_fold(first, |sum, descriptor| sum.checked_add(descriptor.size))
}

/// The `extra_attrs` Harbor shows for an image, read from its config blob:
/// `architecture`, `os`, `config`, `created`, `author` (absent keys omitted).
pub fn image_extra_attrs(config_json: &[u8]) -> Value {
    let Ok(Value::Object(config)) = serde_json::from_slice::<Value>(config_json) else {
        return Value::Object(serde_json::Map::new());
    };
    let mut attrs = serde_json::Map::new();
    for key in [
        "architecture",
        "os",
        "config",
        "created",
        "author",
        "variant",
    ] {
        if let Some(value) = config.get(key) {
            attrs.insert(key.to_string(), value.clone());
        }
    }
    Value::Object(attrs)
}

/// An image's build history as Harbor serves it (`json.Marshal` of the
/// config's `history`): each entry with `created`, `created_by`, `author`,
/// `comment` and `empty_layer`, empty ones omitted. A config
/// that is not JSON or has no history gives an empty list.
pub fn image_build_history(config_json: &[u8]) -> Value {
    let history = match serde_json::from_slice::<Value>(config_json) {
        Ok(Value::Object(mut config)) => config.remove("history"),
        _ => None,
    };
    let Some(Value::Array(entries)) = history else {
        return Value::Array(Vec::new());
    };
    let entries = entries
        .into_iter()
        .map(|entry| {
            let mut out = serde_json::Map::new();
            for key in ["created", "created_by", "author", "comment", "empty_layer"] {
                let value = entry.get(key).cloned().unwrap_or(Value::Null);
                let empty = match &value {
                    Value::Null | Value::Bool(false) => true,
                    Value::String(s) => s.is_empty(),
                    _ => false,
                };
                if !empty {
                    out.insert(key.to_string(), value);
                }
            }
            Value::Object(out)
        })
        .collect();
    Value::Array(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_history_keeps_harbor_fields() {
        let config = br#"{"history":[
            {"created":"2024-01-02T03:04:05Z","created_by":"/bin/sh -c #(nop) ADD file:1 in /","extra":1},
            {"created_by":"CMD [\"sh\"]","empty_layer":true,"author":"","comment":"buildkit"},
            {"empty_layer":false}
        ]}"#;
        assert_eq!(
            image_build_history(config),
            serde_json::json!([
                {"created":"2024-01-02T03:04:05Z","created_by":"/bin/sh -c #(nop) ADD file:1 in /"},
                {"created_by":"CMD [\"sh\"]","comment":"buildkit","empty_layer":true},
                {}
            ])
        );
        assert_eq!(
            image_build_history(br#"{"os":"linux"}"#),
            serde_json::json!([])
        );
        assert_eq!(image_build_history(b"not json"), serde_json::json!([]));
    }

    fn digest(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    fn image(config_type: &str) -> String {
        format!(
            r#"{{"schemaVersion":2,"mediaType":"{}","config":{{"mediaType":"{config_type}","digest":"{}","size":10}},
            "layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{}","size":100}},
                      {{"mediaType":"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip","digest":"{}","size":5,"urls":["http://x"]}}]}}"#,
            media_type::OCI_MANIFEST,
            digest('a'),
            digest('b'),
            digest('c')
        )
    }

    #[test]
    fn image_manifest() {
        let body = image(media_type::OCI_CONFIG);
        let m = Manifest::parse(body.as_bytes(), None).unwrap();
        assert_eq!(m.media_type, media_type::OCI_MANIFEST);
        assert_eq!(m.harbor_type(), "IMAGE");
        assert_eq!(m.config_media_type(), media_type::OCI_CONFIG);
        let deps: Vec<_> = m
            .blob_dependencies()
            .iter()
            .map(|d| d.digest.to_string())
            .collect();
        assert_eq!(
            deps,
            vec![digest('a'), digest('b')],
            "foreign layer skipped"
        );
        assert_eq!(m.artifact_size(body.len()), body.len() as i64 + 115);
        assert_eq!(m.accessory_type(), None);
        let chart = Manifest::parse(
            image("application/vnd.cncf.helm.config.v1+json").as_bytes(),
            None,
        )
        .unwrap();
        assert_eq!(chart.harbor_type(), "CHART");
    }

    #[test]
    fn index_with_platforms() {
        let body = format!(
            r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"{}","digest":"{}","size":7,"platform":{{"architecture":"amd64","os":"linux"}}}}]}}"#,
            media_type::OCI_MANIFEST,
            digest('d')
        );
        let m = Manifest::parse(body.as_bytes(), Some(media_type::OCI_INDEX)).unwrap();
        assert_eq!(m.media_type, media_type::OCI_INDEX);
        assert_eq!(m.children().len(), 1);
        assert_eq!(m.children()[0].platform.as_ref().unwrap()["os"], "linux");
        assert!(m.blob_dependencies().is_empty());
        assert_eq!(m.harbor_type(), "IMAGE");
        assert_eq!(m.artifact_size(body.len()), body.len() as i64 + 7);
    }

    #[test]
    fn subject_and_artifact_type() {
        let body = format!(
            r#"{{"schemaVersion":2,"mediaType":"{}","artifactType":"application/vnd.cncf.notary.signature","config":{{"mediaType":"{}","digest":"{}","size":2}},"layers":[],"subject":{{"mediaType":"{}","digest":"{}","size":3}}}}"#,
            media_type::OCI_MANIFEST,
            media_type::OCI_EMPTY,
            digest('e'),
            media_type::OCI_MANIFEST,
            digest('f')
        );
        let m = Manifest::parse(body.as_bytes(), None).unwrap();
        assert_eq!(m.subject.as_ref().unwrap().digest.to_string(), digest('f'));
        assert_eq!(
            m.effective_artifact_type(),
            "application/vnd.cncf.notary.signature"
        );
        assert_eq!(m.accessory_type(), Some("signature.notation"));
        assert_eq!(m.harbor_type(), "UNKNOWN");
    }

    #[test]
    fn invalid_manifests() {
        assert!(Manifest::parse(b"not json", None).is_err());
        assert!(Manifest::parse(br#"{"schemaVersion":1}"#, None).is_err());
        let body = image(media_type::OCI_CONFIG);
        assert!(
            Manifest::parse(body.as_bytes(), Some(media_type::DOCKER_MANIFEST)).is_err(),
            "type mismatch"
        );
        let bad_digest = body.replace(&digest('a'), "sha256:zz");
        assert!(Manifest::parse(bad_digest.as_bytes(), None).is_err());
        let schema1 = r#"{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v1+prettyjws"}"#;
        assert!(Manifest::parse(schema1.as_bytes(), None).is_err());
        let many: Vec<String> = (0..=MAX_DESCRIPTORS)
            .map(|_| format!(r#"{{"mediaType":"x","digest":"{}","size":1}}"#, digest('a')))
            .collect();
        let too_many = format!(r#"{{"schemaVersion":2,"manifests":[{}]}}"#, many.join(","));
        assert!(Manifest::parse(too_many.as_bytes(), None).is_err());
        let no_config = format!(
            r#"{{"schemaVersion":2,"mediaType":"{}","layers":[]}}"#,
            media_type::OCI_MANIFEST
        );
        assert!(Manifest::parse(no_config.as_bytes(), None).is_err());
    }

    #[test]
    fn sizes_that_overflow_or_are_negative() {
        let layer = |size: &str| {
            format!(
                r#"{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{}","size":{size}}}"#,
                digest('b')
            )
        };
        let image = |layers: &[String]| {
            format!(
                r#"{{"schemaVersion":2,"mediaType":"{}","config":{{"mediaType":"{}","digest":"{}","size":1}},"layers":[{}]}}"#,
                media_type::OCI_MANIFEST,
                media_type::OCI_CONFIG,
                digest('a'),
                layers.join(",")
            )
        };
        let max = i64::MAX.to_string();
        let fits = image(&[layer(&(i64::MAX - 1).to_string())]);
        let m = Manifest::parse(fits.as_bytes(), None).unwrap();
        assert_eq!(
            m.artifact_size(fits.len()),
            i64::MAX,
            "saturates, never wraps"
        );
        for layers in [
            vec![layer(&max)],
            vec![layer(&max), layer(&max)],
            vec![layer("-1")],
            vec![layer("9223372036854775808")],
            vec![layer("1.5")],
        ] {
            let body = image(&layers);
            assert!(Manifest::parse(body.as_bytes(), None).is_err(), "{body}");
        }
        let index = format!(
            r#"{{"schemaVersion":2,"mediaType":"{}","manifests":[{{"mediaType":"{}","digest":"{}","size":{max}}},{{"mediaType":"{}","digest":"{}","size":1}}]}}"#,
            media_type::OCI_INDEX,
            media_type::OCI_MANIFEST,
            digest('c'),
            media_type::OCI_MANIFEST,
            digest('d')
        );
        let err = Manifest::parse(index.as_bytes(), None).unwrap_err();
        assert!(err.0.contains("add up to more than"), "{err}");
    }

    #[test]
    fn extra_attrs_from_config() {
        let attrs = image_extra_attrs(br#"{"architecture":"amd64","os":"linux","rootfs":{}}"#);
        assert_eq!(
            attrs,
            serde_json::json!({"architecture":"amd64","os":"linux"})
        );
        assert_eq!(image_extra_attrs(b"[]"), serde_json::json!({}));
    }
}
