//! Issue 19 (A): a waiter killed while it waits — SIGKILL, or Ctrl-C —
//! delays the next waiter by seconds, not by a lease TTL. Real processes:
//! `migrate run-with-lock` holders and waiters against a local endpoint,
//! with default settings. The test prints what it measured; it asserts the
//! issue's bound (5 s after the holder leaves) with generous slack only.

// Integration tests: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Endpoint, eventually};
use lockshift_store::{RowQuery, schema};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::time::Instant;

/// The issue's bound on the delay a dead waiter adds after the holder
/// leaves, and the slack this test allows on top (a loaded CI machine).
const BOUND: Duration = Duration::from_secs(5);
const SLACK: Duration = Duration::from_secs(3);

/// `migrate run-with-lock LOCK -- sh -c SCRIPT sh ARGS…` as node `id`,
/// default settings; stderr kept for the failure message.
fn run_with_lock(
    e: &Endpoint,
    id: &str,
    lock: &str,
    script: &str,
    args: &[&Path],
) -> tokio::process::Child {
    let mut argv = vec!["run-with-lock", lock, "--", "sh", "-c", script, "sh"];
    let args: Vec<String> = args.iter().map(|p| p.display().to_string()).collect();
    argv.extend(args.iter().map(String::as_str));
    let mut cmd = e.command(&argv, &[("LOCKSHIFT__NODE__ID", id)]);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd.spawn().unwrap()
}

/// The owners with a cell in `table` of `lock` right now.
async fn owners_in(e: &Endpoint, table: lockshift_store::Table, lock: &str) -> Vec<String> {
    e.store()
        .read(table, lock, &RowQuery::all())
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.column)
        .collect()
}

/// Whether `node` has a cell in `table` of `lock`.
async fn has_cell(e: &Endpoint, table: lockshift_store::Table, lock: &str, node: &str) -> bool {
    owners_in(e, table, lock)
        .await
        .iter()
        .any(|o| o.starts_with(&format!("{node}/")))
}

/// A holder, then (if `kill_with` is given) a waiter killed while it waits,
/// then the next waiter; the holder leaves right after the kill. Returns
/// how long after the holder was told to leave the next waiter's command
/// started.
async fn delay_after_release(e: &Endpoint, lock: &str, kill_with: Option<Signal>) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let (held, release, started) = (
        dir.path().join("held"),
        dir.path().join("release"),
        dir.path().join("started"),
    );
    let mut holder = run_with_lock(
        e,
        "holder",
        lock,
        r#"touch "$1"; while [ ! -e "$2" ]; do sleep 0.01; done"#,
        &[&held, &release],
    );
    eventually(Duration::from_secs(30), "the holder to hold", || {
        let ready = held.exists();
        async move { ready }
    })
    .await;
    let mut doomed = None;
    if kill_with.is_some() {
        doomed = Some(run_with_lock(e, "doomed", lock, "true", &[]));
        eventually(
            Duration::from_secs(30),
            "the doomed waiter to queue",
            || has_cell(e, schema::QUEUE, lock, "doomed"),
        )
        .await;
    }
    let mut next = run_with_lock(e, "next", lock, r#"touch "$1""#, &[&started]);
    eventually(Duration::from_secs(30), "the next waiter to queue", || {
        has_cell(e, schema::QUEUE, lock, "next")
    })
    .await;
    // Both wait through a hold of a few seconds: the scene a waiter far
    // into a long hold sees (its polls backed off).
    tokio::time::sleep(Duration::from_secs(3)).await;
    if let (Some(signal), Some(doomed)) = (kill_with, doomed.as_mut()) {
        let pid = Pid::from_raw(i32::try_from(doomed.id().unwrap()).unwrap());
        kill(pid, signal).unwrap();
        doomed.wait().await.unwrap();
    }
    let told = Instant::now();
    std::fs::write(&release, b"").unwrap();
    let delay = tokio::time::timeout(Duration::from_secs(120), async {
        while !started.exists() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        told.elapsed()
    })
    .await
    .expect("the next waiter runs within two minutes");
    holder.wait().await.unwrap();
    next.wait().await.unwrap();
    delay
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_waiter_delays_the_next_by_seconds_not_a_lease() {
    let mut measured = Vec::new();
    for stage in ["legacy", "queue"] {
        // An endpoint of its own: the killed processes stay in the registry
        // (as last reported) until their rows expire, and would hold the
        // rollout back.
        let e = Endpoint::with_schema().await;
        if stage == "queue" {
            for to in ["dual", "queue"] {
                e.migrate(&["advance", "--to", to, "--reason", "test"])
                    .await
                    .expect_code(0);
            }
        }
        for (what, signal) in [
            ("no waiter killed", None),
            ("a waiter killed with SIGKILL", Some(Signal::SIGKILL)),
            ("a waiter interrupted with SIGINT", Some(Signal::SIGINT)),
        ] {
            let lock = format!("dead-{stage}-{}", signal.map_or("none", |s| s.as_str()));
            let delay = delay_after_release(&e, &lock, signal).await;
            println!(
                "stage {stage}, {what}: the next waiter ran {:.2}s after the holder was told to leave",
                delay.as_secs_f64()
            );
            measured.push((stage, what, delay));
        }
    }
    for (stage, what, delay) in measured {
        assert!(
            delay <= BOUND + SLACK,
            "stage {stage}, {what}: the next waiter ran {delay:?} after the holder left"
        );
    }
}
