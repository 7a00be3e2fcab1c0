//! `migrate lock` and `migrate run-with-lock`: the fencing token once held, and
//! how a hold ended.

use lockshift_lock::cut_short;

use super::Human;
use crate::ops::lock::{Held, LockReport, LockResult};
use crate::ops::lock_session::Holding;
use crate::ops::run_with_lock::{RunReport, RunResult};

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

// ===== leader =====

impl Human for crate::ops::leader::LeaderReport {
    fn human(&self) -> String {
        let Some(leader) = &self.leader else {
            return format!("{}: nobody leads\n", cut_short(&self.election));
        };
        let since = lockshift_decide::home::fmt_micros(leader.since);
        let value = if leader.value.is_empty() {
            String::new()
        } else {
            format!(", value {:?}", cut_short(&leader.value))
        };
        format!(
            "{}: led by {} since {since} (fencing token {}{value})\n",
            cut_short(&self.election),
            cut_short(&leader.node),
            leader.token,
        )
    }
}
