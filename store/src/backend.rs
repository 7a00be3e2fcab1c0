//! What a backend answers: the store that talks to replicas (the embedded
//! cluster, a CQL session) rather than wrapping another store. A backend
//! implements one method per [`Op`], each handed a request that
//! [`Request::check`] passed, and [`answer`] is its whole
//! [`Store::call`](crate::Store::call): one check, one dispatch, the same
//! for every backend.

use crate::api::ReadOutcome;
use crate::cell::{CellPage, KeyPage, Table, Timestamp};
use crate::error::StoreError;
use crate::fenced::FencedOutcome;
use crate::request::{
    DeleteOp, Op, ReadOp, Request, Response, ScanCellsOp, ScanKeysOp, WriteFencedOp, WriteOp,
};
use crate::route::Route;

/// A store's operations, one per [`Op`], on arguments already checked;
/// each is specified by the [`Store`](crate::Store) method of its name.
pub(crate) trait Backend: Sync {
    /// [`Store::write_via`](crate::Store::write_via).
    async fn apply_write(
        &self,
        route: &Route,
        table: Table,
        op: WriteOp<'_>,
    ) -> Result<(), StoreError>;
    /// [`Store::delete_via`](crate::Store::delete_via).
    async fn apply_delete(
        &self,
        route: &Route,
        table: Table,
        op: DeleteOp<'_>,
    ) -> Result<(), StoreError>;
    /// [`Store::read_observed_via`](crate::Store::read_observed_via).
    async fn apply_read(
        &self,
        route: &Route,
        table: Table,
        op: ReadOp<'_>,
    ) -> Result<ReadOutcome, StoreError>;
    /// [`Store::scan_keys_via`](crate::Store::scan_keys_via).
    async fn apply_scan_keys(
        &self,
        route: &Route,
        table: Table,
        op: ScanKeysOp<'_>,
    ) -> Result<KeyPage, StoreError>;
    /// [`Store::scan_cells_via`](crate::Store::scan_cells_via).
    async fn apply_scan_cells(
        &self,
        route: &Route,
        table: Table,
        op: ScanCellsOp<'_>,
    ) -> Result<CellPage, StoreError>;
    /// [`Store::server_time_via`](crate::Store::server_time_via).
    async fn apply_server_time(&self, route: &Route) -> Result<Timestamp, StoreError>;
    /// [`Store::write_fenced_via`](crate::Store::write_fenced_via).
    async fn apply_write_fenced(
        &self,
        route: &Route,
        table: Table,
        op: WriteFencedOp<'_>,
    ) -> Result<FencedOutcome, StoreError>;
}

/// Checks `request` and hands it to the operation of `backend` that
/// answers it.
///
/// # Errors
/// What [`Request::check`] refuses, or the operation's error.
pub(crate) async fn answer<B: Backend>(
    backend: &B,
    request: Request<'_>,
) -> Result<Response, StoreError> {
    request.check()?;
    let Request { route, table, op } = request;
    let route = &route;
    Ok(match op {
        Op::Write(op) => {
            backend.apply_write(route, table, op).await?;
            Response::Done
        }
        Op::Delete(op) => {
            backend.apply_delete(route, table, op).await?;
            Response::Done
        }
        Op::Read(op) => Response::Read(backend.apply_read(route, table, op).await?),
        Op::ScanKeys(op) => Response::Keys(backend.apply_scan_keys(route, table, op).await?),
        Op::ScanCells(op) => Response::Cells(backend.apply_scan_cells(route, table, op).await?),
        Op::ServerTime => Response::Time(backend.apply_server_time(route).await?),
        Op::WriteFenced(op) => {
            Response::Fenced(backend.apply_write_fenced(route, table, op).await?)
        }
    })
}
