//! Plain-text scanning of Rust sources for the layout checks: comments,
//! literals, attributes and test items blanked; brackets matched;
//! identifiers and top-level parts read.

/// `text` with comments, the contents of string and character literals,
/// attributes and `#[cfg(test)]` items replaced by spaces (line breaks
/// kept, so line numbers stay).
pub(crate) fn blank(text: &str) -> String {
    let code = blank_literals(text);
    let code = blank_test_items(&code);
    blank_attributes(&code)
}

fn blank_literals(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let space = |ch: char| if ch == '\n' { '\n' } else { ' ' };
    let is_ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        let prev = if i == 0 { ' ' } else { c[i - 1] };
        if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(space(c[i]));
                    i += 1;
                }
            }
        } else if ch == 'r' && (!is_ident(prev) || prev == 'b') {
            // A raw string `r"…"`, `r#"…"#` (or `br…`), else a plain `r`.
            let hashes = c[i + 1..].iter().take_while(|h| **h == '#').count();
            if c.get(i + 1 + hashes) != Some(&'"') {
                out.push(ch);
                i += 1;
                continue;
            }
            out.push('r');
            out.extend(std::iter::repeat_n(' ', hashes));
            out.push('"');
            i += 2 + hashes;
            while i < c.len() {
                let closes = c[i] == '"'
                    && c[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|h| **h == '#')
                        .count()
                        == hashes;
                if closes {
                    out.push('"');
                    out.extend(std::iter::repeat_n(' ', hashes));
                    i += 1 + hashes;
                    break;
                }
                out.push(space(c[i]));
                i += 1;
            }
        } else if ch == '"' {
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < c.len() {
                    out.push(space(c[i]));
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if ch == '\'' && (next == Some('\\') || c.get(i + 2) == Some(&'\'')) {
            // A character literal ('x', '\n', '\u{1F600}'), not a lifetime.
            out.push('\'');
            i += 1;
            let from = if c[i] == '\\' { i + 2 } else { i + 1 };
            let close = (from..c.len()).find(|&j| c[j] == '\'').unwrap_or(c.len());
            while i < close {
                out.push(' ');
                i += 1;
            }
            if i < c.len() {
                out.push('\'');
                i += 1;
            }
        } else {
            out.push(ch);
            i += 1;
        }
    }
    out
}

/// The byte index just past the bracket that closes the one at `open`
/// (`{`, `(`, `[` or `<`), counting only that kind; the end if unclosed.
pub(crate) fn closing(code: &str, open: usize) -> usize {
    let bytes = code.as_bytes();
    let (o, c) = match bytes[open] {
        b'{' => (b'{', b'}'),
        b'(' => (b'(', b')'),
        b'[' => (b'[', b']'),
        _ => (b'<', b'>'),
    };
    let mut depth = 0usize;
    for (i, b) in bytes.iter().enumerate().skip(open) {
        if *b == o {
            depth += 1;
        } else if *b == c {
            depth -= 1;
            if depth == 0 {
                return i + 1;
            }
        }
    }
    code.len()
}

/// Replaces `code[from..to]` with spaces, keeping line breaks.
fn spaces(code: &mut String, from: usize, to: usize) {
    let blanked: String = code[from..to]
        .chars()
        .map(|c| if c == '\n' { '\n' } else { ' ' })
        .collect();
    code.replace_range(from..to, &blanked);
}

fn blank_test_items(code: &str) -> String {
    let mut code = code.to_string();
    while let Some(at) = code.find("#[cfg(test)]") {
        let after = at + "#[cfg(test)]".len();
        let end = match code[after..].find(['{', ';']) {
            Some(k) if code.as_bytes()[after + k] == b'{' => closing(&code, after + k),
            Some(k) => after + k + 1,
            None => code.len(),
        };
        spaces(&mut code, at, end);
    }
    code
}

fn blank_attributes(code: &str) -> String {
    let mut code = code.to_string();
    let mut from = 0;
    while let Some(k) = code[from..].find('#') {
        let at = from + k;
        let open = code[at + 1..]
            .find(|c: char| !c.is_whitespace() && c != '!')
            .map(|j| at + 1 + j);
        match open {
            Some(open) if code.as_bytes()[open] == b'[' => {
                let end = closing(&code, open);
                spaces(&mut code, at, end);
                from = end;
            }
            _ => from = at + 1,
        }
    }
    code
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The identifier starting at `at` (after spaces), and the index after it.
pub(crate) fn ident_at(code: &str, at: usize) -> (String, usize) {
    let bytes = code.as_bytes();
    let mut i = at;
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    let start = i;
    while i < bytes.len() && is_ident_byte(bytes[i]) {
        i += 1;
    }
    (code[start..i].to_string(), i)
}

/// `body`'s parts between top-level commas.
pub(crate) fn top_level_parts(body: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, b) in body.bytes().enumerate() {
        match b {
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b')' | b']' | b'}' | b'>' => depth -= 1,
            b',' if depth == 0 => {
                parts.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&body[start..]);
    parts
}
