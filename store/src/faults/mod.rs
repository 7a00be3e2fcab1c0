//! A wrapper for any backend that injects latency, failures and late
//! landings from a seed, and counts operations per table and kind.
//!
//! Concurrency bugs in lock code show up only in particular interleavings.
//! [`FaultyStore`] widens the space of interleavings a test explores: each
//! operation takes a random round-trip time and is applied at a random point
//! inside it (so two concurrent operations may land in either order), may fail
//! before being applied (nothing changed) or after (it took effect but the
//! caller hears a timeout), may *land late* (the caller hears a timeout,
//! and the store applies it seconds or minutes later with the timestamp it
//! was sent with, as a Cassandra replica's mutation queue or a hint
//! replayed later does); for negative controls only, it can also move a
//! write's timestamp after its writer chose it. Every random choice comes from one seeded generator, so a
//! failing run replays from its seed (given the same scheduling, which a
//! paused single-threaded tokio runtime provides).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::api::Store;
use crate::cell::{OpKind, Table, duration_micros};
use crate::error::{StoreError, StoreErrorKind};
use crate::journal::{Answer, Journal};
use crate::request::{DeleteOp, Op, Request, Response, WriteOp};
use crate::route::Route;

mod counts;
mod plan;

pub use counts::OpCounts;
pub use plan::{FailPoint, FaultPlan, FaultScope};

#[derive(Debug)]
struct FaultState {
    plan: FaultPlan,
    rng: StdRng,
    forced: Vec<FailPoint>,
    /// Delays of forced late landings, for the next mutations in scope.
    forced_late: Vec<Duration>,
    partitioned: bool,
    counts: OpCounts,
    by_datacenter: BTreeMap<(String, Table), u64>,
}

/// The decisions for one operation, drawn up front under one lock.
struct Draw {
    before: Duration,
    after: Duration,
    fail: Option<(FailPoint, StoreErrorKind)>,
    /// Lands this much later than its round trip (and the caller hears a
    /// timeout); only for a mutation, and only without `fail`.
    late: Option<Duration>,
    skew_micros: i64,
}

/// Whether, and where, an operation in the plan's scope fails: a partition
/// refuses it; else the next forced failure; else the plan's odds.
fn fail_of(
    plan: &FaultPlan,
    rng: &mut StdRng,
    forced: &mut Vec<FailPoint>,
    partitioned: bool,
) -> Option<(FailPoint, StoreErrorKind)> {
    let not_applied_kind = |rng: &mut StdRng| {
        if rng.random_bool(0.5) {
            StoreErrorKind::Unavailable
        } else {
            StoreErrorKind::NotApplied
        }
    };
    if partitioned {
        Some((FailPoint::Before, StoreErrorKind::Unavailable))
    } else if !forced.is_empty() {
        let point = forced.remove(0);
        match point {
            FailPoint::Before => Some((point, not_applied_kind(rng))),
            FailPoint::After => Some((point, StoreErrorKind::MaybeApplied)),
        }
    } else if plan.fail_before > 0.0 && rng.random_bool(plan.fail_before.min(1.0)) {
        Some((FailPoint::Before, not_applied_kind(rng)))
    } else if plan.fail_after > 0.0 && rng.random_bool(plan.fail_after.min(1.0)) {
        Some((FailPoint::After, StoreErrorKind::MaybeApplied))
    } else {
        None
    }
}

/// A [`Store`] wrapper that injects faults and counts operations.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use lockshift_store::{FaultPlan, FaultyStore, MemoryStore, OpKind, RowQuery, Store, schema};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
/// let store = FaultyStore::new(MemoryStore::new(), 42)
///     .with_plan(FaultPlan::latency(Duration::from_millis(2), Duration::from_millis(1)));
/// store.read(schema::MAIN, "lock-1", &RowQuery::all()).await.unwrap();
/// assert_eq!(store.op_counts().get(schema::MAIN, OpKind::Read), 1);
/// # });
/// ```
#[derive(Debug)]
pub struct FaultyStore<S> {
    inner: Arc<S>,
    seed: u64,
    state: Mutex<FaultState>,
    journal: Option<Arc<Journal>>,
}

impl<S: Store + 'static> FaultyStore<S> {
    /// Wraps `inner`; random choices come from `seed`. No faults until a plan is set.
    pub fn new(inner: S, seed: u64) -> Self {
        FaultyStore {
            inner: Arc::new(inner),
            seed,
            state: Mutex::new(FaultState {
                plan: FaultPlan::default(),
                rng: StdRng::seed_from_u64(seed),
                forced: Vec::new(),
                forced_late: Vec::new(),
                partitioned: false,
                counts: OpCounts::default(),
                by_datacenter: BTreeMap::new(),
            }),
            journal: None,
        }
    }

    /// This wrapper, writing a line into `journal` for every operation as
    /// it takes effect (or fails): what a determinism check compares.
    pub fn with_journal(mut self, journal: Arc<Journal>) -> Self {
        self.journal = Some(journal);
        self
    }

    /// This wrapper with `plan`.
    pub fn with_plan(self, plan: FaultPlan) -> Self {
        self.set_plan(plan);
        self
    }

    /// The seed this wrapper was made with: print it when a test fails.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Replaces the plan; takes effect for operations that start afterwards.
    pub fn set_plan(&self, plan: FaultPlan) {
        self.state().plan = plan;
    }

    /// The current plan.
    pub fn plan(&self) -> FaultPlan {
        self.state().plan.clone()
    }

    /// Makes the next `n` operations in scope fail at `point`, regardless of
    /// the plan's probabilities.
    pub fn fail_next(&self, n: usize, point: FailPoint) {
        self.state().forced.extend(std::iter::repeat_n(point, n));
    }

    /// Makes the next mutation in scope (a write, a delete or a fenced
    /// write) land `after` later than its round trip, with the caller told
    /// it timed out (`MaybeApplied`); `n` of them, each `after` late.
    pub fn land_late_next(&self, n: usize, after: Duration) {
        self.state()
            .forced_late
            .extend(std::iter::repeat_n(after, n));
    }

    /// While `true`, every operation in scope fails as `Unavailable` before
    /// being applied: the node is cut off from the cluster.
    pub fn set_partitioned(&self, partitioned: bool) {
        self.state().partitioned = partitioned;
    }

    /// A snapshot of the operation counts.
    pub fn op_counts(&self) -> OpCounts {
        self.state().counts.clone()
    }

    /// Sets every count back to zero (the per-datacenter ones too).
    pub fn reset_counts(&self) {
        let mut st = self.state();
        st.counts = OpCounts::default();
        st.by_datacenter.clear();
    }

    /// Operations by the datacenter their route pinned, failed ones
    /// included: the datacenter's name, or `"default"` for the default
    /// route (coordinated wherever the store's own policy sends it).
    pub fn counts_by_datacenter(&self) -> BTreeMap<String, u64> {
        self.counts_by_datacenter_of(None)
    }

    /// [`counts_by_datacenter`](Self::counts_by_datacenter) of the
    /// operations on `tables` only (`None`: every table).
    pub fn counts_by_datacenter_of(&self, tables: Option<&[Table]>) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for ((dc, table), n) in &self.state().by_datacenter {
            if tables.is_none_or(|t| t.contains(table)) {
                *out.entry(dc.clone()).or_insert(0) += n;
            }
        }
        out
    }

    fn state(&self) -> MutexGuard<'_, FaultState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn draw(&self, route: &Route, table: Table, op: OpKind) -> Draw {
        // Asked of the wrapped store only when it can matter (it may take
        // that store's lock).
        let remote = !self.state().plan.remote_latency.is_zero()
            && route.datacenter().is_some()
            && self.inner.topology().crosses(route);
        let mut st = self.state();
        *st.counts.0.entry((table, op)).or_insert(0) += 1;
        let where_ = route
            .datacenter()
            .map_or_else(|| "default".to_string(), |dc| dc.to_string());
        *st.by_datacenter.entry((where_, table)).or_insert(0) += 1;
        let FaultState {
            plan,
            rng,
            forced,
            forced_late,
            partitioned,
            ..
        } = &mut *st;
        let jitter = if plan.jitter.is_zero() {
            Duration::ZERO
        } else {
            rng.random_range(Duration::ZERO..plan.jitter)
        };
        let slow = plan
            .slow
            .as_ref()
            .filter(|(scope, _)| scope.covers(table, op))
            .map_or(Duration::ZERO, |(_, extra)| *extra);
        let remote = if remote {
            plan.remote_latency
        } else {
            Duration::ZERO
        };
        let total = plan.latency + jitter + slow + remote;
        // Apply at a uniformly random point of the round trip, so concurrent
        // operations land in every possible order.
        let before = if total.is_zero() {
            Duration::ZERO
        } else {
            rng.random_range(Duration::ZERO..=total)
        };
        let after = total - before;
        let in_scope = plan.scope.covers(table, op);
        let fail = if in_scope {
            fail_of(plan, rng, forced, *partitioned)
        } else {
            None
        };
        let late = if in_scope && op.is_mutation() && fail.is_none() {
            if !forced_late.is_empty() {
                Some(forced_late.remove(0))
            } else if plan.late > 0.0 && rng.random_bool(plan.late.min(1.0)) {
                Some(if plan.late_by.is_zero() {
                    Duration::ZERO
                } else {
                    rng.random_range(Duration::ZERO..=plan.late_by)
                })
            } else {
                None
            }
        } else {
            None
        };
        let restamp = duration_micros(plan.restamp);
        let skew_micros = if in_scope && op.is_mutation() && restamp > 0 {
            rng.random_range(-restamp..=restamp)
        } else {
            0
        };
        Draw {
            before,
            after,
            fail,
            late,
            skew_micros,
        }
    }

    /// Runs one request under the draws of the plan: its latency, its
    /// failure or late landing, its restamp.
    async fn run(&self, request: Request<'_>) -> Result<Response, StoreError> {
        let (table, op) = (request.table, request.kind());
        let draw = self.draw(&request.route, table, op);
        let request = restamped(request, draw.skew_micros);
        let asked = self.journal.as_deref().map(|j| j.request(&request));
        let record = |outcome: String| {
            if let (Some(journal), Some(asked)) = (&self.journal, &asked) {
                journal.record(self.seed, asked, &outcome);
            }
        };
        sleep(draw.before).await;
        if let Some(delay) = draw.late {
            record(format!("lands {delay:?} late, told MaybeApplied"));
            let landing = request.to_owned();
            let (inner, journal, seed) = (self.inner.clone(), self.journal.clone(), self.seed);
            tokio::spawn(async move {
                sleep(draw.after.saturating_add(delay)).await;
                let result = inner.call(landing.as_request()).await;
                if let (Some(journal), Some(asked)) = (journal, asked) {
                    let outcome = result.journal(&journal);
                    journal.record(seed, &format!("{asked} (late)"), &outcome);
                }
            });
            sleep(draw.after).await;
            return Err(StoreError::new(
                StoreErrorKind::MaybeApplied,
                op,
                Some(table),
                "injected timeout: the operation lands later",
            ));
        }
        if let Some((FailPoint::Before, kind)) = draw.fail {
            record(format!("refused before apply ({kind:?})"));
            sleep(draw.after).await;
            return Err(StoreError::new(
                kind,
                op,
                Some(table),
                "injected failure before apply",
            ));
        }
        let result = self.inner.call(request).await;
        if let Some(journal) = &self.journal {
            let told = match draw.fail {
                Some((FailPoint::After, kind)) => format!(", told {kind:?}"),
                _ => String::new(),
            };
            record(format!("{}{told}", result.journal(journal)));
        }
        sleep(draw.after).await;
        match (draw.fail, result) {
            (Some((FailPoint::After, kind)), Ok(_)) => Err(StoreError::new(
                kind,
                op,
                Some(table),
                "injected timeout after apply",
            )),
            (_, result) => result,
        }
    }
}

/// `request` with its timestamp moved by `skew_micros` (a write's or a
/// delete's; `FaultPlan::restamp`, a negative control).
fn restamped(mut request: Request<'_>, skew_micros: i64) -> Request<'_> {
    if skew_micros != 0 {
        match &mut request.op {
            Op::Write(WriteOp { options, .. }) => {
                options.timestamp = options.timestamp.offset_micros(skew_micros);
            }
            Op::Delete(DeleteOp { timestamp, .. }) => {
                *timestamp = timestamp.offset_micros(skew_micros);
            }
            _ => {}
        }
    }
    request
}

async fn sleep(d: Duration) {
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}

/// Faults, latency and counting apply to every request; a fenced write
/// is counted as [`OpKind::FencedWrite`] with its own faults: a failure
/// before apply changes nothing, one after it is a timeout of a write
/// that landed (or was refused) — "maybe applied", as a Paxos round that
/// timed out is. No restamp for it: the store stamps it, not the caller.
#[async_trait]
impl<S: Store + 'static> Store for FaultyStore<S> {
    async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
        self.run(request).await
    }

    fn describe(&self) -> String {
        format!(
            "{} (fault injection, seed {})",
            self.inner.describe(),
            self.seed
        )
    }

    fn wraps(&self) -> Option<&dyn Store> {
        Some(&self.inner)
    }
}

#[cfg(test)]
mod tests;
