//! `migrate demo`: the live progress, and the verdict.

use std::fmt::Write as _;
use std::io::Write;

use super::{Human, Table, age, indent};
use crate::ops::demo::{DemoEvent, DemoReport};

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
            "   transfers done        {} ({} aborted: lease lost, lock timeout or write refused)",
            self.transfers, self.aborted
        );
        let _ = writeln!(
            s,
            "   late writes refused   {} (fenced: a holder past its lease wrote after a later one)",
            self.fenced_refusals
        );
        for note in &self.pause_holder {
            let _ = writeln!(s, "     - {note}");
        }
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
