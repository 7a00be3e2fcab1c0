//! The benchmark's reports: every run's statistics, where each target of
//! the benchmark stands (met / not met), the machine — as a terminal table
//! or JSON. The hold mode and the soak have their own reports
//! ([`HoldBenchReport`], [`SoakReport`]).
//!
//! Each report is in its own file and re-exported here, so its path is
//! `lockshift_bench::report::…` whatever the file: the runs' report
//! ([`BenchReport`], [`check_targets`], [`render`]) in this module, the hold
//! mode's ([`HoldBenchReport`], [`check_hold_targets`], [`render_hold`]) in
//! `report/hold.rs`, the soak's ([`SoakReport`], [`render_soak`]) in
//! `report/soak.rs`.

mod hold;
mod soak;

use std::fmt::Write as _;

use std::time::Duration;

use serde::Serialize;

use crate::algorithm::BenchAlgorithm;
use crate::run::{BenchConfig, find};
use crate::stats::RunStats;

pub use hold::{HoldBenchReport, check_hold_targets, render_hold};
pub use soak::{SoakReport, render_soak};

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
    /// Every target and where the runs stand.
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

/// `2 CPUs (model)`: what a report's first line says of the machine.
impl std::fmt::Display for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} CPUs", self.cpus)?;
        match &self.cpu_model {
            Some(model) => write!(f, " ({model})"),
            None => Ok(()),
        }
    }
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

/// One target of the benchmark and where the run stands against it.
#[derive(Clone, Debug, Serialize)]
pub struct TargetCheck {
    /// The target, in words.
    pub target: String,
    /// What was measured.
    pub measured: String,
    /// Whether it is met; `None` when the run did not measure it.
    pub met: Option<bool>,
}

fn check(target: &str, needs: &str, measured: Option<(String, bool)>) -> TargetCheck {
    match measured {
        Some((measured, met)) => TargetCheck {
            target: target.to_string(),
            measured,
            met: Some(met),
        },
        None => TargetCheck {
            target: target.to_string(),
            measured: format!("not measured (needs {needs})"),
            met: None,
        },
    }
}

/// What a read took during a run beside its idle round trip:
/// " (a read during the run: 0.71 ms = 1.5 RT)", or nothing without reads.
fn read_during_run(r: &RunStats) -> String {
    match r.read_during_run_ms {
        Some(ms) if r.round_trip_ms > 0.0 => format!(
            " (a read during the run: {ms:.2} ms = {:.1} RT)",
            ms / r.round_trip_ms
        ),
        _ => String::new(),
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { f64::INFINITY }
}

/// Where the runs stand against the benchmark's targets (P = 5 unless a
/// target says otherwise; "uncontended" is P = 1).
pub fn check_targets(runs: &[RunStats], hold: Duration) -> Vec<TargetCheck> {
    use BenchAlgorithm::{Combined, Legacy, Lwt, Queue};
    let queue = find(runs, Queue, 5);
    let combined = find(runs, Combined, 5);
    let lwt = find(runs, Lwt, 5);
    let queue1 = find(runs, Queue, 1);
    let combined1 = find(runs, Combined, 1);
    let lwt1 = find(runs, Lwt, 1);
    // Queue against legacy at every P both were measured at.
    let pairs: Vec<(u32, f64, f64)> = runs
        .iter()
        .filter(|r| r.algorithm == Queue.as_str())
        .filter_map(|q| {
            find(runs, Legacy, q.processes).map(|l| (q.processes, q.wait_mean_ms, l.wait_mean_ms))
        })
        .collect();
    let mut checks = vec![
        check(
            "queue median hand-off ≤ 2.5 RT (limit ≈ 2: the release lands, one read sees it)",
            "queue at P = 5",
            queue.and_then(|q| {
                q.handoff_median_round_trips
                    .map(|h| (format!("{h:.2} RT{}", read_during_run(q)), h <= 2.5))
            }),
        ),
        check(
            "queue uncontended acquisition ≤ 2.2 RT",
            "queue at P = 1",
            queue1
                .and_then(|q| q.wait_mean_round_trips)
                .map(|w| (format!("{w:.2} RT"), w <= 2.2)),
        ),
        check(
            "combined uncontended acquisition ≤ 5 RT",
            "combined at P = 1",
            combined1
                .and_then(|c| c.wait_mean_round_trips)
                .map(|w| (format!("{w:.2} RT"), w <= 5.0)),
        ),
        check(
            "queue mean wait ≤ legacy mean wait at every P",
            "queue and legacy at the same P",
            (!pairs.is_empty()).then(|| {
                let text = pairs
                    .iter()
                    .map(|(p, q, l)| format!("P={p}: {q:.1} vs {l:.1} ms"))
                    .collect::<Vec<_>>()
                    .join(", ");
                (text, pairs.iter().all(|(_, q, l)| q <= l))
            }),
        ),
    ];
    checks.extend(queue_at_five(queue, hold));
    checks.extend(against_the_others(queue, combined, queue1, lwt1, lwt));
    checks
}

/// The queue lock's own targets at P = 5.
fn queue_at_five(queue: Option<&RunStats>, hold: Duration) -> Vec<TargetCheck> {
    vec![
        at_five(
            "queue throughput on one lock ≥ 1 / (hold + 3 RT)",
            queue,
            |q| {
                let floor = 1.0 / (hold.as_secs_f64() + 3.0 * q.round_trip_ms / 1000.0);
                (
                    format!(
                        "{:.1} acq/s (floor {floor:.1}); {} per acquisition{}",
                        q.acquisitions_per_sec,
                        q.cycle_round_trips
                            .map_or("-".to_string(), |c| format!("{c:.1} RT")),
                        read_during_run(q)
                    ),
                    q.acquisitions_per_sec >= floor,
                )
            },
        ),
        at_five("queue max wait ≤ 2 × mean wait", queue, |q| {
            let r = q.max_over_mean;
            (format!("max/mean = {r:.2}"), r <= 2.0)
        }),
        at_five(
            "queue ≤ 12 store operations per acquisition",
            queue,
            |q| {
                let ops = q.ops_per_acquisition;
                (format!("{ops:.1} ops/acq"), ops <= 12.0)
            },
        ),
        at_five(
            "queue longest same-process run ≤ 2 (the queue takes turns)",
            queue,
            |q| (format!("longest run {}", q.longest_run), q.longest_run <= 2),
        ),
    ]
}

/// A target of the queue lock, measured on its run at P = 5 when there
/// was one (else "not measured").
fn at_five(
    target: &str,
    queue: Option<&RunStats>,
    measure: impl FnOnce(&RunStats) -> (String, bool),
) -> TargetCheck {
    check(target, "queue at P = 5", queue.map(measure))
}

/// The queue lock beside the combined lock and the LWT lease.
fn against_the_others(
    queue: Option<&RunStats>,
    combined: Option<&RunStats>,
    queue1: Option<&RunStats>,
    lwt1: Option<&RunStats>,
    lwt: Option<&RunStats>,
) -> Vec<TargetCheck> {
    vec![
        check(
            "combined mean wait ≤ 1.3 × queue's",
            "combined and queue at P = 5",
            combined.zip(queue).map(|(c, q)| {
                let r = ratio(c.wait_mean_ms, q.wait_mean_ms);
                (
                    format!(
                        "{r:.2}× ({:.1} vs {:.1} ms)",
                        c.wait_mean_ms, q.wait_mean_ms
                    ),
                    r <= 1.3,
                )
            }),
        ),
        check(
            "queue uncontended acquisition ≤ lwt's",
            "queue and lwt at P = 1",
            queue1.zip(lwt1).map(|(q, l)| {
                (
                    format!("{:.2} vs {:.2} ms", q.wait_mean_ms, l.wait_mean_ms),
                    q.wait_mean_ms <= l.wait_mean_ms,
                )
            }),
        ),
        check(
            "queue max wait under contention ≤ 1/3 of lwt's",
            "queue and lwt at P = 5",
            queue.zip(lwt).map(|(q, l)| {
                let r = ratio(q.wait_max_ms, l.wait_max_ms);
                (
                    format!("{:.1} vs {:.1} ms ({r:.2}×)", q.wait_max_ms, l.wait_max_ms),
                    r <= 1.0 / 3.0,
                )
            }),
        ),
    ]
}

fn mark(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met    ",
        Some(false) => "NOT MET",
        None => "n/a    ",
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"))
}

/// The report as a terminal table.
pub fn render(report: &BenchReport) -> String {
    report_text(
        format_args!(
            "lockshift bench — K = {} acquisitions per process, hold {}, {}",
            report.config.acquisitions,
            lockshift_decide::duration::fmt_duration(report.config.hold),
            report.store,
        ),
        &report.machine,
        report.duration_s,
        |out| runs_and_targets(out, report),
    )
}

/// The table of runs, what its columns mean, where each target stands, and
/// what failed or was not drawn.
fn runs_and_targets(out: &mut String, report: &BenchReport) {
    runs_table(out, report);
    legend(out, report);
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "targets (P = 5, hold {}; uncontended: P = 1):",
        lockshift_decide::duration::fmt_duration(report.config.hold)
    );
    write_targets(out, &report.targets);
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
}

/// Each target, one line: whether it is met, the target, what was measured.
fn write_targets(out: &mut String, targets: &[TargetCheck]) {
    for t in targets {
        let _ = writeln!(out, "  [{}] {:<78} {}", mark(t.met), t.target, t.measured);
    }
}

/// A report as text: its first line (`title`, what ran and on which
/// store, then the machine), what `body` writes, and the wall time last.
/// The runs', the hold mode's and the soak's reports all begin and end so.
fn report_text(
    title: std::fmt::Arguments<'_>,
    machine: &Machine,
    duration_s: f64,
    body: impl FnOnce(&mut String),
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{title}; {machine}");
    body(&mut out);
    let _ = writeln!(out, "took {duration_s:.1}s");
    out
}

/// The table of runs, one line each.
fn runs_table(out: &mut String, report: &BenchReport) {
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<9} {:>2} {:>5} {:>8} {:>7} {:>7} {:>8} {:>8} {:>6} {:>7} {:>7} {:>8} {:>9} {:>7} {:>3} {:>11}",
        "algorithm",
        "P",
        "acq",
        "mean ms",
        "mean RT",
        "p50 ms",
        "p99 ms",
        "max ms",
        "max/mn",
        "acq/s",
        "RT/acq",
        "ops/acq",
        "r/w",
        "handoff",
        "run",
        "jain mean/min"
    );
    for r in &report.runs {
        let _ = writeln!(
            out,
            "{:<9} {:>2} {:>5} {:>8.1} {:>7} {:>7.1} {:>8.1} {:>8.1} {:>6.1} {:>7.1} {:>7} {:>8.1} {:>4.1}/{:<4.1} {:>7} {:>3} {:>5.2}/{:<5.2}",
            r.algorithm,
            r.processes,
            r.acquisitions,
            r.wait_mean_ms,
            opt(r.wait_mean_round_trips),
            r.wait_p50_ms,
            r.wait_p99_ms,
            r.wait_max_ms,
            r.max_over_mean,
            r.acquisitions_per_sec,
            opt(r.cycle_round_trips),
            r.ops_per_acquisition,
            r.reads_per_acquisition,
            r.writes_per_acquisition,
            opt(r.handoff_median_round_trips),
            r.longest_run,
            r.jain_mean,
            r.jain_min
        );
    }
}

/// What the columns mean, and what the runs' own load did to a read.
fn legend(out: &mut String, report: &BenchReport) {
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "RT: the store round trip of a one-cell read (measured {:.2} ms). mean RT: mean wait in RT (P = 1: the uncontended acquisition); RT/acq: 1 / throughput in RT, the hold included; handoff: median release → next acquisition, in RT",
        report.runs.first().map_or(0.0, |r| r.round_trip_ms)
    );
    let _ = writeln!(
        out,
        "run: longest run of consecutive acquisitions by one process; jain: Jain's index over windows of 10·P acquisitions; lwt: each operation is a conditional statement (a Paxos round on a cluster)"
    );
    let during: Vec<String> = report
        .runs
        .iter()
        .filter_map(|r| {
            let ms = r.read_during_run_ms?;
            (r.round_trip_ms > 0.0).then(|| {
                format!(
                    "{} P={} {:.1}",
                    r.algorithm,
                    r.processes,
                    ms / r.round_trip_ms
                )
            })
        })
        .collect();
    if !during.is_empty() {
        let _ = writeln!(
            out,
            "a read during the run, in RT (the run's own load on the machine and the store): {}",
            during.join(", ")
        );
    }
    let unknown: u64 = report.runs.iter().map(|r| r.unknown_outcomes).sum();
    if unknown > 0 {
        let _ = writeln!(
            out,
            "lwt: {unknown} conditional statements ended with an unknown outcome (timeouts) and were resolved by retrying"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::Machine;

    #[test]
    fn a_machine_is_drawn_with_its_model_when_known() {
        let mut machine = Machine {
            cpus: 2,
            cpu_model: Some("AMD EPYC".into()),
            os: "linux".into(),
        };
        assert_eq!(machine.to_string(), "2 CPUs (AMD EPYC)");
        machine.cpu_model = None;
        assert_eq!(machine.to_string(), "2 CPUs");
    }
}
