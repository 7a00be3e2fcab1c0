//! A census of lock cells: every cell of `main`, `shadow` and `queue`,
//! classified by algorithm, owner and age — for rollout guards, `migrate
//! status`, `inspect` and `clean`.
//!
//! The census's data and the judgements on it are pure and live in
//! `lockshift_decide::census`, re-exported here at their old paths. This
//! module takes the census ([`take_census`], [`inspect_lock`]): it reads
//! the rows, matches each cell to its process's registry row, and judges
//! by that process's promise whether the cell outlived its lease
//! ([`lease_over`], which applies the lease rules of `lockshift_lock`).
//!
//! Binaries that predate lockshift do not register and do not name their
//! cells lockshift's way; a cell whose owner is not `node/<16 hex digits>`, or whose
//! value says `legacy`, is legacy activity.
//!
//! A lockshift owner id names the process that wrote it (node id and
//! incarnation, docs/design.md §2a), and so does a registry row (§4, R5):
//! each cell is matched to its own process's row, never to another
//! process's of the same node id — a replacement's promise says nothing
//! about its predecessor's cells. By that process's own promise a cell can
//! be known to have outlived its lease ([`CensusCell::lease_over`]): a
//! late write brought it back (lock invariant L5), or its owner could not
//! delete it. Nobody holds or waits through such a cell; it only makes
//! others wait until it expires.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU32;
use std::time::Duration;

use lockshift_lock::{Incarnation, OwnerId, lockshift_writer};
use lockshift_queue_lock::queue::parse_queue_cell;
use lockshift_store::{
    Cell, Clock, RowQuery, Store, StoreError, StoreErrorKind, Table, Timestamp, schema,
};

use crate::registry::{LeasePromise, LeaseRules, LiveNode};

/// The census's data and the judgements on it, moved to
/// `lockshift_decide::census`, re-exported at their old paths.
pub use lockshift_decide::census::{
    CellOwner, Census, CensusCell, Staleness, UnreadableRow, holders_by_algorithm, waiters,
};

/// The fleet's [`Staleness`] thresholds, from the queue lock's and the
/// lease's settings. (This was an inherent function of `Staleness` before
/// it moved; bring this trait into scope to call `Staleness::of` as
/// before.)
pub trait FleetStaleness {
    /// The fleet's thresholds: `lock.queue.stale_after` for waiters' cells,
    /// three `lock.renew_every` periods for holdings.
    fn of(
        queue: &lockshift_queue_lock::QueueSettings,
        lease: &lockshift_lock::LeaseSettings,
    ) -> Staleness;
}

impl FleetStaleness for Staleness {
    fn of(
        queue: &lockshift_queue_lock::QueueSettings,
        lease: &lockshift_lock::LeaseSettings,
    ) -> Staleness {
        Staleness {
            waiting: queue.stale_after(lease),
            holding: lockshift_queue_lock::QueueSettings::holder_stale_after(lease),
        }
    }
}

/// Whether a cell not renewed for `age` (by the observer's clock) has
/// outlived the lease its owner promised: older than the cell's guaranteed
/// life (`ttl − 1 s − skew allowance`, lock invariant L3) even if the
/// owner's clock is `clock_skew_margin` behind the observer's. Its owner
/// has then been told it lost the lock (lock invariant K3). `None`
/// promise: unknown, `false`.
pub fn lease_over(
    age: Duration,
    promise: Option<LeasePromise>,
    clock_skew_margin: Duration,
) -> bool {
    promise
        .and_then(|p| p.guaranteed_life())
        .is_some_and(|life| age.saturating_sub(clock_skew_margin) > life)
}

/// Whether a failed read of one lock's row concerns only that row — the
/// census records it as unreadable and goes on — rather than the store
/// (which fails the census). Only the tombstone refusal is the row's own:
/// the other kinds are transient, or say something is wrong with the
/// connection, the credentials or the schema for every row alike (an
/// `Invalid` answer cannot be told apart from a schema mismatch).
pub fn concerns_only_the_row(kind: StoreErrorKind) -> bool {
    match kind {
        StoreErrorKind::TooManyTombstones => true,
        StoreErrorKind::NotApplied
        | StoreErrorKind::MaybeApplied
        | StoreErrorKind::Unavailable
        | StoreErrorKind::Invalid
        | StoreErrorKind::SchemaMissing
        | StoreErrorKind::Connection
        | StoreErrorKind::Authentication => false,
        // A kind added later fails the census until it is judged here.
        _ => false,
    }
}

/// How long an unreadable row's reason may be in a census (bytes).
const REASON_MAX: usize = 300;

fn short_reason(e: &StoreError) -> String {
    let mut text = e.to_string();
    if text.len() > REASON_MAX {
        let mut end = REASON_MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// How a census pages through row keys and what counts as stale.
#[derive(Clone, Copy, Debug)]
pub struct CensusOptions {
    /// Cells not renewed for longer than their threshold are stale.
    pub stale_after: Staleness,
    /// How far an owner's clock may be behind the observer's
    /// (`rollout.clock_skew_margin`): ages judged against an owner's
    /// promise allow for it ([`lease_over`]).
    pub clock_skew_margin: Duration,
    /// Row keys per scan page.
    pub page_size: NonZeroU32,
}

/// Reads one lock's cells in all three tables.
///
/// # Errors
/// The store error.
pub async fn inspect_lock(
    store: &dyn Store,
    clock: &dyn Clock,
    nodes: &[LiveNode],
    lock: &str,
    options: CensusOptions,
) -> Result<Vec<CensusCell>, StoreError> {
    let registry = Registry::of(nodes);
    let now = clock.now();
    let mut out = Vec::new();
    for table in [schema::MAIN, schema::SHADOW, schema::QUEUE] {
        let cells = store.read(table, lock, &RowQuery::all()).await?;
        out.extend(classify_row(table, lock, cells, &registry, now, &options));
    }
    Ok(out)
}

/// Takes a census of every lock, calling `progress(table, rows_done)` after
/// each page. A row the database refuses to read
/// ([`concerns_only_the_row`]) is recorded in [`Census::unreadable`] and
/// the census goes on with the others.
///
/// # Errors
/// The first store error that concerns the store, not one row.
pub async fn take_census(
    store: &dyn Store,
    clock: &dyn Clock,
    nodes: &[LiveNode],
    options: CensusOptions,
    mut progress: impl FnMut(Table, usize),
) -> Result<Census, StoreError> {
    let registry = Registry::of(nodes);
    let mut census = Census {
        cells: Vec::new(),
        taken_at: clock.now(),
        unreadable: Vec::new(),
    };
    let tables = [schema::MAIN, schema::SHADOW, schema::QUEUE];
    // Per table, the rows read; the tables whose key scan was refused.
    let mut read: BTreeMap<Table, BTreeSet<String>> = BTreeMap::new();
    let mut scan_refused = Vec::new();
    for table in tables {
        let mut cursor = None;
        let mut rows = 0;
        let mut page_size = options.page_size;
        loop {
            let page = match store.scan_keys(table, cursor.as_ref(), page_size).await {
                Ok(page) => page,
                // A scan passes each row's tombstones up to its first live
                // cell, and a page fails as a whole: page by one key to
                // keep the rows before the refused one.
                Err(e) if concerns_only_the_row(e.kind()) && page_size.get() > 1 => {
                    page_size = NonZeroU32::MIN;
                    continue;
                }
                // A row of tombstones alone refuses the scan, which cannot
                // say whose row it was nor go past it.
                Err(e) if concerns_only_the_row(e.kind()) => {
                    census.unreadable.push(UnreadableRow {
                        table,
                        lock: None,
                        reason: short_reason(&e),
                    });
                    scan_refused.push(table);
                    break;
                }
                Err(e) => return Err(e),
            };
            for lock in &page.keys {
                read_row(&mut census, store, clock, &registry, &options, table, lock).await?;
                read.entry(table).or_default().insert(lock.clone());
            }
            rows += page.keys.len();
            progress(table, rows);
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
    }
    // A table whose scan was refused: read its row of every lock seen in
    // the others, so a row the database refuses is named.
    let seen: BTreeSet<String> = read.values().flatten().cloned().collect();
    for table in scan_refused {
        let done = read.remove(&table).unwrap_or_default();
        for lock in seen.difference(&done) {
            read_row(&mut census, store, clock, &registry, &options, table, lock).await?;
        }
    }
    Ok(census)
}

/// Reads `lock`'s row of `table` into `census` — or, when the database
/// refuses that row alone, records it as unreadable.
async fn read_row(
    census: &mut Census,
    store: &dyn Store,
    clock: &dyn Clock,
    registry: &Registry,
    options: &CensusOptions,
    table: Table,
    lock: &str,
) -> Result<(), StoreError> {
    match store.read(table, lock, &RowQuery::all()).await {
        Ok(cells) => {
            census.cells.extend(classify_row(
                table,
                lock,
                cells,
                registry,
                clock.now(),
                options,
            ));
            Ok(())
        }
        Err(e) if concerns_only_the_row(e.kind()) => {
            census.unreadable.push(UnreadableRow {
                table,
                lock: Some(lock.to_string()),
                reason: short_reason(&e),
            });
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// The registry as cells are matched against it.
#[derive(Debug, Default)]
struct Registry {
    /// Node ids with any row.
    nodes: BTreeSet<String>,
    /// Each process with a row (node id, incarnation), and its promise.
    processes: BTreeMap<(String, Incarnation), Option<LeasePromise>>,
    /// Node ids with a row that names no process (a build that predates
    /// incarnations, or an incarnation that does not parse).
    unnamed: BTreeSet<String>,
}

impl Registry {
    fn of(nodes: &[LiveNode]) -> Self {
        let mut r = Registry::default();
        for n in nodes {
            r.nodes.insert(n.info.node.clone());
            match n.info.incarnation.as_deref().map(str::parse::<Incarnation>) {
                Some(Ok(incarnation)) => {
                    r.processes
                        .insert((n.info.node.clone(), incarnation), n.info.lease);
                }
                _ => {
                    r.unnamed.insert(n.info.node.clone());
                }
            }
        }
        r
    }
}

/// Who wrote a cell, matched against the registry: only a lockshift-shaped
/// owner id with a lockshift value is lockshift's.
fn classify(column_owner: &str, value: &[u8], registry: &Registry) -> CellOwner {
    // Only a lockshift-shaped owner id with a lockshift value is
    // lockshift's; anything else was written by something older.
    let id = OwnerId::from_stored(column_owner);
    match (lockshift_writer(column_owner, value), id.node()) {
        (Some((algorithm, reserved)), Some(node)) => {
            let process = id
                .incarnation()
                .and_then(|i| registry.processes.get(&(node.to_string(), i)));
            CellOwner {
                owner: column_owner.to_string(),
                registered: registry.nodes.contains(node),
                process_live: process.is_some() || registry.unnamed.contains(node),
                promise: process.copied().flatten(),
                node: Some(node.to_string()),
                algorithm: Some(algorithm),
                reserved,
            }
        }
        _ => CellOwner {
            owner: column_owner.to_string(),
            node: None,
            registered: false,
            process_live: false,
            promise: None,
            algorithm: None,
            reserved: false,
        },
    }
}

fn classify_row(
    table: Table,
    lock: &str,
    cells: Vec<Cell>,
    registry: &Registry,
    now: Timestamp,
    options: &CensusOptions,
) -> Vec<CensusCell> {
    let mut live_position = 0;
    let mut out = Vec::with_capacity(cells.len());
    // Queue cells in line order: by arrival (in the value, or the column of
    // the thesis' layout), then owner id.
    let mut cells: Vec<(Option<u64>, Cell)> = cells
        .into_iter()
        .map(|c| {
            let arrival = (table == schema::QUEUE)
                .then(|| parse_queue_cell(&c.column, &c.value).map(|e| e.arrival))
                .flatten();
            (arrival, c)
        })
        .collect();
    if table == schema::QUEUE {
        cells.sort_by(|(a, ca), (b, cb)| {
            (a.unwrap_or(0), &ca.column).cmp(&(b.unwrap_or(0), &cb.column))
        });
    }
    for (queued_at, cell) in cells {
        let age = now.duration_since(cell.writetime);
        // Queue cells are judged by the waiters' threshold whoever wrote
        // them: it is the one waiters skip them by.
        let stale = age > options.stale_after.waiting;
        let owner = if table == schema::QUEUE {
            let position = if stale {
                None
            } else {
                live_position += 1;
                Some(live_position - 1)
            };
            let owner = match parse_queue_cell(&cell.column, &cell.value) {
                // A queue cell says its algorithm in its own way; classify
                // it as the same owner's `main` cell would be.
                Some(entry) => classify(
                    entry.owner.as_str(),
                    entry.algorithm.map_or(&b""[..], |a| a.as_str().as_bytes()),
                    registry,
                ),
                None => classify(&cell.column, &cell.value, registry),
            };
            (owner, position)
        } else {
            (classify(&cell.column, &cell.value, registry), None)
        };
        let (owner, queue_position) = owner;
        let stale = if table == schema::QUEUE {
            stale
        } else {
            age > options.stale_after.for_cell(table, &owner)
        };
        let lease_over = lease_over(age, owner.promise, options.clock_skew_margin);
        out.push(CensusCell {
            table,
            lock: lock.to_string(),
            owner,
            column: cell.column,
            writetime: cell.writetime,
            age,
            ttl_left: cell.ttl,
            queue_position,
            queued_at,
            stale,
            lease_over,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use lockshift_store::{CellWrite, ManualClock, MemoryStore, WriteOptions};

    use super::*;
    use lockshift_lock::Algorithm;

    #[tokio::test]
    async fn cells_are_classified_by_owner_shape_value_and_age() {
        let clock = ManualClock::new(Timestamp::from_micros(100_000_000));
        let store = MemoryStore::new();
        let put =
            |table, lock: &'static str, column: &'static str, value: &'static str, at: i64| {
                let store = &store;
                async move {
                    store
                        .write(
                            table,
                            lock,
                            &[CellWrite::new(column, value.as_bytes().to_vec())],
                            WriteOptions::at(Timestamp::from_micros(at)),
                        )
                        .await
                        .unwrap();
                }
            };
        let now = 100_000_000;
        put(
            schema::MAIN,
            "a",
            "n1/0000000000000001",
            "queue",
            now - 1_000_000,
        )
        .await;
        put(
            schema::MAIN,
            "b",
            "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
            "whatever",
            now - 2_000_000,
        )
        .await;
        put(
            schema::SHADOW,
            "b",
            "n2/0000000000000002",
            "legacy",
            now - 50_000_000,
        )
        .await;
        put(
            schema::QUEUE,
            "a",
            "00000000000000000001n1/0000000000000001",
            "queue",
            now - 1_000_000,
        )
        .await;
        put(
            schema::QUEUE,
            "a",
            "00000000000000000002n3/0000000000000003",
            "combined",
            now - 1_000_000,
        )
        .await;
        put(
            schema::MAIN,
            "c",
            "n4/0000000000000004",
            "queue:reserved",
            now - 1_000_000,
        )
        .await;
        // A combined waiter second in line, reserved behind n4 in both tables.
        for table in [schema::MAIN, schema::SHADOW] {
            put(
                table,
                "c",
                "n5/0000000000000005",
                "combined:reserved:n4/0000000000000004",
                now - 1_000_000,
            )
            .await;
        }
        // The reserving waiter is first in line: holders leave the queue, so
        // position 0 is a waiter here.
        put(
            schema::QUEUE,
            "c",
            "00000000000000000003n4/0000000000000004",
            "queue",
            now - 2_000_000,
        )
        .await;
        let census = take_census(
            &store,
            &clock,
            &[],
            CensusOptions {
                stale_after: Staleness::uniform(Duration::from_secs(30)),
                clock_skew_margin: Duration::from_secs(5),
                page_size: NonZeroU32::new(1).unwrap(),
            },
            |_, _| {},
        )
        .await
        .unwrap();
        assert_eq!(census.cells.len(), 9);
        let reservation = census
            .in_table(schema::MAIN)
            .find(|c| c.lock == "c" && c.column.starts_with("n4/"))
            .unwrap();
        assert!(
            reservation.owner.reserved && reservation.owner.algorithm == Some(Algorithm::Queue)
        );
        for behind in census.cells.iter().filter(|c| c.column.starts_with("n5/")) {
            assert!(
                behind.owner.reserved && behind.owner.algorithm == Some(Algorithm::Combined),
                "{behind:?}"
            );
        }
        assert!(
            census.held().all(|c| c.lock != "c"),
            "a reservation is not a holding"
        );
        let legacy: Vec<&str> = census
            .legacy_activity()
            .map(|c| c.column.as_str())
            .collect();
        assert_eq!(
            legacy,
            [
                "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
                "n2/0000000000000002"
            ]
        );
        assert_eq!(census.held_by(Algorithm::Queue).count(), 1);
        let stale: Vec<&str> = census.stale().map(|c| c.column.as_str()).collect();
        assert_eq!(stale, ["n2/0000000000000002"]);
        let waiting = census.waiting();
        assert_eq!(waiting.len(), 2, "{waiting:?}");
        assert_eq!(
            waiting[0].owner.owner, "n4/0000000000000004",
            "the oldest first"
        );
        assert_eq!(waiting[1].owner.owner, "n3/0000000000000003");
        assert_eq!(waiting[1].owner.algorithm, Some(Algorithm::Combined));
        assert!(
            waiting
                .iter()
                .all(|c| c.owner.owner != "n1/0000000000000001"),
            "the holder's queue cell is not a waiter"
        );
        assert_eq!(
            holders_by_algorithm(&census)[&None],
            1,
            "the foreign holder"
        );
    }
    /// Issue 18 item 4: one lock whose row the database refuses to read
    /// does not blind the census to the others.
    #[tokio::test]
    async fn a_row_the_database_refuses_is_recorded_and_the_census_goes_on() {
        use lockshift_store::TombstoneThresholds;
        let now = 100_000_000;
        let clock = ManualClock::new(Timestamp::from_micros(now));
        let store =
            MemoryStore::new().with_tombstone_thresholds(TombstoneThresholds { warn: 5, fail: 10 });
        let gone: Vec<String> = (0..20).map(|i| format!("gone-{i:02}")).collect();
        let cells: Vec<CellWrite> = gone
            .iter()
            .map(|c| CellWrite::new(c.clone(), b"queue".to_vec()))
            .collect();
        let at = |us| WriteOptions::at(Timestamp::from_micros(us));
        store
            .write(schema::QUEUE, "jammed", &cells, at(now - 2_000_000))
            .await
            .unwrap();
        store
            .delete(
                schema::QUEUE,
                "jammed",
                &gone,
                Timestamp::from_micros(now - 1_000_000),
            )
            .await
            .unwrap();
        // And in `main`, after the holdings, a row of tombstones alone.
        store
            .write(schema::MAIN, "zz-jammed", &cells, at(now - 2_000_000))
            .await
            .unwrap();
        store
            .delete(
                schema::MAIN,
                "zz-jammed",
                &gone,
                Timestamp::from_micros(now - 1_000_000),
            )
            .await
            .unwrap();
        for lock in ["fine", "jammed"] {
            store
                .write(
                    schema::MAIN,
                    lock,
                    &[CellWrite::new("n1/0000000000000001", b"queue".to_vec())],
                    at(now - 1_000_000),
                )
                .await
                .unwrap();
        }
        let census = take_census(
            &store,
            &clock,
            &[],
            CensusOptions {
                stale_after: Staleness::uniform(Duration::from_secs(30)),
                clock_skew_margin: Duration::from_secs(5),
                page_size: NonZeroU32::new(500).unwrap(),
            },
            |_, _| {},
        )
        .await
        .unwrap();
        let held: Vec<&str> = census.held().map(|c| c.lock.as_str()).collect();
        // The page of 500 keys of `main` is refused at zz-jammed; paged by
        // one key, the scan keeps the rows before it.
        assert_eq!(held, ["fine", "jammed"], "both main rows were read");
        // The queue's key scan meets the row of tombstones first and is
        // refused; the queue row of each lock `main` names is then read,
        // and the refusal of jammed's is named.
        let unreadable: Vec<(Table, Option<&str>)> = census
            .unreadable
            .iter()
            .map(|r| (r.table, r.lock.as_deref()))
            .collect();
        assert_eq!(
            unreadable,
            [(schema::QUEUE, None), (schema::QUEUE, Some("jammed"))]
        );
        let row = &census.unreadable[1];
        assert!(row.reason.contains("too many tombstones"), "{}", row.reason);
        assert!(
            row.describe()
                .starts_with("lock \"jammed\" (table queue): "),
            "{}",
            row.describe()
        );
    }

    #[test]
    fn only_the_tombstone_refusal_concerns_one_row() {
        use StoreErrorKind::*;
        for (kind, row_only) in [
            (TooManyTombstones, true),
            (NotApplied, false),
            (MaybeApplied, false),
            (Unavailable, false),
            (Invalid, false),
            (SchemaMissing, false),
            (Connection, false),
            (Authentication, false),
        ] {
            assert_eq!(concerns_only_the_row(kind), row_only, "{kind:?}");
        }
    }

    /// Issue 23: a cell is matched to its own process's registry row (node
    /// id and incarnation), never to another process of the same node id;
    /// a row that names no process (a build before incarnations) counts
    /// for liveness only; by its own process's promise a cell is known to
    /// have outlived its lease — allowing for the skew margin.
    #[tokio::test]
    async fn cells_are_matched_to_their_own_process() {
        use crate::registry::NodeInfo;
        use lockshift_lock::NodeId;
        let now = 100_000_000;
        let clock = ManualClock::new(Timestamp::from_micros(now));
        let store = MemoryStore::new();
        let (mine, other) = (Incarnation::from_seed(1), Incarnation::from_seed(2));
        let web = NodeId::new("web").unwrap();
        let owner = |i, slot| OwnerId::for_slot(&web, i, slot).as_str().to_string();
        let promise = |ttl_s: u64, renew_s: u64| LeasePromise {
            ttl_ms: ttl_s * 1000,
            renew_every_ms: renew_s * 1000,
        };
        let row = |node: &str, incarnation: Option<Incarnation>, lease| LiveNode {
            column: node.to_string(),
            info: NodeInfo {
                node: node.to_string(),
                version: "0.1.0".into(),
                configured_mode: crate::Mode::Combined,
                effective: Algorithm::Combined,
                degraded: false,
                seen_stage: None,
                seen_version: None,
                started_at: 0,
                incarnation: incarnation.map(|i| i.to_string()),
                last_used: BTreeMap::new(),
                lease,
                acting_version: None,
                bound: BTreeMap::new(),
                view_expired: false,
            },
            heartbeat_at: Timestamp::from_micros(now),
            ttl_left: None,
        };
        // web/other announces TTL 4 s; web/mine has no row; "old" has a row
        // without an incarnation.
        let nodes = [
            row("web", Some(other), Some(promise(4, 1))),
            row("old", None, Some(promise(4, 1))),
        ];
        let cells = [
            ("a", owner(mine, 0), 20),
            ("b", owner(other, 0), 7),
            ("c", owner(other, 1), 11),
            ("d", "old/0000000100000000".to_string(), 20),
        ];
        for (lock, column, age_s) in &cells {
            store
                .write(
                    schema::MAIN,
                    lock,
                    &[CellWrite::new(column.clone(), b"queue".to_vec())],
                    WriteOptions::at(Timestamp::from_micros(now - age_s * 1_000_000)),
                )
                .await
                .unwrap();
        }
        let census = take_census(
            &store,
            &clock,
            &nodes,
            CensusOptions {
                stale_after: Staleness::uniform(Duration::from_secs(30)),
                clock_skew_margin: Duration::from_secs(5),
                page_size: NonZeroU32::new(10).unwrap(),
            },
            |_, _| {},
        )
        .await
        .unwrap();
        let seen: Vec<(&str, bool, bool, Option<u64>, bool)> = census
            .cells
            .iter()
            .map(|c| {
                (
                    c.lock.as_str(),
                    c.owner.registered,
                    c.owner.process_live,
                    c.owner.promise.map(|p| p.ttl_ms),
                    c.lease_over,
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                // Another process's row: the node id is registered, the
                // owner's process is not, and the promise is not its own.
                ("a", true, false, None, false),
                // Its own process's promise: life 2.75 s. 7 s − the 5 s
                // margin is within it, 11 s − 5 s is not.
                ("b", true, true, Some(4000), false),
                ("c", true, true, Some(4000), true),
                // A row without an incarnation: live, but no promise.
                ("d", true, true, None, false),
            ]
        );
        assert!(!lease_over(
            Duration::from_secs(7),
            Some(promise(4, 1)),
            Duration::from_secs(5)
        ));
        assert!(lease_over(
            Duration::from_millis(7_800),
            Some(promise(4, 1)),
            Duration::from_secs(5)
        ));
        assert!(!lease_over(Duration::from_secs(600), None, Duration::ZERO));
    }
}
