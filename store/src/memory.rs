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
//! - **E1.** A row maps each column to at most two versions: the winner of
//!   [`CellVersion::supersedes`] among the values written there, and the
//!   newest delete, kept only while it is older than that value (a newer
//!   delete drops the value) — dead versions purged after the table's gc
//!   grace. The visible cell is the value, if live. Keeping the losing
//!   delete is Cassandra's (a row deletion outlives the newer data it lost
//!   to, and costs reads once that data is gone).
//! - **E2.** TTL deadlines are computed from the store's clock when the write
//!   is applied, never from the write's timestamp, and in whole seconds:
//!   the start of that second plus the TTL (Cassandra's `localDeletionTime`;
//!   see [`ttl_deadline`]).
//! - **E3.** Every row holding a version that is or will be dead is queued
//!   for a sweep no later than that version's purge time
//!   ([`CellVersion::purge_time`]); a sweep forgets what is purgeable and
//!   re-queues the row. So memory holds only live cells and dead ones
//!   younger than gc grace (plus at most an eighth of it), whether or not
//!   anything reads them again. Reads never depend on the sweep: they count
//!   a dead version only while it is not purgeable (TB1–TB2 of
//!   [`crate::tombstones`]), and forget the purgeable ones they pass.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::num::NonZeroU32;
use std::ops::Bound;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;

use crate::api::{ReadOutcome, Store};
use crate::cell::{
    Cell, CellWrite, KeyPage, OpKind, PageCursor, RowQuery, Table, Timestamp, WriteOptions,
    check_request,
};
use crate::clock::{SharedClock, SystemClock};
use crate::error::{StoreError, StoreErrorKind};
use crate::reconcile::{CellVersion, ttl_deadline, ttl_seconds_left};
use crate::schema;
use crate::tombstones::{self, TombstoneThresholds};

/// One row: its columns, and when it is next swept for purgeable versions.
#[derive(Debug, Default)]
struct Row {
    cells: BTreeMap<String, Column>,
    /// The time this row is queued under in [`State::sweeps`], if it is.
    sweep_at: Option<Timestamp>,
}

/// One column: its winning written version and its newest delete, kept
/// apart as Cassandra keeps a row's data and its row deletion (E1).
///
/// A delete older than the value it meets loses — the value stays
/// visible — but the tombstone is not dropped: once the value is gone
/// (expired and purged), that tombstone costs every read until its own
/// purge time. Measured on Cassandra 4.1.1 ([`crate::tombstones`] (c)).
#[derive(Clone, Debug, Default)]
struct Column {
    /// A `Live` version (visible or expired), newer than `deletion`.
    value: Option<CellVersion>,
    /// The newest `Tombstone`.
    deletion: Option<CellVersion>,
}

impl Column {
    /// Merges `incoming`; whether it was kept.
    fn apply(&mut self, incoming: CellVersion, now: Timestamp, grace: Duration) -> bool {
        // TB1: what is past gc grace is forgotten before a write meets it.
        self.purge(now, grace);
        match incoming {
            CellVersion::Tombstone { .. } => {
                // A delete at T hides every version at or before T.
                if self
                    .value
                    .as_ref()
                    .is_some_and(|v| v.timestamp() <= incoming.timestamp())
                {
                    self.value = None;
                }
                let newer = self
                    .deletion
                    .as_ref()
                    .is_none_or(|d| incoming.supersedes(d, now));
                if newer {
                    self.deletion = Some(incoming);
                }
                newer
            }
            CellVersion::Live { .. } => {
                // Ties go to the tombstone.
                if self
                    .deletion
                    .as_ref()
                    .is_some_and(|d| d.timestamp() >= incoming.timestamp())
                {
                    return false;
                }
                let wins = self
                    .value
                    .as_ref()
                    .is_none_or(|v| incoming.supersedes(v, now));
                if wins {
                    self.value = Some(incoming);
                }
                wins
            }
        }
    }

    /// The visible version, if any.
    fn live(&self, now: Timestamp) -> Option<&CellVersion> {
        self.value.as_ref().filter(|v| v.is_live(now))
    }

    /// TB2: the tombstones this column costs a read passing it: one while
    /// it is dead and something dead in it is not yet purgeable
    /// (Cassandra counts a row's dead cells, else its deletion, once).
    fn tombstones(&self, now: Timestamp, grace: Duration) -> u64 {
        if self.live(now).is_some() {
            return 0;
        }
        let costs =
            |v: &Option<CellVersion>| v.as_ref().is_some_and(|v| !v.is_purgeable(now, grace));
        u64::from(costs(&self.value) || costs(&self.deletion))
    }

    /// Whether [`purge`](Self::purge) would forget anything.
    fn has_purgeable(&self, now: Timestamp, grace: Duration) -> bool {
        self.versions().any(|v| v.is_purgeable(now, grace))
    }

    /// Forgets what is past gc grace.
    fn purge(&mut self, now: Timestamp, grace: Duration) {
        for slot in [&mut self.value, &mut self.deletion] {
            if slot.as_ref().is_some_and(|v| v.is_purgeable(now, grace)) {
                *slot = None;
            }
        }
    }

    /// When something here becomes purgeable next.
    fn purge_time(&self, grace: Duration) -> Option<Timestamp> {
        self.versions().filter_map(|v| v.purge_time(grace)).min()
    }

    fn is_empty(&self) -> bool {
        self.value.is_none() && self.deletion.is_none()
    }

    fn versions(&self) -> impl Iterator<Item = &CellVersion> {
        self.value.iter().chain(self.deletion.iter())
    }
}

type TableData = BTreeMap<String, Row>;

/// The largest tombstone counts seen, per table.
#[derive(Clone, Copy, Debug, Default)]
struct TombstoneStats {
    max_per_read: u64,
    max_per_scan: u64,
}

/// Everything behind the store's one mutex.
#[derive(Debug, Default)]
struct State {
    tables: HashMap<Table, TableData>,
    /// Rows to sweep, by the time they may next hold a purgeable version
    /// (E3). At most one entry per row: the row's `sweep_at`.
    sweeps: BTreeSet<(Timestamp, Table, String)>,
    stats: HashMap<Table, TombstoneStats>,
}

/// The in-process store. Cheap to share behind an `Arc`; safe for any number
/// of concurrent tasks.
///
/// # Tombstones, as on Cassandra
///
/// A delete, and a TTL cell once expired, stays a tombstone for its
/// table's gc grace — by default the table's `gc_grace_seconds` from
/// [`schema::options`], Cassandra's 10 days unless the schema says
/// otherwise — and every read that passes it counts it ([`crate::tombstones`]
/// TB1–TB4): above the warn threshold the [`ReadOutcome`] carries
/// Cassandra's warning, above the failure threshold the read fails with
/// [`StoreErrorKind::TooManyTombstones`]. Settings: [`with_gc_grace`],
/// [`with_table_gc_grace`], [`with_tombstone_thresholds`] (defaults 1 000 /
/// 100 000), [`with_keyspace`] (the keyspace named in warnings). Statistics
/// for tests: [`max_tombstones_per_read`], [`max_tombstones_per_scan`],
/// [`reset_tombstone_stats`].
///
/// [`with_gc_grace`]: MemoryStore::with_gc_grace
/// [`with_table_gc_grace`]: MemoryStore::with_table_gc_grace
/// [`with_tombstone_thresholds`]: MemoryStore::with_tombstone_thresholds
/// [`with_keyspace`]: MemoryStore::with_keyspace
/// [`max_tombstones_per_read`]: MemoryStore::max_tombstones_per_read
/// [`max_tombstones_per_scan`]: MemoryStore::max_tombstones_per_scan
/// [`reset_tombstone_stats`]: MemoryStore::reset_tombstone_stats
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
/// // On a tie the tombstone wins, and the read passed it.
/// let read = store.read_observed(schema::MAIN, "lock-1", &RowQuery::all()).await?;
/// assert!(read.cells.is_empty());
/// assert_eq!(read.tombstones, Some(1));
/// assert_eq!(store.max_tombstones_per_read(schema::MAIN), 1);
/// # Ok::<(), lockshift_store::StoreError>(())
/// # }).unwrap();
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Debug)]
pub struct MemoryStore {
    clock: SharedClock,
    /// Gc grace for every table, when set ([`MemoryStore::with_gc_grace`]).
    gc_grace_all: Option<Duration>,
    /// Gc grace per table, when set; wins over `gc_grace_all`.
    gc_grace_table: HashMap<Table, Duration>,
    thresholds: TombstoneThresholds,
    keyspace: String,
    state: Mutex<State>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

/// The keyspace an embedded store names in its warnings unless told
/// otherwise: the CQL backend's default.
pub const DEFAULT_KEYSPACE: &str = "lockshift";

impl MemoryStore {
    /// An empty store on the system clock.
    pub fn new() -> Self {
        Self::with_clock(std::sync::Arc::new(SystemClock))
    }

    /// An empty store whose TTLs run on `clock`.
    pub fn with_clock(clock: SharedClock) -> Self {
        MemoryStore {
            clock,
            gc_grace_all: None,
            gc_grace_table: HashMap::new(),
            thresholds: TombstoneThresholds::default(),
            keyspace: DEFAULT_KEYSPACE.to_string(),
            state: Mutex::new(State::default()),
        }
    }

    /// This store keeping dead cells of *every* table for `gc_grace` (not
    /// each table's own [`schema::options`]) before forgetting them. A
    /// table given its own with [`with_table_gc_grace`](Self::with_table_gc_grace)
    /// keeps that.
    pub fn with_gc_grace(mut self, gc_grace: Duration) -> Self {
        self.gc_grace_all = Some(gc_grace);
        self
    }

    /// This store keeping dead cells of `table` for `gc_grace`.
    pub fn with_table_gc_grace(mut self, table: Table, gc_grace: Duration) -> Self {
        self.gc_grace_table.insert(table, gc_grace);
        self
    }

    /// This store warning and failing reads at `thresholds` instead of
    /// Cassandra's defaults (1 000 / 100 000).
    pub fn with_tombstone_thresholds(mut self, thresholds: TombstoneThresholds) -> Self {
        self.thresholds = thresholds;
        self
    }

    /// This store naming `keyspace` in its warnings' queries (default
    /// [`DEFAULT_KEYSPACE`]), as a cluster serving that keyspace would.
    pub fn with_keyspace(mut self, keyspace: impl Into<String>) -> Self {
        self.keyspace = keyspace.into();
        self
    }

    /// The store's clock.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// How long dead cells of `table` are kept (and cost reads).
    pub fn gc_grace(&self, table: Table) -> Duration {
        self.gc_grace_table
            .get(&table)
            .copied()
            .or(self.gc_grace_all)
            .unwrap_or_else(|| schema::options(table).gc_grace())
    }

    /// The warn and failure thresholds.
    pub fn tombstone_thresholds(&self) -> TombstoneThresholds {
        self.thresholds
    }

    /// The most tombstones any single read of `table` passed since the
    /// store was made or [`reset_tombstone_stats`](Self::reset_tombstone_stats)
    /// (a read that failed for too many counts as the threshold + 1).
    pub fn max_tombstones_per_read(&self, table: Table) -> u64 {
        self.lock().stats.get(&table).map_or(0, |s| s.max_per_read)
    }

    /// The most tombstones any single page of a key scan of `table` passed
    /// (TB4), like [`max_tombstones_per_read`](Self::max_tombstones_per_read).
    pub fn max_tombstones_per_scan(&self, table: Table) -> u64 {
        self.lock().stats.get(&table).map_or(0, |s| s.max_per_scan)
    }

    /// Forgets the statistics of every table.
    pub fn reset_tombstone_stats(&self) {
        self.lock().stats.clear();
    }

    /// Every version held for `row` of `table`, dead ones included, in column
    /// order: for tests and the operator tool's forensic views.
    pub fn raw_row(&self, table: Table, row: &str) -> Vec<(String, CellVersion)> {
        self.lock()
            .tables
            .get(&table)
            .and_then(|t| t.get(row))
            .map(|r| {
                r.cells
                    .iter()
                    .flat_map(|(c, col)| col.versions().map(|v| (c.clone(), v.clone())))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// How many versions the store holds, dead ones included: for tests
    /// that check memory stays bounded.
    pub fn stored_versions(&self) -> usize {
        self.lock()
            .tables
            .values()
            .flat_map(|t| t.values())
            .flat_map(|r| r.cells.values())
            .map(|c| c.versions().count())
            .sum()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // No code path panics while holding the lock, but if one ever did the
        // maps are still consistent (every mutation is a single insert), so
        // carry on rather than poison every later operation.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How long after its due time a swept row is swept again at the
    /// earliest: sweeps cost a pass over the row, so a row whose dead
    /// versions come due one after another is swept a few times per gc
    /// grace rather than once per second. Reads count by the exact rule
    /// whatever the sweep has done (E3).
    fn sweep_slack(grace: Duration) -> Duration {
        (grace / 8).clamp(Duration::from_secs(1), Duration::from_secs(3600))
    }

    /// E3: sweeps every row due at `now`.
    fn sweep_due(&self, state: &mut State, now: Timestamp) {
        while let Some(first) = state.sweeps.first() {
            if first.0 > now {
                break;
            }
            let Some((due, table, key)) = state.sweeps.pop_first() else {
                break;
            };
            let grace = self.gc_grace(table);
            let Some(rows) = state.tables.get_mut(&table) else {
                continue;
            };
            // An entry the row no longer owns (it was emptied by a read and
            // made again since) is stale: its own entry covers it.
            let Some(row) = rows.get_mut(&key).filter(|r| r.sweep_at == Some(due)) else {
                continue;
            };
            row.sweep_at = None;
            row.cells.retain(|_, c| {
                c.purge(now, grace);
                !c.is_empty()
            });
            if row.cells.is_empty() {
                rows.remove(&key);
                continue;
            }
            let next = row.cells.values().filter_map(|c| c.purge_time(grace)).min();
            if let Some(next) = next {
                let at = next.max(now.saturating_add(Self::sweep_slack(grace)));
                row.sweep_at = Some(at);
                state.sweeps.insert((at, table, key));
            }
        }
    }

    fn apply(
        &self,
        table: Table,
        row: &str,
        incoming: impl Iterator<Item = (String, CellVersion)>,
    ) {
        let now = self.clock.now();
        let grace = self.gc_grace(table);
        let mut state = self.lock();
        self.sweep_due(&mut state, now);
        let State { tables, sweeps, .. } = &mut *state;
        let data = tables
            .entry(table)
            .or_default()
            .entry(row.to_string())
            .or_default();
        let mut earliest: Option<Timestamp> = None;
        for (column, version) in incoming {
            let purge_at = version.purge_time(grace);
            let col = data.cells.entry(column).or_default();
            let stored = col.apply(version, now, grace);
            if stored && let Some(at) = purge_at {
                earliest = Some(earliest.map_or(at, |e| e.min(at)));
            }
        }
        data.cells.retain(|_, c| !c.is_empty());
        // E3: every version that will die is covered by its row's sweep.
        if let Some(at) = earliest
            && data.sweep_at.is_none_or(|queued| at < queued)
        {
            if let Some(queued) = data.sweep_at.replace(at) {
                sweeps.remove(&(queued, table, row.to_string()));
            }
            sweeps.insert((at, table, row.to_string()));
        }
    }

    fn record(&self, state: &mut State, table: Table, op: OpKind, tombstones: u64) {
        let stats = state.stats.entry(table).or_default();
        let slot = match op {
            OpKind::Scan => &mut stats.max_per_scan,
            _ => &mut stats.max_per_read,
        };
        *slot = (*slot).max(tombstones);
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

    async fn read_observed(
        &self,
        table: Table,
        row: &str,
        query: &RowQuery,
    ) -> Result<ReadOutcome, StoreError> {
        check_request(OpKind::Read, table, row, [], query.start_column.as_deref())?;
        let now = self.clock.now();
        let grace = self.gc_grace(table);
        let limits = self.thresholds;
        let limit = query.limit.map_or(usize::MAX, |n| n.get() as usize);
        let mut state = self.lock();
        self.sweep_due(&mut state, now);
        let mut out = Vec::new();
        let mut tombstones = 0u64;
        let mut failed = false;
        if let Some(rows) = state.tables.get_mut(&table)
            && let Some(data) = rows.get_mut(row)
        {
            let lower = match &query.start_column {
                Some(start) => Bound::Included(start.clone()),
                None => Bound::Unbounded,
            };
            let mut purgeable = Vec::new();
            // TB2: count the dead versions passed until the limit of live
            // cells is reached; nothing after the last live cell returned.
            for (column, col) in data.cells.range((lower, Bound::Unbounded)) {
                if out.len() >= limit {
                    break;
                }
                if let Some(version) = col.live(now)
                    && let Some((value, expires_at)) = version.live_value(now)
                {
                    out.push(Cell {
                        column: column.clone(),
                        value: value.to_vec(),
                        writetime: version.timestamp(),
                        ttl: expires_at
                            .map(|at| Duration::from_secs(u64::from(ttl_seconds_left(at, now)))),
                    });
                    continue;
                }
                // TB1: past gc grace it costs nothing, and goes.
                if col.has_purgeable(now, grace) {
                    purgeable.push(column.clone());
                }
                tombstones += col.tombstones(now, grace);
                if tombstones > limits.fail {
                    failed = true;
                    break;
                }
            }
            for column in purgeable {
                if let Some(col) = data.cells.get_mut(&column) {
                    col.purge(now, grace);
                    if col.is_empty() {
                        data.cells.remove(&column);
                    }
                }
            }
            if data.cells.is_empty() {
                rows.remove(row);
            }
        }
        self.record(&mut state, table, OpKind::Read, tombstones);
        drop(state);
        // TB3.
        if failed {
            return Err(StoreError::too_many_tombstones(
                OpKind::Read,
                table,
                row,
                tombstones,
                limits.fail,
            ));
        }
        let warnings = if tombstones > limits.warn {
            vec![tombstones::warning_text(
                out.len() as u64,
                tombstones,
                &tombstones::read_cql(&self.keyspace, table, row, query),
                tombstones::token(row),
            )]
        } else {
            Vec::new()
        };
        Ok(ReadOutcome {
            cells: out,
            tombstones: Some(tombstones),
            warnings,
        })
    }

    async fn scan_keys(
        &self,
        table: Table,
        cursor: Option<&PageCursor>,
        page_size: NonZeroU32,
    ) -> Result<KeyPage, StoreError> {
        let after = match cursor {
            Some(c) => Some(String::from_utf8(c.as_bytes().to_vec()).map_err(|_| {
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
        let grace = self.gc_grace(table);
        let limits = self.thresholds;
        let mut state = self.lock();
        self.sweep_due(&mut state, now);
        let lower = match after {
            Some(key) => Bound::Excluded(key),
            None => Bound::Unbounded,
        };
        let mut keys: Vec<String> = Vec::new();
        let mut more = false;
        let mut tombstones = 0u64;
        let mut failed = false;
        if let Some(rows) = state.tables.get(&table) {
            'rows: for (key, data) in rows.range((lower, Bound::Unbounded)) {
                if keys.len() >= page_size.get() as usize {
                    // Only whether another page follows; a page's count
                    // ends with its last key, as a cluster's does.
                    if data.cells.values().any(|c| c.live(now).is_some()) {
                        more = true;
                        break;
                    }
                    continue;
                }
                // TB4: each partition up to its first live cell.
                for col in data.cells.values() {
                    if col.live(now).is_some() {
                        keys.push(key.clone());
                        break;
                    }
                    tombstones += col.tombstones(now, grace);
                    if tombstones > limits.fail {
                        failed = true;
                        break 'rows;
                    }
                }
            }
        }
        self.record(&mut state, table, OpKind::Scan, tombstones);
        drop(state);
        if failed {
            return Err(StoreError::too_many_tombstones(
                OpKind::Scan,
                table,
                "",
                tombstones,
                limits.fail,
            ));
        }
        let next = match keys.last() {
            Some(last) if more => Some(PageCursor::from_bytes(last.as_bytes().to_vec())),
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
    use crate::tombstones::TombstoneThresholds;
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

    fn cols(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
        range.map(|i| format!("{prefix}{i:06}")).collect()
    }

    async fn put(store: &MemoryStore, row: &str, column: &str, ts: i64) {
        store
            .write(
                SCRATCH,
                row,
                &[CellWrite::new(column, b"v".to_vec())],
                WriteOptions::at(Timestamp::from_micros(ts)),
            )
            .await
            .unwrap();
    }

    async fn count(
        store: &MemoryStore,
        row: &str,
        query: RowQuery,
    ) -> (Vec<String>, u64, Vec<String>) {
        let o = store.read_observed(SCRATCH, row, &query).await.unwrap();
        let names = o.cells.into_iter().map(|c| c.column).collect();
        (names, o.tombstones.unwrap(), o.warnings)
    }

    /// The layout of the Cassandra 4.1.1 measurement (tombstones (a)):
    /// the same counts, the same strict thresholds, the same warning.
    #[tokio::test]
    async fn reads_count_the_tombstones_in_their_slice_until_their_limit() {
        let (_, store) = store();
        let ts = Timestamp::from_micros(10);
        store
            .delete(SCRATCH, "a2", &cols("b", 0..1500), ts)
            .await
            .unwrap();
        put(&store, "a2", "m", 10).await;
        store
            .delete(SCRATCH, "a2", &cols("n", 0..1500), ts)
            .await
            .unwrap();
        put(&store, "a2", "o", 10).await;
        let (live, n, warnings) = count(&store, "a2", RowQuery::first(1)).await;
        assert_eq!((live, n), (vec!["m".to_string()], 1500));
        assert_eq!(
            warnings,
            vec![format!(
                "Read 1 live rows and 1500 tombstone cells for query SELECT value FROM \
                 lockshift.scratch WHERE row_key = 'a2' LIMIT 1 ALLOW FILTERING; token \
                 5060052373555595560 (see tombstone_warn_threshold)"
            )]
        );
        assert_eq!(count(&store, "a2", RowQuery::first(2)).await.1, 3000);
        assert_eq!(count(&store, "a2", RowQuery::all()).await.1, 3000);
        let (live, n, warnings) = count(&store, "a2", RowQuery::first(1).starting_at("m")).await;
        assert_eq!((live.len(), n, warnings.len()), (1, 0, 0));
        assert_eq!(
            count(&store, "a2", RowQuery::first(2).starting_at("m"))
                .await
                .1,
            1500
        );
        let (_, n, warnings) = count(&store, "a2", RowQuery::first(1).starting_at("n000499")).await;
        assert_eq!((n, warnings.len()), (1001, 1));
        let (_, n, warnings) = count(&store, "a2", RowQuery::first(1).starting_at("n000500")).await;
        assert_eq!(
            (n, warnings.len()),
            (1000, 0),
            "the warn threshold is strict"
        );
        assert_eq!(store.max_tombstones_per_read(SCRATCH), 3000);
        assert_eq!(store.max_tombstones_per_read(schema::MAIN), 0);
        store.reset_tombstone_stats();
        assert_eq!(store.max_tombstones_per_read(SCRATCH), 0);
        let (live, n, _) = count(&store, "missing", RowQuery::all()).await;
        assert_eq!((live.len(), n), (0, 0));
    }

    /// tombstones (c): only the merged result counts.
    #[tokio::test]
    async fn rewritten_cells_do_not_count_and_live_rewrites_cost_nothing() {
        let (_, store) = store();
        store
            .delete(
                SCRATCH,
                "c1",
                &cols("c", 0..1002),
                Timestamp::from_micros(10),
            )
            .await
            .unwrap();
        assert_eq!(count(&store, "c1", RowQuery::all()).await.1, 1002);
        put(&store, "c1", "c000500", 11).await;
        for i in 0..5 {
            put(&store, "c1", "live", 20 + i).await;
        }
        put(&store, "c1", "older", 100).await;
        store
            .delete(SCRATCH, "c1", &["older".into()], Timestamp::from_micros(50))
            .await
            .unwrap();
        put(&store, "c1", "c000600", 5).await;
        let (live, n, _) = count(&store, "c1", RowQuery::all()).await;
        assert_eq!(live, ["c000500", "live", "older"]);
        assert_eq!(n, 1001);
    }

    /// tombstones (b), (d): expired cells count from their expiry, deletes
    /// from when they were applied, both until gc grace has passed in
    /// whole seconds; then they cost nothing and are gone.
    #[tokio::test]
    async fn dead_cells_count_until_gc_grace_after_their_death() {
        let clock = Arc::new(ManualClock::new(Timestamp::from_micros(1_000_000_000)));
        let store = MemoryStore::with_clock(clock.clone())
            .with_table_gc_grace(SCRATCH, Duration::from_secs(5));
        assert_eq!(store.gc_grace(SCRATCH), Duration::from_secs(5));
        assert_eq!(
            store.gc_grace(schema::MAIN),
            schema::MAIN_OPTIONS.gc_grace()
        );
        let ts = Timestamp::from_micros(1);
        store
            .delete(SCRATCH, "d1", &cols("c", 0..10), ts)
            .await
            .unwrap();
        let ttl = WriteOptions::at(ts).with_ttl(Ttl::from_secs(3).unwrap());
        let cells: Vec<CellWrite> = cols("e", 0..10)
            .into_iter()
            .map(|c| CellWrite::new(c, b"v".to_vec()))
            .collect();
        store.write(SCRATCH, "d2", &cells, ttl).await.unwrap();
        assert_eq!(count(&store, "d1", RowQuery::all()).await.1, 10);
        assert_eq!(count(&store, "d2", RowQuery::all()).await.1, 0, "live");
        clock.advance(Duration::from_millis(4_200));
        assert_eq!(count(&store, "d2", RowQuery::all()).await.1, 10, "expired");
        clock.advance(Duration::from_millis(1_799));
        assert_eq!(count(&store, "d1", RowQuery::all()).await.1, 10, "5.999 s");
        clock.advance(Duration::from_millis(1));
        assert_eq!(
            count(&store, "d1", RowQuery::all()).await.1,
            0,
            "6 s: 1000 < 1006 − 5"
        );
        assert_eq!(
            count(&store, "d2", RowQuery::all()).await.1,
            10,
            "expiry + 5 s not yet"
        );
        clock.advance(Duration::from_secs(3));
        assert_eq!(
            count(&store, "d2", RowQuery::all()).await.1,
            0,
            "expiry (1003) + 5 < 1009"
        );
        assert_eq!(store.stored_versions(), 0, "purged");
    }

    #[tokio::test]
    async fn above_the_failure_threshold_a_read_fails_and_a_later_slice_does_not() {
        let (_, store) = store();
        let store = store.with_tombstone_thresholds(TombstoneThresholds { warn: 2, fail: 5 });
        let ts = Timestamp::from_micros(10);
        store
            .delete(SCRATCH, "f1", &cols("c", 0..5), ts)
            .await
            .unwrap();
        put(&store, "f1", "zz", 10).await;
        let (_, n, warnings) = count(&store, "f1", RowQuery::first(1)).await;
        assert_eq!((n, warnings.len()), (5, 1));
        store
            .delete(SCRATCH, "f1", &cols("c", 5..6), ts)
            .await
            .unwrap();
        let err = store
            .read(SCRATCH, "f1", &RowQuery::first(1))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::TooManyTombstones);
        assert!(
            err.to_string().contains("\"f1\" passed 6 tombstones"),
            "{err}"
        );
        assert_eq!(store.max_tombstones_per_read(SCRATCH), 6);
        let (live, n, _) = count(&store, "f1", RowQuery::first(1).starting_at("zz")).await;
        assert_eq!((live.len(), n), (1, 0));
    }

    /// tombstones (g): a key scan page counts every partition it visits,
    /// each up to its first live cell.
    #[tokio::test]
    async fn key_scans_count_across_partitions_and_fail_alike() {
        let (_, store) = store();
        let store = store.with_tombstone_thresholds(TombstoneThresholds { warn: 1, fail: 30 });
        let ts = Timestamp::from_micros(10);
        for i in 0..12 {
            let row = format!("k{i:02}");
            store
                .delete(SCRATCH, &row, &["a".into()], ts)
                .await
                .unwrap();
            if i % 2 == 0 {
                put(&store, &row, "b", 10).await;
            } else {
                store
                    .delete(SCRATCH, &row, &["b".into()], ts)
                    .await
                    .unwrap();
            }
        }
        let page = store
            .scan_keys(SCRATCH, None, NonZeroU32::new(2).unwrap())
            .await
            .unwrap();
        assert_eq!(page.keys, ["k00", "k02"]);
        assert!(page.next.is_some());
        // k00: 1, k01: 2, k02: 1.
        assert_eq!(store.max_tombstones_per_scan(SCRATCH), 4);
        assert_eq!(store.max_tombstones_per_read(SCRATCH), 0);
        let page = store
            .scan_keys(SCRATCH, None, NonZeroU32::new(100).unwrap())
            .await
            .unwrap();
        assert_eq!(page.keys.len(), 6);
        assert_eq!(store.max_tombstones_per_scan(SCRATCH), 18);
        for i in 12..20 {
            let row = format!("k{i:02}");
            store
                .delete(SCRATCH, &row, &["a".into(), "b".into()], ts)
                .await
                .unwrap();
        }
        let err = store
            .scan_keys(SCRATCH, None, NonZeroU32::new(100).unwrap())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::TooManyTombstones);
        assert_eq!(err.op(), OpKind::Scan);
    }

    /// E3: rows nobody reads again are swept too, so memory holds only
    /// what is younger than gc grace.
    #[tokio::test]
    async fn unread_dead_cells_are_swept_after_gc_grace() {
        let (clock, store) = store();
        let ttl = WriteOptions::at(Timestamp::from_micros(1)).with_ttl(Ttl::from_secs(2).unwrap());
        for i in 0..200 {
            let row = format!("r{i}");
            store
                .delete(
                    SCRATCH,
                    &row,
                    &["x".into(), "y".into()],
                    Timestamp::from_micros(1),
                )
                .await
                .unwrap();
            store
                .write(SCRATCH, &row, &[CellWrite::new("z", b"v".to_vec())], ttl)
                .await
                .unwrap();
            clock.advance(Duration::from_millis(50));
        }
        put(&store, "keep", "k", 1).await;
        assert_eq!(store.stored_versions(), 601);
        // Grace 10 s, sweep slack 1.25 s: all due well within 20 s.
        clock.advance(Duration::from_secs(20));
        put(&store, "keep", "k2", 1).await;
        assert_eq!(store.stored_versions(), 2, "only the live cells are left");
        assert!(store.lock().sweeps.is_empty());
    }

    /// tombstones (c), measured with a control row: a delete older than
    /// the (expired) cell it meets loses, but stays, and costs reads once
    /// that cell is purged, until its own purge time.
    #[tokio::test]
    async fn a_losing_delete_costs_reads_once_the_newer_cell_is_gone() {
        // 0.1 s into second s0 = 1000.
        let clock = Arc::new(ManualClock::new(Timestamp::from_micros(1_000_100_000)));
        let store = MemoryStore::with_clock(clock.clone()).with_gc_grace(Duration::from_secs(5));
        let at = |s: f64| Timestamp::from_micros((s * 1e6) as i64);
        let ttl = WriteOptions::at(at(1000.1)).with_ttl(Ttl::from_secs(2).unwrap());
        for row in ["h0", "h1"] {
            let cells: Vec<CellWrite> = cols("c", 0..10)
                .into_iter()
                .map(|c| CellWrite::new(c, b"v".to_vec()))
                .collect();
            store.write(SCRATCH, row, &cells, ttl).await.unwrap();
        }
        clock.set(at(1003.1));
        assert_eq!(count(&store, "h1", RowQuery::all()).await.1, 10, "expired");
        store
            .delete(
                SCRATCH,
                "h1",
                &cols("c", 0..10),
                at(1000.1).offset_micros(-1_000_000),
            )
            .await
            .unwrap();
        assert_eq!(count(&store, "h1", RowQuery::all()).await.1, 10);
        clock.set(at(1008.5));
        assert_eq!(
            count(&store, "h0", RowQuery::all()).await.1,
            0,
            "control: purged"
        );
        assert_eq!(
            count(&store, "h1", RowQuery::all()).await.1,
            10,
            "the deletes stay"
        );
        clock.set(at(1009.5));
        assert_eq!(
            count(&store, "h1", RowQuery::all()).await.1,
            0,
            "purgeable too"
        );
        assert_eq!(store.stored_versions(), 0);
    }

    /// TB1: past gc grace a tombstone is forgotten before a write meets
    /// it, swept or not, so a late older write comes back — exactly when
    /// the local endpoint lets it.
    #[tokio::test]
    async fn past_gc_grace_a_late_older_write_resurrects() {
        let (clock, store) = store();
        store
            .delete(SCRATCH, "r", &["c".into()], Timestamp::from_micros(50))
            .await
            .unwrap();
        clock.advance(Duration::from_millis(10_999));
        put(&store, "r", "c", 10).await;
        assert!(count(&store, "r", RowQuery::all()).await.0.is_empty());
        clock.advance(Duration::from_millis(1));
        put(&store, "r", "c", 10).await;
        assert_eq!(count(&store, "r", RowQuery::all()).await.0, ["c"]);
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
                Some(&PageCursor::from_bytes(vec![0xff, 0xfe])),
                NonZeroU32::MIN,
            )
            .await
            .unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Invalid);
    }
}
