//! `migrate home` and `migrate home move`.

use std::fmt::Write as _;

use super::Human;
use crate::ops::home::{DatacentersView, HomeMoveReport, HomesReport, RuleReport, RuleStateName};
use crate::ops::home_forget::ForgetReport;

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
        for u in &self.unreadable {
            let _ = writeln!(
                s,
                "  {} shows a cell that does not decode: {} ({}); the locks it could home are refused",
                u.datacenter, u.column, u.error
            );
        }
        if self.rules.is_empty() && self.unreadable.is_empty() {
            s.push_str(
                "no homes recorded: every lock is read and written at store.cql.consistency \
                 (set lock.home_datacenter to give the fleet a home)\n",
            );
            return s;
        }
        for r in &self.rules {
            let shown: Vec<String> = r.shown.iter().map(|(dc, v)| format!("{dc} v{v}")).collect();
            let _ = writeln!(
                s,
                "{}: home {} (version {}{}{}), {}; shown by {}",
                r.rule,
                r.record.datacenter,
                r.record.version,
                r.record
                    .moved_from
                    .as_ref()
                    .map_or_else(String::new, |f| format!(", moved from {f}")),
                if r.record.forced { ", forced" } else { "" },
                state_words(r),
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

/// Where a rule's home stands, in words: serving; MOVING, and when the
/// new home serves; PENDING.
fn state_words(r: &RuleReport) -> String {
    match r.state {
        RuleStateName::Serving => "serving".to_string(),
        RuleStateName::Pending => {
            "PENDING: never confirmed, serves nowhere (run the same move again)".to_string()
        }
        RuleStateName::Moving => format!(
            "MOVING{}: {} serves in {} (from {})",
            r.from
                .as_deref()
                .map_or_else(String::new, |f| format!(" from {f}")),
            r.record.datacenter,
            super::age(r.serves_in_ms.unwrap_or(0)),
            r.serves_from
        ),
    }
}

/// A rule's key as words: `the default rule`, `prefix "eu/"`.
fn rule_words(key: &str) -> String {
    match key.strip_prefix("prefix:") {
        Some(prefix) => format!("prefix {prefix:?}"),
        None => format!("the {key} rule"),
    }
}

impl Human for HomeMoveReport {
    fn human(&self) -> String {
        let mut s = String::new();
        let rule = rule_words(&self.rule);
        let from = self.from.as_deref().unwrap_or("no recorded home");
        let what = if self.forced { "forced move" } else { "move" };
        if !self.because.is_empty() {
            let _ = writeln!(
                s,
                "refused: {what} of {rule} from {from} to {}, because:",
                self.to
            );
            for b in &self.because {
                let _ = writeln!(s, "  - {b}");
            }
        } else if let Some(incomplete) = &self.incomplete {
            let _ = writeln!(
                s,
                "INCOMPLETE: {what} of {rule} from {from} to {}: {incomplete}",
                self.to
            );
            for d in &self.datacenters {
                let _ = writeln!(
                    s,
                    "  {}: {}{}",
                    d.datacenter,
                    holds_words(d.holds),
                    d.error
                        .as_deref()
                        .map_or_else(String::new, |e| format!(" ({e})"))
                );
            }
        } else if !self.copied_to.is_empty() {
            let _ = writeln!(
                s,
                "the move of {rule} to {} (version {}) was made already; its record is now \
                 copied to {}",
                self.to,
                self.record.as_ref().map_or(0, |r| r.version),
                self.copied_to.join(", ")
            );
        } else if self.dry_run {
            let _ = writeln!(
                s,
                "dry run: the {what} of {rule} from {from} to {} may be made; {} would serve {} s \
                 after it",
                self.to,
                self.to,
                self.wait_ms / 1000
            );
        } else {
            let _ = writeln!(
                s,
                "{what} of {rule} from {from} to {} recorded (version {}); {} serves from {}",
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

/// What a datacenter holds of a move's record, in words.
fn holds_words(holds: &str) -> &'static str {
    match holds {
        "serving" => "has the record, serving",
        "pending" => "has the record pending (serving nowhere)",
        "without" => "does NOT have the record",
        _ => "not known (did not answer, or a write there may still land)",
    }
}

impl Human for ForgetReport {
    fn human(&self) -> String {
        let mut s = String::new();
        let verb = if self.apply {
            "forget"
        } else {
            "dry run: forget"
        };
        let _ = writeln!(s, "{verb} homes cell {:?}", self.column);
        for d in &self.datacenters {
            let state = match (d.answered, d.writetime_us, d.decodes, d.removed) {
                (false, ..) => "does not answer".to_string(),
                (true, None, ..) => "does not show it".to_string(),
                (true, Some(_), true, _) => "shows it, and it DECODES".to_string(),
                (true, Some(_), false, true) => "showed it: removed".to_string(),
                (true, Some(w), false, false) if self.apply => {
                    format!("shows it (writetime {w}): NOT removed")
                }
                (true, Some(w), false, false) => {
                    format!("shows it (writetime {w}): would be removed")
                }
            };
            let _ = writeln!(
                s,
                "  {}: {state}{}",
                d.datacenter,
                d.error
                    .as_deref()
                    .map_or_else(String::new, |e| format!(" ({e})"))
            );
        }
        if let Some(why) = &self.refused {
            let _ = writeln!(s, "refused: {why}");
        }
        for note in &self.notes {
            let _ = writeln!(s, "note: {note}");
        }
        if !self.apply && self.refused.is_none() {
            s.push_str("nothing deleted (dry run): add --apply\n");
        }
        s
    }
}

/// The datacenters section of `migrate status`: each home, then each
/// datacenter's processes and whether they reach each home.
pub(crate) fn datacenters(view: &DatacentersView) -> String {
    let mut s = String::new();
    for r in &view.homes.rules {
        let _ = writeln!(
            s,
            "home       {}: {} (version {}{})",
            r.rule,
            r.record.datacenter,
            r.record.version,
            if r.state == RuleStateName::Serving {
                String::new()
            } else {
                format!(", {}", state_words(r))
            }
        );
    }
    for site in &view.sites {
        let answered = match site.answered {
            Some(true) => "answers this tool",
            Some(false) => "does NOT answer this tool",
            None => "not a datacenter of this cluster",
        };
        let reaches: Vec<String> = site
            .reaches
            .iter()
            .map(|(rule, r)| {
                let word = if r.confirmed == r.of {
                    "reach"
                } else if r.confirmed == 0 {
                    "do NOT reach"
                } else {
                    "partly reach"
                };
                let silent = if r.silent > 0 {
                    format!(", {} not heard from lately", r.silent)
                } else {
                    String::new()
                };
                format!("{word} {rule} ({}/{}{silent})", r.confirmed, r.of)
            })
            .collect();
        let _ = writeln!(
            s,
            "dc         {}: {} process{}, {answered}{}{}",
            site.datacenter,
            site.nodes.len(),
            if site.nodes.len() == 1 { "" } else { "es" },
            if reaches.is_empty() {
                String::new()
            } else {
                format!("; {}", reaches.join(", "))
            },
            if site.unaware > 0 {
                format!("; {} of a build without homes", site.unaware)
            } else {
                String::new()
            }
        );
    }
    s
}
