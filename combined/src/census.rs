//! A census of lock cells: every cell of `main`, `shadow` and `queue`,
//! classified by algorithm, owner and age — for rollout guards, `migrate
//! status`, `inspect` and `clean`.
//!
//! Binaries that predate lockshift do not register and do not name their
//! cells lockshift's way; a cell whose owner is not `node/<16 hex digits>`, or whose
//! value says `legacy`, is legacy activity.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU32;
use std::time::Duration;

use lockshift_lock::{Algorithm, OwnerId, lockshift_writer};
use lockshift_queue_lock::queue::parse_queue_cell;
use lockshift_store::{Cell, Clock, RowQuery, Store, StoreError, Table, Timestamp, schema};
use serde::Serialize;

use crate::registry::LiveNode;

/// Who wrote a cell, as far as can be told.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CellOwner {
    /// The owner id (the column; for a queue cell of the thesis' layout,
    /// the column's suffix).
    pub owner: String,
    /// The lockshift node in the owner id, if it has lockshift's shape.
    pub node: Option<String>,
    /// Whether that node is in the registry now.
    pub registered: bool,
    /// The algorithm the value names; `None` for a foreign value (an old
    /// binary).
    pub algorithm: Option<Algorithm>,
    /// A waiter's reservation (waiting, not holding): a queue waiter's in
    /// `main`, or a queue or combined waiter's reserved behind the waiter
    /// ahead (in `main`, and for combined also in `shadow`).
    pub reserved: bool,
}

impl CellOwner {
    fn classify(column_owner: &str, value: &[u8], registered: &BTreeSet<String>) -> Self {
        // Only a lockshift-shaped owner id with a lockshift value is
        // lockshift's; anything else was written by something older.
        let node = OwnerId::from_stored(column_owner)
            .node()
            .map(str::to_string);
        match (lockshift_writer(column_owner, value), node) {
            (Some((algorithm, reserved)), Some(node)) => CellOwner {
                owner: column_owner.to_string(),
                registered: registered.contains(&node),
                node: Some(node),
                algorithm: Some(algorithm),
                reserved,
            },
            _ => CellOwner {
                owner: column_owner.to_string(),
                node: None,
                registered: false,
                algorithm: None,
                reserved: false,
            },
        }
    }

    /// Whether the cell is evidence of the legacy algorithm: written by
    /// lockshift's legacy mode or by something that is not lockshift.
    pub fn is_legacy_activity(&self) -> bool {
        matches!(self.algorithm, None | Some(Algorithm::Legacy))
    }
}

/// One cell as the census saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CensusCell {
    /// The table.
    #[serde(serialize_with = "serialize_table")]
    pub table: Table,
    /// The lock (row key).
    pub lock: String,
    /// The column.
    pub column: String,
    /// Who wrote it.
    pub owner: CellOwner,
    /// Its write time.
    pub writetime: Timestamp,
    /// Time since it was last written (renewed), by the observer's clock.
    pub age: Duration,
    /// TTL left, if any.
    pub ttl_left: Option<Duration>,
    /// Queue cells: the position among the lock's live queue cells (0 = head).
    pub queue_position: Option<usize>,
    /// Queue cells: when the waiter arrived (µs, by the time service).
    pub queued_at: Option<u64>,
    /// Not renewed for longer than the staleness threshold.
    pub stale: bool,
}

fn serialize_table<S: serde::Serializer>(t: &Table, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(t.name())
}

/// Everything the census found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Census {
    /// Every cell of `main`, `shadow` and `queue`, by table, lock, column.
    pub cells: Vec<CensusCell>,
    /// When the census was taken.
    pub taken_at: Timestamp,
}

impl Census {
    /// Cells of `table`.
    pub fn in_table(&self, table: Table) -> impl Iterator<Item = &CensusCell> {
        self.cells.iter().filter(move |c| c.table == table)
    }

    /// Holders in `main` (reservations of queue waiters excluded).
    pub fn held(&self) -> impl Iterator<Item = &CensusCell> {
        self.in_table(schema::MAIN).filter(|c| !c.owner.reserved)
    }

    /// Queue cells of waiters, with the oldest first (see [`waiters`]).
    pub fn waiting(&self) -> Vec<&CensusCell> {
        let mut w = waiters(&self.cells);
        w.sort_by_key(|c| std::cmp::Reverse(c.age));
        w
    }

    /// Cells in `main` or `shadow` that are evidence of legacy activity now.
    pub fn legacy_activity(&self) -> impl Iterator<Item = &CensusCell> {
        self.cells
            .iter()
            .filter(|c| c.table != schema::QUEUE && c.owner.is_legacy_activity())
    }

    /// Cells in `main` held by `algorithm`.
    pub fn held_by(&self, algorithm: Algorithm) -> impl Iterator<Item = &CensusCell> {
        self.held()
            .filter(move |c| c.owner.algorithm == Some(algorithm))
    }

    /// Stale cells.
    pub fn stale(&self) -> impl Iterator<Item = &CensusCell> {
        self.cells.iter().filter(|c| c.stale)
    }
}

/// What counts as stale: waiters' cells (queue cells and reservations,
/// rewritten every `lock.queue.waiting_renew_every`) and holdings (renewed
/// every `lock.renew_every`) are judged each by their own period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Staleness {
    /// Waiters' cells not rewritten for longer than this are stale (the
    /// threshold waiters skip queue cells by, `lock.queue.stale_after`).
    pub waiting: Duration,
    /// Holdings (and cells of binaries that predate lockshift) not renewed
    /// for longer than this are stale.
    pub holding: Duration,
}

impl Staleness {
    /// One threshold for every cell.
    pub fn uniform(after: Duration) -> Staleness {
        Staleness {
            waiting: after,
            holding: after,
        }
    }

    /// The fleet's thresholds: `lock.queue.stale_after` for waiters' cells,
    /// three `lock.renew_every` periods for holdings.
    pub fn of(
        queue: &lockshift_queue_lock::QueueSettings,
        lease: &lockshift_lock::LeaseSettings,
    ) -> Staleness {
        Staleness {
            waiting: queue.stale_after(lease),
            holding: lockshift_queue_lock::QueueSettings::holder_stale_after(lease),
        }
    }

    /// The threshold for a cell of `table` written by `owner`.
    fn for_cell(&self, table: Table, owner: &CellOwner) -> Duration {
        if table == schema::QUEUE || owner.reserved {
            self.waiting
        } else {
            self.holding
        }
    }
}

/// How a census pages through row keys and what counts as stale.
#[derive(Clone, Copy, Debug)]
pub struct CensusOptions {
    /// Cells not renewed for longer than their threshold are stale.
    pub stale_after: Staleness,
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
    stale_after: Staleness,
) -> Result<Vec<CensusCell>, StoreError> {
    let registered = registered(nodes);
    let now = clock.now();
    let mut out = Vec::new();
    for table in [schema::MAIN, schema::SHADOW, schema::QUEUE] {
        let cells = store.read(table, lock, &RowQuery::all()).await?;
        out.extend(classify_row(
            table,
            lock,
            cells,
            &registered,
            now,
            stale_after,
        ));
    }
    Ok(out)
}

/// Takes a census of every lock, calling `progress(table, rows_done)` after
/// each page.
///
/// # Errors
/// The first store error.
pub async fn take_census(
    store: &dyn Store,
    clock: &dyn Clock,
    nodes: &[LiveNode],
    options: CensusOptions,
    mut progress: impl FnMut(Table, usize),
) -> Result<Census, StoreError> {
    let registered = registered(nodes);
    let mut census = Census {
        cells: Vec::new(),
        taken_at: clock.now(),
    };
    for table in [schema::MAIN, schema::SHADOW, schema::QUEUE] {
        let mut cursor = None;
        let mut rows = 0;
        loop {
            let page = store
                .scan_keys(table, cursor.as_ref(), options.page_size)
                .await?;
            for lock in &page.keys {
                let cells = store.read(table, lock, &RowQuery::all()).await?;
                census.cells.extend(classify_row(
                    table,
                    lock,
                    cells,
                    &registered,
                    clock.now(),
                    options.stale_after,
                ));
            }
            rows += page.keys.len();
            progress(table, rows);
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
    }
    Ok(census)
}

fn registered(nodes: &[LiveNode]) -> BTreeSet<String> {
    nodes.iter().map(|n| n.info.node.clone()).collect()
}

fn classify_row(
    table: Table,
    lock: &str,
    cells: Vec<Cell>,
    registered: &BTreeSet<String>,
    now: Timestamp,
    stale_after: Staleness,
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
        let stale = age > stale_after.waiting;
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
                Some(entry) => CellOwner::classify(
                    entry.owner.as_str(),
                    entry.algorithm.map_or(&b""[..], |a| a.as_str().as_bytes()),
                    registered,
                ),
                None => CellOwner::classify(&cell.column, &cell.value, registered),
            };
            (owner, position)
        } else {
            (
                CellOwner::classify(&cell.column, &cell.value, registered),
                None,
            )
        };
        let (owner, queue_position) = owner;
        let stale = if table == schema::QUEUE {
            stale
        } else {
            age > stale_after.for_cell(table, &owner)
        };
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
        });
    }
    out
}

/// The live queue cells among `cells` whose owner does not hold its lock:
/// the waiters. A holder leaves the queue once it holds (its queue cell is
/// deleted right after its verifying read), but until that delete lands —
/// and for holders that predate that rule, which keep their queue cell at
/// the head for the whole hold — a holder's queue cell is in the queue too;
/// it is told apart by its owner's holding (not reserved) `main` cell.
pub fn waiters(cells: &[CensusCell]) -> Vec<&CensusCell> {
    let holders: BTreeSet<(&str, &str)> = cells
        .iter()
        .filter(|c| c.table == schema::MAIN && !c.owner.reserved)
        .map(|c| (c.lock.as_str(), c.owner.owner.as_str()))
        .collect();
    cells
        .iter()
        .filter(|c| {
            c.table == schema::QUEUE
                && c.queue_position.is_some()
                && !holders.contains(&(c.lock.as_str(), c.owner.owner.as_str()))
        })
        .collect()
}

/// Counts per algorithm of `main` holders (`None`: foreign).
pub fn holders_by_algorithm(census: &Census) -> BTreeMap<Option<Algorithm>, usize> {
    let mut out = BTreeMap::new();
    for c in census.held() {
        *out.entry(c.owner.algorithm).or_insert(0) += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use lockshift_store::{CellWrite, ManualClock, MemoryStore, WriteOptions};

    use super::*;

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
}
