use std::collections::BTreeSet;
use std::time::Duration;

use lockshift_decide::algorithm::Stage;

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

/// A view confirmed at `t0` (stage read and heartbeat both sent then).
fn view_at(t0: Instant, stage: Stage, version: u64) -> View {
    let mut v = View::new(VALID);
    v.read(record(stage, version), t0);
    v.heartbeat(t0, declared_all());
    v
}

#[test]
fn a_caller_cancel_reaches_the_attempt_but_not_the_other_way() {
    let t0 = Instant::now();
    let view = view_at(t0, Stage::Legacy, 0);
    let mut b = Bindings::default();
    let caller = CancellationToken::new();
    let (id, token) = b.bind(Algorithm::Legacy, &view, Some(&caller));
    b.follow(Algorithm::Combined, view.confirmed(t0));
    assert!(token.is_cancelled() && !caller.is_cancelled());
    assert!(b.is_invalidated(id));
    let (_, token) = b.bind(Algorithm::Combined, &view, Some(&caller));
    caller.cancel();
    assert!(token.is_cancelled());
}
