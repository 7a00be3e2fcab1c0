//! What lockshift measures, through the [`metrics`](https://docs.rs/metrics)
//! facade: install any exporter (Prometheus, StatsD, OpenTelemetry…)
//! *before* starting a node and these appear in it; without one, recording
//! costs next to nothing.
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | [`ACQUIRE_WAIT_SECONDS`] | histogram | `node`, `algorithm` | how long a successful acquisition waited |
//! | [`HOLD_SECONDS`] | histogram | `node`, `algorithm` | how long a lock was held, hand-out to release |
//! | [`ACQUISITIONS`] | counter | `node`, `algorithm` | locks handed out |
//! | [`ACQUIRE_TIMEOUTS`] | counter | `node`, `algorithm` | acquisitions that gave up at their timeout |
//! | [`LEASE_LOSSES`] | counter | `node`, `algorithm` | held locks whose lease was lost (the guard's `lost()` fired) |
//! | [`RENEWAL_FAILURES`] | counter | `node`, `algorithm` | lease renewals that failed and were retried |
//! | [`HOLDER_TTL_SECONDS`] | histogram | `node` | the TTL the holder's cell had left when a waiter's read of `main` showed it in the way |
//! | [`STORE_OPERATIONS`] | counter | `node`, `table`, `kind` | store operations sent (`kind`: read, write, delete, scan) |
//! | [`STORE_ERRORS`] | counter | `node`, `table`, `kind` | those that failed |
//! | [`STORE_WARNINGS`] | counter | `node`, `table` | warnings the database added to read answers (Cassandra's tombstone warning: a read passed more than 1 000 tombstones) |
//! | [`READ_TOMBSTONES`] | histogram | `node`, `table` | tombstones a read passed, when the store reports it (the embedded store and the local endpoint always; Cassandra only above its warn threshold, parsed from its warning) |
//! | [`EFFECTIVE_MODE`] | gauge | `node`, `algorithm` | 1 for the algorithm new acquisitions use, 0 for the others |
//! | [`STAGE_VERSION`] | gauge | `node` | the version of the stage the node last read (-1: none yet) |
//! | [`STAGE_CONFIRMED`] | gauge | `node` | 1 while the node's stage view is confirmed, 0 while it acts as combined because it cannot confirm it |
//! | [`CLOCK_OFFSET_SECONDS`] | gauge | `node` | the database's clock minus this process's, as last measured (docs/design.md §4b) |
//! | [`CLOCK_ERROR_SECONDS`] | gauge | `node` | how far the true offset may be from it (+Inf until a measurement is answered) |
//!
//! Every counter and gauge is registered at zero when a node starts, so a
//! dashboard sees a flat line rather than no series — but the clock's
//! error, which starts at +Inf: an offset of 0 not measured yet is no
//! offset of 0. A node warns (and acts as combined) while `|offset| +
//! error` passes `rollout.clock_skew_margin`.
//!
//! **Tombstones.** A delete, and a lease cell once expired, stays a
//! tombstone for the table's `gc_grace_seconds` (10 days by default) and
//! every read passing it pays for it; above 1 000 Cassandra warns, above
//! 100 000 it fails the read (`lockshift_store::tombstones`). The
//! metered store a node wraps its store in counts each warning in
//! [`STORE_WARNINGS`], records [`READ_TOMBSTONES`], and logs the warning at
//! `warn` with the table and the lock id — at most once a minute per lock,
//! with how many were left unlogged — and likewise a read that failed for
//! too many tombstones. Algorithm labels are
//! the algorithm that did the work — `combined` for a node configured
//! `queue` at stage `legacy`.
//!
//! With the `prometheus` feature, [`serve_prometheus`] installs a Prometheus
//! recorder and answers scrapes in the text format (what `migrate serve
//! --metrics` and `migrate demo --metrics` use).

use std::fmt;

use async_trait::async_trait;
use lockshift_lock::Algorithm;
use lockshift_store::{
    OpKind, ReadOutcome, Request, Response, SharedStore, Store, StoreError, Table,
};
use metrics::{Counter, Gauge, Histogram, counter, gauge, histogram};

#[cfg(feature = "prometheus")]
mod prometheus;
#[cfg(feature = "prometheus")]
pub use prometheus::{MetricsError, MetricsServer, serve_prometheus};

/// Histogram, seconds: how long a successful acquisition waited, from the
/// call to the hand-out (re-entries after a stage change included).
pub const ACQUIRE_WAIT_SECONDS: &str = "lockshift_acquire_wait_seconds";
/// Histogram, seconds: how long a lock was held, from hand-out to release
/// (or drop, or revocation).
pub const HOLD_SECONDS: &str = "lockshift_hold_seconds";
/// Counter: locks handed out.
pub const ACQUISITIONS: &str = "lockshift_acquisitions_total";
/// Counter: acquisitions that reached their timeout.
pub const ACQUIRE_TIMEOUTS: &str = "lockshift_acquire_timeouts_total";
/// Counter: held locks whose lease was lost before release.
pub const LEASE_LOSSES: &str = "lockshift_lease_losses_total";
/// Counter: failed lease renewals (retried; see `lockshift_lock::metrics`).
pub const RENEWAL_FAILURES: &str = lockshift_lock::metrics::RENEWAL_FAILURES;
/// Histogram, seconds: the TTL a holder's cell had left when a waiter saw
/// it in the way (see `lockshift_queue_lock::metrics`).
pub const HOLDER_TTL_SECONDS: &str = lockshift_queue_lock::metrics::HOLDER_TTL_SECONDS;
/// Counter: store operations sent, by table and kind.
pub const STORE_OPERATIONS: &str = "lockshift_store_operations_total";
/// Counter: store operations that failed, by table and kind.
pub const STORE_ERRORS: &str = "lockshift_store_errors_total";
/// Counter: warnings the database added to read answers, by table.
pub const STORE_WARNINGS: &str = "lockshift_store_warnings_total";
/// Histogram: tombstones one read passed, by table (when the store says).
pub const READ_TOMBSTONES: &str = "lockshift_store_read_tombstones";
/// Gauge: 1 for the algorithm new acquisitions use, 0 for the others.
pub const EFFECTIVE_MODE: &str = "lockshift_effective_mode";
/// Gauge: the version of the stage record the node last read; -1 before
/// the first read.
pub const STAGE_VERSION: &str = "lockshift_stage_version";
/// Gauge: 1 while the node's stage view is confirmed, else 0.
pub const STAGE_CONFIRMED: &str = "lockshift_stage_confirmed";
/// Gauge, seconds: the database's clock minus this process's, as last
/// measured (positive: this process's clock is behind).
pub const CLOCK_OFFSET_SECONDS: &str = "lockshift_clock_offset_seconds";
/// Gauge, seconds: the error bound of that offset at the last measurement
/// round (the bound measured plus the drift allowance since the reading
/// kept); +Inf until a measurement is answered.
pub const CLOCK_ERROR_SECONDS: &str = "lockshift_clock_error_seconds";

/// Every metric lockshift records, for exporters and tests.
pub const ALL: [&str; 16] = [
    ACQUIRE_WAIT_SECONDS,
    HOLD_SECONDS,
    ACQUISITIONS,
    ACQUIRE_TIMEOUTS,
    LEASE_LOSSES,
    RENEWAL_FAILURES,
    HOLDER_TTL_SECONDS,
    STORE_OPERATIONS,
    STORE_ERRORS,
    STORE_WARNINGS,
    READ_TOMBSTONES,
    EFFECTIVE_MODE,
    STAGE_VERSION,
    STAGE_CONFIRMED,
    CLOCK_OFFSET_SECONDS,
    CLOCK_ERROR_SECONDS,
];

/// Tells the installed recorder what each metric means (exporters show it
/// as `# HELP`). Call once after installing it; [`serve_prometheus`] does.
pub fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_histogram!(
        ACQUIRE_WAIT_SECONDS,
        Unit::Seconds,
        "How long a successful lock acquisition waited"
    );
    describe_histogram!(
        HOLD_SECONDS,
        Unit::Seconds,
        "How long a lock was held, from hand-out to release"
    );
    describe_counter!(ACQUISITIONS, "Locks handed out");
    describe_counter!(ACQUIRE_TIMEOUTS, "Acquisitions that reached their timeout");
    describe_counter!(LEASE_LOSSES, "Held locks whose lease was lost");
    describe_counter!(RENEWAL_FAILURES, "Lease renewals that failed (retried)");
    describe_histogram!(
        HOLDER_TTL_SECONDS,
        Unit::Seconds,
        "The TTL a holder's cell had left when a waiter saw it in the way"
    );
    describe_counter!(STORE_OPERATIONS, "Store operations sent");
    describe_counter!(STORE_ERRORS, "Store operations that failed");
    describe_counter!(
        STORE_WARNINGS,
        "Warnings the database added to read answers (too many tombstones passed)"
    );
    describe_histogram!(
        READ_TOMBSTONES,
        Unit::Count,
        "Tombstones one read passed (when the store reports it)"
    );
    describe_gauge!(
        EFFECTIVE_MODE,
        "1 for the algorithm new acquisitions use, 0 for the others"
    );
    describe_gauge!(
        STAGE_VERSION,
        "Version of the rollout stage the node last read (-1: none yet)"
    );
    describe_gauge!(
        STAGE_CONFIRMED,
        "1 while the node's stage view is confirmed, 0 while it acts as combined"
    );
    describe_gauge!(
        CLOCK_OFFSET_SECONDS,
        Unit::Seconds,
        "The database's clock minus this process's, as last measured"
    );
    describe_gauge!(
        CLOCK_ERROR_SECONDS,
        Unit::Seconds,
        "The error bound of the clock offset (+Inf until measured)"
    );
}

// ===== Node metrics =====

/// One algorithm's handles.
#[derive(Clone)]
struct PerAlgorithm {
    wait: Histogram,
    hold: Histogram,
    acquisitions: Counter,
    timeouts: Counter,
    lease_losses: Counter,
    mode: Gauge,
}

/// The handles a node records into, made once at start (a handle made
/// before a recorder is installed stays a no-op: install it first).
#[derive(Clone)]
pub(crate) struct NodeMetrics {
    per: [PerAlgorithm; 3],
    stage_version: Gauge,
    stage_confirmed: Gauge,
    clock_offset: Gauge,
    clock_error: Gauge,
}

impl fmt::Debug for NodeMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NodeMetrics")
    }
}

fn index(algorithm: Algorithm) -> usize {
    match algorithm {
        Algorithm::Legacy => 0,
        Algorithm::Combined => 1,
        Algorithm::Queue => 2,
    }
}

impl NodeMetrics {
    pub(crate) fn new(node: &str) -> Self {
        let per = Algorithm::ALL.map(|algorithm| {
            let labels = [
                ("node", node.to_string()),
                ("algorithm", algorithm.as_str().to_string()),
            ];
            let per = PerAlgorithm {
                wait: histogram!(ACQUIRE_WAIT_SECONDS, &labels),
                hold: histogram!(HOLD_SECONDS, &labels),
                acquisitions: counter!(ACQUISITIONS, &labels),
                timeouts: counter!(ACQUIRE_TIMEOUTS, &labels),
                lease_losses: counter!(LEASE_LOSSES, &labels),
                mode: gauge!(EFFECTIVE_MODE, &labels),
            };
            // Registered at zero: a series from the start.
            counter!(RENEWAL_FAILURES, &labels).increment(0);
            per.acquisitions.increment(0);
            per.timeouts.increment(0);
            per.lease_losses.increment(0);
            per.mode.set(0.0);
            per
        });
        let stage_version = gauge!(STAGE_VERSION, "node" => node.to_string());
        stage_version.set(-1.0);
        let stage_confirmed = gauge!(STAGE_CONFIRMED, "node" => node.to_string());
        stage_confirmed.set(0.0);
        let clock_offset = gauge!(CLOCK_OFFSET_SECONDS, "node" => node.to_string());
        clock_offset.set(0.0);
        let clock_error = gauge!(CLOCK_ERROR_SECONDS, "node" => node.to_string());
        clock_error.set(f64::INFINITY);
        NodeMetrics {
            per,
            stage_version,
            stage_confirmed,
            clock_offset,
            clock_error,
        }
    }

    fn of(&self, algorithm: Algorithm) -> &PerAlgorithm {
        &self.per[index(algorithm)]
    }

    pub(crate) fn acquired(&self, algorithm: Algorithm, waited: std::time::Duration) {
        let m = self.of(algorithm);
        m.acquisitions.increment(1);
        m.wait.record(waited.as_secs_f64());
    }

    pub(crate) fn released(&self, algorithm: Algorithm, held: std::time::Duration) {
        self.of(algorithm).hold.record(held.as_secs_f64());
    }

    pub(crate) fn timed_out(&self, algorithm: Algorithm) {
        self.of(algorithm).timeouts.increment(1);
    }

    pub(crate) fn lease_lost(&self, algorithm: Algorithm) {
        self.of(algorithm).lease_losses.increment(1);
    }

    /// The node's resolution and view now.
    pub(crate) fn view(&self, effective: Algorithm, version: Option<u64>, confirmed: bool) {
        for algorithm in Algorithm::ALL {
            self.of(algorithm)
                .mode
                .set(if algorithm == effective { 1.0 } else { 0.0 });
        }
        // Stage versions are small counters: exact in an f64.
        #[allow(clippy::cast_precision_loss)]
        self.stage_version.set(version.map_or(-1.0, |v| v as f64));
        self.stage_confirmed.set(if confirmed { 1.0 } else { 0.0 });
    }

    /// The clock's reading kept, at `now` on this process's clock.
    pub(crate) fn clock(
        &self,
        reading: Option<&lockshift_decide::offset::ClockReading>,
        now: lockshift_store::Timestamp,
    ) {
        let Some(r) = reading else {
            return;
        };
        let seconds = |us: f64| us / 1e6;
        // Offsets and errors are far below 2^53 µs: exact in an f64.
        #[allow(clippy::cast_precision_loss)]
        {
            self.clock_offset.set(seconds(r.offset_us as f64));
            self.clock_error.set(seconds(r.error_at(now) as f64));
        }
    }
}

// ===== The store wrapper =====

/// A [`Store`] that counts every operation (and failure) by table and kind
/// before handing it to the store it wraps, and reports what reads cost:
/// the database's warnings ([`STORE_WARNINGS`], logged at `warn` with the
/// table and lock id, at most once per [`WARNING_LOG_EVERY`] per lock) and
/// the tombstones passed ([`READ_TOMBSTONES`]). A node wraps its store in
/// one.
pub(crate) struct MeteredStore {
    inner: SharedStore,
    node: String,
    /// (operations, errors) handles per kind for each of lockshift's
    /// tables, made once; another table's are made on the fly.
    handles: Vec<(Table, [(Counter, Counter); 5])>,
    /// (warnings, tombstones per read) handles per table, made once.
    read_costs: Vec<(Table, Counter, Histogram)>,
    /// When each lock's last warning was logged, and how many were not.
    logged: std::sync::Mutex<std::collections::HashMap<(Table, String), WarningLog>>,
}

/// How often at most the warnings about one lock (a table and a row) are
/// logged; those in between are counted and reported with the next.
pub const WARNING_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Locks whose last warning time is remembered; beyond, the oldest are
/// forgotten (a forgotten lock's next warning is logged at once).
const WARNING_LOG_LOCKS: usize = 1024;

#[derive(Clone, Copy, Debug)]
struct WarningLog {
    at: tokio::time::Instant,
    suppressed: u64,
}

impl fmt::Debug for MeteredStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeteredStore")
            .field("inner", &self.inner.describe())
            .field("node", &self.node)
            .finish()
    }
}

impl MeteredStore {
    /// Counts the operations `node` sends to `inner`.
    pub(crate) fn new(inner: SharedStore, node: impl Into<String>) -> Self {
        let node = node.into();
        let handles = lockshift_store::schema::ALL
            .into_iter()
            .map(|table| {
                let per_kind = OpKind::EVERY.map(|kind| {
                    let (ops, errs) = (operations(&node, table, kind), errors(&node, table, kind));
                    ops.increment(0);
                    errs.increment(0);
                    (ops, errs)
                });
                (table, per_kind)
            })
            .collect();
        let read_costs = lockshift_store::schema::ALL
            .into_iter()
            .map(|table| {
                let warnings = warnings(&node, table);
                warnings.increment(0);
                (table, warnings, read_tombstones(&node, table))
            })
            .collect();
        MeteredStore {
            inner,
            node,
            handles,
            read_costs,
            logged: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// Records what a read of `row` cost, and logs what the operator must
    /// hear about (rate-limited per lock).
    fn observe(&self, table: Table, row: &str, result: Result<&ReadOutcome, &StoreError>) {
        let (warn_count, tombstones_hist) = match self.read_costs.iter().find(|(t, ..)| *t == table)
        {
            Some((_, w, h)) => (w.clone(), h.clone()),
            None => (
                warnings(&self.node, table),
                read_tombstones(&self.node, table),
            ),
        };
        match result {
            Ok(outcome) => {
                if let Some(n) = outcome.tombstones {
                    // Tombstone counts are far below 2^53: exact in an f64.
                    #[allow(clippy::cast_precision_loss)]
                    tombstones_hist.record(n as f64);
                }
                if outcome.warnings.is_empty() {
                    return;
                }
                warn_count.increment(outcome.warnings.len() as u64);
                if let Some(suppressed) = self.may_log(table, row) {
                    for warning in &outcome.warnings {
                        tracing::warn!(
                            node = %self.node,
                            %table,
                            lock = %lockshift_store::tombstones::shorten(row),
                            tombstones = ?outcome.tombstones,
                            suppressed,
                            %warning,
                            "the database warned about a read"
                        );
                    }
                }
            }
            Err(e) if e.kind() == lockshift_store::StoreErrorKind::TooManyTombstones => {
                if let Some(suppressed) = self.may_log(table, row) {
                    tracing::warn!(
                        node = %self.node,
                        %table,
                        lock = %lockshift_store::tombstones::shorten(row),
                        suppressed,
                        error = %e,
                        "a read failed: too many tombstones"
                    );
                }
            }
            Err(_) => {}
        }
    }

    /// Whether a warning about `row` of `table` may be logged now, and how
    /// many were held back since the last one logged.
    fn may_log(&self, table: Table, row: &str) -> Option<u64> {
        let now = tokio::time::Instant::now();
        let mut logged = self
            .logged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (table, row.to_string());
        if let Some(entry) = logged.get_mut(&key) {
            if now.duration_since(entry.at) < WARNING_LOG_EVERY {
                entry.suppressed += 1;
                return None;
            }
            let suppressed = entry.suppressed;
            *entry = WarningLog {
                at: now,
                suppressed: 0,
            };
            return Some(suppressed);
        }
        if logged.len() >= WARNING_LOG_LOCKS {
            logged.retain(|_, e| now.duration_since(e.at) < WARNING_LOG_EVERY);
            if logged.len() >= WARNING_LOG_LOCKS {
                logged.clear();
            }
        }
        logged.insert(
            key,
            WarningLog {
                at: now,
                suppressed: 0,
            },
        );
        Some(0)
    }

    fn count<T>(&self, table: Table, kind: OpKind, result: &Result<T, StoreError>) {
        let k = OpKind::EVERY.iter().position(|k| *k == kind).unwrap_or(0);
        match self.handles.iter().find(|(t, _)| *t == table) {
            Some((_, per_kind)) => {
                per_kind[k].0.increment(1);
                if result.is_err() {
                    per_kind[k].1.increment(1);
                }
            }
            None => {
                operations(&self.node, table, kind).increment(1);
                if result.is_err() {
                    errors(&self.node, table, kind).increment(1);
                }
            }
        }
    }
}

fn operations(node: &str, table: Table, kind: OpKind) -> Counter {
    counter!(STORE_OPERATIONS, "node" => node.to_string(), "table" => table.name(), "kind" => kind.as_str())
}

fn warnings(node: &str, table: Table) -> Counter {
    counter!(STORE_WARNINGS, "node" => node.to_string(), "table" => table.name())
}

fn read_tombstones(node: &str, table: Table) -> Histogram {
    histogram!(READ_TOMBSTONES, "node" => node.to_string(), "table" => table.name())
}

fn errors(node: &str, table: Table, kind: OpKind) -> Counter {
    counter!(STORE_ERRORS, "node" => node.to_string(), "table" => table.name(), "kind" => kind.as_str())
}

#[async_trait]
impl Store for MeteredStore {
    async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
        let (table, kind, row) = (request.table, request.kind(), request.row());
        let result = self.inner.call(request).await;
        self.count(table, kind, &result);
        match (&result, row) {
            (Ok(Response::Read(outcome)), Some(row)) => self.observe(table, row, Ok(outcome)),
            (Err(e), Some(row)) if kind == OpKind::Read => self.observe(table, row, Err(e)),
            _ => {}
        }
        result
    }

    fn wraps(&self) -> Option<&dyn Store> {
        Some(&self.inner)
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
