//! The rolling-deployment scenario (issue 5), on any backend: a fleet of
//! [`Node`](lockshift::Node)s hammers a set of locks while the nodes are
//! restarted one by one into new modes and the stage is moved legacy → dual
//! → queue → complete and back to legacy. The caller asserts on the
//! [`RollingReport`].
//!
//! The same scenario runs on the embedded store with a paused clock (fast,
//! seeded) and on the local CQL endpoint in real time (each node its own
//! `CqlStore` connection), with timings scaled by [`Timings`].
//!
//! The parts, each in a file of its own and re-exported here: the backend
//! and the timings ([`Backend`], [`Timings`]); the fleet of nodes, its
//! workers and how long each lock went without a holder ([`Availability`]);
//! what a run observed ([`RollingReport`]).

mod fleet;
mod report;
mod timings;

use std::time::Duration;

use lockshift_decide::algorithm::{Mode, Stage};
use lockshift_rollout::{Rollout, TransitionRequest};

pub use fleet::Availability;
use fleet::Fleet;
pub use report::RollingReport;
pub use timings::{Backend, Timings};

/// Asks for `to` until the guards allow it; returns how many refusals came first.
///
/// # Panics
/// If the guards never allow it (after 60 tries), with the last verdict.
async fn move_to(rollout: &Rollout, to: Stage, retry: Duration) -> usize {
    let mut last = String::new();
    for refusals in 0..60 {
        let report = rollout
            .transition(TransitionRequest {
                to,
                by: "operator".into(),
                reason: format!("rolling to {to}"),
                dry_run: false,
                expected_from: None,
            })
            .await
            .expect("transition evaluates");
        if report.applied {
            return refusals;
        }
        last = report.verdict.to_string();
        tokio::time::sleep(retry).await;
    }
    panic!("the guards never allowed {to}: {last}");
}

/// Runs the scenario with `nodes` nodes and returns what it observed.
///
/// # Panics
/// When a node cannot start or a transition can never be made.
pub async fn rolling_deployment(
    backend: Backend,
    timings: Timings,
    nodes: usize,
    seed: u64,
) -> RollingReport {
    let (rollout, mut fleet) = Fleet::new(backend, timings, nodes, seed).await;
    let retry = timings.reread;
    // The old fleet: everyone on the legacy lock.
    fleet.start_all(Mode::Legacy).await;
    tokio::time::sleep(timings.pause * 2).await;
    // New binaries, one by one, on auto: combined at stage legacy.
    fleet.restart_all_one_by_one(Mode::Auto).await;
    let refused_dual = move_to(&rollout, Stage::Dual, retry).await;
    move_to(&rollout, Stage::Queue, retry).await;
    // Restarts into queue (auto would switch by itself as well).
    fleet.restart_all_one_by_one(Mode::Queue).await;
    move_to(&rollout, Stage::Complete, retry).await;
    tokio::time::sleep(timings.pause * 2).await;
    // And back.
    move_to(&rollout, Stage::Queue, retry).await;
    move_to(&rollout, Stage::Dual, retry).await;
    let refused_legacy = move_to(&rollout, Stage::Legacy, retry).await;
    for i in 0..nodes.min(2) {
        fleet.restart(i, Mode::Legacy).await;
    }
    tokio::time::sleep(timings.pause * 2).await;
    fleet.stop_all().await;
    fleet.report(&rollout, (refused_dual, refused_legacy)).await
}

/// The rolling deployment of issue 10, forward and back under attack:
/// nodes switched by editing their config files while their acquisitions
/// wait, a node cut off from the `rollout` and `nodes` partitions while the
/// stage moves on (it keeps taking locks), queue nodes rolled back to
/// legacy. The caller asserts on the report (no overlap, no lost
/// increment, every transition made).
///
/// # Panics
/// When a node cannot start or a transition can never be made.
pub async fn rolling_deployment_with_rollback(
    backend: Backend,
    timings: Timings,
    seed: u64,
) -> RollingReport {
    let (rollout, mut fleet) = Fleet::new(backend, timings, 4, seed).await;
    let retry = timings.reread;
    fleet.start_all(Mode::Legacy).await;
    tokio::time::sleep(timings.pause).await;
    // Half the fleet switches by config edit (its waiting legacy
    // acquisitions must leave the line), half by restart.
    fleet.edit(0, Mode::Auto);
    fleet.edit(1, Mode::Auto);
    for i in 2..4 {
        fleet.restart(i, Mode::Auto).await;
    }
    let refused_dual = move_to(&rollout, Stage::Dual, retry).await;
    // Node 3 loses the stage and the registry while it keeps hammering.
    fleet.cut_off(3, true);
    move_to(&rollout, Stage::Queue, retry).await;
    fleet.edit(0, Mode::Queue);
    fleet.restart(1, Mode::Queue).await;
    tokio::time::sleep(timings.pause).await;
    fleet.cut_off(3, false);
    tokio::time::sleep(timings.pause).await;
    // And back, with queue acquisitions waiting all along.
    move_to(&rollout, Stage::Dual, retry).await;
    fleet.edit(0, Mode::Legacy);
    let refused_legacy = move_to(&rollout, Stage::Legacy, retry).await;
    tokio::time::sleep(timings.pause * 2).await;
    fleet.stop_all().await;
    fleet.report(&rollout, (refused_dual, refused_legacy)).await
}
