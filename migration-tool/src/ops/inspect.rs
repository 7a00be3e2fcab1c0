//! `migrate inspect <lock>`: every cell of one lock in `main`, `shadow` and
//! `queue`.

use std::num::NonZeroU32;

use lockshift_decide::census::{CensusCell, waiters};
use lockshift_lock::{Algorithm, LockId};
use lockshift_rollout::census::{CensusOptions, inspect_lock, read_own_clock};
use lockshift_rollout::registry::live_nodes;
use lockshift_store::{StoreErrorKind, schema};
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
    /// Waiters' cells (queue cells, reservations) not rewritten for longer
    /// than this are flagged stale (and skipped by waiters, for queue cells).
    pub stale_after_ms: u64,
    /// Holdings not renewed for longer than this are flagged stale.
    pub holding_stale_after_ms: u64,
    /// No cell in `main`, `shadow` or `queue`: nobody holds or waits for
    /// the lock (or its id is misspelt).
    pub free: bool,
    /// The holder: the owner of the holding in `main` (a cell that is not a
    /// reservation, and whose lease is not over: such a cell holds nothing,
    /// though it keeps others waiting, see [`CellRow::lease_over`]) — the
    /// first, when several are there (contenders entering: see `holders`).
    pub holder: Option<String>,
    /// Every holding in `main` (reservations of waiters not counted), as
    /// `status` counts them.
    pub holders: Vec<String>,
    /// How the holdings share the lock (docs/design.md §3a): `exclusive`,
    /// `shared` (readers) or `permits=N` (a semaphore's), as the first
    /// holding says; `null` when nobody holds.
    pub sharing: Option<lockshift_decide::sharing::Sharing>,
    /// Whether the holdings are more than their kinds allow together (a
    /// second exclusive, a writer beside readers, permits past their
    /// number): contenders entering, or stale cells.
    pub crowded: bool,
    /// Waiters: live queue cells of owners that do not hold the lock.
    pub waiting: usize,
    /// Every cell, `main` then `shadow` then `queue`, each in column order.
    pub cells: Vec<CellRow>,
    /// What could not be read, and why — refused without being sent: its
    /// home out of reach from here, or moving (docs/design.md §4a). The
    /// lock's `cells` live at the home of its rule; the `registry` (who
    /// is live, what each owner promised) is one of the fleet's rows, at
    /// the fleet home. Without the registry, `registered` and `lease_over`
    /// are unknown (shown `false`); without the cells nothing is known of
    /// who holds or waits (`free` is `false`), and `migrate` exits 1.
    pub missing: Vec<MissingPart>,
}

/// A part of `inspect`'s answer that could not be read.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct MissingPart {
    /// `cells` or `registry`.
    pub part: &'static str,
    /// The refusal.
    pub why: String,
}

impl InspectReport {
    /// Exit 1 when the lock's cells could not be read, else 0.
    pub fn outcome(&self) -> crate::Outcome {
        if self.missing.iter().any(|m| m.part == "cells") {
            crate::Outcome::Failed
        } else {
            crate::Outcome::Ok
        }
    }
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
    /// A waiter's reservation (in `main` or `shadow`), or a shared
    /// acquisition's standing cell: not a holding.
    pub reserved: bool,
    /// How the acquisition shares the lock: `exclusive`, `shared`,
    /// `permits=N`.
    pub sharing: lockshift_decide::sharing::Sharing,
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
            reserved: c.owner.reserved,
            sharing: c.owner.sharing,
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

/// Reads every cell of `lock`. A lock with none is free: an answer
/// (`free: true`), not an error. A part refused without being sent (its
/// home out of reach, or moving) is named in [`InspectReport::missing`],
/// and the rest is shown.
///
/// # Errors
/// Store errors other than such refusals.
pub async fn inspect(env: &Env, lock: &LockId) -> anyhow::Result<InspectReport> {
    let store = env.store.as_ref();
    let mut missing = Vec::new();
    let margin = env.settings.rollout.clock_skew_margin;
    let nodes = match live_nodes(store, env.clock.now(), margin).await {
        Ok((nodes, _)) => nodes,
        Err(e) if !e.was_sent() => {
            missing.push(MissingPart {
                part: "registry",
                why: e.to_string(),
            });
            Vec::new()
        }
        Err(e) => return Err(anyhow::Error::new(e).context("reading the node registry")),
    };
    let stale_after = env.stale_after();
    let read = inspect_lock(
        store,
        env.clock.as_ref(),
        &nodes,
        lock.as_str(),
        CensusOptions {
            stale_after,
            clock_skew_margin: env.settings.rollout.clock_skew_margin,
            page_size: NonZeroU32::MIN,
            reader: read_own_clock(store, env.clock.as_ref()).await,
        },
    )
    .await;
    let cells = match read {
        Ok(cells) => cells,
        Err(e) if !e.was_sent() => {
            missing.push(MissingPart {
                part: "cells",
                why: e.to_string(),
            });
            Vec::new()
        }
        Err(e) if e.kind() == StoreErrorKind::TooManyTombstones => {
            return Err(super::refused_read(lock, &e));
        }
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("reading the cells of lock {lock}")));
        }
    };
    let cells_read = !missing.iter().any(|m| m.part == "cells");
    // Holdings as `status` counts them (the census's rule): `main` cells
    // that are not a waiter's reservation — less those whose lease is over.
    let holdings: Vec<&CensusCell> = cells
        .iter()
        .filter(|c| c.table == schema::MAIN && !c.owner.reserved && !c.lease_over)
        .collect();
    let holders: Vec<String> = holdings.iter().map(|c| c.owner.owner.clone()).collect();
    let kinds: Vec<_> = holdings.iter().map(|c| c.owner.sharing).collect();
    // Holders leave the queue once they hold (queue-lock Q2): waiters are
    // the queue cells of owners without a holding in main.
    let waiting = waiters(&cells).len();
    Ok(InspectReport {
        version: JSON_VERSION,
        lock: lock.to_string(),
        now_us: env.clock.now().as_micros(),
        stale_after_ms: ms(stale_after.waiting),
        holding_stale_after_ms: ms(stale_after.holding),
        free: cells_read && cells.is_empty(),
        holder: holders.first().cloned(),
        holders,
        sharing: kinds.first().copied(),
        crowded: lockshift_decide::sharing::crowded(&kinds),
        waiting,
        cells: cells.iter().map(CellRow::from).collect(),
        missing,
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
        let free = inspect(&env, &LockId::new("nope").unwrap()).await.unwrap();
        assert!(free.free && free.holder.is_none() && free.cells.is_empty());
        assert!(!r.free);
    }

    /// Issue 18 item 4: a lock whose row the database refuses to read is
    /// an error naming the refusal and the remedy, not a failure without
    /// advice.
    #[tokio::test]
    async fn names_the_refusal_of_an_unreadable_lock() {
        let clock = Arc::new(ManualClock::new(Timestamp::from_micros(
            1_700_000_000_000_000,
        )));
        let store: SharedStore = Arc::new(super::super::jammed::store(clock.clone()));
        let env = Env::new(Settings::default(), store.clone(), clock.clone());
        super::super::jammed::jam(store.as_ref(), clock.as_ref(), schema::QUEUE, "jammed").await;
        let err = inspect(&env, &LockId::new("jammed").unwrap())
            .await
            .unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.starts_with("the database refuses to read lock jammed: read on table queue failed: too many tombstones"),
            "{text}"
        );
        assert!(text.contains("migrate schema --apply"), "{text}");
    }

    /// Issue 19 (C) #1: a holder and the next waiter's reservation, both
    /// `main` cells of the queue lock: the holder is named — the one
    /// `status` counts — and the reservation is marked one.
    #[tokio::test]
    async fn the_holder_is_named_beside_a_reservation() {
        let clock = Arc::new(ManualClock::new(Timestamp::from_micros(
            1_700_000_000_000_000,
        )));
        let store: SharedStore = Arc::new(MemoryStore::with_clock(clock.clone()));
        let env = Env::new(Settings::default(), store.clone(), clock.clone());
        store
            .write(
                schema::MAIN,
                "acct",
                &[
                    CellWrite::new("h/0000000000000001", b"queue".to_vec()),
                    CellWrite::new("w/0000000000000002", b"queue:reserved".to_vec()),
                ],
                WriteOptions::at(clock.now()),
            )
            .await
            .unwrap();
        let r = inspect(&env, &LockId::new("acct").unwrap()).await.unwrap();
        assert_eq!(r.holder.as_deref(), Some("h/0000000000000001"));
        assert_eq!(r.holders, ["h/0000000000000001"]);
        assert_eq!(
            r.cells.iter().map(|c| c.reserved).collect::<Vec<_>>(),
            [false, true]
        );
    }
}
