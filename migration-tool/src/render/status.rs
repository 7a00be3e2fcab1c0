//! `migrate status`: the stage, the nodes and the locks in use.

use std::fmt::Write as _;

use super::node_clocks::signed;
use super::{Human, Table, age, when};
use crate::ops::status::StatusReport;
use lockshift_decide::offset::fmt_micros;

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

impl StatusReport {
    /// The lines every report starts with after the stage: the store, the
    /// connection, the clocks, the datacenters and the warnings.
    fn context(&self, s: &mut String) {
        let _ = writeln!(s, "store      {}", self.store);
        if let Some(c) = &self.connection {
            let _ = writeln!(s, "connection {}", describe_connection(c));
        }
        let c = &self.clocks;
        let _ = writeln!(
            s,
            "clocks     Cassandra nodes must agree within {} (waiters' cells {}, holders' {}; \
             docs/operating.md §12)",
            age(c.node_skew_tolerance_ms),
            age(c.waiters_ms),
            age(c.holders_ms)
        );
        if let Some(clocks) = &self.node_clocks {
            s.push_str(&clocks.human());
        }
        if let Some(view) = &self.datacenters {
            s.push_str(&super::home::datacenters(view));
        }
        for w in &self.warnings {
            let _ = writeln!(s, "WARNING    {w}");
        }
    }

    /// The report when the fleet's rows could not be read: why, and the
    /// homes that say where they are and when they serve.
    fn unread(&self) -> String {
        let mut s = String::new();
        let rows = &self.fleet_rows;
        let _ = writeln!(
            s,
            "stage      not read: {}",
            rows.why
                .as_deref()
                .unwrap_or("the fleet's rows could not be read")
        );
        if let Some(ms) = rows.serves_in_ms {
            let _ = writeln!(
                s,
                "           the fleet's rows are served again in {} (the move's wait)",
                age(ms)
            );
        }
        self.context(&mut s);
        s
    }
}

impl Human for StatusReport {
    fn human(&self) -> String {
        let Some(st) = &self.stage else {
            return self.unread();
        };
        let mut s = String::new();
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
        self.context(&mut s);
        self.history_table(&mut s);
        self.nodes_table(&mut s);
        self.unreadable(&mut s);
        self.locks_and_cells(&mut s);
        s.push('\n');
        self.verdict(&mut s, st.stage);
        s
    }
}

/// The sections of the human report, in order.
impl StatusReport {
    /// The last transitions of the stage.
    fn history_table(&self, s: &mut String) {
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
    }

    /// Every live process: modes, stage seen, heartbeat, clock.
    fn nodes_table(&self, s: &mut String) {
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
                "clock − database's",
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
                    // The host's clock minus the database's, as the
                    // process's own reading says (the reading is the other
                    // way round: the database's minus the host's).
                    info.host_reading().map_or_else(
                        || "not reported".into(),
                        |r| {
                            format!(
                                "{} ± {}",
                                signed(r.offset_us.saturating_neg()),
                                fmt_micros(r.error_us)
                            )
                        },
                    ),
                    info.version.clone(),
                ]);
            }
            s.push_str(&t.render("  "));
        }
    }

    /// Registry entries and lock rows that could not be read.
    fn unreadable(&self, s: &mut String) {
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
    }

    /// Locks held and waited on, stale cells, the census, legacy activity.
    fn locks_and_cells(&self, s: &mut String) {
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
        let _ = writeln!(s, "census     {}", self.census.line());
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
    }

    /// Whether the next stage is safe, and why not.
    fn verdict(&self, s: &mut String, stage: impl std::fmt::Display) {
        match &self.next {
            None => {
                let _ = writeln!(
                    s,
                    "stage {} is the last stage: nothing to advance to",
                    stage
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
