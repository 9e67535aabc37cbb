//! `/v2/<name>/...` paths, parsed from the right: repository names contain `/`.

/// What a path below `/v2/` addresses. Names and references are not validated here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum V2Path<'a> {
    /// `_catalog`
    Catalog,
    /// `<name>/tags/list`
    TagsList {
        /// Repository name.
        name: &'a str,
    },
    /// `<name>/manifests/<reference>`
    Manifest {
        /// Repository name.
        name: &'a str,
        /// Tag or digest.
        reference: &'a str,
    },
    /// `<name>/blobs/<digest>`
    Blob {
        /// Repository name.
        name: &'a str,
        /// The digest as sent.
        digest: &'a str,
    },
    /// `<name>/blobs/uploads` (trailing slash already removed)
    Uploads {
        /// Repository name.
        name: &'a str,
    },
    /// `<name>/blobs/uploads/<id>`
    Upload {
        /// Repository name.
        name: &'a str,
        /// Session id.
        id: &'a str,
    },
    /// `<name>/referrers/<digest>`
    Referrers {
        /// Repository name.
        name: &'a str,
        /// Subject digest as sent.
        digest: &'a str,
    },
}

/// Parses the part of a path after `/v2/`; `None` when it addresses nothing.
pub fn parse_v2_path(rest: &str) -> Option<V2Path<'_>> {
    let rest = rest.trim_end_matches('/');
    if rest == "_catalog" {
        return Some(V2Path::Catalog);
    }
    let name_before = |suffix_segments: usize| -> Option<&str> {
        let mut end = rest.len();
        for _ in 0..suffix_segments {
            end = rest[..end].rfind('/')?;
        }
        let name = &rest[..end];
        (!name.is_empty()).then_some(name)
    };
    let segments: Vec<&str> = rest.rsplitn(4, '/').collect();
    // segments[0] is the last segment, segments[1] the one before, ...
    let last = *segments.first()?;
    let second = segments.get(1).copied();
    let third = segments.get(2).copied();
    if second == Some("tags") && last == "list" {
        return name_before(2).map(|name| V2Path::TagsList { name });
    }
    if second == Some("blobs") && last == "uploads" {
        return name_before(2).map(|name| V2Path::Uploads { name });
    }
    if third == Some("blobs") && second == Some("uploads") && !last.is_empty() {
        return name_before(3).map(|name| V2Path::Upload { name, id: last });
    }
    if last.is_empty() {
        return None;
    }
    match second? {
        "manifests" => name_before(2).map(|name| V2Path::Manifest {
            name,
            reference: last,
        }),
        "blobs" => name_before(2).map(|name| V2Path::Blob { name, digest: last }),
        "referrers" => name_before(2).map(|name| V2Path::Referrers { name, digest: last }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_from_the_right() {
        assert_eq!(parse_v2_path("_catalog"), Some(V2Path::Catalog));
        assert_eq!(
            parse_v2_path("library/nginx/sub/manifests/latest"),
            Some(V2Path::Manifest {
                name: "library/nginx/sub",
                reference: "latest"
            })
        );
        assert_eq!(
            parse_v2_path("a/blobs/manifests/x"),
            Some(V2Path::Manifest {
                name: "a/blobs",
                reference: "x"
            })
        );
        assert_eq!(
            parse_v2_path("p/r/tags/list"),
            Some(V2Path::TagsList { name: "p/r" })
        );
        assert_eq!(
            parse_v2_path("p/r/blobs/uploads/"),
            Some(V2Path::Uploads { name: "p/r" })
        );
        assert_eq!(
            parse_v2_path("p/r/blobs/uploads/abc"),
            Some(V2Path::Upload {
                name: "p/r",
                id: "abc"
            })
        );
        assert_eq!(
            parse_v2_path("p/r/blobs/sha256:00"),
            Some(V2Path::Blob {
                name: "p/r",
                digest: "sha256:00"
            })
        );
        assert_eq!(
            parse_v2_path("p/r/referrers/sha256:00"),
            Some(V2Path::Referrers {
                name: "p/r",
                digest: "sha256:00"
            })
        );
        assert_eq!(parse_v2_path("manifests/latest"), None);
        assert_eq!(parse_v2_path("p/r/other/x"), None);
        assert_eq!(parse_v2_path("p"), None);
        assert_eq!(parse_v2_path(""), None);
    }
}
