//! Checks on the repository's own text: invariant labels are defined once
//! across the workspace (a label cited in one crate must not mean something
//! else in another) and every label cited is defined, no document or comment points outside the
//! repository, every settings key's rustdoc states its default — the
//! one `Settings::default()` has — and no error type both shows its cause
//! and chains it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

/// Every `.rs`, `.md` and `.toml` file of the repository, build output and
/// VCS data left out.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !(name.starts_with('.') || name == "target") {
                files(&path, out);
            }
        } else if [".rs", ".md", ".toml"].iter().any(|e| name.ends_with(e)) {
            out.push(path);
        }
    }
}

/// The label a doc line defines, if any: a list item opening with
/// `**X1.**`, `**XY12.**` or `**X1. Title.**` (one or two capitals,
/// digits, a period).
fn defined_label(line: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix("//")?;
    let rest = rest.trim_start_matches(['!', '/']).trim_start();
    let rest = rest.strip_prefix("- **")?;
    let label: String = rest.chars().take_while(|c| *c != '.').collect();
    let letters = label.chars().take_while(char::is_ascii_uppercase).count();
    let digits = label.len() - letters;
    let well_formed = (1..=2).contains(&letters)
        && digits > 0
        && label[letters..].chars().all(|c| c.is_ascii_digit())
        && rest[label.len()..].starts_with('.');
    well_formed.then_some(label)
}

/// No Rust file defines a label: every label is defined once, in
/// `docs/design.md`, and a crate's docs cite it (issue 21 S22).
#[test]
fn no_rust_file_defines_a_label() {
    let root = root();
    let mut all = Vec::new();
    files(&root, &mut all);
    let mut defined = Vec::new();
    for path in all
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        let text = std::fs::read_to_string(path).unwrap();
        for (n, line) in text.lines().enumerate() {
            if let Some(label) = defined_label(line) {
                let at = format!("{}:{}", path.strip_prefix(&root).unwrap().display(), n + 1);
                defined.push(format!("{at}: {label}"));
            }
        }
    }
    assert!(
        defined.is_empty(),
        "labels defined in Rust files (define them in docs/design.md and cite them): {defined:#?}"
    );
}

#[test]
fn label_definitions_are_recognised() {
    assert_eq!(defined_label("//! - **K3.** Told"), Some("K3".into()));
    assert_eq!(defined_label("/// - **W12.** x"), Some("W12".into()));
    assert_eq!(
        defined_label("//! - **L1. Stamps increase.** x"),
        Some("L1".into())
    );
    assert_eq!(defined_label("//! **C1** enter main"), None);
    assert_eq!(defined_label("//! - **Note.** x"), None);
}

/// The label a Markdown line defines, if any: a list item opening with
/// `**X1.` or `**X1 —` (`docs/design.md` writes its rules as
/// "- **R2 — a stage view expires.**").
fn defined_label_md(line: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix("- **")?;
    let label: String = rest
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    let after = &rest[label.len()..];
    (is_label(&label) && (after.starts_with('.') || after.starts_with(" —"))).then_some(label)
}

/// One or two capitals, then one or two digits: `K3`, `TB12`.
fn is_label(word: &str) -> bool {
    let letters = word.chars().take_while(char::is_ascii_uppercase).count();
    let digits = word.len() - letters;
    (1..=2).contains(&letters)
        && (1..=2).contains(&digits)
        && word[letters..].chars().all(|c| c.is_ascii_digit())
}

/// Words that look like labels and are not: `SEC1` is a key format
/// (store/src/settings/tls.rs). The token rule below already skips it — a
/// label never starts after a letter — so this list is a guard, kept for
/// the next such word rather than loosening the rule.
const NOT_LABELS: [&str; 1] = ["SEC1"];

/// What a line says in prose: all of a Markdown line; of a Rust line, the
/// comment (from the first `//`, doc comments included) and the contents
/// of the string literals before it. Code is not read, so identifiers such
/// as murmur3's `C1`/`C2` constants, a test's `T0` or `IpAddr::V4` are
/// never taken for labels. A string literal spanning lines is read only
/// on its first line: enough for the messages that cite labels.
fn prose(rust: bool, line: &str) -> String {
    if !rust {
        return line.to_string();
    }
    let (code, comment) = line.find("//").map_or((line, ""), |i| line.split_at(i));
    let mut out = comment.to_string();
    let mut chars = code.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        out.push(' ');
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                // Kept as written, so `\nK1` cites nothing and `\"K1` does.
                '\\' => {
                    out.push('\\');
                    out.extend(chars.next());
                }
                c => out.push(c),
            }
        }
    }
    out
}

/// The labels `text` cites: every `[A-Z]{1,2}[0-9]{1,2}` word that neither
/// follows a letter, digit, `_`, `-`, `.`, `/` or `#` (so `SEC1`, `x-K1`,
/// `v.K1`, `a/B2` and "issue 19 #9" cite nothing) nor runs on into one.
fn cited_labels(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = Vec::new();
    for start in 0..bytes.len() {
        let first = bytes[start];
        let after_boundary =
            start == 0 || !(word(bytes[start - 1]) || b"-./#".contains(&bytes[start - 1]));
        if !first.is_ascii_uppercase() || !after_boundary {
            continue;
        }
        let end = start
            + bytes[start..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric())
                .count();
        let ends_cleanly = end == bytes.len() || !word(bytes[end]);
        // `text[start..end]` is ASCII: both ends sit on ASCII bytes.
        if ends_cleanly && is_label(&text[start..end]) && !NOT_LABELS.contains(&&text[start..end]) {
            out.push(text[start..end].to_string());
        }
    }
    out
}

/// Where labels are defined and where they are cited, over `(path, text)`
/// pairs.
#[derive(Debug, Default)]
struct Labels {
    /// Label → the `path:line` of each definition.
    defined: BTreeMap<String, Vec<String>>,
    /// `path:line: label` of each citation of a label defined nowhere.
    unresolved: Vec<String>,
}

/// Reads labels the way the repository states them: a definition is a
/// list item (`- **X1.` in a Rust doc comment, `- **X1.` or `- **X1 —` in
/// Markdown); every other label word in prose is a citation, including
/// the other words of a definition's own line.
fn labels<'a>(files: impl IntoIterator<Item = (String, &'a str)>) -> Labels {
    let mut found = Labels::default();
    let mut cited = Vec::new();
    for (path, text) in files {
        let rust = path.ends_with(".rs");
        for (n, line) in text.lines().enumerate() {
            let at = format!("{path}:{}", n + 1);
            let label = if rust {
                defined_label(line)
            } else {
                defined_label_md(line)
            };
            if let Some(label) = &label {
                found
                    .defined
                    .entry(label.clone())
                    .or_default()
                    .push(at.clone());
            }
            let mut words = cited_labels(&prose(rust, line));
            if let Some(i) = label.and_then(|l| words.iter().position(|w| *w == l)) {
                words.remove(i);
            }
            cited.extend(words.into_iter().map(|w| (at.clone(), w)));
        }
    }
    found.unresolved = cited
        .into_iter()
        .filter(|(_, w)| !found.defined.contains_key(w))
        .map(|(at, w)| format!("{at}: {w}"))
        .collect();
    found
}

/// At most this many labels. Issue 21: 85 (84 before it, plus the store's
/// S7), then 31 once each crate's implementation invariants were numbered
/// in their own files; lower it as labels merge — raising it needs a reason.
/// Issue 29: 35, the homes across datacenters (H1–H4, docs/design.md §4a),
/// a dimension no earlier rule spoke of; 36 with H5 (what a process may
/// conclude from the absence of a rule), which its review showed H1–H4
/// did not cover. Issue 32: 37 with L8 (a held lease's cells expire
/// together, docs/design.md §5), a property of the lease the election
/// simulation showed missing: a cell written between renewals outlived
/// the holding by up to `renew_every`, and no earlier rule bounds it.
/// Issue 45: 38 with E1 (who an election's reader names, docs/design.md
/// §5b), the first rule of a reader of the lock's cells rather than of a
/// holder: a late landing (L5) let a lost leader's record be named after
/// its successor, and no earlier rule said what a reader may conclude.
/// Issue 45 also: 39 with H6 (a home record serves only from a landing
/// its writer saw, docs/design.md §4a): H3 counted the move wait from a
/// time read before the write was sent, and a write that timed out and
/// landed late let the new home serve at once; no earlier rule speaks of
/// when a write landed. And 40 with F1 (a fenced write goes where its
/// lock's home is when it is sent, docs/design.md §5): the fenced-write
/// rule held within one Paxos domain, and a writer pinned to a home it
/// once saw wrote in the old one across a move; no rule tied a fenced
/// write to the lock's home. Issue 41: 41 with C1 (a process acts as
/// legacy or queue only on a clock measured within the margin of the
/// database's, docs/design.md §4b): every earlier rule assumed the hosts'
/// clocks within `rollout.clock_skew_margin` of each other and none
/// measured it — a process ten minutes off hid its registry rows and its
/// promises from the guards and took locks as legacy beside queue holders
/// (`tests/simulation/clocks.rs`); no earlier rule speaks of what a process
/// must know of its own clock before it acts. Issue 43: 45 with P1–P4
/// (shared acquisitions, docs/design.md §3a): every earlier rule lets one
/// acquisition hold a lock at a time, so none speaks of counting holders
/// (P1), of kinds that may not share a name (P2), of the order in which
/// sharing waiters try (P3), or of which algorithms may take them (P4).
const LABEL_CEILING: usize = 45;

/// One label per rule, defined once, and every citation resolves — in
/// every `.rs` and `.md` file but this one, whose samples are not labels.
#[test]
fn every_label_is_defined_once_and_every_citation_resolves() {
    let root = root();
    let mut all = Vec::new();
    files(&root, &mut all);
    let this = Path::new(file!()).file_name().unwrap();
    let texts: Vec<(String, String)> = all
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs" || e == "md"))
        .filter(|p| p.file_name() != Some(this))
        .map(|p| {
            let path = p.strip_prefix(&root).unwrap().display().to_string();
            (path, std::fs::read_to_string(p).unwrap())
        })
        .collect();
    let found = labels(texts.iter().map(|(p, t)| (p.clone(), t.as_str())));
    assert!(
        found.defined.len() > 20,
        "the scan found only {} labels: is it looking in the right place ({})?",
        found.defined.len(),
        root.display()
    );
    let twice: Vec<_> = found
        .defined
        .iter()
        .filter(|(_, at)| at.len() > 1)
        .collect();
    assert!(
        twice.is_empty(),
        "labels defined more than once: {twice:#?}"
    );
    assert!(
        found.unresolved.is_empty(),
        "citations of labels defined nowhere (define the label as a list item, \
         `- **X1.` / `- **X1 —`, or cite the one meant): {:#?}",
        found.unresolved
    );
    assert!(
        found.defined.len() <= LABEL_CEILING,
        "{} labels defined: more than the ceiling of {LABEL_CEILING}",
        found.defined.len()
    );
}

#[test]
fn label_citations_are_recognised() {
    let cited = |rust, line| cited_labels(&prose(rust, line));
    assert_eq!(cited(true, "// see Q6 and TB12."), ["Q6", "TB12"]);
    assert_eq!(cited(true, "let C1 = T0; // K3: told"), ["K3"]);
    assert_eq!(
        cited(true, r#"panic!("broke L2: {e}", "x\"W1")"#),
        ["L2", "W1"]
    );
    assert_eq!(cited(true, "IpAddr::V4(a) => SEC1"), Vec::<String>::new());
    assert_eq!(cited(false, "(**C1**: write shadow) and R1."), ["C1", "R1"]);
    assert!(
        cited(
            false,
            "issue 19 #9, SEC1, x-K1, v.K1, a/B2, K123, ABC1, K1a, L1_"
        )
        .is_empty()
    );
    assert_eq!(
        defined_label_md("- **R2 — a stage view expires.**"),
        Some("R2".into())
    );
    assert_eq!(
        defined_label_md("- **DW1. Dead waiters.**"),
        Some("DW1".into())
    );
    assert_eq!(defined_label_md("stages (**R1**)."), None);
    assert_eq!(defined_label_md("- **Note —** x"), None);
}

#[test]
fn a_citation_that_resolves_to_nothing_is_reported() {
    let found = labels([
        (
            "a.rs".to_string(),
            "//! - **X1.** Defined.\n//! Cites X1 and Z9.\n",
        ),
        (
            "b.md".to_string(),
            "- **Y2 — defined.** Cites X1 and Y2.\nSee Z9.\n",
        ),
        ("c.rs".to_string(), "let Z9 = 1; // issue 19 #9\n"),
    ]);
    assert_eq!(found.defined.keys().collect::<Vec<_>>(), ["X1", "Y2"]);
    assert_eq!(found.unresolved, ["a.rs:2: Z9", "b.md:2: Z9"]);
}

#[test]
fn nothing_points_outside_the_repository() {
    let root = root();
    let mut all = Vec::new();
    files(&root, &mut all);
    // Spelled in pieces so this file does not match itself.
    let outside = [
        format!("../{}/", "shared"),
        format!("{}/{}", "/work", "briefs"),
        format!("{}.md", "CQL-DRIVER-CONTRACT"),
    ];
    let mut found = Vec::new();
    for path in &all {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            if outside.iter().any(|o| line.contains(o.as_str())) {
                found.push(format!(
                    "{}:{}: {}",
                    path.strip_prefix(&root).unwrap().display(),
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "references outside the repository: {found:#?}"
    );
}

/// Where each settings section's keys are documented: (section, file,
/// struct).
const SECTIONS: [(&str, &str, &str); 11] = [
    ("node", "lockshift/src/settings.rs", "NodeSettings"),
    ("store", "store/src/settings/mod.rs", "StoreSettings"),
    ("store.cql", "store/src/settings/cql.rs", "CqlSettings"),
    ("store.cql.tls", "store/src/settings/tls.rs", "TlsSettings"),
    (
        "store.embedded",
        "store/src/settings/embedded.rs",
        "EmbeddedSettings",
    ),
    ("lock", "lockshift/src/settings.rs", "LockSettings"),
    ("lock.legacy", "legacy/src/settings.rs", "LegacySettings"),
    ("lock.queue", "queue-lock/src/settings.rs", "QueueSettings"),
    ("time", "queue-lock/src/settings.rs", "TimeSettings"),
    ("rollout", "rollout/src/settings.rs", "RolloutSettings"),
    ("", "lockshift/src/settings.rs", "Settings"),
];

/// The doc comment of each `pub` field of `struct` in `text`.
fn field_docs(text: &str, name: &str) -> BTreeMap<String, String> {
    let start = text
        .find(&format!("pub struct {name} {{"))
        .unwrap_or_else(|| panic!("struct {name} not found"));
    let body = &text[start..];
    let body = &body[..body.find("\n}\n").expect("the struct ends")];
    let mut out = BTreeMap::new();
    let mut doc = String::new();
    for line in body.lines().skip(1) {
        let line = line.trim();
        if let Some(d) = line.strip_prefix("///") {
            doc.push_str(d.trim());
            doc.push(' ');
        } else if let Some(rest) = line.strip_prefix("pub ") {
            let field = rest
                .split(':')
                .next()
                .unwrap_or_default()
                .trim()
                .to_string();
            out.insert(field, std::mem::take(&mut doc));
        } else if !line.starts_with("#[") {
            doc.clear();
        }
    }
    out
}

/// Whether the documented default `said` (the text in backticks after
/// "Default:") is `value`: a duration by its length, a string with or
/// without quotes, a number, a boolean, a list as JSON.
fn same_default(said: &str, value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(v) => {
            let said = said.trim_matches('"');
            said == v
                || matches!(
                    (
                        humantime_duration(said),
                        humantime_duration(v)
                    ),
                    (Some(a), Some(b)) if a == b
                )
        }
        serde_json::Value::Number(n) => said.parse::<f64>().ok() == n.as_f64(),
        serde_json::Value::Bool(b) => said == b.to_string(),
        serde_json::Value::Array(_) => {
            serde_json::from_str::<serde_json::Value>(said)
                .ok()
                .as_ref()
                == Some(value)
        }
        // Tables (a replication map) are checked by eye.
        _ => true,
    }
}

fn humantime_duration(s: &str) -> Option<std::time::Duration> {
    // The parser the settings deserialise durations with.
    humantime::parse_duration(s).ok()
}

/// Issue 19 (C) #13: every settings key says its default in its rustdoc,
/// and says the one the code has ("Default: `60s`." or, for a key with
/// no value by default, "Default: none …").
#[test]
fn every_settings_key_documents_its_default() {
    let root = root();
    let defaults = serde_json::to_value(lockshift::Settings::default()).unwrap();
    let mut problems = Vec::new();
    let mut keys = 0;
    for (section, file, name) in SECTIONS {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let docs = field_docs(&text, name);
        let mut value = &defaults;
        for part in section.split('.').filter(|p| !p.is_empty()) {
            value = &value[part];
        }
        let serde_json::Value::Object(fields) = value else {
            panic!("{section} is not a table in the defaults");
        };
        for (field, default) in fields {
            // A nested section is checked as its own section.
            let nested = format!(
                "{section}{}{field}",
                if section.is_empty() { "" } else { "." }
            );
            if SECTIONS.iter().any(|(s, _, _)| *s == nested) {
                continue;
            }
            keys += 1;
            let Some(doc) = docs.get(field) else {
                problems.push(format!("{nested}: no doc found in {file} ({name})"));
                continue;
            };
            let Some(at) = doc.find("Default") else {
                problems.push(format!("{nested}: the doc does not say its default"));
                continue;
            };
            let said = &doc[at..];
            if default.is_null() {
                if !said.contains("none") && !said.contains("None") {
                    problems.push(format!(
                        "{nested}: the default is none, the doc says {said:?}"
                    ));
                }
                continue;
            }
            let quoted = said.split('`').nth(1).unwrap_or_default();
            if !same_default(quoted, default) {
                problems.push(format!(
                    "{nested}: the doc says the default is `{quoted}`, the code has {default}"
                ));
            }
        }
    }
    assert!(keys > 40, "only {keys} keys checked: is the scan right?");
    assert!(problems.is_empty(), "settings docs: {problems:#?}");
}

/// Issue 19 item 7: the README says when connecting stops waiting for
/// contact points as the code decides it (`StopWaiting` in
/// `store/src/cql/connect.rs`, tested as a table there): a majority, or
/// one answer once half the connect timeout has passed. It said a session
/// needed a majority.
#[test]
fn the_readme_states_the_connect_rule_the_code_follows() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let words: String = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    for said in [
        "as soon as a majority of the contact points has answered",
        "once half the connect timeout has passed with at least one answer",
        "With none answering, connecting fails when the timeout runs out",
    ] {
        assert!(words.contains(said), "the README does not say {said:?}");
    }
    assert!(
        !words.contains("A session starts while the contact points that answer are a majority"),
        "the README still says a session needs a majority"
    );
}

/// The lines (1-based) of `text` where a `thiserror` type chains a cause:
/// `#[from]` or `#[source]` outside an `#[error(transparent)]` variant, or
/// a field named `source` (thiserror chains it by its name). lockshift's
/// messages show their cause (`…: {error}`), so a chained cause is printed
/// twice by anyhow's `{:#}` — the rule is in `lockshift_lock`'s error
/// module.
fn chained_causes(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut in_error_type = false;
    let mut transparent = false;
    for (n, line) in text.lines().enumerate() {
        let code = line.trim();
        if code.starts_with("//") {
            continue;
        }
        if code.starts_with("#[derive(") && code.contains("thiserror::Error") {
            in_error_type = true;
        } else if line.starts_with('}') {
            in_error_type = false;
        }
        if code.starts_with("#[error(") {
            transparent = code.starts_with("#[error(transparent)]");
        }
        let attribute = ["#[from]", "#[source]"].iter().any(|a| code.contains(a));
        let field = ["source:", "pub source:"]
            .iter()
            .any(|f| code.starts_with(f));
        if (attribute && !transparent) || (in_error_type && field) {
            out.push(n + 1);
        }
    }
    out
}

#[test]
fn no_error_type_shows_its_cause_and_chains_it_too() {
    let root = root();
    let mut all = Vec::new();
    files(&root, &mut all);
    let this = Path::new(file!()).file_name().unwrap();
    let mut found = Vec::new();
    let mut error_types = 0;
    for path in all
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter(|p| p.file_name() != Some(this))
    {
        let text = std::fs::read_to_string(path).unwrap();
        error_types += text.matches("thiserror::Error)]").count();
        for n in chained_causes(&text) {
            found.push(format!(
                "{}:{n}",
                path.strip_prefix(&root).unwrap().display()
            ));
        }
    }
    assert!(
        error_types > 10,
        "the scan found only {error_types} error types: is it looking in the right place ({})?",
        root.display()
    );
    assert!(
        found.is_empty(),
        "causes shown in the message and chained as well (print them in the message only, \
         and convert with a hand-written `From`): {found:#?}"
    );
}

#[test]
fn chained_causes_are_recognised() {
    let text = [
        "#[derive(Debug, thiserror::Error)]",
        "pub enum E {",
        "    #[error(\"store: {0}\")]",
        "    Store(#[from] StoreError),",
        "    #[error(transparent)]",
        "    Inner(#[from] Inner),",
        "    #[error(\"io: {source}\")]",
        "    Io {",
        "        source: std::io::Error,",
        "    },",
        "    // By hand: `#[from]` would chain it.",
        "    #[error(\"bind: {0}\")]",
        "    Bind(#[source] std::io::Error),",
        "}",
        "struct Settings {",
        "    source: TimeSourceKind,",
        "}",
    ]
    .join("\n");
    assert_eq!(chained_causes(&text), [4, 9, 13]);
}
