use std::time::Duration;

use super::*;

/// Invalidation and a caller's cancel are two signals: the node fires an
/// acquisition's binding and never the caller's token, and a caller's
/// cancel never looks like an invalidation to the locker — but the
/// bindings count an acquisition its caller ended as leaving (R5 reports
/// what still waits).
#[test]
fn an_invalidation_and_a_caller_cancel_are_separate_signals() {
    let t0 = Instant::now();
    // A view confirmed at `t0`: stage `legacy`, a node that may run anything.
    let mut view = View::new(Duration::from_secs(30));
    view.clock(Some(t0 + Duration::from_secs(3600)));
    view.read(StageRecord::initial(), t0);
    view.heartbeat(
        t0,
        [Algorithm::Legacy, Algorithm::Combined, Algorithm::Queue].into(),
    );
    let mut b = Bindings::default();
    let caller = CancellationToken::new();
    let (id, binding) = b.bind(Algorithm::Legacy, &view, Some(&caller));
    b.follow(Algorithm::Combined, view.confirmed(t0));
    assert!(binding.is_invalidated() && !caller.is_cancelled());
    assert!(b.is_invalidated(id));
    let (id, binding) = b.bind(Algorithm::Combined, &view, Some(&caller));
    caller.cancel();
    assert!(!binding.is_invalidated(), "the caller's cancel is its own");
    b.follow(Algorithm::Combined, view.confirmed(t0));
    assert!(b.is_invalidated(id), "counted as leaving");
    assert!(
        b.hand_out(id, &view, t0).is_err(),
        "a cancelled acquisition that won anyway is not handed out"
    );
}
