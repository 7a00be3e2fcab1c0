//! The election scenarios the simulations run.

use super::*;

/// The scenario: four candidates of mixed modes (two legacy, then a
/// combined and an auto one join) and two observers (and a candidate
/// observing too) through the whole rollout, forward to
/// `complete` and back to `legacy`, the modes switched by config edits
/// while campaigns wait, with checkpoints after every stage and at random.
///
/// # Panics
/// When a node cannot start or the guards never allow a stage move.
pub async fn through_the_rollout(seed: u64, setup: Setup) -> Report {
    let mut w = World::new(seed, 4, setup);
    let [legacy, other, combined, auto] = [0, 1, 2, 3];
    // The old fleet: two legacy candidates, and the observers, until the
    // legacy lock made two leaders.
    w.candidate(Mode::Legacy).await;
    w.candidate(Mode::Legacy).await;
    w.observer().await;
    w.observer().await;
    w.campaign_until(2, Algorithm::Legacy, Duration::from_secs(120))
        .await;
    let short = Duration::from_secs(1)..Duration::from_secs(6);
    // New binaries join, campaigns in flight: one combined, one on auto
    // (combined at this stage).
    w.candidate(Mode::Combined).await;
    w.candidate(Mode::Auto).await;
    w.candidate_observes(auto);
    w.campaign_for(Duration::from_secs(3)..Duration::from_secs(8))
        .await;
    w.checkpoint("at legacy").await;
    w.edit(legacy, Mode::Auto);
    w.edit(other, Mode::Auto);
    w.move_to(Stage::Dual).await;
    w.campaign_for(short.clone()).await;
    w.maybe_checkpoint(0.5, "at dual").await;
    // Queue: the combined node stays combined, the others take the queue.
    w.move_to(Stage::Queue).await;
    w.campaign_for(short.clone()).await;
    w.checkpoint("at queue").await;
    w.edit(combined, Mode::Queue);
    w.move_to(Stage::Complete).await;
    w.campaign_for(short.clone()).await;
    w.maybe_checkpoint(0.5, "at complete").await;
    // And back, a node switched to combined on the way.
    w.move_to(Stage::Queue).await;
    w.edit(other, Mode::Combined);
    w.campaign_for(short.clone()).await;
    w.maybe_checkpoint(0.5, "back at queue").await;
    w.move_to(Stage::Dual).await;
    w.campaign_for(short.clone()).await;
    w.checkpoint("back at dual").await;
    w.move_to(Stage::Legacy).await;
    w.edit(legacy, Mode::Legacy);
    w.campaign_for(Duration::from_secs(3)..Duration::from_secs(8))
        .await;
    w.finish().await
}

/// The negative controls: candidate 0's every leadership pauses past its
/// lease and, on resuming, acts without looking whether it still leads —
/// while the other candidate, which took the lock once it was free, leads
/// for longer than a lease: the referee must see two leaders at once. And
/// observer o1's node stops once o1 has seen a leader: the checkpoints must
/// find it showing a leader that no longer leads.
///
/// # Panics
/// When a node cannot start.
pub async fn rogue_leaders(seed: u64) -> Report {
    let mut w = World::new(
        seed,
        2,
        Setup {
            faults: true,
            rogue: true,
        },
    );
    w.candidate(Mode::Auto).await;
    w.candidate(Mode::Queue).await;
    w.observer().await;
    w.observer().await;
    // Observer o1 stops following once it has seen a leader.
    while !matches!(w.referee().current(), Ok(Some(_))) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(OBSERVE_EVERY * 2).await;
    w.freeze_observer(1).await;
    tokio::time::sleep(Duration::from_secs(90)).await;
    w.finish().await
}
