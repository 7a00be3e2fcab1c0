//! The state diagrams draw the code's names (issue 30, item 4): every state
//! a diagram names is a variant of the enum it draws, every field it shows
//! in braces (`Queued{ahead: d}`) is that variant's, and every action an
//! arrow is labelled with (`──Enter──`) is a variant of the action enum.
//!
//! A state diagram is a ```` ```text ```` block with an arrowhead (`▶`), in
//! a Markdown file or a doc comment. Each one in the repository is listed
//! in [`DIAGRAMS`] with the enums it draws, so a new one cannot go
//! unchecked, and an entry that finds no diagram fails too.
//!
//! How a diagram line is read: text in parentheses is prose; a word that
//! starts with a capital and has a small letter (not `X`, not `Q6`) is a
//! state, or an action when it touches an arrow's `─`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::root;
use super::scan::{blank, closing, ident_at, top_level_parts};

/// A state diagram and what it draws.
struct Diagram {
    /// The file it is in.
    file: &'static str,
    /// A line before it: the diagram is the first one after.
    after: &'static str,
    /// The Rust file that defines the enums.
    code: &'static str,
    /// The states' enum.
    states: &'static str,
    /// The actions' enum.
    actions: &'static str,
}

/// Every state diagram of the repository.
const DIAGRAMS: &[Diagram] = &[
    Diagram {
        file: "docs/design.md",
        after: "### The waiter as a state machine",
        code: "decide/src/waiter/mod.rs",
        states: "State",
        actions: "Action",
    },
    Diagram {
        file: "decide/src/waiter/mod.rs",
        after: "//! # States",
        code: "decide/src/waiter/mod.rs",
        states: "State",
        actions: "Action",
    },
];

/// The variants of `pub enum name` in `text` (Rust source), each with its
/// named fields.
fn variants(text: &str, name: &str) -> BTreeMap<String, BTreeSet<String>> {
    let code = blank(text);
    let Some(at) = code.find(&format!("pub enum {name} ")) else {
        return BTreeMap::new();
    };
    let Some(open) = code[at..].find('{').map(|k| at + k) else {
        return BTreeMap::new();
    };
    let body = &code[open + 1..closing(&code, open) - 1];
    let mut out = BTreeMap::new();
    for part in top_level_parts(body) {
        let (variant, rest) = ident_at(part, 0);
        if variant.is_empty() {
            continue;
        }
        let mut fields = BTreeSet::new();
        let rest = part[rest..].trim_start();
        if rest.starts_with('{') {
            let inner = &rest[1..closing(rest, 0) - 1];
            for field in top_level_parts(inner) {
                if let Some((field, _)) = field.split_once(':') {
                    let field = field.trim().trim_start_matches("pub ").trim();
                    fields.insert(field.to_string());
                }
            }
        }
        out.insert(variant, fields);
    }
    out
}

/// A name a diagram line shows.
#[derive(Debug, PartialEq, Eq)]
enum Shown {
    /// A state, with the fields shown in braces after it.
    State(String, Vec<String>),
    /// An arrow's label.
    Action(String),
}

/// What one diagram line names, outside parentheses.
fn shown(line: &str) -> Vec<Shown> {
    let chars: Vec<char> = line.chars().collect();
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        let starts = is_word(c) && (i == 0 || !is_word(chars[i - 1]));
        if depth != 0 || !starts {
            i += 1;
            continue;
        }
        let end = (i..chars.len())
            .find(|&j| !is_word(chars[j]))
            .unwrap_or(chars.len());
        let word: String = chars[i..end].iter().collect();
        let named = word.starts_with(|c: char| c.is_ascii_uppercase())
            && word.chars().any(|c| c.is_ascii_lowercase());
        if !named {
            i = end;
            continue;
        }
        let on_arrow = (i > 0 && chars[i - 1] == '─') || chars.get(end) == Some(&'─');
        if on_arrow {
            out.push(Shown::Action(word));
            i = end;
        } else if chars.get(end) == Some(&'{') {
            let close = (end..chars.len())
                .find(|&j| chars[j] == '}')
                .unwrap_or(chars.len());
            let inner: String = chars[end + 1..close.max(end + 1)].iter().collect();
            let fields = inner
                .split(',')
                .filter_map(|f| f.split_once(':'))
                .map(|(f, _)| f.trim().to_string())
                .collect();
            out.push(Shown::State(word, fields));
            i = close + 1;
        } else {
            out.push(Shown::State(word, Vec::new()));
            i = end;
        }
    }
    out
}

/// A doc comment's or a Markdown line's text: without `//!`, `///`.
fn text_of(line: &str) -> &str {
    let trimmed = line.trim_start();
    for prefix in ["//!", "///"] {
        if let Some(rest) = trimmed.strip_prefix(prefix) {
            return rest.strip_prefix(' ').unwrap_or(rest);
        }
    }
    line
}

/// The state diagrams of `text`: (line number of the opening fence, the
/// diagram's lines with their numbers).
fn diagrams_in(text: &str) -> Vec<(usize, Vec<(usize, String)>)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<(usize, String)>)> = None;
    for (n, line) in text.lines().enumerate() {
        let body = text_of(line);
        match open.take() {
            None if body.trim_start().starts_with("```text") => open = Some((n + 1, Vec::new())),
            None => {}
            Some((at, lines)) if body.trim_start().starts_with("```") => {
                let arrows = lines.iter().any(|(_, l)| l.contains('▶'));
                out.extend(arrows.then_some((at, lines)));
            }
            Some((at, mut lines)) => {
                lines.push((n + 1, body.to_string()));
                open = Some((at, lines));
            }
        }
    }
    out
}

/// What `lines` (a diagram of `file`) names that the enums lack: `states`
/// (variant → fields) and `actions`, named in messages as `names`.
fn mismatches(
    file: &str,
    lines: &[(usize, String)],
    states: &BTreeMap<String, BTreeSet<String>>,
    actions: &BTreeMap<String, BTreeSet<String>>,
    names: (&str, &str),
) -> Vec<String> {
    let mut out = Vec::new();
    for (n, line) in lines {
        for name in shown(line) {
            match name {
                Shown::State(state, fields) => match states.get(&state) {
                    None => out.push(format!(
                        "{file}:{n}: the diagram names the state `{state}`, which `{}` does not have",
                        names.0
                    )),
                    Some(has) => {
                        for field in fields.iter().filter(|f| !has.contains(*f)) {
                            out.push(format!(
                                "{file}:{n}: the diagram shows `{state}{{{field}}}`, but `{}::{state}` has no field `{field}`",
                                names.0
                            ));
                        }
                    }
                },
                Shown::Action(action) if !actions.contains_key(&action) => out.push(format!(
                    "{file}:{n}: the diagram labels an arrow `{action}`, which `{}` does not have",
                    names.1
                )),
                Shown::Action(_) => {}
            }
        }
    }
    out
}

/// Every `.md` and `.rs` file of the repository, build output and hidden
/// directories left out.
fn documents(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                documents(&path, out);
            }
        } else if name.ends_with(".rs") || name.ends_with(".md") {
            out.push(path);
        }
    }
}

#[test]
fn every_state_diagram_draws_the_code_s_names() {
    let root = root();
    let read = |file: &str| {
        std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
    };
    let mut problems = Vec::new();
    // Where each listed diagram is: (file, line of its fence).
    let mut listed = Vec::new();
    for d in DIAGRAMS {
        let text = read(d.file);
        let code = read(d.code);
        let states = variants(&code, d.states);
        let actions = variants(&code, d.actions);
        assert!(
            states.len() >= 5 && actions.len() >= 5,
            "{}: enums {} and {} not read: {states:?} {actions:?}",
            d.code,
            d.states,
            d.actions
        );
        let Some(start) = text.find(d.after) else {
            problems.push(format!(
                "{}: no line {:?} (DIAGRAMS, tests/layout/diagrams.rs)",
                d.file, d.after
            ));
            continue;
        };
        let first_line = text[..start].matches('\n').count() + 1;
        let Some((at, lines)) = diagrams_in(&text)
            .into_iter()
            .find(|(at, _)| *at > first_line)
        else {
            problems.push(format!("{}: no state diagram after {:?}", d.file, d.after));
            continue;
        };
        listed.push((d.file.to_string(), at));
        let shown_states = lines
            .iter()
            .flat_map(|(_, l)| shown(l))
            .filter(|s| matches!(s, Shown::State(..)))
            .count();
        assert!(shown_states >= 5, "{}:{at}: no states read", d.file);
        problems.extend(mismatches(
            d.file,
            &lines,
            &states,
            &actions,
            (d.states, d.actions),
        ));
    }
    let mut files = Vec::new();
    documents(&root, &mut files);
    assert!(files.len() >= 100, "found only {} files", files.len());
    for path in files {
        let shown_path = path.strip_prefix(&root).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for (at, _) in diagrams_in(&text) {
            if !listed.contains(&(shown_path.clone(), at)) {
                problems.push(format!(
                    "{shown_path}:{at}: a state diagram not in DIAGRAMS (tests/layout/diagrams.rs): list it with the enums it draws"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_diagram_naming_what_the_code_lacks_is_reported() {
    let code = "/// States.\npub enum State {\n    /// Waiting.\n    Queued {\n        /// How many.\n        ahead: u32,\n        reservation: Option<String>,\n    },\n    First,\n    Holding,\n}\npub enum Action { Enter { fast: bool }, Poll(u8) }\n";
    let states = variants(code, "State");
    assert_eq!(
        states.keys().collect::<Vec<_>>(),
        ["First", "Holding", "Queued"]
    );
    assert_eq!(
        states["Queued"].iter().collect::<Vec<_>>(),
        ["ahead", "reservation"]
    );
    let actions = variants(code, "Action");
    // Built from pieces, so that no line of this file opens a block the
    // check itself would read.
    let fence = ["``", "`"].concat();
    let doc = format!(
        "//! # States\n//!\n//! {fence}text\n\
         //! Queued{{ahead: d}} ──poll (X's Cell, Q6)──▶ First ──Enter──▶ Holding\n\
         //! Behind{{d}} ──(Someone Else)──▶ Queued{{distance: 2}} ──Leave──▶ First\n\
         //! {fence}\n\
         //! {fence}text\n//! Plain text Without arrows\n//! {fence}\n"
    );
    let found = diagrams_in(&doc);
    assert_eq!(found.len(), 1, "{found:?}");
    let (at, lines) = &found[0];
    assert_eq!(*at, 3);
    assert_eq!(
        shown(&lines[0].1),
        [
            Shown::State("Queued".into(), vec!["ahead".into()]),
            Shown::State("First".into(), vec![]),
            Shown::Action("Enter".into()),
            Shown::State("Holding".into(), vec![]),
        ]
    );
    assert_eq!(
        mismatches("x.rs", lines, &states, &actions, ("State", "Action")),
        [
            "x.rs:5: the diagram names the state `Behind`, which `State` does not have",
            "x.rs:5: the diagram shows `Queued{distance}`, but `State::Queued` has no field `distance`",
            "x.rs:5: the diagram labels an arrow `Leave`, which `Action` does not have",
        ]
    );
}
