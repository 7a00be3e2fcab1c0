//! Programs outside the workspace, depending only on `lockshift`, built with
//! cargo as projects of their own and run against a `migrate serve` of this
//! build: `examples/quickstart` (issue 13: a lock in at most 15 lines) and
//! the README's "Using the lock in a service" as written (issue 19 item 3).

// Integration tests: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::command;
use tokio::io::{AsyncBufReadExt, BufReader};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("migration-tool sits in the repository")
        .to_path_buf()
}

#[test]
fn the_quickstart_is_at_most_fifteen_lines_and_names_only_lockshift() {
    let root = repository().join("examples/quickstart");
    let main = std::fs::read_to_string(root.join("src/main.rs")).unwrap();
    let lines = main.lines().count();
    assert!(
        lines <= 15,
        "examples/quickstart/src/main.rs has {lines} lines"
    );
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let deps: Vec<&str> = manifest
        .split("[dependencies]")
        .nth(1)
        .expect("a [dependencies] table")
        .lines()
        .take_while(|l| !l.starts_with('['))
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect();
    assert_eq!(deps.len(), 1, "one dependency: {deps:?}");
    assert!(deps[0].starts_with("lockshift "), "{deps:?}");
}

/// A crate outside the workspace whose only dependency is `lockshift`,
/// built offline into a target directory of its own; returns its binary.
///
/// The crate lives in a scratch directory (the repository stays clean);
/// its `lockshift` dependency points at this checkout, and it is pinned to
/// the workspace's lock file, so every crate it needs is already
/// downloaded for the workspace. The target directory is shared by the
/// outside crates of these tests (not by this test run: no waiting on it).
async fn build_outside_crate(project: &Path, name: &str, main_rs: &str) -> PathBuf {
    let repo = repository();
    std::fs::create_dir_all(project.join("src")).unwrap();
    let manifest = format!(
        "[package]\nname = {name:?}\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n\
         [dependencies]\nlockshift = {{ path = {:?} }}\n\n[workspace]\n",
        repo.join("lockshift").display().to_string()
    );
    std::fs::write(project.join("Cargo.toml"), manifest).unwrap();
    std::fs::write(project.join("src/main.rs"), main_rs).unwrap();
    std::fs::copy(repo.join("Cargo.lock"), project.join("Cargo.lock")).unwrap();
    let target = repo.join("target/quickstart");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let build = tokio::process::Command::new(cargo)
        .args(["build", "--offline", "--quiet", "--manifest-path"])
        .arg(project.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        // The crate's build, not this test's: no flags inherited from it.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        // Built once and run once: no debug info, no incremental cache.
        // Each would take disk (some 3 GB here) that a CI machine may lack.
        .env("CARGO_PROFILE_DEV_DEBUG", "false")
        .env("CARGO_INCREMENTAL", "0")
        .output()
        .await
        .expect("cargo runs");
    assert!(
        build.status.success(),
        "{name} does not build on its own:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    target.join("debug").join(name)
}

/// `migrate serve` on a free port, and its address.
async fn serve() -> (tokio::process::Child, String) {
    let mut serve = command(None, &["serve", "--listen", "127.0.0.1:0"], &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("migrate serve starts");
    let mut stdout = BufReader::new(serve.stdout.take().expect("piped")).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), stdout.next_line())
        .await
        .expect("serve announces its address")
        .unwrap()
        .expect("a line");
    let addr = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (serve, addr)
}

/// Runs `binary` in `dir` against the endpoint at `addr` (no LOCKSHIFT
/// settings but that one from the test's own environment).
async fn run_against(binary: &Path, dir: &Path, addr: &str) -> std::process::Output {
    let mut run = tokio::process::Command::new(binary);
    for (k, _) in std::env::vars() {
        if k.starts_with("LOCKSHIFT") {
            run.env_remove(k);
        }
    }
    tokio::time::timeout(
        Duration::from_secs(60),
        run.current_dir(dir)
            .env("LOCKSHIFT__STORE__CQL__CONTACT_POINTS", addr)
            .output(),
    )
    .await
    .expect("the program finishes")
    .expect("the program runs")
}

/// The example, copied to a scratch directory, built as its own crate and
/// run against `migrate serve`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_crate_takes_a_lock_against_migrate_serve() {
    let repo = repository();
    let scratch = tempfile::tempdir().unwrap();
    let project = scratch.path().join("quickstart");
    let main_rs = std::fs::read_to_string(repo.join("examples/quickstart/src/main.rs")).unwrap();
    let binary = build_outside_crate(&project, "lockshift-quickstart", &main_rs).await;
    std::fs::copy(
        repo.join("examples/quickstart/lockshift.toml"),
        project.join("lockshift.toml"),
    )
    .unwrap();
    let (mut serve, addr) = serve().await;
    let out = run_against(&binary, &project, &addr).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the quickstart failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with("holding quickstart with fencing token "),
        "{stdout}"
    );
    serve.kill().await.unwrap();
}

/// The first fenced block of `lang` after the heading `heading` in `text`.
fn fenced_block<'a>(text: &'a str, heading: &str, lang: &str) -> &'a str {
    let section = &text[text
        .find(heading)
        .unwrap_or_else(|| panic!("README.md has no {heading:?}"))..];
    let open = format!("```{lang}\n");
    let start = section
        .find(&open)
        .unwrap_or_else(|| panic!("no ```{lang} block under {heading:?}"))
        + open.len();
    let len = section[start..]
        .find("```")
        .unwrap_or_else(|| panic!("the ```{lang} block under {heading:?} is not closed"));
    &section[start..start + len]
}

/// Issue 19 item 3: the README's "Using the lock in a service" — the Rust
/// block exactly as written, and its `lockshift.toml` — is a program that
/// builds in a crate whose only dependency is `lockshift`, and runs: it
/// takes the lock, gets a fencing token, writes, releases. The blocks are
/// read from README.md, so the README cannot drift from what works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_snippet_builds_and_runs() {
    let readme = std::fs::read_to_string(repository().join("README.md")).unwrap();
    let heading = "## Using the lock in a service";
    let main_rs = fenced_block(&readme, heading, "rust");
    let settings = fenced_block(&readme, heading, "toml");
    let scratch = tempfile::tempdir().unwrap();
    let project = scratch.path().join("readme");
    let binary = build_outside_crate(&project, "lockshift-readme", main_rs).await;
    std::fs::write(project.join("lockshift.toml"), settings).unwrap();
    let (mut serve, addr) = serve().await;
    let out = run_against(&binary, &project, &addr).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the README's program failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with("writing the report with fencing token "),
        "{stdout}"
    );
    serve.kill().await.unwrap();
}
