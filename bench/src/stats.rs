//! What one benchmark run measured, computed from every worker's samples.
//!
//! All times are wall-clock microseconds taken on one machine, so samples of
//! different worker processes compare directly.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One acquisition as a worker saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// The worker (process) index.
    pub worker: u32,
    /// The acquisition's index within the worker, from 0.
    pub index: u32,
    /// When `acquire` was called (µs since the epoch).
    pub requested_at: i64,
    /// When it returned the guard.
    pub acquired_at: i64,
    /// When `release` was called.
    pub release_started: i64,
    /// When `release` returned.
    pub released_at: i64,
}

impl Sample {
    /// The wait for this acquisition, µs.
    pub fn wait_micros(&self) -> i64 {
        self.acquired_at - self.requested_at
    }
}

/// Store operations a worker made (everything: acquire, renewals, release,
/// time service).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpTotals {
    /// Reads and scans.
    pub reads: u64,
    /// Writes and deletes.
    pub writes: u64,
}

/// Everything one worker reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerReport {
    /// The worker index.
    pub worker: u32,
    /// Its acquisitions.
    pub samples: Vec<Sample>,
    /// Its store operations.
    pub ops: OpTotals,
    /// The median round trip of a one-cell read, measured before the run (µs).
    pub round_trip_micros: i64,
    /// Requests whose outcome was unknown (the LWT baseline's timed-out
    /// conditional statements; lockshift's locks retry theirs idempotently).
    #[serde(default)]
    pub unknown_outcomes: u64,
    /// Acquisitions that failed, with the error.
    pub failures: Vec<String>,
    /// What its reads cost in tombstones, as the answers said.
    #[serde(default)]
    pub reads: crate::reads::ReadCosts,
}

/// The statistics of one algorithm at one process count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunStats {
    /// The algorithm.
    pub algorithm: String,
    /// Worker processes.
    pub processes: u32,
    /// Acquisitions measured.
    pub acquisitions: u64,
    /// Mean wait, ms.
    pub wait_mean_ms: f64,
    /// Median wait, ms.
    pub wait_p50_ms: f64,
    /// 99th percentile wait, ms.
    pub wait_p99_ms: f64,
    /// Longest wait, ms.
    pub wait_max_ms: f64,
    /// Longest wait over mean wait.
    pub max_over_mean: f64,
    /// Acquisitions per second over the whole run.
    pub acquisitions_per_sec: f64,
    /// The time per acquisition at that rate (1 / throughput, the hold
    /// included), in store round trips.
    pub cycle_round_trips: Option<f64>,
    /// Mean wait in store round trips (at P = 1: the uncontended acquisition).
    pub wait_mean_round_trips: Option<f64>,
    /// Store operations per acquisition.
    pub ops_per_acquisition: f64,
    /// Reads per acquisition.
    pub reads_per_acquisition: f64,
    /// Writes (and deletes) per acquisition.
    pub writes_per_acquisition: f64,
    /// The median store round trip, ms.
    pub round_trip_ms: f64,
    /// The mean time of one read during the run, ms (every worker's reads;
    /// `None` without reads, as for the LWT baseline). Beside
    /// `round_trip_ms`, measured on an idle connection before the run, it
    /// shows what the run's own load — the workers and the store sharing
    /// the machine — added to each round trip.
    #[serde(default)]
    pub read_during_run_ms: Option<f64>,
    /// Median time from a release to the next waiter's acquisition, in store
    /// round trips; `None` when no acquisition followed a waiting release.
    pub handoff_median_round_trips: Option<f64>,
    /// 99th percentile of the same.
    pub handoff_p99_round_trips: Option<f64>,
    /// Median hand-off, ms.
    pub handoff_median_ms: Option<f64>,
    /// Longest run of consecutive acquisitions by one process.
    pub longest_run: u32,
    /// Jain's fairness index over windows of `10 × processes` acquisitions:
    /// mean over the windows (1 = perfectly even).
    pub jain_mean: f64,
    /// The least fair window.
    pub jain_min: f64,
    /// Wall time of the run, s.
    pub duration_s: f64,
    /// Failed acquisitions.
    pub failures: u64,
    /// Requests with an unknown outcome (see [`WorkerReport`]).
    #[serde(default)]
    pub unknown_outcomes: u64,
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[i64], p: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

fn ms(micros: f64) -> f64 {
    micros / 1000.0
}

/// Every worker's samples in acquisition order (ties by worker): what the
/// statistics of a run and of a soak both start from.
pub(crate) fn samples_in_order(reports: &[WorkerReport]) -> Vec<Sample> {
    let mut samples: Vec<Sample> = reports
        .iter()
        .flat_map(|r| r.samples.iter().copied())
        .collect();
    samples.sort_by_key(|s| (s.acquired_at, s.worker));
    samples
}

/// The run's wall time, s: from the first request to the last release
/// (at least 1 µs, so that rates stay finite).
pub(crate) fn wall_time_s(samples: &[Sample]) -> f64 {
    let start = samples.iter().map(|s| s.requested_at).min().unwrap_or(0);
    let end = samples.iter().map(|s| s.released_at).max().unwrap_or(start);
    (end - start).max(1) as f64 / 1e6
}

/// The median of the round trips the workers measured before the run, µs
/// (nearest rank; 0 when none measured one).
pub(crate) fn median_round_trip_micros(reports: &[WorkerReport]) -> i64 {
    let mut rts: Vec<i64> = reports
        .iter()
        .map(|r| r.round_trip_micros)
        .filter(|r| *r > 0)
        .collect();
    rts.sort_unstable();
    percentile(&rts, 50.0).unwrap_or(0)
}

/// Computes the statistics of one run.
pub fn compute(algorithm: &str, processes: u32, reports: &[WorkerReport]) -> RunStats {
    let samples = samples_in_order(reports);
    let n = samples.len();
    let mut waits: Vec<i64> = samples.iter().map(Sample::wait_micros).collect();
    waits.sort_unstable();
    let mean = if n == 0 {
        0.0
    } else {
        waits.iter().sum::<i64>() as f64 / n as f64
    };
    let max = waits.last().copied().unwrap_or(0) as f64;
    let duration_s = wall_time_s(&samples);
    let ops = reports.iter().fold(OpTotals::default(), |acc, r| OpTotals {
        reads: acc.reads + r.ops.reads,
        writes: acc.writes + r.ops.writes,
    });
    let per = |x: u64| if n == 0 { 0.0 } else { x as f64 / n as f64 };
    let round_trip = median_round_trip_micros(reports) as f64;
    let mut handoffs = handoffs(&samples);
    handoffs.sort_unstable();
    let in_round_trips = |h: Option<i64>| {
        h.filter(|_| round_trip > 0.0)
            .map(|h| h as f64 / round_trip)
    };
    let (jain_mean, jain_min) = jain(&samples, processes);
    RunStats {
        algorithm: algorithm.to_string(),
        processes,
        acquisitions: n as u64,
        wait_mean_ms: ms(mean),
        wait_p50_ms: ms(percentile(&waits, 50.0).unwrap_or(0) as f64),
        wait_p99_ms: ms(percentile(&waits, 99.0).unwrap_or(0) as f64),
        wait_max_ms: ms(max),
        max_over_mean: if mean > 0.0 { max / mean } else { 0.0 },
        acquisitions_per_sec: n as f64 / duration_s,
        cycle_round_trips: (n > 0 && round_trip > 0.0)
            .then(|| duration_s * 1e6 / n as f64 / round_trip),
        wait_mean_round_trips: (round_trip > 0.0).then(|| mean / round_trip),
        ops_per_acquisition: per(ops.reads + ops.writes),
        reads_per_acquisition: per(ops.reads),
        writes_per_acquisition: per(ops.writes),
        round_trip_ms: ms(round_trip),
        read_during_run_ms: {
            let mut all = crate::reads::ReadCosts::default();
            for r in reports {
                all.merge(&r.reads);
            }
            all.mean_read_micros().map(ms)
        },
        handoff_median_round_trips: in_round_trips(percentile(&handoffs, 50.0)),
        handoff_p99_round_trips: in_round_trips(percentile(&handoffs, 99.0)),
        handoff_median_ms: percentile(&handoffs, 50.0).map(|h| ms(h as f64)),
        longest_run: longest_run(&samples),
        jain_mean,
        jain_min,
        duration_s,
        failures: reports.iter().map(|r| r.failures.len() as u64).sum(),
        unknown_outcomes: reports.iter().map(|r| r.unknown_outcomes).sum(),
    }
}

/// Hand-offs (µs): for consecutive acquisitions A then B where B was already
/// waiting when A's release began, the time from that release to B's
/// acquisition. `samples` must be in acquisition order.
pub fn handoffs(samples: &[Sample]) -> Vec<i64> {
    samples
        .windows(2)
        .filter(|w| w[1].requested_at <= w[0].release_started && w[1].worker != w[0].worker)
        .map(|w| w[1].acquired_at - w[0].release_started)
        .collect()
}

/// The longest run of consecutive acquisitions by one worker. `samples` must
/// be in acquisition order.
pub fn longest_run(samples: &[Sample]) -> u32 {
    let mut longest = 0;
    let mut run = 0;
    let mut last = None;
    for s in samples {
        run = if last == Some(s.worker) { run + 1 } else { 1 };
        last = Some(s.worker);
        longest = longest.max(run);
    }
    longest
}

/// Jain's index `(Σx)² / (n·Σx²)` of acquisitions per worker over
/// consecutive windows of `10 × processes` acquisitions: (mean, min).
/// `samples` must be in acquisition order.
pub fn jain(samples: &[Sample], processes: u32) -> (f64, f64) {
    let n = processes.max(1) as usize;
    let window = 10 * n;
    let indices: Vec<f64> = samples
        .chunks(window)
        .filter(|c| c.len() == window)
        .map(|chunk| {
            let mut counts: BTreeMap<u32, f64> = BTreeMap::new();
            for s in chunk {
                *counts.entry(s.worker).or_default() += 1.0;
            }
            let sum: f64 = counts.values().sum();
            let squares: f64 = counts.values().map(|x| x * x).sum();
            sum * sum / (n as f64 * squares)
        })
        .collect();
    if indices.is_empty() {
        return (1.0, 1.0);
    }
    let mean = indices.iter().sum::<f64>() / indices.len() as f64;
    let min = indices.iter().copied().fold(f64::INFINITY, f64::min);
    (mean, min)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(worker: u32, requested: i64, acquired: i64, released: i64) -> Sample {
        Sample {
            worker,
            index: 0,
            requested_at: requested,
            acquired_at: acquired,
            release_started: released,
            released_at: released + 5,
        }
    }

    #[test]
    fn alternation_is_fair_and_bursts_are_not() {
        let alternating: Vec<Sample> = (0..40)
            .map(|i| s(i % 2, i as i64 * 10, i as i64 * 10 + 1, i as i64 * 10 + 5))
            .collect();
        assert_eq!(longest_run(&alternating), 1);
        assert_eq!(jain(&alternating, 2), (1.0, 1.0));
        let bursts: Vec<Sample> = (0..40)
            .map(|i| s(if i < 20 { 0 } else { 1 }, 0, i as i64, i as i64))
            .collect();
        assert_eq!(longest_run(&bursts), 20);
        let (mean, min) = jain(&bursts, 2);
        assert!(
            (min - 0.5).abs() < 1e-9 && (mean - 0.5).abs() < 1e-9,
            "{mean} {min}"
        );
    }

    #[test]
    fn handoff_counts_only_waiters_of_another_worker() {
        let samples = [
            s(0, 0, 10, 100),
            s(1, 50, 130, 200),  // waiting since 50 < 100: hand-off 30
            s(1, 250, 260, 300), // requested after the release: no hand-off
            s(0, 280, 320, 400), // waiting since 280 < 300: hand-off 20
        ];
        assert_eq!(handoffs(&samples), [30, 20]);
    }

    #[test]
    fn statistics_of_a_run() {
        let report = |worker, samples: Vec<Sample>| WorkerReport {
            worker,
            samples,
            ops: OpTotals {
                reads: 6,
                writes: 4,
            },
            round_trip_micros: 10,
            unknown_outcomes: 1,
            failures: Vec::new(),
            reads: crate::reads::ReadCosts {
                tables: vec![crate::reads::TableReads {
                    table: "queue".to_string(),
                    reads: 4,
                    micros: 4 * (10 + 5 * worker as u64),
                    ..Default::default()
                }],
                first_warning: None,
            },
        };
        let reports = [
            report(0, vec![s(0, 0, 10, 100), s(0, 280, 320, 400)]),
            report(1, vec![s(1, 50, 130, 200), s(1, 250, 260, 300)]),
        ];
        let st = compute("queue", 2, &reports);
        assert_eq!(st.acquisitions, 4);
        assert!(
            (st.wait_mean_ms - 0.035).abs() < 1e-9,
            "{}",
            st.wait_mean_ms
        ); // (10+40+80+10)/4 µs
        assert!((st.wait_max_ms - 0.08).abs() < 1e-9);
        assert!((st.ops_per_acquisition - 5.0).abs() < 1e-9);
        assert_eq!(st.handoff_median_round_trips, Some(2.0)); // nearest rank of [20, 30] at 50 %: 20 µs / 10 µs
        assert_eq!(st.longest_run, 2);
        // 4 acquisitions from 0 to 405 µs: 101.25 µs each, 10.125 round trips.
        assert!((st.cycle_round_trips.unwrap() - 10.125).abs() < 1e-9);
        assert!((st.wait_mean_round_trips.unwrap() - 3.5).abs() < 1e-9);
        assert_eq!(st.unknown_outcomes, 2);
        // Worker 0's reads took 10 µs each, worker 1's 15: 12.5 µs.
        assert!((st.read_during_run_ms.unwrap() - 0.0125).abs() < 1e-12);
        assert_eq!(percentile(&[1, 2, 3, 4], 99.0), Some(4));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
