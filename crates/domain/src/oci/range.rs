//! `Content-Range` of upload chunks and `Range` of blob downloads.

/// Parses an upload chunk's `Content-Range`: `<start>-<end>` (inclusive), also
/// accepting a `bytes ` / `bytes=` prefix and a `/<total>` suffix.
pub fn parse_content_range(value: &str) -> Option<(u64, u64)> {
    let value = value.trim();
    let value = value
        .strip_prefix("bytes ")
        .or_else(|| value.strip_prefix("bytes="))
        .unwrap_or(value);
    let value = value.split_once('/').map_or(value, |(range, _)| range);
    let (start, end) = value.split_once('-')?;
    let start: u64 = start.trim().parse().ok()?;
    let end: u64 = end.trim().parse().ok()?;
    (start <= end).then_some((start, end))
}

/// A satisfiable byte range of a blob of `size` bytes, as `[start, end]` inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteRange {
    /// The range to send.
    Satisfiable(u64, u64),
    /// Outside the blob: 416.
    Unsatisfiable,
    /// Not a single `bytes=` range: ignore it and send everything.
    Ignored,
}

/// Interprets a request's `Range` header against a blob of `size` bytes.
pub fn parse_range(value: &str, size: u64) -> ByteRange {
    let Some(spec) = value.trim().strip_prefix("bytes=") else {
        return ByteRange::Ignored;
    };
    if spec.contains(',') {
        return ByteRange::Ignored;
    }
    let Some((start, end)) = spec.split_once('-') else {
        return ByteRange::Ignored;
    };
    let (start, end) = (start.trim(), end.trim());
    if start.is_empty() {
        let Ok(suffix) = end.parse::<u64>() else {
            return ByteRange::Ignored;
        };
        if suffix == 0 || size == 0 {
            return ByteRange::Unsatisfiable;
        }
        return ByteRange::Satisfiable(size.saturating_sub(suffix), size - 1);
    }
    let Ok(start) = start.parse::<u64>() else {
        return ByteRange::Ignored;
    };
    let end = if end.is_empty() {
        u64::MAX
    } else {
        match end.parse::<u64>() {
            Ok(e) if e >= start => e,
            _ => return ByteRange::Ignored,
        }
    };
    if start >= size {
        return ByteRange::Unsatisfiable;
    }
    ByteRange::Satisfiable(start, end.min(size - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ranges() {
        assert_eq!(parse_content_range("0-1023"), Some((0, 1023)));
        assert_eq!(parse_content_range("bytes 5-9/100"), Some((5, 9)));
        assert_eq!(parse_content_range("bytes=5-9"), Some((5, 9)));
        assert_eq!(parse_content_range("9-5"), None);
        assert_eq!(parse_content_range("x-5"), None);
        assert_eq!(parse_content_range(""), None);
    }

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-9", 100), ByteRange::Satisfiable(0, 9));
        assert_eq!(
            parse_range("bytes=90-", 100),
            ByteRange::Satisfiable(90, 99)
        );
        assert_eq!(
            parse_range("bytes=-10", 100),
            ByteRange::Satisfiable(90, 99)
        );
        assert_eq!(
            parse_range("bytes=50-500", 100),
            ByteRange::Satisfiable(50, 99)
        );
        assert_eq!(parse_range("bytes=100-", 100), ByteRange::Unsatisfiable);
        assert_eq!(parse_range("bytes=0-1,5-6", 100), ByteRange::Ignored);
        assert_eq!(parse_range("items=0-1", 100), ByteRange::Ignored);
        assert_eq!(parse_range("bytes=5-1", 100), ByteRange::Ignored);
    }
}
