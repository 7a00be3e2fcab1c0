//! The [`Store`] trait: the contract every backend honours.

use std::fmt::Debug;
use std::num::NonZeroU32;
use std::sync::Arc;

use async_trait::async_trait;

use crate::cell::{
    Cell, CellPage, CellWrite, KeyPage, OpKind, PageCursor, RowQuery, Table, Timestamp, TokenRange,
    WriteOptions,
};
use crate::error::StoreError;
use crate::fenced::FencedOutcome;
use crate::request::{
    DeleteOp, Op, ReadOp, Request, Response, ScanCellsOp, ScanKeysOp, WriteFencedOp, WriteOp,
};
use crate::route::{Route, Topology};

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
///    `start_column` and `limit` (on CQL a row whose value is gone is no
///    cell but takes a place within a `LIMIT`: reads that judge by what is
///    absent read the whole row).
/// 5. S5: read-your-writes (the thesis' Lemma 1).
/// 6. S6: tombstones cost reads ([`crate::tombstones`];
///    [`read_observed`](Store::read_observed) reports the cost).
/// 7. S7: one row, one write — the cells of one [`write`](Store::write) or
///    [`delete`](Store::delete) are applied together.
///
/// # Requests and layers
///
/// Every operation is one [`Request`] — its [`Route`], its table, its
/// [`Op`] — answered by one method, [`call`](Store::call). A backend
/// implements `call`; so does every layer that wraps a store (the homes
/// router, the fault injector, a meter), seeing each request as a value
/// and handing it on. The typed operations below ([`write`](Store::write),
/// [`read_via`](Store::read_via), [`scan_keys`](Store::scan_keys), …) are
/// provided: they build the request and take the [`Response`] apart. Do
/// not override them — a layer that did would see only the calls made
/// through its own type.
///
/// # Routes
///
/// Every request carries a [`Route`]: [`Route::Default`] is the contract
/// above, one cluster at the configured consistency;
/// [`Route::Datacenter`] pins the coordinator to one datacenter at
/// `LOCAL_QUORUM`, and then S5 (Lemma 1) holds among the requests pinned
/// to that same datacenter (docs/design.md §4a); [`Route::HomeOf`] names
/// a lock whose home decides (a store without homes takes it as the
/// default). The methods without `_via` take the default route. A route
/// to a datacenter the cluster does not have fails with
/// [`StoreErrorKind::Connection`](crate::StoreErrorKind::Connection)
/// (no node to coordinate it); the embedded store made with
/// [`MemoryStore::new`](crate::MemoryStore::new) is one datacenter named
/// `datacenter1`, Cassandra's default.
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
    /// Answers one request: the one method a backend or a layer
    /// implements. Each [`Op`] is specified by the typed method of the
    /// same name below; a backend answers it with the matching
    /// [`Response`] variant.
    async fn call(&self, request: Request<'_>) -> Result<Response, StoreError>;

    /// The store this one wraps, when it is a layer: what
    /// [`describe`](Store::describe), [`topology`](Store::topology) and
    /// [`homes`](Store::homes) ask unless the layer answers them itself.
    /// A backend wraps nothing (`None`, the default).
    fn wraps(&self) -> Option<&dyn Store> {
        None
    }

    /// A short description of the backend for logs and `migrate status`
    /// ("embedded", "cql 127.0.0.1:9042/lockshift"). A backend says what
    /// it is; a layer, by default, what it wraps is.
    fn describe(&self) -> String {
        self.wraps()
            .map_or_else(|| "a store".to_string(), Store::describe)
    }

    /// What the store knows of the cluster's datacenters: the client's own
    /// and every one seen. A layer, by default, what it wraps knows; a
    /// backend without datacenters knows none.
    fn topology(&self) -> Topology {
        self.wraps().map(Store::topology).unwrap_or_default()
    }

    /// The homes view this store routes by, when it is a homes router
    /// ([`HomesRouter`](crate::homes::HomesRouter)): what a reader of many
    /// rows (the census) plans its scans by, each at its rows' homes. A
    /// layer over a router has the router's, by default; every other store
    /// has none.
    fn homes(&self) -> Option<Arc<crate::homes::HomesView>> {
        self.wraps().and_then(Store::homes)
    }

    /// Writes `cells` into `row` of `table`, all with the timestamp and TTL of
    /// `options`, coordinated as `route` says. An empty `cells` is a no-op.
    async fn write_via(
        &self,
        route: &Route,
        table: Table,
        row: &str,
        cells: &[CellWrite],
        options: WriteOptions,
    ) -> Result<(), StoreError> {
        let op = Op::Write(WriteOp {
            row,
            cells,
            options,
        });
        match self.call(Request::new(route.clone(), table, op)).await? {
            Response::Done => Ok(()),
            other => Err(other.unexpected(OpKind::Write, table)),
        }
    }

    /// Deletes `columns` of `row` of `table` with tombstones at `timestamp`,
    /// coordinated as `route` says: versions at or before it disappear,
    /// later ones survive.
    async fn delete_via(
        &self,
        route: &Route,
        table: Table,
        row: &str,
        columns: &[String],
        timestamp: crate::Timestamp,
    ) -> Result<(), StoreError> {
        let op = Op::Delete(DeleteOp {
            row,
            columns,
            timestamp,
        });
        match self.call(Request::new(route.clone(), table, op)).await? {
            Response::Done => Ok(()),
            other => Err(other.unexpected(OpKind::Delete, table)),
        }
    }

    /// Reads live cells of `row` of `table` in column order (see S4),
    /// coordinated as `route` says, with what the read cost: the
    /// tombstones it passed and the server's warnings (S6).
    async fn read_observed_via(
        &self,
        route: &Route,
        table: Table,
        row: &str,
        query: &RowQuery,
    ) -> Result<ReadOutcome, StoreError> {
        let op = Op::Read(ReadOp { row, query });
        match self.call(Request::new(route.clone(), table, op)).await? {
            Response::Read(outcome) => Ok(outcome),
            other => Err(other.unexpected(OpKind::Read, table)),
        }
    }

    /// One page of the keys of rows in `table` that hold live cells,
    /// starting after `cursor` (or at the beginning), coordinated as
    /// `route` says. Keys come in the backend's partition order, each once
    /// per complete scan; a page holds at most `page_size` keys and may
    /// hold fewer even when more follow.
    async fn scan_keys_via(
        &self,
        route: &Route,
        table: Table,
        cursor: Option<&PageCursor>,
        page_size: NonZeroU32,
    ) -> Result<KeyPage, StoreError> {
        let op = Op::ScanKeys(ScanKeysOp { cursor, page_size });
        match self.call(Request::new(route.clone(), table, op)).await? {
            Response::Keys(page) => Ok(page),
            other => Err(other.unexpected(OpKind::Scan, table)),
        }
    }

    /// One page of the live cells of `table`'s rows whose tokens fall in
    /// `range`, starting after `cursor` (or at the range's start),
    /// coordinated as `route` says: rows in token order, each row's cells
    /// in column order with their write times and TTLs, at most
    /// `page_size` cells, and what the page cost (the tombstones passed,
    /// S6). A page that passes more tombstones than the server's failure
    /// threshold fails as a read does
    /// ([`StoreErrorKind::TooManyTombstones`](crate::StoreErrorKind::TooManyTombstones));
    /// a narrower range may pass. A row may be cut between two pages.
    async fn scan_cells_via(
        &self,
        route: &Route,
        table: Table,
        range: TokenRange,
        cursor: Option<&PageCursor>,
        page_size: NonZeroU32,
    ) -> Result<CellPage, StoreError> {
        let op = Op::ScanCells(ScanCellsOp {
            range,
            cursor,
            page_size,
        });
        match self.call(Request::new(route.clone(), table, op)).await? {
            Response::Cells(page) => Ok(page),
            other => Err(other.unexpected(OpKind::Scan, table)),
        }
    }

    /// Writes `cell` into `row` of `table` only if the cell records no
    /// fencing token larger than `token`, and records `token` beside it:
    /// one linearizable compare-and-set on that cell, coordinated as
    /// `route` says — a lightweight transaction at `SERIAL`, or
    /// `LOCAL_SERIAL` on a route pinned to a datacenter (docs/design.md
    /// §5, "Fenced writes"; the user-facing helper is
    /// [`FencedWriter`](crate::fenced::FencedWriter)).
    ///
    /// Unlike [`write_via`](Store::write_via) the write carries no caller
    /// timestamp or TTL: the store stamps it above every earlier version of
    /// the cell (a Paxos ballot), and it lives until overwritten or
    /// deleted. A delete removes the fence with the cell.
    ///
    /// # Errors
    ///
    /// A refusal is not an error: [`FencedOutcome::Refused`]. A timeout is
    /// [`StoreErrorKind::MaybeApplied`](crate::StoreErrorKind::MaybeApplied) (op [`OpKind::FencedWrite`]): it
    /// may land later, still only under its condition. A token above
    /// `i64::MAX` is [`StoreErrorKind::Invalid`](crate::StoreErrorKind::Invalid).
    async fn write_fenced_via(
        &self,
        route: &Route,
        table: Table,
        row: &str,
        cell: &CellWrite,
        token: u64,
    ) -> Result<FencedOutcome, StoreError> {
        let op = Op::WriteFenced(WriteFencedOp { row, cell, token });
        match self.call(Request::new(route.clone(), table, op)).await? {
            Response::Fenced(outcome) => Ok(outcome),
            other => Err(other.unexpected(OpKind::FencedWrite, table)),
        }
    }

    /// The clock of a coordinator `route` reaches, in whole milliseconds
    /// (`toUnixTimestamp(now())` from `system.local`): one round trip, what
    /// a client measures its clock's offset from the database by (sent
    /// and answered between two readings of its own clock, the reading
    /// lies within them).
    async fn server_time_via(&self, route: &Route) -> Result<Timestamp, StoreError> {
        let request = Request::new(route.clone(), crate::schema::ROLLOUT, Op::ServerTime);
        match self.call(request).await? {
            Response::Time(at) => Ok(at),
            other => Err(other.unexpected(OpKind::Read, crate::schema::ROLLOUT)),
        }
    }

    /// [`write_via`](Store::write_via) on the default route.
    async fn write(
        &self,
        table: Table,
        row: &str,
        cells: &[CellWrite],
        options: WriteOptions,
    ) -> Result<(), StoreError> {
        self.write_via(&Route::Default, table, row, cells, options)
            .await
    }

    /// [`delete_via`](Store::delete_via) on the default route.
    async fn delete(
        &self,
        table: Table,
        row: &str,
        columns: &[String],
        timestamp: crate::Timestamp,
    ) -> Result<(), StoreError> {
        self.delete_via(&Route::Default, table, row, columns, timestamp)
            .await
    }

    /// [`read_observed_via`](Store::read_observed_via) on the default route.
    async fn read_observed(
        &self,
        table: Table,
        row: &str,
        query: &RowQuery,
    ) -> Result<ReadOutcome, StoreError> {
        self.read_observed_via(&Route::Default, table, row, query)
            .await
    }

    /// Reads live cells of `row` of `table` in column order (see S4),
    /// coordinated as `route` says:
    /// [`read_observed_via`](Store::read_observed_via)'s cells.
    async fn read_via(
        &self,
        route: &Route,
        table: Table,
        row: &str,
        query: &RowQuery,
    ) -> Result<Vec<Cell>, StoreError> {
        self.read_observed_via(route, table, row, query)
            .await
            .map(|o| o.cells)
    }

    /// Reads live cells of `row` of `table` in column order (see S4), on
    /// the default route: [`read_observed`](Store::read_observed)'s cells.
    async fn read(
        &self,
        table: Table,
        row: &str,
        query: &RowQuery,
    ) -> Result<Vec<Cell>, StoreError> {
        self.read_via(&Route::Default, table, row, query).await
    }

    /// [`write_fenced_via`](Store::write_fenced_via) on the default route.
    async fn write_fenced(
        &self,
        table: Table,
        row: &str,
        cell: &CellWrite,
        token: u64,
    ) -> Result<FencedOutcome, StoreError> {
        self.write_fenced_via(&Route::Default, table, row, cell, token)
            .await
    }

    /// [`scan_cells_via`](Store::scan_cells_via) on the default route.
    async fn scan_cells(
        &self,
        table: Table,
        range: TokenRange,
        cursor: Option<&PageCursor>,
        page_size: NonZeroU32,
    ) -> Result<CellPage, StoreError> {
        self.scan_cells_via(&Route::Default, table, range, cursor, page_size)
            .await
    }

    /// [`scan_keys_via`](Store::scan_keys_via) on the default route.
    async fn scan_keys(
        &self,
        table: Table,
        cursor: Option<&PageCursor>,
        page_size: NonZeroU32,
    ) -> Result<KeyPage, StoreError> {
        self.scan_keys_via(&Route::Default, table, cursor, page_size)
            .await
    }
}

#[async_trait]
impl<S: Store + ?Sized> Store for Arc<S> {
    async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
        (**self).call(request).await
    }

    fn wraps(&self) -> Option<&dyn Store> {
        (**self).wraps()
    }

    fn describe(&self) -> String {
        (**self).describe()
    }

    fn topology(&self) -> Topology {
        (**self).topology()
    }

    fn homes(&self) -> Option<Arc<crate::homes::HomesView>> {
        (**self).homes()
    }
}

/// A shared, type-erased store: what lock code holds.
pub type SharedStore = Arc<dyn Store>;
