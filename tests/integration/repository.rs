//! Checks on the repository's own text: invariant labels are defined once
//! across the workspace (a label cited in one crate must not mean something
//! else in another), and no document or comment points outside the
//! repository.

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

#[test]
fn invariant_labels_are_defined_once_across_the_workspace() {
    let root = root();
    let mut all = Vec::new();
    files(&root, &mut all);
    let mut defined: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in all
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        let text = std::fs::read_to_string(path).unwrap();
        for (n, line) in text.lines().enumerate() {
            if let Some(label) = defined_label(line) {
                let at = format!("{}:{}", path.strip_prefix(&root).unwrap().display(), n + 1);
                defined.entry(label).or_default().push(at);
            }
        }
    }
    assert!(
        defined.len() > 30,
        "the scan found only {} labels: is it looking in the right place ({})?",
        defined.len(),
        root.display()
    );
    let twice: Vec<_> = defined.iter().filter(|(_, at)| at.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "labels defined more than once: {twice:#?}"
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
