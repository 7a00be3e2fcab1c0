//! Drawing reports: an aligned plain-text table for people, or the report
//! struct itself as JSON for scripts (M3: `"version": 1` at the top). Both
//! come from the same struct, so they cannot disagree.
//!
//! Results go to stdout; progress and notes to stderr, progress only when
//! stderr is a terminal (a redirected log should not fill with `\r` lines).

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use lockshift_lock::cut_short;
use serde::Serialize;

use crate::ops::Progress;
use crate::ops::advance::TransitionReport;
use crate::ops::clean::{Action, CleanReport, PromiseSource};
use crate::ops::demo::{DemoEvent, DemoReport};
use crate::ops::inspect::InspectReport;
use crate::ops::lock::{Held, LockReport, LockResult};
use crate::ops::lock_session::Holding;
use crate::ops::run_with_lock::{RunReport, RunResult};
use crate::ops::serve::Listening;
use crate::ops::status::StatusReport;

/// A report that can be drawn for people.
pub trait Human {
    /// The report as text (ending with a newline).
    fn human(&self) -> String;
}

impl Human for lockshift_bench::BenchReport {
    fn human(&self) -> String {
        lockshift_bench::render(self)
    }
}

impl Human for lockshift_bench::SoakReport {
    fn human(&self) -> String {
        lockshift_bench::render_soak(self)
    }
}

impl Human for lockshift_bench::HoldBenchReport {
    fn human(&self) -> String {
        lockshift_bench::render_hold(self)
    }
}

/// Prints `report` on stdout, as JSON or as text.
///
/// # Errors
/// Writing to stdout failed (e.g. a closed pipe), or serialisation failed.
pub fn print<R: Serialize + Human>(report: &R, json: bool) -> anyhow::Result<()> {
    let text = if json {
        let mut s = serde_json::to_string_pretty(report)?;
        s.push('\n');
        s
    } else {
        report.human()
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Prints `report` on stdout as one line — compact JSON, or its text (one
/// line) — and flushes: a line a script reads while `migrate` goes on
/// running (`lock`), where a pretty-printed object would not be one line.
///
/// # Errors
/// Writing to stdout failed (e.g. a closed pipe), or serialisation failed.
pub fn print_line<R: Serialize + Human>(report: &R, json: bool) -> anyhow::Result<()> {
    let text = if json {
        let mut s = serde_json::to_string(report)?;
        s.push('\n');
        s
    } else {
        report.human()
    };
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

/// A progress line: redrawn in place on stderr when it is a terminal,
/// nothing otherwise; cleared when dropped, before the report is printed.
#[derive(Debug)]
pub struct ProgressLine {
    tty: bool,
    drawn: bool,
}

impl ProgressLine {
    /// A line for this process's stderr.
    pub fn new() -> ProgressLine {
        ProgressLine {
            tty: std::io::stderr().is_terminal(),
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

impl Default for ProgressLine {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        if self.drawn {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
        }
    }
}

/// The demo's observer: progress lines and status tables on stdout in human
/// mode; with `--json` only stage changes on stderr (stdout carries the
/// final report alone).
pub fn demo_observer(json: bool) -> impl FnMut(DemoEvent) {
    move |event: DemoEvent| {
        let text = match &event {
            DemoEvent::Phase(p) => format!("\n== {p}\n"),
            DemoEvent::Line(l) => format!("   {l}\n"),
            DemoEvent::Tick(t) => format!("   {t}\n"),
            DemoEvent::Status(s) => indent(&s.human()),
        };
        if json {
            if matches!(event, DemoEvent::Phase(_)) {
                let _ = std::io::stderr().lock().write_all(text.as_bytes());
            }
        } else {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
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

// ===== status =====

/// `TLS (certificates verified, hostname checked, client certificate),
/// authenticated as app` — or `not encrypted, not authenticated`.
fn describe_connection(c: &crate::ops::status::ConnectionView) -> String {
    let tls = if c.encrypted {
        let mut parts = vec!["certificates verified"];
        parts.push(if c.hostname_verified {
            "hostname checked"
        } else {
            "hostname NOT checked (unsafe)"
        });
        if c.client_certificate {
            parts.push("client certificate");
        }
        format!("TLS ({})", parts.join(", "))
    } else {
        "not encrypted".to_string()
    };
    let auth = match (&c.authenticated, &c.user) {
        (true, Some(user)) => format!("authenticated as {user}"),
        (true, None) => "authenticated".to_string(),
        (false, _) => "not authenticated".to_string(),
    };
    format!("{tls}, {auth}")
}

impl Human for StatusReport {
    fn human(&self) -> String {
        let mut s = String::new();
        let st = &self.stage;
        let _ = writeln!(
            s,
            "stage      {} (version {}, set {} by {}{})",
            st.stage,
            st.version,
            when(st.changed_at_us),
            st.by,
            if st.reason.is_empty() {
                String::new()
            } else {
                format!(": {}", st.reason)
            }
        );
        let _ = writeln!(s, "store      {}", self.store);
        if let Some(c) = &self.connection {
            let _ = writeln!(s, "connection {}", describe_connection(c));
        }
        for w in &self.warnings {
            let _ = writeln!(s, "WARNING    {w}");
        }
        let transitions: Vec<_> = self.history.iter().collect();
        if !transitions.is_empty() {
            let _ = writeln!(
                s,
                "\nhistory (last {} of {})",
                transitions.len().min(8),
                transitions.len()
            );
            let mut t = Table::new(&[
                "when",
                "action",
                "from",
                "to",
                "by",
                "reason / failing guards",
            ]);
            for h in transitions.iter().rev().take(8).rev() {
                let detail = if h.failed_guards.is_empty() {
                    h.reason.clone()
                } else {
                    h.failed_guards.join("; ")
                };
                t.row(vec![
                    when(h.at),
                    format!("{:?}", h.action).to_lowercase(),
                    h.from.to_string(),
                    h.to.to_string(),
                    h.by.clone(),
                    detail,
                ]);
            }
            s.push_str(&t.render("  "));
        }
        let _ = writeln!(
            s,
            "\nnodes      {} live; configured: {}; effective: {}",
            self.nodes.len(),
            counts(&self.modes.configured),
            counts(&self.modes.effective)
        );
        if !self.nodes.is_empty() {
            let mut t = Table::new(&[
                "node",
                "configured",
                "effective",
                "seen stage",
                "heartbeat",
                "version",
            ]);
            for n in &self.nodes {
                let info = &n.info;
                t.row(vec![
                    match &info.incarnation {
                        Some(process) if n.processes_under_id > 1 => {
                            format!("{} (process {process})", info.node)
                        }
                        _ => info.node.clone(),
                    },
                    info.configured_mode.to_string(),
                    format!(
                        "{}{}",
                        info.effective,
                        if info.view_expired {
                            " (cannot confirm the stage)"
                        } else if info.degraded {
                            " (degraded)"
                        } else {
                            ""
                        }
                    ),
                    match (info.seen_stage, info.seen_version, info.acting_version) {
                        (Some(st), Some(v), Some(a)) if a < v => {
                            format!("{st} v{v} (acquisitions bound to v{a})")
                        }
                        (Some(st), Some(v), _) => format!("{st} v{v}"),
                        _ => "-".into(),
                    },
                    format!(
                        "{} ago{}",
                        age(n.heartbeat_age_ms),
                        if n.silent { " (silent)" } else { "" }
                    ),
                    info.version.clone(),
                ]);
            }
            s.push_str(&t.render("  "));
        }
        if !self.unreadable_nodes.is_empty() {
            let _ = writeln!(
                s,
                "  unreadable registry entries: {}",
                self.unreadable_nodes.join(", ")
            );
        }
        if let Some(action) = &self.unreadable_action {
            let _ = writeln!(
                s,
                "\nunreadable {} lock row(s) the database refuses to read; the counts below \
                 leave them out, and the guards that read lock cells refuse until they can be read:",
                self.unreadable_locks.len()
            );
            for row in &self.unreadable_locks {
                let _ = writeln!(s, "  {}", row.describe());
            }
            let _ = writeln!(s, "  do: {action}");
        }
        let l = &self.locks;
        let _ = writeln!(
            s,
            "\nlocks      {} held{}{}; {} waiting on {} lock(s){}",
            l.held,
            if l.held_by.is_empty() {
                String::new()
            } else {
                format!(" ({})", counts(&l.held_by))
            },
            if l.lease_over == 0 {
                String::new()
            } else {
                format!(
                    ", {} of them by a cell whose lease is over (held by nobody; `migrate \
                     inspect` shows it, `migrate clean` deletes it)",
                    l.lease_over
                )
            },
            l.waiting,
            l.locks_with_waiters,
            l.oldest_wait.as_ref().map_or(String::new(), |w| format!(
                "; longest wait {} on {}",
                age(w.waiting_ms),
                w.lock
            ))
        );
        let _ = writeln!(
            s,
            "stale      {} cell(s) on {} lock(s){} (not renewed for {}, holdings {}; `migrate clean`)",
            self.stale.cells,
            self.stale.locks,
            if self.stale.by_table.is_empty() {
                String::new()
            } else {
                format!(" ({})", counts(&self.stale.by_table))
            },
            age(self.stale.threshold_ms),
            age(self.stale.holding_threshold_ms)
        );
        let la = &self.legacy_activity;
        let _ = writeln!(
            s,
            "legacy     last activity {}; {} legacy cell(s) now; quiet period {}",
            la.last_seen.map_or("never seen".to_string(), |a| format!(
                "{} ago",
                age(a.age_ms)
            )),
            la.cells_now,
            age(la.quiet_period_ms)
        );
        s.push('\n');
        match &self.next {
            None => {
                let _ = writeln!(
                    s,
                    "stage {} is the last stage: nothing to advance to",
                    st.stage
                );
            }
            Some(n) if n.safe => {
                let _ = writeln!(s, "safe to advance to {}: yes", n.to);
            }
            Some(n) => {
                let _ = writeln!(s, "safe to advance to {}: no, because", n.to);
                for g in n.guards.iter().filter(|g| !g.passed) {
                    let _ = writeln!(s, "  - {}", g.detail);
                    for a in &g.actions {
                        let _ = writeln!(s, "    do: {a}");
                    }
                }
            }
        }
        if let Some(n) = &self.next {
            for c in &n.caveats {
                let _ = writeln!(s, "  but: {c}");
            }
        }
        s
    }
}

fn counts(m: &std::collections::BTreeMap<String, usize>) -> String {
    if m.is_empty() {
        return "none".to_string();
    }
    m.iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

// ===== inspect =====

impl Human for InspectReport {
    fn human(&self) -> String {
        let mut s = String::new();
        if self.free {
            let _ = writeln!(
                s,
                "lock {} is free: no cells in main, shadow or queue (nobody holds or waits \
                 for it — or the id is misspelt; `migrate status` counts the locks in use)",
                self.lock
            );
            return s;
        }
        let holder = match self.holders.as_slice() {
            [] => "none".to_string(),
            [one] => one.clone(),
            many => format!(
                "{} ({} holdings in main: contenders entering, or stale cells)",
                many.join(", "),
                many.len()
            ),
        };
        let _ = writeln!(
            s,
            "lock {}: holder {holder}, {} waiting (stale after {}, holdings {})",
            self.lock,
            self.waiting,
            age(self.stale_after_ms),
            age(self.holding_stale_after_ms)
        );
        let mut t = Table::new(&[
            "table",
            "owner",
            "algorithm",
            "pos",
            "writetime",
            "age",
            "ttl left",
            "stale",
            "node",
        ]);
        for c in &self.cells {
            t.row(vec![
                c.table.clone(),
                c.owner.clone(),
                match (c.algorithm, c.reserved) {
                    (None, _) => "foreign".to_string(),
                    (Some(a), true) => format!("{a} (reserved)"),
                    (Some(a), false) => a.to_string(),
                },
                opt(c.queue_position),
                when(c.writetime_us),
                age(c.age_ms),
                c.ttl_left_ms.map_or("none".to_string(), age),
                if c.lease_over {
                    "LEASE OVER".into()
                } else if c.stale {
                    "STALE".into()
                } else {
                    "no".into()
                },
                match (&c.node, c.registered) {
                    (Some(n), true) => format!("{n} (live)"),
                    (Some(n), false) => format!("{n} (not registered)"),
                    (None, _) => "-".into(),
                },
            ]);
        }
        s.push_str(&t.render(""));
        s
    }
}

// ===== schema =====

impl Human for crate::ops::schema::SchemaReport {
    fn human(&self) -> String {
        let mut s = format!(
            "-- lockshift schema: keyspace {}, replication {}\n",
            self.keyspace, self.replication
        );
        for warning in &self.warnings {
            let _ = writeln!(s, "-- warning: {warning}");
        }
        let _ = writeln!(s, "-- table options: {}", self.options);
        let Some(applied) = &self.applied else {
            for statement in &self.statements {
                s.push_str(statement.trim_end_matches(';'));
                s.push_str(";\n");
            }
            return s;
        };
        use crate::ops::schema::StepOutcome;
        for step in applied {
            let what = match step.outcome {
                StepOutcome::Applied => "applied",
                StepOutcome::Unsupported => {
                    "not run: the local CQL endpoint does not implement ALTER (its tables were \
                     created with these options)"
                }
                StepOutcome::Refused => "REFUSED",
            };
            let _ = writeln!(s, "-- {what}: {}", step.statement.trim_end_matches(';'));
            if step.outcome == StepOutcome::Refused
                && let Some(error) = &step.error
            {
                let _ = writeln!(s, "--   {error}");
            }
        }
        s
    }
}

// ===== clean =====

impl Human for CleanReport {
    fn human(&self) -> String {
        let mut s = String::new();
        let sc = &self.scanned;
        let _ = writeln!(
            s,
            "scanned {} main, {} shadow, {} queue rows ({} cells); overdue = not renewed for {} of \
             the owner's promised renewal periods{}, ages less the {} clock skew margin",
            sc.main_rows,
            sc.shadow_rows,
            sc.queue_rows,
            sc.cells,
            self.stale_multiple,
            self.stale_after_ms.map_or(String::new(), |t| format!(
                " (no TTL: older than {})",
                age(t)
            )),
            age(self.clock_skew_margin_ms)
        );
        if !self.cells.is_empty() {
            let mut t = Table::new(&[
                "action", "table", "lock", "owner", "reason", "age", "promise",
            ]);
            for c in &self.cells {
                t.row(vec![
                    match c.action {
                        Action::WouldDelete if c.second_look_after_ms > 0 => format!(
                            "would delete{} (after a second look {} on)",
                            if c.lease_over { ", lease over" } else { "" },
                            age(c.second_look_after_ms)
                        ),
                        Action::WouldDelete => "would delete".into(),
                        Action::Deleted => "deleted".into(),
                        Action::KeptOwnerLive => "KEPT (owner's process is live)".into(),
                        Action::KeptOwnerMayHold => "KEPT (owner may not be told yet)".into(),
                        Action::SkippedRenewed => "skipped (renewed since the scan)".into(),
                        Action::SkippedGone => "skipped (gone)".into(),
                        Action::Failed => format!("FAILED: {}", c.error.as_deref().unwrap_or("")),
                    },
                    c.table.clone(),
                    c.lock.clone(),
                    c.owner.clone(),
                    format!("{:?}", c.reason)
                        .chars()
                        .flat_map(|ch| {
                            if ch.is_uppercase() {
                                vec![' ', ch.to_ascii_lowercase()]
                            } else {
                                vec![ch]
                            }
                        })
                        .collect::<String>()
                        .trim()
                        .to_string(),
                    age(c.age_ms),
                    match c.promise {
                        Some(p) => format!(
                            "ttl {}, renews every {} ({})",
                            age(p.ttl_ms),
                            age(p.renew_every_ms),
                            match p.source {
                                PromiseSource::Registry => "registry",
                                PromiseSource::Cell => "cell's TTL",
                            }
                        ),
                        None => "none (no TTL)".into(),
                    },
                ]);
            }
            s.push_str(&t.render(""));
        }
        let m = &self.summary;
        if m.kept > 0 {
            let _ = writeln!(
                s,
                "kept {} cell(s) whose owner may still hold its lock; --force deletes them at the \
                 risk of a second holder",
                m.kept
            );
        }
        if m.unjudged_without_ttl > 0 {
            let _ = writeln!(
                s,
                "{} cell(s) have no TTL and promise nothing; --stale-after judges them",
                m.unjudged_without_ttl
            );
        }
        if self.applied {
            let _ = writeln!(
                s,
                "summary: {} stale found, {} kept, {} deleted, {} skipped because renewed, {} already gone, {} failed",
                m.found, m.kept, m.deleted, m.skipped_renewed, m.skipped_gone, m.failed
            );
        } else {
            let _ = writeln!(
                s,
                "summary: {} stale found, {} kept; dry run, nothing deleted (run with --apply to delete)",
                m.found, m.kept
            );
        }
        s
    }
}

// ===== advance / rollback =====

impl Human for TransitionReport {
    fn human(&self) -> String {
        let mut s = String::new();
        if self.already {
            let _ = writeln!(
                s,
                "the stage already is {}: nothing to do{}",
                self.to,
                if self.raced.is_some() {
                    " (another operator's transition moved it while this command waited)"
                } else {
                    ""
                }
            );
            return s;
        }
        for g in &self.guards {
            let _ = writeln!(
                s,
                "  [{}] {}",
                if g.passed { "ok" } else { "FAIL" },
                g.detail
            );
            if !g.passed {
                for a in &g.actions {
                    let _ = writeln!(s, "         do: {a}");
                }
            }
        }
        let line = match (self.dry_run, self.applied, self.safe) {
            (true, _, true) => format!(
                "dry run: safe to move from {} to {}: yes",
                self.from, self.to
            ),
            (true, _, false) => format!(
                "dry run: safe to move from {} to {}: no, because {}",
                self.from,
                self.to,
                self.because.join("; ")
            ),
            (false, true, _) => format!(
                "stage moved from {} to {} (version {})",
                self.from,
                self.to,
                self.record.as_ref().map_or(0, |r| r.version)
            ),
            (false, false, _) => format!(
                "refused: cannot move from {} to {} yet, because {}",
                self.from,
                self.to,
                self.because.join("; ")
            ),
        };
        s.push_str(&line);
        s.push('\n');
        // Refusals that are not a guard's (a race, the rollout lock) say
        // what to do here; a guard's said it under the guard.
        if self.guards.is_empty() {
            for a in &self.actions {
                let _ = writeln!(s, "do: {a}");
            }
        }
        for c in &self.caveats {
            let _ = writeln!(s, "note: {c}");
        }
        s
    }
}

// ===== run-with-lock =====

impl Human for RunReport {
    fn human(&self) -> String {
        match self.result {
            RunResult::LeaseLost => lease_lost(
                &self.holding,
                if self.killed {
                    "; command stopped with SIGKILL"
                } else {
                    "; command stopped"
                },
            ),
            RunResult::Interrupted => interrupted(&self.holding),
            _ => String::new(),
        }
    }
}

// ===== lock =====

impl Human for LockReport {
    fn human(&self) -> String {
        match self.result {
            LockResult::Released => {
                format!("migrate: lock {} released\n", cut_short(&self.holding.lock))
            }
            LockResult::LeaseLost => lease_lost(&self.holding, ""),
            LockResult::Interrupted => interrupted(&self.holding),
            LockResult::Timeout | LockResult::NoFencingToken => String::new(),
        }
    }
}

/// `lock`'s line on stdout once held: the fencing token alone (an empty
/// line without one), for `read -r token` in a script.
impl Human for Held {
    fn human(&self) -> String {
        match self.fencing_token {
            Some(token) => format!("{token}\n"),
            None => "\n".to_string(),
        }
    }
}

/// "lease of lock L lost (why)…; exit 4": the end of `run-with-lock` and
/// `lock` alike, `stopped` saying what was done about it.
fn lease_lost(holding: &Holding, stopped: &str) -> String {
    format!(
        "migrate: lease of lock {} lost ({}){stopped}; exit 4\n",
        cut_short(&holding.lock),
        holding.lease_lost.as_deref().unwrap_or("unknown reason"),
    )
}

fn interrupted(holding: &Holding) -> String {
    format!(
        "migrate: interrupted while waiting for lock {}\n",
        cut_short(&holding.lock)
    )
}

// ===== serve =====

impl Human for Listening {
    fn human(&self) -> String {
        format!("listening on {}\n", self.address)
    }
}

// ===== demo =====

impl Human for DemoReport {
    fn human(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "\n== verdict ({})", self.database);
        let mut t = Table::new(&["stage", "transfers", "lock waits mean", "p99", "max"]);
        for w in &self.waits {
            t.row(vec![
                w.stage.clone(),
                w.transfers.to_string(),
                format!("{:.1}ms", w.mean_ms),
                format!("{:.1}ms", w.p99_ms),
                format!("{:.1}ms", w.max_ms),
            ]);
        }
        s.push_str(&t.render("   "));
        let check = |ok: bool| if ok { "ok" } else { "BROKEN" };
        let _ = writeln!(
            s,
            "   transfers done        {} ({} aborted: lease lost or lock timeout)",
            self.transfers, self.aborted
        );
        let _ = writeln!(
            s,
            "   total balance         {} -> {}  [{}]",
            self.balance_before,
            self.balance_after,
            check(self.balance_conserved)
        );
        let _ = writeln!(
            s,
            "   exclusion checker     {} violation(s)  [{}]",
            self.violations.len(),
            check(self.violations.is_empty())
        );
        for v in self.violations.iter().take(5) {
            let _ = writeln!(s, "     - {v}");
        }
        let _ = writeln!(
            s,
            "   stages                {}  [{}]",
            self.stages.join(" -> "),
            check(self.reached_complete)
        );
        let _ = writeln!(s, "   duration              {}", age(self.duration_ms));
        let _ = writeln!(
            s,
            "\n{}",
            if self.passed {
                "PASSED: every transfer conserved money and no lock ever had two holders"
            } else {
                "FAILED: an invariant broke (see above)"
            }
        );
        s
    }
}
