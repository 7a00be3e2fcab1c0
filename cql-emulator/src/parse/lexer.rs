//! CQL tokens: words, quoted names, string / number / hex / uuid constants,
//! bind markers and punctuation, with the position each starts at for error
//! messages ("line 1:14 …", Cassandra's format).

use crate::error::CqlError;

/// One token.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    /// An unquoted word: keyword or identifier, as written.
    Word(String),
    /// A `"quoted"` identifier, unescaped.
    Quoted(String),
    Str(String),
    Int(String),
    Float(String),
    Hex(Vec<u8>),
    Uuid(uuid::Uuid),
    /// `?` (no name) or `:name`.
    Marker(Option<String>),
    /// Punctuation and operators.
    Sym(&'static str),
    Eof,
}

impl Tok {
    /// How the token reads in an error message.
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Word(w) => w.clone(),
            Tok::Quoted(q) => format!("\"{q}\""),
            Tok::Str(s) => format!("'{s}'"),
            Tok::Int(s) | Tok::Float(s) => s.clone(),
            Tok::Hex(_) => "hex constant".to_string(),
            Tok::Uuid(u) => u.to_string(),
            Tok::Marker(None) => "?".to_string(),
            Tok::Marker(Some(n)) => format!(":{n}"),
            Tok::Sym(s) => (*s).to_string(),
            Tok::Eof => "<EOF>".to_string(),
        }
    }
}

/// A token and where it starts.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Spanned {
    pub(crate) tok: Tok,
    pub(crate) line: usize,
    pub(crate) col: usize,
}

const SYMBOLS: [&str; 19] = [
    "<=", ">=", "!=", "(", ")", ",", ";", ".", "=", "<", ">", "[", "]", "{", "}", ":", "*", "+",
    "-",
];

/// Splits `text` into tokens, ending with [`Tok::Eof`].
pub(crate) fn lex(text: &str) -> Result<Vec<Spanned>, CqlError> {
    Lexer {
        src: text,
        pos: 0,
        out: Vec::new(),
    }
    .run()
}

struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    out: Vec<Spanned>,
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl Lexer<'_> {
    fn rest(&self) -> &str {
        &self.src[self.pos..]
    }

    fn line_col(&self, pos: usize) -> (usize, usize) {
        let before = &self.src[..pos];
        let line = before.matches('\n').count() + 1;
        let col = before.rfind('\n').map_or(pos, |nl| pos - nl - 1);
        (line, col)
    }

    fn error(&self, pos: usize, what: &str) -> CqlError {
        let (line, col) = self.line_col(pos);
        CqlError::syntax(format!("line {line}:{col} {what}"))
    }

    fn push(&mut self, start: usize, tok: Tok) {
        let (line, col) = self.line_col(start);
        self.out.push(Spanned { tok, line, col });
    }

    fn run(mut self) -> Result<Vec<Spanned>, CqlError> {
        loop {
            self.skip_space_and_comments()?;
            let start = self.pos;
            let Some(c) = self.rest().chars().next() else {
                self.push(start, Tok::Eof);
                return Ok(self.out);
            };
            let tok = if c == '\'' {
                self.quoted('\'').map(Tok::Str)?
            } else if c == '"' {
                let name = self.quoted('"')?;
                if name.is_empty() {
                    return Err(self.error(start, "empty quoted identifier"));
                }
                Tok::Quoted(name)
            } else if self.rest().starts_with("$$") {
                self.dollar_string()?
            } else if let Some(u) = self.uuid() {
                u
            } else if c.is_ascii_digit()
                || (c == '-'
                    && self.rest()[1..]
                        .chars()
                        .next()
                        .is_some_and(|d| d.is_ascii_digit()))
            {
                self.number()?
            } else if c.is_ascii_alphabetic() {
                let len = self
                    .rest()
                    .find(|c: char| !is_ident_char(c))
                    .unwrap_or(self.rest().len());
                let word = self.rest()[..len].to_string();
                self.pos += len;
                Tok::Word(word)
            } else if c == '?' {
                self.pos += 1;
                Tok::Marker(None)
            } else if c == ':'
                && self.rest()[1..]
                    .chars()
                    .next()
                    .is_some_and(|d| d.is_ascii_alphabetic() || d == '"')
            {
                self.pos += 1;
                let name = if self.rest().starts_with('"') {
                    self.quoted('"')?
                } else {
                    let len = self
                        .rest()
                        .find(|c: char| !is_ident_char(c))
                        .unwrap_or(self.rest().len());
                    let n = self.rest()[..len].to_ascii_lowercase();
                    self.pos += len;
                    n
                };
                Tok::Marker(Some(name))
            } else if let Some(sym) = SYMBOLS.iter().find(|s| self.rest().starts_with(**s)) {
                self.pos += sym.len();
                Tok::Sym(sym)
            } else {
                return Err(self.error(start, &format!("token recognition error at: '{c}'")));
            };
            self.push(start, tok);
        }
    }

    fn skip_space_and_comments(&mut self) -> Result<(), CqlError> {
        loop {
            let rest = self.rest();
            let trimmed = rest.trim_start();
            self.pos += rest.len() - trimmed.len();
            let rest = self.rest();
            if rest.starts_with("--") || rest.starts_with("//") {
                self.pos += rest.find('\n').unwrap_or(rest.len());
            } else if let Some(body) = rest.strip_prefix("/*") {
                match body.find("*/") {
                    Some(end) => self.pos += end + 4,
                    None => return Err(self.error(self.pos, "unterminated comment")),
                }
            } else {
                return Ok(());
            }
        }
    }

    /// A `'string'` or `"name"`; the quote doubled inside stands for itself.
    fn quoted(&mut self, q: char) -> Result<String, CqlError> {
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            let rest = self.rest();
            let Some(i) = rest.find(q) else {
                let what = if q == '\'' {
                    "string"
                } else {
                    "quoted identifier"
                };
                return Err(self.error(start, &format!("unterminated {what}")));
            };
            out.push_str(&rest[..i]);
            self.pos += i + 1;
            if self.rest().starts_with(q) {
                out.push(q);
                self.pos += 1;
            } else {
                return Ok(out);
            }
        }
    }

    fn dollar_string(&mut self) -> Result<Tok, CqlError> {
        let start = self.pos;
        self.pos += 2;
        match self.rest().find("$$") {
            Some(end) => {
                let s = self.rest()[..end].to_string();
                self.pos += end + 2;
                Ok(Tok::Str(s))
            }
            None => Err(self.error(start, "unterminated $$ string")),
        }
    }

    /// A uuid constant `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` not followed by
    /// an identifier character.
    fn uuid(&mut self) -> Option<Tok> {
        let rest = self.rest();
        let candidate = rest.get(..36)?;
        let shape_ok = candidate.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        });
        if !shape_ok || rest[36..].chars().next().is_some_and(is_ident_char) {
            return None;
        }
        let u = uuid::Uuid::parse_str(candidate).ok()?;
        self.pos += 36;
        Some(Tok::Uuid(u))
    }

    fn number(&mut self) -> Result<Tok, CqlError> {
        let start = self.pos;
        let rest = self.rest();
        if rest.starts_with("0x") || rest.starts_with("0X") {
            let digits = &rest[2..];
            let len = digits
                .find(|c: char| !c.is_ascii_hexdigit())
                .unwrap_or(digits.len());
            let hex = &digits[..len];
            if digits[len..].chars().next().is_some_and(is_ident_char) {
                return Err(self.error(start, "invalid hex constant"));
            }
            if !hex.len().is_multiple_of(2) {
                return Err(self.error(start, "hex constant has an odd number of digits"));
            }
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|_| self.error(start, "invalid hex constant"))?;
            self.pos += 2 + len;
            return Ok(Tok::Hex(bytes));
        }
        let bytes = rest.as_bytes();
        let mut i = usize::from(bytes.first() == Some(&b'-'));
        let digits = |i: &mut usize| {
            let from = *i;
            while bytes.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i > from
        };
        digits(&mut i);
        let mut float = false;
        if bytes.get(i) == Some(&b'.') && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
            i += 1;
            digits(&mut i);
            float = true;
        }
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            let mut j = i + 1;
            if matches!(bytes.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            if digits(&mut j) {
                i = j;
                float = true;
            }
        }
        if rest[i..].chars().next().is_some_and(is_ident_char) {
            return Err(self.error(
                start,
                &format!(
                    "invalid number '{}' (durations are not supported)",
                    &rest[..i + 1]
                ),
            ));
        }
        let text = rest[..i].to_string();
        self.pos += i;
        Ok(if float {
            Tok::Float(text)
        } else {
            Tok::Int(text)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        lex(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn lexes_the_lockshift_insert() {
        let t = toks("INSERT INTO ks.\"T\" (a) VALUES (?) USING TTL ? AND TIMESTAMP -5;");
        assert_eq!(t[3], Tok::Sym("."));
        assert_eq!(t[4], Tok::Quoted("T".into()));
        assert!(t.contains(&Tok::Marker(None)));
        assert!(t.contains(&Tok::Int("-5".into())));
        assert_eq!(t.last(), Some(&Tok::Eof));
    }

    #[test]
    fn constants() {
        assert_eq!(toks("'it''s'")[0], Tok::Str("it's".into()));
        assert_eq!(toks("$$a'b$$")[0], Tok::Str("a'b".into()));
        assert_eq!(toks("0xCAFE")[0], Tok::Hex(vec![0xca, 0xfe]));
        assert_eq!(toks("1.5e3")[0], Tok::Float("1.5e3".into()));
        assert_eq!(toks(":Name")[0], Tok::Marker(Some("name".into())));
        assert!(matches!(
            toks("123e4567-e89b-12d3-a456-426614174000")[0],
            Tok::Uuid(_)
        ));
    }

    #[test]
    fn comments_are_skipped_and_errors_have_positions() {
        assert_eq!(toks("-- x\n/* y */ a // z").len(), 2);
        let e = lex("SELECT\n  'open").unwrap_err();
        assert!(
            e.message.starts_with("line 2:2 unterminated string"),
            "{}",
            e.message
        );
        assert!(lex("a # b").is_err());
        assert!(lex("0x123").is_err());
        assert!(lex("/* never closed").is_err());
    }
}
