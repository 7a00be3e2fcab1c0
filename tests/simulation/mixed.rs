//! Mixed fleets (issue 5, docs/design.md §3): every pair of algorithms the
//! safety table allows keeps exclusion under contention with latency,
//! failures and skew — and the forbidden pair, legacy + queue, does not,
//! which proves the checker can see a violation.

use lockshift_tests::fleet;
use lockshift_tests::sim::{Clocks, for_each_seed};

use crate::exclusion::{Make, plans, run_mixed};

fn allowed_pair(test: &str, pair: [Make; 2]) {
    for (name, plan, clocks) in plans() {
        for_each_seed(&format!("{test}/{name}"), 0, 10, |seed| {
            let report = run_mixed(seed, 6, &plan, clocks, &pair);
            report.assert_exclusive(&format!("{test}/{name} seed {seed}"));
        });
    }
}

#[test]
fn legacy_beside_legacy_holds() {
    allowed_pair("legacy_beside_legacy_holds", [fleet::legacy, fleet::legacy]);
}

#[test]
fn queue_beside_queue_holds() {
    allowed_pair("queue_beside_queue_holds", [fleet::queue, fleet::queue]);
}

#[test]
fn legacy_beside_combined_holds() {
    allowed_pair(
        "legacy_beside_combined_holds",
        [fleet::legacy, fleet::combined],
    );
}

/// The combined lock at full speed — prepared `shadow` cells, reservations
/// behind the waiter ahead (Q6) — beside legacy contenders: the legacy
/// argument must hold on every path, not only the paced one.
#[test]
fn legacy_beside_combined_at_full_speed_holds() {
    allowed_pair(
        "legacy_beside_combined_at_full_speed_holds",
        [fleet::legacy, fleet::combined_at_full_speed],
    );
}

#[test]
fn combined_beside_combined_holds() {
    allowed_pair(
        "combined_beside_combined_holds",
        [fleet::combined, fleet::combined],
    );
}

#[test]
fn combined_beside_queue_holds() {
    allowed_pair(
        "combined_beside_queue_holds",
        [fleet::combined, fleet::queue],
    );
}

/// The negative control: legacy beside queue is the one unsafe pair. The
/// same checker must find a violation on some seed, or it could be blind.
#[test]
fn legacy_beside_queue_violates_exclusion() {
    let (_, plan, _) = plans()[0].clone();
    let mut found = None;
    for seed in 0..200 {
        let report = run_mixed(
            seed,
            6,
            &plan,
            Clocks::default(),
            &[fleet::legacy, fleet::queue],
        );
        if !report.violations.is_empty() {
            found = Some((seed, report.violations[0].clone()));
            break;
        }
    }
    let (seed, violation) =
        found.expect("legacy + queue never violated exclusion in 200 seeds: is the checker blind?");
    println!("legacy + queue: seed {seed}: {violation}");
}
