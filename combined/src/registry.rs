//! The node registry and the activity record.
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

use lockshift_lock::{Algorithm, Incarnation};
use lockshift_store::{
    Cell, CellWrite, Clock, RowQuery, Store, StoreError, StoreErrorKind, Timestamp, Ttl,
    WriteOptions, schema,
};
use serde::{Deserialize, Serialize};

use crate::mode::Mode;
use crate::stage::Stage;

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
    /// The promise made by a node with `lease` settings.
    pub fn of(lease: &lockshift_lock::LeaseSettings) -> Self {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        LeasePromise {
            ttl_ms: ms(lease.lease_ttl),
            renew_every_ms: ms(lease.renew_every),
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
    /// was sent (the TTL in whole seconds − 1 s − the skew allowance, lock
    /// invariant L3); its owner is told it lost the lock before then (K3).
    /// `None` when the TTL guarantees nothing.
    pub fn guaranteed_life(&self) -> Option<Duration> {
        lockshift_lock::LeaseSettings {
            lease_ttl: self.ttl(),
            renew_every: self.renew_every(),
            ..lockshift_lock::LeaseSettings::default()
        }
        .guaranteed_life()
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

#[doc(hidden)] // The node runtime's writes (the `lockshift` crate); tests imitate nodes with them.
/// Writes `info` as its process's registry cell ([`NodeInfo::column`])
/// with `ttl`.
///
/// # Errors
/// The store error.
pub async fn heartbeat(
    store: &dyn Store,
    clock: &dyn Clock,
    info: &NodeInfo,
    ttl: Ttl,
) -> Result<(), StoreError> {
    let value = serde_json::to_vec(info).map_err(|e| invalid(lockshift_store::OpKind::Write, e))?;
    store
        .write(
            schema::NODES,
            REGISTRY_ROW,
            &[CellWrite::new(info.column(), value)],
            WriteOptions::at(clock.now()).with_ttl(ttl),
        )
        .await
}

#[doc(hidden)] // The node runtime's writes (the `lockshift` crate); tests imitate nodes with them.
/// Removes one process's row (its [`NodeInfo::column`]) from the registry
/// (clean shutdown); other processes of the same node id keep theirs.
///
/// # Errors
/// The store error.
pub async fn deregister(
    store: &dyn Store,
    clock: &dyn Clock,
    column: &str,
) -> Result<(), StoreError> {
    store
        .delete(
            schema::NODES,
            REGISTRY_ROW,
            &[column.to_string()],
            clock.now(),
        )
        .await
}

/// The live processes of `node` whose rows carry an incarnation, `mine`
/// excluded: another process running under the same node id.
///
/// One read of at most a few cells: incarnation columns of one node id sort
/// together, right after `node/`.
///
/// # Errors
/// The store error.
pub async fn other_incarnations(
    store: &dyn Store,
    node: &str,
    mine: Incarnation,
) -> Result<Vec<LiveNode>, StoreError> {
    const SHOWN: u32 = 16;
    let prefix = format!("{node}/");
    let cells = store
        .read(
            schema::NODES,
            REGISTRY_ROW,
            &RowQuery::first(SHOWN).starting_at(prefix.clone()),
        )
        .await?;
    let mine = registry_column(node, mine);
    Ok(cells
        .into_iter()
        .take_while(|c| c.column.starts_with(&prefix))
        .filter(|c| c.column != mine)
        .filter_map(decode)
        .collect())
}

fn decode(cell: Cell) -> Option<LiveNode> {
    let info = serde_json::from_slice::<NodeInfo>(&cell.value).ok()?;
    Some(LiveNode {
        column: cell.column,
        info,
        heartbeat_at: cell.writetime,
        ttl_left: cell.ttl,
    })
}

/// Every live process, in column (node id, then incarnation) order. Entries that do not decode (written
/// by a newer or broken binary) come back in the second list by column.
///
/// # Errors
/// The store error.
pub async fn live_nodes(store: &dyn Store) -> Result<(Vec<LiveNode>, Vec<String>), StoreError> {
    let cells = store
        .read(schema::NODES, REGISTRY_ROW, &RowQuery::all())
        .await?;
    let mut nodes = Vec::new();
    let mut unreadable = Vec::new();
    for cell in cells {
        let column = cell.column.clone();
        match decode(cell) {
            Some(node) => nodes.push(node),
            None => unreadable.push(column),
        }
    }
    Ok((nodes, unreadable))
}

#[doc(hidden)] // The node runtime's writes (the `lockshift` crate); tests imitate nodes with them.
/// Records that `algorithm` was, or may be, in use until `at` (a sighting,
/// or a node's promise — then `at` may lie ahead); the record only moves
/// forward (its write timestamp is `at`).
///
/// # Errors
/// The store error.
pub async fn record_activity(
    store: &dyn Store,
    algorithm: Algorithm,
    at: Timestamp,
) -> Result<(), StoreError> {
    store
        .write(
            schema::ROLLOUT,
            ACTIVITY_ROW,
            &[CellWrite::new(
                algorithm.as_str(),
                at.as_micros().to_string().into_bytes(),
            )],
            WriteOptions::at(at),
        )
        .await
}

/// The last time each algorithm was seen in use, as recorded.
///
/// # Errors
/// The store error.
pub async fn last_activity(
    store: &dyn Store,
) -> Result<BTreeMap<Algorithm, Timestamp>, StoreError> {
    let cells = store
        .read(schema::ROLLOUT, ACTIVITY_ROW, &RowQuery::all())
        .await?;
    Ok(cells
        .into_iter()
        .filter_map(|c| Some((c.column.parse::<Algorithm>().ok()?, c.writetime)))
        .collect())
}

fn invalid(op: lockshift_store::OpKind, e: serde_json::Error) -> StoreError {
    StoreError::new(
        StoreErrorKind::Invalid,
        op,
        Some(schema::NODES),
        e.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use lockshift_store::{ManualClock, MemoryStore};

    use super::*;

    fn info(node: &str) -> NodeInfo {
        NodeInfo {
            node: node.to_string(),
            version: "0.1.0".to_string(),
            configured_mode: Mode::Auto,
            effective: Algorithm::Combined,
            degraded: false,
            seen_stage: Some(Stage::Legacy),
            seen_version: Some(0),
            started_at: 1,
            incarnation: None,
            last_used: BTreeMap::new(),
            lease: None,
            acting_version: Some(0),
            bound: BTreeMap::new(),
            view_expired: false,
        }
    }

    #[tokio::test]
    async fn nodes_appear_with_their_heartbeat_and_vanish_with_the_ttl() {
        let clock = Arc::new(ManualClock::new(Timestamp::from_micros(1_000_000_000)));
        let store = MemoryStore::with_clock(clock.clone());
        let ttl = Ttl::from_secs(30).unwrap();
        heartbeat(&store, clock.as_ref(), &info("a"), ttl)
            .await
            .unwrap();
        clock.advance(Duration::from_secs(20));
        heartbeat(&store, clock.as_ref(), &info("b"), ttl)
            .await
            .unwrap();
        let (nodes, bad) = live_nodes(&store).await.unwrap();
        assert!(bad.is_empty());
        assert_eq!(
            nodes
                .iter()
                .map(|n| n.info.node.as_str())
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(nodes[1].heartbeat_at, clock.now());
        clock.advance(Duration::from_secs(15));
        let (nodes, _) = live_nodes(&store).await.unwrap();
        assert_eq!(nodes.len(), 1, "a's TTL ran out");
        deregister(&store, clock.as_ref(), &info("b").column())
            .await
            .unwrap();
        assert!(live_nodes(&store).await.unwrap().0.is_empty());
    }

    /// Issue 22: two processes under one node id each keep a row; one's
    /// heartbeat never overwrites, and one's leaving never removes, the
    /// other's; each finds the other.
    #[tokio::test]
    async fn two_processes_under_one_id_keep_a_row_each() {
        let clock = Arc::new(ManualClock::new(Timestamp::from_micros(1_000_000_000)));
        let store = MemoryStore::with_clock(clock.clone());
        let ttl = Ttl::from_secs(30).unwrap();
        let (one, two) = (Incarnation::from_seed(1), Incarnation::from_seed(2));
        let mut old = info("web-1");
        old.incarnation = Some(one.to_string());
        old.effective = Algorithm::Legacy;
        let mut new = info("web-1");
        new.incarnation = Some(two.to_string());
        // A neighbour whose id starts the same way is another node.
        let mut other = info("web-10");
        other.incarnation = Some(one.to_string());
        for i in [&old, &new, &other, &old, &new] {
            heartbeat(&store, clock.as_ref(), i, ttl).await.unwrap();
        }
        let (nodes, _) = live_nodes(&store).await.unwrap();
        let web1: Vec<_> = nodes.iter().filter(|n| n.info.node == "web-1").collect();
        assert_eq!(web1.len(), 2, "{nodes:?}");
        assert!(web1.iter().any(|n| n.info.effective == Algorithm::Legacy));
        assert_eq!(web1[0].column, format!("web-1/{}", one.min(two)));
        let seen = other_incarnations(&store, "web-1", two).await.unwrap();
        assert_eq!(
            seen.iter().map(|n| n.column.as_str()).collect::<Vec<_>>(),
            [registry_column("web-1", one)]
        );
        deregister(&store, clock.as_ref(), &new.column())
            .await
            .unwrap();
        let (nodes, _) = live_nodes(&store).await.unwrap();
        assert_eq!(
            nodes.iter().filter(|n| n.info.node == "web-1").count(),
            1,
            "the old process's row stays"
        );
        assert!(
            other_incarnations(&store, "web-1", one)
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn activity_only_moves_forward() {
        let store = MemoryStore::new();
        record_activity(&store, Algorithm::Legacy, Timestamp::from_micros(500))
            .await
            .unwrap();
        record_activity(&store, Algorithm::Legacy, Timestamp::from_micros(300))
            .await
            .unwrap();
        record_activity(&store, Algorithm::Queue, Timestamp::from_micros(100))
            .await
            .unwrap();
        let last = last_activity(&store).await.unwrap();
        assert_eq!(last[&Algorithm::Legacy], Timestamp::from_micros(500));
        assert_eq!(last[&Algorithm::Queue], Timestamp::from_micros(100));
        assert!(!last.contains_key(&Algorithm::Combined));
    }

    #[tokio::test]
    async fn an_unreadable_entry_is_reported_not_fatal() {
        let store = MemoryStore::new();
        store
            .write(
                schema::NODES,
                REGISTRY_ROW,
                &[CellWrite::new("weird", b"not json".to_vec())],
                WriteOptions::at(Timestamp::from_micros(1)),
            )
            .await
            .unwrap();
        let (nodes, bad) = live_nodes(&store).await.unwrap();
        assert!(nodes.is_empty());
        assert_eq!(bad, ["weird"]);
    }
}
