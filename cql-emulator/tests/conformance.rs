//! The store conformance suite (`lockshift_store::conformance`) through the
//! real `scylla` driver against the endpoint.
//!
//! `DriverStore` below is a test stand-in for the CQL backend (`CqlStore`,
//! written in parallel): it sends exactly the statements agreed in
//! `/work/briefs/cql-statements.md` — prepared, one cell per EXECUTE or an
//! UNLOGGED BATCH for several, DISTINCT keys one page at a time — so the
//! endpoint is held to the suite before the real backend exists. Once
//! `CqlStore` is merged, the same suite should run through it instead.

mod common;

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use common::*;
use lockshift_cql_emulator::EmulatorHandle;
use lockshift_store::conformance::Target;
use lockshift_store::{
    Cell, CellWrite, Clock, KeyPage, ManualClock, OpKind, PageCursor, RowQuery, Store, StoreError,
    StoreErrorKind, Table, Timestamp, WriteOptions,
};
use scylla::client::session::Session;
use scylla::response::{PagingState, PagingStateResponse};
use scylla::statement::batch::{Batch, BatchType};

#[derive(Debug)]
struct DriverStore {
    session: Session,
    statements: HashMap<&'static str, StatementsDebug>,
}

/// `Statements` with a Debug impl (the Store trait requires Debug).
struct StatementsDebug(Statements);

impl std::fmt::Debug for StatementsDebug {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Statements")
    }
}

fn failed(op: OpKind, table: Table, e: impl std::fmt::Display) -> StoreError {
    StoreError::new(StoreErrorKind::Invalid, op, Some(table), e.to_string())
}

impl DriverStore {
    fn st(&self, table: Table) -> &Statements {
        &self.statements[table.name()].0
    }

    fn cells(
        table: Table,
        result: Result<scylla::response::query_result::QueryResult, scylla::errors::ExecutionError>,
    ) -> Result<Vec<Cell>, StoreError> {
        let err = |e: &dyn std::fmt::Display| failed(OpKind::Read, table, e);
        let rows = result
            .map_err(|e| err(&e))?
            .into_rows_result()
            .map_err(|e| err(&e))?;
        let mut out = Vec::new();
        for row in rows
            .rows::<(String, Vec<u8>, i64, Option<i32>)>()
            .map_err(|e| err(&e))?
        {
            let (column, value, writetime, ttl) = row.map_err(|e| err(&e))?;
            out.push(Cell {
                column,
                value,
                writetime: Timestamp::from_micros(writetime),
                ttl: ttl.map(|s| Duration::from_secs(s as u64)),
            });
        }
        Ok(out)
    }
}

#[async_trait]
impl Store for DriverStore {
    async fn write(
        &self,
        table: Table,
        row: &str,
        cells: &[CellWrite],
        options: WriteOptions,
    ) -> Result<(), StoreError> {
        let ttl = options.ttl.map_or(0, |t| t.as_secs() as i32);
        let ts = options.timestamp.as_micros();
        let st = self.st(table);
        let r = match cells {
            [] => return Ok(()),
            [c] => self
                .session
                .execute_unpaged(&st.insert, (row, &c.column, &c.value, ttl, ts))
                .await
                .map(|_| ()),
            many => {
                let mut batch = Batch::new(BatchType::Unlogged);
                let mut values = Vec::new();
                for c in many {
                    batch.append_statement(st.insert.clone());
                    values.push((row, c.column.as_str(), c.value.as_slice(), ttl, ts));
                }
                self.session.batch(&batch, values).await.map(|_| ())
            }
        };
        r.map_err(|e| failed(OpKind::Write, table, e))
    }

    async fn delete(
        &self,
        table: Table,
        row: &str,
        columns: &[String],
        timestamp: Timestamp,
    ) -> Result<(), StoreError> {
        let st = self.st(table);
        let mut batch = Batch::new(BatchType::Unlogged);
        let mut values = Vec::new();
        for c in columns {
            batch.append_statement(st.delete.clone());
            values.push((timestamp.as_micros(), row, c.as_str()));
        }
        if values.is_empty() {
            return Ok(());
        }
        self.session
            .batch(&batch, values)
            .await
            .map(|_| ())
            .map_err(|e| failed(OpKind::Delete, table, e))
    }

    async fn read(
        &self,
        table: Table,
        row: &str,
        query: &RowQuery,
    ) -> Result<Vec<Cell>, StoreError> {
        let st = self.st(table);
        let limit = query
            .limit
            .map_or(i32::MAX, |n| i32::try_from(n.get()).unwrap_or(i32::MAX));
        let r = match &query.start_column {
            None => self.session.execute_unpaged(&st.read, (row, limit)).await,
            Some(start) => {
                self.session
                    .execute_unpaged(&st.read_from, (row, start, limit))
                    .await
            }
        };
        Self::cells(table, r)
    }

    async fn scan_keys(
        &self,
        table: Table,
        cursor: Option<&PageCursor>,
        page_size: NonZeroU32,
    ) -> Result<KeyPage, StoreError> {
        let mut keys = self.st(table).keys.clone();
        keys.set_page_size(i32::try_from(page_size.get()).unwrap_or(i32::MAX));
        let state = match cursor {
            Some(c) => PagingState::new_from_raw_bytes(c.as_bytes()),
            None => PagingState::start(),
        };
        let (result, next) = self
            .session
            .execute_single_page(&keys, (), state)
            .await
            .map_err(|e| failed(OpKind::Scan, table, e))?;
        let rows = result
            .into_rows_result()
            .map_err(|e| failed(OpKind::Scan, table, e))?;
        let keys = rows
            .rows::<(String,)>()
            .map_err(|e| failed(OpKind::Scan, table, e))?
            .map(|r| r.map(|(k,)| k))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| failed(OpKind::Scan, table, e))?;
        let next = match next {
            PagingStateResponse::HasMorePages { state } => state
                .as_bytes_slice()
                .map(|b| PageCursor::from_bytes(b.to_vec())),
            PagingStateResponse::NoMorePages => None,
        };
        Ok(KeyPage { keys, next })
    }

    fn describe(&self) -> String {
        "driver stand-in over the lockshift CQL emulator".to_string()
    }
}

#[derive(Debug)]
struct EndpointTarget {
    _endpoint: EmulatorHandle,
    clock: Arc<ManualClock>,
    store: DriverStore,
    counter: AtomicU64,
}

#[async_trait]
impl Target for EndpointTarget {
    fn store(&self) -> &dyn Store {
        &self.store
    }
    fn now(&self) -> Timestamp {
        self.clock.now()
    }
    async fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }
    fn unique(&self, name: &str) -> String {
        format!("{name}-{}", self.counter.fetch_add(1, Ordering::Relaxed))
    }
}

async fn target() -> EndpointTarget {
    let (endpoint, clock) = common::endpoint().await;
    let session = common::session(endpoint.local_addr(), true).await;
    create_schema(&session).await;
    let mut statements = HashMap::new();
    for t in TABLES {
        statements.insert(t, StatementsDebug(Statements::prepare(&session, t).await));
    }
    EndpointTarget {
        _endpoint: endpoint,
        clock,
        store: DriverStore {
            session,
            statements,
        },
        counter: AtomicU64::new(0),
    }
}

lockshift_store::conformance_tests!(target());
