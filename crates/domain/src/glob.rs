//! Doublestar patterns (Harbor's immutable tag and retention selectors), matched
//! in time linear in the pattern and the text.
//!
//! Syntax: `*` any run of characters but `/`; `**` any run including `/` (and
//! `**/` also no directory at all, so `**/app` matches `app`); `?` one character
//! but `/`; `[abc]`, `[a-z]`, `[!a]` or `[^a]` one character of (or not of) a
//! class; `{a,b}` one of the alternatives, which may nest; `\x` the character
//! `x`; everything else itself.
//!
//! A pattern compiles once to a small program of character tests and jumps,
//! which [`Glob::matches`] runs over the text keeping the set of live program
//! positions (a Thompson simulation): no backtracking, so a pattern such as
//! `*a*a*a...b` costs what a plain one does.

use std::fmt;

/// The longest pattern accepted, in characters.
pub const MAX_PATTERN_LEN: usize = 256;

/// How deeply `{...}` groups may nest.
const MAX_NESTING: usize = 8;

/// A compiled doublestar pattern.
#[derive(Clone, PartialEq, Eq)]
pub struct Glob {
    pattern: String,
    program: Vec<Inst>,
}

/// Why a pattern does not compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobError(String);

impl fmt::Display for GlobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GlobError {}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Inst {
    /// This character.
    Char(char),
    /// Any character but `/`.
    NotSlash,
    /// Any character.
    Any,
    /// A character in (or, negated, not in) the ranges; never `/`.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    /// Continue at both positions.
    Split(usize, usize),
    /// Continue at this position.
    Jump(usize),
    /// The pattern matched.
    Match,
}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Glob({:?})", self.pattern)
    }
}

impl Glob {
    /// Compiles `pattern`; refuses one longer than [`MAX_PATTERN_LEN`]
    /// characters, an unclosed `[` or `{`, or groups nested too deeply.
    pub fn new(pattern: &str) -> Result<Self, GlobError> {
        let chars: Vec<char> = pattern.chars().collect();
        if chars.len() > MAX_PATTERN_LEN {
            return Err(GlobError(format!(
                "a pattern has at most {MAX_PATTERN_LEN} characters"
            )));
        }
        let mut compiler = Compiler {
            chars: &chars,
            at: 0,
            program: Vec::new(),
        };
        compiler.sequence(0, false)?;
        if compiler.at < chars.len() {
            // Only a `,` or `}` outside a group stops a top-level sequence:
            // they are literal there, as in doublestar.
            return Err(GlobError(format!(
                "unexpected {:?} in pattern {pattern:?}",
                chars[compiler.at]
            )));
        }
        compiler.program.push(Inst::Match);
        Ok(Self {
            pattern: pattern.to_owned(),
            program: compiler.program,
        })
    }

    /// A pattern that matches exactly `text`, whatever its characters.
    pub fn literal(text: &str) -> Self {
        let mut program: Vec<Inst> = text.chars().map(Inst::Char).collect();
        program.push(Inst::Match);
        Self {
            pattern: text.to_owned(),
            program,
        }
    }

    /// The pattern as given.
    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    /// Whether the whole of `text` matches.
    pub fn matches(&self, text: &str) -> bool {
        self.run(text).0
    }

    /// Whether `text` matches, and how many program positions were visited:
    /// at most the program's length for each character of `text`, and once more.
    fn run(&self, text: &str) -> (bool, usize) {
        let len = self.program.len();
        let mut visited = 0;
        let mut current = States::new(len);
        let mut next = States::new(len);
        self.add(&mut current, 0);
        for c in text.chars() {
            visited += current.list.len();
            if current.list.is_empty() {
                return (false, visited);
            }
            next.clear();
            for index in 0..current.list.len() {
                let pc = current.list[index];
                let advances = match &self.program[pc] {
                    Inst::Char(want) => *want == c,
                    Inst::NotSlash => c != '/',
                    Inst::Any => true,
                    Inst::Class { negated, ranges } => {
                        c != '/' && ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
                    }
                    Inst::Split(..) | Inst::Jump(_) | Inst::Match => false,
                };
                if advances {
                    self.add(&mut next, pc + 1);
                }
            }
            std::mem::swap(&mut current, &mut next);
        }
        visited += current.list.len();
        let matched = current
            .list
            .iter()
            .any(|&pc| self.program[pc] == Inst::Match);
        (matched, visited)
    }

    /// Adds `pc` and every position its jumps reach to `states`.
    fn add(&self, states: &mut States, pc: usize) {
        let mut stack = vec![pc];
        while let Some(pc) = stack.pop() {
            if !states.insert(pc) {
                continue;
            }
            match self.program[pc] {
                Inst::Split(a, b) => {
                    stack.push(b);
                    stack.push(a);
                }
                Inst::Jump(to) => stack.push(to),
                _ => {}
            }
        }
    }
}

/// A set of program positions, in insertion order.
struct States {
    list: Vec<usize>,
    seen: Vec<bool>,
}

impl States {
    fn new(len: usize) -> Self {
        Self {
            list: Vec::with_capacity(len),
            seen: vec![false; len],
        }
    }

    fn insert(&mut self, pc: usize) -> bool {
        if self.seen[pc] {
            return false;
        }
        self.seen[pc] = true;
        self.list.push(pc);
        true
    }

    fn clear(&mut self) {
        for &pc in &self.list {
            self.seen[pc] = false;
        }
        self.list.clear();
    }
}

struct Compiler<'a> {
    chars: &'a [char],
    at: usize,
    program: Vec<Inst>,
}

impl Compiler<'_> {
    /// Compiles items up to the end, or (inside a group) up to a `,` or `}`.
    fn sequence(&mut self, depth: usize, in_group: bool) -> Result<(), GlobError> {
        while let Some(&c) = self.chars.get(self.at) {
            match c {
                ',' | '}' if in_group => return Ok(()),
                '*' => self.star(),
                '?' => {
                    self.at += 1;
                    self.program.push(Inst::NotSlash);
                }
                '[' => self.class()?,
                '{' => self.group(depth + 1)?,
                '\\' => {
                    self.at += 1;
                    let escaped = self.chars.get(self.at).copied().unwrap_or('\\');
                    self.at += 1;
                    self.program.push(Inst::Char(escaped));
                }
                _ => {
                    self.at += 1;
                    self.program.push(Inst::Char(c));
                }
            }
        }
        Ok(())
    }

    /// `*`, `**` or `**/`: a skippable loop over one character test.
    fn star(&mut self) {
        let double = self.chars.get(self.at + 1) == Some(&'*');
        while self.chars.get(self.at) == Some(&'*') {
            self.at += 1; // `***` is `**`
        }
        let test = if double { Inst::Any } else { Inst::NotSlash };
        let start = self.program.len();
        if double && self.chars.get(self.at) == Some(&'/') {
            // `**/`: no directory at all, or any run that ends in `/`.
            self.at += 1;
            let after = start + 5;
            self.program.extend([
                Inst::Split(start + 1, after),
                Inst::Split(start + 2, start + 4),
                test,
                Inst::Jump(start + 1),
                Inst::Char('/'),
            ]);
        } else {
            self.program
                .extend([Inst::Split(start + 1, start + 3), test, Inst::Jump(start)]);
        }
    }

    /// `[...]`: ranges, `!` or `^` first to negate, `\` to escape.
    fn class(&mut self) -> Result<(), GlobError> {
        let open = self.at;
        self.at += 1;
        let negated = matches!(self.chars.get(self.at), Some('!' | '^'));
        if negated {
            self.at += 1;
        }
        let mut ranges = Vec::new();
        let mut first = true;
        loop {
            let Some(&c) = self.chars.get(self.at) else {
                return Err(GlobError(format!(
                    "unclosed '[' at character {} of the pattern",
                    open + 1
                )));
            };
            if c == ']' && !first {
                self.at += 1;
                break;
            }
            first = false;
            let lo = self.class_char();
            let hi = if self.chars.get(self.at) == Some(&'-')
                && self.chars.get(self.at + 1).is_some_and(|&n| n != ']')
            {
                self.at += 1;
                self.class_char()
            } else {
                lo
            };
            if hi < lo {
                return Err(GlobError(format!("invalid range {lo}-{hi} in a class")));
            }
            ranges.push((lo, hi));
        }
        self.program.push(Inst::Class { negated, ranges });
        Ok(())
    }

    fn class_char(&mut self) -> char {
        let mut c = self.chars[self.at];
        self.at += 1;
        if c == '\\'
            && let Some(&escaped) = self.chars.get(self.at)
        {
            c = escaped;
            self.at += 1;
        }
        c
    }

    /// `{a,b,...}`: a chain of splits, one per alternative, each jumping past the rest.
    fn group(&mut self, depth: usize) -> Result<(), GlobError> {
        if depth > MAX_NESTING {
            return Err(GlobError(format!(
                "'{{' groups nest at most {MAX_NESTING} deep"
            )));
        }
        let open = self.at;
        self.at += 1;
        let mut jumps = Vec::new();
        loop {
            let split = self.program.len();
            self.program.push(Inst::Split(split + 1, 0));
            self.sequence(depth, true)?;
            match self.chars.get(self.at) {
                Some(',') => {
                    self.at += 1;
                    jumps.push(self.program.len());
                    self.program.push(Inst::Jump(0));
                    let next = self.program.len();
                    self.program[split] = Inst::Split(split + 1, next);
                }
                Some('}') => {
                    self.at += 1;
                    // The last alternative: its split has nowhere else to go.
                    self.program[split] = Inst::Jump(split + 1);
                    break;
                }
                _ => {
                    return Err(GlobError(format!(
                        "unclosed '{{' at character {} of the pattern",
                        open + 1
                    )));
                }
            }
        }
        let end = self.program.len();
        for jump in jumps {
            self.program[jump] = Inst::Jump(end);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, text: &str) -> bool {
        Glob::new(pattern).unwrap().matches(text)
    }

    #[test]
    fn literal_and_wildcards() {
        assert!(m("latest", "latest"));
        assert!(!m("latest", "latest2"));
        assert!(!m("latest", "lates"));
        assert!(m("v*", "v1.2"));
        assert!(m("v*", "v"));
        assert!(!m("v*", "release"));
        assert!(!m("*", "a/b"));
        assert!(m("*", ""));
        assert!(m("team/*", "team/app"));
        assert!(!m("team/*", "team/app/x"));
        assert!(m("release-?", "release-1"));
        assert!(!m("release-?", "release-10"));
        assert!(!m("?", "/"));
        assert!(m("*-rc*", "v1-rc2"));
    }

    #[test]
    fn doublestar() {
        assert!(m("**", "a/b/c"));
        assert!(m("**", ""));
        assert!(m("a**z", "a/b/z"));
        assert!(m("**/app", "app"));
        assert!(m("**/app", "team/app"));
        assert!(m("**/app", "a/b/app"));
        assert!(!m("**/app", "myapp"));
        assert!(m("team/**", "team/a/b"));
        assert!(m("team/**/x", "team/x"));
        assert!(m("team/**/x", "team/a/b/x"));
        assert!(!m("team/**/x", "teamx"));
        assert!(m("***", "a/b"));
    }

    #[test]
    fn alternatives() {
        assert!(m("{v1,v2}", "v2"));
        assert!(!m("{v1,v2}", "v3"));
        assert!(m("{v1,v2}-*", "v1-x"));
        assert!(m("a{b,c{d,e}}f", "acef"));
        assert!(!m("a{b,c{d,e}}f", "acf"));
        assert!(m("{,x}y", "y"));
        assert!(m("{,x}y", "xy"));
        assert!(m("{a*,b}", "abc"));
        // Outside a group `,` and `}` are themselves.
        assert!(m("a,b", "a,b"));
        assert!(m("a}", "a}"));
    }

    #[test]
    fn classes_and_escapes() {
        assert!(m("v[0-9]", "v7"));
        assert!(!m("v[0-9]", "va"));
        assert!(m("v[!0-9]", "va"));
        assert!(m("v[^0-9]", "va"));
        assert!(!m("v[!0-9]", "v7"));
        assert!(m("[]]", "]"));
        assert!(m("[a-]", "-"));
        assert!(!m("[!a]", "/"));
        assert!(m(r"a\*", "a*"));
        assert!(!m(r"a\*", "ab"));
        assert!(m(r"[\]]", "]"));
        assert!(m("é*", "été"));
    }

    #[test]
    fn bad_patterns_are_refused() {
        assert!(Glob::new("[abc").is_err());
        assert!(Glob::new("{a,b").is_err());
        assert!(Glob::new("[z-a]").is_err());
        assert!(Glob::new(&"a".repeat(MAX_PATTERN_LEN + 1)).is_err());
        assert!(Glob::new(&"a".repeat(MAX_PATTERN_LEN)).is_ok());
        assert!(Glob::new(&format!("{}x{}", "{".repeat(9), "}".repeat(9))).is_err());
    }

    /// Patterns that make a backtracking matcher take exponential time cost
    /// what any other does: each character of the text visits each position of
    /// the compiled program at most once (the matcher this replaced did not
    /// finish in 15 s on the first pattern).
    #[test]
    fn adversarial_patterns_are_linear() {
        let tag = "a".repeat(128);
        let with_b = format!("{tag}b");
        for pattern in [
            format!("{}b", "*a".repeat(25)),
            format!("{}b", "**a".repeat(25)),
            format!("{}b", "?*".repeat(60)),
            format!("{}b", "{a,*}".repeat(40)),
            format!("{}b", "{*,**,a}".repeat(30)),
            format!("{}b", "*".repeat(200)),
        ] {
            assert!(pattern.len() <= MAX_PATTERN_LEN, "{pattern}");
            let glob = Glob::new(&pattern).unwrap();
            for (text, expected) in [(&tag, false), (&with_b, true)] {
                let (matched, visited) = glob.run(text);
                assert_eq!(matched, expected, "{pattern} on {text}");
                let bound = glob.program.len() * (text.chars().count() + 1);
                assert!(visited <= bound, "{pattern}: {visited} visits > {bound}");
            }
        }
    }
}
