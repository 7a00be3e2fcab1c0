//! The crate map of docs/design.md §7, checked on the manifests and
//! sources rather than trusted:
//!
//! - the map itself is read from §7's table ([`crate_map`]): every row
//!   imports only crates on earlier rows;
//! - each workspace crate's `[dependencies]` name only the workspace crates
//!   its row of the map lists (no *do* crate imports an *operate* crate);
//! - `lockshift-decide`, the crate of pure decisions, names no async
//!   runtime, store client, random source, logger or other lockshift crate
//!   (its `Cargo.toml` and every source file, comments included) and holds
//!   no `async fn` and no `.await`;
//! - no source file hides a public item from the docs with `#[doc(hidden)]`
//!   (issue 21: every public item is documented API, or `pub(crate)`),
//!   but for the items of [`HIDDEN_ALLOWED`] (none now), each with its
//!   reason;
//! - no library source file is longer than [`MAX_LIBRARY_LINES`] lines (a
//!   file of tests beside its module, `tests.rs` or `*_tests.rs`, is not a
//!   library file);
//! - the facade's public API is its snapshot, and names only what the
//!   facade exports (`public_api.rs`);
//! - every state diagram draws the code's names: its states, their fields
//!   and its arrows' actions (`diagrams.rs`).
//!
//! The checks are plain text scans (no TOML parser), so they are kept
//! small and each has a unit test on a sample that must fail; the public
//! API's alone reads rustdoc's JSON, through the `public-api` crate.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

mod diagrams;
mod packaging;
mod public_api;
mod scan;

/// Where the crate map lives: the table of this section of the design
/// document, one row per crate, whose last column says what it may import.
const MAP_FILE: &str = "docs/design.md";
const MAP_SECTION: &str = "## 7. Layout";

/// The crate of pure decisions.
const DECIDE: &str = "lockshift-decide";

/// Crates `decide` must never name: each does I/O, keeps time, draws random
/// numbers or logs. As they appear in a manifest (`-`) and in Rust
/// (`_`); the scan matches whole identifiers, so "random" or "brand" do not
/// count, and any `lockshift-…`/`lockshift_…` identifier counts as another
/// lockshift crate.
const FORBIDDEN_IN_DECIDE: &[&str] = &[
    "tokio",
    "tokio-util",
    "tokio_util",
    "async-trait",
    "async_trait",
    "futures",
    "scylla",
    "rand",
    "tracing",
];

/// The public items still hidden from the docs: (file, the start of the
/// item's first line). Empty since the facade owns the guard; kept so the
/// check has its list. An entry that no longer matches
/// anything fails the check too, so the list never names what is gone.
const HIDDEN_ALLOWED: &[(&str, &str)] = &[];

/// The longest a library source file may be: past it, a file holds more
/// than one concern and is cut along its seams.
const MAX_LIBRARY_LINES: usize = 600;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

// ===== Reading manifests =====

/// The keys of the manifest table `section` (`dependencies`,
/// `dev-dependencies`, …): `name = …` and `name.workspace = true` lines
/// under `[section]`, and `[section.name]` headers. Target-specific tables
/// (`[target.'cfg(…)'.dependencies]`) count as `section` too.
fn table_keys(manifest: &str, section: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut inside = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            let header = header.trim_end_matches(']').trim();
            let header = match header.strip_prefix("target.") {
                // `target.'cfg(unix)'.dependencies` → `dependencies`
                Some(rest) => rest.rsplit_once("'.").map_or(rest, |(_, t)| t),
                None => header,
            };
            inside = header == section;
            if let Some(name) = header
                .strip_prefix(section)
                .and_then(|r| r.strip_prefix('.'))
            {
                keys.push(name.trim_matches('"').to_string());
            }
            continue;
        }
        if inside {
            let key: String = line
                .chars()
                .take_while(|c| !matches!(c, '=' | '.' | ' '))
                .collect();
            keys.push(key.trim_matches('"').to_string());
        }
    }
    keys
}

/// The value of `key = "…"` in the manifest's `[package]` table.
fn package_field(manifest: &str, key: &str) -> Option<String> {
    let mut inside = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[package]";
        } else if inside {
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            if k.trim() == key {
                return Some(v.trim().trim_matches('"').to_string());
            }
        }
    }
    None
}

/// The workspace members listed in the root manifest, as directories.
fn members(root_manifest: &str) -> Vec<String> {
    let start = root_manifest
        .find("members = [")
        .expect("the root manifest lists its members");
    let list = &root_manifest[start + "members = [".len()..];
    let list = &list[..list.find(']').expect("the members list ends")];
    list.split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

// ===== The checks =====

/// Each dependency of `krate` on a workspace crate (one of `workspace`)
/// that its row of `allowed` does not list, and `krate` itself if it has no
/// row.
fn forbidden_edges(
    krate: &str,
    dependencies: &[String],
    workspace: &[String],
    allowed: &[(String, Vec<String>)],
) -> Vec<String> {
    let Some((_, row)) = allowed.iter().find(|(name, _)| name == krate) else {
        return vec![format!(
            "{krate} is not in the crate map: give it a row in {MAP_FILE} ({MAP_SECTION})"
        )];
    };
    dependencies
        .iter()
        .filter(|d| workspace.contains(d) && !row.contains(d))
        .map(|d| format!("{krate} depends on {d}, which its row of the crate map does not allow"))
        .collect()
}

/// The identifiers of `text`: maximal runs of letters, digits, `_` and
/// `-` (so `tokio-util` and `tokio_util` are one word each, and a manifest
/// key is one word), with the text position of each.
fn words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let mut start = None;
    let mut out = Vec::new();
    for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
        match (is_word(c), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, &text[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    out.into_iter()
}

/// What `text` (a file of `decide`, named `file`) names that `decide`
/// must not: a forbidden crate, another lockshift crate (`own` is the
/// crate's own package name, which its manifest must state), an
/// `async fn` or an `.await`. One line per finding, with its line number.
fn forbidden_names(file: &str, text: &str, own: &str) -> Vec<String> {
    let mut found = Vec::new();
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    for (at, word) in words(text) {
        let word = word.trim_matches('-');
        let other_lockshift = (word.starts_with("lockshift_") || word.starts_with("lockshift-"))
            && word != own
            && word != own.replace('-', "_");
        if FORBIDDEN_IN_DECIDE.contains(&word) || other_lockshift {
            found.push(format!("{file}:{}: names `{word}`", line_of(at)));
        }
    }
    for (pattern, what) in [("async fn", "an `async fn`"), (".await", "an `.await`")] {
        for (at, _) in text.match_indices(pattern) {
            found.push(format!("{file}:{}: has {what}", line_of(at)));
        }
    }
    found
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether the source line `line` is an attribute that hides an item from
/// the docs: `#[doc(hidden)]`, `#![doc(hidden)]`, or `doc(hidden)` among
/// other arguments (`#[doc(hidden, …)]`, `#[cfg_attr(…, doc(hidden))]`).
fn hides(line: &str) -> bool {
    let line = line.trim_start();
    (line.starts_with("#[") || line.starts_with("#![")) && line.contains("doc(hidden")
}

/// Each item of `text` hidden from the docs: (line number of the
/// attribute, the item's first line, trimmed). The item is what follows the
/// attribute on its line, or else the next line that is neither an
/// attribute nor a comment.
fn hidden_items(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if !hides(line) {
            continue;
        }
        let line = line.trim();
        let after = line[line.find(']').map_or(line.len(), |end| end + 1)..].trim();
        let item = if after.is_empty() || after.starts_with("//") {
            lines[i + 1..]
                .iter()
                .map(|l| l.trim())
                .find(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with('#'))
                .unwrap_or("")
        } else {
            after
        };
        found.push((i + 1, item.to_string()));
    }
    found
}

/// What the `#[doc(hidden)]` check reports, given every hidden item found
/// (file relative to the repository, line, item): each item `allowed` does
/// not list, and each entry of `allowed` that matches no item.
fn unlisted_hidden(found: &[(String, usize, String)], allowed: &[(&str, &str)]) -> Vec<String> {
    let listed = |file: &str, item: &str| {
        allowed
            .iter()
            .any(|(f, start)| *f == file && item.starts_with(start))
    };
    let mut problems: Vec<String> = found
        .iter()
        .filter(|(file, _, item)| !listed(file, item))
        .map(|(file, line, item)| {
            format!(
                "{file}:{line}: `{item}` is hidden from the docs: document it, or make it pub(crate)"
            )
        })
        .collect();
    for (file, start) in allowed {
        if !found
            .iter()
            .any(|(f, _, item)| f == file && item.starts_with(start))
        {
            problems.push(format!(
                "{file}: nothing hidden starts with `{start}`: remove it from HIDDEN_ALLOWED (tests/layout/main.rs)"
            ));
        }
    }
    problems
}

/// Every `.rs` file of the repository, build output and hidden directories
/// (`.git`) left out.
fn repository_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                repository_sources(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// Whether `path` holds only tests: `tests.rs`, or `*_tests.rs` beside the
/// module it tests.
fn is_test_file(path: &Path) -> bool {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    name == "tests.rs" || name.ends_with("_tests.rs")
}

/// The files of `files` (path, line count) longer than the limit, as
/// messages; test files are not counted.
fn too_long(files: &[(PathBuf, usize)], limit: usize) -> Vec<String> {
    files
        .iter()
        .filter(|(path, lines)| *lines > limit && !is_test_file(path))
        .map(|(path, lines)| {
            format!(
                "{}: {lines} lines, over {limit}: cut it along its seams",
                path.display()
            )
        })
        .collect()
}

/// The crate map read from the table of `section` in `design`: (package,
/// the packages it may import), in the table's order. A row's first cell
/// names the package in backticks; its last cell lists what it may import
/// by short name (`store` for `lockshift-store`, `lockshift` for the
/// facade), or `—` for nothing. Every import must name a crate on an
/// earlier row: that is the layering.
fn crate_map(design: &str, section: &str) -> Result<Vec<(String, Vec<String>)>, String> {
    let start = design
        .find(section)
        .ok_or_else(|| format!("no section {section:?}"))?;
    let body = &design[start + section.len()..];
    let body = &body[..body.find("\n## ").unwrap_or(body.len())];
    let mut map: Vec<(String, Vec<String>)> = Vec::new();
    for line in body.lines() {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        let Some(name) = cells
            .first()
            .and_then(|c| c.strip_prefix('`')?.strip_suffix('`'))
            .filter(|n| n.starts_with("lockshift"))
        else {
            continue;
        };
        let imports = cells.last().copied().unwrap_or_default();
        let mut row = Vec::new();
        if imports != "—" {
            for short in imports.split(',').map(str::trim) {
                let package = if short == "lockshift" {
                    short.to_string()
                } else {
                    format!("lockshift-{short}")
                };
                if !map.iter().any(|(earlier, _)| *earlier == package) {
                    return Err(format!(
                        "{name} may import {short:?}, which is not on an earlier row"
                    ));
                }
                row.push(package);
            }
        }
        map.push((name.to_string(), row));
    }
    if map.is_empty() {
        return Err(format!("section {section:?} has no crate table"));
    }
    Ok(map)
}

/// The map of the design document.
fn the_crate_map() -> Vec<(String, Vec<String>)> {
    let design = std::fs::read_to_string(root().join(MAP_FILE)).unwrap();
    crate_map(&design, MAP_SECTION).unwrap_or_else(|e| panic!("{MAP_FILE} {MAP_SECTION}: {e}"))
}

// ===== The tests =====

/// Every workspace member: (directory, package name, manifest text).
fn workspace() -> Vec<(String, String, String)> {
    let root = root();
    let root_manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    members(&root_manifest)
        .into_iter()
        .map(|dir| {
            let manifest = std::fs::read_to_string(root.join(&dir).join("Cargo.toml"))
                .unwrap_or_else(|e| panic!("{dir}/Cargo.toml: {e}"));
            let name = package_field(&manifest, "name")
                .unwrap_or_else(|| panic!("{dir}/Cargo.toml has no package name"));
            (dir, name, manifest)
        })
        .collect()
}

#[test]
fn every_crate_depends_only_on_crates_its_row_allows() {
    let crates = workspace();
    assert!(
        crates.len() >= 10,
        "found only {} workspace members: is the root manifest read right?",
        crates.len()
    );
    let names: Vec<String> = crates.iter().map(|(_, name, _)| name.clone()).collect();
    let map = the_crate_map();
    let mut problems = Vec::new();
    let mut edges = 0;
    for (dir, name, manifest) in &crates {
        let dependencies = table_keys(manifest, "dependencies");
        edges += dependencies.iter().filter(|d| names.contains(d)).count();
        for p in forbidden_edges(name, &dependencies, &names, &map) {
            problems.push(format!("{dir}/Cargo.toml: {p}"));
        }
    }
    // The graph has over 30 edges between workspace crates; a scan that
    // finds almost none is reading the manifests wrong.
    assert!(edges >= 20, "found only {edges} workspace edges");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn decide_names_no_io_crate_and_holds_no_async_code() {
    let crates = workspace();
    let (dir, _, manifest) = crates
        .iter()
        .find(|(_, name, _)| name == DECIDE)
        .expect("lockshift-decide is a workspace member");
    let mut problems = Vec::new();
    // The whole manifest, so every dependency table counts, not only
    // `[dependencies]`.
    problems.extend(forbidden_names(
        &format!("{dir}/Cargo.toml"),
        manifest,
        DECIDE,
    ));
    let mut files = Vec::new();
    rust_files(&root().join(dir), &mut files);
    assert!(!files.is_empty(), "no sources found under {dir}");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let shown = file.strip_prefix(root()).unwrap().display().to_string();
        problems.extend(forbidden_names(&shown, &text, DECIDE));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_public_item_is_hidden_from_the_docs_but_the_listed_ones() {
    let root = root();
    let mut files = Vec::new();
    repository_sources(&root, &mut files);
    assert!(
        files.len() >= 100,
        "found only {} source files: is the repository walked right?",
        files.len()
    );
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let shown = file.strip_prefix(&root).unwrap().display().to_string();
        for (line, item) in hidden_items(&text) {
            found.push((shown.clone(), line, item));
        }
    }
    let problems = unlisted_hidden(&found, HIDDEN_ALLOWED);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ===== The checks' own tests =====

const SAMPLE_MANIFEST: &str = r#"
[package]
name = "lockshift-sample"

[dependencies]
lockshift-store.workspace = true
lockshift-lock = { workspace = true, features = ["x"] }
serde.workspace = true

[dependencies.lockshift-legacy]
workspace = true

[target.'cfg(unix)'.dependencies]
lockshift-combined.workspace = true

[dev-dependencies]
lockshift-migration-tool.workspace = true
"#;

#[test]
fn no_library_file_is_over_the_line_limit() {
    let root = root();
    let mut files = Vec::new();
    for (dir, _, _) in workspace() {
        let mut sources = Vec::new();
        rust_files(&root.join(&dir).join("src"), &mut sources);
        for path in sources {
            let lines = std::fs::read_to_string(&path).unwrap().lines().count();
            files.push((path.strip_prefix(&root).unwrap().to_path_buf(), lines));
        }
    }
    assert!(
        files.len() >= 100,
        "found only {} source files",
        files.len()
    );
    let problems = too_long(&files, MAX_LIBRARY_LINES);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_long_library_file_is_reported_and_a_long_test_file_is_not() {
    let files = [
        (PathBuf::from("a/src/big.rs"), 601),
        (PathBuf::from("a/src/fits.rs"), 600),
        (PathBuf::from("a/src/big_tests.rs"), 900),
        (PathBuf::from("a/src/line/tests.rs"), 900),
        (PathBuf::from("a/src/contests.rs"), 700),
    ];
    assert_eq!(
        too_long(&files, 600),
        [
            "a/src/big.rs: 601 lines, over 600: cut it along its seams",
            "a/src/contests.rs: 700 lines, over 600: cut it along its seams",
        ]
    );
}

#[test]
fn manifest_keys_are_read_from_every_form() {
    assert_eq!(
        table_keys(SAMPLE_MANIFEST, "dependencies"),
        [
            "lockshift-store",
            "lockshift-lock",
            "serde",
            "lockshift-legacy",
            "lockshift-combined"
        ]
    );
    assert_eq!(
        table_keys(SAMPLE_MANIFEST, "dev-dependencies"),
        ["lockshift-migration-tool"]
    );
    assert_eq!(
        package_field(SAMPLE_MANIFEST, "name").as_deref(),
        Some("lockshift-sample")
    );
    assert_eq!(
        members("[workspace]\nmembers = [\n    \"decide\",\n    \"store\",\n]\n"),
        ["decide", "store"]
    );
}

#[test]
fn the_map_is_read_from_its_table_and_an_import_from_a_later_row_is_refused() {
    let design = "# D\n## 7. Layout\n\nText.\n\n| crate | dir | does | may import |\n|---|---|---|---|\n\
        | `lockshift-decide` | `decide/` | decides | — |\n\
        | `lockshift-store` | `store/` | stores | decide |\n\
        | `lockshift` | `lockshift/` | the facade | decide, store |\n\
        | `lockshift-tests` | `tests/` | tests | lockshift, store |\n\n## 8. Next\n\
        | `lockshift-after` | `after/` | not in §7 | decide |\n";
    let map = crate_map(design, "## 7. Layout").unwrap();
    let strings = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    assert_eq!(
        map,
        [
            ("lockshift-decide".to_string(), vec![]),
            (
                "lockshift-store".to_string(),
                strings(&["lockshift-decide"])
            ),
            (
                "lockshift".to_string(),
                strings(&["lockshift-decide", "lockshift-store"])
            ),
            (
                "lockshift-tests".to_string(),
                strings(&["lockshift", "lockshift-store"])
            ),
        ]
    );
    let upward = design.replace("| stores | decide |", "| stores | decide, lockshift |");
    assert_eq!(
        crate_map(&upward, "## 7. Layout"),
        Err("lockshift-store may import \"lockshift\", which is not on an earlier row".into())
    );
    assert!(crate_map(design, "## 9. Missing").is_err());
    // The real map has every workspace crate in it, decide first.
    let real = the_crate_map();
    assert_eq!(real[0], ("lockshift-decide".to_string(), vec![]));
    assert!(real.len() >= 12, "{real:?}");
}

#[test]
fn a_forbidden_edge_is_reported_and_an_allowed_one_is_not() {
    let workspace: Vec<String> = [
        "lockshift-store",
        "lockshift-lock",
        "lockshift-legacy",
        "lockshift-combined",
        "lockshift-migration-tool",
    ]
    .map(String::from)
    .to_vec();
    let allowed = [(
        "lockshift-sample".to_string(),
        ["lockshift-store", "lockshift-lock", "lockshift-legacy"]
            .map(String::from)
            .to_vec(),
    )];
    let deps = table_keys(SAMPLE_MANIFEST, "dependencies");
    // combined is not on the sample's row; the dev-dependency on the tool
    // is not looked at; serde is not a workspace crate.
    assert_eq!(
        forbidden_edges("lockshift-sample", &deps, &workspace, &allowed),
        [
            "lockshift-sample depends on lockshift-combined, which its row of the crate map does not allow"
        ]
    );
    assert_eq!(
        forbidden_edges("lockshift-other", &deps, &workspace, &allowed),
        ["lockshift-other is not in the crate map: give it a row in docs/design.md (## 7. Layout)"]
    );
    // The real map: the store may not reach up to the lock.
    let map = the_crate_map();
    let store = ["lockshift-decide", "lockshift-lock"].map(String::from);
    let all = ["lockshift-decide", "lockshift-lock"].map(String::from);
    assert_eq!(
        forbidden_edges("lockshift-store", &store, &all, &map),
        [
            "lockshift-store depends on lockshift-lock, which its row of the crate map does not allow"
        ]
    );
    assert!(forbidden_edges("lockshift-decide", &[], &all, &map).is_empty());
}

#[test]
fn a_forbidden_name_or_async_code_in_decide_is_reported() {
    let sample = "//! Decides.\n\
                  use std::time::Duration;\n\
                  use tokio_util::sync::CancellationToken;\n\
                  // A random pick, brand new: neither word is a crate.\n\
                  pub async fn wait(d: Duration) { lockshift_store::sleep(d).await }\n\
                  fn own() -> &'static str { \"lockshift-decide\" }\n";
    assert_eq!(
        forbidden_names("decide/src/x.rs", sample, DECIDE),
        [
            "decide/src/x.rs:3: names `tokio_util`",
            "decide/src/x.rs:5: names `lockshift_store`",
            "decide/src/x.rs:5: has an `async fn`",
            "decide/src/x.rs:5: has an `.await`",
        ]
    );
    let manifest = "[package]\nname = \"lockshift-decide\"\n[dependencies]\nserde.workspace = true\nrand.workspace = true\n";
    assert_eq!(
        forbidden_names("Cargo.toml", manifest, DECIDE),
        ["Cargo.toml:5: names `rand`"]
    );
    assert!(
        forbidden_names(
            "ok.rs",
            "use serde::Serialize; // random, operand\n",
            DECIDE
        )
        .is_empty()
    );
}

#[test]
fn a_hidden_item_off_the_list_and_a_stale_entry_are_reported() {
    // Built from pieces, so that no line of this file is an attribute the
    // check itself would find.
    let attribute = ["#[doc", "(hidden)]"].concat();
    let conditional = ["#[cfg_attr(test, doc", "(hidden))]"].concat();
    let sample = format!(
        "/// Documented.\npub fn shown() {{}}\n\
         {attribute}\n/// Still hidden.\n#[must_use]\npub fn listed() -> u8 {{ 1 }}\n\
         {attribute} // a reason\npub struct Off;\n\
         {conditional} pub use inner::Other;\n\
         // {attribute} in a comment hides nothing\n"
    );
    assert_eq!(
        hidden_items(&sample),
        [
            (3, "pub fn listed() -> u8 { 1 }".to_string()),
            (7, "pub struct Off;".to_string()),
            (9, "pub use inner::Other;".to_string()),
        ]
    );
    let found: Vec<(String, usize, String)> = hidden_items(&sample)
        .into_iter()
        .map(|(line, item)| ("x/src/lib.rs".to_string(), line, item))
        .collect();
    let allowed: &[(&str, &str)] = &[
        ("x/src/lib.rs", "pub fn listed("),
        ("x/src/lib.rs", "pub use inner::Other;"),
        ("x/src/other.rs", "pub fn gone("),
    ];
    assert_eq!(
        unlisted_hidden(&found, allowed),
        [
            "x/src/lib.rs:7: `pub struct Off;` is hidden from the docs: document it, or make it pub(crate)",
            "x/src/other.rs: nothing hidden starts with `pub fn gone(`: remove it from HIDDEN_ALLOWED (tests/layout/main.rs)",
        ]
    );
    assert!(unlisted_hidden(&found[..1], &allowed[..1]).is_empty());
}
