use std::time::Duration;

use super::*;

#[test]
fn a_caller_cancel_reaches_the_attempt_but_not_the_other_way() {
    let t0 = Instant::now();
    // A view confirmed at `t0`: stage `legacy`, a node that may run anything.
    let mut view = View::new(Duration::from_secs(30));
    view.read(StageRecord::initial(), t0);
    view.heartbeat(
        t0,
        [Algorithm::Legacy, Algorithm::Combined, Algorithm::Queue].into(),
    );
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
