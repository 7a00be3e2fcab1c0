//! `migrate inspect <lock>`: every cell of one lock in `main`, `shadow` and
//! `queue`.

use std::num::NonZeroU32;

use anyhow::Context;
use lockshift_combined::census::{CensusCell, CensusOptions, inspect_lock, waiters};
use lockshift_combined::registry::live_nodes;
use lockshift_lock::{Algorithm, LockId};
use lockshift_store::schema;
use serde::Serialize;

use super::{Env, ms};
use crate::JSON_VERSION;

/// The report of `migrate inspect` (its JSON schema, `"version": 1`).
#[derive(Debug, Clone, Serialize)]
pub struct InspectReport {
    /// Schema version, 1.
    pub version: u32,
    /// The lock id.
    pub lock: String,
    /// When the cells were read (µs since the epoch).
    pub now_us: i64,
    /// Cells not renewed for longer than this are flagged stale.
    pub stale_after_ms: u64,
    /// The holder: the owner of the single `main` cell whose lease is not
    /// over, if exactly one (a cell whose lease is over holds nothing,
    /// though it keeps others waiting: see [`CellRow::lease_over`]).
    pub holder: Option<String>,
    /// Waiters: live queue cells of owners that do not hold the lock.
    pub waiting: usize,
    /// Every cell, `main` then `shadow` then `queue`, each in column order.
    pub cells: Vec<CellRow>,
}

/// One cell.
#[derive(Debug, Clone, Serialize)]
pub struct CellRow {
    /// `main`, `shadow` or `queue`.
    pub table: String,
    /// The column name as stored.
    pub column: String,
    /// The owner id (for queue cells, the column without its time prefix).
    pub owner: String,
    /// The lockshift node in the owner id, if it has lockshift's shape.
    pub node: Option<String>,
    /// Whether that node is in the registry now.
    pub registered: bool,
    /// The algorithm the cell's value names; `null`: not written by lockshift.
    pub algorithm: Option<Algorithm>,
    /// Queue cells: position among live queue cells (0 = head); `null` when
    /// stale (skipped by waiters) or not a queue cell.
    pub queue_position: Option<usize>,
    /// Queue cells: when the waiter joined (the column's time prefix, µs).
    pub queued_at_us: Option<i64>,
    /// `writetime()`: when it was last written (µs since the epoch).
    pub writetime_us: i64,
    /// Time since then.
    pub age_ms: u64,
    /// `ttl()`: time left before it expires; `null`: never.
    pub ttl_left_ms: Option<u64>,
    /// Not renewed for longer than the threshold.
    pub stale: bool,
    /// Its lease is over by its owner's own promise: not renewed for
    /// longer than its guaranteed life (allowing for
    /// `rollout.clock_skew_margin`), so its owner has been told it lost
    /// the lock. A late write brought it back, or its owner could not
    /// delete it (docs/design.md §5, L5): nobody holds or waits through
    /// it, it keeps others waiting until it expires, and `migrate clean`
    /// deletes it. Known only while the owner's process is in the registry.
    pub lease_over: bool,
}

impl From<&CensusCell> for CellRow {
    fn from(c: &CensusCell) -> Self {
        CellRow {
            table: c.table.to_string(),
            column: c.column.clone(),
            owner: c.owner.owner.clone(),
            node: c.owner.node.clone(),
            registered: c.owner.registered,
            algorithm: c.owner.algorithm,
            queue_position: c.queue_position,
            queued_at_us: c.queued_at.and_then(|t| i64::try_from(t).ok()),
            writetime_us: c.writetime.as_micros(),
            age_ms: ms(c.age),
            ttl_left_ms: c.ttl_left.map(ms),
            stale: c.stale,
            lease_over: c.lease_over,
        }
    }
}

/// A lock with no cells anywhere: not held, not waited for — or a typo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownLock(pub String);

impl std::error::Error for UnknownLock {}

impl std::fmt::Display for UnknownLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown lock {:?}: it has no cells in main, shadow or queue (not held, not waited \
             for, or the id is misspelt; `migrate status` counts the locks in use)",
            self.0
        )
    }
}

/// Reads every cell of `lock`.
///
/// # Errors
/// [`UnknownLock`] when there are none; store errors.
pub async fn inspect(env: &Env, lock: &LockId) -> anyhow::Result<InspectReport> {
    let store = env.store.as_ref();
    let (nodes, _) = live_nodes(store)
        .await
        .context("reading the node registry")?;
    let stale_after = env.stale_after();
    let cells = inspect_lock(
        store,
        env.clock.as_ref(),
        &nodes,
        lock.as_str(),
        CensusOptions {
            stale_after,
            clock_skew_margin: env.settings.rollout.clock_skew_margin,
            page_size: NonZeroU32::MIN,
        },
    )
    .await
    .with_context(|| format!("reading the cells of lock {lock}"))?;
    if cells.is_empty() {
        return Err(UnknownLock(lock.to_string()).into());
    }
    let main: Vec<&CensusCell> = cells
        .iter()
        .filter(|c| c.table == schema::MAIN && !c.lease_over)
        .collect();
    let holder = match main.as_slice() {
        [only] => Some(only.owner.owner.clone()),
        _ => None,
    };
    // Holders leave the queue once they hold (queue-lock Q2): waiters are
    // the queue cells of owners without a holding in main.
    let waiting = waiters(&cells).len();
    Ok(InspectReport {
        version: JSON_VERSION,
        lock: lock.to_string(),
        now_us: env.clock.now().as_micros(),
        stale_after_ms: ms(stale_after),
        holder,
        waiting,
        cells: cells.iter().map(CellRow::from).collect(),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use lockshift::Settings;
    use lockshift_store::{
        CellWrite, Clock, ManualClock, MemoryStore, SharedStore, Timestamp, Ttl, WriteOptions,
    };

    use super::*;

    #[tokio::test]
    async fn shows_every_cell_and_refuses_an_unknown_lock() {
        let clock = Arc::new(ManualClock::new(Timestamp::from_micros(
            1_700_000_000_000_000,
        )));
        let store: SharedStore = Arc::new(MemoryStore::with_clock(clock.clone()));
        let env = Env::new(Settings::default(), store.clone(), clock.clone());
        let t0 = clock.now();
        let ttl = WriteOptions::at(t0).with_ttl(Ttl::from_secs(60).unwrap());
        let q = |owner: &str, at: i64| format!("{at:020}{owner}");
        store
            .write(
                schema::MAIN,
                "acct",
                &[CellWrite::new("n1/0000000000000001", b"queue".to_vec())],
                ttl,
            )
            .await
            .unwrap();
        store
            .write(
                schema::QUEUE,
                "acct",
                &[
                    CellWrite::new(q("n1/0000000000000001", t0.as_micros()), b"queue".to_vec()),
                    CellWrite::new(
                        q("n2/0000000000000002", t0.as_micros() + 5),
                        b"queue".to_vec(),
                    ),
                ],
                ttl,
            )
            .await
            .unwrap();
        clock.advance(Duration::from_secs(3));
        let r = inspect(&env, &LockId::new("acct").unwrap()).await.unwrap();
        assert_eq!(r.holder.as_deref(), Some("n1/0000000000000001"));
        assert_eq!(r.waiting, 1);
        assert_eq!(r.cells.len(), 3);
        assert_eq!(r.cells[2].queue_position, Some(1));
        assert_eq!(r.cells[2].queued_at_us, Some(t0.as_micros() + 5));
        assert_eq!(r.cells[0].age_ms, 3000);
        assert!(!r.cells[0].stale);
        let err = inspect(&env, &LockId::new("nope").unwrap())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("unknown lock \"nope\""), "{err}");
    }
}
