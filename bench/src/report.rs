//! The benchmark's report: every run's statistics, where the targets of
//! issue 7 stand, the machine — as a terminal table or JSON.

use std::fmt::Write as _;

use lockshift_lock::Algorithm;
use serde::Serialize;

use crate::run::{BenchConfig, find};
use crate::stats::RunStats;

/// The whole report (`--json` prints it; `version` changes with the schema).
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// Schema version.
    pub version: u32,
    /// What was measured.
    pub config: BenchConfig,
    /// Where.
    pub machine: Machine,
    /// The store measured against.
    pub store: String,
    /// Wall time of the whole benchmark, s.
    pub duration_s: f64,
    /// One entry per algorithm and process count.
    pub runs: Vec<RunStats>,
    /// Issue 7's targets.
    pub targets: Vec<TargetCheck>,
    /// PNG files written.
    pub plots: Vec<String>,
    /// Plots that could not be written, each naming its file and why. The
    /// measurements stand: a plot failing never discards them.
    pub plot_errors: Vec<String>,
}

/// The machine the benchmark ran on.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// Logical CPUs.
    pub cpus: usize,
    /// The CPU model, when the OS says.
    pub cpu_model: Option<String>,
    /// The OS.
    pub os: String,
}

impl Machine {
    /// This machine.
    pub fn this() -> Self {
        Machine {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model: std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|m| m.trim().to_string())
            }),
            os: std::env::consts::OS.to_string(),
        }
    }
}

/// One target of issue 7 and where the run stands against it.
#[derive(Clone, Debug, Serialize)]
pub struct TargetCheck {
    /// The target, in words.
    pub target: String,
    /// What was measured.
    pub measured: String,
    /// Whether it is met; `None` when the run did not measure it.
    pub met: Option<bool>,
}

fn check(target: &str, measured: Option<(String, bool)>) -> TargetCheck {
    match measured {
        Some((measured, met)) => TargetCheck {
            target: target.to_string(),
            measured,
            met: Some(met),
        },
        None => TargetCheck {
            target: target.to_string(),
            measured: "not measured (needs that algorithm at P = 5)".to_string(),
            met: None,
        },
    }
}

/// Where the runs stand against issue 7's targets (at P = 5).
pub fn check_targets(runs: &[RunStats]) -> Vec<TargetCheck> {
    let queue = find(runs, Algorithm::Queue, 5);
    let legacy = find(runs, Algorithm::Legacy, 5);
    let combined = find(runs, Algorithm::Combined, 5);
    vec![
        check(
            "queue, P=5: max wait ≤ 3 × mean (thesis: 5.7×)",
            queue.map(|q| {
                (
                    format!("max/mean = {:.2}", q.max_over_mean),
                    q.max_over_mean <= 3.0,
                )
            }),
        ),
        check(
            "queue, P=5: longest same-process run 1–2",
            queue.map(|q| {
                (
                    format!("longest run = {}", q.longest_run),
                    q.longest_run <= 2,
                )
            }),
        ),
        check(
            "legacy, P=5: starves (max ≫ mean)",
            legacy.map(|l| {
                (
                    format!("max/mean = {:.1}", l.max_over_mean),
                    l.max_over_mean >= 5.0,
                )
            }),
        ),
        check(
            "queue, P=5: ≤ 12 store operations per acquisition",
            queue.map(|q| {
                (
                    format!("{:.1} ops/acq", q.ops_per_acquisition),
                    q.ops_per_acquisition <= 12.0,
                )
            }),
        ),
        check(
            "queue: median hand-off ≤ 4 store round trips",
            queue
                .and_then(|q| q.handoff_median_round_trips)
                .map(|h| (format!("{h:.1} round trips"), h <= 4.0)),
        ),
        check(
            "combined mean wait ≤ 1.5 × queue's (P=5)",
            combined.zip(queue).map(|(c, q)| {
                let ratio = if q.wait_mean_ms > 0.0 {
                    c.wait_mean_ms / q.wait_mean_ms
                } else {
                    0.0
                };
                (format!("{ratio:.2}×"), ratio <= 1.5)
            }),
        ),
    ]
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"))
}

/// The report as a terminal table.
pub fn render(report: &BenchReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "lockshift bench — K = {} acquisitions per process, hold {}, {}; {} CPUs{}",
        report.config.acquisitions,
        lockshift_lock::fmt_duration(report.config.hold),
        report.store,
        report.machine.cpus,
        report
            .machine
            .cpu_model
            .as_ref()
            .map_or(String::new(), |m| format!(" ({m})"))
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<9} {:>2} {:>5} {:>9} {:>8} {:>8} {:>9} {:>7} {:>8} {:>8} {:>9} {:>8} {:>5} {:>11}",
        "algorithm",
        "P",
        "acq",
        "mean ms",
        "p50 ms",
        "p99 ms",
        "max ms",
        "max/mn",
        "acq/s",
        "ops/acq",
        "r/w",
        "handoff",
        "run",
        "jain mean/min"
    );
    for r in &report.runs {
        let _ = writeln!(
            out,
            "{:<9} {:>2} {:>5} {:>9.1} {:>8.1} {:>8.1} {:>9.1} {:>7.1} {:>8.1} {:>8.1} {:>4.1}/{:<4.1} {:>8} {:>5} {:>5.2}/{:<5.2}",
            r.algorithm,
            r.processes,
            r.acquisitions,
            r.wait_mean_ms,
            r.wait_p50_ms,
            r.wait_p99_ms,
            r.wait_max_ms,
            r.max_over_mean,
            r.acquisitions_per_sec,
            r.ops_per_acquisition,
            r.reads_per_acquisition,
            r.writes_per_acquisition,
            opt(r.handoff_median_round_trips),
            r.longest_run,
            r.jain_mean,
            r.jain_min
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "hand-off: median release → next acquisition, in store round trips (measured {:.2} ms)",
        report.runs.first().map_or(0.0, |r| r.round_trip_ms)
    );
    let _ = writeln!(
        out,
        "run: longest run of consecutive acquisitions by one process; jain: Jain's index over windows of 10·P acquisitions"
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "targets (issue 7):");
    for t in &report.targets {
        let mark = match t.met {
            Some(true) => "met    ",
            Some(false) => "NOT MET",
            None => "n/a    ",
        };
        let _ = writeln!(out, "  [{mark}] {:<50} {}", t.target, t.measured);
    }
    let failures: u64 = report.runs.iter().map(|r| r.failures).sum();
    if failures > 0 {
        let _ = writeln!(out, "\nwarning: {failures} acquisitions failed");
    }
    for p in &report.plots {
        let _ = writeln!(out, "plot: {p}");
    }
    for e in &report.plot_errors {
        let _ = writeln!(out, "plot NOT written: {e}");
    }
    let _ = writeln!(out, "took {:.1}s", report.duration_s);
    out
}
