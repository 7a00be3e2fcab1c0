//! End-to-end tests of the operator paths that must never break a holder,
//! and of the small operator-facing promises of issue 11 (exit codes,
//! output, schema), against the built `migrate` binary and a local
//! endpoint — or, with `LOCKSHIFT_TEST_CONTACT_POINTS`, a keyspace of each
//! test's own on that cluster (fault injection stays local). (`e2e.rs`
//! holds the first round of e2e tests.)

// Integration tests: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Endpoint, small_demo};
use lockshift_decide::registry::{LeasePromise, NodeInfo};
use lockshift_lock::Algorithm;
use lockshift_rollout::registry::heartbeat;
use lockshift_store::{CellWrite, Clock, RowQuery, SystemClock, Ttl, WriteOptions, schema};

/// A registry entry for a live combined process of `node` (incarnation
/// `incarnation`) announcing `promise`.
fn node_info(node: &str, promise: Option<LeasePromise>) -> NodeInfo {
    NodeInfo {
        lease: promise,
        ..common::node_info(node, Algorithm::Combined)
    }
}

/// The process whose cells the clean tests write: owner ids
/// `node/0000abcdSSSSSSSS` name it.
const INCARNATION: &str = "0000abcd";

/// Issue 11 item 2, the reported schedule: a holder renewing every 60 s
/// (TTL 5 min) whose cell was last renewed 36 s ago, and an operator
/// running `clean --apply` without the fleet's config (default
/// `renew_every` 10 s). The holder's process is live, so its cells stay —
/// even once overdue by its own promise, unless `--force`, which deletes
/// (after a second look) only what the owner's own promise calls overdue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_never_deletes_the_cells_of_a_live_holder() {
    let e = Endpoint::with_schema().await;
    let store = e.store().clone();
    let register = |node: &'static str, promise: LeasePromise| {
        let store = store.clone();
        async move {
            let info = NodeInfo {
                incarnation: Some(INCARNATION.into()),
                ..node_info(node, Some(promise))
            };
            heartbeat(
                store.as_ref(),
                &SystemClock,
                &info,
                Ttl::from_secs(120).unwrap(),
            )
            .await
            .unwrap();
        }
    };
    register(
        "batch-1",
        LeasePromise {
            ttl_ms: 300_000,
            renew_every_ms: 60_000,
        },
    )
    .await;
    let renewed_ago = |lock: &'static str, owner: String, secs: u64, ttl: u32| {
        let store = store.clone();
        async move {
            let at = SystemClock.now().saturating_sub(Duration::from_secs(secs));
            store
                .write(
                    schema::MAIN,
                    lock,
                    &[CellWrite::new(owner, b"combined".to_vec())],
                    WriteOptions::at(at).with_ttl(Ttl::from_secs(ttl).unwrap()),
                )
                .await
                .unwrap();
        }
    };
    let owner = |node: &str, slot: u32| format!("{node}/{INCARNATION}{slot:08x}");
    renewed_ago("report", owner("batch-1", 1), 36, 300).await;
    renewed_ago("archive", owner("batch-1", 2), 200, 300).await;
    let present = |lock: &'static str| {
        let store = store.clone();
        async move {
            store
                .read(schema::MAIN, lock, &RowQuery::all())
                .await
                .unwrap()
                .len()
                == 1
        }
    };

    let j = e
        .migrate(&["clean", "--apply", "--json"])
        .await
        .expect_code(0)
        .json();
    assert!(
        present("report").await,
        "a holder within its promise: {j:#}"
    );
    assert!(present("archive").await, "a live process's cell: {j:#}");
    assert_eq!(j["summary"]["deleted"], 0, "{j:#}");
    let cells = j["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1, "only the overdue one is listed: {j:#}");
    assert_eq!(cells[0]["lock"], "archive");
    assert_eq!(cells[0]["action"], "kept_owner_live");
    assert_eq!(cells[0]["promise"]["source"], "registry");
    assert_eq!(cells[0]["promise"]["renew_every_ms"], 60_000);
    // One and a half times the longer of the promised 60 s and what the
    // cell's own TTL left allows (issue 31): its 300 s TTL counts from when
    // the test wrote it, just now, so a renewal would be due within 150 s.
    let left = cells[0]["ttl_left_ms"].as_u64().unwrap();
    let due = 60_000u64.max(left / 2 + 500);
    assert_eq!(cells[0]["second_look_after_ms"], due + due / 2, "{j:#}");
    assert_eq!(j["clock_skew_margin_ms"], 5_000);
    e.migrate(&["clean"])
        .await
        .expect_code(0)
        .stdout_has("KEPT (owner's process is live)")
        .stdout_has("--force deletes them at the risk of a second holder");

    // --force: the operator knows better; only what the owner's own
    // promise calls overdue goes, after a second look one and a half
    // renewal periods on — the promised one, or the one the cell's TTL left
    // allows if longer (issue 31). (The 60 s holder's overdue cell would
    // take minutes: it goes by itself here. A process renewing every
    // second, its cell written with 20 s, stands in for it.)
    store
        .delete(
            schema::MAIN,
            "archive",
            &[owner("batch-1", 2)],
            SystemClock.now(),
        )
        .await
        .unwrap();
    register(
        "quick-1",
        LeasePromise {
            ttl_ms: 30_000,
            renew_every_ms: 1_000,
        },
    )
    .await;
    renewed_ago("sweep", owner("quick-1", 1), 12, 20).await;
    let j = e
        .migrate(&["clean", "--apply", "--force", "--json"])
        .await
        .expect_code(0)
        .json();
    assert_eq!(j["summary"]["deleted"], 1, "{j:#}");
    assert_eq!(j["cells"][0]["lock"], "sweep", "{j:#}");
    let left = j["cells"][0]["ttl_left_ms"].as_u64().unwrap();
    let due = 1_000u64.max(left / 2 + 500);
    assert_eq!(
        j["cells"][0]["second_look_after_ms"],
        due + due / 2,
        "{j:#}"
    );
    assert!(!present("sweep").await);
    assert!(
        present("report").await,
        "within its promise even with --force"
    );
    e.migrate(&["clean", "--help"])
        .await
        .expect_code(0)
        .stdout_has("RISK")
        .stdout_has("second look");
}

/// Issue 11 item 9: a reader that goes away (`status --json | head -1`)
/// ends `migrate` quietly, not with a panic (exit 101).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_quietly() {
    let e = Endpoint::with_schema().await;
    for args in [&["status", "--json"][..], &["status"][..]] {
        let mut cmd = e.command(args, &[]);
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        // Closed before migrate has written anything: its first write fails.
        drop(child.stdout.take());
        let out = child.wait_with_output().await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    }
}

/// Issue 11 item 9: `status` exits 5 when the fleet is unsafe now (live
/// legacy and queue nodes at once), as documented with the other codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_exits_5_on_an_unsafe_state() {
    let e = Endpoint::with_schema().await;
    let store = e.store().clone();
    e.migrate(&["status"]).await.expect_code(0);
    for (node, algorithm) in [("old-1", Algorithm::Legacy), ("new-1", Algorithm::Queue)] {
        let mut info = node_info(node, None);
        info.effective = algorithm;
        heartbeat(
            store.as_ref(),
            &SystemClock,
            &info,
            Ttl::from_secs(120).unwrap(),
        )
        .await
        .unwrap();
    }
    let r = e.migrate(&["status", "--json"]).await;
    let j = r.expect_code(5).json();
    assert_eq!(j["unsafe_state"], true, "{j:#}");
    e.migrate(&["status"])
        .await
        .expect_code(5)
        .stdout_has("UNSAFE");
    common::migrate(None, &["--help"], &[])
        .await
        .expect_code(0)
        .stdout_has("5  unsafe state");
}

/// Issue 11 item 9: a bad value is reported with where it came from — the
/// flag, the variable, or the file — not always "the environment".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_value_names_its_real_source() {
    let e = Endpoint::with_schema().await;
    e.migrate(&["--connect-timeout", "0s", "status"])
        .await
        .expect_code(2)
        .stderr_has("store.cql.connect_timeout must be greater than 0 (from --connect-timeout)");
    // The message quotes the value already: the source names only the
    // variable (a value is said once, issue 19 item 7).
    let r = e
        .migrate_env(&["status"], &[("LOCKSHIFT__LOCK__LEASE_TTL", "abc")])
        .await;
    r.expect_code(2)
        .stderr_has("string \"abc\"")
        .stderr_has("(from LOCKSHIFT__LOCK__LEASE_TTL in the environment)");
    assert_eq!(r.stderr.matches("abc").count(), 1, "{}", r.stderr);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fleet.toml");
    std::fs::write(&file, "[lock]\nlease_ttl = \"1s\"\n").unwrap();
    e.migrate(&["--config", file.to_str().unwrap(), "status"])
        .await
        .expect_code(2)
        .stderr_has("must be at least 2s")
        // Quoted and cut short, as every echoed path.
        .stderr_has(&format!("(from the file {:?})", file.display().to_string()));
}

/// Issue 11 item 9: two operators advance at once; the one that loses the
/// race for the rollout lock finds the stage already moved. That is a
/// refusal with its reason (exit 3), not a usage error (exit 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_an_advance_race_is_a_refusal_with_its_reason() {
    use lockshift_cql_emulator::{Fault, FaultRule};
    let e = Endpoint::local_with_schema().await;
    e.migrate(&["advance", "--to", "dual"]).await.expect_code(0);
    // Alice rolls back; her stage write is held back 2 s, with the rollout
    // lock held.
    let hold = e
        .faults()
        .add(
            FaultRule::new(Fault::Latency(Duration::from_secs(2)))
                .on_table("lockshift.rollout")
                .writes()
                .times(1),
        )
        .unwrap();
    let alice = tokio::spawn(
        e.command(&["rollback", "--to", "legacy", "--by", "alice"], &[])
            .output(),
    );
    let faults = e.faults().clone();
    common::eventually(Duration::from_secs(30), "alice's stage write", || {
        let fired = faults.fired(&hold).unwrap_or(0);
        async move { fired >= 1 }
    })
    .await;
    // Bob reads `dual`, aims at `queue`, and waits for the rollout lock;
    // he gets it at `legacy`, and moves from nowhere he did not see.
    let bob = e
        .migrate(&["advance", "--to", "queue", "--by", "bob", "--json"])
        .await;
    let alice = alice.await.unwrap().unwrap();
    assert_eq!(alice.status.code(), Some(0), "{alice:?}");
    let j = bob.expect_code(3).json();
    assert_eq!(j["applied"], false, "{j:#}");
    assert_eq!(j["raced"], "legacy", "{j:#}");
    assert!(
        j["because"][0]
            .as_str()
            .unwrap()
            .contains("the stage moved from dual to legacy while this command waited"),
        "{j:#}"
    );
    assert_eq!(
        j["actions"][0], "`migrate status`, then decide again",
        "{j:#}"
    );
}

/// Two operators asking for the same stage at once: the second finds it
/// done — what it asked for — and exits 0; the fleet moved one stage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_advance_twice_at_once_moves_one_stage() {
    use lockshift_cql_emulator::{Fault, FaultRule};
    let e = Endpoint::local_with_schema().await;
    let hold = e
        .faults()
        .add(
            FaultRule::new(Fault::Latency(Duration::from_secs(2)))
                .on_table("lockshift.rollout")
                .writes()
                .times(1),
        )
        .unwrap();
    let alice = tokio::spawn(
        e.command(&["advance", "--to", "dual", "--by", "alice"], &[])
            .output(),
    );
    let faults = e.faults().clone();
    common::eventually(Duration::from_secs(30), "alice's stage write", || {
        let fired = faults.fired(&hold).unwrap_or(0);
        async move { fired >= 1 }
    })
    .await;
    let bob = e
        .migrate(&["advance", "--to", "dual", "--by", "bob", "--json"])
        .await;
    assert_eq!(alice.await.unwrap().unwrap().status.code(), Some(0));
    let j = bob.expect_code(0).json();
    assert_eq!(
        (j["already"].clone(), j["raced"].clone()),
        (true.into(), "dual".into()),
        "{j:#}"
    );
    let j = e.migrate(&["status", "--json"]).await.expect_code(0).json();
    assert_eq!(j["stage"]["stage"], "dual");
}

/// Issue 11 item 9: nothing creates a keyspace unless asked (a service's
/// default settings only check), the missing-schema hint points at
/// `migrate schema`, and that prints the DDL with the replication asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_is_created_only_on_request_and_printed_on_demand() {
    use lockshift_store::{CqlSettings, CqlStore, StoreErrorKind};
    let bare = Endpoint::bare().await;
    let ks = bare.keyspace();
    let err = CqlStore::connect(&CqlSettings {
        contact_points: bare.addr().split(',').map(String::from).collect(),
        keyspace: ks.to_string(),
        ..CqlSettings::default()
    })
    .await
    .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::SchemaMissing, "{err}");
    assert!(err.to_string().contains("`migrate schema`"), "{err}");
    bare.migrate(&["status"])
        .await
        .expect_code(1)
        .stderr_has(&format!("keyspace {ks} does not exist"))
        .stderr_has("`migrate schema`");
    let r = bare
        .migrate(&["schema", "--datacenter", "dc1:3", "--datacenter", "dc2:2"])
        .await;
    r.expect_code(0)
        .stdout_has(&format!(
            "CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = \
             {{'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 2}}"
        ))
        .stdout_has(&format!("CREATE TABLE IF NOT EXISTS {ks}.main"))
        .stdout_has("AND gc_grace_seconds = 120")
        .stdout_has(&format!(
            "ALTER TABLE {ks}.main WITH gc_grace_seconds = 120"
        ))
        .stdout_has(&format!(
            "ALTER TABLE {ks}.rollout WITH gc_grace_seconds = 864000"
        ));
    let j = bare
        .migrate(&[
            "schema",
            "--json",
            "--keyspace",
            "locks",
            "--replication-factor",
            "3",
        ])
        .await
        .expect_code(0)
        .json();
    let statements = j["statements"].as_array().unwrap();
    // The keyspace; per table its CREATE, its options, its fence column.
    assert_eq!(statements.len(), 1 + 3 * lockshift_store::schema::ALL.len());
    assert!(
        statements
            .iter()
            .any(|s| s.as_str() == Some("ALTER TABLE locks.main ADD IF NOT EXISTS fence bigint")),
        "{j:#}"
    );
    assert!(
        statements[0]
            .as_str()
            .unwrap()
            .contains("'replication_factor': 3"),
        "{j:#}"
    );
    assert_eq!(
        j["warnings"],
        serde_json::json!([]),
        "three replicas: {j:#}"
    );
    // The default, one replica, is for a single test node: said in the
    // output, as a CQL comment so it still pipes into cqlsh.
    bare.migrate(&["schema"])
        .await
        .expect_code(0)
        .stdout_has("-- warning: 1 replica(s): every lock stops while one replica is down");
    // Still nothing was created.
    bare.migrate(&["status"]).await.expect_code(1);
    // Issue 18 item 4: `--apply` runs them. A real cluster applies the
    // ALTERs; the local endpoint does not implement ALTER, which is said,
    // not failed on.
    let applied = bare.migrate(&["schema", "--apply"]).await;
    applied
        .expect_code(0)
        .stdout_has(&format!("-- applied: CREATE KEYSPACE IF NOT EXISTS {ks}"));
    let alter = format!("ALTER TABLE {ks}.main WITH gc_grace_seconds = 120");
    assert!(
        applied.stdout.contains(&format!("-- applied: {alter}"))
            || applied.stdout.contains(&format!(
                "-- not run: the local CQL endpoint does not implement ALTER (its tables were \
                 created with these options): {alter}"
            )),
        "the ALTER is applied, or said to be skipped on the local endpoint:\n{applied:#?}"
    );
    bare.migrate(&["status"]).await.expect_code(0);
}

/// Issue 11 item 9: a refused rollback with 5 000 locks held names ten of
/// them and counts the rest; the history entry it stores stays small.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_text_and_history_entries_are_bounded() {
    let e = Endpoint::with_schema().await;
    e.migrate(&["advance", "--to", "dual"]).await.expect_code(0);
    let store = e.store().clone();
    let now = SystemClock.now();
    for chunk in (0..5_000u32).collect::<Vec<_>>().chunks(250) {
        let mut writes = tokio::task::JoinSet::new();
        for &i in chunk {
            let store = store.clone();
            writes.spawn(async move {
                store
                    .write(
                        schema::MAIN,
                        &format!("acct-{i}"),
                        &[CellWrite::new(
                            format!("q-{i}/0000000000000001"),
                            b"queue".to_vec(),
                        )],
                        WriteOptions::at(now).with_ttl(Ttl::from_secs(300).unwrap()),
                    )
                    .await
                    .unwrap();
            });
        }
        writes.join_all().await;
    }
    let j = e
        .migrate(&["rollback", "--to", "legacy", "--json", "--reason", "x"])
        .await
        .expect_code(3)
        .json();
    let because = j["because"].to_string();
    assert!(because.contains("and 4 990 more locks"), "{because}");
    assert!(because.len() < 2_000, "{} bytes", because.len());
    let status = e.migrate(&["status", "--json"]).await.expect_code(0).json();
    let history = status["history"].to_string();
    assert!(history.contains("and 4 990 more locks"), "{history}");
    assert!(
        history.len() < 4_000,
        "the history holds {} bytes",
        history.len()
    );
}

/// Issue 11 item 6: with connection settings, `demo` runs against that
/// database — in a keyspace of its own, dropped at the end — not silently
/// in-process; the fleet's keyspace is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_runs_against_the_given_cluster_in_its_own_keyspace() {
    let e = Endpoint::with_schema().await;
    let j = e
        .migrate(&small_demo("1s", &[]))
        .await
        .expect_code(0)
        .json();
    assert_eq!(j["passed"], true, "{j:#}");
    let database = j["database"].as_str().unwrap_or_default().to_string();
    assert!(database.contains(&e.addr()), "ran elsewhere: {j:#}");
    assert!(database.contains("(keyspace dropped)"), "{database}");
    let keyspace = database
        .split('/')
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_string();
    assert!(keyspace.starts_with("lockshift_demo_"), "{database}");
    e.migrate(&["--keyspace", &keyspace, "status"])
        .await
        .expect_code(1)
        .stderr_has("does not exist");
    let status = e.migrate(&["status", "--json"]).await.expect_code(0).json();
    assert_eq!(
        status["stage"]["stage"], "legacy",
        "the fleet's keyspace untouched"
    );
    assert_eq!(status["nodes"].as_array().unwrap().len(), 0);
}

/// Issue 11 item 7, as an operator meets it: a fresh `migrate` process
/// given three contact points, two of which accept TCP and never answer (a
/// SIGSTOPped node, a firewall that drops replies), starts and reports the
/// rollout from the one that answers — whichever the driver tries first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_process_starts_while_contact_points_hang() {
    let e = Endpoint::with_schema().await;
    let mut frozen = Vec::new();
    let mut listeners = Vec::new();
    for _ in 0..2 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        frozen.push(listener.local_addr().unwrap().to_string());
        listeners.push(tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        }));
    }
    let points = format!("{},{},{}", frozen[0], e.addr(), frozen[1]);
    for attempt in 0..3 {
        let r = common::migrate(
            Some(&points),
            &["--connect-timeout", "3s", "--json", "status"],
            &[("LOCKSHIFT__STORE__CQL__KEYSPACE", e.keyspace())],
        )
        .await;
        let j = r.expect_code(0).json();
        assert_eq!(j["stage"]["stage"], "legacy", "attempt #{attempt}: {j:#}");
    }
    for l in listeners {
        l.abort();
    }
}

/// `status` and `advance` judge on one gatherer (`Rollout::evidence`) and
/// one evaluation, so what `status` says about the next step is what
/// `advance --dry-run` finds — guard by guard, in a refused state and in a
/// safe one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_advance_judge_the_next_step_alike() {
    let e = Endpoint::with_schema().await;
    let store = e.store().clone();
    let legacy = common::node_info("old-3", Algorithm::Legacy);
    let judged = |j: &serde_json::Value| -> Vec<(String, bool)> {
        j["guards"]
            .as_array()
            .unwrap_or_else(|| panic!("no guards in {j:#}"))
            .iter()
            .map(|g| {
                (
                    g["name"].as_str().unwrap_or_default().to_string(),
                    g["passed"].as_bool().unwrap_or_default(),
                )
            })
            .collect()
    };
    for (state, safe) in [("a legacy node live", false), ("no legacy node", true)] {
        if safe {
            lockshift_rollout::registry::deregister(store.as_ref(), &SystemClock, &legacy)
                .await
                .unwrap();
        } else {
            heartbeat(
                store.as_ref(),
                &SystemClock,
                &legacy,
                Ttl::from_secs(120).unwrap(),
            )
            .await
            .unwrap();
        }
        let status = e.migrate(&["status", "--json"]).await.expect_code(0).json();
        let advance = e
            .migrate(&["advance", "--dry-run", "--json"])
            .await
            .expect_code(if safe { 0 } else { 3 })
            .json();
        let next = &status["next"];
        assert_eq!(next["safe"], safe, "{state}: status says {next:#}");
        assert_eq!(next["to"], advance["to"], "{state}");
        assert!(!judged(next).is_empty(), "{state}");
        assert_eq!(
            judged(next),
            judged(&advance),
            "{state}: status {next:#}\nadvance {advance:#}"
        );
    }
}
