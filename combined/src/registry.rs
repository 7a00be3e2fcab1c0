//! The node registry and the activity record.
//!
//! Every lockshift node keeps one cell in the `nodes` table — row
//! [`REGISTRY_ROW`], column = node id, value = [`NodeInfo`] as JSON — written
//! with a TTL and rewritten every heartbeat. Listing the live fleet is one
//! read; a node that dies vanishes when its TTL runs out.
//!
//! The `rollout` table's row [`ACTIVITY_ROW`] holds, per algorithm, the last
//! time anyone was seen using it: a cell whose write timestamp *is* that time,
//! so concurrent reporters can only move it forward (the `GlobalTime` trick,
//! thesis theorem 5).

use std::collections::BTreeMap;
use std::time::Duration;

use lockshift_lock::Algorithm;
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
}

/// A registry entry as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveNode {
    /// What the node said.
    pub info: NodeInfo,
    /// When its last heartbeat was written (by its clock).
    pub heartbeat_at: Timestamp,
    /// Time left before it drops out of the registry.
    pub ttl_left: Option<Duration>,
}

#[doc(hidden)] // The node runtime's writes (the `lockshift` crate); tests imitate nodes with them.
/// Writes `info` as `info.node`'s registry cell with `ttl`.
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
            &[CellWrite::new(info.node.clone(), value)],
            WriteOptions::at(clock.now()).with_ttl(ttl),
        )
        .await
}

#[doc(hidden)] // The node runtime's writes (the `lockshift` crate); tests imitate nodes with them.
/// Removes `node` from the registry (clean shutdown).
///
/// # Errors
/// The store error.
pub async fn deregister(
    store: &dyn Store,
    clock: &dyn Clock,
    node: &str,
) -> Result<(), StoreError> {
    store
        .delete(
            schema::NODES,
            REGISTRY_ROW,
            &[node.to_string()],
            clock.now(),
        )
        .await
}

/// Every live node, in node-id order. Entries that do not decode (written
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
    for Cell {
        column,
        value,
        writetime,
        ttl,
    } in cells
    {
        match serde_json::from_slice::<NodeInfo>(&value) {
            Ok(info) => nodes.push(LiveNode {
                info,
                heartbeat_at: writetime,
                ttl_left: ttl,
            }),
            Err(_) => unreadable.push(column),
        }
    }
    Ok((nodes, unreadable))
}

#[doc(hidden)] // The node runtime's writes (the `lockshift` crate); tests imitate nodes with them.
/// Records that `algorithm` was seen in use at `at`; the record only moves
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
        deregister(&store, clock.as_ref(), "b").await.unwrap();
        assert!(live_nodes(&store).await.unwrap().0.is_empty());
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
