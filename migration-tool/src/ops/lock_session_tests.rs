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
        ahead: None,
    };
    let behind = |n: u32, first: &str| WaitingFor {
        holder: None,
        ahead: Some((n, first.into())),
    };
    let mut lines = WaitLines::new(&LockId::new("job").unwrap(), start);
    // (seen at second, state) → printed now?
    let steps: Vec<(u64, WaitingFor, Option<&str>)> = vec![
        (1, behind(2, "a/1"), None),
        (2, behind(1, "a/1"), None),
        (
            6,
            behind(1, "a/1"),
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
