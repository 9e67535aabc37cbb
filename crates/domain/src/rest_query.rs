//! generator-rest's request grammar, without I/O: querymen list parameters
//! (`q`, `fields`, `page`, `limit`, `sort`), bodymen-style field rules, and the
//! keyword normalization behind `q` (generator-rest.md §6, §7).
//!
//! A failed rule is a [`RuleFailure`]; the server renders it in the reference's
//! rich-param shape (`{name, param, value?, <rule>: <arg>, valid, message}`).

/// Default and bounds of `page` (querymen).
pub const PAGE_MAX: f64 = 30.0;
/// Default and bounds of `limit` (querymen).
pub const LIMIT_MAX: f64 = 100.0;
/// The default `limit`.
pub const LIMIT_DEFAULT: u32 = 30;

/// The offending value of a failed rule, as the reference echoes it.
#[derive(Debug, Clone, PartialEq)]
pub enum RuleValue {
    /// A string input.
    Text(String),
    /// A numeric input (`NaN` when the input was not a number).
    Number(f64),
}

/// The argument of a failed rule, echoed under the rule's name.
#[derive(Debug, Clone, PartialEq)]
pub enum RuleArg {
    /// `required: true`.
    Required,
    /// `match: <regexp>` (a JS RegExp serialises as `{}`).
    Match,
    /// `minlength: n`.
    MinLength(u32),
    /// `maxlength: n`.
    MaxLength(u32),
    /// `min: n`.
    Min(f64),
    /// `max: n`.
    Max(f64),
    /// `enum: [..]`.
    Enum(&'static [&'static str]),
}

impl RuleArg {
    /// The rule's name: the `name` key of the error and the key of its argument.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Required => "required",
            Self::Match => "match",
            Self::MinLength(_) => "minlength",
            Self::MaxLength(_) => "maxlength",
            Self::Min(_) => "min",
            Self::Max(_) => "max",
            Self::Enum(_) => "enum",
        }
    }
}

/// The first rule an input broke.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleFailure {
    /// The parameter or body field.
    pub param: String,
    /// The value as checked (absent for `required` on a missing input).
    pub value: Option<RuleValue>,
    /// The rule and its argument.
    pub rule: RuleArg,
    /// The reference's message.
    pub message: String,
}

impl RuleFailure {
    fn required(param: &str, value: Option<RuleValue>) -> Self {
        Self {
            param: param.into(),
            value,
            rule: RuleArg::Required,
            message: format!("{param} is required"),
        }
    }
}

/// The e-mail pattern of generator-rest's user model, as its message shows it.
pub const EMAIL_PATTERN: &str = r"/^\S+@\S+\.\S+$/";

/// Whether `email` matches `^\S+@\S+\.\S+$`.
fn email_matches(email: &str) -> bool {
    if email.is_empty() || email.chars().any(char::is_whitespace) {
        return false;
    }
    // Some '@' with at least one character before it, and after it a '.' with
    // at least one character on each side.
    email.char_indices().any(|(at, c)| {
        c == '@' && at > 0 && {
            let rest = &email[at + 1..];
            rest.char_indices()
                .any(|(dot, d)| d == '.' && dot > 0 && dot + 1 < rest.len())
        }
    })
}

/// Checks a user e-mail as generator-rest does: trimmed and lower-cased first,
/// then `match` (so `""` fails it), then `required`. Returns the normalized e-mail.
pub fn validate_email(param: &str, raw: Option<&str>) -> Result<String, RuleFailure> {
    let Some(raw) = raw else {
        return Err(RuleFailure::required(param, None));
    };
    let email = raw.trim().to_lowercase();
    if !email_matches(&email) {
        return Err(RuleFailure {
            param: param.into(),
            value: Some(RuleValue::Text(email)),
            rule: RuleArg::Match,
            message: format!("{param} must match regular expression {EMAIL_PATTERN}"),
        });
    }
    too_long(param, &email, MAX_EMAIL_CHARS)?;
    Ok(email)
}

/// The longest user e-mail, in characters (Harbor's `maxLength` on the same column).
pub const MAX_EMAIL_CHARS: u32 = 255;
/// The longest user name, in characters (Harbor's bound on the real name it is).
pub const MAX_NAME_CHARS: u32 = 255;

/// `maxlength: max` on an already normalized value.
fn too_long(param: &str, value: &str, max: u32) -> Result<(), RuleFailure> {
    if value.chars().count() > max as usize {
        return Err(RuleFailure {
            param: param.into(),
            value: Some(RuleValue::Text(value.into())),
            rule: RuleArg::MaxLength(max),
            message: format!("{param} must have length lower than or equal to {max}"),
        });
    }
    Ok(())
}

/// Checks an optional, already trimmed user name: at most [`MAX_NAME_CHARS`].
pub fn validate_name(param: &str, name: Option<String>) -> Result<Option<String>, RuleFailure> {
    if let Some(name) = &name {
        too_long(param, name, MAX_NAME_CHARS)?;
    }
    Ok(name)
}

/// A name from elsewhere (an identity provider) cut to [`MAX_NAME_CHARS`].
pub fn bounded_name(name: &str) -> String {
    name.chars().take(MAX_NAME_CHARS as usize).collect()
}

/// Checks a password: required (an empty one too), at least 6 characters.
pub fn validate_password(param: &str, raw: Option<&str>) -> Result<String, RuleFailure> {
    required_text(param, raw)?;
    let password = raw.unwrap_or_default();
    if password.chars().count() < 6 {
        return Err(RuleFailure {
            param: param.into(),
            value: Some(RuleValue::Text(password.into())),
            rule: RuleArg::MinLength(6),
            message: format!("{param} must have length greater than or equal to 6"),
        });
    }
    Ok(password.into())
}

/// A required string field: missing gives `required` without a value, `""` with one.
pub fn required_text(param: &str, raw: Option<&str>) -> Result<String, RuleFailure> {
    match raw {
        None => Err(RuleFailure::required(param, None)),
        Some("") => Err(RuleFailure::required(
            param,
            Some(RuleValue::Text(String::new())),
        )),
        Some(text) => Ok(text.into()),
    }
}

/// The roles `POST /users` accepts.
pub const ROLES: &[&str] = &["user", "admin"];

/// Checks `role`: absent or empty is `user`; returns whether it is `admin`.
pub fn validate_role(raw: Option<&str>) -> Result<bool, RuleFailure> {
    match raw {
        None | Some("") | Some("user") => Ok(false),
        Some("admin") => Ok(true),
        Some(other) => Err(RuleFailure {
            param: "role".into(),
            value: Some(RuleValue::Text(other.into())),
            rule: RuleArg::Enum(ROLES),
            message: format!("role must be one of: {}", ROLES.join(", ")),
        }),
    }
}

/// One key of a `sort` list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SortKey {
    /// The wire field name (`createdAt`, `name` ...).
    pub field: String,
    /// Descending (`-field`).
    pub descending: bool,
}

/// A `fields` projection on wire names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Projection {
    /// No `fields`: every view key.
    #[default]
    All,
    /// Only `id` and these.
    Include(Vec<String>),
    /// Every key but these.
    Exclude(Vec<String>),
}

impl Projection {
    /// Whether the view key `key` survives the projection (`id` always, unless excluded).
    pub fn keeps(&self, key: &str) -> bool {
        match self {
            Self::All => true,
            Self::Include(keys) => key == "id" || keys.iter().any(|k| k == key),
            Self::Exclude(keys) => !keys.iter().any(|k| k == key),
        }
    }
}

/// The list parameters of a generator-rest index route, validated.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ListQuery {
    /// The normalized `q` (lower-case words separated by single spaces), if any.
    pub q: Option<String>,
    /// The `fields` projection.
    pub fields: Projection,
    /// 1-based page (`page`), at most 30.
    pub page: u32,
    /// Page size (`limit`), 1 to 100.
    pub limit: u32,
    /// The `sort` keys, in order; `-createdAt` by default.
    pub sort: Vec<SortKey>,
}

impl ListQuery {
    /// Rows to skip.
    pub fn offset(&self) -> u32 {
        self.limit * (self.page - 1)
    }

    /// Validates query-string pairs as querymen's default schema does: values
    /// trimmed, `''` absent, other keys ignored; `q`, `fields`, `page`, `limit`,
    /// `sort` in that order, first failure only.
    pub fn parse(pairs: &[(String, String)]) -> Result<Self, RuleFailure> {
        let values = |key: &str| -> Vec<&str> {
            pairs
                .iter()
                .filter(|(k, _)| k == key)
                .map(|(_, v)| v.trim())
                .filter(|v| !v.is_empty())
                .collect()
        };
        let q = {
            let given = values("q");
            (!given.is_empty()).then(|| normalize_keywords(&given.join(",")))
        };
        let fields = parse_fields(&values("fields"));
        let page = parse_bounded("page", &values("page"), 1.0, PAGE_MAX, 1)?;
        let limit = parse_bounded("limit", &values("limit"), 1.0, LIMIT_MAX, LIMIT_DEFAULT)?;
        let mut sort = parse_sort(&values("sort"));
        if sort.is_empty() {
            sort.push(SortKey {
                field: "createdAt".into(),
                descending: true,
            });
        }
        Ok(Self {
            q,
            fields,
            page,
            limit,
            sort,
        })
    }
}

/// Comma items of every occurrence of a list parameter, with their sign.
fn signed_items<'a>(given: &[&'a str]) -> impl Iterator<Item = (bool, &'a str)> {
    given
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .filter_map(|item| {
            let (minus, name) = match item.as_bytes()[0] {
                b'-' => (true, &item[1..]),
                b'+' => (false, &item[1..]),
                _ => (false, item),
            };
            (!name.is_empty()).then_some((minus, name))
        })
}

/// `fields`: `-f` excludes, `f`/`+f` includes. A list mixing both keeps the
/// inclusions (MongoDB refuses the mix; see docs/compatibility.md).
fn parse_fields(given: &[&str]) -> Projection {
    let (mut include, mut exclude) = (Vec::new(), Vec::new());
    for (minus, name) in signed_items(given) {
        if minus {
            exclude.push(name.to_string());
        } else {
            include.push(name.to_string());
        }
    }
    if !include.is_empty() {
        Projection::Include(include)
    } else if !exclude.is_empty() {
        Projection::Exclude(exclude)
    } else {
        Projection::All
    }
}

fn parse_sort(given: &[&str]) -> Vec<SortKey> {
    signed_items(given)
        .map(|(descending, field)| SortKey {
            field: field.into(),
            descending,
        })
        .collect()
}

/// A number parameter: `max` before `min`, NaN (garbage or a repeated key)
/// failing `max` with a null value; decimals are truncated after the checks.
fn parse_bounded(
    param: &str,
    given: &[&str],
    min: f64,
    max: f64,
    default: u32,
) -> Result<u32, RuleFailure> {
    let number = match given {
        [] => return Ok(default),
        [one] => js_number(one),
        _ => f64::NAN,
    };
    // NaN fails `max`, as it does in querymen.
    if number.is_nan() || number > max {
        return Err(RuleFailure {
            param: param.into(),
            value: Some(RuleValue::Number(number)),
            rule: RuleArg::Max(max),
            message: format!("{param} must be lower than or equal to {max}"),
        });
    }
    if number < min {
        return Err(RuleFailure {
            param: param.into(),
            value: Some(RuleValue::Number(number)),
            rule: RuleArg::Min(min),
            message: format!("{param} must be greater than or equal to {min}"),
        });
    }
    Ok(number as u32)
}

/// JavaScript's `Number(text)` for a trimmed, non-empty string.
pub fn js_number(text: &str) -> f64 {
    let text = text.trim();
    let radix = |prefix: &str, radix: u32| {
        text.strip_prefix(prefix)
            .or_else(|| text.strip_prefix(&prefix.to_uppercase()))
            .map(|digits| {
                u64::from_str_radix(digits, radix)
                    .map(|n| n as f64)
                    .unwrap_or(f64::NAN)
            })
    };
    if let Some(n) = radix("0x", 16)
        .or_else(|| radix("0o", 8))
        .or_else(|| radix("0b", 2))
    {
        return n;
    }
    match text {
        "Infinity" | "+Infinity" => return f64::INFINITY,
        "-Infinity" => return f64::NEG_INFINITY,
        _ => {}
    }
    // Rust also reads `inf` and `nan`; JavaScript does not.
    if text
        .chars()
        .any(|c| !(c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-')))
    {
        return f64::NAN;
    }
    text.parse().unwrap_or(f64::NAN)
}

/// Normalizes text for keyword search as generator-rest does (lodash
/// `kebabCase` with spaces): Latin accents stripped, words split on
/// punctuation, case changes and letter/digit boundaries, lower-cased and
/// joined by one space. `Hello World!` → `hello world`, `fooBar` → `foo bar`,
/// `user1` → `user 1`, `a@a.com` → `a a com`.
pub fn normalize_keywords(text: &str) -> String {
    #[derive(Clone, Copy, PartialEq)]
    enum Class {
        Upper,
        Lower,
        Digit,
        Other,
    }
    let class = |c: char| {
        if c.is_ascii_digit() || c.is_numeric() {
            Class::Digit
        } else if c.is_uppercase() {
            Class::Upper
        } else if c.is_alphabetic() {
            Class::Lower
        } else {
            Class::Other
        }
    };
    let chars: Vec<char> = text.chars().flat_map(deburr).collect();
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let this = class(c);
        if this == Class::Other {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            continue;
        }
        if let Some(&prev) = i.checked_sub(1).and_then(|p| chars.get(p)) {
            let prev = class(prev);
            let next = chars.get(i + 1).map(|&n| class(n));
            let boundary = match (prev, this) {
                (Class::Other, _) => false,
                (Class::Digit, Class::Upper | Class::Lower)
                | (Class::Upper | Class::Lower, Class::Digit) => true,
                (Class::Lower, Class::Upper) => true,
                // `XMLHttp`: the last capital of a run starts the next word.
                (Class::Upper, Class::Upper) => next == Some(Class::Lower),
                _ => false,
            };
            if boundary && !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
        }
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words.join(" ")
}

/// The keywords column of a row: each value normalized, one per line.
pub fn keywords_of<'a>(values: impl IntoIterator<Item = Option<&'a str>>) -> String {
    values
        .into_iter()
        .flatten()
        .map(normalize_keywords)
        .filter(|k| !k.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// lodash `deburr` for Latin-1 Supplement and Latin Extended-A letters.
fn deburr(c: char) -> impl Iterator<Item = char> {
    let plain: &str = match c {
        'À'..='Å' => "A",
        'à'..='å' => "a",
        'Ç' => "C",
        'ç' => "c",
        'È'..='Ë' => "E",
        'è'..='ë' => "e",
        'Ì'..='Ï' => "I",
        'ì'..='ï' => "i",
        'Ð' => "D",
        'ð' => "d",
        'Ñ' => "N",
        'ñ' => "n",
        'Ò'..='Ö' | 'Ø' => "O",
        'ò'..='ö' | 'ø' => "o",
        'Ù'..='Ü' => "U",
        'ù'..='ü' => "u",
        'Ý' => "Y",
        'ý' | 'ÿ' => "y",
        'Æ' => "Ae",
        'æ' => "ae",
        'Þ' => "Th",
        'þ' => "th",
        'ß' => "ss",
        'Ā' | 'Ă' | 'Ą' => "A",
        'ā' | 'ă' | 'ą' => "a",
        'Ć' | 'Ĉ' | 'Ċ' | 'Č' => "C",
        'ć' | 'ĉ' | 'ċ' | 'č' => "c",
        'Ď' | 'Đ' => "D",
        'ď' | 'đ' => "d",
        'Ē' | 'Ĕ' | 'Ė' | 'Ę' | 'Ě' => "E",
        'ē' | 'ĕ' | 'ė' | 'ę' | 'ě' => "e",
        'Ĝ' | 'Ğ' | 'Ġ' | 'Ģ' => "G",
        'ĝ' | 'ğ' | 'ġ' | 'ģ' => "g",
        'Ĥ' | 'Ħ' => "H",
        'ĥ' | 'ħ' => "h",
        'Ĩ' | 'Ī' | 'Ĭ' | 'Į' | 'İ' => "I",
        'ĩ' | 'ī' | 'ĭ' | 'į' | 'ı' => "i",
        'Ĵ' => "J",
        'ĵ' => "j",
        'Ķ' => "K",
        'ķ' | 'ĸ' => "k",
        'Ĺ' | 'Ļ' | 'Ľ' | 'Ŀ' | 'Ł' => "L",
        'ĺ' | 'ļ' | 'ľ' | 'ŀ' | 'ł' => "l",
        'Ń' | 'Ņ' | 'Ň' | 'Ŋ' => "N",
        'ń' | 'ņ' | 'ň' | 'ŋ' => "n",
        'Ō' | 'Ŏ' | 'Ő' => "O",
        'ō' | 'ŏ' | 'ő' => "o",
        'Ŕ' | 'Ŗ' | 'Ř' => "R",
        'ŕ' | 'ŗ' | 'ř' => "r",
        'Ś' | 'Ŝ' | 'Ş' | 'Š' => "S",
        'ś' | 'ŝ' | 'ş' | 'š' | 'ſ' => "s",
        'Ţ' | 'Ť' | 'Ŧ' => "T",
        'ţ' | 'ť' | 'ŧ' => "t",
        'Ũ' | 'Ū' | 'Ŭ' | 'Ů' | 'Ű' | 'Ų' => "U",
        'ũ' | 'ū' | 'ŭ' | 'ů' | 'ű' | 'ų' => "u",
        'Ŵ' => "W",
        'ŵ' => "w",
        'Ŷ' | 'Ÿ' => "Y",
        'ŷ' => "y",
        'Ź' | 'Ż' | 'Ž' => "Z",
        'ź' | 'ż' | 'ž' => "z",
        'Ĳ' => "IJ",
        'ĳ' => "ij",
        'Œ' => "Oe",
        'œ' => "oe",
        'ŉ' => "'n",
        _ => "",
    };
    let (one, many) = if plain.is_empty() {
        // Combining diacritical marks are dropped, as lodash does.
        let combining = ('\u{300}'..='\u{36f}').contains(&c);
        ((!combining).then_some(c), None)
    } else {
        (None, Some(plain.chars()))
    };
    one.into_iter().chain(many.into_iter().flatten())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(query: &[(&str, &str)]) -> Vec<(String, String)> {
        query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn keyword_normalization_matches_the_reference_examples() {
        assert_eq!(normalize_keywords("Hello World!"), "hello world");
        assert_eq!(normalize_keywords("fooBar"), "foo bar");
        assert_eq!(normalize_keywords("user1"), "user 1");
        assert_eq!(normalize_keywords("João Silva"), "joao silva");
        assert_eq!(normalize_keywords("a@a.com"), "a a com");
        assert_eq!(normalize_keywords("test@example.com"), "test example com");
        assert_eq!(normalize_keywords("XMLHttpRequest"), "xml http request");
        assert_eq!(normalize_keywords("!!!"), "");
        assert_eq!(
            normalize_keywords("snake_case-and  spaces"),
            "snake case and spaces"
        );
        assert_eq!(normalize_keywords("Straße"), "strasse");
    }

    #[test]
    fn keywords_join_values_one_per_line() {
        assert_eq!(
            keywords_of([Some("a@a.com"), Some("User"), None]),
            "a a com\nuser"
        );
        assert_eq!(keywords_of([Some("!!"), None]), "");
    }

    #[test]
    fn list_defaults() {
        let q = ListQuery::parse(&pairs(&[("access_token", "x"), ("page", "")])).unwrap();
        assert_eq!(q.page, 1);
        assert_eq!(q.limit, 30);
        assert_eq!(q.offset(), 0);
        assert_eq!(q.q, None);
        assert_eq!(q.fields, Projection::All);
        assert_eq!(
            q.sort,
            vec![SortKey {
                field: "createdAt".into(),
                descending: true
            }]
        );
    }

    #[test]
    fn list_values() {
        let q = ListQuery::parse(&pairs(&[
            ("page", " 2 "),
            ("limit", "1e1"),
            ("q", "Foo Bar"),
            ("sort", "name,-createdAt,+email"),
            ("fields", "name,-picture"),
        ]))
        .unwrap();
        assert_eq!((q.page, q.limit, q.offset()), (2, 10, 10));
        assert_eq!(q.q.as_deref(), Some("foo bar"));
        assert_eq!(q.sort.len(), 3);
        assert!(!q.sort[0].descending && q.sort[1].descending && !q.sort[2].descending);
        assert_eq!(q.fields, Projection::Include(vec!["name".into()]));
        assert!(q.fields.keeps("id") && q.fields.keeps("name") && !q.fields.keeps("email"));
        let q = ListQuery::parse(&pairs(&[("fields", "-name"), ("limit", "0x2")])).unwrap();
        assert!(!q.fields.keeps("name") && q.fields.keeps("id"));
        assert_eq!(q.limit, 2);
    }

    #[test]
    fn list_bounds_check_max_before_min() {
        let err = ListQuery::parse(&pairs(&[("page", "31")])).unwrap_err();
        assert_eq!(err.rule, RuleArg::Max(30.0));
        assert_eq!(err.value, Some(RuleValue::Number(31.0)));
        assert_eq!(err.message, "page must be lower than or equal to 30");
        let err = ListQuery::parse(&pairs(&[("page", "0")])).unwrap_err();
        assert_eq!(err.rule, RuleArg::Min(1.0));
        assert_eq!(err.message, "page must be greater than or equal to 1");
        let err = ListQuery::parse(&pairs(&[("limit", "abc")])).unwrap_err();
        assert_eq!(err.param, "limit");
        assert_eq!(err.rule, RuleArg::Max(100.0));
        assert!(matches!(err.value, Some(RuleValue::Number(n)) if n.is_nan()));
        let err = ListQuery::parse(&pairs(&[("limit", "2"), ("limit", "3")])).unwrap_err();
        assert_eq!(err.rule, RuleArg::Max(100.0));
        let err = ListQuery::parse(&pairs(&[("page", "x"), ("limit", "0")])).unwrap_err();
        assert_eq!(err.param, "page", "page is checked before limit");
        assert!(ListQuery::parse(&pairs(&[("limit", "inf")])).is_err());
    }

    #[test]
    fn js_numbers() {
        assert_eq!(js_number("10"), 10.0);
        assert_eq!(js_number("1.5"), 1.5);
        assert_eq!(js_number("0x1f"), 31.0);
        assert_eq!(js_number("-Infinity"), f64::NEG_INFINITY);
        assert!(js_number("nan").is_nan());
        assert!(js_number("1,2").is_nan());
    }

    #[test]
    fn email_rules() {
        assert_eq!(
            validate_email("email", Some(" A@B.com ")).unwrap(),
            "a@b.com"
        );
        let err = validate_email("email", Some("invalid")).unwrap_err();
        assert_eq!(err.rule, RuleArg::Match);
        assert_eq!(
            err.message,
            r"email must match regular expression /^\S+@\S+\.\S+$/"
        );
        let err = validate_email("email", Some("")).unwrap_err();
        assert_eq!(err.rule, RuleArg::Match, "match runs before required");
        assert_eq!(err.value, Some(RuleValue::Text(String::new())));
        let err = validate_email("email", None).unwrap_err();
        assert_eq!((err.rule, err.value), (RuleArg::Required, None));
        for bad in ["a@b", "@b.c", "a@.c", "a@b.", "a b@c.d"] {
            assert!(validate_email("email", Some(bad)).is_err(), "{bad}");
        }
        assert!(validate_email("email", Some("a@b@c.d")).is_ok());
    }

    #[test]
    fn password_and_role_rules() {
        assert_eq!(
            validate_password("password", Some("123456")).unwrap(),
            "123456"
        );
        let err = validate_password("password", Some("123")).unwrap_err();
        assert_eq!(err.rule, RuleArg::MinLength(6));
        assert_eq!(
            err.message,
            "password must have length greater than or equal to 6"
        );
        let err = validate_password("password", Some("")).unwrap_err();
        assert_eq!(err.rule, RuleArg::Required);
        assert_eq!(err.value, Some(RuleValue::Text(String::new())));
        assert!(!validate_role(None).unwrap());
        assert!(!validate_role(Some("")).unwrap());
        assert!(validate_role(Some("admin")).unwrap());
        let err = validate_role(Some("invalid")).unwrap_err();
        assert_eq!(err.message, "role must be one of: user, admin");
        assert_eq!(err.rule, RuleArg::Enum(ROLES));
    }
}
