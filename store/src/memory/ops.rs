//! [`MemoryStore`]'s operations, one per [`Op`](crate::Op) (its
//! [`Backend`]), and its [`Store`] impl: each plans the request on the
//! cluster's network and applies it to the replicas it reaches, with its
//! arguments checked as every backend's are ([`backend::answer`]).

use async_trait::async_trait;

use super::MemoryStore;
use super::network::Plan;
use crate::api::{ReadOutcome, Store};
use crate::backend::{self, Backend};
use crate::cell::{CellPage, KeyPage, OpKind, PageCursor, Table, Timestamp};
use crate::error::{StoreError, StoreErrorKind};
use crate::fenced::FencedOutcome;
use crate::reconcile::{CellVersion, ttl_deadline};
use crate::request::{
    DeleteOp, ReadOp, Request, Response, ScanCellsOp, ScanKeysOp, WriteFencedOp, WriteOp,
};
use crate::route::{Host, Route, Topology};
use crate::tombstones;

impl Backend for MemoryStore {
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
        if cells.is_empty() {
            return Ok(());
        }
        // Invariant 2: the deadline starts from the store's clock, at the whole
        // second as Cassandra counts it — the coordinator's, for every replica.
        let now = self.clock.now();
        let expires_at = options.ttl.map(|ttl| ttl_deadline(now, ttl.as_duration()));
        let versions = cells
            .iter()
            .map(|c| {
                (
                    c.column.clone(),
                    CellVersion::Live {
                        value: c.value.clone(),
                        timestamp: options.timestamp,
                        expires_at,
                    },
                )
            })
            .collect();
        self.mutate(route, OpKind::Write, table, row, versions)
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
        if columns.is_empty() {
            return Ok(());
        }
        let deleted_at = self.clock.now();
        let versions = columns
            .iter()
            .map(|c| {
                (
                    c.clone(),
                    CellVersion::Tombstone {
                        timestamp,
                        deleted_at,
                    },
                )
            })
            .collect();
        self.mutate(route, OpKind::Delete, table, row, versions)
    }

    async fn apply_read(
        &self,
        route: &Route,
        table: Table,
        read: ReadOp<'_>,
    ) -> Result<ReadOutcome, StoreError> {
        let ReadOp { row, query } = read;
        let now = self.clock.now();
        let grace = self.gc_grace(table);
        let limits = self.thresholds;
        let mut st = self.lock();
        let plan = self.plan(&mut st, route, OpKind::Read, table, now)?;
        let k = plan.coordinator();
        if let Plan::Quorum { replicas, .. } = &plan {
            for &d in replicas {
                st.replicas[d].sweep_due(now, &|t| self.gc_grace(t));
            }
            Self::repair(&mut st, replicas, table, row, now, grace);
        }
        let replica = &mut st.replicas[k];
        replica.sweep_due(now, &|t| self.gc_grace(t));
        let slice = replica.read(table, row, query, now, grace, limits.fail);
        Self::record(&mut st, table, OpKind::Read, slice.tombstones);
        drop(st);
        // Invariant 3 of `tombstones`.
        if slice.failed {
            return Err(StoreError::too_many_tombstones(
                OpKind::Read,
                table,
                row,
                slice.tombstones,
                limits.fail,
            ));
        }
        let warnings = if slice.tombstones > limits.warn {
            vec![tombstones::warning_text(
                slice.cells.len() as u64,
                slice.tombstones,
                &tombstones::read_cql(&self.keyspace, table, row, query),
                tombstones::token(row),
            )]
        } else {
            Vec::new()
        };
        Ok(ReadOutcome {
            cells: slice.cells,
            tombstones: Some(slice.tombstones),
            warnings,
        })
    }

    async fn apply_scan_keys(
        &self,
        route: &Route,
        table: Table,
        scan: ScanKeysOp<'_>,
    ) -> Result<KeyPage, StoreError> {
        let ScanKeysOp { cursor, page_size } = scan;
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
        let mut st = self.lock();
        let plan = self.plan(&mut st, route, OpKind::Scan, table, now)?;
        let k = plan.coordinator();
        if let Plan::Quorum { replicas, .. } = &plan
            && replicas.len() > 1
        {
            let mut keys: Vec<String> = replicas
                .iter()
                .flat_map(|&d| st.replicas[d].keys(table))
                .collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                Self::repair(&mut st, replicas, table, &key, now, grace);
            }
        }
        let replica = &mut st.replicas[k];
        replica.sweep_due(now, &|t| self.gc_grace(t));
        let page = replica.scan(
            table,
            after,
            page_size.get() as usize,
            now,
            grace,
            limits.fail,
        );
        Self::record(&mut st, table, OpKind::Scan, page.tombstones);
        drop(st);
        if page.failed {
            return Err(StoreError::too_many_tombstones(
                OpKind::Scan,
                table,
                "",
                page.tombstones,
                limits.fail,
            ));
        }
        let next = match page.keys.last() {
            Some(last) if page.more => Some(PageCursor::from_bytes(last.as_bytes().to_vec())),
            _ => None,
        };
        Ok(KeyPage {
            keys: page.keys,
            next,
        })
    }

    /// The coordinator's clock, in whole milliseconds as Cassandra's
    /// `toUnixTimestamp(now())` gives it: the store's clock, off by the
    /// coordinating datacenter's skew ([`MemoryStore::skew_node_clock`]).
    async fn apply_server_time(&self, route: &Route) -> Result<Timestamp, StoreError> {
        let now = self.clock.now();
        let mut st = self.lock();
        let plan = self.plan(&mut st, route, OpKind::Read, crate::schema::ROLLOUT, now)?;
        let skew = st
            .clock_offsets
            .get(plan.coordinator())
            .copied()
            .unwrap_or(0);
        let node = now.offset_micros(skew);
        Ok(Timestamp::from_micros(
            node.as_micros().div_euclid(1000) * 1000,
        ))
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
        let after = cursor
            .map(|c| cell_cursor(c.as_bytes()))
            .transpose()
            .map_err(|why| {
                StoreError::new(StoreErrorKind::Invalid, OpKind::Scan, Some(table), why)
            })?;
        let now = self.clock.now();
        let grace = self.gc_grace(table);
        let limits = self.thresholds;
        let page_size = page_size.get() as usize;
        let mut st = self.lock();
        let plan = self.plan(&mut st, route, OpKind::Scan, table, now)?;
        let k = plan.coordinator();
        // A quorum scan repairs what its replicas disagree on first — only
        // the rows this page can reach (a page holds at most `page_size`
        // cells, so at most that many rows), never the whole table.
        if let Plan::Quorum { replicas, .. } = &plan
            && replicas.len() > 1
        {
            let mut keys: Vec<String> = replicas
                .iter()
                .flat_map(|&d| st.replicas[d].keys_in(table, range, after.as_ref(), page_size))
                .collect();
            keys.sort_by_key(|k| (tombstones::token(k), k.clone()));
            keys.dedup();
            keys.truncate(page_size);
            for &d in replicas {
                st.replicas[d].sweep_due(now, &|t| self.gc_grace(t));
            }
            for key in keys {
                Self::repair(&mut st, replicas, table, &key, now, grace);
            }
        }
        let replica = &mut st.replicas[k];
        replica.sweep_due(now, &|t| self.gc_grace(t));
        let page = replica.scan_cells(table, range, after, page_size, now, grace, limits.fail);
        Self::record(&mut st, table, OpKind::Scan, page.tombstones);
        drop(st);
        if page.failed {
            return Err(StoreError::too_many_tombstones(
                OpKind::Scan,
                table,
                "",
                page.tombstones,
                limits.fail,
            ));
        }
        let warnings = if page.tombstones > limits.warn {
            vec![tombstones::warning_text(
                page.rows.iter().map(|r| r.cells.len() as u64).sum(),
                page.tombstones,
                &format!(
                    "SELECT row_key, column_name, value FROM {}.{table} WHERE token(row_key) > {} \
                     AND token(row_key) <= {} LIMIT {page_size}",
                    self.keyspace, range.start, range.end
                ),
                range.start,
            )]
        } else {
            Vec::new()
        };
        Ok(CellPage {
            rows: page.rows,
            next: page
                .more
                .map(|(key, column)| cell_cursor_bytes(&key, &column)),
            tombstones: Some(page.tombstones),
            warnings,
        })
    }

    async fn apply_write_fenced(
        &self,
        route: &Route,
        table: Table,
        write: WriteFencedOp<'_>,
    ) -> Result<FencedOutcome, StoreError> {
        self.fenced_write(route, table, write)
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
        backend::answer(self, request).await
    }

    fn describe(&self) -> String {
        "embedded".to_string()
    }

    fn topology(&self) -> Topology {
        let st = self.lock();
        Topology {
            local: self
                .client
                .datacenter
                .filter(|_| self.client.names_local)
                .map(|i| st.network.name(i).clone()),
            datacenters: st.network.names(),
            hosts: st
                .network
                .names()
                .into_iter()
                .map(|dc| Host {
                    address: dc.to_string(),
                    datacenter: Some(dc),
                })
                .collect(),
        }
    }
}

/// A cell scan's cursor: the last row's key (its length first, 4 bytes
/// big-endian) and the last column returned.
fn cell_cursor_bytes(key: &str, column: &str) -> PageCursor {
    let len = u32::try_from(key.len()).unwrap_or(u32::MAX);
    let mut bytes = len.to_be_bytes().to_vec();
    bytes.extend_from_slice(key.as_bytes());
    bytes.extend_from_slice(column.as_bytes());
    PageCursor::from_bytes(bytes)
}

/// The row key and column of a cell scan's cursor.
fn cell_cursor(bytes: &[u8]) -> Result<(String, String), String> {
    let bad = || "page cursor was not made by the embedded store's scan of cells".to_string();
    let (len, rest) = bytes.split_first_chunk::<4>().ok_or_else(bad)?;
    let len = u32::from_be_bytes(*len) as usize;
    if rest.len() < len {
        return Err(bad());
    }
    let (key, column) = rest.split_at(len);
    Ok((
        String::from_utf8(key.to_vec()).map_err(|_| bad())?,
        String::from_utf8(column.to_vec()).map_err(|_| bad())?,
    ))
}
