//! The embedded backend: an in-process store with exact Cassandra semantics.
//!
//! It is the reference implementation of the [`Store`] contract and what tests,
//! the demo and the local CQL endpoint run on. One mutex guards all tables:
//! every operation is a few map look-ups, far below the cost of the tokio
//! scheduling around it, and a single lock makes each operation trivially
//! atomic, which is exactly the "one row, one write" guarantee.
//!
//! # Invariants
//!
//! - **E1.** A row maps each column to exactly one version: the winner of
//!   [`CellVersion::supersedes`] among everything ever written there, except
//!   dead versions purged after `gc_grace`.
//! - **E2.** TTL deadlines are computed from the store's clock when the write
//!   is applied, never from the write's timestamp, and in whole seconds:
//!   the start of that second plus the TTL (Cassandra's `localDeletionTime`;
//!   see [`ttl_deadline`]).

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroU32;
use std::ops::Bound;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;

use crate::api::Store;
use crate::cell::{
    Cell, CellWrite, KeyPage, OpKind, PageCursor, RowQuery, Table, Timestamp, WriteOptions,
    check_request,
};
use crate::clock::{SharedClock, SystemClock};
use crate::error::{StoreError, StoreErrorKind};
use crate::reconcile::{CellVersion, ttl_deadline, ttl_seconds_left};

type Row = BTreeMap<String, CellVersion>;
type TableData = BTreeMap<String, Row>;

/// The default time a dead cell is kept to shadow late, older writes.
///
/// Cassandra keeps tombstones for 10 days because repairs may deliver old
/// versions that late. Here the only late arrivals are writes stamped by a
/// lagging clock, so an hour covers any sane skew while keeping a benchmark's
/// queue row from growing without bound.
pub const DEFAULT_GC_GRACE: Duration = Duration::from_secs(3600);

/// The in-process store. Cheap to share behind an `Arc`; safe for any number
/// of concurrent tasks.
///
/// # Examples
///
/// ```
/// use lockshift_store::{CellWrite, MemoryStore, RowQuery, Store, Timestamp, WriteOptions, schema};
///
/// # tokio_test_block_on(async {
/// let store = MemoryStore::new();
/// let at = |us| WriteOptions::at(Timestamp::from_micros(us));
/// store.write(schema::MAIN, "lock-1", &[CellWrite::new("owner-a", b"x".to_vec())], at(10)).await?;
/// store.delete(schema::MAIN, "lock-1", &["owner-a".to_string()], Timestamp::from_micros(10)).await?;
/// // On a tie the tombstone wins.
/// assert!(store.read(schema::MAIN, "lock-1", &RowQuery::all()).await?.is_empty());
/// # Ok::<(), lockshift_store::StoreError>(())
/// # }).unwrap();
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Debug)]
pub struct MemoryStore {
    clock: SharedClock,
    gc_grace: Duration,
    tables: Mutex<HashMap<Table, TableData>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store on the system clock.
    pub fn new() -> Self {
        Self::with_clock(std::sync::Arc::new(SystemClock))
    }

    /// An empty store whose TTLs run on `clock`.
    pub fn with_clock(clock: SharedClock) -> Self {
        MemoryStore {
            clock,
            gc_grace: DEFAULT_GC_GRACE,
            tables: Mutex::new(HashMap::new()),
        }
    }

    /// This store keeping dead cells for `gc_grace` before forgetting them.
    pub fn with_gc_grace(mut self, gc_grace: Duration) -> Self {
        self.gc_grace = gc_grace;
        self
    }

    /// The store's clock.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// Every version held for `row` of `table`, dead ones included, in column
    /// order: for tests and the operator tool's forensic views.
    pub fn raw_row(&self, table: Table, row: &str) -> Vec<(String, CellVersion)> {
        self.lock()
            .get(&table)
            .and_then(|t| t.get(row))
            .map(|r| r.iter().map(|(c, v)| (c.clone(), v.clone())).collect())
            .unwrap_or_default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Table, TableData>> {
        // No code path panics while holding the lock, but if one ever did the
        // maps are still consistent (every mutation is a single insert), so
        // carry on rather than poison every later operation.
        self.tables.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn apply(
        &self,
        table: Table,
        row: &str,
        incoming: impl Iterator<Item = (String, CellVersion)>,
    ) {
        let now = self.clock.now();
        let mut tables = self.lock();
        let cells = tables
            .entry(table)
            .or_default()
            .entry(row.to_string())
            .or_default();
        for (column, version) in incoming {
            match cells.get_mut(&column) {
                Some(existing) => {
                    if version.supersedes(existing, now) {
                        *existing = version;
                    }
                }
                None => {
                    cells.insert(column, version);
                }
            }
        }
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn write(
        &self,
        table: Table,
        row: &str,
        cells: &[CellWrite],
        options: WriteOptions,
    ) -> Result<(), StoreError> {
        check_request(
            OpKind::Write,
            table,
            row,
            cells.iter().map(|c| c.column.as_str()),
            None,
        )?;
        if cells.is_empty() {
            return Ok(());
        }
        // E2: the deadline starts from the store's clock, at the whole
        // second as Cassandra counts it.
        let now = self.clock.now();
        let expires_at = options.ttl.map(|ttl| ttl_deadline(now, ttl.as_duration()));
        self.apply(
            table,
            row,
            cells.iter().map(|c| {
                (
                    c.column.clone(),
                    CellVersion::Live {
                        value: c.value.clone(),
                        timestamp: options.timestamp,
                        expires_at,
                    },
                )
            }),
        );
        Ok(())
    }

    async fn delete(
        &self,
        table: Table,
        row: &str,
        columns: &[String],
        timestamp: Timestamp,
    ) -> Result<(), StoreError> {
        check_request(
            OpKind::Delete,
            table,
            row,
            columns.iter().map(String::as_str),
            None,
        )?;
        if columns.is_empty() {
            return Ok(());
        }
        let deleted_at = self.clock.now();
        self.apply(
            table,
            row,
            columns.iter().map(|c| {
                (
                    c.clone(),
                    CellVersion::Tombstone {
                        timestamp,
                        deleted_at,
                    },
                )
            }),
        );
        Ok(())
    }

    async fn read(
        &self,
        table: Table,
        row: &str,
        query: &RowQuery,
    ) -> Result<Vec<Cell>, StoreError> {
        check_request(OpKind::Read, table, row, [], query.start_column.as_deref())?;
        let now = self.clock.now();
        let limit = query.limit.map_or(usize::MAX, |n| n.get() as usize);
        let mut tables = self.lock();
        let Some(cells) = tables.get_mut(&table).and_then(|t| t.get_mut(row)) else {
            return Ok(Vec::new());
        };
        let lower = match &query.start_column {
            Some(start) => Bound::Included(start.clone()),
            None => Bound::Unbounded,
        };
        let mut out = Vec::new();
        let mut purgeable = Vec::new();
        for (column, version) in cells.range((lower, Bound::Unbounded)) {
            if out.len() >= limit {
                break;
            }
            match version.live_value(now) {
                Some((value, expires_at)) => out.push(Cell {
                    column: column.clone(),
                    value: value.to_vec(),
                    writetime: version.timestamp(),
                    ttl: expires_at
                        .map(|at| Duration::from_secs(u64::from(ttl_seconds_left(at, now)))),
                }),
                None if version.is_purgeable(now, self.gc_grace) => purgeable.push(column.clone()),
                None => {}
            }
        }
        // E1: dead versions past gc_grace can no longer shadow anything that
        // could still arrive; dropping them keeps queue rows from growing.
        for column in purgeable {
            cells.remove(&column);
        }
        Ok(out)
    }

    async fn scan_keys(
        &self,
        table: Table,
        cursor: Option<&PageCursor>,
        page_size: NonZeroU32,
    ) -> Result<KeyPage, StoreError> {
        let after = match cursor {
            Some(c) => Some(String::from_utf8(c.0.clone()).map_err(|_| {
                StoreError::new(
                    StoreErrorKind::Invalid,
                    OpKind::Scan,
                    Some(table),
                    "page cursor was not made by the embedded store",
                )
            })?),
            None => None,
        };
        let now = self.clock.now();
        let tables = self.lock();
        let Some(rows) = tables.get(&table) else {
            return Ok(KeyPage::default());
        };
        let lower = match after {
            Some(key) => Bound::Excluded(key),
            None => Bound::Unbounded,
        };
        let mut live_keys = rows
            .range((lower, Bound::Unbounded))
            .filter(|(_, cells)| cells.values().any(|v| v.is_live(now)))
            .map(|(key, _)| key);
        let keys: Vec<String> = live_keys
            .by_ref()
            .take(page_size.get() as usize)
            .cloned()
            .collect();
        let more = live_keys.next().is_some();
        let next = match keys.last() {
            Some(last) if more => Some(PageCursor(last.as_bytes().to_vec())),
            _ => None,
        };
        Ok(KeyPage { keys, next })
    }

    fn describe(&self) -> String {
        "embedded".to_string()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::ManualClock;
    use crate::schema::SCRATCH;
    use crate::{Ttl, schema};

    fn store() -> (Arc<ManualClock>, MemoryStore) {
        let clock = Arc::new(ManualClock::new(Timestamp::from_micros(1_000_000_000)));
        let store = MemoryStore::with_clock(clock.clone()).with_gc_grace(Duration::from_secs(10));
        (clock, store)
    }

    #[tokio::test]
    async fn dead_cells_are_purged_only_after_gc_grace() {
        let (clock, store) = store();
        let ts = Timestamp::from_micros(50);
        store
            .write(
                SCRATCH,
                "r",
                &[CellWrite::new("c", b"v".to_vec())],
                WriteOptions::at(ts),
            )
            .await
            .unwrap();
        store.delete(SCRATCH, "r", &["c".into()], ts).await.unwrap();
        store.read(SCRATCH, "r", &RowQuery::all()).await.unwrap();
        assert_eq!(
            store.raw_row(SCRATCH, "r").len(),
            1,
            "tombstone kept within grace"
        );
        clock.advance(Duration::from_secs(11));
        store.read(SCRATCH, "r", &RowQuery::all()).await.unwrap();
        assert!(
            store.raw_row(SCRATCH, "r").is_empty(),
            "tombstone purged after grace"
        );
    }

    #[tokio::test]
    async fn remaining_ttl_is_whole_seconds_rounded_up() {
        let (clock, store) = store();
        let opts =
            WriteOptions::at(Timestamp::from_micros(1)).with_ttl(Ttl::from_secs(10).unwrap());
        store
            .write(
                schema::MAIN,
                "r",
                &[CellWrite::new("c", b"v".to_vec())],
                opts,
            )
            .await
            .unwrap();
        clock.advance(Duration::from_millis(2_500));
        let cells = store
            .read(schema::MAIN, "r", &RowQuery::all())
            .await
            .unwrap();
        assert_eq!(cells[0].ttl, Some(Duration::from_secs(8)));
    }

    #[tokio::test]
    async fn empty_keys_are_rejected_with_a_clear_error() {
        let (_, store) = store();
        let err = store
            .write(
                SCRATCH,
                "",
                &[CellWrite::new("c", b"v".to_vec())],
                WriteOptions::at(Timestamp::EPOCH),
            )
            .await
            .unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Invalid);
        assert!(
            err.to_string().contains("row key must not be empty"),
            "{err}"
        );
        let err = store
            .read(SCRATCH, "r", &RowQuery::all().starting_at(""))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("start column must not be empty"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn foreign_cursor_is_rejected() {
        let (_, store) = store();
        let err = store
            .scan_keys(
                SCRATCH,
                Some(&PageCursor(vec![0xff, 0xfe])),
                NonZeroU32::MIN,
            )
            .await
            .unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Invalid);
    }
}
