//! One worker process: connect, measure the store round trip, say `ready`,
//! wait for `go`, take the lock K times, report samples and operation counts.
//!
//! The protocol with the orchestrator is line-based: the worker prints
//! `ready` on stdout once connected, reads one line (`go`) from stdin, and
//! finally prints its [`WorkerReport`] as one JSON line.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lockshift_combined::CombinedLocker;
use lockshift_legacy::{LegacyLocker, LegacySettings};
use lockshift_lock::{Algorithm, LeaseSettings, LockContext, LockId, Locker, NodeId};
use lockshift_queue_lock::{QueueLocker, QueueSettings, TimeService, TimeSettings};
use lockshift_store::{
    CqlSettings, CqlStore, FaultyStore, OpKind, RowQuery, SharedClock, SharedStore, Store,
    SystemClock, schema,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::error::BenchError;
use crate::stats::{OpTotals, Sample, WorkerReport};

/// Everything a worker process needs, passed as JSON on its command line.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// This worker's index.
    pub worker: u32,
    /// The algorithm.
    pub algorithm: Algorithm,
    /// The one lock all workers of the run take.
    pub lock: String,
    /// Acquisitions to make.
    pub acquisitions: u32,
    /// How long to hold the lock each time (µs).
    pub hold_micros: u64,
    /// Where the store is.
    pub cql: CqlSettings,
    /// Leases.
    pub lease: LeaseSettings,
    /// Queue lock tuning.
    pub queue: QueueSettings,
    /// Legacy lock tuning.
    pub legacy: LegacySettings,
    /// The time service.
    pub time: TimeSettings,
    /// Seed for owner ids and backoff.
    pub seed: u64,
}

/// Wall-clock microseconds since the epoch: samples of different processes
/// on one machine compare directly.
pub fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Runs one worker: the body of `migrate bench-worker`.
///
/// # Errors
/// Connection, settings or I/O failures. Failed acquisitions are reported in
/// the [`WorkerReport`], not as errors.
pub async fn run_worker(spec: WorkerSpec) -> Result<(), BenchError> {
    let cql = CqlStore::connect(&spec.cql).await?;
    let backend: SharedStore = Arc::new(cql);
    let counting = Arc::new(FaultyStore::new(backend, spec.seed));
    let store: SharedStore = counting.clone();
    let clock: SharedClock = Arc::new(SystemClock);

    // The store's round trip, to express hand-offs in round trips.
    let mut rtts = Vec::new();
    for _ in 0..30 {
        let started = std::time::Instant::now();
        store
            .read(schema::MAIN, "bench-round-trip", &RowQuery::first(1))
            .await?;
        rtts.push(started.elapsed());
    }
    rtts.sort_unstable();
    let round_trip = rtts[rtts.len() / 2];

    let ctx = Arc::new(LockContext::new(
        store.clone(),
        clock.clone(),
        NodeId::new(format!("bench-{}", spec.worker))?,
        spec.lease.clone(),
        Some(spec.seed),
    )?);
    let time = TimeService::start(&spec.time, store.clone(), clock.clone());
    let locker: Box<dyn Locker> = match spec.algorithm {
        Algorithm::Legacy => Box::new(LegacyLocker::new(ctx, spec.legacy.clone())),
        Algorithm::Queue => Box::new(QueueLocker::new(ctx, time.source(), spec.queue.clone())),
        Algorithm::Combined => {
            Box::new(CombinedLocker::new(ctx, time.source(), spec.queue.clone()))
        }
    };
    let lock = LockId::new(spec.lock.clone())?;
    let hold = Duration::from_micros(spec.hold_micros);

    let mut stdout = tokio::io::stdout();
    stdout.write_all(b"ready\n").await?;
    stdout.flush().await?;
    let mut go = String::new();
    BufReader::new(tokio::io::stdin())
        .read_line(&mut go)
        .await?;
    counting.reset_counts();

    let mut samples = Vec::with_capacity(spec.acquisitions as usize);
    let mut failures = Vec::new();
    for index in 0..spec.acquisitions {
        let requested_at = now_micros();
        let guard = match locker.acquire(&lock).await {
            Ok(g) => g,
            Err(e) => {
                failures.push(e.to_string());
                continue;
            }
        };
        let acquired_at = now_micros();
        if !hold.is_zero() {
            tokio::time::sleep(hold).await;
        }
        let release_started = now_micros();
        if let Err(e) = guard.release().await {
            failures.push(e.to_string());
        }
        samples.push(Sample {
            worker: spec.worker,
            index,
            requested_at,
            acquired_at,
            release_started,
            released_at: now_micros(),
        });
    }
    let counts = counting.op_counts();
    let report = WorkerReport {
        worker: spec.worker,
        samples,
        ops: OpTotals {
            reads: counts.of_kind(OpKind::Read) + counts.of_kind(OpKind::Scan),
            writes: counts.of_kind(OpKind::Write) + counts.of_kind(OpKind::Delete),
        },
        round_trip_micros: i64::try_from(round_trip.as_micros()).unwrap_or(i64::MAX),
        failures,
    };
    drop(time);
    let mut line = serde_json::to_vec(&report)?;
    line.push(b'\n');
    stdout.write_all(&line).await?;
    stdout.flush().await?;
    Ok(())
}
