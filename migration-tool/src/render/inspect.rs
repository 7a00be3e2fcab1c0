//! `migrate inspect` (one lock's cells) and `migrate schema` (the tables).

use std::fmt::Write as _;

use super::{Human, Table, age, opt, when};
use crate::ops::inspect::InspectReport;

impl Human for InspectReport {
    fn human(&self) -> String {
        let mut s = String::new();
        for m in &self.missing {
            let what = match m.part {
                "cells" => {
                    "the lock's cells (at the home of its rule) could not be read, so \
                            nothing is known of who holds or waits for it"
                }
                _ => {
                    "the registry (a fleet row, at the fleet home) could not be read, so \
                      whether each owner's process is registered, and whose lease is over, \
                      is not known"
                }
            };
            let _ = writeln!(s, "MISSING    {what}: {}", m.why);
        }
        if self.missing.iter().any(|m| m.part == "cells") {
            return s;
        }
        if self.free {
            let _ = writeln!(
                s,
                "lock {} is free: no cells in main, shadow or queue (nobody holds or waits \
                 for it — or the id is misspelt; `migrate status` counts the locks in use)",
                self.lock
            );
            return s;
        }
        use lockshift_decide::sharing::Sharing;
        let holder = match (self.holders.as_slice(), self.sharing) {
            ([], _) => "none".to_string(),
            ([one], Some(Sharing::Exclusive) | None) => one.clone(),
            (many, _) if self.crowded => format!(
                "{} ({} holdings in main, more than their kind allows: contenders \
                 entering, or stale cells)",
                many.join(", "),
                many.len()
            ),
            (many, Some(Sharing::Permit { permits })) => format!(
                "{} ({} of a semaphore of {permits} permits)",
                many.join(", "),
                many.len()
            ),
            (many, _) => format!("{} ({} reading)", many.join(", "), many.len()),
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
                match (c.algorithm, c.reserved, c.sharing.suffix()) {
                    (None, _, _) => "foreign".to_string(),
                    (Some(a), true, None) => format!("{a} (reserved)"),
                    (Some(a), true, Some(how)) if c.table == "main" => {
                        format!("{a} {how} (standing)")
                    }
                    (Some(a), _, Some(how)) => format!("{a} {how}"),
                    (Some(a), false, None) => a.to_string(),
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
        if let Some(home) = &self.home {
            let _ = writeln!(
                s,
                "-- home of every lock: {} ({}{})",
                home.home,
                home.outcome,
                home.why
                    .as_deref()
                    .map_or_else(String::new, |w| format!(": {w}"))
            );
            for (dc, error) in &home.datacenters {
                match error {
                    None => {
                        let _ = writeln!(s, "--   {dc}: holds it");
                    }
                    Some(e) => {
                        let _ = writeln!(s, "--   {dc}: NOT written ({e})");
                    }
                }
            }
        }
        s
    }
}
