//! Durations as operators write them (`90s`, `30m`, `12h`, `7d`): a leaf
//! that the settings and the modules they configure both use.

/// Parses `3600`, `90s`, `30m`, `12h` or `7d` into seconds.
pub fn parse_duration_secs(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((at, _)) => text.split_at(at),
        None => (text, ""),
    };
    let value: i64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a duration like 3600, 30m, 12h or 7d"))?;
    let scale = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("`{text}` has an unknown unit (use s, m, h or d)")),
    };
    value
        .checked_mul(scale)
        .ok_or_else(|| format!("`{text}` is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_secs("3600"), Ok(3600));
        assert_eq!(parse_duration_secs("7d"), Ok(604_800));
        assert_eq!(parse_duration_secs("30m"), Ok(1800));
        assert!(parse_duration_secs("7w").is_err());
        assert!(parse_duration_secs("").is_err());
    }
}
