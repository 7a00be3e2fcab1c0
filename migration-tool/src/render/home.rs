//! `migrate home` and `migrate home move`.

use std::fmt::Write as _;

use super::Human;
use crate::ops::home::{HomeMoveReport, HomesReport};

impl Human for HomesReport {
    fn human(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "this tool's datacenter: {}",
            self.local_datacenter.as_deref().unwrap_or("not named")
        );
        for dc in &self.datacenters {
            match &dc.error {
                None => {
                    let _ = writeln!(s, "  {}: answers", dc.datacenter);
                }
                Some(e) => {
                    let _ = writeln!(s, "  {}: does not answer ({e})", dc.datacenter);
                }
            }
        }
        if self.rules.is_empty() {
            s.push_str(
                "no homes recorded: every lock is read and written at store.cql.consistency \
                 (set lock.home_datacenter to give the fleet a home)\n",
            );
            return s;
        }
        for r in &self.rules {
            let shown: Vec<String> = r
                .shown
                .iter()
                .map(|(dc, v)| format!("{dc} v{v}"))
                .collect();
            let _ = writeln!(
                s,
                "{}: home {} (version {}{}{}), {} {}; shown by {}",
                r.rule,
                r.record.datacenter,
                r.record.version,
                r.record
                    .moved_from
                    .as_ref()
                    .map_or_else(String::new, |f| format!(", moved from {f}")),
                if r.record.forced { ", forced" } else { "" },
                if r.serving { "serving since" } else { "serves from" },
                r.serves_from,
                if shown.is_empty() {
                    "none".to_string()
                } else {
                    shown.join(", ")
                }
            );
        }
        s
    }
}

impl Human for HomeMoveReport {
    fn human(&self) -> String {
        let mut s = String::new();
        let from = self.from.as_deref().unwrap_or("no recorded home");
        let what = if self.forced { "forced move" } else { "move" };
        if !self.because.is_empty() {
            let _ = writeln!(
                s,
                "refused: {what} of {} from {from} to {}, because:",
                self.rule, self.to
            );
            for b in &self.because {
                let _ = writeln!(s, "  - {b}");
            }
        } else if self.dry_run {
            let _ = writeln!(
                s,
                "dry run: the {what} of {} from {from} to {} may be made; {} would serve {} s \
                 after it",
                self.rule,
                self.to,
                self.to,
                self.wait_ms / 1000
            );
        } else {
            let _ = writeln!(
                s,
                "{what} of {} from {from} to {} recorded (version {}); {} serves from {}",
                self.rule,
                self.to,
                self.record.as_ref().map_or(0, |r| r.version),
                self.to,
                self.serves_from.as_deref().unwrap_or("?")
            );
            for (dc, error) in &self.written {
                match error {
                    None => {
                        let _ = writeln!(s, "  written in {dc}");
                    }
                    Some(e) => {
                        let _ = writeln!(
                            s,
                            "  not written in {dc} ({e}); it gets the move by replication"
                        );
                    }
                }
            }
        }
        for (dc, e) in &self.unreachable {
            let _ = writeln!(s, "note: {dc} did not answer: {e}");
        }
        s
    }
}
