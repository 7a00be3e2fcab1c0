//! The soak: one lock taken N times per algorithm, to see that its
//! thousandth and its hundred-thousandth acquisition cost the same.
//!
//! On Cassandra a deleted or expired cell stays a tombstone for the
//! table's `gc_grace_seconds`, and every read of the row passes the
//! tombstones in its slice (docs/design.md §1): a layout that named each
//! acquisition's cells afresh made a lock slower with every use and then
//! unreadable. Cells are now named by slots reused per process (§2a), so a
//! read passes at most one tombstone per slot. The soak checks both halves
//! of that on a real store:
//!
//! - **the waits stay flat**: the mean wait of the last tenth of the
//!   acquisitions against that of the first tenth (≤ 1.2×);
//! - **no read passes more than 1 000 tombstones** (Cassandra's
//!   `tombstone_warn_threshold`): from the counts the store gives — the
//!   local endpoint counts every read ([`EndpointReads`]); a cluster says
//!   a count only in its warning, so there a warning means "more than
//!   1 000" — and from the warnings themselves, which are counted.

use serde::{Deserialize, Serialize};

use crate::reads::{EndpointReads, ReadCosts};
use crate::stats::{Sample, WorkerReport, median_round_trip_micros, samples_in_order, wall_time_s};

/// The longest a last tenth's mean wait may be against the first tenth's.
pub const MAX_WAIT_RATIO: f64 = 1.2;

/// The most tombstones a read may pass: Cassandra's default
/// `tombstone_warn_threshold`, above which it warns.
pub const MAX_TOMBSTONES: u64 = lockshift_store::tombstones::DEFAULT_WARN_THRESHOLD;

/// Waits of one slice of the acquisitions, in acquisition order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Waits {
    /// Acquisitions in the slice.
    pub acquisitions: u64,
    /// Mean wait, ms.
    pub mean_ms: f64,
    /// 99th percentile wait (nearest rank), ms.
    pub p99_ms: f64,
}

/// What the reads of one table cost during a soak run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakTable {
    /// The table.
    pub table: String,
    /// Reads the workers made.
    pub reads: u64,
    /// The most tombstones one read passed, when known: the local
    /// endpoint's count of every read, or the count a warning named.
    pub max_tombstones: Option<u64>,
    /// Warnings the server added to read answers.
    pub warnings: u64,
    /// Of those, tombstone warnings (a read passed more than 1 000).
    pub tombstone_warnings: u64,
    /// Reads that failed for too many tombstones.
    pub failed_reads: u64,
}

/// What every read of a soak run cost in tombstones.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakTombstones {
    /// Whether every read was counted (the local endpoint started by the
    /// bench); otherwise (a cluster) a count is known only from a warning,
    /// and no warning means no read passed more than 1 000.
    pub every_read_counted: bool,
    /// The most tombstones any read passed, when known (see
    /// [`every_read_counted`](Self::every_read_counted)).
    pub max_tombstones: Option<u64>,
    /// Reads the workers made.
    pub reads: u64,
    /// Warnings the server added to read answers, of any kind.
    pub warnings: u64,
    /// Of those, tombstone warnings: each a read that passed more than
    /// 1 000.
    pub tombstone_warnings: u64,
    /// Reads that failed for too many tombstones (more than 100 000).
    pub failed_reads: u64,
    /// The first warning (or tombstone failure), verbatim.
    pub first_warning: Option<String>,
    /// Per table, in the order first read.
    pub tables: Vec<SoakTable>,
}

impl SoakTombstones {
    /// Whether some read passed more than [`MAX_TOMBSTONES`]: a count above
    /// it, a tombstone warning, or a read that failed for tombstones.
    pub fn over_threshold(&self) -> bool {
        self.tombstone_warnings > 0
            || self.failed_reads > 0
            || self.max_tombstones.is_some_and(|m| m > MAX_TOMBSTONES)
    }
}

/// The verdict of one soak run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakVerdict {
    /// Both parts hold, and every acquisition succeeded.
    pub passed: bool,
    /// The last tenth's mean wait ≤ [`MAX_WAIT_RATIO`] × the first's.
    pub waits_flat: bool,
    /// No read passed more than [`MAX_TOMBSTONES`] tombstones.
    pub tombstones_bounded: bool,
}

/// One algorithm's soak: N acquisitions of one lock by P processes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakStats {
    /// The algorithm.
    pub algorithm: String,
    /// Worker processes.
    pub processes: u32,
    /// Acquisitions made.
    pub acquisitions: u64,
    /// Failed acquisitions and releases.
    pub failures: u64,
    /// The first failures, verbatim (at most five).
    pub failure_samples: Vec<String>,
    /// Wall time of the run, s.
    pub duration_s: f64,
    /// Acquisitions per second over the run.
    pub acquisitions_per_sec: f64,
    /// The store round trip of a one-cell read, ms (median of the workers').
    pub round_trip_ms: f64,
    /// Mean wait over the whole run, ms.
    pub wait_mean_ms: f64,
    /// The first tenth of the acquisitions, in acquisition order.
    pub first_tenth: Waits,
    /// The last tenth.
    pub last_tenth: Waits,
    /// The last tenth's mean wait over the first tenth's.
    pub last_over_first: f64,
    /// The mean wait of each tenth in order, ms: the trend between.
    pub tenths_mean_ms: Vec<f64>,
    /// What the reads cost in tombstones.
    pub tombstones: SoakTombstones,
    /// Where the run stands.
    pub verdict: SoakVerdict,
}

/// Nearest-rank percentile of unsorted values.
fn p99(values: &[i64]) -> i64 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    if sorted.is_empty() {
        return 0;
    }
    let rank = (0.99 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn waits(samples: &[Sample]) -> Waits {
    let micros: Vec<i64> = samples.iter().map(Sample::wait_micros).collect();
    let mean = if micros.is_empty() {
        0.0
    } else {
        micros.iter().sum::<i64>() as f64 / micros.len() as f64
    };
    Waits {
        acquisitions: micros.len() as u64,
        mean_ms: mean / 1000.0,
        p99_ms: p99(&micros) as f64 / 1000.0,
    }
}

/// What the reads cost: the workers' view (answers, warnings, failures)
/// and, when the bench ran the local endpoint, the endpoint's count of
/// every read of each table (`endpoint` is `None` on a cluster).
pub fn tombstones(reads: &ReadCosts, endpoint: Option<&[EndpointReads]>) -> SoakTombstones {
    let mut tables: Vec<SoakTable> = reads
        .tables
        .iter()
        .map(|t| SoakTable {
            table: t.table.clone(),
            reads: t.reads,
            max_tombstones: t.max_counted,
            warnings: t.warnings,
            tombstone_warnings: t.tombstone_warnings,
            failed_reads: t.failed,
        })
        .collect();
    for e in endpoint.unwrap_or_default() {
        match tables.iter_mut().find(|t| t.table == e.table) {
            Some(t) => t.max_tombstones = t.max_tombstones.max(Some(e.max_tombstones)),
            // Read only by others (none in a soak), or only by reads the
            // workers did not see: still the endpoint's count.
            None => tables.push(SoakTable {
                table: e.table.clone(),
                max_tombstones: Some(e.max_tombstones),
                ..SoakTable::default()
            }),
        }
    }
    let sum = |f: fn(&SoakTable) -> u64| tables.iter().map(f).sum::<u64>();
    SoakTombstones {
        every_read_counted: endpoint.is_some(),
        max_tombstones: tables.iter().filter_map(|t| t.max_tombstones).max(),
        reads: sum(|t| t.reads),
        warnings: sum(|t| t.warnings),
        tombstone_warnings: sum(|t| t.tombstone_warnings),
        failed_reads: sum(|t| t.failed_reads),
        first_warning: reads.first_warning.clone(),
        tables,
    }
}

/// The statistics of one soak run from its workers' reports, and what the
/// local endpoint counted when the bench ran one.
pub fn soak_stats(
    algorithm: &str,
    processes: u32,
    reports: &[WorkerReport],
    endpoint: Option<&[EndpointReads]>,
) -> SoakStats {
    let samples = samples_in_order(reports);
    let n = samples.len();
    let tenth = (n / 10).max(1).min(n);
    let first_tenth = waits(&samples[..tenth]);
    let last_tenth = waits(&samples[n - tenth..]);
    let tenths_mean_ms = if n >= 10 {
        (0..10)
            .map(|i| waits(&samples[i * n / 10..(i + 1) * n / 10]).mean_ms)
            .collect()
    } else {
        Vec::new()
    };
    let all = waits(&samples);
    let duration_s = wall_time_s(&samples);
    let round_trip_ms = median_round_trip_micros(reports) as f64 / 1000.0;
    let mut reads = ReadCosts::default();
    for r in reports {
        reads.merge(&r.reads);
    }
    let tombstones = tombstones(&reads, endpoint);
    let failures: u64 = reports.iter().map(|r| r.failures.len() as u64).sum();
    let last_over_first = if first_tenth.mean_ms > 0.0 {
        last_tenth.mean_ms / first_tenth.mean_ms
    } else {
        0.0
    };
    let waits_flat = n > 0 && last_over_first <= MAX_WAIT_RATIO;
    let tombstones_bounded = !tombstones.over_threshold();
    SoakStats {
        algorithm: algorithm.to_string(),
        processes,
        acquisitions: n as u64,
        failures,
        failure_samples: reports
            .iter()
            .flat_map(|r| r.failures.iter().cloned())
            .take(5)
            .collect(),
        duration_s,
        acquisitions_per_sec: n as f64 / duration_s,
        round_trip_ms,
        wait_mean_ms: all.mean_ms,
        first_tenth,
        last_tenth,
        last_over_first,
        tenths_mean_ms,
        tombstones,
        verdict: SoakVerdict {
            passed: waits_flat && tombstones_bounded && failures == 0,
            waits_flat,
            tombstones_bounded,
        },
    }
}

#[cfg(test)]
mod tests {
    // Test code: a failed unwrap is a failed test.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::reads::TableReads;

    fn sample(index: u32, at: i64, wait: i64) -> Sample {
        Sample {
            worker: 0,
            index,
            requested_at: at,
            acquired_at: at + wait,
            release_started: at + wait + 10,
            released_at: at + wait + 20,
        }
    }

    fn report(waits: &[i64], reads: ReadCosts) -> WorkerReport {
        WorkerReport {
            worker: 0,
            samples: waits
                .iter()
                .enumerate()
                .map(|(i, w)| sample(i as u32, i as i64 * 10_000, *w))
                .collect(),
            round_trip_micros: 250,
            reads,
            ..WorkerReport::default()
        }
    }

    #[test]
    fn tenths_ratio_and_verdict() {
        // 100 acquisitions: the first ten wait 1 ms (one 2 ms), the last
        // ten 1.1 ms, the rest 1 ms.
        let mut waits = vec![1_000; 100];
        waits[3] = 2_000;
        for w in &mut waits[90..] {
            *w = 1_100;
        }
        let s = soak_stats("queue", 1, &[report(&waits, ReadCosts::default())], None);
        assert_eq!(s.acquisitions, 100);
        assert_eq!(s.first_tenth.acquisitions, 10);
        assert!((s.first_tenth.mean_ms - 1.1).abs() < 1e-9, "{s:?}");
        assert!((s.first_tenth.p99_ms - 2.0).abs() < 1e-9);
        assert!((s.last_tenth.mean_ms - 1.1).abs() < 1e-9);
        assert!((s.last_over_first - 1.0).abs() < 1e-9);
        assert_eq!(s.tenths_mean_ms.len(), 10);
        assert!((s.tenths_mean_ms[5] - 1.0).abs() < 1e-9);
        assert!((s.round_trip_ms - 0.25).abs() < 1e-9);
        assert!(s.verdict.passed, "{s:?}");
        assert!(!s.tombstones.every_read_counted);
        assert_eq!(
            s.tombstones.max_tombstones, None,
            "a cluster without warnings"
        );

        // The last tenth 1.5× slower: not flat.
        for w in &mut waits[90..] {
            *w = 1_650;
        }
        let s = soak_stats("queue", 1, &[report(&waits, ReadCosts::default())], None);
        assert!((s.last_over_first - 1.5).abs() < 1e-9);
        assert!(!s.verdict.waits_flat && !s.verdict.passed);
    }

    #[test]
    fn the_endpoint_count_and_warnings_make_the_maximum() {
        let reads = ReadCosts {
            tables: vec![
                TableReads {
                    table: "main".into(),
                    reads: 40,
                    ..TableReads::default()
                },
                TableReads {
                    table: "queue".into(),
                    reads: 20,
                    ..TableReads::default()
                },
            ],
            first_warning: None,
        };
        let endpoint = [
            EndpointReads {
                table: "main".into(),
                reads: 45,
                max_tombstones: 2,
                tombstones: 30,
            },
            EndpointReads {
                table: "global_time".into(),
                reads: 3,
                max_tombstones: 0,
                tombstones: 0,
            },
        ];
        let t = tombstones(&reads, Some(&endpoint));
        assert!(t.every_read_counted);
        assert_eq!(t.max_tombstones, Some(2));
        assert_eq!(t.reads, 60);
        assert_eq!(t.tables.len(), 3);
        assert_eq!(
            t.tables[1].max_tombstones, None,
            "queue: not in the endpoint's tally"
        );
        assert!(!t.over_threshold());

        // A cluster's warning: a count above 1 000, and the verdict fails.
        let warned = ReadCosts {
            tables: vec![TableReads {
                table: "queue".into(),
                reads: 10,
                counted: 1,
                max_counted: Some(1_500),
                warnings: 1,
                tombstone_warnings: 1,
                failed: 0,
                micros: 10_000,
            }],
            first_warning: Some("Read 1 live rows and 1500 tombstone cells …".into()),
        };
        let t = tombstones(&warned, None);
        assert_eq!((t.max_tombstones, t.warnings), (Some(1_500), 1));
        assert!(t.over_threshold());
        let s = soak_stats("queue", 1, &[report(&[1_000; 20], warned)], None);
        assert!(s.verdict.waits_flat && !s.verdict.tombstones_bounded && !s.verdict.passed);
    }

    #[test]
    fn fewer_than_ten_acquisitions_still_make_a_report() {
        let s = soak_stats(
            "legacy",
            1,
            &[report(&[500, 700], ReadCosts::default())],
            None,
        );
        assert_eq!(s.first_tenth.acquisitions, 1);
        assert!((s.last_over_first - 1.4).abs() < 1e-9);
        assert!(s.tenths_mean_ms.is_empty());
        let empty = soak_stats("legacy", 1, &[], None);
        assert_eq!(empty.acquisitions, 0);
        assert!(!empty.verdict.passed);
    }
}
