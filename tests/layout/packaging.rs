//! A publishable workspace (issue 31 item 3): what `cargo package` and
//! crates.io need of the manifests, checked on every test run — `.ci/run`
//! then packages the publishable crates with their verification build.
//!
//! - every internal dependency names its version beside its path;
//! - a crate is either `publish = false` or carries what a user reads on
//!   crates.io and docs.rs: description, license, readme, keywords,
//!   categories, documentation, `[package.metadata.docs.rs]`;
//! - `lockshift`, and every workspace crate it needs at run time, is
//!   publishable;
//! - no `repository` (lockshift has no public one: an address that does
//!   not exist is worse than none);
//! - the changelog starts at the workspace's version, and the README shows
//!   the crates.io form of the dependency.

use super::{package_field, root, table_keys, workspace};

/// The `[workspace.dependencies]` entries of `root_manifest` that have a
/// `path` but no `version`.
fn unversioned_paths(root_manifest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in root_manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[workspace.dependencies]";
            continue;
        }
        if inside && line.contains("path =") && !line.contains("version =") {
            let name = line.split('=').next().unwrap_or(line).trim();
            out.push(name.to_string());
        }
    }
    out
}

/// What `manifest` (of package `name`) lacks to be published: nothing for
/// a `publish = false` crate.
fn missing_metadata(name: &str, manifest: &str) -> Vec<String> {
    if package_field(manifest, "publish").as_deref() == Some("false") {
        return Vec::new();
    }
    let mut out = Vec::new();
    for key in [
        "description",
        "license",
        "readme",
        "keywords",
        "categories",
        "documentation",
    ] {
        let has = package_field(manifest, key).is_some()
            || package_field(manifest, &format!("{key}.workspace")).as_deref() == Some("true");
        if !has {
            out.push(format!("{name}: no {key}"));
        }
    }
    if !manifest.contains("[package.metadata.docs.rs]") {
        out.push(format!("{name}: no [package.metadata.docs.rs]"));
    }
    out
}

/// Whether `manifest` names a `repository`, in `[package]` or
/// `[workspace.package]`.
fn names_a_repository(manifest: &str) -> bool {
    let mut inside = false;
    manifest.lines().any(|line| {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[package]" || line == "[workspace.package]";
            return false;
        }
        inside && line.starts_with("repository")
    })
}

#[test]
fn every_internal_dependency_names_its_version() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    assert_eq!(unversioned_paths(&manifest), Vec::<String>::new());
    assert!(
        !names_a_repository(&manifest),
        "the workspace names a repository lockshift does not have"
    );
}

#[test]
fn lockshift_and_what_it_needs_are_publishable_and_the_rest_say_they_are_not() {
    let crates = workspace();
    let mut problems = Vec::new();
    for (_, name, manifest) in &crates {
        problems.extend(missing_metadata(name, manifest));
        if names_a_repository(manifest) {
            problems.push(format!("{name}: names a repository"));
        }
    }
    // `lockshift` and its workspace dependencies, transitively: a user's
    // `cargo add lockshift` needs every one of them on crates.io.
    let mut needed = vec!["lockshift".to_string()];
    let mut seen = Vec::new();
    while let Some(name) = needed.pop() {
        if seen.contains(&name) {
            continue;
        }
        let (_, _, manifest) = crates
            .iter()
            .find(|(_, n, _)| *n == name)
            .unwrap_or_else(|| panic!("{name} is not a workspace crate"));
        if package_field(manifest, "publish").as_deref() == Some("false") {
            problems.push(format!("{name} is needed by lockshift but publish = false"));
        }
        needed.extend(
            table_keys(manifest, "dependencies")
                .into_iter()
                .filter(|d| crates.iter().any(|(_, n, _)| n == d)),
        );
        seen.push(name);
    }
    assert_eq!(problems, Vec::<String>::new());
}

#[test]
fn the_changelog_starts_at_this_release_and_the_readme_shows_the_crates_io_form() {
    let root = root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let version = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("version = "))
        .map(|v| v.trim_matches('"').to_string())
        .expect("the workspace version");
    let changelog = std::fs::read_to_string(root.join("CHANGELOG.md")).unwrap();
    assert!(changelog.starts_with("# Changelog\n"), "Keep a Changelog");
    let releases: Vec<&str> = changelog
        .lines()
        .filter(|l| l.starts_with("## ["))
        .collect();
    assert!(
        releases
            .last()
            .is_some_and(|r| r.starts_with(&format!("## [{version}]"))),
        "the first release listed is {version}: {releases:?}"
    );
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let minor = version
        .rsplit_once('.')
        .map_or(version.as_str(), |(m, _)| m);
    assert!(
        readme.contains(&format!("lockshift = \"{minor}\"")),
        "the README shows `lockshift = \"{minor}\"`"
    );
}

/// The checks themselves, on manifests that break each rule.
#[test]
fn a_path_without_a_version_missing_metadata_and_a_repository_are_reported() {
    let root_manifest = "[workspace.dependencies]\n\
                         a = { path = \"a\", version = \"=0.1.0\" }\n\
                         b = { path = \"b\" }\n\
                         tokio = \"1\"\n\
                         [workspace.package]\n\
                         repository = \"https://example.invalid/x\"\n";
    assert_eq!(unversioned_paths(root_manifest), ["b"]);
    assert!(names_a_repository(root_manifest));
    let bare = "[package]\nname = \"b\"\ndescription = \"d\"\n";
    assert_eq!(
        missing_metadata("b", bare),
        [
            "b: no license",
            "b: no readme",
            "b: no keywords",
            "b: no categories",
            "b: no documentation",
            "b: no [package.metadata.docs.rs]",
        ]
    );
    let private = "[package]\nname = \"c\"\npublish = false\n";
    assert_eq!(missing_metadata("c", private), Vec::<String>::new());
    let inherited = "[package]\nname = \"d\"\ndescription = \"d\"\n\
                     license.workspace = true\nreadme.workspace = true\n\
                     keywords.workspace = true\ncategories.workspace = true\n\
                     documentation = \"https://docs.rs/d\"\n\n\
                     [package.metadata.docs.rs]\nall-features = true\n";
    assert_eq!(missing_metadata("d", inherited), Vec::<String>::new());
    assert!(!names_a_repository(inherited));
}
