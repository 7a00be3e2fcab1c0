//! Moving a home: planned, through the current home, or forced without it
//! (docs/design.md §4a, H3 and H4). The guards are
//! `lockshift_decide::home::move_refusals`; this module reads what they
//! judge and writes the move.

use std::time::Duration;

use lockshift_decide::home::{HomeRecord, MoveAsk, MovePlan, Rule};
use lockshift_lock::LeaseSettings;
use lockshift_store::{Datacenter, SharedClock, SharedStore};
use tracing::warn;

use crate::error::RolloutError;
use crate::homes::patient::rollout_lock;
use crate::settings::RolloutSettings;

mod gather;
mod write;

use gather::judge;
#[cfg(test)]
pub(super) use gather::{REGISTERED_CEILING, beyond_ceiling};
use write::write;

/// How long after a move is written its new home starts serving (H3):
/// until every view of the old home has expired — a view confirmed by a
/// read sent just before the move lasts `stage_valid_for`, and a process
/// that lost its view stops renewing, so its holders are told within a
/// lease TTL — and, for the fleet home, until every registry row written
/// under the old home has expired (R5: `stage_valid_for + lease_ttl` after
/// its last heartbeat, which itself was sent before the view expired);
/// plus the clock skew margin and a second for whole-second TTLs. So
/// `2 × stage_valid_for + lease TTL + clock_skew_margin + 1 s`, each the
/// longest of this process's settings and what every registered process
/// says of its own (`others`: each one's lease TTL and `stage_valid_for`,
/// when it said).
pub fn move_wait(
    rollout: &RolloutSettings,
    lease_ttl: Duration,
    others: impl IntoIterator<Item = (Option<Duration>, Option<Duration>)>,
) -> Duration {
    let (ttl, valid_for) = others.into_iter().fold(
        (lease_ttl, rollout.stage_valid_for),
        |(ttl, valid), (t, v)| (ttl.max(t.unwrap_or(ttl)), valid.max(v.unwrap_or(valid))),
    );
    valid_for
        .saturating_mul(2)
        .saturating_add(ttl)
        .saturating_add(rollout.clock_skew_margin)
        .saturating_add(Duration::from_secs(1))
}

/// A move asked of [`move_home`].
#[derive(Clone, Debug)]
pub struct MoveRequest {
    /// Which rule, where to, forced or not.
    pub ask: MoveAsk,
    /// Judge and report, write nothing.
    pub dry_run: bool,
    /// Who asks (recorded in the move).
    pub by: String,
}

/// What [`move_home`] found and did.
#[derive(Clone, Debug)]
pub struct MoveReport {
    /// The rule.
    pub rule: Rule,
    /// The record the move replaces (or takes its locks from), if one.
    pub plan: Option<MovePlan>,
    /// Why the move may not be made now; empty when it may.
    pub refusals: Vec<String>,
    /// The record written, or that would be (serving, H6).
    pub record: Option<HomeRecord>,
    /// Whether the serving record was written where the move must land
    /// first: the move is made.
    pub applied: bool,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// Where the serving record was written, in order, with each write's
    /// error.
    pub written: Vec<(Datacenter, Option<String>)>,
    /// How long after the move the new home serves.
    pub wait: Duration,
    /// The datacenters that did not answer, with why.
    pub unreachable: Vec<(Datacenter, String)>,
    /// A move begun and not finished (H6): what was written, what was
    /// not, and what to run next. `None` when nothing was begun or all of
    /// it was written.
    pub incomplete: Option<String>,
    /// What each datacenter of the cluster holds of the move's record: as
    /// read, then as the writes left it.
    pub datacenters: Vec<DatacenterRecord>,
}

/// What one datacenter holds of a move's record, as far as the move knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatacenterRecord {
    /// The datacenter.
    pub datacenter: Datacenter,
    /// What it holds.
    pub holds: Holds,
    /// Why a write there (or the read of it) failed, if one did.
    pub error: Option<String>,
}

/// What a datacenter holds of a move's record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holds {
    /// The record, serving (from its `serves_from`).
    Serving,
    /// The record pending: it serves nowhere (H6).
    Pending,
    /// An older record of the rule, or none.
    Without,
    /// Not known: it did not answer, or a write there was not
    /// acknowledged (and may still land).
    Unknown,
}

impl Holds {
    /// The word reports use: `serving`, `pending`, `without`, `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Holds::Serving => "serving",
            Holds::Pending => "pending",
            Holds::Without => "without",
            Holds::Unknown => "unknown",
        }
    }
}

/// Judges and — unless refused or a dry run — makes a move of a rule's
/// home (H3, H4, H6).
///
/// It reads the homes row and the registry from every datacenter (each at
/// `LOCAL_QUORUM` there), judges with
/// `lockshift_decide::home::move_refusals`, and writes the new record
/// where the move must land first — through the current home for a
/// planned move, the new home for a forced one — *pending* (serving
/// nowhere); once that write is acknowledged it writes the record again,
/// serving the move wait after that acknowledgement, there and then in
/// every other datacenter that answered (H6: a write that was not
/// acknowledged may land at any later time, so no wait counts from it). A
/// planned move holds the rollout lock while it reads and writes, so two
/// operators' moves cannot both land (a forced one cannot: the fleet home
/// may be the one that is gone). A move of the default rule also moves
/// the fleet's rows: it records legacy and queue activity at the new home
/// until the new home serves plus a stage view's life, so no rollout guard
/// counts a quiet period across the move (what the old home recorded last
/// may not have reached the new one).
///
/// A move that could not write all of that says so in
/// [`MoveReport::incomplete`], with what each datacenter holds
/// ([`MoveReport::datacenters`]); asking for the same move again completes
/// it — and a move made already, asked again, copies its record as it is
/// to every datacenter that answers without it (a write that failed, a
/// hint lost).
///
/// # Errors
/// The rollout lock could not be taken.
pub async fn move_home(
    store: &SharedStore,
    clock: &SharedClock,
    settings: &RolloutSettings,
    lease: &LeaseSettings,
    request: MoveRequest,
) -> Result<MoveReport, RolloutError> {
    // Judged first without the rollout lock: a move that cannot be made
    // (the current home lost, say, and with it the rollout lock) is
    // refused at once. One that can is judged again under the lock.
    let judged = judge(store, clock.as_ref(), settings, lease, &request).await;
    if !judged.report.refusals.is_empty() || request.dry_run {
        return Ok(judged.report);
    }
    // A forced move takes no rollout lock (the fleet home may be the one
    // that is gone), and neither does one that completes a pending move
    // (H6): while the record is pending no datacenter serves the rule —
    // for the default rule, the rollout lock's own rows — and every other
    // move of it is refused, so the only move it can race is the same
    // completion, whose records are as safe as its own. Nor does a move
    // made already that is only copied where it lacks: it decides
    // nothing, and during the move's wait the rollout lock of the default
    // rule is refused everywhere.
    let unlocked = judged
        .report
        .plan
        .as_ref()
        .is_some_and(|p| p.completes || !p.spreads_to.is_empty());
    if request.ask.force || unlocked {
        let judged = judge(store, clock.as_ref(), settings, lease, &request).await;
        return Ok(write(store, clock.as_ref(), settings, &request, judged).await);
    }
    let guard = rollout_lock(store, clock, lease, &request.by).await?;
    let judged = judge(store, clock.as_ref(), settings, lease, &request).await;
    let report = write(store, clock.as_ref(), settings, &request, judged).await;
    if let Err(e) = guard.release().await {
        warn!(error = %e, "rollout lock release failed; it expires with its TTL");
    }
    Ok(report)
}
