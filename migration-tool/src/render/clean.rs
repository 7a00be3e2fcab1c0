//! `migrate clean`: what a clean found, and what it did or would do.

use std::fmt::Write as _;

use super::{Human, Table, age};
use crate::ops::clean::{CleanCell, CleanReport};
use lockshift_decide::clean::{Action, PromiseSource};

impl Human for CleanReport {
    fn human(&self) -> String {
        let mut s = String::new();
        let sc = &self.scanned;
        let _ = writeln!(
            s,
            "scanned {} main, {} shadow, {} queue rows ({} cells); overdue = not renewed for {} of \
             the owner's promised renewal periods{}, ages on the database's clock by the \
             owner's clock reading and this one's (less the {} clock skew margin for a side \
             without one)",
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
                    action(c),
                    c.table.clone(),
                    c.lock.clone(),
                    c.owner.clone(),
                    reason(c),
                    age(c.age_ms),
                    promise(c),
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

/// What was done to the cell, or would be.
fn action(c: &CleanCell) -> String {
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
    }
}

/// Why the cell is stale, in words (`StaleHolder` → `stale holder`).
fn reason(c: &CleanCell) -> String {
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
        .to_string()
}

/// What the owner promised of the cell, and where the promise was read.
fn promise(c: &CleanCell) -> String {
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
    }
}
