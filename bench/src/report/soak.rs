//! The soak's report: one entry per algorithm and process count, each
//! with its verdict, as a terminal table or JSON.

use std::fmt::Write as _;

use std::time::Duration;

use serde::Serialize;

use crate::report::{Machine, report_text};
use crate::soak::{MAX_TOMBSTONES, MAX_WAIT_RATIO, SoakStats, SoakTombstones};

/// The soak's report (`--json` prints it): one entry per algorithm and
/// process count, each with its verdict.
#[derive(Clone, Debug, Serialize)]
pub struct SoakReport {
    /// Schema version.
    pub version: u32,
    /// N: acquisitions of one lock per run, split between its processes.
    pub soak: u32,
    /// How long each acquisition held the lock.
    #[serde(with = "humantime_serde")]
    pub hold: Duration,
    /// Where.
    pub machine: Machine,
    /// The machine's load averages (1, 5, 15 min) when the soak started,
    /// where the OS says.
    pub load_average_start: Option<[f64; 3]>,
    /// The same when it ended.
    pub load_average_end: Option<[f64; 3]>,
    /// The store measured against.
    pub store: String,
    /// Wall time, s.
    pub duration_s: f64,
    /// Every run's verdict passed.
    pub passed: bool,
    /// One entry per algorithm and process count.
    pub runs: Vec<SoakStats>,
}

fn load(l: Option<[f64; 3]>) -> String {
    l.map_or("-".to_string(), |[a, b, c]| format!("{a:.2} {b:.2} {c:.2}"))
}

/// The most tombstones one read passed, as far as the run knows.
fn most_tombstones(t: &SoakTombstones) -> String {
    match t.max_tombstones {
        Some(n) => n.to_string(),
        // A cluster says a count only in its warning, above 1 000.
        None if t.tombstone_warnings == 0 && t.failed_reads == 0 => {
            format!("≤ {MAX_TOMBSTONES}")
        }
        None => format!("> {MAX_TOMBSTONES}"),
    }
}

/// The soak's report as a terminal table.
pub fn render_soak(report: &SoakReport) -> String {
    report_text(
        format_args!(
            "lockshift bench, soak — one lock taken N = {} times per algorithm and P, hold {}; {}",
            report.soak,
            lockshift_decide::duration::fmt_duration(report.hold),
            report.store,
        ),
        &report.machine,
        report.duration_s,
        |out| {
            let _ = writeln!(
                out,
                "load average (1/5/15 min): {} at the start, {} at the end",
                load(report.load_average_start),
                load(report.load_average_end)
            );
            soak_table(out, report);
            soak_details(out, report);
            soak_verdicts(out, report);
        },
    )
}

/// The table of runs, one line each, and what its columns mean.
fn soak_table(out: &mut String, report: &SoakReport) {
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<9} {:>2} {:>8} {:>7} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>8} {:>8} {:>6}",
        "algorithm",
        "P",
        "acq",
        "acq/s",
        "RT ms",
        "mean ms",
        "1st mean",
        "1st p99",
        "last mean",
        "last p99",
        "last/first",
        "max tomb",
        "warnings",
        "failed"
    );
    for r in &report.runs {
        let _ = writeln!(
            out,
            "{:<9} {:>2} {:>8} {:>7.1} {:>6.2} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>8.2} {:>10.2} {:>8} {:>8} {:>6}",
            r.algorithm,
            r.processes,
            r.acquisitions,
            r.acquisitions_per_sec,
            r.round_trip_ms,
            r.wait_mean_ms,
            r.first_tenth.mean_ms,
            r.first_tenth.p99_ms,
            r.last_tenth.mean_ms,
            r.last_tenth.p99_ms,
            r.last_over_first,
            most_tombstones(&r.tombstones),
            r.tombstones.warnings,
            r.failures
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "1st / last: the first and the last tenth of the acquisitions, in acquisition order (waits in ms); max tomb: the most tombstones one read passed — counted for every read on the local endpoint, on a cluster known only from its warnings (\"≤ 1000\": none warned); warnings: warnings the database added to read answers"
    );
}

/// Each run's waits by tenth, its tombstones by table, its failures.
fn soak_details(out: &mut String, report: &SoakReport) {
    let _ = writeln!(out);
    for r in &report.runs {
        let tenths = r
            .tenths_mean_ms
            .iter()
            .map(|m| format!("{m:.2}"))
            .collect::<Vec<_>>()
            .join(" ");
        let _ = writeln!(
            out,
            "{} P={}: mean wait per tenth (ms): {tenths}",
            r.algorithm, r.processes
        );
        let tables = r
            .tombstones
            .tables
            .iter()
            .map(|t| {
                let most = t.max_tombstones.map_or_else(
                    || {
                        if t.tombstone_warnings == 0 && t.failed_reads == 0 {
                            format!("≤ {MAX_TOMBSTONES}")
                        } else {
                            format!("> {MAX_TOMBSTONES}")
                        }
                    },
                    |m| m.to_string(),
                );
                let mut text = format!("{} {} reads, most {most}", t.table, t.reads);
                if t.warnings > 0 {
                    let _ = write!(text, ", {} warnings", t.warnings);
                }
                if t.failed_reads > 0 {
                    let _ = write!(text, ", {} failed", t.failed_reads);
                }
                text
            })
            .collect::<Vec<_>>()
            .join("; ");
        let _ = writeln!(
            out,
            "{} P={}: tombstones per read, by table: {tables}",
            r.algorithm, r.processes
        );
        if let Some(w) = &r.tombstones.first_warning {
            let _ = writeln!(out, "{} P={}: first warning: {w}", r.algorithm, r.processes);
        }
        for f in &r.failure_samples {
            let _ = writeln!(out, "{} P={}: failed: {f}", r.algorithm, r.processes);
        }
    }
}

/// Each run's verdict: waits flat, tombstones bounded, nothing failed.
fn soak_verdicts(out: &mut String, report: &SoakReport) {
    let _ = writeln!(out);
    for r in &report.runs {
        let v = &r.verdict;
        let waits = format!(
            "last tenth {:.2} ms {} {MAX_WAIT_RATIO} × first tenth {:.2} ms ({:.2}×)",
            r.last_tenth.mean_ms,
            if v.waits_flat { "≤" } else { ">" },
            r.first_tenth.mean_ms,
            r.last_over_first
        );
        let t = &r.tombstones;
        let tombstones = if v.tombstones_bounded {
            format!(
                "no read above {MAX_TOMBSTONES} tombstones (most: {}; {} warnings)",
                most_tombstones(t),
                t.warnings
            )
        } else {
            format!(
                "reads above {MAX_TOMBSTONES} tombstones: most {}, {} tombstone warnings, {} reads failed",
                most_tombstones(t),
                t.tombstone_warnings,
                t.failed_reads
            )
        };
        let failures = if r.failures > 0 {
            format!("; {} acquisitions or releases failed", r.failures)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "verdict {:<8} P={}: {} — {waits}; {tombstones}{failures}",
            r.algorithm,
            r.processes,
            if v.passed { "PASS" } else { "FAIL" }
        );
    }
}
