//! [`CqlStore`]'s operations, one per [`Op`](crate::Op) (its
//! [`Backend`]), and its [`Store`] impl: each sends one request, with its
//! arguments checked as every backend's are ([`backend::answer`]).

use async_trait::async_trait;
use scylla::response::{PagingState, PagingStateResponse};
use tracing::Instrument;

use super::keyspace::node_datacenters;
use super::rows::{
    CellRow, ScannedCell, cell_from_row, decode_rows, delete_values, insert_values, limit_bind,
    ttl_bind,
};
use super::store::{CqlStore, failed_on, read_failed};
use crate::api::{ReadOutcome, Store};
use crate::backend::{self, Backend};
use crate::cell::{CellPage, KeyPage, OpKind, PageCursor, RowCells, Table, Timestamp};
use crate::error::{StoreError, StoreErrorKind};
use crate::fenced::FencedOutcome;
use crate::request::{
    DeleteOp, ReadOp, Request, Response, ScanCellsOp, ScanKeysOp, WriteFencedOp, WriteOp,
};
use crate::route::{Datacenter, Route, Topology};
use crate::tombstones;

impl Backend for CqlStore {
    async fn apply_write(
        &self,
        route: &Route,
        table: Table,
        write: WriteOp<'_>,
    ) -> Result<(), StoreError> {
        let WriteOp {
            row,
            cells,
            options,
        } = write;
        let op = OpKind::Write;
        if cells.is_empty() {
            return Ok(());
        }
        let routed = self.statements_for(route, op, table)?;
        let statements = routed.get(table, op)?;
        let ttl = ttl_bind(&options);
        // Invariant 1 of `cql`: the caller's timestamp, always.
        let timestamp = options.timestamp.as_micros();
        let bind = |c| insert_values(row, c, ttl, timestamp);
        let span = tracing::debug_span!("cql", %op, %table, cells = cells.len());
        async {
            match cells {
                [cell] => self
                    .session
                    .execute_unpaged(&statements.insert, bind(cell))
                    .await
                    .map(drop),
                _ => {
                    // Invariant 2 of `cql`: one batch, one partition.
                    let batch = routed.batch_of(&statements.insert, cells.len());
                    let values: Vec<_> = cells.iter().map(bind).collect();
                    self.session.batch(&batch, values).await.map(drop)
                }
            }
            .map_err(|e| failed_on(route, e, op, table))
        }
        .instrument(span)
        .await
    }

    async fn apply_delete(
        &self,
        route: &Route,
        table: Table,
        delete: DeleteOp<'_>,
    ) -> Result<(), StoreError> {
        let DeleteOp {
            row,
            columns,
            timestamp,
        } = delete;
        let op = OpKind::Delete;
        if columns.is_empty() {
            return Ok(());
        }
        let routed = self.statements_for(route, op, table)?;
        let statements = routed.get(table, op)?;
        // Invariant 1 of `cql`: tombstones at the caller's timestamp, so a later renewal survives.
        let timestamp = timestamp.as_micros();
        let bind = |c| delete_values(timestamp, row, c);
        let span = tracing::debug_span!("cql", %op, %table, cells = columns.len());
        async {
            match columns {
                [column] => self
                    .session
                    .execute_unpaged(&statements.delete, bind(column.as_str()))
                    .await
                    .map(drop),
                _ => {
                    let batch = routed.batch_of(&statements.delete, columns.len());
                    let values: Vec<_> = columns.iter().map(String::as_str).map(bind).collect();
                    self.session.batch(&batch, values).await.map(drop)
                }
            }
            .map_err(|e| failed_on(route, e, op, table))
        }
        .instrument(span)
        .await
    }

    async fn apply_read(
        &self,
        route: &Route,
        table: Table,
        read: ReadOp<'_>,
    ) -> Result<ReadOutcome, StoreError> {
        let ReadOp { row, query } = read;
        let op = OpKind::Read;
        let routed = self.statements_for(route, op, table)?;
        let statements = routed.get(table, op)?;
        let limit = limit_bind(query.limit);
        let span = tracing::debug_span!("cql", %op, %table, limit);
        async {
            // Unpaged: lock rows hold a handful of cells; a queue row holds
            // one per waiter. The LIMIT bounds what a caller asks for.
            let result = match &query.start_column {
                None => {
                    self.session
                        .execute_unpaged(&statements.select_first, (row, limit))
                        .await
                }
                Some(start) => {
                    self.session
                        .execute_unpaged(&statements.select_from, (row, start.as_str(), limit))
                        .await
                }
            }
            .map_err(|e| read_failed(route, e, table, row))?;
            // The server's warnings, verbatim; the tombstone count only
            // when Cassandra says it (above its warn threshold).
            let warnings: Vec<String> = result.warnings().map(str::to_string).collect();
            let tombstones = warnings
                .iter()
                .find_map(|w| tombstones::parse_warning(w))
                .map(|w| w.tombstones);
            let cells = decode_rows::<CellRow>(result, op, Some(table))?
                .into_iter()
                .map(|r| {
                    cell_from_row(r).map_err(|why| {
                        StoreError::new(StoreErrorKind::Invalid, op, Some(table), why)
                    })
                })
                .collect::<Result<_, _>>()?;
            Ok(ReadOutcome {
                cells,
                tombstones,
                warnings,
            })
        }
        .instrument(span)
        .await
    }

    async fn apply_scan_keys(
        &self,
        route: &Route,
        table: Table,
        scan: ScanKeysOp<'_>,
    ) -> Result<KeyPage, StoreError> {
        let ScanKeysOp { cursor, page_size } = scan;
        let op = OpKind::Scan;
        let routed = self.statements_for(route, op, table)?;
        let statements = routed.get(table, op)?;
        // The page size lives on the statement; a clone shares the prepared
        // state and costs a few reference counts.
        let mut scan = statements.scan.clone();
        scan.set_page_size(i32::try_from(page_size.get()).unwrap_or(i32::MAX));
        let paging = match cursor {
            Some(c) => PagingState::new_from_raw_bytes(c.as_bytes()),
            None => PagingState::start(),
        };
        let span = tracing::debug_span!("cql", %op, %table, page_size = page_size.get());
        async {
            let (result, paging) = self
                .session
                .execute_single_page(&scan, (), paging)
                .await
                .map_err(|e| failed_on(route, e, op, table))?;
            let keys = decode_rows::<(String,)>(result, op, Some(table))?
                .into_iter()
                .map(|(key,)| key)
                .collect();
            let next = match paging {
                PagingStateResponse::NoMorePages => None,
                PagingStateResponse::HasMorePages { state } => match state.as_bytes_slice() {
                    Some(bytes) => Some(PageCursor::from_bytes(bytes.to_vec())),
                    None => {
                        return Err(StoreError::new(
                            StoreErrorKind::Invalid,
                            op,
                            Some(table),
                            "the server reported more pages but sent no paging state",
                        ));
                    }
                },
            };
            Ok(KeyPage { keys, next })
        }
        .instrument(span)
        .await
    }

    async fn apply_server_time(&self, route: &Route) -> Result<Timestamp, StoreError> {
        let (op, table) = (OpKind::Read, crate::schema::ROLLOUT);
        let statement = match route {
            Route::Host(address) => self.clock_of_host(address)?,
            _ => self.statements_for(route, op, table)?.server_time.clone(),
        };
        let result = self
            .session
            .execute_unpaged(&statement, ())
            .await
            .map_err(|e| failed_on(route, e, op, table))?;
        let rows = decode_rows::<(i64,)>(result, op, Some(table))?;
        let Some((ms,)) = rows.first() else {
            return Err(StoreError::new(
                StoreErrorKind::Invalid,
                op,
                Some(table),
                "system.local answered no row for toUnixTimestamp(now())",
            ));
        };
        Ok(Timestamp::from_micros(ms.saturating_mul(1000)))
    }

    async fn apply_scan_cells(
        &self,
        route: &Route,
        table: Table,
        scan: ScanCellsOp<'_>,
    ) -> Result<CellPage, StoreError> {
        let ScanCellsOp {
            range,
            cursor,
            page_size,
        } = scan;
        let op = OpKind::Scan;
        let routed = self.statements_for(route, op, table)?;
        let statements = routed.get(table, op)?;
        // The page size lives on the statement (as the key scan's).
        let mut scan = statements.scan_cells.clone();
        scan.set_page_size(i32::try_from(page_size.get()).unwrap_or(i32::MAX));
        let paging = match cursor {
            Some(c) => PagingState::new_from_raw_bytes(c.as_bytes()),
            None => PagingState::start(),
        };
        let span = tracing::debug_span!("cql", %op, %table, %range, page_size = page_size.get());
        async {
            let (result, paging) = self
                .session
                .execute_single_page(&scan, (range.start, range.end), paging)
                .await
                .map_err(|e| failed_on(route, e, op, table))?;
            let warnings: Vec<String> = result.warnings().map(str::to_string).collect();
            let tombstones = warnings
                .iter()
                .find_map(|w| tombstones::parse_warning(w))
                .map(|w| w.tombstones);
            let mut rows: Vec<RowCells> = Vec::new();
            for (token, key, column, value, writetime, ttl) in
                decode_rows::<ScannedCell>(result, op, Some(table))?
            {
                let cell = cell_from_row((column, value, writetime, ttl)).map_err(|why| {
                    StoreError::new(StoreErrorKind::Invalid, op, Some(table), why)
                })?;
                match rows.last_mut() {
                    Some(row) if row.key == key => row.cells.push(cell),
                    _ => rows.push(RowCells {
                        key,
                        token,
                        cells: vec![cell],
                    }),
                }
            }
            let next = match paging {
                PagingStateResponse::NoMorePages => None,
                PagingStateResponse::HasMorePages { state } => match state.as_bytes_slice() {
                    Some(bytes) => Some(PageCursor::from_bytes(bytes.to_vec())),
                    None => {
                        return Err(StoreError::new(
                            StoreErrorKind::Invalid,
                            op,
                            Some(table),
                            "the server reported more pages but sent no paging state",
                        ));
                    }
                },
            };
            Ok(CellPage {
                rows,
                next,
                tombstones,
                warnings,
            })
        }
        .instrument(span)
        .await
    }

    async fn apply_write_fenced(
        &self,
        route: &Route,
        table: Table,
        write: WriteFencedOp<'_>,
    ) -> Result<FencedOutcome, StoreError> {
        self.fenced_write(route, table, write).await
    }
}

#[async_trait]
impl Store for CqlStore {
    async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
        backend::answer(self, request).await
    }

    fn describe(&self) -> String {
        self.description.clone()
    }

    fn topology(&self) -> Topology {
        Topology {
            local: self.settings.local_datacenter.clone(),
            datacenters: node_datacenters(&self.session)
                .into_iter()
                .filter_map(|dc| Datacenter::new(dc).ok())
                .collect(),
            hosts: self.hosts(),
        }
    }
}
