//! The facade names only what it exports (issue 30, item 3): a service
//! that depends on `lockshift` alone can name every type a signature of the
//! facade's API mentions.
//!
//! What counts, read as plain text from the sources (comments, string
//! contents, attributes and `#[cfg(test)]` items blanked first):
//!
//! - what `lockshift` exports: the names its `pub use` items bring in (a
//!   module re-exported whole brings in everything it exports, and so does
//!   a workspace crate re-exported whole, as `lockshift::store` — whose
//!   items are that crate's API, not the facade's, so they are not read)
//!   and its own `pub` items;
//! - the signatures of what it exports: its own public functions, methods,
//!   fields, variants, aliases and constants, and — for each item it
//!   re-exports from another workspace crate — that item's public fields,
//!   variants, alias target, trait methods and public inherent methods, as
//!   the crate that defines it writes them;
//! - a finding: a type defined in a workspace crate the facade depends on
//!   that such a signature names and the facade does not export.
//!
//! Trait implementations are not read: their methods are the trait's, and
//! a trait the facade exports is read where it is defined.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{is_test_file, root, rust_files, table_keys, workspace};

/// The facade's package.
const FACADE: &str = "lockshift";

/// One crate's library sources: its Rust name (`lockshift_lock`) and its
/// files (path for messages, text).
pub(crate) struct Crate {
    pub(crate) ident: String,
    pub(crate) files: Vec<(String, String)>,
}

// ===== Blanking =====

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

// ===== Items =====

/// An exported item's signature text, where it was found.
#[derive(Clone, Debug)]
struct Signature {
    /// `file:line`.
    at: String,
    /// The item, for messages (`fn acquire`, `struct NodeStatus`).
    item: String,
    text: String,
}

/// What one file declares `pub`: its `pub use` leaves (the name brought
/// in, the path), its items (name → signatures) and the public methods of
/// each type it has inherent `impl` blocks for.
#[derive(Default, Debug)]
struct Declared {
    uses: Vec<(String, String)>,
    items: BTreeMap<String, Vec<Signature>>,
    methods: BTreeMap<String, Vec<Signature>>,
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

/// Where the keyword `word` stands alone in `code`, from `from` on.
fn find_word(code: &str, word: &str, from: usize) -> Option<usize> {
    let bytes = code.as_bytes();
    let mut from = from;
    while let Some(k) = code[from..].find(word) {
        let at = from + k;
        let before = at == 0 || !is_ident_byte(bytes[at - 1]);
        let after = bytes
            .get(at + word.len())
            .is_none_or(|b| !is_ident_byte(*b));
        if before && after {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// The first `{` or `;` from `from` outside parentheses and brackets: the
/// end of a signature.
fn signature_end(code: &str, from: usize) -> usize {
    let mut depth = 0i32;
    for (i, b) in code.bytes().enumerate().skip(from) {
        match b {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            b'{' | b';' if depth == 0 => return i,
            _ => {}
        }
    }
    code.len()
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

/// The leaves of a use tree (`a::{b, c::d as e}`): (name, path).
fn use_leaves(tree: &str) -> Vec<(String, String)> {
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    fn walk(prefix: &str, tree: &str, out: &mut Vec<(String, String)>) {
        let tree = tree.trim();
        if let Some(open) = tree.find('{') {
            let prefix = format!("{prefix}{}", &tree[..open]);
            let inner = &tree[open + 1..closing(tree, open) - 1];
            for part in top_level_parts(inner) {
                walk(&prefix, part, out);
            }
        } else if !tree.is_empty() {
            let (path, name) = match tree.split_once(" as ") {
                Some((path, alias)) => (path.trim(), alias.trim()),
                None => (tree, tree.rsplit("::").next().unwrap_or(tree)),
            };
            if name != "self" && name != "*" {
                out.push((name.to_string(), format!("{prefix}{path}")));
            }
        }
    }
    walk("", &tree, &mut out);
    out
}

/// The type an inherent `impl` header names (`impl<T> Foo<T>` → `Foo`),
/// or `None` for a trait implementation.
fn inherent_self_type(header: &str) -> Option<String> {
    let header = header.trim_start();
    let header = if header.starts_with('<') {
        &header[closing(header, 0)..]
    } else {
        header
    };
    if find_word(header, "for", 0).is_some() {
        return None;
    }
    let path = header.trim().split('<').next().unwrap_or("").trim();
    let name = path.rsplit("::").next().unwrap_or(path).trim();
    (!name.is_empty()).then(|| name.to_string())
}

/// Everything `file` (its path and text) declares `pub`.
fn declared(file: &str, text: &str) -> Declared {
    let code = blank(text);
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let sig = |at: usize, item: String, text: &str| Signature {
        at: format!("{file}:{}", line_of(at)),
        item,
        text: text.to_string(),
    };
    let mut out = Declared::default();
    // Inherent impl blocks: (body start, body end, self type).
    let mut impls: Vec<(usize, usize, Option<String>)> = Vec::new();
    let mut from = 0;
    while let Some(at) = find_word(&code, "impl", from) {
        let open = signature_end(&code, at);
        if code.as_bytes().get(open) != Some(&b'{') {
            from = at + 4;
            continue;
        }
        let end = closing(&code, open);
        impls.push((open, end, inherent_self_type(&code[at + 4..open])));
        from = open + 1;
    }
    let mut from = 0;
    while let Some(at) = find_word(&code, "pub", from) {
        from = at + 3;
        let bytes = code.as_bytes();
        if code[at + 3..].trim_start().starts_with('(') {
            continue; // pub(crate), pub(super), pub(in …)
        }
        let mut cursor = at + 3;
        let mut keyword;
        loop {
            (keyword, cursor) = ident_at(&code, cursor);
            let qualifier = ["async", "unsafe", "extern"].contains(&keyword.as_str())
                || keyword == "const" && ident_at(&code, cursor).0 == "fn";
            if !qualifier {
                break;
            }
            if keyword == "extern" {
                // `extern "C"`: skip the blanked ABI string.
                cursor = code[cursor..].find('"').map_or(cursor, |k| {
                    cursor + k + 1 + code[cursor + k + 1..].find('"').unwrap_or(0) + 1
                });
            }
        }
        let (name, after_name) = ident_at(&code, cursor);
        let inside = impls
            .iter()
            .filter(|(open, end, _)| *open < at && at < *end)
            .min_by_key(|(open, end, _)| end - open);
        match keyword.as_str() {
            "fn" => {
                let end = signature_end(&code, after_name);
                let s = sig(at, format!("fn {name}"), &code[after_name..end]);
                match inside {
                    Some((_, _, Some(of))) => out.methods.entry(of.clone()).or_default().push(s),
                    Some((_, _, None)) => {}
                    None => out.items.entry(name).or_default().push(s),
                }
                if bytes.get(end) == Some(&b'{') {
                    from = closing(&code, end);
                }
            }
            "const" | "static" => {
                let end = code[after_name..]
                    .find(['=', ';'])
                    .map_or(code.len(), |k| after_name + k);
                let s = sig(at, format!("{keyword} {name}"), &code[after_name..end]);
                match inside {
                    Some((_, _, Some(of))) => out.methods.entry(of.clone()).or_default().push(s),
                    Some((_, _, None)) => {}
                    None => out.items.entry(name).or_default().push(s),
                }
            }
            "type" => {
                let end = code[after_name..]
                    .find(';')
                    .map_or(code.len(), |k| after_name + k);
                let s = sig(at, format!("type {name}"), &code[after_name..end]);
                out.items.entry(name).or_default().push(s);
            }
            "struct" | "union" | "enum" | "trait" => {
                let end = code[after_name..]
                    .find(['{', '(', ';'])
                    .map_or(code.len(), |k| after_name + k);
                let mut text = code[after_name..end].to_string();
                let body_end = match bytes.get(end) {
                    Some(b'{') | Some(b'(') => closing(&code, end),
                    _ => end,
                };
                let body = code.get(end + 1..body_end.saturating_sub(1)).unwrap_or("");
                match keyword.as_str() {
                    "enum" => {
                        for variant in top_level_parts(body) {
                            // Each variant's fields; not its name.
                            let (_, rest) = ident_at(variant, 0);
                            text.push(' ');
                            text.push_str(variant[rest..].split('=').next().unwrap_or(""));
                        }
                    }
                    "trait" => {
                        // Every method signature and bound; default bodies out.
                        let mut body = body.to_string();
                        while let Some(open) = body.find('{') {
                            let end = closing(&body, open);
                            body.replace_range(open..end, ";");
                        }
                        text.push(' ');
                        text.push_str(&body);
                    }
                    _ => {
                        for field in top_level_parts(body) {
                            let field = field.trim();
                            let Some(rest) = field.strip_prefix("pub") else {
                                continue;
                            };
                            if rest.trim_start().starts_with('(') || rest.is_empty() {
                                continue;
                            }
                            let ty = rest.split_once(':').map_or(rest, |(_, t)| t);
                            text.push(' ');
                            text.push_str(ty);
                        }
                    }
                }
                out.items.entry(name.clone()).or_default().push(sig(
                    at,
                    format!("{keyword} {name}"),
                    &text,
                ));
                from = body_end.max(from);
            }
            "mod" => {
                out.items.entry(name).or_default();
            }
            "use" => {
                let end = code[cursor..].find(';').map_or(code.len(), |k| cursor + k);
                let tree = code[cursor..end].trim_start();
                let tree = tree.strip_prefix("use").unwrap_or(tree);
                out.uses.extend(use_leaves(tree));
                from = end;
            }
            _ => {} // a field of a private struct, a pub(…) we missed
        }
    }
    out
}

/// The type-like names of `text`: identifiers that start with a capital
/// and hold a small letter (not `T`, not `MAX_LEN`).
fn type_names(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| {
            w.starts_with(|c: char| c.is_ascii_uppercase())
                && w.chars().any(|c| c.is_ascii_lowercase())
                && *w != "Self"
        })
        .map(str::to_string)
        .collect()
}

// ===== The check =====

struct Index {
    /// Per crate ident: what each of its files declares.
    crates: BTreeMap<String, Vec<(String, Declared)>>,
}

impl Index {
    fn new(crates: &[Crate]) -> Index {
        let crates = crates
            .iter()
            .map(|c| {
                let files = c
                    .files
                    .iter()
                    .map(|(path, text)| (path.clone(), declared(path, text)))
                    .collect();
                (c.ident.clone(), files)
            })
            .collect();
        Index { crates }
    }

    /// What `krate` exports as `name`: (the crate that defines it, its
    /// name there), following `pub use` from crate to crate.
    fn resolve(&self, krate: &str, name: &str, depth: u32) -> Option<(String, String)> {
        let files = self.crates.get(krate)?;
        if files.iter().any(|(_, d)| d.items.contains_key(name)) {
            return Some((krate.to_string(), name.to_string()));
        }
        if depth == 0 {
            return None;
        }
        for (_, d) in files {
            for (leaf, path) in &d.uses {
                if leaf != name {
                    continue;
                }
                let mut segments = path.split("::").map(str::trim);
                let first = segments.next().unwrap_or("");
                let last = path.rsplit("::").next().unwrap_or("").trim();
                let target = match first {
                    "crate" | "self" | "super" => krate,
                    other => other,
                };
                if let Some(found) = self.resolve(target, last, depth - 1) {
                    return Some(found);
                }
            }
        }
        None
    }

    /// The files of `krate`'s module `name` (`fenced` → `src/fenced.rs`).
    fn module(&self, krate: &str, name: &str) -> Vec<&Declared> {
        let Some(files) = self.crates.get(krate) else {
            return Vec::new();
        };
        files
            .iter()
            .filter(|(path, _)| {
                path.ends_with(&format!("/src/{name}.rs"))
                    || path.ends_with(&format!("/src/{name}/mod.rs"))
            })
            .map(|(_, d)| d)
            .collect()
    }

    /// The signatures of `name` as `krate` defines it, and of its public
    /// inherent methods anywhere in `krate`.
    fn signatures(&self, krate: &str, name: &str) -> Vec<Signature> {
        let mut out = Vec::new();
        for (_, d) in self.crates.get(krate).into_iter().flatten() {
            out.extend(d.items.get(name).into_iter().flatten().cloned());
            out.extend(d.methods.get(name).into_iter().flatten().cloned());
        }
        out
    }
}

/// Each type of a workspace crate `facade` does not export that a
/// signature of its public API names, with where: one message per type.
/// `crates` holds the facade and the workspace crates it builds on.
pub(crate) fn unexported_names(facade: &str, crates: &[Crate]) -> Vec<String> {
    let index = Index::new(crates);
    let Some(own) = index.crates.get(facade) else {
        return vec![format!("no crate {facade}")];
    };
    // Types the other crates define: what a finding can be.
    let mut defined: BTreeMap<String, String> = BTreeMap::new();
    for (krate, files) in &index.crates {
        if krate == facade {
            continue;
        }
        for (_, d) in files {
            for (name, sigs) in &d.items {
                let is_type = sigs.iter().any(|s| {
                    ["struct ", "enum ", "trait ", "type ", "union "]
                        .iter()
                        .any(|k| s.item.starts_with(k))
                });
                if is_type {
                    defined.entry(name.clone()).or_insert_with(|| krate.clone());
                }
            }
        }
    }
    let mut exported: BTreeSet<String> = BTreeSet::new();
    let mut read: Vec<Signature> = Vec::new();
    // (crate, name) already read, so a type re-exported twice is read once.
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    let mut uses: Vec<(String, String, String)> = Vec::new();
    for (_, d) in own {
        for (name, sigs) in &d.items {
            exported.insert(name.clone());
            read.extend(sigs.iter().cloned());
        }
        for (leaf, path) in &d.uses {
            uses.push((facade.to_string(), leaf.clone(), path.clone()));
        }
    }
    // Every facade type's methods, wherever its impl blocks are.
    for (_, d) in own {
        for (of, sigs) in &d.methods {
            if exported.contains(of) {
                read.extend(sigs.iter().cloned());
            }
        }
    }
    while let Some((from, leaf, path)) = uses.pop() {
        exported.insert(leaf.clone());
        let first = path.split("::").next().unwrap_or("").trim();
        let last = path.rsplit("::").next().unwrap_or("").trim().to_string();
        let krate = match first {
            "crate" | "self" | "super" => from.clone(),
            other => other.to_string(),
        };
        if krate == facade || !index.crates.contains_key(&krate) {
            continue; // the facade's own item, or an outside crate's
        }
        if !path.contains("::") {
            // A workspace crate re-exported whole: all it declares.
            for (_, d) in &index.crates[&krate] {
                exported.extend(d.items.keys().cloned());
                exported.extend(d.uses.iter().map(|(name, _)| name.clone()));
            }
            continue;
        }
        let Some((home, name)) = index.resolve(&krate, &last, 4) else {
            continue;
        };
        let modules = index.module(&home, &name);
        if modules.is_empty() {
            if seen.insert((home.clone(), name.clone())) {
                read.extend(index.signatures(&home, &name));
            }
            continue;
        }
        // A module re-exported whole: everything it exports.
        for module in modules {
            for name in module.items.keys() {
                exported.insert(name.clone());
                if seen.insert((home.clone(), name.clone())) {
                    read.extend(index.signatures(&home, name));
                }
            }
            for (inner, inner_path) in &module.uses {
                uses.push((home.clone(), inner.clone(), inner_path.clone()));
            }
        }
    }
    let mut missing: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in &read {
        for name in type_names(&s.text) {
            if defined.contains_key(&name) && !exported.contains(&name) {
                missing
                    .entry(name)
                    .or_default()
                    .insert(format!("{} ({})", s.at, s.item));
            }
        }
    }
    missing
        .into_iter()
        .map(|(name, places)| {
            format!(
                "`{name}` ({}) is named by the facade's API but not exported by it: {}",
                defined[&name],
                places.into_iter().collect::<Vec<_>>().join(", ")
            )
        })
        .collect()
}

/// The facade and every workspace crate it depends on, directly or not,
/// read from the repository.
fn the_facade_and_its_dependencies() -> Vec<Crate> {
    let root = root();
    let crates = workspace();
    let names: Vec<&str> = crates.iter().map(|(_, n, _)| n.as_str()).collect();
    let mut wanted = vec![FACADE.to_string()];
    let mut i = 0;
    while i < wanted.len() {
        let (_, _, manifest) = crates
            .iter()
            .find(|(_, n, _)| *n == wanted[i])
            .expect("a workspace crate");
        for dep in table_keys(manifest, "dependencies") {
            if names.contains(&dep.as_str()) && !wanted.contains(&dep) {
                wanted.push(dep);
            }
        }
        i += 1;
    }
    wanted
        .iter()
        .map(|name| {
            let (dir, _, _) = crates.iter().find(|(_, n, _)| n == name).unwrap();
            let mut paths = Vec::new();
            rust_files(&root.join(dir).join("src"), &mut paths);
            paths.sort();
            let files = paths
                .into_iter()
                .filter(|p| !is_test_file(p) && !p.components().any(|c| c.as_os_str() == "bin"))
                .map(|p| {
                    let shown = p.strip_prefix(&root).unwrap_or(Path::new("")).display();
                    (shown.to_string(), std::fs::read_to_string(&p).unwrap())
                })
                .collect();
            Crate {
                ident: name.replace('-', "_"),
                files,
            }
        })
        .collect()
}

#[test]
fn the_facade_exports_every_type_its_api_names() {
    let crates = the_facade_and_its_dependencies();
    assert!(
        crates.len() >= 5 && crates.iter().all(|c| !c.files.is_empty()),
        "the facade and its dependencies were not read: {:?}",
        crates.iter().map(|c| &c.ident).collect::<Vec<_>>()
    );
    let problems = unexported_names(FACADE, &crates);
    assert!(
        problems.is_empty(),
        "re-export these from lockshift/src/lib.rs, or stop naming them:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_type_named_but_not_exported_is_reported() {
    let lock = r#"
//! The lock crate. `Hidden` in a comment names nothing.
use std::sync::Arc;
pub use other_crate::Outside;
pub use lockshift_decide::Decided;
/// The guard.
#[must_use = "keep it"]
pub struct Guard {
    pub lock: LockId,
    store: Arc<Hidden>,
}
pub struct LockId(String);
pub struct Hidden;
pub struct Watch;
pub type Shared = Arc<dyn Backend>;
pub trait Backend { fn read(&self) -> Cell { todo!("{}", Unseen) } }
pub struct Cell;
pub struct Unseen;
pub enum Error { Store { error: StoreError }, Watch(Watch), Gone }
pub struct StoreError;
impl Guard {
    pub fn options(&self) -> Options { Options }
    pub(crate) fn internal(&self) -> Internal { Internal }
    fn private(&self) -> Private { Private }
}
impl fmt::Debug for Guard { fn fmt(&self) -> Formatted { "Guard" } }
pub struct Options;
pub struct Internal;
pub struct Private;
pub struct Formatted;
#[cfg(test)]
mod tests { pub fn test_only() -> Private { Private } }
"#;
    let decide = "pub struct Decided { pub by: Decider }\npub struct Decider;\n";
    let facade = r#"
pub use lockshift_lock::{Guard, Error as LockError, LockId};
pub use lockshift_lock::{Backend, Shared};
pub use lockshift_lock::Decided;
pub use tokio;
mod node;
pub use node::Node;
"#;
    let node = "pub struct Node;\nimpl Node {\n    pub fn guard(&self, s: Shared) -> Result<Guard, LockError> { todo!() }\n    pub fn raw(&self) -> Options { todo!() }\n}\n";
    let crates = [
        Crate {
            ident: "lockshift".into(),
            files: vec![
                ("lockshift/src/lib.rs".into(), facade.into()),
                ("lockshift/src/node.rs".into(), node.into()),
            ],
        },
        Crate {
            ident: "lockshift_lock".into(),
            files: vec![("lock/src/lib.rs".into(), lock.into())],
        },
        Crate {
            ident: "lockshift_decide".into(),
            files: vec![("decide/src/lib.rs".into(), decide.into())],
        },
    ];
    let problems = unexported_names("lockshift", &crates);
    let named: Vec<&str> = problems
        .iter()
        .map(|p| p.split('`').nth(1).unwrap_or(""))
        .collect();
    // Cell: an exported trait's method; Decider: a
    // field of a type re-exported from a crate that re-exports it;
    // Options: a facade method and the guard's method; StoreError, Watch:
    // variants. Not Hidden (a private field), Internal, Private,
    // Formatted (a trait impl), Unseen (a body), the test module's Private.
    assert_eq!(
        named,
        ["Cell", "Decider", "Options", "StoreError", "Watch"],
        "{problems:#?}"
    );
    assert!(
        problems[2].contains("lockshift/src/node.rs:4 (fn raw)")
            && problems[2].contains("lock/src/lib.rs:22 (fn options)"),
        "{}",
        problems[2]
    );
    // Without the trait exported, its alias names it; its methods are not read.
    let without = facade.replace("{Backend, Shared}", "Shared");
    let mut crates = crates;
    crates[0].files[0].1 = without;
    let problems = unexported_names("lockshift", &crates);
    assert!(
        problems[0].starts_with("`Backend`") && !problems.iter().any(|p| p.starts_with("`Cell`")),
        "{problems:#?}"
    );
    // A crate re-exported whole exports all it declares.
    crates[0].files[0].1 = format!("{facade}pub use lockshift_decide as decide;\n");
    let problems = unexported_names("lockshift", &crates);
    assert!(
        !problems.iter().any(|p| p.starts_with("`Decider`")) && problems.len() == 4,
        "{problems:#?}"
    );
    assert_eq!(
        use_leaves(" a::{b, c::{d as e, self}, f}"),
        [
            ("b".to_string(), "a::b".to_string()),
            ("e".to_string(), "a::c::d".to_string()),
            ("f".to_string(), "a::f".to_string()),
        ]
    );
    let literal = blank("let s = r#\"a \"quoted\" {\"#; let c = '{'; fn f<'a>() {} // {\n");
    assert_eq!(literal.matches('{').count(), 1, "{literal}");
}
