use super::*;

/// The "waiting for" lines: printed when whom the waiter waits for
/// changes, at most one per `WAIT_LINE_GAP`, the latest change at the
/// end of the gap; nothing for a waiter that knows of nobody.
#[test]
fn waiting_lines_follow_changes_at_most_one_per_gap() {
    let start = Instant::now();
    let at = |s: u64| start + Duration::from_secs(s);
    let held = |h: &str| WaitingFor {
        holder: Some(h.into()),
        ..WaitingFor::default()
    };
    let in_line = |n: u32, first: &str| WaitingFor {
        ahead: Some((n, first.into())),
        ..WaitingFor::default()
    };
    let mut lines = WaitLines::new(&LockId::new("job").unwrap(), start);
    // (seen at second, state) → printed now?
    let steps: Vec<(u64, WaitingFor, Option<&str>)> = vec![
        (1, in_line(2, "a/1"), None),
        (2, in_line(1, "a/1"), None),
        (
            6,
            in_line(1, "a/1"),
            Some("waiting for job: 1 waiting ahead in line, first a/1"),
        ),
        (7, held("b/2"), None),
        (8, WaitingFor::default(), None),
        (20, held("b/2"), Some("waiting for job: held by b/2")),
        (21, held("b/2"), None),
        (30, held("c/3"), Some("waiting for job: held by c/3")),
    ];
    for (i, (second, state, want)) in steps.into_iter().enumerate() {
        assert_eq!(lines.seen(state, at(second)).as_deref(), want, "step #{i}");
    }
    // A change too soon waits for the end of the gap, and only the
    // latest is printed.
    assert_eq!(lines.seen(held("d/4"), at(31)), None);
    assert_eq!(lines.seen(held("e/5"), at(32)), None);
    assert_eq!(lines.due(), Some(at(35)));
    assert_eq!(lines.flush(at(34)), None);
    assert_eq!(
        lines.flush(at(35)).as_deref(),
        Some("waiting for job: held by e/5")
    );
    assert_eq!(lines.due(), None);
    // Long names are cut short.
    let long = "x".repeat(10_000);
    let line = describe_wait("job", &held(&long)).unwrap();
    assert!(line.len() < 400, "{}", line.len());
}

/// Each way of not getting the lock has its exit code (table; the
/// index is printed on failure).
#[test]
fn not_held_exit_codes() {
    let cases = [
        (NotHeld::Timeout, 3),
        (NotHeld::Interrupted(Signal::SIGINT), 130),
        (NotHeld::Interrupted(Signal::SIGTERM), 143),
        (NotHeld::Interrupted(Signal::SIGHUP), 129),
        (NotHeld::NoFencingToken, 1),
    ];
    for (i, (not_held, code)) in cases.into_iter().enumerate() {
        assert_eq!(not_held.exit_code(), code, "case #{i}: {not_held:?}");
    }
}

/// The node id this process registers as, by default: valid, and
/// saying what it is.
#[test]
fn the_default_node_id_is_valid() {
    let id = node_id();
    assert!(id.starts_with("migrate-"), "{id}");
    assert!(id.ends_with(&format!("-{}", std::process::id())), "{id}");
    NodeId::new(id).unwrap();
}

// ===== issue 31 item 1: what a wait that ends without the lock says =====

mod outcomes {
    use std::sync::Arc;

    use lockshift::Settings;
    use lockshift_store::{MemoryStore, SharedStore, StoreErrorKind, SystemClock};

    use crate::ops::failing::FailingLocks;
    use crate::ops::run_with_lock::{Request, RunResult, run_with_lock};
    use crate::ops::{Env, lock_session::LockRequest};
    use crate::{Outcome, error_text};

    use super::*;

    fn request(mode: Mode, timeout: Duration, marker: &std::path::Path) -> Request {
        Request {
            take: LockRequest {
                sharing: lockshift::Sharing::Exclusive,
                lock: LockId::new("job").unwrap(),
                mode: Some(mode),
                timeout: Some(timeout),
                fencing_token_required: true,
            },
            grace: Duration::from_secs(1),
            command: vec![
                "sh".into(),
                "-c".into(),
                format!("touch '{}'", marker.display()),
            ],
            proclaim: None,
            supervisor: None,
        }
    }

    fn env_over(store: SharedStore) -> Env {
        Env::new(Settings::default(), store, Arc::new(SystemClock))
    }

    /// With the cluster's quorum out of reach no read of the lock ever
    /// succeeds: the wait ends with an error (exit 1) that says so, with
    /// the store's reason and the replicas it needed — not "not free"
    /// (exit 3), which scripts retry. Both algorithms a node may take the
    /// lock with (combined at stage legacy; legacy) say it the same way.
    #[tokio::test]
    async fn an_unreachable_store_is_an_error_not_a_lock_not_free() {
        for (i, mode) in [Mode::Auto, Mode::Legacy].into_iter().enumerate() {
            let store: SharedStore = Arc::new(FailingLocks {
                inner: MemoryStore::new(),
                kind: StoreErrorKind::Unavailable,
                message: "Not enough nodes are alive to satisfy required consistency level \
                          (consistency: Quorum, required: 2, alive: 1)",
            });
            let dir = tempfile::tempdir().unwrap();
            let marker = dir.path().join("ran");
            let mut notes = Vec::new();
            let req = request(mode, Duration::from_secs(1), &marker);
            let err = run_with_lock(&env_over(store), req, |n| notes.push(n))
                .await
                .unwrap_err();
            let text = error_text(&err);
            assert!(text.starts_with("taking lock job: "), "case #{i}: {text}");
            // The last failure, whichever request it was (the arrival
            // writes its queue cell and reads its place at once).
            assert!(
                text.contains("no read of the lock succeeded: "),
                "case #{i}: {text}"
            );
            assert!(
                text.ends_with(
                    "failed: not enough replicas available: Not enough nodes are alive to \
                     satisfy required consistency level (consistency: Quorum, required: 2, \
                     alive: 1)"
                ),
                "case #{i}: {text}"
            );
            assert!(
                notes.iter().all(|n| !n.contains("not free")),
                "case #{i}: {notes:?}"
            );
            assert!(!marker.exists(), "case #{i}: the command did not run");
        }
    }

    /// A store error retrying cannot fix — a lock whose home datacenter
    /// is out of reach — ends the wait at once with its message (exit 1),
    /// not after `--timeout`.
    #[tokio::test]
    async fn a_lock_whose_home_is_out_of_reach_fails_at_once_with_its_message() {
        let store: SharedStore = Arc::new(FailingLocks {
            inner: MemoryStore::new(),
            kind: StoreErrorKind::HomeUnreachable,
            message: "lock job lives in datacenter dc2, cut off from dc1",
        });
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let started = std::time::Instant::now();
        let mut notes = Vec::new();
        let req = request(Mode::Auto, Duration::from_secs(30), &marker);
        let err = run_with_lock(&env_over(store), req, |n| notes.push(n))
            .await
            .unwrap_err();
        let text = error_text(&err);
        assert!(
            text.contains("was not sent: lock job lives in datacenter dc2, cut off from dc1"),
            "{text}"
        );
        assert!(started.elapsed() < Duration::from_secs(10), "not a wait");
        assert!(notes.iter().all(|n| !n.contains("not free")), "{notes:?}");
        assert!(!marker.exists(), "the command did not run");
    }

    /// A holder seen: "not free" (exit 3), naming it.
    #[tokio::test]
    async fn a_lock_held_by_another_is_not_free_naming_the_holder() {
        let store: SharedStore = Arc::new(MemoryStore::new());
        let env = env_over(store);
        let holder = lockshift::Node::builder()
            .settings(Settings::default())
            .store(env.store.clone())
            .clock(env.clock.clone())
            .start()
            .await
            .unwrap();
        let guard = holder.acquire("job").await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let mut notes = Vec::new();
        let req = request(Mode::Auto, Duration::from_secs(1), &marker);
        let report = run_with_lock(&env, req, |n| notes.push(n)).await.unwrap();
        assert_eq!(
            (report.result, report.outcome()),
            (RunResult::Timeout, Outcome::NotSafe)
        );
        let owner = guard.owner().to_string();
        let want = format!(": held by {owner} (exit 3)");
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("lock job was not free within 1") && n.ends_with(&want)),
            "{notes:?}"
        );
        assert!(!marker.exists(), "the command did not run");
        guard.release().await.unwrap();
        holder.shutdown().await;
    }
}

/// The holder's TTL left is printed beside it, and a new TTL alone (every
/// read of `main` shows one) prints no new line.
#[test]
fn the_holders_ttl_left_is_shown_but_prints_no_line_of_its_own() {
    let start = Instant::now();
    let at = |s: u64| start + Duration::from_secs(s);
    let held = |ttl: u64| WaitingFor {
        holder: Some("b/2".into()),
        holder_ttl: Some(Duration::from_secs(ttl)),
        ..WaitingFor::default()
    };
    let mut lines = WaitLines::new(&LockId::new("job").unwrap(), start);
    assert_eq!(
        lines.seen(held(42), at(6)).as_deref(),
        Some("waiting for job: held by b/2 (42 s left)")
    );
    assert_eq!(lines.seen(held(37), at(11)), None);
    assert_eq!(lines.due(), None);
}
