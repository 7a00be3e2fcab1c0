//! Issue 19 (C): what an operator meets at the terminal — each defect as
//! it was reported (finding `#n` of that section), run through the built
//! binary.

// Integration tests: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Endpoint, FAST, migrate, node_info};
use lockshift_lock::Algorithm;
use lockshift_rollout::registry::heartbeat;
use lockshift_store::{CellWrite, SystemClock, Ttl, WriteOptions, schema};

/// #1: a holder and one waiter's reservation, both `main` cells labelled
/// `queue`: `inspect` names the holder `status` counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_names_the_holder_beside_a_reservation() {
    let e = Endpoint::with_schema().await;
    let at = WriteOptions::at(e.clock.now()).with_ttl(Ttl::from_secs(60).unwrap());
    e.store()
        .write(
            schema::MAIN,
            "acct",
            &[
                CellWrite::new("h/0000000000000001", b"queue".to_vec()),
                CellWrite::new("w/0000000000000002", b"queue:reserved".to_vec()),
            ],
            at,
        )
        .await
        .unwrap();
    let j = e.migrate(&["status", "--json"]).await.expect_code(0).json();
    assert_eq!(j["locks"]["held"], 1, "{j:#}");
    let j = e
        .migrate(&["inspect", "acct", "--json"])
        .await
        .expect_code(0)
        .json();
    assert_eq!(j["holder"], "h/0000000000000001", "{j:#}");
    e.migrate(&["inspect", "acct"])
        .await
        .expect_code(0)
        .stdout_has("holder h/0000000000000001")
        .stdout_has("queue (reserved)");
}

/// #11: a free lock is an answer, not an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_of_a_free_lock_says_it_is_free() {
    let e = Endpoint::with_schema().await;
    e.migrate(&["inspect", "nobody-holds-this"])
        .await
        .expect_code(0)
        .stdout_has("lock nobody-holds-this is free");
    let j = e
        .migrate(&["inspect", "nobody-holds-this", "--json"])
        .await
        .expect_code(0)
        .json();
    assert_eq!(j["free"], true, "{j:#}");
    assert!(j["holder"].is_null(), "{j:#}");
}

/// #3: with no node registered the guards have nothing to object to;
/// `status` says so beside its "yes".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_with_no_node_registered_says_so_beside_yes() {
    let e = Endpoint::with_schema().await;
    let r = e.migrate(&["status"]).await;
    r.expect_code(0)
        .stdout_has("safe to advance to dual: yes")
        .stdout_has("no lockshift node is registered");
    let j = e.migrate(&["status", "--json"]).await.expect_code(0).json();
    assert!(
        j["next"]["caveats"][0]
            .as_str()
            .unwrap()
            .contains("no lockshift node is registered"),
        "{j:#}"
    );
}

/// #4: two plain `advance` commands a moment apart moved the fleet two
/// stages. A change names its target; repeating it is harmless.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advance_moves_only_to_the_stage_it_names() {
    let e = Endpoint::with_schema().await;
    e.migrate(&["advance"])
        .await
        .expect_code(2)
        .stderr_has("migrate advance --to dual");
    e.migrate(&["advance", "--dry-run"]).await.expect_code(0);
    e.migrate(&["advance", "--to", "dual"])
        .await
        .expect_code(0)
        .stdout_has("stage moved from legacy to dual");
    // The same command again (a retry, an impatient second operator).
    e.migrate(&["advance", "--to", "dual"])
        .await
        .expect_code(0)
        .stdout_has("already is dual");
    e.migrate(&["advance"])
        .await
        .expect_code(2)
        .stderr_has("migrate advance --to queue");
    let j = e.migrate(&["status", "--json"]).await.expect_code(0).json();
    assert_eq!(j["stage"]["stage"], "dual");
    e.migrate(&["rollback"])
        .await
        .expect_code(2)
        .stderr_has("migrate rollback --to legacy");
}

/// How many runs of at least 20 `c` in a row `text` holds: how often a
/// huge value made of `c` is echoed.
fn runs_of(text: &str, c: char) -> usize {
    text.split(|x| x != c).filter(|run| run.len() >= 20).count()
}

/// #5: values are echoed once, cut short: a 1 MB `node.id` and a 100 KB
/// lock name give messages of a line or two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_values_are_echoed_once_and_cut_short() {
    let e = Endpoint::with_schema().await;
    // A 1 MB id comes from a file (one environment variable or argument
    // is limited to 128 KB by the kernel).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("huge.toml");
    std::fs::write(
        &file,
        format!("[node]\nid = \"{}\"\n", "n".repeat(1_000_000)),
    )
    .unwrap();
    let r = e
        .migrate(&["--config", file.to_str().unwrap(), "status"])
        .await;
    r.expect_code(2).stderr_has("node.id");
    assert!(r.stderr.len() < 2_000, "{} bytes", r.stderr.len());
    assert_eq!(runs_of(&r.stderr, 'n'), 1, "{}", r.stderr);
    // From the environment, as large as the kernel allows.
    let id = "n".repeat(100_000);
    let r = e
        .migrate_env(&["status"], &[("LOCKSHIFT__NODE__ID", id.as_str())])
        .await;
    r.expect_code(2).stderr_has("node.id");
    assert!(r.stderr.len() < 2_000, "{} bytes", r.stderr.len());
    assert_eq!(runs_of(&r.stderr, 'n'), 1, "{}", r.stderr);
    let lock = "l".repeat(100_000);
    let r = e.migrate(&["inspect", &lock]).await;
    r.expect_code(2);
    assert!(r.stderr.len() < 2_000, "{} bytes", r.stderr.len());
    assert_eq!(runs_of(&r.stderr, 'l'), 1, "{}", r.stderr);
    let r = e
        .migrate_env(&["run-with-lock", &lock, "--", "true"], FAST)
        .await;
    r.expect_code(2);
    assert!(r.stderr.len() < 2_000, "{} bytes", r.stderr.len());
}

/// #6: an unknown key from the environment is blamed on its variable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_key_names_the_variable_it_came_from() {
    let e = Endpoint::with_schema().await;
    let r = e
        .migrate_env(&["status"], &[("LOCKSHIFT__LOCK__BOGUS", "1")])
        .await;
    r.expect_code(2).stderr_has("LOCKSHIFT__LOCK__BOGUS");
    assert!(!r.stderr.contains("its default"), "{}", r.stderr);
}

/// #7: `--config` naming a directory says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_directory_is_called_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let r = migrate(
        Some("127.0.0.1:1"),
        &["--config", dir.path().to_str().unwrap(), "status"],
        &[],
    )
    .await;
    r.expect_code(2).stderr_has("is a directory");
    assert!(!r.stderr.contains("no such file"), "{}", r.stderr);
}

/// #8: durations are rounded for people: not "within 1s 3ms".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durations_are_rounded_for_people() {
    let e = Endpoint::with_schema().await;
    let holder = e
        .node("holder", lockshift_decide::algorithm::Mode::Combined)
        .await;
    let guard = holder
        .acquire(&lockshift_lock::LockId::new("busy").unwrap())
        .await
        .unwrap();
    e.migrate_env(
        &["run-with-lock", "busy", "--timeout", "1s", "--", "true"],
        FAST,
    )
    .await
    .expect_code(3)
    .stderr_has("was not free within 1s: held by ")
    .stderr_has(" (exit 3)");
    guard.release().await.unwrap();
}

/// #9: a port in use is said once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn address_in_use_is_said_once() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let r = migrate(None, &["serve", "--listen", &addr], &[]).await;
    r.expect_code(1);
    assert_eq!(
        r.stderr
            .to_lowercase()
            .matches("address already in use")
            .count(),
        1,
        "{}",
        r.stderr
    );
}

/// #10: exit 127 (command not found) is in run-with-lock's table — and is
/// what it exits with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_127_is_documented() {
    migrate(None, &["--help"], &[])
        .await
        .expect_code(0)
        .stdout_has("127  the command was not found");
    migrate(None, &["run-with-lock", "--help"], &[])
        .await
        .expect_code(0)
        .stdout_has("The command not found: exit 127");
    let e = Endpoint::with_schema().await;
    e.migrate_env(
        &["run-with-lock", "job", "--", "/nonexistent/command"],
        FAST,
    )
    .await
    .expect_code(127);
}

/// #2: a refusal says what to do under each failing guard — the "do"
/// column of docs/operating.md §2 — in `advance`, in `status`, and in
/// their JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_says_what_to_do() {
    let e = Endpoint::with_schema().await;
    heartbeat(
        e.store().as_ref(),
        &SystemClock,
        &node_info("old-7", Algorithm::Legacy),
        Ttl::from_secs(120).unwrap(),
    )
    .await
    .unwrap();
    let fix = "do: set `node.mode = \"auto\"` (or `combined`) in N's config file";
    e.migrate(&["advance", "--to", "dual"])
        .await
        .expect_code(3)
        .stdout_has("[FAIL] node old-7 runs legacy")
        .stdout_has(fix);
    let j = e
        .migrate(&["advance", "--to", "dual", "--json"])
        .await
        .expect_code(3)
        .json();
    assert!(
        j["actions"][0]
            .as_str()
            .unwrap()
            .starts_with("set `node.mode = \"auto\"`"),
        "{j:#}"
    );
    e.migrate(&["status"])
        .await
        .expect_code(0)
        .stdout_has("safe to advance to dual: no")
        .stdout_has(fix);
    let j = e.migrate(&["status", "--json"]).await.expect_code(0).json();
    assert_eq!(
        j["next"]["actions"], j["next"]["guards"][0]["actions"],
        "{j:#}"
    );
}

/// Item 6: at stage `queue`, a queue holder and — on the same lock — an
/// old-style `main` cell that is not lockshift's (a binary that predates
/// lockshift): `status` calls it the unsafe state and exits 5. (It exited
/// 0 with "2 foreign, 1 queue holders".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_cell_beside_a_queue_holder_exits_5() {
    let e = Endpoint::with_schema().await;
    for to in ["dual", "queue"] {
        e.migrate(&["advance", "--to", to]).await.expect_code(0);
    }
    let put = |column: &'static str, value: &'static [u8]| {
        let store = e.store().clone();
        let at = WriteOptions::at(e.clock.now()).with_ttl(Ttl::from_secs(60).unwrap());
        async move {
            store
                .write(
                    schema::MAIN,
                    "acct-9",
                    &[CellWrite::new(column, value.to_vec())],
                    at,
                )
                .await
                .unwrap();
        }
    };
    put("new-1/0000000000000001", b"queue").await;
    e.migrate(&["status"]).await.expect_code(0);
    put("3f2504e0-4f89-11d3-9a0c-0305e82c3301", b"1").await;
    let j = e.migrate(&["status", "--json"]).await.expect_code(5).json();
    assert_eq!(j["unsafe_state"], true, "{j:#}");
    assert_eq!(j["locks"]["held_by"]["foreign"], 1, "{j:#}");
    assert_eq!(j["locks"]["held_by"]["queue"], 1, "{j:#}");
    e.migrate(&["status"])
        .await
        .expect_code(5)
        .stdout_has("UNSAFE")
        .stdout_has("predate lockshift");
}
