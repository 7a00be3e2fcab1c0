//! The done-when of issue 13: a crate outside the workspace, depending only
//! on `lockshift`, takes a lock against `migrate serve` in at most 15 lines
//! — `examples/quickstart`, built here with cargo as its own project and run
//! against a `migrate serve` of this build.

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

/// Copies the example to a scratch directory (the repository stays clean),
/// points its `lockshift` dependency at this checkout, pins it to the
/// workspace's lock file, builds it offline (every crate it needs is already
/// downloaded for the workspace) into a target directory of its own (no
/// waiting on this test run's), then runs it against `migrate serve`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_crate_takes_a_lock_against_migrate_serve() {
    let repo = repository();
    let scratch = tempfile::tempdir().unwrap();
    let project = scratch.path().join("quickstart");
    std::fs::create_dir_all(project.join("src")).unwrap();
    let manifest = std::fs::read_to_string(repo.join("examples/quickstart/Cargo.toml"))
        .unwrap()
        .replace(
            "path = \"../../lockshift\"",
            &format!("path = {:?}", repo.join("lockshift").display().to_string()),
        );
    std::fs::write(project.join("Cargo.toml"), manifest).unwrap();
    for file in ["src/main.rs", "lockshift.toml"] {
        std::fs::copy(
            repo.join("examples/quickstart").join(file),
            project.join(file),
        )
        .unwrap();
    }
    std::fs::copy(repo.join("Cargo.lock"), project.join("Cargo.lock")).unwrap();
    let target = repo.join("target/quickstart");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let build = tokio::process::Command::new(cargo)
        .args(["build", "--offline", "--quiet", "--manifest-path"])
        .arg(project.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        // The example's build, not this test's: no flags inherited from it.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .output()
        .await
        .expect("cargo runs");
    assert!(
        build.status.success(),
        "the quickstart does not build on its own:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );

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

    let mut run = tokio::process::Command::new(target.join("debug/lockshift-quickstart"));
    for (k, _) in std::env::vars() {
        if k.starts_with("LOCKSHIFT") {
            run.env_remove(k);
        }
    }
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        run.current_dir(&project)
            .env("LOCKSHIFT__STORE__CQL__CONTACT_POINTS", &addr)
            .output(),
    )
    .await
    .expect("the quickstart finishes")
    .expect("the quickstart runs");
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
