//! The node registry and the activity record, as data: what a node says
//! about itself, and the rows and columns it is kept in. Reading and
//! writing them is the rollout's I/O.
//!
//! Every lockshift process keeps one cell per *minute* in the `nodes`
//! table — row [`registry_row`] of the minute it writes in
//! (`nodes@<minute>`), column = `node/incarnation` ([`registry_column`]),
//! value = [`NodeInfo`] as JSON — rewritten every heartbeat. Listing the
//! live fleet reads the rows of the last [`REGISTRY_MINUTES`] minutes
//! ([`registry_rows`], at once): a process stays registered for its
//! registry TTL after its last heartbeat (R5), which settings keep within
//! [`MAX_REGISTRY_TTL`], so its newest cell is in one of them. A process is
//! live while its newest cell is younger than the registry TTL it declares
//! ([`LiveNode::expires_at`]) and does not say it left.
//!
//! # Why rows by the minute: a registry that churn cannot fill
//!
//! Every cell of Cassandra leaves a tombstone when it is deleted or its TTL
//! ends, and a read passes every tombstone in its slice (S6). A registry
//! in one row, whose processes delete their cells when they stop (or whose
//! cells expire), makes every read pass one tombstone per process that
//! ended in the last `gc_grace_seconds`: at two process starts a second,
//! Cassandra warns on every read of it. Here no read passes a registry
//! cell's tombstone: a cell written in minute *m* is given a TTL that
//! outlives the last minute any reader reads row *m* in by a few seconds
//! ([`registry_cell_ttl`]), and a process that stops writes a cell that
//! says it left (a live cell, not a delete). So a read of the registry
//! passes no tombstone of it whatever the churn — only readers whose clocks
//! run ahead of a writer's coordinator by more than those seconds could
//! meet one — and holds a cell per minute for each process that ran in the
//! last [`REGISTRY_MINUTES`] minutes.
//!
//! The column names the *process*, not only the node id: two processes
//! that share a node id (a replacement started before its predecessor
//! stopped, a StatefulSet pod, one `node.id` in two copies of a config
//! file) each keep cells of their own, and a cell one of them writes never
//! hides the other's (docs/design.md §4, R5). Rows written by lockshift
//! builds that predate the minute rows live in [`LEGACY_REGISTRY_ROW`]:
//! read, and counted, all the same.
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
use crate::offset::{Age, ClockReading, age};

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

/// The row of the `nodes` table that held the whole registry before the
/// minute rows ([`registry_row`]): read beside them, so a process of an
/// earlier build is still counted.
pub const LEGACY_REGISTRY_ROW: &str = "nodes";

/// How long one registry row collects heartbeats: a minute.
pub const REGISTRY_BUCKET: Duration = Duration::from_secs(60);

/// The longest a process may stay registered after its last heartbeat
/// (its registry TTL: `stage_valid_for + lease_ttl + clock_skew_margin`,
/// and at least `rollout.heartbeat_ttl`, R5); settings refuse more.
pub const MAX_REGISTRY_TTL: Duration = Duration::from_secs(5 * 60);

/// How many minute rows a reader reads: enough that the newest cell of a
/// process still registered — written up to [`MAX_REGISTRY_TTL`] ago — is
/// in one of them.
pub const REGISTRY_MINUTES: i64 =
    (MAX_REGISTRY_TTL.as_secs() / REGISTRY_BUCKET.as_secs()) as i64 + 1;

/// How long a registry cell outlives the last minute its row is read in:
/// room for the coordinators' clocks, which fix its expiry, to run behind
/// a reader's.
pub const REGISTRY_CELL_SLACK: Duration = Duration::from_secs(5);

/// The minute `at` falls in.
fn minute_of(at: Timestamp) -> i64 {
    at.as_micros()
        .div_euclid(REGISTRY_BUCKET.as_micros() as i64)
}

/// The row of the `nodes` table a heartbeat written at `at` goes to:
/// `nodes@<minutes since the epoch>`.
pub fn registry_row(at: Timestamp) -> String {
    format!("{LEGACY_REGISTRY_ROW}@{}", minute_of(at))
}

/// The rows a reader at `now` reads to list the live fleet: the last
/// [`REGISTRY_MINUTES`] minutes', newest first, then
/// [`LEGACY_REGISTRY_ROW`].
pub fn registry_rows(now: Timestamp) -> Vec<String> {
    let minute = minute_of(now);
    (0..REGISTRY_MINUTES)
        .map(|back| format!("{LEGACY_REGISTRY_ROW}@{}", minute - back))
        .chain([LEGACY_REGISTRY_ROW.to_string()])
        .collect()
}

/// The TTL of a registry cell written at `at`: until the end of the last
/// minute a reader reads `at`'s row in ([`REGISTRY_MINUTES`] − 1 minutes
/// after `at`'s), plus [`REGISTRY_CELL_SLACK`], in whole seconds. So the
/// cell's tombstone appears only once its row is read no more.
pub fn registry_cell_ttl(at: Timestamp) -> Ttl {
    let bucket = REGISTRY_BUCKET.as_micros() as i64;
    let end = (minute_of(at) + REGISTRY_MINUTES).saturating_mul(bucket);
    let left = Duration::from_micros(u64::try_from(end - at.as_micros()).unwrap_or(0));
    Ttl::from_secs_clamped((left + REGISTRY_CELL_SLACK).as_secs())
}
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
    /// Its registry TTL in milliseconds: how long after this heartbeat it
    /// counts as registered without another (R5; `None`: a build whose
    /// cell lived exactly that long, its own TTL).
    #[serde(default)]
    pub registry_ttl_ms: Option<u64>,
    /// The process stopped: this is its last cell, and it is not live.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub left: bool,
    /// Its clock against the database's, as it last measured it (C1,
    /// docs/design.md §4b): the times this row and its process's cells
    /// carry are on its clock, and this turns them into the database's
    /// ([`crate::offset::to_database_time`]). `None`: not measured yet, or
    /// a build that predates the reading.
    #[serde(default)]
    pub clock: Option<ClockReading>,
    /// Its host's clock against the database's, when the process stamps on
    /// that clock corrected by the offset measured (C1, docs/design.md
    /// §4b): `clock` is then the corrected clock's reading, and this one
    /// says how far off the host itself is (what an operator sets right).
    /// `None`: the process stamps on its host's clock as it is (`clock`
    /// is the host's), or a build that predates the correction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_clock: Option<ClockReading>,
}

impl NodeInfo {
    /// Its host's clock against the database's: [`host_clock`](Self::host_clock)
    /// when the process corrects it, else [`clock`](Self::clock).
    pub fn host_reading(&self) -> Option<ClockReading> {
        self.host_clock.or(self.clock)
    }

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

impl LiveNode {
    /// When its registration ends without another heartbeat, by its own
    /// clock: its last heartbeat plus the registry TTL it declared
    /// (`None` for a build that did not declare one: its cell's own TTL
    /// ends it).
    pub fn expires_at(&self) -> Option<Timestamp> {
        self.info
            .registry_ttl_ms
            .map(|ms| self.heartbeat_at.saturating_add(Duration::from_millis(ms)))
    }

    /// How long ago its last heartbeat was, on the database's clock, at
    /// `now` on a reader's clock whose own reading is `reader` — by the
    /// process's own reading ([`NodeInfo::clock`]), or within `margin`
    /// when it reports none ([`crate::offset::age`]). A process is silent
    /// only when [`Age::surely_over`] the heartbeat TTL, and its
    /// registration over only when surely over its registry TTL.
    pub fn heartbeat_age(
        &self,
        now: Timestamp,
        reader: Option<&ClockReading>,
        margin: Duration,
    ) -> Age {
        age(
            self.heartbeat_at,
            self.info.clock.as_ref(),
            now,
            reader,
            margin,
        )
    }
}

/// One registry cell as read, with when it was written and its TTL left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryCell {
    /// The column (`node/incarnation`).
    pub column: String,
    /// What it says; `None` when it does not decode (a newer or broken
    /// build wrote it).
    pub info: Option<NodeInfo>,
    /// Its write timestamp: the heartbeat's time.
    pub writetime: Timestamp,
    /// Its TTL left.
    pub ttl: Option<Duration>,
}

/// The live fleet from the cells of the registry rows read at `now`: per
/// process, its newest cell; a process whose newest cell says it left, or
/// whose declared registry TTL ended before `now − margin` (`margin`: how
/// far the writer's clock may be behind the reader's) — and, when it
/// reports its clock's reading, surely ended by that reading too
/// ([`LiveNode::heartbeat_age`]) — is not live. A process whose reading
/// puts it beyond the margin of the database's clock when it wrote is
/// judged by its reading alone: the margin's rule assumes what the
/// reading disproves. Cells that do not decode come back in the second
/// list by column.
pub fn live_fleet(
    cells: impl IntoIterator<Item = RegistryCell>,
    now: Timestamp,
    margin: Duration,
) -> (Vec<LiveNode>, Vec<String>) {
    let mut newest: BTreeMap<String, RegistryCell> = BTreeMap::new();
    for cell in cells {
        // The newest; at one stamp, the one that says the process left
        // (it is written last).
        let rank = |c: &RegistryCell| (c.writetime, c.info.as_ref().is_some_and(|i| i.left));
        let keep = newest
            .get(&cell.column)
            .is_none_or(|kept| rank(&cell) > rank(kept));
        if keep {
            newest.insert(cell.column.clone(), cell);
        }
    }
    let mut nodes = Vec::new();
    let mut unreadable = Vec::new();
    for (column, cell) in newest {
        let Some(info) = cell.info else {
            unreadable.push(column);
            continue;
        };
        if info.left {
            continue;
        }
        let node = LiveNode {
            column,
            info,
            heartbeat_at: cell.writetime,
            ttl_left: cell.ttl,
        };
        let (Some(end), Some(ttl)) = (node.expires_at(), node.info.registry_ttl_ms) else {
            nodes.push(node);
            continue;
        };
        let ttl = Duration::from_millis(ttl);
        let by_margin = end.duration_since(now);
        let over_by_margin = end.saturating_add(margin) < now;
        let Some(reading) = node.info.clock else {
            // No reading (a build that predates it): the writer is
            // assumed within the margin, as before C1.
            if !over_by_margin {
                nodes.push(LiveNode {
                    ttl_left: Some(by_margin),
                    ..node
                });
            }
            continue;
        };
        // By the writer's own reading (C1), taking the reader's clock for
        // the database's (the registry TTL's own margin covers the
        // reader's skew): a process far off the database's clock is still
        // registered while its reading says so.
        let age = node.heartbeat_age(now, None, margin);
        let by_reading = ttl.saturating_sub(age.least);
        let over_by_reading = age.surely_over(ttl);
        // The margin's rule assumes the writer within the margin of the
        // database's clock. Its reading says whether it was when it
        // wrote: if so, both rules hold and the later end counts (never
        // dropped earlier than by the margin alone); if not, the margin's
        // rule is known not to apply and only the reading judges. A
        // process ahead of the database by more than its registration
        // writes times that stay in the future for as long as it runs —
        // by the margin alone its every cell, however old, would look
        // fresh, and a reader would see it acting on a stage it left
        // minutes ago (issue 41: the guards held `dual → legacy` back for
        // as long as a process 154 s ahead, acting as combined, was ahead).
        // Such a process acts as combined (C1), which the guards need not
        // see (docs/design.md §4b).
        let within = reading.bound_at(node.heartbeat_at) <= micros(margin);
        let (over, left) = if within {
            (over_by_margin && over_by_reading, by_margin.max(by_reading))
        } else {
            (over_by_reading, by_reading)
        };
        if !over {
            nodes.push(LiveNode {
                ttl_left: Some(left),
                ..node
            });
        }
    }
    (nodes, unreadable)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
