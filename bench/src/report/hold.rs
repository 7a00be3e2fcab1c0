//! The hold mode's report: renewal costs per held lock, as a terminal
//! table or JSON.

use std::fmt::Write as _;

use std::time::Duration;

use serde::Serialize;

use crate::algorithm::BenchAlgorithm;
use crate::hold::HoldStats;
use crate::report::{Machine, TargetCheck, report_text, write_targets};

/// The hold mode's report (`--json` prints it).
#[derive(Clone, Debug, Serialize)]
pub struct HoldBenchReport {
    /// Schema version.
    pub version: u32,
    /// The lease renew period, s.
    pub renew_every_s: f64,
    /// Renew periods each run held its locks.
    pub periods: u32,
    /// Where.
    pub machine: Machine,
    /// The store measured against.
    pub store: String,
    /// Wall time, s.
    pub duration_s: f64,
    /// One entry per algorithm and N.
    pub runs: Vec<HoldStats>,
    /// Where the renewal target stands.
    pub targets: Vec<TargetCheck>,
}

/// The hold mode's target, for each lockshift algorithm at its largest N:
/// renewal costs ≤ 2 store operations per held lock per renew period.
pub fn check_hold_targets(runs: &[HoldStats]) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    for algorithm in BenchAlgorithm::ALL {
        if algorithm.lock().is_none() {
            continue;
        }
        let largest = runs
            .iter()
            .filter(|r| r.algorithm == algorithm.as_str())
            .max_by_key(|r| r.locks);
        let Some(r) = largest else { continue };
        out.push(TargetCheck {
            target: format!(
                "{algorithm}: renewal ≤ 2 store operations per held lock per renew period (N = {})",
                r.locks
            ),
            measured: format!("{:.2} ops", r.ops_per_lock_per_period),
            met: Some(r.held == r.locks && r.failures == 0 && r.ops_per_lock_per_period <= 2.0),
        });
    }
    out
}

/// The hold mode's report as a terminal table.
pub fn render_hold(report: &HoldBenchReport) -> String {
    report_text(
        format_args!(
            "lockshift bench, hold mode — one node holds N locks for {} renew periods of {}; {}",
            report.periods,
            lockshift_decide::duration::fmt_duration(Duration::from_secs_f64(report.renew_every_s)),
            report.store,
        ),
        &report.machine,
        report.duration_s,
        |out| hold_table(out, report),
    )
}

/// The table of runs, what its columns mean, and the targets.
fn hold_table(out: &mut String, report: &HoldBenchReport) {
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<9} {:>6} {:>6} {:>9} {:>15} {:>12} {:>10} {:>7} {:>16}",
        "algorithm",
        "N",
        "held",
        "acquire s",
        "ops/lock/period",
        "other/period",
        "bytes/lock",
        "CPU %",
        "CPU µs/lock/period"
    );
    for r in &report.runs {
        let _ = writeln!(
            out,
            "{:<9} {:>6} {:>6} {:>9.2} {:>15.2} {:>12.1} {:>10} {:>7} {:>16}",
            r.algorithm,
            r.locks,
            r.held,
            r.acquire_s,
            r.ops_per_lock_per_period,
            r.other_ops_per_period,
            r.bytes_per_lock
                .map_or("-".to_string(), |b| format!("{b:.0}")),
            r.cpu_percent.map_or("-".to_string(), |c| format!("{c:.1}")),
            r.cpu_micros_per_lock_per_period
                .map_or("-".to_string(), |c| format!("{c:.1}")),
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "ops/lock/period: store operations on the lock tables per held lock per renew period (lwt: conditional statements, each a Paxos round on a cluster); other/period: time service and node registry, per renew period, not per lock; bytes/lock: resident-set growth per held lock"
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "targets:");
    write_targets(out, &report.targets);
    let failures: u64 = report.runs.iter().map(|r| r.failures).sum();
    if failures > 0 {
        let _ = writeln!(out, "\nwarning: {failures} acquisitions or releases failed");
    }
}
