//! A simulated rolling deployment (issue 5): a fleet of nodes hammers a set
//! of locks while the nodes are restarted one by one into new modes and the
//! stage is advanced legacy → dual → queue → complete, then rolled back to
//! legacy. Zero exclusion violations, no lost increment, and no lock ever
//! unavailable (waiters but no holder) for longer than the lease TTL plus
//! the stage re-read period. The same scenario runs through the local CQL
//! endpoint in `tests/integration`.

use lockshift_decide::algorithm::Stage;
use lockshift_tests::rolling::{
    Backend, Timings, rolling_deployment, rolling_deployment_with_rollback,
};
use lockshift_tests::sim::{Cluster, for_each_seed, paused};

#[test]
fn rolling_deployment_forward_and_back_keeps_exclusion_and_availability() {
    let test = "rolling_deployment_forward_and_back_keeps_exclusion_and_availability";
    for_each_seed(test, 0, 2, |seed| {
        paused(async {
            let timings = Timings::simulated();
            let report =
                rolling_deployment(Backend::Embedded(Cluster::for_seed(seed)), timings, 4, seed)
                    .await;
            report.assert_clean(&timings, &format!("seed {seed}"));
            println!(
                "seed {seed}: {} acquisitions {:?}, worst unavailability {:?}",
                report.total(),
                report.by_algorithm,
                report.worst_unavailability
            );
        });
    });
}

/// Issue 10's rolling deployment: forward and back with acquisitions
/// waiting at every transition, nodes switched by editing their config
/// files, and a node cut off from the `rollout` and `nodes` partitions while
/// the stage moves on — no two holders ever, no lost increment, every
/// transition made. `LOCKSHIFT_SEEDS=200` for the full search.
#[test]
fn rolling_deployment_with_rollback_edits_and_a_cut_off_node_keeps_exclusion() {
    let test = "rolling_deployment_with_rollback_edits_and_a_cut_off_node_keeps_exclusion";
    for_each_seed(test, 0, 4, |seed| {
        paused(async {
            let timings = Timings::simulated();
            let report = rolling_deployment_with_rollback(
                Backend::Embedded(Cluster::for_seed(seed)),
                timings,
                seed,
            )
            .await;
            let what = format!("seed {seed}");
            assert!(
                report.violations.is_empty(),
                "{what}: exclusion violated: {:?}",
                report.violations
            );
            assert!(
                report.failures.is_empty(),
                "{what}: acquisitions failed: {:?}",
                report.failures
            );
            assert_eq!(report.counted, report.total(), "{what}: lost increments");
            assert_eq!(
                report.transitions,
                [Stage::Dual, Stage::Queue, Stage::Dual, Stage::Legacy],
                "{what}"
            );
            for algorithm in ["legacy", "combined", "queue"] {
                assert!(
                    report.by_algorithm.get(algorithm).copied().unwrap_or(0) > 0,
                    "{what}: no {algorithm} acquisition: {:?}",
                    report.by_algorithm
                );
            }
            println!(
                "seed {seed}: {} acquisitions {:?}, worst unavailability {:?}, refusals {:?}",
                report.total(),
                report.by_algorithm,
                report.worst_unavailability,
                report.refusals
            );
        });
    });
}
