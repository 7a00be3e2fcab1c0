//! The node registry and the activity record: reading and writing them.
//!
//! What a node says about itself ([`NodeInfo`]), what its lease promises
//! ([`LeasePromise`]), a registry entry read back ([`LiveNode`]) and the
//! rows and columns they live in are pure data in
//! `lockshift_decide::registry`, with the layout explained there. This module keeps the I/O: the heartbeat,
//! deregistering, listing the live fleet, and the activity record.

use std::collections::BTreeMap;
use std::time::Duration;

use lockshift_lock::{Algorithm, Incarnation, LeaseSettings};
use lockshift_store::{
    Cell, CellWrite, Clock, Route, RowQuery, Store, StoreError, StoreErrorKind, Timestamp, Ttl,
    WriteOptions, schema,
};

use lockshift_decide::registry::{
    ACTIVITY_ROW, LeasePromise, LiveNode, NodeInfo, RegistryCell, live_fleet, registry_cell_ttl,
    registry_column, registry_row, registry_rows,
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

/// Writes `info` as its process's registry cell ([`NodeInfo::column`]) in
/// the row of this minute ([`registry_row`]), registered for `ttl` (its
/// registry TTL, R5, declared in the cell: [`NodeInfo::registry_ttl_ms`])
/// — one heartbeat. The cell itself lives until its row is read no more
/// ([`registry_cell_ttl`]).
///
/// The node runtime (`lockshift::Node`) calls it every
/// `rollout.heartbeat_every`; tests that stand in for a node (the
/// rollout's, the operator tool's) call it to register one.
///
/// # Errors
/// The store error.
pub async fn heartbeat(
    store: &dyn Store,
    clock: &dyn Clock,
    info: &NodeInfo,
    ttl: Ttl,
) -> Result<(), StoreError> {
    let info = NodeInfo {
        registry_ttl_ms: Some(u64::try_from(ttl.as_duration().as_millis()).unwrap_or(u64::MAX)),
        ..info.clone()
    };
    write_cell(store, clock.now(), &info).await
}

/// Marks `info`'s process as gone from the registry (a clean shutdown):
/// a cell that says it left, in this minute's row — never a delete,
/// whose tombstone every later read of the row would pass. Other
/// processes of the same node id keep theirs.
///
/// The node runtime calls it when it stops; tests call it to make a node
/// they registered with [`heartbeat`] leave.
///
/// # Errors
/// The store error.
pub async fn deregister(
    store: &dyn Store,
    clock: &dyn Clock,
    info: &NodeInfo,
) -> Result<(), StoreError> {
    let info = NodeInfo {
        left: true,
        ..info.clone()
    };
    // A microsecond on: above a heartbeat sent at the same reading of
    // the clock (a tie would go to the greater value, not to the later
    // write).
    write_cell(store, clock.now().offset_micros(1), &info).await
}

/// Writes `info` as its cell of the registry row of `now`'s minute on the
/// database's clock, by the writer's own reading ([`filed_at`]), stamped
/// `now` on the writer's clock.
async fn write_cell(store: &dyn Store, now: Timestamp, info: &NodeInfo) -> Result<(), StoreError> {
    let value = serde_json::to_vec(info).map_err(|e| invalid(lockshift_store::OpKind::Write, e))?;
    let filed = filed_at(now, info);
    store
        .write(
            schema::NODES,
            &registry_row(filed),
            &[CellWrite::new(info.column(), value)],
            WriteOptions::at(now).with_ttl(registry_cell_ttl(filed)),
        )
        .await
}

/// When a cell written at `now` on its writer's clock is filed: `now` on
/// the database's clock by the reading the cell carries (C1), `now` itself
/// without one. Readers read the minutes of their own clock, within the
/// margin of the database's; a writer minutes off files where they look
/// (filed by its own clock, a process two minutes ahead wrote into rows
/// nobody would read for two minutes, and was not listed at all). The
/// cell's TTL counts on the coordinators' clocks, the database's, from
/// the same time.
fn filed_at(now: Timestamp, info: &NodeInfo) -> Timestamp {
    info.clock
        .as_ref()
        .map_or(now, |r| now.offset_micros(r.offset_us))
}

/// The live processes of `node` whose rows carry an incarnation, `mine`
/// excluded: another process running under the same node id.
///
/// A live process heartbeats every minute at least, so its newest cell is
/// in this minute's row or the last one's: two reads (at once) of a slice
/// from `node/` on, at most [`INCARNATIONS_READ`] cells each — never
/// the whole fleet's cells.
///
/// # Errors
/// The store error.
pub async fn other_incarnations(
    store: &dyn Store,
    clock: &dyn Clock,
    node: &str,
    mine: Incarnation,
    margin: Duration,
) -> Result<Vec<LiveNode>, StoreError> {
    let prefix = format!("{node}/");
    let now = clock.now();
    let rows = registry_rows(now);
    let query = RowQuery::first(INCARNATIONS_READ).starting_at(prefix.clone());
    let reads = rows
        .iter()
        .take(2)
        .map(|row| store.read(schema::NODES, row, &query));
    let mut cells = Vec::new();
    for read in futures::future::join_all(reads).await {
        cells.extend(
            read?
                .into_iter()
                .take_while(|c| c.column.starts_with(&prefix))
                .map(decode),
        );
    }
    let mine = registry_column(node, mine);
    let (live, _) = live_fleet(cells, now, margin);
    Ok(live.into_iter().filter(|n| n.column != mine).collect())
}

/// How many cells of one node id a look for its other processes reads per
/// row: far more processes than one node id should ever have at once.
pub const INCARNATIONS_READ: u32 = 64;

fn decode(cell: Cell) -> RegistryCell {
    RegistryCell {
        info: serde_json::from_slice::<NodeInfo>(&cell.value).ok(),
        column: cell.column,
        writetime: cell.writetime,
        ttl: cell.ttl,
    }
}

/// Every live process at `now` (by this reader's clock, which may be
/// `margin` ahead of a writer's), in column (node id, then incarnation)
/// order. Entries that do not decode (written by a newer or broken binary)
/// come back in the second list by column.
///
/// One read of each registry row a registration can be in
/// ([`registry_rows`]), all at once.
///
/// # Errors
/// The store error.
pub async fn live_nodes(
    store: &dyn Store,
    now: Timestamp,
    margin: Duration,
) -> Result<(Vec<LiveNode>, Vec<String>), StoreError> {
    live_nodes_via(store, &Route::Default, now, margin).await
}

/// [`live_nodes`] on `route` (a home move reads the registry of every
/// datacenter).
///
/// # Errors
/// The store error.
pub async fn live_nodes_via(
    store: &dyn Store,
    route: &Route,
    now: Timestamp,
    margin: Duration,
) -> Result<(Vec<LiveNode>, Vec<String>), StoreError> {
    live_nodes_patiently(store, route, now, margin, 1).await
}

/// [`live_nodes_via`], each row's read sent again after a transient
/// failure (100 ms later), at most `attempts` times: one row's timeout
/// costs that row's read again, not the whole registry's.
///
/// # Errors
/// The store error of a row whose every attempt failed.
pub(crate) async fn live_nodes_patiently(
    store: &dyn Store,
    route: &Route,
    now: Timestamp,
    margin: Duration,
    attempts: usize,
) -> Result<(Vec<LiveNode>, Vec<String>), StoreError> {
    let rows = registry_rows(now);
    let all = RowQuery::all();
    let reads = rows.iter().map(|row| async {
        let mut attempt = 1;
        loop {
            match store.read_via(route, schema::NODES, row, &all).await {
                Err(e) if e.is_retryable() && attempt < attempts => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                result => return result,
            }
        }
    });
    let mut cells = Vec::new();
    for read in futures::future::join_all(reads).await {
        cells.extend(read?.into_iter().map(decode));
    }
    Ok(live_fleet(cells, now, margin))
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
            registry_ttl_ms: None,
            left: false,
            clock: None,
            host_clock: None,
        }
    }

    /// Issue 41: a process two minutes ahead of the database's clock, or
    /// behind it, with its reading, files its heartbeat in the row of the
    /// database's minute, where a reader at the database's time looks: both
    /// are listed, and their ages read a few seconds. Filed by its own clock
    /// (a row without the reading), the one ahead is not listed at all.
    #[tokio::test]
    async fn processes_minutes_off_file_their_heartbeats_where_readers_look() {
        use lockshift_decide::offset::ClockReading;
        use lockshift_store::SkewedClock;
        let db = Arc::new(ManualClock::new(Timestamp::from_micros(1_000_000_000_000)));
        let store = MemoryStore::with_clock(db.clone());
        let ttl = Ttl::from_secs(60).unwrap();
        let reading = |skew_s: i64| ClockReading {
            offset_us: -skew_s * 1_000_000,
            error_us: 2_000,
            at_us: db.now().as_micros() + skew_s * 1_000_000,
        };
        for (node, skew_s) in [("ahead", 120), ("behind", -120)] {
            let clock = SkewedClock::new(db.clone(), skew_s * 1_000_000);
            let measured = NodeInfo {
                clock: Some(reading(skew_s)),
                ..info(node)
            };
            heartbeat(&store, &clock, &measured, ttl).await.unwrap();
        }
        let blind = SkewedClock::new(db.clone(), 120_000_000);
        heartbeat(&store, &blind, &info("blind-ahead"), ttl)
            .await
            .unwrap();
        db.advance(Duration::from_secs(3));
        let (nodes, _) = live_nodes(&store, db.now(), Duration::from_secs(5))
            .await
            .unwrap();
        let listed: Vec<&str> = nodes.iter().map(|n| n.info.node.as_str()).collect();
        assert_eq!(listed, ["ahead", "behind"], "{nodes:#?}");
        for n in &nodes {
            let age = n.heartbeat_age(db.now(), None, Duration::from_secs(5));
            assert!(
                age.surely_within(Duration::from_secs(4)),
                "{}: {age:?}",
                n.info.node
            );
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
        let (nodes, bad) = live_nodes(&store, clock.now(), Duration::ZERO)
            .await
            .unwrap();
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
        let (nodes, _) = live_nodes(&store, clock.now(), Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(nodes.len(), 1, "a's TTL ran out");
        deregister(&store, clock.as_ref(), &info("b"))
            .await
            .unwrap();
        assert!(
            live_nodes(&store, clock.now(), Duration::ZERO)
                .await
                .unwrap()
                .0
                .is_empty()
        );
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
        let (nodes, _) = live_nodes(&store, clock.now(), Duration::ZERO)
            .await
            .unwrap();
        let web1: Vec<_> = nodes.iter().filter(|n| n.info.node == "web-1").collect();
        assert_eq!(web1.len(), 2, "{nodes:?}");
        assert!(web1.iter().any(|n| n.info.effective == Algorithm::Legacy));
        assert_eq!(web1[0].column, format!("web-1/{}", one.min(two)));
        let seen = other_incarnations(&store, clock.as_ref(), "web-1", two, Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(
            seen.iter().map(|n| n.column.as_str()).collect::<Vec<_>>(),
            [registry_column("web-1", one)]
        );
        deregister(&store, clock.as_ref(), &new).await.unwrap();
        let (nodes, _) = live_nodes(&store, clock.now(), Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(
            nodes.iter().filter(|n| n.info.node == "web-1").count(),
            1,
            "the old process's row stays"
        );
        assert!(
            other_incarnations(&store, clock.as_ref(), "web-1", one, Duration::ZERO)
                .await
                .unwrap()
                .is_empty()
        );
    }

    /// Issue 41: a row carries its process's clock reading under the
    /// agreed names, and a row of a build that predates it (no `clock`
    /// key) still decodes.
    #[test]
    fn a_row_carries_the_clock_reading_and_old_rows_still_decode() {
        let mut with = info("a");
        with.clock = Some(lockshift_decide::offset::ClockReading {
            offset_us: 120_000_658,
            error_us: 3_741,
            at_us: 1_796_203_107_402_342,
        });
        let json: serde_json::Value = serde_json::to_value(&with).unwrap();
        assert_eq!(
            json["clock"],
            serde_json::json!({"offset_us": 120_000_658, "error_us": 3_741, "at_us": 1_796_203_107_402_342_i64})
        );
        assert_eq!(
            serde_json::from_value::<NodeInfo>(json.clone()).unwrap(),
            with
        );
        let mut old = json;
        old.as_object_mut().unwrap().remove("clock");
        let decoded: NodeInfo = serde_json::from_value(old).unwrap();
        assert_eq!(decoded.clock, None);
        assert_eq!(decoded.node, "a");
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
        let clock = Arc::new(ManualClock::new(Timestamp::from_micros(1_000_000_000)));
        let store = MemoryStore::with_clock(clock.clone());
        store
            .write(
                schema::NODES,
                &registry_row(clock.now()),
                &[CellWrite::new("weird", b"not json".to_vec())],
                WriteOptions::at(clock.now()),
            )
            .await
            .unwrap();
        let (nodes, bad) = live_nodes(&store, clock.now(), Duration::ZERO)
            .await
            .unwrap();
        assert!(nodes.is_empty());
        assert_eq!(bad, ["weird"]);
    }

    /// Issue 40: processes that start, heartbeat and stop, ten a second
    /// for ten minutes (6 000 of them), while 50 live processes
    /// heartbeat every 5 s: every read of the registry passes no
    /// tombstone of it — Cassandra warns above 1 000 — and lists exactly
    /// the live processes. (One row with deletes passed one tombstone per
    /// process that stopped in the last `gc_grace_seconds`.)
    #[tokio::test]
    async fn churn_leaves_no_tombstone_in_any_registry_read() {
        let clock = Arc::new(ManualClock::new(Timestamp::from_micros(
            1_700_000_000_000_000,
        )));
        let store = MemoryStore::with_clock(clock.clone());
        let ttl = Ttl::from_secs(96).unwrap();
        let named = |node: &str, i: u64| {
            let mut n = info(node);
            n.incarnation = Some(Incarnation::from_seed(i).to_string());
            n
        };
        let live: Vec<NodeInfo> = (0..50).map(|i| named(&format!("svc-{i}"), i)).collect();
        let mut most = 0;
        for tick in 0..6_000u64 {
            // A short-lived process: registers, stops 100 ms later.
            let cli = named("cron", 1_000 + tick);
            heartbeat(&store, clock.as_ref(), &cli, ttl).await.unwrap();
            clock.advance(Duration::from_millis(100));
            deregister(&store, clock.as_ref(), &cli).await.unwrap();
            if tick % 50 == 0 {
                for n in &live {
                    heartbeat(&store, clock.as_ref(), n, ttl).await.unwrap();
                }
                let now = clock.now();
                let (nodes, _) = live_nodes(&store, now, Duration::ZERO).await.unwrap();
                assert_eq!(
                    nodes.len(),
                    50,
                    "tick {tick}: the live processes, no others"
                );
                for row in registry_rows(now) {
                    let read = store
                        .read_observed(schema::NODES, &row, &RowQuery::all())
                        .await
                        .unwrap();
                    most = most.max(read.tombstones.unwrap_or(0));
                }
            }
            clock.advance(Duration::from_millis(0));
        }
        assert_eq!(most, 0, "a registry read passed {most} tombstones");
    }
}
