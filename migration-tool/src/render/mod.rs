//! Drawing reports: an aligned plain-text table for people, or the report
//! struct itself as JSON for scripts (invariant 3 of `lib.rs`:
//! `"version": 1` at the top). Both come from the same struct, so they
//! cannot disagree.
//!
//! Results go to stdout; progress and notes to stderr, progress only when
//! stderr is a terminal (a redirected log should not fill with `\r` lines).

//!
//! This module holds the printing and the shared pieces ([`Table`], [`age`],
//! [`when`], the progress line); each command's text lives beside its
//! kind:
//!
//! - `status`: `migrate status`;
//! - `inspect`: `migrate inspect` and `migrate schema`;
//! - `clean`: `migrate clean`;
//! - `transition`: `migrate advance` and `migrate rollback`;
//! - `lock`: `migrate lock` and `migrate run-with-lock`;
//! - `node_clocks`: the Cassandra nodes' clocks, for `migrate status`;
//! - `demo`: `migrate demo`'s live output ([`demo_observer`]) and verdict.
//!
//! `migrate bench` draws with the benchmark crate's own renderer.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use lockshift_bench as bench;
use serde::Serialize;

use crate::ops::Progress;
use crate::ops::serve::Listening;

mod clean;
mod demo;
pub(crate) mod home;
mod inspect;
mod lock;
mod node_clocks;
mod status;
mod transition;

/// `migrate demo`'s observer, drawn in `demo`.
pub use demo::demo_observer;

/// A report that can be drawn for people.
pub trait Human {
    /// The report as text (ending with a newline).
    fn human(&self) -> String;
}

/// `Human` for each benchmark report, drawn by the benchmark crate's own
/// renderer for it.
macro_rules! drawn_by {
    ($($report:ty => $render:path),* $(,)?) => {
        $(impl Human for $report {
            fn human(&self) -> String {
                $render(self)
            }
        })*
    };
}

drawn_by! {
    bench::BenchReport => bench::render,
    bench::SoakReport => bench::render_soak,
    bench::HoldBenchReport => bench::render_hold,
    bench::datacenters::DatacenterBenchReport => bench::datacenters::render_datacenters,
    bench::fenced::FencedBenchReport => bench::fenced::render_fenced,
    bench::observe::ObserveBenchReport => bench::observe::render_observe,
    bench::sharing::SharingBenchReport => bench::sharing::render_sharing,
    bench::idle::IdleBenchReport => bench::idle::render_idle,
    bench::census::CensusBenchReport => bench::census::render_census,
}

/// Prints `report` on stdout, as JSON or as text.
///
/// # Errors
/// Writing to stdout failed (e.g. a closed pipe), or serialisation failed.
pub fn print<R: Serialize + Human>(report: &R, json: bool) -> anyhow::Result<()> {
    let text = if json {
        serde_json::to_string_pretty(report)? + "\n"
    } else {
        report.human()
    };
    write_out(&text)
}

/// Prints `report` on stdout as one line — compact JSON, or its text (one
/// line) — and flushes: a line a script reads while `migrate` goes on
/// running (`lock`), where a pretty-printed object would not be one line.
///
/// # Errors
/// Writing to stdout failed (e.g. a closed pipe), or serialisation failed.
pub fn print_line<R: Serialize + Human>(report: &R, json: bool) -> anyhow::Result<()> {
    let text = if json {
        serde_json::to_string(report)? + "\n"
    } else {
        report.human()
    };
    write_out(&text)
}

/// Writes `text` to stdout and flushes it.
fn write_out(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Prints `report`'s text on stderr (for `run-with-lock`, whose stdout is
/// the command's).
///
/// # Errors
/// Writing failed.
pub fn print_stderr<R: Human>(report: &R) -> anyhow::Result<()> {
    let text = report.human();
    if !text.is_empty() {
        std::io::stderr().lock().write_all(text.as_bytes())?;
    }
    Ok(())
}

/// Prints `report` as JSON on stderr (`run-with-lock --json`: stdout is
/// the command's).
///
/// # Errors
/// Writing or serialisation failed.
pub fn print_json_stderr<R: Serialize>(report: &R) -> anyhow::Result<()> {
    let mut s = serde_json::to_string_pretty(report)?;
    s.push('\n');
    std::io::stderr().lock().write_all(s.as_bytes())?;
    Ok(())
}

/// Writes `report` as JSON to `path` (`run-with-lock --report FILE`).
///
/// # Errors
/// The file could not be written, naming it.
pub fn write_json<R: Serialize>(report: &R, path: &std::path::Path) -> anyhow::Result<()> {
    let mut s = serde_json::to_string_pretty(report)?;
    s.push('\n');
    std::fs::write(path, s)
        .map_err(|e| anyhow::anyhow!("cannot write the report to {}: {e}", path.display()))
}

/// A note for the operator, on stderr.
pub fn note(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "migrate: {text}");
}

/// A progress line: redrawn in place on stderr when it is a terminal and
/// the report is not JSON, nothing otherwise (a script reading the output
/// sees only the report); cleared when dropped, before the report is
/// printed.
#[derive(Debug)]
pub struct ProgressLine {
    tty: bool,
    drawn: bool,
}

impl ProgressLine {
    /// A line for this process's stderr; `json`: the report is JSON, and
    /// the line stays silent.
    pub fn new(json: bool) -> ProgressLine {
        ProgressLine {
            tty: !json && std::io::stderr().is_terminal(),
            drawn: false,
        }
    }

    /// Redraws the line for `p`.
    pub fn update(&mut self, p: Progress) {
        if !self.tty {
            return;
        }
        let what = p.table.map_or(String::new(), |t| format!(" {t}"));
        let line = match p.total {
            Some(total) => {
                let width = 30;
                let filled = (p.done * width)
                    .checked_div(total)
                    .unwrap_or(width)
                    .min(width);
                format!(
                    "{}{what} [{}{}] {}/{total}",
                    p.phase,
                    "#".repeat(filled),
                    " ".repeat(width - filled),
                    p.done
                )
            }
            None => format!("{}{what}: {} rows", p.phase, p.done),
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
        self.drawn = true;
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        if self.drawn {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
        }
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("   | {l}\n")).collect()
}

// ===== tables =====

/// A plain aligned table: a header row and rows of cells.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Whether it has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, two spaces between columns, indented by `indent`.
    pub fn render(&self, indent: &str) -> String {
        let cols = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(cols) {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        for r in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::from(indent);
            for (i, c) in r.iter().enumerate().take(cols) {
                if i + 1 == cols {
                    line.push_str(c);
                } else {
                    let pad = widths[i] - c.chars().count();
                    line.push_str(c);
                    line.push_str(&" ".repeat(pad + 2));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A duration in ms as an operator reads it: `850ms`, `12.3s`, `4m 10s`.
pub fn age(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        humantime::format_duration(Duration::from_secs(ms / 1000)).to_string()
    }
}

/// µs since the epoch as UTC, to the second.
pub fn when(us: i64) -> String {
    if us <= 0 {
        return "-".to_string();
    }
    let t = std::time::UNIX_EPOCH + Duration::from_micros(u64::try_from(us).unwrap_or(0));
    humantime::format_rfc3339_seconds(t).to_string()
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or("-".to_string(), |v| v.to_string())
}

// ===== serve =====

impl Human for Listening {
    fn human(&self) -> String {
        format!("listening on {}\n", self.address)
    }
}
