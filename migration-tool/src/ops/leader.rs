//! `migrate leader NAME [--watch]`: who leads an election
//! (docs/design.md §5b), read at the election lock's home — once, or on
//! every change.

use std::time::Duration;

use lockshift::LockId;
use lockshift_decide::election::LeaderRecord;
use serde::Serialize;

use super::Env;
use crate::JSON_VERSION;

/// How often `--watch` reads: a change shows within this plus one read
/// (the facade's observers read as often).
pub const WATCH_EVERY: Duration = lockshift::OBSERVE_EVERY;

/// Who leads, as `migrate leader` prints it (JSON schema, `"version": 1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeaderReport {
    /// Schema version, 1.
    pub version: u32,
    /// The election.
    pub election: String,
    /// The leader; `null` when nobody leads.
    pub leader: Option<LeaderRecord>,
}

/// Reads who leads `election` now.
///
/// # Errors
/// The store error, naming the election.
pub async fn leader(env: &Env, election: &LockId) -> anyhow::Result<LeaderReport> {
    let leader = lockshift_lock::read_leader(env.store.as_ref(), election)
        .await
        .map_err(|e| anyhow::anyhow!("reading the leader of {election}: {e}"))?;
    Ok(LeaderReport {
        version: JSON_VERSION,
        election: election.to_string(),
        leader,
    })
}

/// Prints who leads `election` now and on every change, until `stop`
/// resolves. A failed read is said on stderr and the watch goes on.
///
/// # Errors
/// Only a failure to print.
pub async fn watch(
    env: &Env,
    election: &LockId,
    stop: impl std::future::Future<Output = ()>,
    mut print: impl FnMut(&LeaderReport) -> anyhow::Result<()>,
    mut note: impl FnMut(String),
) -> anyhow::Result<()> {
    tokio::pin!(stop);
    let mut ticker = tokio::time::interval(WATCH_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shown: Option<Option<LeaderRecord>> = None;
    loop {
        tokio::select! {
            () = &mut stop => return Ok(()),
            _ = ticker.tick() => {}
        }
        match leader(env, election).await {
            Ok(report) => {
                if shown.as_ref() != Some(&report.leader) {
                    print(&report)?;
                    shown = Some(report.leader);
                }
            }
            Err(e) => note(format!("warning: {e:#}")),
        }
    }
}
