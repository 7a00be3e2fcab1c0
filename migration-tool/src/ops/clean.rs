//! `migrate clean`: find stale lock cells and, with `--apply`, delete them
//! without ever removing a renewed one.
//!
//! # What is stale
//!
//! A cell not rewritten for longer than the threshold (`--stale-after`, or
//! `--stale-multiple` × `lock.renew_every`). Every live owner rewrites its
//! cells every `renew_every`, so such a cell belongs to an owner that died
//! or is cut off — and an owner cut off for `lost_after` has been told its
//! lease is lost (lock invariant I3), which is why the threshold may not be
//! lower than that. Shadow cells live only during an entry attempt and
//! queue cells only while their owner waits or holds: stale ones are
//! orphans.
//!
//! # Why deleting cannot hurt a live owner (M2)
//!
//! Two defences, in order. (1) Just before deleting, the cell is re-read and
//! skipped if its writetime changed: its owner renewed it after the scan.
//! (2) The delete is `USING TIMESTAMP` the writetime observed in that
//! re-read, so it shadows only that version: a renewal that lands between
//! the re-read and the delete carries a newer timestamp and survives
//! (store invariant I2; a tie would go to the tombstone, but a renewal is
//! always stamped later than the write it renews). The dry run is the same
//! code path stopping before (1).

use std::num::NonZeroU32;
use std::time::Duration;

use anyhow::Context;
use lockshift_combined::Settings;
use lockshift_combined::census::{CensusCell, CensusOptions, take_census};
use lockshift_combined::registry::live_nodes;
use lockshift_lock::{Algorithm, fmt_duration};
use lockshift_store::{RowQuery, Store, StoreError, Timestamp, schema};
use serde::Serialize;

use super::{Env, Progress, ms};
use crate::{JSON_VERSION, UsageError};

/// How `clean` decides what is stale and how it pages.
#[derive(Debug, Clone, Copy)]
pub struct CleanOptions {
    /// Not renewed for longer than this: stale.
    pub stale_after: Duration,
    /// Row keys per scan page.
    pub page_size: NonZeroU32,
}

impl CleanOptions {
    /// Options from the flags: an explicit threshold, or `multiple` ×
    /// `lock.renew_every`.
    ///
    /// # Errors
    /// A [`UsageError`] for a threshold that could catch live owners.
    pub fn new(
        settings: &Settings,
        stale_after: Option<Duration>,
        multiple: u32,
        page_size: u32,
    ) -> anyhow::Result<CleanOptions> {
        let lease = settings.lock.lease();
        let threshold = stale_after.unwrap_or(lease.renew_every.saturating_mul(multiple));
        let what = match stale_after {
            Some(_) => format!("--stale-after ({})", fmt_duration(threshold)),
            None => format!(
                "--stale-multiple {multiple} × lock.renew_every ({})",
                fmt_duration(threshold)
            ),
        };
        if threshold < lease.renew_every * 2 {
            return Err(UsageError(format!(
                "{what} must be at least twice lock.renew_every ({}): live owners renew that often",
                fmt_duration(lease.renew_every)
            ))
            .into());
        }
        if threshold < lease.lost_after() {
            return Err(UsageError(format!(
                "{what} must be at least lock.lost_after_fraction × lock.lease_ttl ({}): a holder \
                 whose renewals stalled for less still believes it holds the lock",
                fmt_duration(lease.lost_after())
            ))
            .into());
        }
        Ok(CleanOptions {
            stale_after: threshold,
            page_size: NonZeroU32::new(page_size).unwrap_or(NonZeroU32::MIN),
        })
    }
}

/// The report of `migrate clean` (its JSON schema, `"version": 1`).
#[derive(Debug, Clone, Serialize)]
pub struct CleanReport {
    /// Schema version, 1.
    pub version: u32,
    /// `false`: a dry run, nothing was deleted.
    pub applied: bool,
    /// The stale threshold used.
    pub stale_after_ms: u64,
    /// Rows (locks) scanned per table, and cells seen.
    pub scanned: Scanned,
    /// Every stale cell and what happened to it.
    pub cells: Vec<CleanCell>,
    /// Counts.
    pub summary: CleanSummary,
}

/// What the scan covered.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Scanned {
    /// Rows of `main`.
    pub main_rows: usize,
    /// Rows of `shadow`.
    pub shadow_rows: usize,
    /// Rows of `queue`.
    pub queue_rows: usize,
    /// Cells in all three.
    pub cells: usize,
}

/// One stale cell.
#[derive(Debug, Clone, Serialize)]
pub struct CleanCell {
    /// `main`, `shadow` or `queue`.
    pub table: String,
    /// The lock.
    pub lock: String,
    /// The column.
    pub column: String,
    /// The owner id.
    pub owner: String,
    /// The algorithm its value names (`null`: not written by lockshift).
    pub algorithm: Option<Algorithm>,
    /// `stale_holder` (main), `orphaned_shadow`, `orphaned_queue`.
    pub reason: Reason,
    /// The writetime observed (and used as the delete's timestamp).
    pub writetime_us: i64,
    /// Not renewed for this long when scanned.
    pub age_ms: u64,
    /// What happened.
    pub action: Action,
    /// For `failed`: the store error.
    pub error: Option<String>,
}

/// Why a cell is a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// A `main` cell not renewed: its holder died or was cut off.
    StaleHolder,
    /// A `shadow` cell not renewed: left by an entry attempt.
    OrphanedShadow,
    /// A `queue` cell not renewed: its waiter (or holder) is gone.
    OrphanedQueue,
}

/// What happened to a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Dry run: it would be deleted.
    WouldDelete,
    /// Deleted at its observed writetime.
    Deleted,
    /// Its owner renewed it after the scan: left alone.
    SkippedRenewed,
    /// It was gone already (expired, released) when re-read.
    SkippedGone,
    /// The re-read or delete failed; see `error`.
    Failed,
}

/// Counts of the report.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CleanSummary {
    /// Stale cells found.
    pub found: usize,
    /// Deleted.
    pub deleted: usize,
    /// Left alone because renewed meanwhile.
    pub skipped_renewed: usize,
    /// Already gone.
    pub skipped_gone: usize,
    /// Failed.
    pub failed: usize,
}

/// Scans every lock and, when `apply`, deletes the stale cells.
///
/// # Errors
/// A store error during the scan (failures of single deletes are reported
/// per cell instead).
pub async fn clean(
    env: &Env,
    options: &CleanOptions,
    apply: bool,
    mut progress: impl FnMut(Progress),
) -> anyhow::Result<CleanReport> {
    let (mut report, candidates) = scan(env, options, &mut progress).await?;
    if apply {
        report.applied = true;
        let total = candidates.len();
        for (i, cell) in report.cells.iter_mut().enumerate() {
            let (action, error) = delete_if_unchanged(env.store.as_ref(), &candidates[i]).await;
            cell.action = action;
            cell.error = error;
            progress(Progress {
                phase: "deleting",
                table: None,
                done: i + 1,
                total: Some(total),
            });
        }
    }
    report.summary = summarise(&report.cells);
    Ok(report)
}

/// The scan: every stale cell, as a dry run would report it.
async fn scan(
    env: &Env,
    options: &CleanOptions,
    progress: &mut impl FnMut(Progress),
) -> anyhow::Result<(CleanReport, Vec<CensusCell>)> {
    let store = env.store.as_ref();
    let (nodes, _) = live_nodes(store)
        .await
        .context("reading the node registry")?;
    let mut scanned = Scanned::default();
    let census = take_census(
        store,
        env.clock.as_ref(),
        &nodes,
        CensusOptions {
            stale_after: options.stale_after,
            page_size: options.page_size,
        },
        |table, rows| {
            match table.name() {
                "main" => scanned.main_rows = rows,
                "shadow" => scanned.shadow_rows = rows,
                _ => scanned.queue_rows = rows,
            }
            progress(Progress {
                phase: "scanning",
                table: Some(table),
                done: rows,
                total: None,
            });
        },
    )
    .await
    .context("scanning the lock tables")?;
    scanned.cells = census.cells.len();
    let candidates: Vec<CensusCell> = census.cells.into_iter().filter(|c| c.stale).collect();
    let cells = candidates
        .iter()
        .map(|c| CleanCell {
            table: c.table.to_string(),
            lock: c.lock.clone(),
            column: c.column.clone(),
            owner: c.owner.owner.clone(),
            algorithm: c.owner.algorithm,
            reason: if c.table == schema::MAIN {
                Reason::StaleHolder
            } else if c.table == schema::SHADOW {
                Reason::OrphanedShadow
            } else {
                Reason::OrphanedQueue
            },
            writetime_us: c.writetime.as_micros(),
            age_ms: ms(c.age),
            action: Action::WouldDelete,
            error: None,
        })
        .collect();
    Ok((
        CleanReport {
            version: JSON_VERSION,
            applied: false,
            stale_after_ms: ms(options.stale_after),
            scanned,
            cells,
            summary: CleanSummary::default(),
        },
        candidates,
    ))
}

/// Re-reads the cell and deletes it at the observed writetime if that is
/// still the scanned one (M2).
async fn delete_if_unchanged(store: &dyn Store, cell: &CensusCell) -> (Action, Option<String>) {
    let failed = |e: StoreError| (Action::Failed, Some(e.to_string()));
    let reread = store
        .read(
            cell.table,
            &cell.lock,
            &RowQuery::first(1).starting_at(cell.column.clone()),
        )
        .await;
    let observed: Timestamp = match reread {
        Err(e) => return failed(e),
        Ok(cells) => match cells.into_iter().find(|c| c.column == cell.column) {
            None => return (Action::SkippedGone, None),
            Some(c) if c.writetime != cell.writetime => return (Action::SkippedRenewed, None),
            Some(c) => c.writetime,
        },
    };
    // Defence (2): a tombstone at exactly the observed writetime shadows that
    // version and nothing newer.
    match store
        .delete(
            cell.table,
            &cell.lock,
            std::slice::from_ref(&cell.column),
            observed,
        )
        .await
    {
        Ok(()) => (Action::Deleted, None),
        Err(e) => failed(e),
    }
}

fn summarise(cells: &[CleanCell]) -> CleanSummary {
    let mut s = CleanSummary {
        found: cells.len(),
        ..CleanSummary::default()
    };
    for c in cells {
        match c.action {
            Action::WouldDelete => {}
            Action::Deleted => s.deleted += 1,
            Action::SkippedRenewed => s.skipped_renewed += 1,
            Action::SkippedGone => s.skipped_gone += 1,
            Action::Failed => s.failed += 1,
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use async_trait::async_trait;
    use lockshift_store::{
        Cell, CellWrite, KeyPage, ManualClock, MemoryStore, PageCursor, SharedStore, Table,
        WriteOptions,
    };

    use super::*;

    const NOW: i64 = 1_700_000_000_000_000;

    /// A store that renews `main`/`acct-race` just before forwarding the
    /// first delete: the renewal lands between clean's re-read and its delete.
    #[derive(Debug)]
    struct RacingStore {
        inner: MemoryStore,
        raced: AtomicBool,
    }

    #[async_trait]
    impl Store for RacingStore {
        async fn write(
            &self,
            t: Table,
            r: &str,
            c: &[CellWrite],
            o: WriteOptions,
        ) -> Result<(), StoreError> {
            self.inner.write(t, r, c, o).await
        }
        async fn delete(
            &self,
            t: Table,
            r: &str,
            c: &[String],
            ts: Timestamp,
        ) -> Result<(), StoreError> {
            if r == "acct-race" && !self.raced.swap(true, Ordering::SeqCst) {
                let renewal = WriteOptions::at(Timestamp::from_micros(NOW));
                self.inner
                    .write(
                        t,
                        r,
                        &[CellWrite::new(c[0].clone(), b"queue".to_vec())],
                        renewal,
                    )
                    .await?;
            }
            self.inner.delete(t, r, c, ts).await
        }
        async fn read(&self, t: Table, r: &str, q: &RowQuery) -> Result<Vec<Cell>, StoreError> {
            self.inner.read(t, r, q).await
        }
        async fn scan_keys(
            &self,
            t: Table,
            c: Option<&PageCursor>,
            n: NonZeroU32,
        ) -> Result<KeyPage, StoreError> {
            self.inner.scan_keys(t, c, n).await
        }
        fn describe(&self) -> String {
            "racing".into()
        }
    }

    async fn put(store: &dyn Store, table: Table, lock: &str, column: &str, at: i64) {
        store
            .write(
                table,
                lock,
                &[CellWrite::new(column, b"queue".to_vec())],
                WriteOptions::at(Timestamp::from_micros(at)),
            )
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn dry_run_then_apply_spares_renewed_cells() {
        let clock = Arc::new(ManualClock::new(Timestamp::from_micros(NOW)));
        let racing = Arc::new(RacingStore {
            inner: MemoryStore::with_clock(clock.clone()),
            raced: AtomicBool::new(false),
        });
        let store: SharedStore = racing.clone();
        let env = Env::new(Settings::default(), store.clone(), clock.clone());
        let old = NOW - 600_000_000;
        put(
            store.as_ref(),
            schema::MAIN,
            "acct-stale",
            "n1/0000000000000001",
            old,
        )
        .await;
        put(
            store.as_ref(),
            schema::SHADOW,
            "acct-stale",
            "n1/0000000000000001",
            old,
        )
        .await;
        put(
            store.as_ref(),
            schema::MAIN,
            "acct-race",
            "n2/0000000000000002",
            old,
        )
        .await;
        put(
            store.as_ref(),
            schema::MAIN,
            "acct-renewed",
            "n3/0000000000000003",
            old,
        )
        .await;
        put(
            store.as_ref(),
            schema::MAIN,
            "acct-live",
            "n4/0000000000000004",
            NOW - 1_000_000,
        )
        .await;

        let options = CleanOptions::new(&env.settings, None, 3, 1).unwrap();
        assert_eq!(options.stale_after, Duration::from_secs(30));
        let dry = clean(&env, &options, false, |_| {}).await.unwrap();
        assert!(!dry.applied);
        assert_eq!(dry.summary.found, 4);
        assert!(dry.cells.iter().all(|c| c.action == Action::WouldDelete));
        assert_eq!(
            store
                .read(schema::MAIN, "acct-stale", &RowQuery::all())
                .await
                .unwrap()
                .len(),
            1,
            "a dry run deletes nothing"
        );

        // Renewed after the scan but before the delete: skipped by the re-read.
        let mut progress = 0;
        let (mut report, candidates) = scan(&env, &options, &mut |_| {}).await.unwrap();
        put(
            store.as_ref(),
            schema::MAIN,
            "acct-renewed",
            "n3/0000000000000003",
            NOW,
        )
        .await;
        for (i, cell) in report.cells.iter_mut().enumerate() {
            (cell.action, cell.error) = delete_if_unchanged(store.as_ref(), &candidates[i]).await;
            progress += 1;
        }
        assert_eq!(progress, 4);
        let s = summarise(&report.cells);
        assert_eq!(
            (s.deleted, s.skipped_renewed, s.failed),
            (3, 1, 0),
            "{report:#?}"
        );
        // acct-race was renewed between the re-read and the delete: the
        // delete at the old writetime left the renewal alone.
        assert!(racing.raced.load(Ordering::SeqCst));
        let race = store
            .read(schema::MAIN, "acct-race", &RowQuery::all())
            .await
            .unwrap();
        assert_eq!(race.len(), 1, "the racing renewal survives");
        assert_eq!(race[0].writetime, Timestamp::from_micros(NOW));
        for lock in ["acct-renewed", "acct-live"] {
            assert_eq!(
                store
                    .read(schema::MAIN, lock, &RowQuery::all())
                    .await
                    .unwrap()
                    .len(),
                1
            );
        }
        assert!(
            store
                .read(schema::MAIN, "acct-stale", &RowQuery::all())
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            store
                .read(schema::SHADOW, "acct-stale", &RowQuery::all())
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn thresholds_that_catch_live_owners_are_refused() {
        let s = Settings::default();
        let e = CleanOptions::new(&s, Some(Duration::from_secs(15)), 3, 10).unwrap_err();
        assert!(
            e.to_string().contains("at least twice lock.renew_every"),
            "{e}"
        );
        let e = CleanOptions::new(&s, Some(Duration::from_secs(25)), 3, 10).unwrap_err();
        assert!(e.to_string().contains("still believes it holds"), "{e}");
        assert!(crate::is_usage_error(&e));
    }
}
