use std::collections::BTreeMap;
use std::sync::Arc;

use lockshift_store::{
    CellWrite, Clock, ManualClock, MemoryStore, SharedStore, Store, WriteOptions,
};

use super::*;
use crate::registry::{heartbeat, record_activity};
use lockshift_decide::algorithm::Mode;
use lockshift_decide::registry::NodeInfo;

const NOW: i64 = 1_700_000_000_000_000;

/// What a node running `effective` reports, having seen stage `legacy`.
fn info(name: &str, effective: Algorithm) -> NodeInfo {
    NodeInfo {
        node: name.to_string(),
        version: "0.1.0".to_string(),
        configured_mode: Mode::Auto,
        effective,
        degraded: false,
        seen_stage: Some(Stage::Legacy),
        seen_version: Some(0),
        started_at: 0,
        incarnation: None,
        last_used: BTreeMap::new(),
        lease: None,
        acting_version: Some(0),
        bound: BTreeMap::new(),
        view_expired: false,
        datacenter: None,
        homes: None,
        stage_valid_for_ms: None,
        registry_ttl_ms: None,
        left: false,
        clock: None,
        host_clock: None,
    }
}

fn settings() -> RolloutSettings {
    RolloutSettings::default()
}

#[test]
fn stages_cannot_be_skipped_or_repeated() {
    let err = check_edge(Stage::Legacy, Stage::Queue).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot move from stage legacy to queue: stages cannot be skipped; move to dual first"
    );
    let err = check_edge(Stage::Complete, Stage::Dual).unwrap_err();
    assert!(err.to_string().ends_with("move to queue first"), "{err}");
    let err = check_edge(Stage::Dual, Stage::Dual).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot move from stage dual to dual: the stage already is dual"
    );
    for s in Stage::ALL {
        for t in [s.next(), s.previous()].into_iter().flatten() {
            check_edge(s, t).unwrap();
        }
    }
}

struct World {
    clock: Arc<ManualClock>,
    store: SharedStore,
    rollout: Rollout,
}

fn world() -> World {
    let clock = Arc::new(ManualClock::new(Timestamp::from_micros(NOW)));
    let store: SharedStore = Arc::new(MemoryStore::with_clock(clock.clone()));
    let rollout = Rollout::new(
        store.clone(),
        clock.clone(),
        settings(),
        LeaseSettings::default(),
        QueueSettings::default(),
    );
    World {
        clock,
        store,
        rollout,
    }
}

fn request(to: Stage, dry_run: bool) -> TransitionRequest {
    TransitionRequest {
        to,
        by: "alice".into(),
        reason: "rollout".into(),
        dry_run,
        expected_from: None,
    }
}

#[tokio::test]
async fn transitions_are_recorded_and_refusals_too() {
    let w = world();
    assert_eq!(w.rollout.current().await.unwrap(), StageRecord::initial());

    // A legacy node is alive: refused, stage unchanged, refusal recorded.
    let mut info = info("web-3", Algorithm::Legacy);
    heartbeat(
        w.store.as_ref(),
        w.clock.as_ref(),
        &info,
        lockshift_store::Ttl::from_secs(30).unwrap(),
    )
    .await
    .unwrap();
    let report = w
        .rollout
        .transition(request(Stage::Dual, false))
        .await
        .unwrap();
    assert!(!report.applied);
    assert_eq!(
        report.verdict.failures(),
        ["node web-3 runs legacy (heartbeat 0s ago)"]
    );
    assert_eq!(w.rollout.current().await.unwrap().stage, Stage::Legacy);

    // The node switches to combined (its next heartbeat, a second later);
    // its legacy use is recorded activity.
    w.clock.advance(Duration::from_secs(1));
    info.effective = Algorithm::Combined;
    heartbeat(
        w.store.as_ref(),
        w.clock.as_ref(),
        &info,
        lockshift_store::Ttl::from_secs(30).unwrap(),
    )
    .await
    .unwrap();
    record_activity(w.store.as_ref(), Algorithm::Legacy, w.clock.now())
        .await
        .unwrap();
    let dry = w
        .rollout
        .transition(request(Stage::Dual, true))
        .await
        .unwrap();
    assert!(dry.dry_run && !dry.applied);
    assert_eq!(
        dry.verdict.failures(),
        ["legacy activity seen 0s ago (quiet period 2m)"]
    );

    // After the quiet period: applied.
    w.clock.advance(Duration::from_secs(121));
    heartbeat(
        w.store.as_ref(),
        w.clock.as_ref(),
        &info,
        lockshift_store::Ttl::from_secs(30).unwrap(),
    )
    .await
    .unwrap();
    let dry = w
        .rollout
        .transition(request(Stage::Dual, true))
        .await
        .unwrap();
    assert!(
        dry.verdict.is_safe() && !dry.applied,
        "a dry run changes nothing"
    );
    assert_eq!(w.rollout.current().await.unwrap().stage, Stage::Legacy);
    let done = w
        .rollout
        .transition(request(Stage::Dual, false))
        .await
        .unwrap();
    assert!(done.applied);
    let current = w.rollout.current().await.unwrap();
    assert_eq!(
        (current.stage, current.version, current.by.as_str()),
        (Stage::Dual, 1, "alice")
    );

    // Skipping is an error, not a refusal, and is not recorded.
    let err = w
        .rollout
        .transition(request(Stage::Complete, false))
        .await
        .unwrap_err();
    assert!(
        matches!(err, RolloutError::InvalidTransition { .. }),
        "{err}"
    );

    let history = w.rollout.history().await.unwrap();
    let actions: Vec<(HistoryAction, Stage, Stage)> =
        history.iter().map(|h| (h.action, h.from, h.to)).collect();
    assert_eq!(
        actions,
        [
            (HistoryAction::Refusal, Stage::Legacy, Stage::Dual),
            (HistoryAction::Transition, Stage::Legacy, Stage::Dual)
        ]
    );
    assert_eq!(
        history[0].failed_guards,
        ["node web-3 runs legacy (heartbeat 0s ago)"]
    );
    assert_eq!(history[1].by, "alice");
}

#[tokio::test]
async fn a_new_stage_wins_even_when_the_operators_clock_is_behind() {
    let w = world();
    // The current record was written by someone whose clock ran far ahead.
    let record = StageRecord {
        stage: Stage::Dual,
        version: 1,
        changed_at: NOW + 3_600_000_000,
        by: "fast".into(),
        reason: "r".into(),
    };
    w.store
        .write(
            schema::ROLLOUT,
            STAGE_ROW,
            &[CellWrite::new(
                STAGE_COLUMN,
                serde_json::to_vec(&record).unwrap(),
            )],
            WriteOptions::at(Timestamp::from_micros(NOW + 3_600_000_000)),
        )
        .await
        .unwrap();
    let report = w
        .rollout
        .transition(request(Stage::Queue, false))
        .await
        .unwrap();
    assert!(report.applied);
    assert_eq!(w.rollout.current().await.unwrap().stage, Stage::Queue);
}
