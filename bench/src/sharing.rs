//! Semaphores and read/write locks beside the mutex (issue 43): hand-off in
//! round trips, throughput and store requests per acquisition, for the
//! queue lock's exclusive acquisitions, a semaphore's permits at N = 1, 4
//! and 16, and a read/write mix.
//!
//! Every run is in this process on an embedded store whose every request
//! takes one round trip of virtual time (a paused clock), so the numbers
//! are round trips exactly and replay: W workers, each its own node (lock
//! context, time service, locker), loop acquire → hold → release on one
//! lock, always one more waiting than the kind admits, so every release
//! has a waiter.
//!
//! **Hand-off** is a release's start to the acquisition it lets in. For a
//! mutex that is the next acquisition; for a semaphore the releases and
//! the acquisitions that waited for a free permit are paired in order
//! (the k-th release while someone waited frees the permit the k-th such
//! acquisition takes); for the read/write mix, the acquisition's distance
//! from the latest release before it by another worker.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lockshift_lock::{
    AcquireOptions, Binding, LeaseSettings, LockContext, LockId, Locker, NodeId, Sharing,
};
use lockshift_queue_lock::{QueueLocker, QueueSettings, TimeService, TimeSettings, TimeSourceKind};
use lockshift_store::{
    FaultPlan, FaultyStore, MemoryStore, SharedClock, SharedStore, Store, TokioClock,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tokio::time::Instant;

use crate::error::BenchError;

/// One-cell reads timed before each run: the round trip the hand-off is
/// counted in.
const ROUND_TRIP_PROBES: u32 = 20;

/// What to run.
#[derive(Clone, Debug)]
pub struct SharingBenchConfig {
    /// The latency of every request of the embedded store (virtual time).
    pub latency: Duration,
    /// Acquisitions per worker.
    pub acquisitions: u32,
    /// The longest hold, in round trips: each hold is drawn uniformly
    /// from one round trip to it, in continuous time — not in whole round
    /// trips, which on the paused clock would put every release at the
    /// same phase of a waiter's once-a-round-trip reads and measure that
    /// phase instead of the hand-off.
    pub hold_round_trips: u32,
    /// The seed of the holds and the lockers.
    pub seed: u64,
}

impl Default for SharingBenchConfig {
    fn default() -> Self {
        SharingBenchConfig {
            latency: Duration::from_millis(2),
            acquisitions: 100,
            hold_round_trips: 10,
            seed: 1,
        }
    }
}

/// One kind's run.
#[derive(Clone, Debug, Serialize)]
pub struct SharingRun {
    /// `mutex`, `permits N`, `readers/writers R/W`.
    pub kind: String,
    /// Workers (nodes) contending.
    pub workers: usize,
    /// Acquisitions made.
    pub acquisitions: usize,
    /// The round trip a one-cell read took (virtual ms).
    pub round_trip_ms: f64,
    /// Mean hand-off, round trips.
    pub handoff_mean_rt: f64,
    /// Median hand-off, round trips.
    pub handoff_median_rt: f64,
    /// 90th percentile hand-off, round trips.
    pub handoff_p90_rt: f64,
    /// Acquisitions per 100 round trips of the run.
    pub per_100_rt: f64,
    /// Store requests per acquisition (all: waiting, holding, releasing).
    pub requests_per_acquisition: f64,
    /// The most holders inside at once.
    pub most_inside: usize,
}

/// The benchmark's report.
#[derive(Clone, Debug, Serialize)]
pub struct SharingBenchReport {
    /// What ran where.
    pub store: String,
    /// The longest hold, round trips.
    pub hold_round_trips: u32,
    /// One run per kind.
    pub runs: Vec<SharingRun>,
}

/// One acquisition as its worker saw it (virtual µs since the run began).
#[derive(Clone, Copy, Debug)]
struct Sample {
    worker: usize,
    requested: i64,
    acquired: i64,
    released: i64,
}

/// One kind measured: its name, each worker's sharing, and how many times
/// the configured holds its holds are.
struct Kind {
    name: String,
    workers: Vec<Sharing>,
    hold_scale: u32,
}

/// The kinds measured: the mutex; permits at N = 1, 4, 16 with the
/// mutex's holds and, for N > 1, with holds N times as long (releases as
/// often as the mutex's, so a hand-off waits on the same things); and a
/// readers/writers mix.
fn kinds() -> Vec<Kind> {
    let permits = |n: u32, hold_scale: u32| {
        let sharing = Sharing::permit(n).unwrap_or_default();
        let name = if hold_scale == 1 {
            format!("permits {n}")
        } else {
            format!("permits {n}, holds ×{hold_scale}")
        };
        Kind {
            name,
            workers: vec![sharing; n as usize + 3],
            hold_scale,
        }
    };
    let mut rw = vec![Sharing::Shared; 6];
    rw.extend([Sharing::Exclusive; 2]);
    vec![
        Kind {
            name: "mutex".to_string(),
            workers: vec![Sharing::Exclusive; 4],
            hold_scale: 1,
        },
        permits(1, 1),
        permits(4, 1),
        permits(4, 4),
        permits(16, 1),
        permits(16, 16),
        Kind {
            name: "readers/writers 6/2".to_string(),
            workers: rw,
            hold_scale: 1,
        },
    ]
}

/// Runs every kind, each on a fresh embedded store on a paused clock of
/// its own runtime, calling `progress` before each.
///
/// # Errors
/// The runtime cannot start, a context is refused, or an acquisition fails.
pub fn run_sharing(
    config: &SharingBenchConfig,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<SharingBenchReport, BenchError> {
    let mut runs = Vec::new();
    for kind in kinds() {
        progress(&format!(
            "sharing: {}, {} workers",
            kind.name,
            kind.workers.len()
        ));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .map_err(BenchError::Io)?;
        runs.push(runtime.block_on(measure(config, &kind))?);
    }
    Ok(SharingBenchReport {
        store: format!(
            "embedded store, paused clock, every request {:?} of latency",
            config.latency
        ),
        hold_round_trips: config.hold_round_trips,
        runs,
    })
}

async fn measure(config: &SharingBenchConfig, kind: &Kind) -> Result<SharingRun, BenchError> {
    let workers = &kind.workers;
    let clock: SharedClock = Arc::new(TokioClock::new());
    let store = Arc::new(
        FaultyStore::new(
            Arc::new(MemoryStore::with_clock(clock.clone())) as SharedStore,
            config.seed,
        )
        .with_plan(FaultPlan::latency(config.latency, Duration::ZERO)),
    );
    let lock = LockId::new("bench-sharing").map_err(|e| BenchError::Setting(e.to_string()))?;
    let round_trip = probe_round_trip(store.as_ref()).await?;
    let samples = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let micros = move || i64::try_from(started.elapsed().as_micros()).unwrap_or(i64::MAX);
    let mut tasks = Vec::new();
    let mut services = Vec::new();
    for (worker, sharing) in workers.iter().copied().enumerate() {
        let (locker, time) = worker_node(config, &(store.clone() as SharedStore), &clock, worker)?;
        services.push(time);
        let (lock, samples) = (lock.clone(), samples.clone());
        let mut rng = StdRng::seed_from_u64(config.seed ^ ((worker as u64 + 1) * 0x9e37_79b9));
        let acquisitions = config.acquisitions;
        let longest = config.hold_round_trips.max(1) * kind.hold_scale;
        tasks.push(tokio::spawn(async move {
            for _ in 0..acquisitions {
                let requested = micros();
                let options = AcquireOptions::default().shared_as(sharing);
                let guard = locker
                    .acquire_with(&lock, options, &Binding::unbound())
                    .await
                    .map_err(|e| e.to_string())?;
                let acquired = micros();
                let hold = rng.random_range(1.0..=f64::from(longest));
                tokio::time::sleep(round_trip.mul_f64(hold)).await;
                let released = micros();
                guard.release().await.map_err(|e| e.to_string())?;
                samples
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(Sample {
                        worker,
                        requested,
                        acquired,
                        released,
                    });
            }
            Ok::<(), String>(())
        }));
    }
    for task in tasks {
        task.await
            .map_err(|e| BenchError::Setting(format!("a worker panicked: {e}")))?
            .map_err(BenchError::Setting)?;
    }
    let elapsed = started.elapsed();
    let requests = store.op_counts().total();
    drop(services);
    let samples = std::mem::take(&mut *samples.lock().unwrap_or_else(PoisonError::into_inner));
    Ok(summarize(kind, &samples, round_trip, elapsed, requests))
}

/// The round trip as a waiter measures it: a one-cell read, the
/// runtime's timer granularity included.
async fn probe_round_trip(store: &dyn Store) -> Result<Duration, BenchError> {
    let probe = Instant::now();
    for _ in 0..ROUND_TRIP_PROBES {
        store
            .read(
                lockshift_store::schema::MAIN,
                "bench-round-trip",
                &lockshift_store::RowQuery::first(1),
            )
            .await
            .map_err(|e| BenchError::Setting(e.to_string()))?;
    }
    Ok(probe.elapsed() / ROUND_TRIP_PROBES)
}

/// Worker `worker`'s node: its own lock context, time service and locker
/// on the shared store.
fn worker_node(
    config: &SharingBenchConfig,
    store: &SharedStore,
    clock: &SharedClock,
    worker: usize,
) -> Result<(QueueLocker, TimeService), BenchError> {
    let ctx = Arc::new(
        LockContext::new(
            store.clone(),
            clock.clone(),
            NodeId::new(format!("bench-{worker}"))
                .map_err(|e| BenchError::Setting(e.to_string()))?,
            LeaseSettings::default(),
            Some(config.seed.wrapping_add(worker as u64)),
        )
        .map_err(|e| BenchError::Setting(e.to_string()))?,
    );
    let time = TimeService::start(
        &TimeSettings {
            source: TimeSourceKind::Local,
            ..TimeSettings::default()
        },
        store.clone(),
        clock.clone(),
    );
    let locker = QueueLocker::new(ctx, time.source(), QueueSettings::default());
    Ok((locker, time))
}

/// A kind's run from its samples.
fn summarize(
    kind: &Kind,
    samples: &[Sample],
    round_trip: Duration,
    elapsed: Duration,
    requests: u64,
) -> SharingRun {
    let paired = !kind.workers.contains(&Sharing::Shared);
    let mut handoffs = handoffs(samples, paired);
    handoffs.sort_unstable();
    let rt = round_trip.as_micros() as f64;
    let at = |p: f64| -> f64 {
        if handoffs.is_empty() {
            return f64::NAN;
        }
        let i = ((handoffs.len() - 1) as f64 * p).round() as usize;
        handoffs[i] as f64 / rt
    };
    SharingRun {
        kind: kind.name.clone(),
        workers: kind.workers.len(),
        acquisitions: samples.len(),
        round_trip_ms: round_trip.as_secs_f64() * 1e3,
        handoff_mean_rt: if handoffs.is_empty() {
            f64::NAN
        } else {
            handoffs.iter().sum::<i64>() as f64 / handoffs.len() as f64 / rt
        },
        handoff_median_rt: at(0.5),
        handoff_p90_rt: at(0.9),
        per_100_rt: samples.len() as f64 / (elapsed.as_micros() as f64 / rt) * 100.0,
        requests_per_acquisition: requests as f64 / samples.len().max(1) as f64,
        most_inside: most_inside(samples),
    }
}

/// Hand-offs (µs), as the module docs define them: `paired` for a mutex
/// or a semaphore, else from the latest release by another worker.
fn handoffs(samples: &[Sample], paired: bool) -> Vec<i64> {
    let mut releases: Vec<(i64, usize)> = samples.iter().map(|s| (s.released, s.worker)).collect();
    releases.sort_unstable();
    let waited_through = |s: &Sample, r: i64| s.requested <= r && r <= s.acquired;
    if !paired {
        return samples
            .iter()
            .filter_map(|s| {
                releases
                    .iter()
                    .filter(|(r, w)| *w != s.worker && waited_through(s, *r))
                    .map(|(r, _)| s.acquired - r)
                    .min()
            })
            .collect();
    }
    // Each release while someone waits frees one permit: the first of
    // the acquisitions then waiting (and not yet paired) to enter after
    // it took it.
    let mut paired_with = vec![false; samples.len()];
    let mut out = Vec::new();
    for (r, worker) in releases {
        let taker = samples
            .iter()
            .enumerate()
            .filter(|(i, s)| !paired_with[*i] && s.worker != worker && waited_through(s, r))
            .min_by_key(|(_, s)| s.acquired);
        if let Some((i, s)) = taker {
            paired_with[i] = true;
            out.push(s.acquired - r);
        }
    }
    out
}

/// The most acquisitions inside at once.
fn most_inside(samples: &[Sample]) -> usize {
    let mut events: Vec<(i64, i32)> = samples
        .iter()
        .flat_map(|s| [(s.acquired, 1), (s.released, -1)])
        .collect();
    events.sort_unstable_by_key(|(at, delta)| (*at, *delta));
    let (mut inside, mut most) = (0_i32, 0_i32);
    for (_, delta) in events {
        inside += delta;
        most = most.max(inside);
    }
    usize::try_from(most).unwrap_or(0)
}

/// The report as a table.
pub fn render_sharing(report: &SharingBenchReport) -> String {
    use std::fmt::Write as _;
    let mut s = format!(
        "shared acquisitions beside the mutex — queue lock, {} (holds of 1–{} RT)\n",
        report.store, report.hold_round_trips
    );
    let _ = writeln!(
        s,
        "{:<26} {:>7} {:>6} {:>13} {:>9} {:>9} {:>11} {:>10} {:>6}",
        "kind", "workers", "acq", "handoff mean", "p50", "p90", "acq/100 RT", "req/acq", "most"
    );
    for r in &report.runs {
        let _ = writeln!(
            s,
            "{:<26} {:>7} {:>6} {:>10.2} RT {:>6.1} RT {:>6.1} RT {:>11.1} {:>10.1} {:>6}",
            r.kind,
            r.workers,
            r.acquisitions,
            r.handoff_mean_rt,
            r.handoff_median_rt,
            r.handoff_p90_rt,
            r.per_100_rt,
            r.requests_per_acquisition,
            r.most_inside
        );
    }
    if let Some(r) = report.runs.first() {
        let _ = writeln!(
            s,
            "RT: a one-cell read, {:.2} ms (the latency and the timer's granularity); handoff: a release's start to the acquisition it lets in; most: holders inside at once",
            r.round_trip_ms
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(worker: usize, requested: i64, acquired: i64, released: i64) -> Sample {
        Sample {
            worker,
            requested,
            acquired,
            released,
        }
    }

    #[test]
    fn hand_offs_pair_releases_with_the_acquisitions_that_waited() {
        // Two permits: a and b hold from 0; c waits from 1 and enters 2 µs
        // after a's release at 10; d waits from 1 and enters 3 µs after
        // b's release at 12.
        let samples = [
            sample(0, 0, 0, 10),
            sample(1, 0, 0, 12),
            sample(2, 1, 12, 20),
            sample(3, 1, 15, 30),
        ];
        assert_eq!(handoffs(&samples, true), [2, 3]);
        assert_eq!(most_inside(&samples), 2);
        // Latest release before: c from b's release at 12 (0), d from 12 (3).
        assert_eq!(handoffs(&samples, false), [0, 3]);
        // A release nobody waited through pairs with nothing.
        assert!(handoffs(&[sample(0, 0, 0, 5), sample(1, 6, 6, 9)], true).is_empty());
    }

    #[test]
    fn the_mutex_and_one_permit_hand_off_alike_and_permits_share() {
        let report = run_sharing(
            &SharingBenchConfig {
                acquisitions: 10,
                ..SharingBenchConfig::default()
            },
            &mut |_| {},
        )
        .unwrap();
        println!("{}", render_sharing(&report));
        let run = |kind: &str| report.runs.iter().find(|r| r.kind == kind).unwrap();
        assert_eq!(run("mutex").most_inside, 1);
        assert_eq!(run("permits 1").most_inside, 1);
        assert_eq!(run("permits 4").most_inside, 4);
        assert!(run("permits 16").most_inside > 4);
        assert!(run("readers/writers 6/2").most_inside > 1);
        for r in &report.runs {
            assert_eq!(r.acquisitions, r.workers * 10, "{}", r.kind);
            assert!(r.handoff_median_rt.is_finite(), "{}", r.kind);
        }
        let text = render_sharing(&report);
        assert!(text.contains("permits 16"), "{text}");
    }
}
