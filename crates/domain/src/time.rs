//! Timestamps as the store keeps them: fixed-width RFC 3339 UTC text with
//! milliseconds (`2024-01-02T03:04:05.678Z`), so that string order is time order.

use time::OffsetDateTime;
use time::macros::format_description;

/// Harbor's zero date, used for "never" (a never-pulled artifact).
pub const ZERO_TIME: &str = "0001-01-01T00:00:00.000Z";

/// Formats an instant in the store's fixed-width form.
pub fn format_timestamp(at: OffsetDateTime) -> String {
    let at = at.to_offset(time::UtcOffset::UTC);
    at.format(format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    ))
    .expect("a UTC instant always formats")
}

/// Reads a timestamp in the store's form (any RFC 3339 text).
pub fn parse_timestamp(text: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()
}

/// The current instant in the store's fixed-width form.
pub fn now() -> String {
    format_timestamp(OffsetDateTime::now_utc())
}

/// The current time in unix seconds (JWT `iat`/`exp` form).
pub fn unix_now() -> i64 {
    OffsetDateTime::now_utc().unix_timestamp()
}

/// The current time in unix milliseconds.
pub fn unix_millis() -> i64 {
    let now = OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
    i64::try_from(now).unwrap_or(i64::MAX)
}

/// The instant `seconds` from now (negative for the past), in the store's form.
pub fn now_plus_seconds(seconds: i64) -> String {
    format_timestamp(OffsetDateTime::now_utc() + time::Duration::seconds(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_fixed_width_utc_with_millis() {
        let at = OffsetDateTime::from_unix_timestamp_nanos(1_700_000_000_123_456_789).unwrap();
        assert_eq!(format_timestamp(at), "2023-11-14T22:13:20.123Z");
        assert_eq!(now().len(), ZERO_TIME.len());
        assert_eq!(
            parse_timestamp(&format_timestamp(at)).map(|t| t.unix_timestamp()),
            Some(1_700_000_000)
        );
        assert_eq!(parse_timestamp("yesterday"), None);
    }
}
