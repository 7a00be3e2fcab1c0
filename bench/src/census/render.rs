//! The census benchmark's report as a table.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::{CensusBenchReport, CensusRun};

/// The report as a table: a line per size and target, then each run's
/// requests by table and datacenter (the census's beside the raw scan's).
pub fn render_census(report: &CensusBenchReport) -> String {
    let mut s = String::from(
        "census of N held locks against a raw paged scan of main, shadow and queue, same \
         store, same run, on each target\n\n",
    );
    let width = report
        .runs
        .iter()
        .map(|r| r.target.chars().count())
        .max()
        .unwrap_or(0)
        .max("target".len());
    let _ = writeln!(
        s,
        "{:>9}  {:<width$} {:>9} {:>8} {:>9} {:>11} {:>9} {:>11} {:>9} {:>10} {:>9}",
        "locks",
        "target",
        "counted",
        "plant s",
        "census s",
        "rows/s",
        "raw s",
        "raw rows/s",
        "cens/raw",
        "peak MiB",
        "start MiB"
    );
    let mib = |m: Option<f64>| m.map_or_else(|| "-".to_string(), |m| format!("{m:.0}"));
    for r in &report.runs {
        let ratio = if r.raw_scan_s > 0.0 {
            format!("{:.2}", r.census_s / r.raw_scan_s)
        } else {
            "-".to_string()
        };
        let _ = writeln!(
            s,
            "{:>9}  {:<width$} {:>9} {:>8.1} {:>9.2} {:>11.0} {:>9.2} {:>11.0} {:>9} {:>10} {:>9}",
            r.locks,
            r.target,
            r.counted,
            r.plant_s,
            r.census_s,
            r.census_rows_per_s,
            r.raw_scan_s,
            r.raw_rows_per_s,
            ratio,
            mib(r.peak_rss_mib),
            mib(r.rss_before_mib),
        );
    }
    s.push_str("\nrequests (census | raw scan):\n");
    for r in &report.runs {
        requests(&mut s, r);
    }
    s.push_str(
        "\ncensus: as `migrate status` takes it (stage, registry, activity, the taker's clock, \
         then one paged scan per table, ranges read a few at once, folded as it goes); raw: one \
         paged scan of cells per table with writetime and TTL, rows counted, nothing folded. \
         rows/s counts rows of all three tables. plant: planting the N locks, not timed in \
         the rest. peak: resident memory at its highest during \
         the census (VmHWM); start: when it began (the embedded store's and the local \
         endpoint's cells are in this process, so both include them; the cluster's runs are \
         taken first, before any cells were planted here, and the memory freed after a run \
         is not always given back).\n",
    );
    if report.runs.iter().any(|r| !r.peak_reset) {
        s.push_str(
            "the peak could not be reset before the census (/proc/self/clear_refs): it is the \
             process's peak so far, planting included.\n",
        );
    }
    s
}

/// One run's requests: the total, by table, by datacenter.
fn requests(s: &mut String, r: &CensusRun) {
    let line = |what: &str, census: &BTreeMap<String, u64>, raw: &BTreeMap<String, u64>| {
        let keys: BTreeSet<&String> = census.keys().chain(raw.keys()).collect();
        let parts: Vec<String> = keys
            .into_iter()
            .map(|k| {
                let get = |m: &BTreeMap<String, u64>| m.get(k).copied().unwrap_or(0);
                format!("{k} {} | {}", get(census), get(raw))
            })
            .collect();
        format!("{:>11}by {what:<10} {}\n", "", parts.join(", "))
    };
    let _ = writeln!(s, "  {:>9}  {}", r.locks, r.target);
    let _ = writeln!(
        s,
        "{:>11}total         {} | {}",
        "", r.census_requests.total, r.raw_requests.total
    );
    s.push_str(&line(
        "table",
        &r.census_requests.by_table,
        &r.raw_requests.by_table,
    ));
    s.push_str(&line(
        "datacenter",
        &r.census_requests.by_datacenter,
        &r.raw_requests.by_datacenter,
    ));
}
