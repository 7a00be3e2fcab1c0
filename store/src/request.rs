//! A store operation as a value: the one thing every layer of a store —
//! a backend, a router, a fault injector, a meter — receives and answers
//! ([`Store::call`]).
//!
//! A layer that wraps a store implements one method, `call`, over a
//! [`Request`], and names the store it wraps ([`Store::wraps`]). It may
//! look at the request (its route, table, kind, row), rewrite its route
//! (the homes router), delay it, fail it, count it, and hand it on. The typed operations (`write`, `read`, `scan_keys`, …) are
//! provided methods of [`Store`] that build a request and take its
//! [`Response`] apart; no layer implements them. A new operation is a new
//! [`Op`] variant with its arguments' struct: every backend answers it
//! (one more method of the crate's backend trait, which checks each
//! request once, `Request::check`, before its backend sees it), and
//! every layer passes it on unchanged.
//!
//! # Examples
//!
//! A layer that counts requests per table, whole:
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::sync::Mutex;
//!
//! use async_trait::async_trait;
//! use lockshift_store::{Request, Response, Store, StoreError, Table};
//!
//! #[derive(Debug)]
//! struct PerTable<S> {
//!     inner: S,
//!     counts: Mutex<BTreeMap<Table, u64>>,
//! }
//!
//! #[async_trait]
//! impl<S: Store> Store for PerTable<S> {
//!     async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
//!         *self.counts.lock().unwrap().entry(request.table).or_default() += 1;
//!         self.inner.call(request).await
//!     }
//!     // What it describes, its datacenters and its homes are the inner store's.
//!     fn wraps(&self) -> Option<&dyn Store> {
//!         Some(&self.inner)
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use lockshift_store::{MemoryStore, RowQuery, schema};
//! let store = PerTable { inner: MemoryStore::new(), counts: Mutex::default() };
//! store.read(schema::MAIN, "lock-1", &RowQuery::all()).await?;
//! assert_eq!(store.counts.lock().unwrap()[&schema::MAIN], 1);
//! assert_eq!(store.describe(), "embedded");
//! # Ok::<(), StoreError>(())
//! # }).unwrap();
//! ```

use std::fmt;
use std::num::NonZeroU32;

use crate::api::ReadOutcome;
use crate::cell::{
    CellPage, CellWrite, KeyPage, OpKind, PageCursor, RowQuery, Table, Timestamp, TokenRange,
    WriteOptions, check_request,
};
use crate::error::{StoreError, StoreErrorKind};
use crate::fenced::FencedOutcome;
use crate::route::Route;

#[cfg(doc)]
use crate::api::Store;

/// One store operation: where it is coordinated, which table, and what.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    /// Where it is coordinated ([`Route`]): a layer may rewrite it.
    pub route: Route,
    /// The table.
    pub table: Table,
    /// The operation and its arguments.
    pub op: Op<'a>,
}

/// What a request does, with its arguments borrowed from the caller: one
/// variant per operation, each carrying its arguments as one value, which
/// is what a backend's operation takes.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Op<'a> {
    /// A write ([`WriteOp`]).
    Write(WriteOp<'a>),
    /// A delete ([`DeleteOp`]).
    Delete(DeleteOp<'a>),
    /// A read of one row ([`ReadOp`]).
    Read(ReadOp<'a>),
    /// A page of row keys ([`ScanKeysOp`]).
    ScanKeys(ScanKeysOp<'a>),
    /// A page of cells in a token range ([`ScanCellsOp`]).
    ScanCells(ScanCellsOp<'a>),
    /// The coordinator's clock: what a client measures its clock's
    /// offset from the database by (`toUnixTimestamp(now())`, whole
    /// milliseconds).
    ServerTime,
    /// A fenced write ([`WriteFencedOp`]).
    WriteFenced(WriteFencedOp<'a>),
}

/// Writes `cells` into `row`, all with the timestamp and TTL of
/// `options`; no cells is a no-op.
#[derive(Clone, Copy, Debug)]
pub struct WriteOp<'a> {
    /// The row key.
    pub row: &'a str,
    /// The cells.
    pub cells: &'a [CellWrite],
    /// Their timestamp and TTL.
    pub options: WriteOptions,
}

/// Deletes `columns` of `row` with tombstones at `timestamp`; no columns
/// is a no-op.
#[derive(Clone, Copy, Debug)]
pub struct DeleteOp<'a> {
    /// The row key.
    pub row: &'a str,
    /// The columns.
    pub columns: &'a [String],
    /// The tombstones' timestamp.
    pub timestamp: Timestamp,
}

/// Reads live cells of `row` in column order, with what the read cost.
#[derive(Clone, Copy, Debug)]
pub struct ReadOp<'a> {
    /// The row key.
    pub row: &'a str,
    /// Which cells.
    pub query: &'a RowQuery,
}

/// One page of the keys of rows holding live cells.
#[derive(Clone, Copy, Debug)]
pub struct ScanKeysOp<'a> {
    /// Where the last page ended; `None` for the first.
    pub cursor: Option<&'a PageCursor>,
    /// At most this many keys.
    pub page_size: NonZeroU32,
}

/// One page of the live cells of the rows whose tokens fall in `range`,
/// with their write times and TTLs, in token order.
#[derive(Clone, Copy, Debug)]
pub struct ScanCellsOp<'a> {
    /// The token range.
    pub range: TokenRange,
    /// Where the last page ended; `None` for the first.
    pub cursor: Option<&'a PageCursor>,
    /// At most this many cells.
    pub page_size: NonZeroU32,
}

/// Writes `cell` into `row` only if it records no larger fencing token
/// than `token`, and records `token` beside it.
#[derive(Clone, Copy, Debug)]
pub struct WriteFencedOp<'a> {
    /// The row key.
    pub row: &'a str,
    /// The cell.
    pub cell: &'a CellWrite,
    /// The writer's fencing token.
    pub token: u64,
}

/// What a store answered to a [`Request`]: one variant per kind of
/// answer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Response {
    /// A write or a delete was applied.
    Done,
    /// A read's cells and what it cost.
    Read(ReadOutcome),
    /// A page of row keys.
    Keys(KeyPage),
    /// A page of cells.
    Cells(CellPage),
    /// The coordinator's clock.
    Time(Timestamp),
    /// What a fenced write did.
    Fenced(FencedOutcome),
}

impl<'a> Request<'a> {
    /// A request of `op` on `table`, coordinated as `route` says.
    pub fn new(route: Route, table: Table, op: Op<'a>) -> Self {
        Request { route, table, op }
    }

    /// The kind of operation (for errors, counting and faults).
    pub fn kind(&self) -> OpKind {
        self.op.kind()
    }

    /// The row it concerns; `None` for a scan.
    pub fn row(&self) -> Option<&'a str> {
        match self.op {
            Op::Write(WriteOp { row, .. })
            | Op::Delete(DeleteOp { row, .. })
            | Op::Read(ReadOp { row, .. })
            | Op::WriteFenced(WriteFencedOp { row, .. }) => Some(row),
            Op::ScanKeys(_) | Op::ScanCells(_) | Op::ServerTime => None,
        }
    }

    /// This request with its route replaced.
    pub fn via(self, route: Route) -> Self {
        Request { route, ..self }
    }

    /// Checks what every backend refuses before sending anything, so
    /// that no backend checks it again:
    ///
    /// - a request pinned to one node ([`Route::Host`]) that is not a
    ///   reading of that node's clock: one node is no consistency level,
    ///   so nothing else may be sent to it alone;
    /// - a row key, a column or a start column that is empty or too long
    ///   (as Cassandra refuses it).
    ///
    /// # Errors
    /// [`StoreErrorKind::Invalid`], naming the node or the argument.
    pub(crate) fn check(&self) -> Result<(), StoreError> {
        let (kind, table) = (self.kind(), self.table);
        if matches!(self.route, Route::Host(_)) && !matches!(self.op, Op::ServerTime) {
            return Err(StoreError::new(
                StoreErrorKind::Invalid,
                kind,
                Some(table),
                format!(
                    "{} only reads that node's clock; a {kind} needs a consistency level",
                    self.route
                ),
            ));
        }
        match self.op {
            Op::Write(WriteOp { row, cells, .. }) => {
                let columns = cells.iter().map(|c| c.column.as_str());
                check_request(kind, table, row, columns, None)
            }
            Op::Delete(DeleteOp { row, columns, .. }) => {
                check_request(kind, table, row, columns.iter().map(String::as_str), None)
            }
            Op::Read(ReadOp { row, query }) => {
                check_request(kind, table, row, [], query.start_column.as_deref())
            }
            Op::WriteFenced(WriteFencedOp { row, cell, .. }) => {
                check_request(kind, table, row, [cell.column.as_str()], None)
            }
            Op::ScanKeys(_) | Op::ScanCells(_) | Op::ServerTime => Ok(()),
        }
    }

    /// A copy that owns its arguments, to be sent later (a late landing).
    pub fn to_owned(&self) -> OwnedRequest {
        let op = match self.op {
            Op::Write(WriteOp {
                row,
                cells,
                options,
            }) => OwnedOp::Write {
                row: row.to_string(),
                cells: cells.to_vec(),
                options,
            },
            Op::Delete(DeleteOp {
                row,
                columns,
                timestamp,
            }) => OwnedOp::Delete {
                row: row.to_string(),
                columns: columns.to_vec(),
                timestamp,
            },
            Op::Read(ReadOp { row, query }) => OwnedOp::Read {
                row: row.to_string(),
                query: query.clone(),
            },
            Op::ScanKeys(ScanKeysOp { cursor, page_size }) => OwnedOp::ScanKeys {
                cursor: cursor.cloned(),
                page_size,
            },
            Op::ScanCells(ScanCellsOp {
                range,
                cursor,
                page_size,
            }) => OwnedOp::ScanCells {
                range,
                cursor: cursor.cloned(),
                page_size,
            },
            Op::WriteFenced(WriteFencedOp { row, cell, token }) => OwnedOp::WriteFenced {
                row: row.to_string(),
                cell: cell.clone(),
                token,
            },
            Op::ServerTime => OwnedOp::ServerTime,
        };
        OwnedRequest {
            route: self.route.clone(),
            table: self.table,
            op,
        }
    }
}

impl Op<'_> {
    /// The kind of operation.
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Write(_) => OpKind::Write,
            Op::Delete(_) => OpKind::Delete,
            Op::Read(_) | Op::ServerTime => OpKind::Read,
            Op::ScanKeys(_) | Op::ScanCells(_) => OpKind::Scan,
            Op::WriteFenced(_) => OpKind::FencedWrite,
        }
    }
}

/// A [`Request`] that owns its arguments.
#[derive(Clone, Debug)]
pub struct OwnedRequest {
    route: Route,
    table: Table,
    op: OwnedOp,
}

#[derive(Clone, Debug)]
enum OwnedOp {
    Write {
        row: String,
        cells: Vec<CellWrite>,
        options: WriteOptions,
    },
    Delete {
        row: String,
        columns: Vec<String>,
        timestamp: Timestamp,
    },
    Read {
        row: String,
        query: RowQuery,
    },
    ScanKeys {
        cursor: Option<PageCursor>,
        page_size: NonZeroU32,
    },
    ScanCells {
        range: TokenRange,
        cursor: Option<PageCursor>,
        page_size: NonZeroU32,
    },
    WriteFenced {
        row: String,
        cell: CellWrite,
        token: u64,
    },
    ServerTime,
}

impl OwnedRequest {
    /// The request, borrowing from this copy.
    pub fn as_request(&self) -> Request<'_> {
        let op = match &self.op {
            OwnedOp::Write {
                row,
                cells,
                options,
            } => Op::Write(WriteOp {
                row,
                cells,
                options: *options,
            }),
            OwnedOp::Delete {
                row,
                columns,
                timestamp,
            } => Op::Delete(DeleteOp {
                row,
                columns,
                timestamp: *timestamp,
            }),
            OwnedOp::Read { row, query } => Op::Read(ReadOp { row, query }),
            OwnedOp::ScanKeys { cursor, page_size } => Op::ScanKeys(ScanKeysOp {
                cursor: cursor.as_ref(),
                page_size: *page_size,
            }),
            OwnedOp::ScanCells {
                range,
                cursor,
                page_size,
            } => Op::ScanCells(ScanCellsOp {
                range: *range,
                cursor: cursor.as_ref(),
                page_size: *page_size,
            }),
            OwnedOp::WriteFenced { row, cell, token } => Op::WriteFenced(WriteFencedOp {
                row,
                cell,
                token: *token,
            }),
            OwnedOp::ServerTime => Op::ServerTime,
        };
        Request {
            route: self.route.clone(),
            table: self.table,
            op,
        }
    }
}

impl Response {
    /// The answer's name, for an error about an unexpected one.
    fn name(&self) -> &'static str {
        match self {
            Response::Done => "done",
            Response::Read(_) => "a read",
            Response::Keys(_) => "a page of keys",
            Response::Cells(_) => "a page of cells",
            Response::Time(_) => "a time",
            Response::Fenced(_) => "a fenced write's outcome",
        }
    }

    /// The error for a store that answered this to a request of `kind` on
    /// `table`: a bug in that store, never retryable.
    pub(crate) fn unexpected(self, kind: OpKind, table: Table) -> StoreError {
        StoreError::new(
            StoreErrorKind::Invalid,
            kind,
            Some(table),
            format!("the store answered {} to a {kind}", self.name()),
        )
    }
}

impl fmt::Display for Request<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind(), self.table)?;
        if let Some(row) = self.row() {
            write!(f, "/{row}")?;
        }
        write!(f, " ({})", self.route)
    }
}
