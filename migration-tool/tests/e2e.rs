//! End-to-end tests of the `migrate` binary against a local CQL endpoint,
//! or the real cluster `LOCKSHIFT_TEST_CONTACT_POINTS` names (issue 6,
//! "Tests"): every command through the real driver and protocol, exit
//! codes, human and JSON output, and the error cases.
//!
//! Each test starts its own endpoint on port 0 (on a cluster: uses a
//! keyspace of its own), so tests run in parallel; those that inject
//! server-side faults always use a local endpoint. Timing assertions are
//! only upper bounds, and generous ones.

// Integration tests: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{Endpoint, FAST, eventually, migrate, node_info, small_demo};
use lockshift_cql_emulator::{Fault, FaultRule};
use lockshift_decide::algorithm::Mode;
use lockshift_lock::{Algorithm, LockId};
use lockshift_rollout::registry::{deregister, heartbeat};
use lockshift_store::{CellWrite, Clock, RowQuery, Timestamp, Ttl, WriteOptions, schema};

fn now() -> Timestamp {
    lockshift_store::SystemClock.now()
}

fn minutes_ago(m: u64) -> WriteOptions {
    WriteOptions::at(now().saturating_sub(Duration::from_secs(60 * m)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_on_an_empty_store() {
    let e = Endpoint::with_schema().await;
    e.migrate(&["status"])
        .await
        .expect_code(0)
        .stdout_has("stage      legacy")
        .stdout_has("nodes      0 live")
        .stdout_has("safe to advance to dual: yes");
    let j = e.migrate(&["status", "--json"]).await.expect_code(0).json();
    assert_eq!(j["version"], 1);
    assert_eq!(j["stage"]["stage"], "legacy");
    assert_eq!(j["locks"]["held"], 0);
    assert_eq!(j["next"]["to"], "dual");
    assert_eq!(j["next"]["safe"], true);
}

/// A busy store: a legacy holder, a combined holder with a waiter queued
/// after it, a stale cell. Status shows them all and says why dual is not safe;
/// inspect shows the holder and the waiter's queue position.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_inspect_on_a_busy_store() {
    let e = Endpoint::with_schema().await;
    let legacy = e.node("old-1", Mode::Legacy).await;
    let combined = e.node("new-1", Mode::Combined).await;
    let waiter = e.node("new-2", Mode::Combined).await;
    let _a = legacy
        .acquire(&LockId::new("acct-a").unwrap())
        .await
        .unwrap();
    let b = LockId::new("acct-b").unwrap();
    let held_b = combined.acquire(&b).await.unwrap();
    let waiting = {
        let locker = waiter.clone();
        let b = b.clone();
        tokio::spawn(async move { locker.acquire(&b).await })
    };
    let store = e.store().clone();
    let holder_b = held_b.owner().as_str().to_string();
    eventually(Duration::from_secs(20), "the waiter's queue cell", || {
        let store = store.clone();
        let holder_b = holder_b.clone();
        async move {
            // The holder leaves the queue once it holds: the line is the
            // waiter alone.
            let queue = store
                .read(schema::QUEUE, "acct-b", &RowQuery::all())
                .await
                .unwrap();
            matches!(queue.as_slice(), [only] if !only.column.ends_with(&holder_b))
        }
    })
    .await;
    store
        .write(
            schema::SHADOW,
            "acct-z",
            &[CellWrite::new("gone/0000000000000009", b"legacy".to_vec())],
            minutes_ago(10),
        )
        .await
        .unwrap();

    let j = e.migrate(&["status", "--json"]).await.expect_code(0).json();
    assert_eq!(j["nodes"].as_array().unwrap().len(), 3, "{j:#}");
    assert_eq!(j["modes"]["effective"]["legacy"], 1);
    assert_eq!(j["modes"]["effective"]["combined"], 2);
    assert_eq!(j["locks"]["held"], 2);
    assert_eq!(j["locks"]["held_by"]["legacy"], 1);
    assert_eq!(j["locks"]["held_by"]["combined"], 1);
    assert_eq!(j["locks"]["waiting"], 1);
    assert_eq!(j["locks"]["oldest_wait"]["lock"], "acct-b");
    assert_eq!(j["stale"]["cells"], 1);
    assert!(j["legacy_activity"]["cells_now"].as_u64().unwrap() >= 1);
    assert_eq!(j["next"]["safe"], false);
    let because = j["next"]["because"].to_string();
    assert!(because.contains("node old-1 runs legacy"), "{because}");
    e.migrate(&["status"])
        .await
        .expect_code(0)
        .stdout_has("safe to advance to dual: no, because")
        .stdout_has("old-1")
        .stdout_has("2 held (1 combined, 1 legacy); 1 waiting on 1 lock(s)");

    let j = e
        .migrate(&["inspect", "acct-b", "--json"])
        .await
        .expect_code(0)
        .json();
    assert_eq!(j["holder"], held_b.owner().as_str());
    assert_eq!(j["waiting"], 1);
    let cells = j["cells"].as_array().unwrap();
    let in_table = |t: &str| cells.iter().filter(|c| c["table"] == t).collect::<Vec<_>>();
    let (main, shadow, queue) = (in_table("main"), in_table("shadow"), in_table("queue"));
    // The holder left the queue when it took the lock: only the waiter is in it.
    assert_eq!((main.len(), queue.len()), (1, 1), "{j:#}");
    // The waiting combined node may already have prepared its hand-off in
    // shadow (its own cell, nobody else's).
    assert!(
        shadow.len() <= 1 && shadow.iter().all(|c| c["node"] == "new-2"),
        "{j:#}"
    );
    assert_eq!(queue[0]["queue_position"], 0);
    assert_eq!(queue[0]["node"], "new-2");
    assert_eq!(queue[0]["registered"], true);
    assert!(main[0]["ttl_left_ms"].as_u64().unwrap() <= 3000);
    assert_eq!(main[0]["stale"], false);
    e.migrate(&["inspect", "acct-z"])
        .await
        .expect_code(0)
        .stdout_has("STALE")
        .stdout_has("gone/0000000000000009");

    held_b.release().await.unwrap();
    waiting.await.unwrap().unwrap().release().await.unwrap();
}

/// Dry run lists and keeps; --apply deletes at the observed writetime, so a
/// renewal landing while the delete is in flight survives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_dry_run_then_apply_and_a_racing_renewal_survives() {
    let e = Endpoint::local_with_schema().await;
    let store = e.store().clone();
    let owner = "dead/0000000000000001";
    let put = |table, lock: &'static str, column: String, at: WriteOptions| {
        let store = store.clone();
        async move {
            store
                .write(
                    table,
                    lock,
                    &[CellWrite::new(column, b"legacy".to_vec())],
                    at,
                )
                .await
                .unwrap()
        }
    };
    put(schema::MAIN, "acct-1", owner.into(), minutes_ago(10)).await;
    put(schema::SHADOW, "acct-1", owner.into(), minutes_ago(10)).await;
    put(
        schema::QUEUE,
        "acct-2",
        format!("{:020}{owner}", 1),
        minutes_ago(10),
    )
    .await;
    put(
        schema::MAIN,
        "acct-live",
        "live/0000000000000002".into(),
        WriteOptions::at(now()),
    )
    .await;

    // The cells have no TTL: they promise nothing, --stale-after judges them.
    let dry = e
        .migrate(&["clean", "--json", "--stale-after", "5m"])
        .await
        .expect_code(0)
        .json();
    assert_eq!(dry["applied"], false);
    assert_eq!(dry["summary"]["found"], 3, "{dry:#}");
    assert!(
        dry["cells"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["action"] == "would_delete")
    );
    let reasons: Vec<&str> = dry["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["reason"].as_str().unwrap())
        .collect();
    assert_eq!(
        reasons,
        ["stale_holder", "orphaned_shadow", "orphaned_queue"]
    );
    e.migrate(&["clean", "--stale-after", "5m"])
        .await
        .expect_code(0)
        .stdout_has("would delete")
        .stdout_has("dry run, nothing deleted");
    assert_eq!(
        store
            .read(schema::MAIN, "acct-1", &RowQuery::all())
            .await
            .unwrap()
            .len(),
        1
    );

    // Hold clean's first write to main (its delete of acct-1's cell) for a
    // while, and renew the cell meanwhile — after clean's re-read, before
    // its delete is applied.
    let hold = e
        .faults()
        .add(
            FaultRule::new(Fault::Latency(Duration::from_secs(2)))
                .on_table("lockshift.main")
                .writes()
                .times(1),
        )
        .unwrap();
    let clean = e
        .command(&["clean", "--apply", "--json", "--stale-after", "5m"], &[])
        .output();
    let clean = tokio::spawn(clean);
    let faults = e.faults().clone();
    eventually(
        Duration::from_secs(30),
        "clean's delete to reach the endpoint",
        || {
            let fired = faults.fired(&hold).unwrap_or(0);
            async move { fired >= 1 }
        },
    )
    .await;
    let renewal = now();
    put(
        schema::MAIN,
        "acct-1",
        owner.into(),
        WriteOptions::at(renewal),
    )
    .await;
    let out = clean.await.unwrap().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["applied"], true);
    assert_eq!(j["summary"]["deleted"], 3, "{j:#}");
    let main = store
        .read(schema::MAIN, "acct-1", &RowQuery::all())
        .await
        .unwrap();
    assert_eq!(main.len(), 1, "the renewal must survive the delete");
    assert_eq!(main[0].writetime, renewal);
    assert!(
        store
            .read(schema::SHADOW, "acct-1", &RowQuery::all())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .read(schema::QUEUE, "acct-2", &RowQuery::all())
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .read(schema::MAIN, "acct-live", &RowQuery::all())
            .await
            .unwrap()
            .len(),
        1
    );
    e.migrate(&["clean", "--apply", "--stale-after", "5m"])
        .await
        .expect_code(0)
        .stdout_has("summary: 0 stale found, 0 kept, 0 deleted");
}

/// Refused while a legacy node is live (every failing guard printed, exit
/// 3), allowed once it is gone; skipped and unknown stages are usage
/// errors; rollback walks back; the history records it all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advance_refused_then_allowed_and_rollback() {
    let e = Endpoint::with_schema().await;
    let store = e.store().clone();
    heartbeat(
        store.as_ref(),
        &lockshift_store::SystemClock,
        &node_info("old-7", Algorithm::Legacy),
        Ttl::from_secs(120).unwrap(),
    )
    .await
    .unwrap();
    e.migrate(&["advance", "--dry-run"])
        .await
        .expect_code(3)
        .stdout_has("[FAIL] node old-7 runs legacy")
        .stdout_has("dry run: safe to move from legacy to dual: no");
    let j = e
        .migrate(&[
            "advance", "--to", "dual", "--json", "--by", "alice", "--reason", "try",
        ])
        .await
        .expect_code(3)
        .json();
    assert_eq!(j["applied"], false);
    assert_eq!(j["from"], "legacy");
    assert_eq!(j["to"], "dual");
    assert!(j["because"][0].as_str().unwrap().contains("old-7"), "{j:#}");
    assert!(j["guards"].as_array().unwrap().len() >= 2);
    e.migrate(&["advance", "--to", "dual"])
        .await
        .expect_code(3)
        .stdout_has("refused: cannot move from legacy to dual yet");

    deregister(
        store.as_ref(),
        &lockshift_store::SystemClock,
        &node_info("old-7", Algorithm::Legacy),
    )
    .await
    .unwrap();
    e.migrate(&["advance", "--dry-run"])
        .await
        .expect_code(0)
        .stdout_has("safe to move from legacy to dual: yes");
    let j = e
        .migrate(&[
            "advance",
            "--to",
            "dual",
            "--json",
            "--by",
            "alice",
            "--reason",
            "fleet on v2",
        ])
        .await
        .expect_code(0)
        .json();
    assert_eq!(j["applied"], true);
    assert_eq!(j["record"]["stage"], "dual");
    assert_eq!(j["record"]["by"], "alice");
    e.migrate(&["advance", "--to", "dual"])
        .await
        .expect_code(0)
        .stdout_has("already is dual");

    e.migrate(&["advance", "--to", "complete"])
        .await
        .expect_code(2)
        .stderr_has("stages cannot be skipped; move to queue first");
    e.migrate(&["advance", "--to", "qeue"])
        .await
        .expect_code(2)
        .stderr_has("unknown stage \"qeue\"; expected legacy, dual, queue or complete");

    let j = e.migrate(&["status", "--json"]).await.expect_code(0).json();
    assert_eq!(j["stage"]["stage"], "dual");
    let actions: Vec<&str> = j["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["refusal", "refusal", "transition"], "{j:#}");

    e.migrate(&["rollback", "--to", "legacy"])
        .await
        .expect_code(0)
        .stdout_has("stage moved from dual to legacy");
    e.migrate(&["rollback"])
        .await
        .expect_code(2)
        .stderr_has("stage legacy is the first stage");
    e.migrate(&["rollback", "--to", "dual"])
        .await
        .expect_code(2)
        .stderr_has("use `migrate advance --to dual`");
    e.migrate(&["status"])
        .await
        .expect_code(0)
        .stdout_has("stage      legacy (version 2");
}

/// Several `migrate run-with-lock` processes at once, legacy and combined
/// (a safe pair), each doing read-sleep-write on a counter file: no update
/// is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_lock_excludes_across_processes() {
    const PROCESSES: usize = 4;
    const ROUNDS: usize = 3;
    let e = Endpoint::with_schema().await;
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("counter");
    std::fs::write(&counter, "0\n").unwrap();
    let script = r#"n=$(cat "$1"); sleep 0.1; echo $((n + 1)) > "$1""#;
    let mut tasks = Vec::new();
    for p in 0..PROCESSES {
        let at = e.at.clone();
        let counter = counter.to_str().unwrap().to_string();
        let mode = if p % 2 == 0 { "legacy" } else { "auto" };
        tasks.push(tokio::spawn(async move {
            for _ in 0..ROUNDS {
                at.migrate_env(
                    &[
                        "run-with-lock",
                        "counter",
                        "--mode",
                        mode,
                        "--",
                        "sh",
                        "-c",
                        script,
                        "sh",
                        &counter,
                    ],
                    FAST,
                )
                .await
                .expect_code(0);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let n: usize = std::fs::read_to_string(&counter)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        n,
        PROCESSES * ROUNDS,
        "an update was lost: two holders at once"
    );
}

/// The child's exit code passes through; a lock that stays held past
/// --timeout exits 3 without running anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_lock_passes_exit_codes_and_times_out() {
    let e = Endpoint::with_schema().await;
    e.migrate(&["run-with-lock", "job", "--", "sh", "-c", "exit 7"])
        .await
        .expect_code(7);
    let j = e
        .migrate(&[
            "--json",
            "run-with-lock",
            "job",
            "--mode",
            "queue",
            "--",
            "sh",
            "-c",
            "test -n \"$LOCKSHIFT_LOCK_OWNER\"",
        ])
        .await
        .expect_code(0)
        .stderr_json();
    assert_eq!(j["result"], "completed");
    assert_eq!(
        j["algorithm"], "combined",
        "queue is not allowed at stage legacy"
    );
    assert_eq!(j["degraded_from"], "queue");
    e.migrate(&["run-with-lock", "job", "--mode", "queue", "--", "true"])
        .await
        .expect_code(0)
        .stderr_has("mode queue is not allowed at stage legacy; using combined");

    let holder = e.node("holder", Mode::Combined).await;
    let guard = holder.acquire(&LockId::new("job").unwrap()).await.unwrap();
    let started = Instant::now();
    e.migrate(&[
        "run-with-lock",
        "job",
        "--timeout",
        "1s",
        "--",
        "sh",
        "-c",
        "echo ran",
    ])
    .await
    .expect_code(3)
    .stderr_has("was not free within");
    assert!(started.elapsed() < Duration::from_secs(30));
    guard.release().await.unwrap();
}

/// The lock tables become unavailable while the command runs: the lease
/// is lost, the command is terminated, migrate exits 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_loss_terminates_the_command() {
    let e = Endpoint::local_with_schema().await;
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let pidfile_s = pidfile.to_str().unwrap().to_string();
    let started = Instant::now();
    let run = e
        .command(
            &[
                "run-with-lock",
                "fragile",
                "--grace",
                "2s",
                "--",
                "sh",
                "-c",
                "echo $$ > \"$1\"; exec sleep 60",
                "sh",
                &pidfile_s,
            ],
            FAST,
        )
        .output();
    let run = tokio::spawn(run);
    eventually(Duration::from_secs(30), "the command to start", || {
        let exists = pidfile.exists()
            && !std::fs::read_to_string(&pidfile)
                .unwrap_or_default()
                .trim()
                .is_empty();
        async move { exists }
    })
    .await;
    let pid = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .to_string();
    e.faults()
        .add(
            FaultRule::new(Fault::Unavailable)
                .on_table("lockshift.main")
                .on_table("lockshift.queue")
                .on_table("lockshift.shadow"),
        )
        .unwrap();
    let out = run.await.unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("lease lost"), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "the command was not stopped early"
    );
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the command still runs"
    );
}

/// Every error case of the issue: message and exit code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_say_what_to_do() {
    // Unreachable: a port nobody listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let r = migrate(Some(&closed), &["status", "--connect-timeout", "2s"], &[]).await;
    r.expect_code(1)
        .stderr_has(&format!("cannot reach the database (tried {closed})"))
        .stderr_has("migrate serve");
    let j = migrate(
        Some(&closed),
        &["status", "--json", "--connect-timeout", "2s"],
        &[],
    )
    .await
    .expect_code(1)
    .json();
    assert_eq!(j["version"], 1);
    assert_eq!(j["error"]["exit_code"], 1);

    // Missing keyspace: say how to create it; --create-schema does.
    let bare = Endpoint::bare().await;
    bare.migrate(&["status"])
        .await
        .expect_code(1)
        .stderr_has(&format!("keyspace {} does not exist", bare.keyspace()))
        .stderr_has("--create-schema");
    bare.migrate(&["--create-schema", "status"])
        .await
        .expect_code(0);

    let e = Endpoint::with_schema().await;
    e.migrate(&["inspect", "no-such-lock"])
        .await
        .expect_code(0)
        .stdout_has("lock no-such-lock is free");
    e.migrate(&["advance", "--to", "later"])
        .await
        .expect_code(2)
        .stderr_has("unknown stage \"later\"");
    e.migrate(&["advance", "--to", "queue"])
        .await
        .expect_code(2)
        .stderr_has("stages cannot be skipped; move to dual first");
    e.migrate(&["run-with-lock", "x", "--timeout", "3x", "--", "true"])
        .await
        .expect_code(2)
        .stderr_has("--timeout");
    e.migrate(&["clean", "--stale-after", "soon"])
        .await
        .expect_code(2)
        .stderr_has("--stale-after");
    e.migrate(&["clean", "--stale-after", "10ms"])
        .await
        .expect_code(2)
        .stderr_has("--stale-after must be at least 1s");
    e.migrate_env(&["status"], &[("LOCKSHIFT__LOCK__LEASE_TTL", "abc")])
        .await
        .expect_code(2)
        .stderr_has("lock.lease_ttl");
    e.migrate(&["frobnicate"]).await.expect_code(2);
    e.migrate(&["run-with-lock", "x"]).await.expect_code(2);
}

/// `migrate serve` on port 0 prints its address, others use it at once
/// (schema included), and it stops cleanly on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_shares_a_store_between_processes() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let mut serve = common::command(
        None,
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--latency",
            "1ms",
            "--jitter",
            "1ms",
        ],
        &[],
    );
    serve.stdout(std::process::Stdio::piped());
    let mut child = serve.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let addr = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{first}"))
        .to_string();
    migrate(Some(&addr), &["run-with-lock", "shared", "--", "true"], &[])
        .await
        .expect_code(0);
    migrate(Some(&addr), &["advance", "--to", "dual"], &[])
        .await
        .expect_code(0);
    migrate(Some(&addr), &["status"], &[])
        .await
        .expect_code(0)
        .stdout_has("stage      dual");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id().unwrap()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

/// The README's first command, smaller: the whole rollout to a green
/// verdict, as JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_rolls_a_small_fleet_to_a_green_verdict() {
    // On a real cluster when one is named (a keyspace of its own, dropped
    // at the end), else in-process.
    let r = migrate(
        common::real_cluster().as_deref(),
        &small_demo("1s", &[]),
        &[],
    )
    .await;
    let j = r.expect_code(0).json();
    assert_eq!(j["passed"], true, "{j:#}");
    assert_eq!(j["balance_before"], j["balance_after"]);
    assert_eq!(
        j["stages"],
        serde_json::json!(["legacy", "dual", "queue", "complete"])
    );
    assert!(j["transfers"].as_u64().unwrap() > 0);
    assert_eq!(j["violations"].as_array().unwrap().len(), 0);
}

/// `--pause-holder`: one holder paused past its lease mid-transfer; its
/// late write is refused by the fence and counted, and the books balance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_pause_holder_refuses_the_late_write_and_conserves_money() {
    let r = migrate(
        common::real_cluster().as_deref(),
        &small_demo("2s", &["--pause-holder"]),
        &[],
    )
    .await;
    let j = r.expect_code(0).json();
    assert_eq!(j["passed"], true, "{j:#}");
    assert!(j["fenced_refusals"].as_u64().unwrap() >= 1, "{j:#}");
    assert_eq!(j["balance_before"], j["balance_after"]);
    let notes = j["pause_holder"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("a later holder has written it")),
        "{j:#}"
    );
    assert_eq!(j["violations"].as_array().unwrap().len(), 0, "{j:#}");
}

/// Every command's help exits 0 and has examples.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_reads_well() {
    migrate(None, &["--help"], &[])
        .await
        .expect_code(0)
        .stdout_has("Exit codes:")
        .stdout_has("Examples:");
    for cmd in [
        "status",
        "inspect",
        "clean",
        "advance",
        "rollback",
        "run-with-lock",
        "serve",
        "demo",
    ] {
        migrate(None, &[cmd, "--help"], &[])
            .await
            .expect_code(0)
            .stdout_has("Examples:");
    }
}

/// Connection settings: flags win over `LOCKSHIFT__…` variables, which win
/// over the file (`--config` or `LOCKSHIFT_CONFIG`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_settings_from_flags_env_and_file() {
    let e = Endpoint::with_schema().await;
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    let ks = e.keyspace();
    let points = e
        .addr()
        .split(',')
        .map(|p| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join(", ");
    std::fs::write(
        &good,
        format!("[store.cql]\ncontact_points = [{points}]\nkeyspace = \"{ks}\"\n"),
    )
    .unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        format!(
            "[store.cql]\ncontact_points = [\"{closed}\"]\nconnect_timeout = \"2s\"\nkeyspace = \"{ks}\"\n"
        ),
    )
    .unwrap();
    let (good, bad) = (good.to_str().unwrap(), bad.to_str().unwrap());

    // The file alone, by flag and by LOCKSHIFT_CONFIG.
    migrate(None, &["--config", good, "status"], &[])
        .await
        .expect_code(0);
    migrate(None, &["status"], &[("LOCKSHIFT_CONFIG", good)])
        .await
        .expect_code(0);
    // The environment over the file.
    let env_addr = e.addr();
    migrate(
        None,
        &["--config", bad, "status"],
        &[("LOCKSHIFT__STORE__CQL__CONTACT_POINTS", &env_addr)],
    )
    .await
    .expect_code(0);
    // The flag over both.
    migrate(
        Some(&e.addr()),
        &["--config", bad, "status"],
        &[("LOCKSHIFT__STORE__CQL__CONTACT_POINTS", closed.as_str())],
    )
    .await
    .expect_code(0);
    migrate(None, &["--config", bad, "status"], &[])
        .await
        .expect_code(1)
        .stderr_has(&closed);
    migrate(None, &["--config", "/nonexistent.toml", "status"], &[])
        .await
        .expect_code(2)
        .stderr_has("/nonexistent.toml");
}

/// Issue 10 item 3: a node that cannot confirm the stage acts as combined
/// and says so; one whose heartbeat stopped is shown silent — and both
/// still count for the guards until the row expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_nodes_that_cannot_confirm_the_stage_or_went_silent() {
    let e = Endpoint::with_schema().await;
    let store = e.store().clone();
    let mut cut = node_info("cut-1", Algorithm::Combined);
    cut.configured_mode = Mode::Legacy;
    cut.view_expired = true;
    cut.bound = BTreeMap::from([(Algorithm::Legacy, 1)]);
    store
        .write(
            schema::NODES,
            lockshift_decide::registry::LEGACY_REGISTRY_ROW,
            &[CellWrite::new("cut-1", serde_json::to_vec(&cut).unwrap())],
            WriteOptions::at(now().saturating_sub(Duration::from_secs(60)))
                .with_ttl(Ttl::from_secs(300).unwrap()),
        )
        .await
        .unwrap();
    let out = e.migrate(&["status"]).await;
    out.stdout_has("combined (cannot confirm the stage)")
        .stdout_has("(silent)")
        .stdout_has("node cut-1 has 1 legacy acquisition(s) waiting or held");
    let j = e.migrate(&["status", "--json"]).await.json();
    assert_eq!(j["nodes"][0]["view_expired"], true, "{j:#}");
    assert_eq!(j["nodes"][0]["silent"], true, "{j:#}");
    assert_eq!(j["nodes"][0]["bound"]["legacy"], 1, "{j:#}");
}
