use super::*;

const VALID: Duration = Duration::from_secs(30);

fn record(stage: Stage, version: u64) -> StageRecord {
    StageRecord {
        stage,
        version,
        changed_at: 0,
        by: "test".into(),
        reason: String::new(),
    }
}

/// What a node that may run anything declares.
fn declared_all() -> BTreeSet<Algorithm> {
    [Algorithm::Legacy, Algorithm::Combined, Algorithm::Queue].into()
}

/// A view whose process's clock is known within the margin for an hour
/// from `t0` (C1).
fn clocked(t0: Instant) -> View {
    let mut v = View::new(VALID);
    v.clock(Some(t0 + Duration::from_secs(3600)));
    v
}

/// A view confirmed at `t0` (stage read and heartbeat both sent then).
fn view_at(t0: Instant, stage: Stage, version: u64) -> View {
    let mut v = clocked(t0);
    v.read(record(stage, version), t0);
    v.heartbeat(t0, declared_all());
    v
}

#[test]
fn a_view_needs_both_a_stage_read_and_a_heartbeat_and_expires() {
    let t0 = Instant::now();
    let mut v = clocked(t0);
    assert!(v.confirmed(t0).is_none(), "never read");
    assert!(!v.expired(t0), "never confirmed is not 'expired'");
    v.read(record(Stage::Legacy, 0), t0);
    assert!(
        v.confirmed(t0).is_none(),
        "no heartbeat yet: unconfirmed (R2)"
    );
    assert!(!v.expired(t0), "starting up is not 'expired'");
    v.heartbeat(t0 + Duration::from_secs(1), declared_all());
    assert_eq!(v.confirmed(t0).map(|r| r.version), Some(0));
    // Valid for 30 s from the older of the two.
    assert!(v.confirmed(t0 + VALID - Duration::from_millis(1)).is_some());
    assert!(v.confirmed(t0 + VALID).is_none());
    assert!(v.expired(t0 + VALID));
    // A fresh read alone does not help while heartbeats fail.
    v.read(record(Stage::Legacy, 0), t0 + VALID);
    assert!(v.confirmed(t0 + VALID + Duration::from_secs(1)).is_none());
    v.heartbeat(t0 + VALID, declared_all());
    assert!(v.confirmed(t0 + VALID + Duration::from_secs(1)).is_some());
}

/// C1 (issue 41): a process whose clock is not known within the margin
/// of the database's — never measured, measured beyond it, or its reading
/// run out — confirms no stage: every mode resolves to combined, said as
/// degraded for an explicit one; no legacy or queue guard is handed out;
/// and it is not "expired" (the stage is confirmed, the clock is not).
#[test]
fn a_view_confirms_nothing_while_the_clock_is_not_known_within_the_margin() {
    let t0 = Instant::now();
    let mut v = View::new(VALID);
    v.read(record(Stage::Legacy, 0), t0);
    v.heartbeat(t0, declared_all());
    let unbounded = |v: &View, at: Instant| {
        assert!(v.confirmed(at).is_none());
        assert!(!v.expired(at), "the stage itself is confirmed");
        let r = v.resolve(Mode::Legacy, at);
        assert_eq!(
            (r.algorithm, r.degraded_from),
            (Algorithm::Combined, Some(Mode::Legacy))
        );
        assert_eq!(v.resolve(Mode::Auto, at).algorithm, Algorithm::Combined);
    };
    unbounded(&v, t0);
    assert_eq!(v.valid_until(), None, "never known: nothing to wake for");
    // Measured within the margin for 10 s.
    v.clock(Some(t0 + Duration::from_secs(10)));
    assert!(v.clock_bounded(t0));
    assert_eq!(v.resolve(Mode::Legacy, t0).algorithm, Algorithm::Legacy);
    assert_eq!(v.valid_until(), Some(t0 + Duration::from_secs(10)));
    let mut b = Ledger::default();
    let held = b.bind(Algorithm::Legacy, &v);
    assert_eq!(b.hand_out(held, &v, t0), Ok(()));
    // The reading runs out before the stage does.
    let later = t0 + Duration::from_secs(10);
    unbounded(&v, later);
    let waiting = b.bind(Algorithm::Legacy, &v);
    assert_eq!(b.hand_out(waiting, &v, later), Err(Refusal::Unconfirmed));
    // Measured beyond the margin.
    v.clock(None);
    unbounded(&v, t0);
    // The stage's own expiry still comes first when it is earlier.
    v.clock(Some(t0 + Duration::from_secs(3600)));
    assert_eq!(v.valid_until(), Some(t0 + VALID));
}

#[test]
fn a_slow_read_never_takes_the_view_back() {
    let t0 = Instant::now();
    let mut v = view_at(t0, Stage::Queue, 2);
    v.read(record(Stage::Dual, 1), t0 + Duration::from_secs(1));
    assert_eq!(v.record.as_ref().map(|r| r.version), Some(2));
}

#[test]
fn an_expired_view_resolves_every_mode_to_combined() {
    let t0 = Instant::now();
    let v = view_at(t0, Stage::Legacy, 0);
    let later = t0 + VALID;
    for mode in Mode::ALL {
        assert_eq!(
            v.resolve(mode, later).algorithm,
            Algorithm::Combined,
            "{mode}"
        );
    }
    assert_eq!(v.resolve(Mode::Legacy, t0).algorithm, Algorithm::Legacy);
}

/// Table: a waiting acquisition bound under (stage, version) with
/// `algorithm`, then the node resolves `now_algorithm` under the new
/// confirmed stage: is it invalidated, and which version is it bound to?
#[test]
fn waiting_acquisitions_follow_or_leave() {
    let cases = [
        // (bound algorithm, node now resolves, new stage, invalidated, version after)
        (
            Algorithm::Queue,
            Algorithm::Combined,
            Some((Stage::Dual, 3)),
            true,
            Some(2),
        ),
        (
            Algorithm::Legacy,
            Algorithm::Combined,
            Some((Stage::Dual, 3)),
            true,
            Some(2),
        ),
        (
            Algorithm::Combined,
            Algorithm::Combined,
            Some((Stage::Dual, 3)),
            false,
            Some(3),
        ),
        (
            Algorithm::Queue,
            Algorithm::Queue,
            Some((Stage::Complete, 3)),
            false,
            Some(3),
        ),
        // A config edit: same stage, new resolution.
        (
            Algorithm::Legacy,
            Algorithm::Combined,
            Some((Stage::Legacy, 2)),
            true,
            Some(2),
        ),
        // The node missed versions (paused, cut off): legacy and queue
        // leave; combined, safe beside anything, follows.
        (
            Algorithm::Legacy,
            Algorithm::Legacy,
            Some((Stage::Legacy, 6)),
            true,
            Some(2),
        ),
        (
            Algorithm::Queue,
            Algorithm::Queue,
            Some((Stage::Queue, 4)),
            true,
            Some(2),
        ),
        (
            Algorithm::Combined,
            Algorithm::Combined,
            Some((Stage::Queue, 4)),
            false,
            Some(4),
        ),
        // The view expired: combined stays, at its old version.
        (
            Algorithm::Combined,
            Algorithm::Combined,
            None,
            false,
            Some(2),
        ),
        (Algorithm::Legacy, Algorithm::Combined, None, true, Some(2)),
    ];
    let t0 = Instant::now();
    for (i, (bound, now_algorithm, stage, invalidated, version)) in cases.into_iter().enumerate() {
        let view = view_at(t0, Stage::Legacy, 2);
        let mut b = Ledger::default();
        let id = b.bind(bound, &view);
        let confirmed = stage.map(|(s, v)| record(s, v));
        let left = b.follow(now_algorithm, confirmed.as_ref());
        assert_eq!(left.contains(&id), invalidated, "case #{i}");
        assert_eq!(b.is_invalidated(id), invalidated, "case #{i}");
        assert_eq!(b.map[&id].version, version, "case #{i}");
        // Invalidation is for good, even if the node resolves back.
        let next = version.map_or(0, |v| v + 1);
        b.follow(bound, Some(&record(Stage::Legacy, next)));
        assert_eq!(b.is_invalidated(id), invalidated, "case #{i}: sticky");
    }
}

#[test]
fn held_guards_rebind_only_to_stages_that_allow_them() {
    let t0 = Instant::now();
    let view = view_at(t0, Stage::Legacy, 0);
    let mut b = Ledger::default();
    let legacy = b.bind(Algorithm::Legacy, &view);
    let combined = b.bind(Algorithm::Combined, &view);
    b.hand_out(legacy, &view, t0).unwrap();
    b.hand_out(combined, &view, t0).unwrap();
    b.follow(Algorithm::Combined, Some(&record(Stage::Dual, 1)));
    assert_eq!(
        b.map[&legacy].version,
        Some(0),
        "legacy is not allowed at dual"
    );
    assert_eq!(b.map[&combined].version, Some(1));
    assert!(
        !b.is_invalidated(legacy),
        "a held guard is never invalidated"
    );
    let dual = view_at(t0, Stage::Dual, 1);
    assert_eq!(
        b.acting_version(&dual),
        Some(0),
        "the held legacy guard (R5)"
    );
    b.unbind(legacy);
    assert_eq!(b.acting_version(&dual), Some(1));
    assert_eq!(b.counts(), BTreeMap::from([(Algorithm::Combined, 1)]));
}

#[test]
fn hand_out_refuses_what_the_stage_moved_past() {
    let t0 = Instant::now();
    let view = view_at(t0, Stage::Legacy, 0);
    let mut b = Ledger::default();
    // Invalidated while waiting.
    let id = b.bind(Algorithm::Legacy, &view);
    b.follow(Algorithm::Combined, view.confirmed(t0));
    assert_eq!(b.hand_out(id, &view, t0), Err(Refusal::Invalidated));
    // The view expired since (by the clock, before anything noticed).
    let id = b.bind(Algorithm::Legacy, &view);
    assert_eq!(b.hand_out(id, &view, t0 + VALID), Err(Refusal::Unconfirmed));
    // The view moved to another version under it.
    let id = b.bind(Algorithm::Legacy, &view);
    let moved = view_at(t0, Stage::Legacy, 4);
    assert_eq!(b.hand_out(id, &moved, t0), Err(Refusal::Moved));
    // Combined is always handed out.
    let id = b.bind(Algorithm::Combined, &view);
    assert_eq!(b.hand_out(id, &view, t0 + VALID), Ok(()));
    // And a current legacy binding is.
    let id = b.bind(Algorithm::Legacy, &view);
    assert_eq!(b.hand_out(id, &view, t0), Ok(()));
    assert!(b.any_held());
}

#[test]
fn acting_version_is_unknown_until_a_stage_was_read() {
    let b = Ledger::default();
    assert_eq!(b.acting_version(&View::new(VALID)), None);
    let t0 = Instant::now();
    assert_eq!(b.acting_version(&view_at(t0, Stage::Queue, 5)), Some(5));
}

/// R8 (issue 22): a mode switched while the registry cannot be written
/// does not act until a heartbeat that declares it has landed; combined
/// never waits.
#[test]
fn only_a_declared_algorithm_is_used() {
    let t0 = Instant::now();
    let mut v = clocked(t0);
    v.read(record(Stage::Legacy, 0), t0);
    v.heartbeat(t0, [Algorithm::Combined].into());
    assert_eq!(v.resolve(Mode::Legacy, t0).algorithm, Algorithm::Combined);
    assert_eq!(v.declaring(Mode::Legacy, t0).algorithm, Algorithm::Legacy);
    assert_eq!(v.resolve(Mode::Combined, t0).algorithm, Algorithm::Combined);
    // A slow heartbeat sent earlier that lands later changes nothing.
    v.heartbeat(t0 + Duration::from_secs(2), [Algorithm::Legacy].into());
    v.heartbeat(t0 + Duration::from_secs(1), [Algorithm::Combined].into());
    let t1 = t0 + Duration::from_secs(3);
    assert_eq!(v.resolve(Mode::Legacy, t1).algorithm, Algorithm::Legacy);
    // At stage queue a legacy node degrades as before, declared or not.
    v.read(record(Stage::Dual, 1), t1);
    v.read(record(Stage::Queue, 2), t1);
    let r = v.resolve(Mode::Legacy, t1);
    assert_eq!(
        (r.algorithm, r.degraded_from),
        (Algorithm::Combined, Some(Mode::Legacy))
    );
    assert_eq!(v.resolve(Mode::Queue, t1).algorithm, Algorithm::Combined);
}

/// A combined acquisition paces itself beside legacy contenders at stage
/// `legacy` and wherever the node cannot confirm the stage, and at full
/// speed from `dual` on, whatever the version.
#[test]
fn pacing_is_beside_legacy_at_legacy_or_unconfirmed_else_full_speed() {
    let wait = Duration::from_millis(700);
    let beside = Pacing::BesideLegacy {
        owner_wait_max: wait,
    };
    assert_eq!(Pacing::of(None, wait), beside, "unconfirmed");
    let table = [
        (Stage::Legacy, beside),
        (Stage::Dual, Pacing::FullSpeed),
        (Stage::Queue, Pacing::FullSpeed),
        (Stage::Complete, Pacing::FullSpeed),
    ];
    assert_eq!(table.map(|(s, _)| s), Stage::ALL, "every stage");
    for (stage, pacing) in table {
        for version in [0, 1, 7] {
            let r = record(stage, version);
            assert_eq!(Pacing::of(Some(&r), wait), pacing, "{stage:?} v{version}");
            assert_eq!(pacing.beside_legacy(), stage == Stage::Legacy);
        }
    }
    assert_eq!(
        Pacing::default(),
        Pacing::BesideLegacy {
            owner_wait_max: LEGACY_OWNER_WAIT_MAX
        },
        "told nothing: beside legacy"
    );
}
