//! What a [`FaultyStore`](super::FaultyStore) injects: the plan, its
//! scope, and where a forced failure strikes.

use std::time::Duration;

use crate::cell::{OpKind, Table};
#[cfg(doc)]
use crate::route::Topology;

/// Which operations faults apply to; latency and counting apply to all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultScope {
    /// Only these tables; `None` for all.
    pub tables: Option<Vec<Table>>,
    /// Only these kinds; `None` for all.
    pub ops: Option<Vec<OpKind>>,
}

impl FaultScope {
    pub(super) fn covers(&self, table: Table, op: OpKind) -> bool {
        self.tables.as_ref().is_none_or(|t| t.contains(&table))
            && self.ops.as_ref().is_none_or(|o| o.contains(&op))
    }
}

/// What to inject. The default injects nothing (a pure counter).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultPlan {
    /// Fixed round-trip time of every operation.
    pub latency: Duration,
    /// Extra round-trip time, uniform in `[0, jitter)`.
    pub jitter: Duration,
    /// Probability that an operation in scope fails before it is applied
    /// (`Unavailable` or `NotApplied`).
    pub fail_before: f64,
    /// Probability that an operation in scope is applied and then reported as
    /// a timeout (`MaybeApplied`).
    pub fail_after: f64,
    /// Each write's and delete's timestamp is moved, after its writer chose
    /// it, by a uniform amount in `[-restamp, +restamp]`. **No real process
    /// does this**: a process stamps from its own clock, through a counter
    /// that never goes back (L1, docs/design.md §5), so its delete always
    /// outranks its own earlier write. A clock that is off, or jumps, is
    /// modelled by the node's clock (`SkewedClock`, `JitteryClock`), whose
    /// readings pass through L1. This one breaks L1 — a process's later
    /// write buried under its own earlier delete — and is for negative
    /// controls that show L1 is needed (issue 46).
    pub restamp: Duration,
    /// Which operations the failures, late landings and restamps apply to.
    pub scope: FaultScope,
    /// Extra round-trip time for the operations of one scope only (a slow
    /// table, a slow kind of request): what a targeted race needs.
    pub slow: Option<(FaultScope, Duration)>,
    /// Extra round-trip time for a request pinned to a datacenter other
    /// than the wrapped store's local one ([`Topology::crosses`]): the
    /// link between two sites.
    pub remote_latency: Duration,
    /// Probability that a write, delete or fenced write in scope lands
    /// late: the caller hears a timeout (`MaybeApplied`) after the usual
    /// round trip, and the store applies it up to [`late_by`](Self::late_by)
    /// later, with the timestamp it was sent with. No client can rule it
    /// out on Cassandra (L5, docs/design.md §5), so every argument must
    /// hold with it.
    pub late: f64,
    /// How much later than its round trip a late landing lands at most
    /// (uniform in `[0, late_by]`).
    pub late_by: Duration,
}

impl FaultPlan {
    /// A plan with only latency: `fixed` plus up to `jitter`.
    pub fn latency(fixed: Duration, jitter: Duration) -> Self {
        FaultPlan {
            latency: fixed,
            jitter,
            ..FaultPlan::default()
        }
    }
}

/// Where a forced failure strikes, for
/// [`FaultyStore::fail_next`](super::FaultyStore::fail_next).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailPoint {
    /// Before the operation is applied: nothing changes.
    Before,
    /// After it is applied: the caller hears a timeout.
    After,
}
