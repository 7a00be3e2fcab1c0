//! One worker process: connect, measure the store round trip, say `ready`,
//! wait for `go`, do its job, report.
//!
//! The protocol with the orchestrator is line-based: the worker prints
//! `ready` on stdout once connected, reads one line (`go`) from stdin,
//! prints `progress <done>` every so many acquisitions when its spec asks
//! (the soak's long runs), and finally prints its report as one JSON line:
//! a [`WorkerReport`] for the
//! contention job (take one shared lock K times), a
//! [`HoldReport`](crate::hold::HoldReport) for the hold job (one node holding
//! N locks through several renew periods).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lockshift_combined::CombinedLocker;
use lockshift_decide::binding::Pacing;
use lockshift_legacy::{LegacyLocker, LegacySettings};
use lockshift_lock::{
    AcquireError, AcquireOptions, Algorithm, Binding, LeaseSettings, LockContext, LockGuard,
    LockId, Locker, NodeId,
};
use lockshift_queue_lock::{QueueLocker, QueueSettings, TimeService, TimeSettings};
use lockshift_store::{
    CqlSettings, CqlStore, FaultyStore, OpKind, RowQuery, SharedClock, SharedStore, Store,
    SystemClock, schema,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::algorithm::BenchAlgorithm;
use crate::error::BenchError;
use crate::lwt::{LwtGuard, LwtLocker};
use crate::reads::ObservingStore;
use crate::stats::{OpTotals, Sample, WorkerReport};

/// What a worker does once released.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Job {
    /// Take the one shared lock K times, holding it `hold` each time.
    #[default]
    Contend,
    /// Hold `locks` distinct locks at once for `periods` renew periods.
    Hold {
        /// How many locks.
        locks: u32,
        /// For how many renew periods.
        periods: u32,
    },
}

/// Everything a worker needs, passed as JSON on its command line.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// This worker's index.
    pub worker: u32,
    /// The algorithm.
    pub algorithm: BenchAlgorithm,
    /// The job.
    #[serde(default)]
    pub job: Job,
    /// The one lock all workers of the run take (the hold job: the prefix
    /// of its locks' names).
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
    /// Print `progress <done>` on stdout after every this many
    /// acquisitions (0: never); the orchestrator passes it on.
    #[serde(default)]
    pub progress_every: u32,
}

/// Wall-clock microseconds since the epoch: samples of different processes
/// on one machine compare directly.
pub fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// How long an LWT acquisition may keep failing with errors before the
/// worker reports it failed (a taken lease is waited for without limit).
const LWT_GIVE_UP: Duration = Duration::from_secs(600);

/// A lockshift locker or the LWT baseline, behind one acquire/release.
#[derive(Debug)]
pub(crate) enum Contender {
    Lock(Box<dyn Locker>),
    Lwt(Box<LwtLocker>),
}

/// A held lock of either kind.
#[derive(Debug)]
pub(crate) enum Held {
    Lock(LockGuard),
    Lwt(LwtGuard),
}

/// Takes `lock` as a node at stage `dual` would: the combined lock is then
/// the fleet's lock and no legacy node runs, so nobody contends through
/// legacy and pacing for legacy contenders (stage `legacy`) would only slow
/// it. The binding carries the pacing, as a node's does; the other
/// algorithms have none.
pub(crate) async fn acquire_at_full_speed(
    locker: &dyn Locker,
    lock: &LockId,
) -> Result<LockGuard, AcquireError> {
    let binding = Binding::unbound().with_default_pacing(Pacing::FullSpeed);
    locker
        .acquire_with(lock, AcquireOptions::default(), &binding)
        .await
}

impl Contender {
    pub(crate) async fn acquire(&self, lock: &LockId) -> Result<Held, String> {
        match self {
            Contender::Lock(l) => acquire_at_full_speed(l.as_ref(), lock)
                .await
                .map(Held::Lock)
                .map_err(|e| e.to_string()),
            Contender::Lwt(l) => l.acquire(lock.as_str(), LWT_GIVE_UP).await.map(Held::Lwt),
        }
    }
}

impl Held {
    pub(crate) async fn release(self) -> Result<(), String> {
        match self {
            Held::Lock(g) => g.release().await.map_err(|e| e.to_string()),
            Held::Lwt(g) => g.release().await,
        }
    }
}

/// A connected worker: the counting store, the contender, what it measured.
pub(crate) struct Setup {
    pub(crate) counting: Arc<FaultyStore<SharedStore>>,
    /// What reads cost (below the counting store, so it sees every read).
    pub(crate) observing: Arc<ObservingStore>,
    pub(crate) contender: Contender,
    pub(crate) round_trip: Duration,
    // Kept alive for the run (lockshift's locks read the time service).
    _time: Option<TimeService>,
}

impl Setup {
    /// LWT statements sent since the last reset (they bypass the counting
    /// store: they go to the session directly).
    pub(crate) fn lwt_sent(&self) -> u64 {
        match &self.contender {
            Contender::Lwt(l) => l.sent(),
            Contender::Lock(_) => 0,
        }
    }

    pub(crate) fn reset_counts(&self) {
        self.counting.reset_counts();
        self.observing.reset();
        if let Contender::Lwt(l) = &self.contender {
            l.reset_counts();
        }
    }

    pub(crate) fn drop_time(&mut self) {
        self._time = None;
    }
}

pub(crate) async fn setup(spec: &WorkerSpec) -> Result<Setup, BenchError> {
    let cql = Arc::new(CqlStore::connect(&spec.cql).await?);
    let observing = Arc::new(ObservingStore::new(cql.clone()));
    let backend: SharedStore = observing.clone();
    let counting = Arc::new(FaultyStore::new(backend, spec.seed));
    let store: SharedStore = counting.clone();
    let clock: SharedClock = Arc::new(SystemClock);

    // The store's round trip, to express times in round trips: the mean of
    // 60 reads, each after a random pause, following 10 that warm the
    // connection, the statement cache and this fresh process up. The local
    // endpoint's injected latency is a timer, and timers fire on whole
    // milliseconds: back-to-back reads all land on the same phase of the
    // tick, and their median came out 3.6 ms in one run and 4.4 ms in the
    // next on the same endpoint. Random phases and the mean are stable.
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let mut total = Duration::ZERO;
    const WARM_UP: u32 = 10;
    const SAMPLES: u32 = 60;
    for i in 0..WARM_UP + SAMPLES {
        tokio::time::sleep(Duration::from_micros(rng.random_range(0..2_000))).await;
        let started = std::time::Instant::now();
        store
            .read(schema::MAIN, "bench-round-trip", &RowQuery::first(1))
            .await?;
        if i >= WARM_UP {
            total += started.elapsed();
        }
    }
    let round_trip = total / SAMPLES;

    let (contender, time) = match spec.algorithm.lock() {
        Some(algorithm) => {
            let ctx = Arc::new(LockContext::new(
                store.clone(),
                clock.clone(),
                NodeId::new(format!("bench-{}", spec.worker))?,
                spec.lease.clone(),
                Some(spec.seed),
            )?);
            let time = TimeService::start(&spec.time, store.clone(), clock.clone());
            let locker: Box<dyn Locker> = match algorithm {
                Algorithm::Legacy => Box::new(LegacyLocker::new(ctx, spec.legacy.clone())),
                Algorithm::Queue => {
                    Box::new(QueueLocker::new(ctx, time.source(), spec.queue.clone()))
                }
                // Paced as from stage `dual` on: `acquire_at_full_speed`.
                Algorithm::Combined => {
                    Box::new(CombinedLocker::new(ctx, time.source(), spec.queue.clone()))
                }
            };
            (Contender::Lock(locker), Some(time))
        }
        None => {
            let lwt = LwtLocker::new(
                &cql,
                spec.cql.consistency,
                spec.cql.request_timeout,
                format!("bench-{}-{}", spec.worker, spec.seed),
                spec.lease.lease_ttl,
                spec.lease.renew_every,
                round_trip,
                spec.seed,
            )
            .await?;
            (Contender::Lwt(Box::new(lwt)), None)
        }
    };
    Ok(Setup {
        counting,
        observing,
        contender,
        round_trip,
        _time: time,
    })
}

/// Says `ready`, waits for `go`.
pub(crate) async fn barrier() -> Result<(), BenchError> {
    let mut stdout = tokio::io::stdout();
    stdout.write_all(b"ready\n").await?;
    stdout.flush().await?;
    let mut go = String::new();
    BufReader::new(tokio::io::stdin())
        .read_line(&mut go)
        .await?;
    Ok(())
}

/// The line a worker prints after `done` acquisitions when its spec asks
/// for progress; the orchestrator reads past it to the report.
pub(crate) const PROGRESS_PREFIX: &str = "progress ";

async fn progress(done: u32) -> Result<(), BenchError> {
    let mut stdout = tokio::io::stdout();
    stdout
        .write_all(format!("{PROGRESS_PREFIX}{done}\n").as_bytes())
        .await?;
    stdout.flush().await?;
    Ok(())
}

/// Prints the report line.
pub(crate) async fn report(value: &impl Serialize) -> Result<(), BenchError> {
    let mut line = serde_json::to_vec(value)?;
    line.push(b'\n');
    let mut stdout = tokio::io::stdout();
    stdout.write_all(&line).await?;
    stdout.flush().await?;
    Ok(())
}

/// Runs one worker: the body of `migrate bench-worker`.
///
/// # Errors
/// Connection, settings or I/O failures. Failed acquisitions are reported,
/// not errors.
pub async fn run_worker(spec: WorkerSpec) -> Result<(), BenchError> {
    match spec.job {
        Job::Contend => contend(spec).await,
        Job::Hold { locks, periods } => crate::hold::hold_worker(spec, locks, periods).await,
    }
}

async fn contend(spec: WorkerSpec) -> Result<(), BenchError> {
    let mut setup = setup(&spec).await?;
    let lock = LockId::new(spec.lock.clone())?;
    let hold = Duration::from_micros(spec.hold_micros);
    barrier().await?;
    setup.reset_counts();

    let mut samples = Vec::with_capacity(spec.acquisitions as usize);
    let mut failures = Vec::new();
    for index in 0..spec.acquisitions {
        let requested_at = now_micros();
        let held = match setup.contender.acquire(&lock).await {
            Ok(h) => h,
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        let acquired_at = now_micros();
        if !hold.is_zero() {
            // The hold lasts what was asked: tokio's timer alone would
            // stretch a 1 ms hold to up to 2 ms (pause.rs).
            lockshift_lock::pause::sleep(hold).await;
        }
        let release_started = now_micros();
        if let Err(e) = held.release().await {
            failures.push(e);
        }
        samples.push(Sample {
            worker: spec.worker,
            index,
            requested_at,
            acquired_at,
            release_started,
            released_at: now_micros(),
        });
        let done = index + 1;
        if spec.progress_every > 0 && done % spec.progress_every == 0 && done < spec.acquisitions {
            progress(done).await?;
        }
    }
    let counts = setup.counting.op_counts();
    let report_line = WorkerReport {
        worker: spec.worker,
        samples,
        ops: OpTotals {
            reads: counts.of_kind(OpKind::Read) + counts.of_kind(OpKind::Scan),
            writes: counts.of_kind(OpKind::Write)
                + counts.of_kind(OpKind::Delete)
                + setup.lwt_sent(),
        },
        round_trip_micros: i64::try_from(setup.round_trip.as_micros()).unwrap_or(i64::MAX),
        unknown_outcomes: match &setup.contender {
            Contender::Lwt(l) => l.unknown_outcomes(),
            Contender::Lock(_) => 0,
        },
        failures,
        reads: setup.observing.costs(),
    };
    setup.drop_time();
    report(&report_line).await
}
