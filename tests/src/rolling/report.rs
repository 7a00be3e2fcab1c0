//! What a run of the scenario observed, and what it must have observed.

use std::collections::HashMap;
use std::time::Duration;

use lockshift_decide::algorithm::Stage;

use super::Timings;

/// What the scenario observed.
#[derive(Debug, Clone)]
pub struct RollingReport {
    /// Exclusion violations.
    pub violations: Vec<crate::sim::Violation>,
    /// Acquisitions that failed (not counting cancellations by restarts).
    pub failures: Vec<String>,
    /// Acquisitions per algorithm.
    pub by_algorithm: HashMap<String, u64>,
    /// The sum of the lock counters (equals the acquisitions when exclusion held).
    pub counted: u64,
    /// The lock that was unavailable longest, and for how long.
    pub worst_unavailability: (String, Duration),
    /// The stages transitioned to, in order.
    pub transitions: Vec<Stage>,
    /// Refusals before reaching dual and before returning to legacy.
    pub refusals: (usize, usize),
    /// Replacements started beside their predecessor under its node id.
    pub replacements: usize,
}

impl RollingReport {
    /// Acquisitions in all.
    pub fn total(&self) -> u64 {
        self.by_algorithm.values().sum()
    }
}

impl RollingReport {
    /// Asserts everything the issue asks of a rolling deployment.
    ///
    /// # Panics
    /// When something broke, saying what.
    pub fn assert_clean(&self, timings: &Timings, what: &str) {
        assert!(
            self.violations.is_empty(),
            "{what}: exclusion violated: {:?}",
            self.violations
        );
        assert!(
            self.failures.is_empty(),
            "{what}: acquisitions failed: {:?}",
            self.failures
        );
        assert_eq!(self.counted, self.total(), "{what}: lost increments");
        for algorithm in ["legacy", "combined", "queue"] {
            assert!(
                self.by_algorithm.get(algorithm).copied().unwrap_or(0) > 10,
                "{what}: too few {algorithm} acquisitions: {:?}",
                self.by_algorithm
            );
        }
        let (lock, worst) = &self.worst_unavailability;
        let bound = timings.unavailability_bound();
        assert!(
            *worst <= bound,
            "{what}: lock {lock} had waiters and no holder for {worst:?} (bound {bound:?})"
        );
        assert_eq!(
            self.transitions,
            [
                Stage::Dual,
                Stage::Queue,
                Stage::Complete,
                Stage::Queue,
                Stage::Dual,
                Stage::Legacy
            ],
            "{what}"
        );
        assert!(
            self.refusals.0 > 0,
            "{what}: dual must wait for the legacy quiet period"
        );
        assert!(
            self.replacements > 0,
            "{what}: no replacement ran beside its predecessor"
        );
        assert!(
            self.refusals.1 > 0,
            "{what}: legacy must wait for the queue quiet period"
        );
    }
}
