//! `WWW-Authenticate` challenges (RFC 7235), as registries send them:
//! `Bearer realm="https://auth/token",service="registry"` or `Basic realm="x"`.

/// One challenge: its scheme (lower case) and parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// `bearer`, `basic` ...
    pub scheme: String,
    /// `(name in lower case, value)`, in order.
    pub params: Vec<(String, String)>,
}

impl Challenge {
    /// The value of parameter `name` (lower case).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Every challenge of every header value given; what cannot be read is skipped.
pub fn parse<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<Challenge> {
    values.into_iter().flat_map(parse_one).collect()
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~/:".contains(c)
}

/// The challenges of one header value.
fn parse_one(value: &str) -> Vec<Challenge> {
    let chars: Vec<char> = value.chars().collect();
    let mut pos = 0;
    let mut out: Vec<Challenge> = Vec::new();
    let skip = |pos: &mut usize, what: &dyn Fn(char) -> bool| {
        while *pos < chars.len() && what(chars[*pos]) {
            *pos += 1;
        }
    };
    let token = |pos: &mut usize| -> String {
        let start = *pos;
        while *pos < chars.len() && is_token_char(chars[*pos]) {
            *pos += 1;
        }
        chars[start..*pos].iter().collect()
    };
    loop {
        skip(&mut pos, &|c| c == ',' || c.is_whitespace());
        let scheme = token(&mut pos);
        if scheme.is_empty() {
            break;
        }
        let mut challenge = Challenge {
            scheme: scheme.to_ascii_lowercase(),
            params: Vec::new(),
        };
        loop {
            skip(&mut pos, &|c| c.is_whitespace());
            let start = pos;
            let name = token(&mut pos);
            skip(&mut pos, &|c| c.is_whitespace());
            if name.is_empty() || chars.get(pos) != Some(&'=') {
                // The start of the next challenge (or the end).
                pos = start;
                break;
            }
            pos += 1;
            skip(&mut pos, &|c| c.is_whitespace());
            let value = if chars.get(pos) == Some(&'"') {
                pos += 1;
                let mut value = String::new();
                while pos < chars.len() && chars[pos] != '"' {
                    if chars[pos] == '\\' && pos + 1 < chars.len() {
                        pos += 1;
                    }
                    value.push(chars[pos]);
                    pos += 1;
                }
                pos += 1;
                value
            } else {
                token(&mut pos)
            };
            challenge.params.push((name.to_ascii_lowercase(), value));
            skip(&mut pos, &|c| c.is_whitespace());
            if chars.get(pos) == Some(&',') {
                pos += 1;
            } else {
                break;
            }
        }
        out.push(challenge);
        if pos >= chars.len() {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_and_basic_challenges_are_read() {
        let found = parse([
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:a/b:pull""#,
        ]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].scheme, "bearer");
        assert_eq!(
            found[0].param("realm"),
            Some("https://auth.docker.io/token")
        );
        assert_eq!(found[0].param("service"), Some("registry.docker.io"));
        assert_eq!(found[0].param("scope"), Some("repository:a/b:pull"));

        let found = parse([r#"Basic realm="Registry Realm", Bearer realm=x , service = "a\"b""#]);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].scheme, "basic");
        assert_eq!(found[0].param("realm"), Some("Registry Realm"));
        assert_eq!(found[1].scheme, "bearer");
        assert_eq!(found[1].param("realm"), Some("x"));
        assert_eq!(found[1].param("service"), Some("a\"b"));

        let found = parse(["Negotiate", "basic"]);
        assert_eq!(
            found.iter().map(|c| c.scheme.as_str()).collect::<Vec<_>>(),
            ["negotiate", "basic"]
        );
        assert!(parse([""]).is_empty());
        assert!(parse([r#"Bearer realm="unterminated"#]).len() == 1);
    }
}
