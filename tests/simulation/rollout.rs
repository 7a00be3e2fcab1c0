//! A simulated rolling deployment (issue 5): a fleet of nodes hammers a set
//! of locks while the nodes are restarted one by one into new modes and the
//! stage is advanced legacy → dual → queue → complete, then rolled back to
//! legacy. Zero exclusion violations, no lost increment, and no lock ever
//! unavailable (waiters but no holder) for longer than the lease TTL plus
//! the stage re-read period. The same scenario runs through the local CQL
//! endpoint in `tests/integration`.

use lockshift_tests::rolling::{Backend, Timings, rolling_deployment};
use lockshift_tests::sim::{Cluster, for_each_seed, paused};

#[test]
fn rolling_deployment_forward_and_back_keeps_exclusion_and_availability() {
    let test = "rolling_deployment_forward_and_back_keeps_exclusion_and_availability";
    for_each_seed(test, 0, 2, |seed| {
        paused(async {
            let timings = Timings::simulated();
            let report =
                rolling_deployment(Backend::Embedded(Cluster::new()), timings, 4, seed).await;
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
