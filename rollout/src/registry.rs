//! The node registry and the activity record: reading and writing them.
//!
//! What a node says about itself ([`NodeInfo`]), what its lease promises
//! ([`LeasePromise`]), a registry entry read back ([`LiveNode`]) and the
//! rows and columns they live in are pure data in
//! `lockshift_decide::registry`, with the layout explained there. This module keeps the I/O: the heartbeat,
//! deregistering, listing the live fleet, and the activity record.

use std::collections::BTreeMap;

use lockshift_lock::{Algorithm, Incarnation, LeaseSettings};
use lockshift_store::{
    Cell, CellWrite, Clock, Route, RowQuery, Store, StoreError, StoreErrorKind, Timestamp, Ttl,
    WriteOptions, schema,
};

use lockshift_decide::registry::{
    ACTIVITY_ROW, LeasePromise, LiveNode, NodeInfo, REGISTRY_ROW, registry_column,
};

/// The promise a node's lease settings make. (This was an inherent
/// function of `LeasePromise` before it moved; bring this trait into scope
/// to call `LeasePromise::of` as before. How long a cell written under a
/// promise is sure to live is the inherent
/// [`LeasePromise::guaranteed_life`].)
pub trait LeaseRules: Sized {
    /// The promise made by a node with `lease` settings: its TTL and
    /// renewal period.
    fn of(lease: &LeaseSettings) -> Self;
}

impl LeaseRules for LeasePromise {
    fn of(lease: &LeaseSettings) -> Self {
        LeasePromise::new(lease.lease_ttl, lease.renew_every)
    }
}

/// Writes `info` as its process's registry cell ([`NodeInfo::column`])
/// with `ttl`: one heartbeat.
///
/// The node runtime (`lockshift::Node`) calls it every
/// `rollout.heartbeat_every`, with `rollout.heartbeat_ttl`; tests that
/// stand in for a node (the rollout's, the operator tool's) call it to
/// register one.
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

/// Removes one process's row (its [`NodeInfo::column`]) from the registry
/// (clean shutdown); other processes of the same node id keep theirs.
///
/// The node runtime calls it when it stops; tests call it to make a node
/// they registered with [`heartbeat`] leave.
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
/// One read from `node/` on: incarnation columns of one node id sort
/// together, right after it.
///
/// # Errors
/// The store error.
pub async fn other_incarnations(
    store: &dyn Store,
    node: &str,
    mine: Incarnation,
) -> Result<Vec<LiveNode>, StoreError> {
    let prefix = format!("{node}/");
    // The row from this node id on, whole: a CQL row whose value is gone
    // still takes a place within a LIMIT, and could hide a process.
    let cells = store
        .read(
            schema::NODES,
            REGISTRY_ROW,
            &RowQuery::all().starting_at(prefix.clone()),
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

/// Records that `algorithm` was, or may be, in use until `at` (a sighting,
/// or a node's promise — then `at` may lie ahead); the record only moves
/// forward (its write timestamp is `at`). The rollout guards' quiet
/// periods count from the latest record ([`last_activity`]).
///
/// The node runtime calls it with every heartbeat (its promise) and when
/// it sees an algorithm in use; tests call it to stand in for a node.
///
/// # Errors
/// The store error.
pub async fn record_activity(
    store: &dyn Store,
    algorithm: Algorithm,
    at: Timestamp,
) -> Result<(), StoreError> {
    record_activity_via(store, &Route::Default, algorithm, at).await
}

/// [`record_activity`] on `route` (a home move records activity at the new
/// fleet home, docs/design.md §4a).
///
/// # Errors
/// The store error.
pub async fn record_activity_via(
    store: &dyn Store,
    route: &Route,
    algorithm: Algorithm,
    at: Timestamp,
) -> Result<(), StoreError> {
    store
        .write_via(
            route,
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
    use std::time::Duration;

    use lockshift_store::{ManualClock, MemoryStore};

    use super::*;
    use lockshift_decide::algorithm::{Mode, Stage};

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
            datacenter: None,
            homes: None,
            stage_valid_for_ms: None,
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
