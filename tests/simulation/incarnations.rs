//! Two processes under one node id (a replacement started before the old
//! process stopped, a StatefulSet pod, a `node.id` a blue/green copy
//! shares): the registry must count both, and a process's evidence must
//! fail safe when its registry writes fail. Real `Node`s, the real
//! `Rollout` with its guards, the exclusion oracle watching every critical
//! section (see `lockshift_tests::attacks`).
//!
//! Each schedule ends with the old process taking locks as legacy right
//! after the operator reached stage `queue`, beside a queue node: if the
//! guards were fooled, the two algorithms overlap and the oracle sees two
//! holders (docs/design.md §4, R5 and R8).

use std::time::Duration;

use lockshift_decide::algorithm::{Mode, Stage};
use lockshift_lock::Algorithm;
use lockshift_rollout::registry::live_nodes;
use lockshift_rollout::{Rollout, TransitionRequest};
use lockshift_store::{OpKind, schema};
use lockshift_tests::attacks::{Started, World, cut_off, hold, plan};
use lockshift_tests::sim::{for_each_seed, paused};

const LOCKS: [&str; 3] = ["x1", "x2", "x3"];
/// How long the fleet hammers once the schedule is set up.
const HAMMER: Duration = Duration::from_secs(10);

/// A world whose nodes re-read the stage every 4 s (the default is 10 s):
/// the old process acts on its last view that long after the stage moved.
fn world(seed: u64) -> World {
    let mut w = World::new(seed);
    w.timings.reread = Duration::from_secs(4);
    w.timings.valid_for = Duration::from_secs(8);
    w.timings.quiet = Duration::from_secs(25);
    w
}

/// One transition attempt; whether it was applied.
async fn attempt(rollout: &Rollout, to: Stage) -> bool {
    rollout
        .transition(TransitionRequest {
            to,
            by: "operator".into(),
            reason: format!("attack: to {to}"),
            dry_run: false,
            expected_from: None,
        })
        .await
        .expect("the transition evaluates")
        .applied
}

/// The operator advances legacy → dual → queue as fast as the guards
/// allow for `within`; before each attempt, `nudge` may make the
/// replacement re-read the stage and heartbeat at once. Whether the stage
/// reached `queue`.
async fn advance_to_queue(
    rollout: &Rollout,
    replacement: &Started,
    nudge: bool,
    retry: Duration,
    within: Duration,
) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    for to in [Stage::Dual, Stage::Queue] {
        loop {
            if nudge {
                let _ = replacement.node.refresh().await;
                let _ = replacement.node.heartbeat().await;
            }
            if attempt(rollout, to).await {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(retry).await;
        }
    }
    true
}

/// After the operator's attempts: a queue node and `old` take the same
/// locks; exclusion must hold.
async fn old_meets_queue(mut w: World, old: &Started, seed: u64) {
    let q = w.start("q", Mode::Queue, plan(false), false).await;
    w.hammer(q.node.clone(), &LOCKS, 3, Duration::from_millis(3));
    w.hammer(old.node.clone(), &LOCKS, 12, Duration::from_millis(3));
    tokio::time::sleep(HAMMER).await;
    w.finish().await.assert_exclusive(&format!("seed {seed}"));
}

/// The registry rows of `node`, one per live process.
async fn rows_of(w: &World, node: &str) -> usize {
    use lockshift_store::Clock;
    let now = w.cluster.clock.now();
    let (nodes, _) = live_nodes(w.cluster.store.as_ref(), now, Duration::ZERO)
        .await
        .expect("the registry reads");
    nodes.iter().filter(|n| n.info.node == node).count()
}

/// Schedule 1, no fault at all: "web-1" (legacy, idle) runs; its
/// replacement "web-1" (auto, so combined at `legacy`) starts beside it, as
/// a container platform starts the new pod before the old one stopped. The
/// replacement re-reads the stage and heartbeats before each of the
/// operator's attempts. On a registry with one cell per node id its rows
/// overwrote the old process's, `dual` and `queue` passed, and the old
/// process took locks as legacy beside queue holders until its next
/// re-read.
#[test]
fn a_replacement_under_the_same_id_does_not_hide_the_old_process() {
    let test = "a_replacement_under_the_same_id_does_not_hide_the_old_process";
    for_each_seed(test, 0, 8, |seed| {
        paused(async {
            let mut w = world(seed);
            let rollout = w.rollout();
            let old = w.start("web-1", Mode::Legacy, plan(true), false).await;
            tokio::time::sleep(Duration::from_secs(2)).await;
            let new = w.start("web-1", Mode::Auto, plan(false), false).await;
            tokio::time::sleep(Duration::from_secs(2)).await;
            let rows = rows_of(&w, "web-1").await;
            let moved = advance_to_queue(
                &rollout,
                &new,
                true,
                Duration::from_millis(50),
                Duration::from_secs(30),
            )
            .await;
            old_meets_queue(w, &old, seed).await;
            assert!(
                !moved,
                "seed {seed}: the guards let the stage leave legacy beside a live legacy process"
            );
            assert_eq!(rows, 2, "seed {seed}: both processes are listed");
        })
    });
}

/// Schedule 2: the old process is cut off from the `rollout` and `nodes`
/// partitions (its lock operations still work), so its view of stage
/// `legacy` stays confirmed for `stage_valid_for` and its row is written
/// no more. The replacement's row is the only one that lands.
#[test]
fn a_cut_off_old_process_under_the_same_id_still_counts() {
    let test = "a_cut_off_old_process_under_the_same_id_still_counts";
    for_each_seed(test, 0, 8, |seed| {
        paused(async {
            let mut w = world(seed);
            let rollout = w.rollout();
            let old = w.start("web-1", Mode::Legacy, plan(true), false).await;
            tokio::time::sleep(Duration::from_secs(2)).await;
            let new = w.start("web-1", Mode::Auto, plan(false), false).await;
            tokio::time::sleep(Duration::from_secs(2)).await;
            old.env
                .store
                .set_plan(cut_off(plan(true), vec![schema::ROLLOUT, schema::NODES]));
            let moved = advance_to_queue(
                &rollout,
                &new,
                true,
                Duration::from_millis(50),
                Duration::from_secs(3),
            )
            .await;
            old_meets_queue(w, &old, seed).await;
            assert!(
                !moved,
                "seed {seed}: the stage left legacy while a legacy process could still act on it"
            );
        })
    });
}

/// Schedule 3: both processes' heartbeats keep landing on their own
/// periods and the operator retries every 50 ms: with one cell per node
/// id, the guards passed whenever the replacement's row had landed last.
#[test]
fn interleaved_heartbeats_under_one_id_do_not_fool_the_guards() {
    let test = "interleaved_heartbeats_under_one_id_do_not_fool_the_guards";
    for_each_seed(test, 0, 8, |seed| {
        paused(async {
            let mut w = world(seed);
            let rollout = w.rollout();
            let old = w.start("web-1", Mode::Legacy, plan(true), false).await;
            tokio::time::sleep(Duration::from_millis(1_300)).await;
            let new = w.start("web-1", Mode::Auto, plan(false), false).await;
            // The operator starts once the old process has re-read the
            // stage (at 4 s), so the replacement re-reads (at 5.3 s) first
            // after the move and the old one only at 8 s.
            tokio::time::sleep(Duration::from_millis(2_800)).await;
            let moved = advance_to_queue(
                &rollout,
                &new,
                false,
                Duration::from_millis(50),
                Duration::from_secs(30),
            )
            .await;
            old_meets_queue(w, &old, seed).await;
            assert!(
                !moved,
                "seed {seed}: the guards let the stage leave legacy beside a live legacy process"
            );
        })
    });
}

/// A use that could not be reported: a legacy node takes a lock and is cut
/// off from the `rollout` and `nodes` partitions right after, so neither
/// its next heartbeat nor its activity report lands; it lets go of the
/// lock and its row expires. `legacy → dual` must stay refused for the
/// quiet period after that use — the node promised, with the heartbeat
/// that confirmed the view the use relied on, that it might use legacy
/// until `stage_valid_for` after it.
#[test]
fn an_unreported_legacy_use_keeps_dual_refused_for_the_quiet_period() {
    let test = "an_unreported_legacy_use_keeps_dual_refused_for_the_quiet_period";
    for_each_seed(test, 0, 4, |seed| {
        paused(async {
            let mut w = world(seed);
            let rollout = w.rollout();
            let l = w.start("l", Mode::Legacy, plan(false), false).await;
            tokio::time::sleep(Duration::from_secs(3)).await;
            // Take the lock just before a heartbeat would report it.
            let guard = hold(&l.node, "x1").await;
            assert_eq!(guard.algorithm(), Algorithm::Legacy);
            let used = tokio::time::Instant::now();
            l.env
                .store
                .set_plan(cut_off(plan(false), vec![schema::ROLLOUT, schema::NODES]));
            tokio::time::sleep(Duration::from_millis(300)).await;
            guard.release().await.unwrap();
            // The node switches to combined by itself once its view expires;
            // its row expires after `registry_ttl`.
            let quiet = w.timings.quiet;
            let mut passed_at = None;
            while tokio::time::Instant::now() < used + quiet + Duration::from_secs(30) {
                if attempt(&rollout, Stage::Dual).await {
                    passed_at = Some(tokio::time::Instant::now());
                    break;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            let passed_at = passed_at.expect("dual passes once the quiet period is over");
            assert!(
                passed_at >= used + quiet,
                "seed {seed}: dual passed {:?} after an unreported legacy use (quiet period {quiet:?})",
                passed_at - used
            );
            drop(w);
        })
    });
}

/// A mode switched while the registry cannot be written: a combined node,
/// its config file edited to `legacy` while its heartbeats fail, must not
/// take legacy locks — its row still says combined — until a heartbeat
/// that says legacy has landed.
#[test]
fn a_mode_switch_the_registry_has_not_seen_does_not_take_effect() {
    let test = "a_mode_switch_the_registry_has_not_seen_does_not_take_effect";
    for_each_seed(test, 0, 4, |seed| {
        paused(async {
            let mut w = world(seed);
            let c = w.start("c", Mode::Combined, plan(false), true).await;
            tokio::time::sleep(Duration::from_secs(2)).await;
            c.env
                .store
                .set_plan(cut_off(plan(false), vec![schema::NODES]));
            w.edit_mode(&c, "c", Mode::Legacy);
            c.node.refresh().await.expect("the stage still reads");
            let guard = hold(&c.node, "x1").await;
            assert_eq!(
                guard.algorithm(),
                Algorithm::Combined,
                "seed {seed}: a legacy acquisition the registry does not know of"
            );
            guard.release().await.unwrap();
            c.env.store.set_plan(plan(false));
            c.node.heartbeat().await.expect("the heartbeat lands");
            let guard = hold(&c.node, "x1").await;
            assert_eq!(guard.algorithm(), Algorithm::Legacy, "seed {seed}");
            guard.release().await.unwrap();
            drop(w);
        })
    });
}

/// Issue 19 item 9: queue uses whose activity reports fail (the node is
/// cut off from the `rollout` partition, so neither its promise nor its
/// report lands) keep the rollback to `legacy` refused for the quiet period
/// after the last of them — the guard never believes lost evidence.
#[test]
fn queue_uses_whose_reports_fail_keep_the_rollback_refused() {
    let test = "queue_uses_whose_reports_fail_keep_the_rollback_refused";
    for_each_seed(test, 0, 4, |seed| {
        paused(async {
            let mut w = world(seed);
            let rollout = w.rollout();
            let q = w.start("q", Mode::Auto, plan(false), false).await;
            assert!(
                advance_to_queue(
                    &rollout,
                    &q,
                    true,
                    Duration::from_millis(500),
                    Duration::from_secs(120)
                )
                .await
            );
            q.node.refresh().await.expect("the stage reads");
            let guard = hold(&q.node, "x1").await;
            assert_eq!(guard.algorithm(), Algorithm::Queue, "seed {seed}");
            let used = tokio::time::Instant::now();
            // Its writes to the `rollout` partition fail from now on (its
            // stage reads still work).
            let mut writes_cut = cut_off(plan(false), vec![schema::ROLLOUT]);
            writes_cut.scope.ops = Some(vec![OpKind::Write]);
            q.env.store.set_plan(writes_cut);
            guard.release().await.unwrap();
            // Back to dual (free), then to legacy as soon as the guards allow.
            assert!(attempt(&rollout, Stage::Dual).await, "seed {seed}");
            let quiet = w.timings.quiet;
            let mut passed_at = None;
            while tokio::time::Instant::now() < used + quiet + Duration::from_secs(60) {
                if attempt(&rollout, Stage::Legacy).await {
                    passed_at = Some(tokio::time::Instant::now());
                    break;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            let passed_at = passed_at.expect("legacy passes once the quiet period is over");
            assert!(
                passed_at >= used + quiet,
                "seed {seed}: legacy passed {:?} after an unreported queue use (quiet period {quiet:?})",
                passed_at - used
            );
            drop(w);
        })
    });
}
