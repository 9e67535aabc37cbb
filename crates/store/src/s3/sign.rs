//! AWS Signature Version 4 for S3: the canonical request, the signing key, and the two
//! ways a signature travels (an `Authorization` header, or a presigned URL's query).

use hmac::{Hmac, KeyInit, Mac};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

/// Everything except the unreserved characters `A-Z a-z 0-9 - . _ ~` is percent-encoded.
const STRICT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');
/// As [`STRICT`], keeping `/` (object keys in a path).
const PATH: &AsciiSet = &STRICT.remove(b'/');

/// SHA-256 of the empty payload, hex.
pub(super) const EMPTY_SHA256: &str =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
/// The payload hash of a request whose body is not signed.
pub(super) const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";
const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// Percent-encodes a query name or value (or a path segment) the SigV4 way.
pub(super) fn encode(text: &str) -> String {
    utf8_percent_encode(text, STRICT).to_string()
}

/// Percent-encodes an object key for a path, keeping its `/`.
pub(super) fn encode_path(text: &str) -> String {
    utf8_percent_encode(text, PATH).to_string()
}

/// Who signs, and for which region.
pub(super) struct Signer<'a> {
    /// The access key id.
    pub access_key: &'a str,
    /// The secret access key.
    pub secret_key: &'a str,
    /// The region (`us-east-1`).
    pub region: &'a str,
}

/// The moment a request is signed at, in the two forms SigV4 uses.
pub(super) struct Stamp {
    /// `YYYYMMDD`.
    date: String,
    /// `YYYYMMDDTHHMMSSZ` (the `x-amz-date` value).
    pub time: String,
}

impl Stamp {
    /// The current time.
    pub fn now() -> Self {
        Self::at(OffsetDateTime::now_utc())
    }

    /// A given time (converted to UTC).
    pub fn at(when: OffsetDateTime) -> Self {
        let when = when.to_offset(time::UtcOffset::UTC);
        let date = format!(
            "{:04}{:02}{:02}",
            when.year(),
            u8::from(when.month()),
            when.day()
        );
        let time = format!(
            "{date}T{:02}{:02}{:02}Z",
            when.hour(),
            when.minute(),
            when.second()
        );
        Self { date, time }
    }
}

/// The parts of a request that are signed.
pub(super) struct Canonical<'a> {
    /// `GET`, `PUT`, ...
    pub method: &'a str,
    /// The path, already percent-encoded (`/bucket/a%20b`).
    pub path: &'a str,
    /// The canonical query string ([`canonical_query`]).
    pub query: &'a str,
    /// Headers to sign: lowercase names, sorted by name, each name once.
    pub headers: &'a [(&'a str, &'a str)],
    /// The `x-amz-content-sha256` value (hex SHA-256 or [`UNSIGNED_PAYLOAD`]).
    pub payload: &'a str,
}

/// Encodes and sorts query parameters into the canonical form, which is also sent as is.
pub(super) fn canonical_query(params: &[(&str, &str)]) -> String {
    let mut encoded: Vec<(String, String)> = params
        .iter()
        .map(|(name, value)| (encode(name), encode(value)))
        .collect();
    encoded.sort();
    let mut out = String::new();
    for (name, value) in encoded {
        if !out.is_empty() {
            out.push('&');
        }
        out.push_str(&name);
        out.push('=');
        out.push_str(&value);
    }
    out
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

impl Signer<'_> {
    /// `DATE/REGION/s3/aws4_request`.
    fn scope(&self, stamp: &Stamp) -> String {
        format!("{}/{}/s3/aws4_request", stamp.date, self.region)
    }

    /// The `SignedHeaders` list and the hex signature of `request`.
    pub fn sign(&self, stamp: &Stamp, request: &Canonical<'_>) -> (String, String) {
        let mut canonical = String::with_capacity(256);
        let mut signed_headers = String::new();
        for line in [request.method, request.path, request.query] {
            canonical.push_str(line);
            canonical.push('\n');
        }
        for (name, value) in request.headers {
            canonical.push_str(name);
            canonical.push(':');
            canonical.push_str(&value.split_whitespace().collect::<Vec<_>>().join(" "));
            canonical.push('\n');
            if !signed_headers.is_empty() {
                signed_headers.push(';');
            }
            signed_headers.push_str(name);
        }
        canonical.push('\n');
        canonical.push_str(&signed_headers);
        canonical.push('\n');
        canonical.push_str(request.payload);

        let scope = self.scope(stamp);
        let to_sign = format!(
            "{ALGORITHM}\n{}\n{scope}\n{}",
            stamp.time,
            hex::encode(Sha256::digest(canonical.as_bytes()))
        );
        let date_key = hmac(
            format!("AWS4{}", self.secret_key).as_bytes(),
            stamp.date.as_bytes(),
        );
        let region_key = hmac(&date_key, self.region.as_bytes());
        let service_key = hmac(&region_key, b"s3");
        let key = hmac(&service_key, b"aws4_request");
        let signature = hex::encode(hmac(&key, to_sign.as_bytes()));
        (signed_headers, signature)
    }

    /// The `Authorization` header value for `request`.
    pub fn authorization(&self, stamp: &Stamp, request: &Canonical<'_>) -> String {
        let (signed_headers, signature) = self.sign(stamp, request);
        format!(
            "{ALGORITHM} Credential={}/{}, SignedHeaders={signed_headers}, Signature={signature}",
            self.access_key,
            self.scope(stamp)
        )
    }

    /// The query string of a presigned GET of `path` on `host`, valid for `expires` seconds.
    pub fn presign_query(
        &self,
        stamp: &Stamp,
        host: &str,
        path: &str,
        expires: u64,
        session_token: Option<&str>,
    ) -> String {
        let credential = format!("{}/{}", self.access_key, self.scope(stamp));
        let expires = expires.to_string();
        let mut params = vec![
            ("X-Amz-Algorithm", ALGORITHM),
            ("X-Amz-Credential", credential.as_str()),
            ("X-Amz-Date", stamp.time.as_str()),
            ("X-Amz-Expires", expires.as_str()),
            ("X-Amz-SignedHeaders", "host"),
        ];
        if let Some(token) = session_token {
            params.push(("X-Amz-Security-Token", token));
        }
        let query = canonical_query(&params);
        let (_, signature) = self.sign(
            stamp,
            &Canonical {
                method: "GET",
                path,
                query: &query,
                headers: &[("host", host)],
                payload: UNSIGNED_PAYLOAD,
            },
        );
        format!("{query}&X-Amz-Signature={signature}")
    }
}

#[cfg(test)]
mod tests {
    //! The examples of AWS's "Signature Calculations for the Authorization Header" and
    //! "Query String Authentication" pages (Amazon S3 API reference).

    use super::*;
    use time::macros::datetime;

    const SIGNER: Signer<'static> = Signer {
        access_key: "AKIAIOSFODNN7EXAMPLE",
        secret_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        region: "us-east-1",
    };
    const HOST: &str = "examplebucket.s3.amazonaws.com";

    fn stamp() -> Stamp {
        Stamp::at(datetime!(2013-05-24 00:00:00 UTC))
    }

    #[test]
    fn get_object_example() {
        let authorization = SIGNER.authorization(
            &stamp(),
            &Canonical {
                method: "GET",
                path: "/test.txt",
                query: "",
                headers: &[
                    ("host", HOST),
                    ("range", "bytes=0-9"),
                    ("x-amz-content-sha256", EMPTY_SHA256),
                    ("x-amz-date", "20130524T000000Z"),
                ],
                payload: EMPTY_SHA256,
            },
        );
        assert_eq!(
            authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
             SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
             Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    #[test]
    fn put_object_example() {
        let payload = hex::encode(Sha256::digest(b"Welcome to Amazon S3."));
        let (signed, signature) = SIGNER.sign(
            &stamp(),
            &Canonical {
                method: "PUT",
                path: &format!("/{}", encode_path("test$file.text")),
                query: "",
                headers: &[
                    ("date", "Fri, 24 May 2013 00:00:00 GMT"),
                    ("host", HOST),
                    ("x-amz-content-sha256", &payload),
                    ("x-amz-date", "20130524T000000Z"),
                    ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
                ],
                payload: &payload,
            },
        );
        assert_eq!(
            signed,
            "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class"
        );
        assert_eq!(
            signature,
            "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"
        );
    }

    #[test]
    fn list_objects_example() {
        let query = canonical_query(&[("prefix", "J"), ("max-keys", "2")]);
        assert_eq!(query, "max-keys=2&prefix=J");
        let (_, signature) = SIGNER.sign(
            &stamp(),
            &Canonical {
                method: "GET",
                path: "/",
                query: &query,
                headers: &[
                    ("host", HOST),
                    ("x-amz-content-sha256", EMPTY_SHA256),
                    ("x-amz-date", "20130524T000000Z"),
                ],
                payload: EMPTY_SHA256,
            },
        );
        assert_eq!(
            signature,
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"
        );
    }

    #[test]
    fn presigned_get_example() {
        let query = SIGNER.presign_query(&stamp(), HOST, "/test.txt", 86400, None);
        assert_eq!(
            query,
            "X-Amz-Algorithm=AWS4-HMAC-SHA256\
             &X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request\
             &X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host\
             &X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
        );
    }

    #[test]
    fn encoding_keeps_unreserved_characters_only() {
        assert_eq!(encode("a-b_c.d~e/f g+h=%"), "a-b_c.d~e%2Ff%20g%2Bh%3D%25");
        assert_eq!(encode_path("dir/ü x"), "dir/%C3%BC%20x");
    }
}
