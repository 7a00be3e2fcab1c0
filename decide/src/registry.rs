//! The node registry and the activity record, as data: what a node says
//! about itself, and the rows and columns it is kept in. Reading and
//! writing them is the rollout's I/O.
//!
//! Every lockshift process keeps one cell in the `nodes` table — row
//! [`REGISTRY_ROW`], column = `node/incarnation` ([`registry_column`]),
//! value = [`NodeInfo`] as JSON — written with a TTL and rewritten every
//! heartbeat. Listing the live fleet is one read; a process that dies
//! vanishes when its TTL runs out.
//!
//! The column names the *process*, not only the node id: two processes
//! that share a node id (a replacement started before its predecessor
//! stopped, a StatefulSet pod, one `node.id` in two copies of a config
//! file) each keep a row of their own, and a row one of them writes never
//! hides the other's (docs/design.md §4, R5). Rows written by lockshift
//! builds that predate incarnations are named by the node id alone; they
//! are read, and counted, all the same.
//!
//! The `rollout` table's row [`ACTIVITY_ROW`] holds, per algorithm, the last
//! time anyone was seen using it — or may use it: a cell whose write
//! timestamp *is* that time, so concurrent reporters can only move it
//! forward (the `GlobalTime` trick, thesis theorem 5). A node running legacy
//! or queue writes, with every heartbeat, the time until which that
//! heartbeat lets it start acquisitions (`stage_valid_for` ahead): a
//! promise, possibly in the future, that the guards honour even if the node
//! never reports again (docs/design.md §4, R8).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::algorithm::{Algorithm, Mode, Stage};
use crate::cell::{Timestamp, Ttl};
use crate::id::Incarnation;

/// How much clock skew between the coordinators that write and read a cell
/// a lease allows for.
///
/// Cassandra fixes a cell's expiry on the *writing* coordinator's clock and
/// checks it on the *reading* coordinator's: a reader whose clock runs ahead
/// sees the cell vanish that much earlier. NTP keeps a cluster within a few
/// milliseconds; 250 ms leaves room for a node that is drifting before its
/// operators notice, and still lets a 3-second lease be configured.
pub const TTL_SKEW_ALLOWANCE: Duration = Duration::from_millis(250);

/// How long a cell written with TTL `lease_ttl` is sure to live after it
/// was sent: the TTL written (rounded up to whole seconds) − 1 s
/// (Cassandra expires at the end of the write's second + TTL) −
/// [`TTL_SKEW_ALLOWANCE`]. `None` when `lease_ttl` is not a valid TTL or
/// too short to guarantee anything.
///
/// A cell sent at `sent` with TTL `n` (whole seconds) is applied no
/// earlier than `sent`, and Cassandra expires it at the end of the second
/// it was applied in plus `n`, on the coordinator's clock: it is sure to
/// live until `sent + n - 1 s - TTL_SKEW_ALLOWANCE`.
pub fn guaranteed_life(lease_ttl: Duration) -> Option<Duration> {
    let ttl = Ttl::from_duration(lease_ttl).ok()?.as_duration();
    ttl.checked_sub(Duration::from_secs(1))?
        .checked_sub(TTL_SKEW_ALLOWANCE)
        .filter(|d| !d.is_zero())
}

/// The row of the `nodes` table holding the registry.
pub const REGISTRY_ROW: &str = "nodes";
/// The row of the `rollout` table holding last-activity times.
pub const ACTIVITY_ROW: &str = "activity";

/// What a node says about itself at every heartbeat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// The node id.
    pub node: String,
    /// The lockshift version it runs.
    pub version: String,
    /// Its configured mode.
    pub configured_mode: Mode,
    /// What it runs for new acquisitions now.
    pub effective: Algorithm,
    /// Whether the configured mode was refused by the stage.
    pub degraded: bool,
    /// The stage it last read (`None`: never read one).
    pub seen_stage: Option<Stage>,
    /// The version of that stage record.
    pub seen_version: Option<u64>,
    /// When the node started (µs since the epoch).
    pub started_at: i64,
    /// The process: drawn at random when it started (`None`: a build that
    /// predates incarnations, whose row is named by the node id alone).
    #[serde(default)]
    pub incarnation: Option<String>,
    /// Per algorithm, when this node last took a lock with it (µs).
    #[serde(default)]
    pub last_used: BTreeMap<Algorithm, i64>,
    /// What this node's lock cells promise (`None`: an older node that did
    /// not say).
    #[serde(default)]
    pub lease: Option<LeasePromise>,
    /// The oldest stage version the node may still act on: its view's, and
    /// that of every acquisition it has waiting or held (`None`: unknown).
    #[serde(default)]
    pub acting_version: Option<u64>,
    /// Acquisitions waiting or held, by the algorithm each resolved.
    #[serde(default)]
    pub bound: BTreeMap<Algorithm, u32>,
    /// The node could not confirm the stage lately and acts as combined.
    #[serde(default)]
    pub view_expired: bool,
    /// The datacenter the process runs in (`store.cql.local_datacenter`),
    /// when it named one.
    #[serde(default)]
    pub datacenter: Option<String>,
    /// Its view of each home rule (docs/design.md §4a): the record it
    /// follows and whether the home confirmed it lately — so `status` shows
    /// whether each datacenter reaches each home. `None` from a build that
    /// predates homes (it reaches every lock at `store.cql.consistency`).
    #[serde(default)]
    pub homes: Option<Vec<crate::home::RuleState>>,
    /// Its `rollout.stage_valid_for` in milliseconds, which a home move
    /// waits out twice (H3; `None`: a build that did not say).
    #[serde(default)]
    pub stage_valid_for_ms: Option<u64>,
}

impl NodeInfo {
    /// The column of this process's registry row.
    pub fn column(&self) -> String {
        match &self.incarnation {
            Some(incarnation) => format!("{}/{incarnation}", self.node),
            None => self.node.clone(),
        }
    }

    /// The oldest stage version the node may act on, as the guards read it:
    /// its reported acting version, or (from nodes that predate it) the
    /// version it has seen.
    pub fn acting(&self) -> Option<u64> {
        self.acting_version.or(self.seen_version)
    }

    /// Whether the node may be running `algorithm`: as its effective
    /// algorithm, or in an acquisition waiting or held.
    pub fn runs(&self, algorithm: Algorithm) -> bool {
        self.effective == algorithm || self.bound.get(&algorithm).is_some_and(|n| *n > 0)
    }
}

/// How a node keeps its lock cells alive, as it announces in its heartbeat:
/// whoever judges one of its cells stale (`migrate clean`) judges it by its
/// owner's own promise, never by the judge's local settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeasePromise {
    /// The TTL written on every cell, in milliseconds.
    pub ttl_ms: u64,
    /// How often live cells are rewritten, in milliseconds.
    pub renew_every_ms: u64,
}

impl LeasePromise {
    /// The promise of a node whose cells carry `ttl` and are rewritten
    /// every `renew_every` (each in whole milliseconds, saturating).
    pub fn new(ttl: Duration, renew_every: Duration) -> Self {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        LeasePromise {
            ttl_ms: ms(ttl),
            renew_every_ms: ms(renew_every),
        }
    }

    /// The TTL.
    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }

    /// The renewal period.
    pub fn renew_every(&self) -> Duration {
        Duration::from_millis(self.renew_every_ms)
    }

    /// How long a cell written under this promise is sure to live after it
    /// was sent ([`guaranteed_life`] of its TTL: the TTL in whole seconds −
    /// 1 s − the skew allowance, lock invariant L3); its owner is told it
    /// lost the lock before then (L3). `None` when the TTL guarantees
    /// nothing.
    pub fn guaranteed_life(&self) -> Option<Duration> {
        guaranteed_life(self.ttl())
    }
}

/// The column of the registry row of `node`'s process `incarnation`.
pub fn registry_column(node: &str, incarnation: Incarnation) -> String {
    format!("{node}/{incarnation}")
}

/// A registry entry as read back: one running process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveNode {
    /// The row's column (`node/incarnation`, or the node id alone for a
    /// build that predates incarnations).
    pub column: String,
    /// What the node said.
    pub info: NodeInfo,
    /// When its last heartbeat was written (by its clock).
    pub heartbeat_at: Timestamp,
    /// Time left before it drops out of the registry.
    pub ttl_left: Option<Duration>,
}
