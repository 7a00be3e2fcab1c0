//! The rollout under attack (issue 10, items 1–4): schedules in which a
//! legacy acquisition and a queue acquisition could run at once because the
//! rollout layer lost track of one of them. Real `Node`s, the real
//! `Rollout` with default guards, the exclusion oracle watching every
//! critical section; legacy nodes get slow `main` writes so that an overlap
//! becomes two holders quickly (see `lockshift_tests::attacks`).

use std::time::Duration;

use lockshift::{LockGuard, Node};
use lockshift_decide::algorithm::{Mode, Stage};
use lockshift_lock::Algorithm;
use lockshift_store::schema;
use lockshift_tests::attacks::{World, cut_off, hold, must_move, plan, try_move};
use lockshift_tests::sim::{for_each_seed, paused};

const LOCKS: [&str; 3] = ["x1", "x2", "x3"];
const MINUTE: Duration = Duration::from_secs(60);
/// How long the fleet hammers once the schedule is set up: long enough
/// for the stale acquisitions to meet the other algorithm (on the old
/// code every violation came within the first few seconds).
const HAMMER: Duration = Duration::from_secs(20);

async fn hold_all(node: &Node) -> Vec<LockGuard> {
    let mut held = Vec::new();
    for lock in LOCKS {
        held.push(hold(node, lock).await);
    }
    held
}

async fn release_all(held: Vec<LockGuard>) {
    for g in held {
        g.release().await.unwrap();
    }
}

/// Item 1. Stage `queue`: A (combined) holds the locks, B (combined) waits
/// next on each, Q (`auto`, so queue) has acquisitions queued after them
/// (each task takes its lock once). The operator rolls back to `dual`,
/// then to `legacy` as soon as the guards allow; a legacy node starts and A
/// lets go. Q's queue acquisitions must not survive the rollback.
#[test]
fn a_waiting_queue_acquisition_does_not_survive_a_rollback_to_legacy() {
    let test = "a_waiting_queue_acquisition_does_not_survive_a_rollback_to_legacy";
    for_each_seed(test, 0, 8, |seed| {
        paused(async {
            let mut w = World::new(seed);
            let rollout = w.rollout();
            let a = w.start("a", Mode::Combined, plan(false), false).await;
            let b = w.start("b", Mode::Combined, plan(false), false).await;
            let q = w.start("q", Mode::Auto, plan(false), false).await;
            must_move(&rollout, Stage::Dual, 5 * MINUTE).await;
            must_move(&rollout, Stage::Queue, 5 * MINUTE).await;
            tokio::time::sleep(w.timings.reread * 2).await;
            assert_eq!(q.node.status().effective, Algorithm::Queue);
            let held = hold_all(&a.node).await;
            w.once(b.node.clone(), &LOCKS, 3, Duration::from_millis(5));
            tokio::time::sleep(Duration::from_millis(100)).await;
            w.once(q.node.clone(), &LOCKS, 60, Duration::from_millis(30));
            tokio::time::sleep(Duration::from_secs(1)).await;
            must_move(&rollout, Stage::Dual, MINUTE).await;
            must_move(&rollout, Stage::Legacy, 10 * MINUTE).await;
            let l = w.start("l", Mode::Legacy, plan(true), false).await;
            w.hammer(l.node.clone(), &LOCKS, 6, Duration::from_millis(5));
            tokio::time::sleep(Duration::from_secs(1)).await;
            release_all(held).await;
            tokio::time::sleep(HAMMER).await;
            w.finish().await.assert_exclusive(&format!("seed {seed}"));
        })
    });
}

/// Item 2. Stage `legacy`: L (legacy, config file) has acquisitions
/// waiting for a combined holder — waiting legacy only reads `main`, so
/// nothing shows. L's config is edited to `combined`; the operator moves to
/// `dual` and `queue` as soon as the guards allow; a queue node joins and
/// the holder lets go. L's legacy acquisitions must not survive the edit.
#[test]
fn a_waiting_legacy_acquisition_does_not_survive_into_queue() {
    let test = "a_waiting_legacy_acquisition_does_not_survive_into_queue";
    for_each_seed(test, 0, 8, |seed| {
        paused(async {
            let mut w = World::new(seed);
            let rollout = w.rollout();
            let h = w.start("h", Mode::Combined, plan(false), false).await;
            let l = w.start("l", Mode::Legacy, plan(true), true).await;
            let held = hold_all(&h.node).await;
            w.hammer(l.node.clone(), &LOCKS, 24, Duration::from_millis(5));
            tokio::time::sleep(Duration::from_secs(1)).await;
            w.edit_mode(&l, "l", Mode::Combined);
            tokio::time::sleep(w.timings.reread * 2).await;
            assert_eq!(l.node.status().effective, Algorithm::Combined);
            must_move(&rollout, Stage::Dual, 10 * MINUTE).await;
            must_move(&rollout, Stage::Queue, 10 * MINUTE).await;
            let qn = w.start("qn", Mode::Queue, plan(false), false).await;
            w.hammer(qn.node.clone(), &LOCKS, 3, Duration::from_millis(20));
            tokio::time::sleep(Duration::from_secs(1)).await;
            release_all(held).await;
            tokio::time::sleep(HAMMER).await;
            w.finish().await.assert_exclusive(&format!("seed {seed}"));
        })
    });
}

/// Item 3. L (legacy) loses the `rollout` and `nodes` partitions only: it
/// can take locks but can neither re-read the stage nor heartbeat. Its
/// registry row expires; the operator moves to `dual` and `queue` as soon
/// as the guards allow, and queue nodes hammer the locks L hammers. L must
/// act as combined once it cannot confirm the stage.
#[test]
fn a_node_cut_off_from_the_stage_stops_acting_on_it() {
    let test = "a_node_cut_off_from_the_stage_stops_acting_on_it";
    for_each_seed(test, 0, 8, |seed| {
        paused(async {
            let mut w = World::new(seed);
            let rollout = w.rollout();
            let l = w.start("l", Mode::Legacy, plan(true), false).await;
            let _c = w.start("c", Mode::Combined, plan(false), false).await;
            tokio::time::sleep(Duration::from_secs(2)).await;
            l.env
                .store
                .set_plan(cut_off(plan(true), vec![schema::ROLLOUT, schema::NODES]));
            tokio::time::sleep(w.timings.heartbeat_ttl + Duration::from_secs(2)).await;
            must_move(&rollout, Stage::Dual, 10 * MINUTE).await;
            must_move(&rollout, Stage::Queue, 10 * MINUTE).await;
            let qn = w.start("qn", Mode::Queue, plan(false), false).await;
            w.hammer(qn.node.clone(), &LOCKS, 4, Duration::from_millis(5));
            w.hammer(l.node.clone(), &LOCKS, 4, Duration::from_millis(5));
            tokio::time::sleep(HAMMER).await;
            let effective = l.node.status().effective;
            w.finish().await.assert_exclusive(&format!("seed {seed}"));
            assert_eq!(
                effective,
                Algorithm::Combined,
                "seed {seed}: a node that cannot confirm the stage acts as combined"
            );
        })
    });
}

/// Item 4. A service keeps only a clone of its node (once a locker of it,
/// `Node::start(..).await?.locker()`); the handle it started with is
/// dropped. The clone must keep its node alive — heartbeat, stage re-reads — so the
/// guards see a legacy node and refuse `dual`; if they did not, queue nodes
/// would join beside it.
#[test]
fn a_locker_keeps_its_node_alive() {
    let test = "a_locker_keeps_its_node_alive";
    for_each_seed(test, 0, 8, |seed| {
        paused(async {
            let mut w = World::new(seed);
            let rollout = w.rollout();
            let locker = w
                .start("l", Mode::Legacy, plan(true), false)
                .await
                .node
                .clone();
            tokio::time::sleep(w.timings.heartbeat_ttl + Duration::from_secs(2)).await;
            let retry = Duration::from_secs(1);
            let moved = try_move(&rollout, Stage::Dual, retry, 2 * MINUTE).await
                && try_move(&rollout, Stage::Queue, retry, 2 * MINUTE).await;
            let qn = w.start("qn", Mode::Queue, plan(false), false).await;
            w.hammer(qn.node.clone(), &LOCKS, 4, Duration::from_millis(5));
            w.hammer(locker, &LOCKS, 4, Duration::from_millis(5));
            tokio::time::sleep(HAMMER).await;
            w.finish().await.assert_exclusive(&format!("seed {seed}"));
            assert!(
                !moved,
                "seed {seed}: the guards let the stage leave legacy beside a live legacy locker"
            );
        })
    });
}
