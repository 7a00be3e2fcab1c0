//! What an election run counted and saw ([`Stats`], [`Report`]).

use std::collections::BTreeMap;
use std::time::Duration;

use lockshift::{Leader, Stage};
use tokio::time::Instant;

use super::Term;
use crate::sim::Violation;

/// What a run counted.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// Terms per `stage/algorithm` (the operator's stage when the term
    /// began, the algorithm that took the lock).
    pub by_stage: BTreeMap<String, usize>,
    /// The stages moved to, in order.
    pub transitions: Vec<Stage>,
    /// Leaders cut off from the store.
    pub cut_offs: usize,
    /// Leaders paused past their lease.
    pub pauses: usize,
    /// Leaders that held past their lease's TTL.
    pub long_holds: usize,
    /// New values proclaimed by a leader.
    pub proclaims: usize,
    /// Checkpoints (each compares `Election::leader` and every observer with
    /// the terms).
    pub checkpoints: usize,
    /// Checkpoints at which somebody led.
    pub checkpoints_led: usize,
    /// Observers compared at checkpoints.
    pub observations: usize,
    /// Campaigns cancelled when the run stopped.
    pub cancelled: usize,
    /// How long the run lasted on the paused clock.
    pub simulated: Duration,
    /// Changes of leader the observers followed.
    pub observed_changes: usize,
    /// An observer showing a leader older than one it showed before: a
    /// former leader's record outliving its lease until a newer leader
    /// resigned (issue 45, `a_lost_leaders_late_record_is_not_named_after_its_successor`).
    /// E1 rules it out, so each is also a problem.
    pub resurrections: Vec<String>,
    /// Leaders cut off just after their record's renewal was sent to land
    /// late, letting go while still cut off (their release never lands).
    pub late_records: usize,
    /// Campaigns that took the lock but could not record the leadership
    /// (the lock let go again), with why.
    pub unrecorded: Vec<String>,
}

impl Stats {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Stats) {
        for (k, n) in &other.by_stage {
            *self.by_stage.entry(k.clone()).or_default() += n;
        }
        self.transitions.extend(&other.transitions);
        self.cut_offs += other.cut_offs;
        self.late_records += other.late_records;
        self.pauses += other.pauses;
        self.long_holds += other.long_holds;
        self.proclaims += other.proclaims;
        self.checkpoints += other.checkpoints;
        self.checkpoints_led += other.checkpoints_led;
        self.observations += other.observations;
        self.cancelled += other.cancelled;
        self.simulated += other.simulated;
        self.observed_changes += other.observed_changes;
        self.resurrections
            .extend(other.resurrections.iter().cloned());
        self.unrecorded.extend(other.unrecorded.iter().cloned());
    }

    /// Terms in all.
    pub fn terms(&self) -> usize {
        self.by_stage.values().sum()
    }

    /// Terms whose lock `algorithm` took.
    pub fn terms_by(&self, algorithm: &str) -> usize {
        self.by_stage
            .iter()
            .filter(|(k, _)| k.ends_with(&format!("/{algorithm}")))
            .map(|(_, n)| n)
            .sum()
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} terms {:?}, {} stage changes, {} cut-offs ({} with a late record), {} pauses, {} long holds, {} proclaims, \
             {} checkpoints ({} with a leader, {} observers compared), {} changes observed, \
             {} resurrections, {} campaigns cancelled, {} unrecorded, {:.0?} simulated",
            self.terms(),
            self.by_stage,
            self.transitions.len(),
            self.cut_offs,
            self.late_records,
            self.pauses,
            self.long_holds,
            self.proclaims,
            self.checkpoints,
            self.checkpoints_led,
            self.observations,
            self.observed_changes,
            self.resurrections.len(),
            self.cancelled,
            self.unrecorded.len(),
            self.simulated
        )
    }
}

pub(super) fn names(leaders: &[Leader]) -> String {
    leaders
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a run saw.
#[derive(Debug, Clone)]
pub struct Report {
    /// When the run began (the zero of [`timeline`](Self::timeline)).
    pub began: Instant,
    /// Two leaders acting at once.
    pub overlaps: Vec<Violation>,
    /// Every other broken promise: a token not greater than the one
    /// before, an observer or `Election::leader` naming another leader than
    /// the terms, a leader not told it lost its lease.
    pub problems: Vec<String>,
    /// Campaigns or proclaims that failed unexpectedly.
    pub failures: Vec<String>,
    /// Every leadership.
    pub terms: Vec<Term>,
    /// What the run counted.
    pub stats: Stats,
}

impl Report {
    /// Asserts the run kept every promise.
    ///
    /// # Panics
    /// When it did not, saying what broke.
    pub fn assert_clean(&self, what: &str) {
        assert!(
            self.overlaps.is_empty(),
            "{what}: two leaders at once: {}\nterms: {}",
            self.overlaps
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
            self.timeline()
        );
        assert!(
            self.problems.is_empty(),
            "{what}: {}\nterms: {}",
            self.problems.join("\n"),
            self.timeline()
        );
        assert!(
            self.failures.is_empty(),
            "{what}: failures: {:?}\nterms: {}",
            self.failures,
            self.timeline()
        );
    }

    /// Every term, one a line — began, ended, leader, algorithm, stage —
    /// and what happened in it, in seconds since the run began.
    pub fn timeline(&self) -> String {
        let at = |i: Instant| format!("{:.3}s", (i - self.began).as_secs_f64());
        let mut lines = String::new();
        for t in &self.terms {
            lines.push_str(&format!(
                "\n  {} .. {}: {} ({} at {})",
                at(t.began),
                t.ended
                    .map_or("open".to_string(), |(i, how)| format!("{} {how:?}", at(i))),
                t.leader,
                t.algorithm,
                t.stage
            ));
            for (i, note) in &t.notes {
                lines.push_str(&format!("\n      {}: {note}", at(*i)));
            }
        }
        if lines.is_empty() {
            lines.push_str("none");
        }
        lines
    }
}
