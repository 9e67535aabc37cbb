//! The OCI distribution grammar: names, references, `/v2/` paths, ranges and manifests.

pub mod manifest;
pub mod path;
pub mod range;
pub mod reference;

pub use manifest::{Descriptor, Manifest, ManifestError, ManifestKind, media_type};
pub use path::{V2Path, parse_v2_path};
pub use range::{ByteRange, parse_content_range, parse_range};
pub use reference::{
    Algorithm, Digest, DigestError, Reference, is_valid_name, is_valid_tag, within_project,
};
