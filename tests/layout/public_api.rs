//! The facade's public API, as rustdoc sees it (issue 44, item 3): a
//! snapshot a change to the API must update on purpose, and the check that
//! a service depending on `lockshift` alone can name every type it meets.
//!
//! rustdoc writes each crate's items as JSON (an unstable output format,
//! enabled on the stable toolchain with `RUSTC_BOOTSTRAP=1`, in a target
//! directory of its own so the workspace's build is untouched); the
//! `public-api` crate renders them one item per line. rustdoc lists an item
//! another crate defines only as a `pub use` line, so for each item the
//! facade re-exports from a workspace crate, that crate's lines for the item
//! (its variants, fields, methods and impls) are added under the facade's
//! path. Every path is then written as the facade's: a type the facade
//! exports appears by its facade path, and a workspace crate's path that is
//! left over is a type a service meets but cannot name: a finding.
//!
//! The snapshot is `lockshift/public-api.txt`; `UPDATE_SNAPSHOTS=yes cargo
//! test -p lockshift-tests --test layout public_api` rewrites it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use rustdoc_types::{Crate as Doc, Id, ItemEnum, ItemKind, Type, Visibility};

use super::{root, table_keys};

/// The facade's package.
const FACADE: &str = "lockshift";

/// The snapshot, relative to the repository.
const SNAPSHOT: &str = "lockshift/public-api.txt";

/// Workspace types the facade's API names that a service reaches through
/// the sibling crate's own API instead (path prefix, why).
const NAMED_THROUGH_SIBLING: &[(&str, &str)] = &[];

/// What the facade exports for a service to name and hand a node, whose
/// members are their crate's API: listed without them. The traits' methods
/// are for implementing a store or a clock, or reading cells through one;
/// the embedded store's methods past `new` are a simulation's knobs
/// (datacenters, faults, raw rows). A service that needs them depends on
/// `lockshift-store`.
const HELD_ONLY: &[&str] = &[
    "lockshift::store::Store",
    "lockshift::store::Clock",
    "lockshift::store::MemoryStore",
];

// ===== rustdoc JSON =====

/// The target directory the rustdoc JSON is built in, apart from the
/// workspace's build so that building it touches nothing else.
fn json_target() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root().join("target"), PathBuf::from)
        .join("public-api")
}

/// The rustdoc JSON of `packages`, built with every feature into a target
/// directory of its own: crate name (`lockshift_lock`) → its document.
fn rustdoc_json(packages: &[String]) -> BTreeMap<String, Doc> {
    let target = json_target();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(root())
        .args(["doc", "--no-deps", "--all-features", "--locked"])
        .env("CARGO_TARGET_DIR", &target)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("RUSTDOCFLAGS", "-Z unstable-options --output-format json");
    for package in packages {
        command.args(["-p", package]);
    }
    let output = command.output().expect("cargo runs");
    assert!(
        output.status.success(),
        "rustdoc's JSON of {packages:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    packages
        .iter()
        .map(|package| {
            let name = package.replace('-', "_");
            let path = target.join("doc").join(format!("{name}.json"));
            (name, read_doc(&path))
        })
        .collect()
}

fn read_doc(path: &Path) -> Doc {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let version: serde_json::Value = serde_json::from_str(&text).expect("rustdoc wrote JSON");
    let found = version["format_version"].as_u64();
    assert_eq!(
        found,
        Some(u64::from(rustdoc_types::FORMAT_VERSION)),
        "{} is rustdoc JSON format {found:?}, and this test reads format {} \
         (the workspace's rustdoc-types and public-api): move them to the \
         toolchain's format",
        path.display(),
        rustdoc_types::FORMAT_VERSION
    );
    serde_json::from_str(&text).expect("rustdoc JSON of the format rustdoc-types reads")
}

/// The facade's workspace dependencies (`lockshift-lock`, …).
fn facade_dependencies() -> Vec<String> {
    let manifest = std::fs::read_to_string(root().join(FACADE).join("Cargo.toml"))
        .expect("the facade's manifest");
    table_keys(&manifest, "dependencies")
        .into_iter()
        .filter(|key| key.starts_with("lockshift-"))
        .collect()
}

// ===== Re-exports =====

/// A `pub use` of the facade: where it puts the item, and what it names.
#[derive(Debug)]
struct Reexport {
    /// `lockshift::homes::Rule`.
    facade_path: String,
    /// The defining crate (`lockshift_decide`), and the item's path there
    /// (`lockshift_decide::home::rule::Rule`).
    krate: String,
    path: Vec<String>,
    kind: ItemKind,
}

/// Every `pub use` of the facade that names another crate's item, walked
/// from the crate root through its public modules.
fn reexports(doc: &Doc) -> Vec<Reexport> {
    let mut out = Vec::new();
    let mut stack = vec![(doc.root, FACADE.to_string())];
    while let Some((module, prefix)) = stack.pop() {
        let ItemEnum::Module(m) = &doc.index[&module].inner else {
            continue;
        };
        for child in &m.items {
            let item = &doc.index[child];
            if item.visibility != Visibility::Public {
                continue;
            }
            match &item.inner {
                ItemEnum::Module(_) => {
                    let name = item.name.as_deref().unwrap_or_default();
                    stack.push((*child, format!("{prefix}::{name}")));
                }
                ItemEnum::Use(u) => {
                    let Some(summary) = u.id.and_then(|id| doc.paths.get(&id)) else {
                        continue;
                    };
                    let Some(krate) = doc.external_crates.get(&summary.crate_id) else {
                        continue;
                    };
                    out.push(Reexport {
                        facade_path: format!("{prefix}::{}", u.name),
                        krate: krate.name.clone(),
                        path: summary.path.clone(),
                        kind: summary.kind,
                    });
                }
                _ => {}
            }
        }
    }
    out
}

/// The re-exports that bring in a workspace crate, or a module of one,
/// whole: the facade curates names instead.
fn whole(reexports: &[Reexport]) -> Vec<String> {
    reexports
        .iter()
        .filter(|r| is_workspace(&r.krate) && matches!(r.kind, ItemKind::Module))
        .map(|r| format!("{} re-exports {} whole", r.facade_path, r.path.join("::")))
        .collect()
}

fn is_workspace(krate: &str) -> bool {
    krate.starts_with("lockshift_")
}

// ===== Lines =====

fn public_api(path: PathBuf) -> public_api::PublicApi {
    public_api::Builder::from_rustdoc_json(path)
        .omit_blanket_impls(true)
        .build()
        .expect("public-api reads rustdoc's JSON")
}

/// The lines of the facade's API: its own, and for each item it
/// re-exports from a workspace crate, that crate's lines for the item and
/// what belongs to it; and the paths that name each re-exported item.
fn lines(docs: &BTreeMap<String, Doc>, target: &Path) -> (Vec<String>, BTreeMap<String, String>) {
    let json = |name: &str| target.join(format!("{name}.json"));
    let facade = &docs[FACADE];
    // An item re-exported twice (`lockshift::X`, `lockshift::prelude::X`)
    // is listed once, by its shortest path.
    let mut reexports = reexports(facade);
    reexports.sort_by_key(|r| (r.path.clone(), r.facade_path.matches("::").count()));
    reexports.dedup_by(|later, first| later.path == first.path);
    let mut renames = BTreeMap::new();
    let mut lines: Vec<String> = public_api(json(FACADE))
        .items()
        .map(ToString::to_string)
        .collect();
    let mut apis = HashMap::new();
    for r in reexports.iter().filter(|r| is_workspace(&r.krate)) {
        renames.insert(r.path.join("::"), r.facade_path.clone());
        let doc = &docs[&r.krate];
        let Some(id) = doc
            .paths
            .iter()
            .find(|(_, s)| s.crate_id == 0 && s.path == r.path)
            .map(|(id, _)| *id)
        else {
            panic!("{} is not in {}'s rustdoc JSON", r.path.join("::"), r.krate);
        };
        let api = apis
            .entry(r.krate.clone())
            .or_insert_with(|| public_api(json(&r.krate)));
        let parents: HashMap<Id, Option<Id>> =
            api.items().map(|i| (i.id(), i.parent_id())).collect();
        let name = r.path.last().expect("a path names its item");
        let held_only = HELD_ONLY.contains(&r.facade_path.as_str());
        for item in api.items() {
            let line = item.to_string();
            if item.id() == id {
                for path in paths_in(&line) {
                    if path.rsplit("::").next() == Some(name.as_str()) {
                        renames.insert(path, r.facade_path.clone());
                        break;
                    }
                }
            }
            let member = item.id() != id;
            if descends(item.id(), id, &parents, doc) && !(held_only && member) {
                lines.push(line);
            }
        }
    }
    (lines, renames)
}

/// Whether `item` is `ancestor` or belongs to it (a variant, field, impl
/// or method, at any depth). An impl belongs to the type it is for: the
/// impls of a trait for other types are theirs, not the trait's.
fn descends(item: Id, ancestor: Id, parents: &HashMap<Id, Option<Id>>, doc: &Doc) -> bool {
    let mut at = Some(item);
    // A parent seen twice is a cycle in the document: no ancestor on it.
    let mut seen = HashSet::new();
    while let Some(id) = at {
        if id == ancestor {
            return true;
        }
        if !seen.insert(id) {
            return false;
        }
        if let Some(ItemEnum::Impl(imp)) = doc.index.get(&id).map(|i| &i.inner) {
            let for_ancestor = matches!(&imp.for_, Type::ResolvedPath(p) if p.id == ancestor);
            if !for_ancestor {
                return false;
            }
        }
        at = parents.get(&id).copied().flatten();
    }
    false
}

/// The paths (`a::b::C`, two parts or more) in a rendered line, in order.
fn paths_in(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = line.chars().peekable();
    let mut parts = 0;
    let flush = |current: &mut String, parts: &mut usize, out: &mut Vec<String>| {
        let path = current.trim_end_matches(':');
        if *parts >= 2 {
            out.push(path.to_string());
        }
        current.clear();
        *parts = 0;
    };
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            if current.is_empty() || current.ends_with(':') {
                parts += 1;
            }
            current.push(c);
        } else if c == ':' && chars.peek() == Some(&':') && !current.is_empty() {
            chars.next();
            current.push_str("::");
        } else {
            flush(&mut current, &mut parts, &mut out);
        }
    }
    flush(&mut current, &mut parts, &mut out);
    out
}

/// `line` with each path that starts with a renamed path (whole parts)
/// written from the facade's path on, the longest such prefix first.
fn rename(line: &str, renames: &BTreeMap<String, String>) -> String {
    let mut out = line.to_string();
    let mut paths = paths_in(line);
    paths.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for path in paths {
        let parts: Vec<&str> = path.split("::").collect();
        let renamed = (1..=parts.len()).rev().find_map(|n| {
            let prefix = parts[..n].join("::");
            renames
                .get(&prefix)
                .map(|to| [to.as_str()].into_iter().chain(parts[n..].iter().copied()))
        });
        if let Some(renamed) = renamed {
            let renamed: Vec<&str> = renamed.collect();
            out = replace_path(&out, &path, &renamed.join("::"));
        }
    }
    out
}

/// `text` with `path` replaced where it stands as a whole path.
fn replace_path(text: &str, path: &str, with: &str) -> String {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    while let Some(k) = text[from..].find(path) {
        let at = from + k;
        let end = at + path.len();
        let (before, after) = (&text[..at], &text[end..]);
        let whole = !ident(before.chars().last())
            && !before.ends_with("::")
            && !ident(after.chars().next())
            && !after.starts_with("::");
        out.push_str(&text[from..at]);
        out.push_str(if whole { with } else { path });
        from = end;
    }
    out.push_str(&text[from..]);
    out
}

/// The workspace paths left in `lines` once renamed: types the facade's
/// API names that a service depending on `lockshift` alone cannot name.
fn unexported(lines: &[String]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in lines {
        for path in paths_in(line) {
            let krate = path.split("::").next().unwrap_or_default();
            let allowed = NAMED_THROUGH_SIBLING
                .iter()
                .any(|(prefix, _)| path.starts_with(prefix));
            if is_workspace(krate) && !allowed {
                out.entry(path).or_insert_with(|| line.clone());
            }
        }
    }
    out
}

// ===== The checks =====

#[test]
fn the_facade_api_matches_its_snapshot_and_names_only_what_it_exports() {
    let mut packages = vec![FACADE.to_string()];
    packages.extend(facade_dependencies());
    let docs = rustdoc_json(&packages);
    let target = json_target().join("doc");

    let whole = whole(&reexports(&docs[FACADE]));
    assert!(whole.is_empty(), "the facade curates names: {whole:#?}");

    let (lines, renames) = lines(&docs, &target);
    let lines: BTreeSet<String> = lines.iter().map(|l| rename(l, &renames)).collect();
    let lines: Vec<String> = lines.into_iter().collect();

    let unexported = unexported(&lines);
    assert!(
        unexported.is_empty(),
        "the facade's API names workspace types it does not export (export \
         them, or keep them out of the API):\n{}",
        unexported
            .iter()
            .map(|(path, line)| format!("  {path}\n    in: {line}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    for (prefix, why) in NAMED_THROUGH_SIBLING {
        assert!(
            lines.iter().any(|l| l.contains(prefix)),
            "NAMED_THROUGH_SIBLING lists {prefix} ({why}), which the API no longer names"
        );
    }

    let text = lines.join("\n") + "\n";
    let snapshot = root().join(SNAPSHOT);
    if std::env::var("UPDATE_SNAPSHOTS").is_ok_and(|v| v == "yes") {
        std::fs::write(&snapshot, &text).expect("the snapshot is writable");
        return;
    }
    let old = std::fs::read_to_string(&snapshot).unwrap_or_default();
    let old: BTreeSet<&str> = old.lines().collect();
    let new: BTreeSet<&str> = text.lines().collect();
    let gone: Vec<_> = old.difference(&new).collect();
    let added: Vec<_> = new.difference(&old).collect();
    assert!(
        gone.is_empty() && added.is_empty(),
        "the facade's public API differs from {SNAPSHOT}; if the change is \
         meant, rerun with UPDATE_SNAPSHOTS=yes and commit the file.\n\
         gone: {gone:#?}\nadded: {added:#?}"
    );
}

#[test]
fn a_renamed_path_is_written_as_the_facade_path_and_a_left_over_one_is_found() {
    let renames = BTreeMap::from([
        (
            "lockshift_lock::error::AcquireError".to_string(),
            "lockshift::AcquireError".to_string(),
        ),
        (
            "lockshift_lock::AcquireError".to_string(),
            "lockshift::AcquireError".to_string(),
        ),
    ]);
    let line = "pub lockshift_lock::AcquireError::Timeout::waited: \
                lockshift_lock::error::AcquireErrorKind -> lockshift_lock::error::AcquireError";
    let renamed = rename(line, &renames);
    assert_eq!(
        renamed,
        "pub lockshift::AcquireError::Timeout::waited: \
         lockshift_lock::error::AcquireErrorKind -> lockshift::AcquireError"
    );
    let found = unexported(&[renamed]);
    assert_eq!(
        found.keys().collect::<Vec<_>>(),
        ["lockshift_lock::error::AcquireErrorKind"]
    );
}

#[test]
fn paths_are_read_whole() {
    assert_eq!(
        paths_in("impl core::convert::From<a::B> for c::D<'_, x>"),
        ["core::convert::From", "a::B", "c::D"]
    );
}
