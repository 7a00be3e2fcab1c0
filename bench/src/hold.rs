//! The hold mode: one node holds N locks at once through several renew
//! periods, and the benchmark reports what that costs — store operations
//! per held lock per renew period, memory per held lock, CPU.
//!
//! One worker process per (algorithm, N), so its memory and CPU are the
//! lock client's alone (the local endpoint runs in the orchestrator). The
//! worker takes N distinct locks (64 acquisitions in flight), waits half a
//! renew period, then counts every store operation during `periods ×
//! renew_every` of holding, by
//! table: the lock's own tables (`main`, `shadow`, `queue`; the LWT
//! baseline's conditional statements) against everything else (the time
//! service, the node registry), so nothing is hidden and nothing is
//! charged to the locks that is not theirs.
//!
//! Memory is the growth of the process's resident set from before the
//! first acquisition to the start of the hold, per lock; CPU is the
//! process's user + system time during the hold, from `/proc/self/stat`
//! (Linux reports it in USER_HZ = 100 ticks a second). Off Linux both are
//! absent.

use std::time::Instant;

use futures::StreamExt;
use lockshift_lock::LockId;
use lockshift_store::{OpCounts, OpKind, schema};
use serde::{Deserialize, Serialize};

use crate::algorithm::BenchAlgorithm;
use crate::error::BenchError;
use crate::worker::{Held, WorkerSpec, barrier, report, setup};

/// Acquisitions (and releases) in flight while taking the N locks.
const IN_FLIGHT: usize = 64;

/// Failures kept verbatim in a report (the rest are counted).
const KEPT_FAILURES: usize = 5;

/// What one hold worker measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HoldReport {
    /// Locks asked for.
    pub locks: u32,
    /// Locks actually held during the measurement.
    pub held: u32,
    /// Time to take them all, s.
    pub acquire_s: f64,
    /// The measured hold, s.
    pub hold_s: f64,
    /// The lease renew period, s.
    pub renew_every_s: f64,
    /// Store operations on the locks' own tables during the hold.
    pub lock_ops: u64,
    /// Other store operations during the hold (time service, registry).
    pub other_ops: u64,
    /// Resident set before the first acquisition, KiB.
    pub rss_before_kib: Option<u64>,
    /// Resident set with every lock held, KiB.
    pub rss_held_kib: Option<u64>,
    /// CPU time (user + system) during the hold, s.
    pub cpu_hold_s: Option<f64>,
    /// The median round trip of a one-cell read, µs.
    pub round_trip_micros: i64,
    /// Failed acquisitions and releases.
    pub failures: u64,
    /// The first few failures, verbatim.
    pub failure_samples: Vec<String>,
}

/// The statistics of one hold run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HoldStats {
    /// The algorithm.
    pub algorithm: String,
    /// N.
    pub locks: u32,
    /// Locks held during the measurement.
    pub held: u32,
    /// Time to take all N, s.
    pub acquire_s: f64,
    /// Renew periods measured (hold time / renew period).
    pub periods: f64,
    /// Store operations on the locks' tables per held lock per renew period.
    pub ops_per_lock_per_period: f64,
    /// Other store operations per renew period (not per lock).
    pub other_ops_per_period: f64,
    /// Resident memory per held lock, bytes.
    pub bytes_per_lock: Option<f64>,
    /// CPU during the hold, % of one core.
    pub cpu_percent: Option<f64>,
    /// CPU per held lock per renew period, µs.
    pub cpu_micros_per_lock_per_period: Option<f64>,
    /// Failed acquisitions and releases.
    pub failures: u64,
}

/// Turns a worker's report into the run's statistics.
pub fn hold_stats(algorithm: BenchAlgorithm, r: &HoldReport) -> HoldStats {
    let periods = if r.renew_every_s > 0.0 {
        r.hold_s / r.renew_every_s
    } else {
        0.0
    };
    let lock_periods = f64::from(r.held) * periods;
    let per = |x: f64, n: f64| (n > 0.0).then(|| x / n);
    HoldStats {
        algorithm: algorithm.as_str().to_string(),
        locks: r.locks,
        held: r.held,
        acquire_s: r.acquire_s,
        periods,
        ops_per_lock_per_period: per(r.lock_ops as f64, lock_periods).unwrap_or(0.0),
        other_ops_per_period: per(r.other_ops as f64, periods).unwrap_or(0.0),
        bytes_per_lock: r
            .rss_before_kib
            .zip(r.rss_held_kib)
            .and_then(|(b, h)| per(h.saturating_sub(b) as f64 * 1024.0, f64::from(r.held))),
        cpu_percent: r.cpu_hold_s.and_then(|c| per(c * 100.0, r.hold_s)),
        cpu_micros_per_lock_per_period: r.cpu_hold_s.and_then(|c| per(c * 1e6, lock_periods)),
        failures: r.failures,
    }
}

/// Operations on the locks' own tables, and on the others.
pub fn split_ops(counts: &OpCounts) -> (u64, u64) {
    let kinds = [OpKind::Read, OpKind::Scan, OpKind::Write, OpKind::Delete];
    let mut lock = 0;
    let mut other = 0;
    for table in schema::ALL {
        let n: u64 = kinds.iter().map(|k| counts.get(table, *k)).sum();
        if [schema::MAIN, schema::SHADOW, schema::QUEUE].contains(&table) {
            lock += n;
        } else {
            other += n;
        }
    }
    (lock, other)
}

/// The resident set size, KiB (`VmRSS` of `/proc/self/status`).
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// User + system CPU time of this process, s.
fn cpu_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) are
    // space-separated; utime and stime are the 14th and 15th overall.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    // `rest` starts at field 3 (state): utime is field 14 → index 11.
    Some((ticks(11)? + ticks(12)?) as f64 / 100.0)
}

/// The hold job of a worker process.
pub(crate) async fn hold_worker(
    spec: WorkerSpec,
    locks: u32,
    periods: u32,
) -> Result<(), BenchError> {
    let mut setup = setup(&spec).await?;
    let ids = (0..locks)
        .map(|i| LockId::new(format!("{}-{i}", spec.lock)))
        .collect::<Result<Vec<_>, _>>()?;
    barrier().await?;

    let mut failures = Vec::new();
    let rss_before_kib = rss_kib();
    let started = Instant::now();
    let contender = &setup.contender;
    let outcomes: Vec<Result<Held, String>> = futures::stream::iter(ids.iter())
        .map(|id| contender.acquire(id))
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let acquire_s = started.elapsed().as_secs_f64();
    let mut held = Vec::new();
    for o in outcomes {
        match o {
            Ok(h) => held.push(h),
            Err(e) => failures.push(e),
        }
    }
    let rss_held_kib = rss_kib();

    // Each lease renews every period from its own acquisition; starting
    // the window half a period after the last one keeps every renewal off
    // its edges, so each held lock renews exactly `periods` times in it.
    let renew_every = spec.lease.renew_every;
    tokio::time::sleep(renew_every / 2).await;
    setup.reset_counts();
    let cpu_before = cpu_s();
    let hold_started = Instant::now();
    tokio::time::sleep(renew_every * periods).await;
    let hold_s = hold_started.elapsed().as_secs_f64();
    let cpu_hold_s = cpu_s()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    let (lock_ops, other_ops) = split_ops(&setup.counting.op_counts());
    let lock_ops = lock_ops + setup.lwt_sent();

    let held_count = u32::try_from(held.len()).unwrap_or(u32::MAX);
    let releases: Vec<Result<(), String>> = futures::stream::iter(held)
        .map(Held::release)
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    failures.extend(releases.into_iter().filter_map(Result::err));
    setup.drop_time();
    report(&HoldReport {
        locks,
        held: held_count,
        acquire_s,
        hold_s,
        renew_every_s: renew_every.as_secs_f64(),
        lock_ops,
        other_ops,
        rss_before_kib,
        rss_held_kib,
        cpu_hold_s,
        round_trip_micros: i64::try_from(setup.round_trip.as_micros()).unwrap_or(i64::MAX),
        failures: failures.len() as u64,
        failure_samples: failures.into_iter().take(KEPT_FAILURES).collect(),
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_per_lock_and_period() {
        let r = HoldReport {
            locks: 1000,
            held: 1000,
            acquire_s: 2.0,
            hold_s: 30.0,
            renew_every_s: 10.0,
            lock_ops: 6000,
            other_ops: 30,
            rss_before_kib: Some(10_000),
            rss_held_kib: Some(12_000),
            cpu_hold_s: Some(0.3),
            round_trip_micros: 3000,
            failures: 0,
            failure_samples: Vec::new(),
        };
        let s = hold_stats(BenchAlgorithm::Queue, &r);
        assert!((s.periods - 3.0).abs() < 1e-9);
        assert!((s.ops_per_lock_per_period - 2.0).abs() < 1e-9);
        assert!((s.other_ops_per_period - 10.0).abs() < 1e-9);
        assert_eq!(s.bytes_per_lock, Some(2048.0));
        assert_eq!(s.cpu_percent, Some(1.0));
        assert!((s.cpu_micros_per_lock_per_period.unwrap() - 100.0).abs() < 1e-6);
        // Nothing held, nothing measured: no division by zero.
        let none = hold_stats(
            BenchAlgorithm::Lwt,
            &HoldReport {
                held: 0,
                rss_before_kib: None,
                ..r
            },
        );
        assert_eq!(none.ops_per_lock_per_period, 0.0);
        assert_eq!(none.bytes_per_lock, None);
    }

    #[tokio::test]
    async fn operations_split_by_table() {
        use lockshift_store::{CellWrite, RowQuery, Store, Timestamp, WriteOptions};
        let store = lockshift_store::FaultyStore::new(lockshift_store::MemoryStore::new(), 1);
        let at = WriteOptions::at(Timestamp::from_micros(1));
        for table in [
            schema::MAIN,
            schema::SHADOW,
            schema::QUEUE,
            schema::GLOBAL_TIME,
        ] {
            store
                .write(table, "k", &[CellWrite::new("c", vec![])], at)
                .await
                .unwrap();
        }
        store
            .read(schema::MAIN, "k", &RowQuery::all())
            .await
            .unwrap();
        store
            .read(schema::NODES, "k", &RowQuery::all())
            .await
            .unwrap();
        assert_eq!(split_ops(&store.op_counts()), (4, 2));
    }

    #[test]
    fn this_process_has_a_resident_set_and_cpu_time_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(rss_kib().is_some_and(|k| k > 0));
            assert!(cpu_s().is_some_and(|c| c >= 0.0));
        }
    }
}
