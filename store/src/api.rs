//! The [`Store`] trait: the contract every backend honours.

use std::fmt::Debug;
use std::num::NonZeroU32;
use std::sync::Arc;

use async_trait::async_trait;

use crate::cell::{Cell, CellWrite, KeyPage, PageCursor, RowQuery, Table, WriteOptions};
use crate::error::StoreError;

/// What a read returned, and what it cost the database: the answer of
/// [`Store::read_observed`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadOutcome {
    /// The live cells, exactly what [`Store::read`] returns.
    pub cells: Vec<Cell>,
    /// How many tombstones the read passed, when the backend knows: the
    /// embedded store (and anything serving it) always; a Cassandra
    /// cluster only when its answer carries a tombstone warning (above its
    /// `tombstone_warn_threshold`), parsed from the warning's text; `None`
    /// otherwise.
    pub tombstones: Option<u64>,
    /// The warnings the server added to its answer, verbatim (Cassandra's
    /// tombstone warning among them: [`crate::tombstones::warning_text`]).
    pub warnings: Vec<String>,
}

impl ReadOutcome {
    /// An outcome of `cells` that cost nothing worth reporting.
    pub fn of(cells: Vec<Cell>) -> Self {
        ReadOutcome {
            cells,
            tombstones: None,
            warnings: Vec::new(),
        }
    }
}

/// Cassandra's storage model as lockshift uses it: tables of rows, each row a
/// sorted set of cells.
///
/// # Contract
///
/// Every backend — the embedded reference ([`crate::MemoryStore`]), the CQL
/// backend and anything wrapping them — behaves as one Cassandra cluster read
/// and written at QUORUM, keeping the store contract, each rule stated and
/// argued once in docs/design.md §1 and cited by its label:
///
/// 1. S1: last write wins per cell.
/// 2. S2: on a timestamp tie the tombstone wins.
/// 3. S3: a TTL counts from when the store applied the write, in whole
///    seconds ([`reconcile::ttl_deadline`](crate::reconcile::ttl_deadline)).
/// 4. S4: [`read`](Store::read) returns live cells in column order, within
///    `start_column` and `limit`.
/// 5. S5: read-your-writes (the thesis' Lemma 1).
/// 6. S6: tombstones cost reads ([`crate::tombstones`];
///    [`read_observed`](Store::read_observed) reports the cost).
/// 7. S7: one row, one write — the cells of one [`write`](Store::write) or
///    [`delete`](Store::delete) are applied together.
///
/// # Errors
///
/// A failure is a [`StoreError`] whose [`kind`](StoreError::kind) tells the
/// caller whether the operation may have taken effect; see
/// [`crate::StoreErrorKind`]. A backend never reports success for an
/// operation that was not applied.
///
/// # Cancel safety
///
/// Dropping a returned future is like a timeout: a write or delete may or may
/// not have been applied.
#[async_trait]
pub trait Store: Send + Sync + Debug {
    /// Writes `cells` into `row` of `table`, all with the timestamp and TTL of
    /// `options`. An empty `cells` is a no-op.
    async fn write(
        &self,
        table: Table,
        row: &str,
        cells: &[CellWrite],
        options: WriteOptions,
    ) -> Result<(), StoreError>;

    /// Deletes `columns` of `row` of `table` with tombstones at `timestamp`:
    /// versions at or before it disappear, later ones survive.
    async fn delete(
        &self,
        table: Table,
        row: &str,
        columns: &[String],
        timestamp: crate::Timestamp,
    ) -> Result<(), StoreError>;

    /// Reads live cells of `row` of `table` in column order (see S4), with
    /// what the read cost: the tombstones it passed and the server's
    /// warnings (S6). Every backend and wrapper implements
    /// this one; [`read`](Store::read) is it without the cost.
    async fn read_observed(
        &self,
        table: Table,
        row: &str,
        query: &RowQuery,
    ) -> Result<ReadOutcome, StoreError>;

    /// Reads live cells of `row` of `table` in column order (see S4):
    /// [`read_observed`](Store::read_observed)'s cells. Wrappers need
    /// not implement it — forwarding `read_observed` forwards this too.
    async fn read(
        &self,
        table: Table,
        row: &str,
        query: &RowQuery,
    ) -> Result<Vec<Cell>, StoreError> {
        self.read_observed(table, row, query).await.map(|o| o.cells)
    }

    /// One page of the keys of rows in `table` that hold live cells, starting
    /// after `cursor` (or at the beginning). Keys come in the backend's
    /// partition order, each once per complete scan; a page holds at most
    /// `page_size` keys and may hold fewer even when more follow.
    async fn scan_keys(
        &self,
        table: Table,
        cursor: Option<&PageCursor>,
        page_size: NonZeroU32,
    ) -> Result<KeyPage, StoreError>;

    /// A short description of the backend for logs and `migrate status`
    /// ("embedded", "cql 127.0.0.1:9042/lockshift").
    fn describe(&self) -> String;
}

#[async_trait]
impl<S: Store + ?Sized> Store for Arc<S> {
    async fn write(
        &self,
        table: Table,
        row: &str,
        cells: &[CellWrite],
        options: WriteOptions,
    ) -> Result<(), StoreError> {
        (**self).write(table, row, cells, options).await
    }

    async fn delete(
        &self,
        table: Table,
        row: &str,
        columns: &[String],
        timestamp: crate::Timestamp,
    ) -> Result<(), StoreError> {
        (**self).delete(table, row, columns, timestamp).await
    }

    async fn read_observed(
        &self,
        table: Table,
        row: &str,
        query: &RowQuery,
    ) -> Result<ReadOutcome, StoreError> {
        (**self).read_observed(table, row, query).await
    }

    async fn scan_keys(
        &self,
        table: Table,
        cursor: Option<&PageCursor>,
        page_size: NonZeroU32,
    ) -> Result<KeyPage, StoreError> {
        (**self).scan_keys(table, cursor, page_size).await
    }

    fn describe(&self) -> String {
        (**self).describe()
    }
}

/// A shared, type-erased store: what lock code holds.
pub type SharedStore = Arc<dyn Store>;
