//! `migrate advance` and `migrate rollback`: the transition, or why it was
//! refused.

use std::fmt::Write as _;

use super::Human;
use crate::ops::advance::TransitionReport;

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
