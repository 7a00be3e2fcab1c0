//! [`NodeStatus`]: what a node runs now, and why.

use lockshift_decide::algorithm::Mode;
use lockshift_decide::home::RuleState;
use lockshift_decide::offset::ClockReading;
use lockshift_decide::rollout::StageRecord;
use lockshift_lock::{Algorithm, Incarnation, NodeId};

/// What a node runs now, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStatus {
    /// The node.
    pub node: NodeId,
    /// The configured mode.
    pub configured: Mode,
    /// The last stage read, if any.
    pub stage: Option<StageRecord>,
    /// The algorithm for new acquisitions.
    pub effective: Algorithm,
    /// The configured mode, when the stage refused it.
    pub degraded_from: Option<Mode>,
    /// The node could not confirm the stage within `rollout.stage_valid_for`
    /// and acts as combined until it can.
    pub view_expired: bool,
    /// The oldest stage version the node may still act on (its view's and
    /// every waiting acquisition's or held guard's).
    pub acting_version: Option<u64>,
    /// This process among the node's ([`Incarnation`]).
    pub incarnation: Incarnation,
    /// Other live processes under the same node id, by registry column, as
    /// the last heartbeat found them: each should have its own `node.id`.
    pub other_processes: Vec<String>,
    /// The algorithm the node switches new acquisitions to once a heartbeat
    /// declaring it has landed (R8, docs/design.md §4); `None` when there is none.
    pub pending: Option<Algorithm>,
    /// Why the node's view of the stage is not confirmed (R2), in words —
    /// no stage read yet, no heartbeat landed yet, or none within
    /// `rollout.stage_valid_for`, with the last error; `None` when it is
    /// confirmed. A configured mode waits for it: [`degraded_from`](Self::degraded_from)
    /// then says the node runs combined for this reason, not because the
    /// stage forbids the mode.
    pub unconfirmed_because: Option<String>,
    /// The node's view of each home rule (docs/design.md §4a): its newest
    /// record and whether its home confirmed it lately. Empty without homes.
    pub homes: Vec<RuleState>,
    /// The host's clock against the database's, as last measured (C1,
    /// docs/design.md §4b): the database's clock minus the host's, within
    /// its error. `None` until a measurement is answered. The node stamps
    /// and judges times on the host's clock corrected by this offset (C1);
    /// while the corrected clock is not known within
    /// `rollout.clock_skew_margin` (the error is too large, or the reading
    /// too old), the node acts as combined and
    /// [`unconfirmed_because`](Self::unconfirmed_because) says so.
    pub clock: Option<ClockReading>,
}

impl NodeStatus {
    /// Why new acquisitions run combined instead of the configured mode,
    /// in words — `None` when they run what it asks. An unconfirmed stage
    /// may well allow the mode: then it says what the confirmation waits
    /// for (a failed first heartbeat said "mode legacy is not allowed at
    /// stage legacy" before).
    pub fn why_combined(&self) -> Option<String> {
        let from = self.degraded_from?;
        Some(match (&self.unconfirmed_because, &self.stage) {
            (Some(why), _) => {
                format!(
                    "mode {from} waits for a confirmed stage and a clock within the margin ({why}); using combined"
                )
            }
            (None, stage) => format!(
                "mode {from} is not allowed at stage {}; using combined",
                stage.as_ref().map_or("unknown", |s| s.stage.as_str())
            ),
        })
    }
}
