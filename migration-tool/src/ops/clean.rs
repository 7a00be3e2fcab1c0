//! `migrate clean`: find stale lock cells and, with `--apply`, delete them
//! without ever breaking a holder that may still believe it holds a lock.
//!
//! # Whose rules decide (issue 11)
//!
//! Every cell is judged by what **its own owner** promised, never by the
//! operator's local settings (an operator without the fleet's config once
//! deleted the cell of a holder renewing every 60 s because the default
//! `renew_every` is 10 s):
//!
//! - **The promise.** A live node announces its lease in its heartbeat
//!   ([`LeasePromise`]: TTL, renewal period). Otherwise the cell itself
//!   tells: its TTL (`age + ttl left`), and a lockshift owner renews at least
//!   every TTL/2 (`lock.renew_every < lock.lease_ttl / 2`). A cell without a
//!   TTL promises nothing; only `--stale-after` can judge it.
//! - **Overdue**: not renewed for `--stale-multiple` × the promised renewal
//!   period, or — for owners that announced nothing — for `--stale-after`
//!   if the operator gives it. (A promise read off a cell's TTL makes a cell
//!   overdue only after `multiple × TTL/2 ≥ TTL`, i.e. never before it
//!   expires by itself.)
//! - **May still hold**: the owner's node is live in the registry; or the
//!   cell is younger than its guaranteed life (`ttl − 1 s − skew allowance`,
//!   TTLs count in whole seconds): an owner that is only cut off has not
//!   necessarily been told its lease is lost before then (lock invariant
//!   K3). Such a cell is *kept*, and listed, unless `--force` — which can let
//!   another process take the lock while that owner still runs its critical
//!   section.
//!
//! In practice a cell with a TTL whose owner is gone expires on its own
//! before it could be proven safe to delete; `clean` is for cells without a
//! TTL (binaries that predate leases) and, with `--force`, for an operator
//! who knows an owner is dead. Deleting anyway was rejected: a holder that
//! is paused or cut off looks exactly like a dead one from here.
//!
//! # Why deleting cannot hurt a renewing owner (M2)
//!
//! Two defences, in order. (1) Just before deleting, the cell is re-read and
//! skipped if its writetime changed: its owner renewed it after the scan.
//! (2) The delete is `USING TIMESTAMP` the writetime observed in that
//! re-read, so it shadows only that version: a renewal that lands between
//! the re-read and the delete carries a newer timestamp and survives
//! (store invariant S2; a tie would go to the tombstone, but a renewal is
//! always stamped later than the write it renews). The dry run is the same
//! code path stopping before (1).

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::time::Duration;

use anyhow::Context;
use lockshift_combined::census::{CensusCell, CensusOptions, Staleness, take_census};
use lockshift_combined::registry::{LeasePromise, live_nodes};
use lockshift_lock::{Algorithm, TTL_SKEW_ALLOWANCE};
use lockshift_store::{RowQuery, Store, StoreError, Timestamp, schema};
use serde::Serialize;

use super::{Env, Progress, ms};
use crate::{JSON_VERSION, UsageError};

/// How `clean` judges cells and how it pages.
#[derive(Debug, Clone, Copy)]
pub struct CleanOptions {
    /// Overdue after this many promised renewal periods.
    pub stale_multiple: u32,
    /// Cells without a TTL (no promise): stale after this long; `None`:
    /// never judged, only reported.
    pub stale_after: Option<Duration>,
    /// Delete overdue cells even when their owner may still hold the lock.
    pub force: bool,
    /// Row keys per scan page.
    pub page_size: NonZeroU32,
}

impl CleanOptions {
    /// Options from the flags.
    ///
    /// # Errors
    /// A [`UsageError`] for a multiple below 2 (a renewing owner can be
    /// one period late) or a zero `--stale-after`.
    pub fn new(
        stale_after: Option<Duration>,
        stale_multiple: u32,
        force: bool,
        page_size: u32,
    ) -> anyhow::Result<CleanOptions> {
        if stale_multiple < 2 {
            return Err(UsageError(format!(
                "--stale-multiple ({stale_multiple}) must be at least 2: a renewing owner may be \
                 one renewal period late"
            ))
            .into());
        }
        if stale_after.is_some_and(|d| d < Duration::from_secs(1)) {
            return Err(UsageError(
                "--stale-after must be at least 1s (it judges cells without a TTL)".to_string(),
            )
            .into());
        }
        Ok(CleanOptions {
            stale_multiple,
            stale_after,
            force,
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
    /// `--force`: overdue cells of owners that may still hold were deleted too.
    pub forced: bool,
    /// `--stale-after`: the threshold for cells without a TTL (`null`: such
    /// cells are only reported).
    pub stale_after_ms: Option<u64>,
    /// `--stale-multiple`: overdue after this many promised renewal periods.
    pub stale_multiple: u32,
    /// Rows (locks) scanned per table, and cells seen.
    pub scanned: Scanned,
    /// Every overdue cell and what happened to it (kept ones included).
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

/// One overdue cell.
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
    /// The owner's node, if the owner id has lockshift's shape.
    pub node: Option<String>,
    /// Whether that node is live in the registry.
    pub owner_live: bool,
    /// The algorithm its value names (`null`: not written by lockshift).
    pub algorithm: Option<Algorithm>,
    /// `stale_holder` (main), `orphaned_shadow`, `orphaned_queue`.
    pub reason: Reason,
    /// What the cell was judged by (`null`: no TTL, judged by `--stale-after`).
    pub promise: Option<Promise>,
    /// The writetime observed (and used as the delete's timestamp).
    pub writetime_us: i64,
    /// Not renewed for this long when scanned.
    pub age_ms: u64,
    /// TTL left when scanned (`null`: none).
    pub ttl_left_ms: Option<u64>,
    /// What happened.
    pub action: Action,
    /// For `failed`: the store error.
    pub error: Option<String>,
}

/// What a cell's owner promised, and where that came from.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Promise {
    /// `registry` (the live node's heartbeat) or `cell` (its own TTL).
    pub source: PromiseSource,
    /// The TTL its cells are written with.
    pub ttl_ms: u64,
    /// The longest it may go between renewals.
    pub renew_every_ms: u64,
}

/// Where a [`Promise`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PromiseSource {
    /// The owner's node announced it in its heartbeat.
    Registry,
    /// Read off the cell: its TTL, and the lockshift rule renew < TTL/2.
    Cell,
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
    /// Kept: the owner's node is live (`--force` deletes it anyway).
    KeptOwnerLive,
    /// Kept: younger than its guaranteed life, so a cut-off owner may not
    /// have been told yet (`--force` deletes it anyway).
    KeptOwnerMayHold,
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
    /// Overdue cells found (kept ones included).
    pub found: usize,
    /// Kept because the owner may still hold (live node, or not yet told).
    pub kept: usize,
    /// Deleted.
    pub deleted: usize,
    /// Left alone because renewed meanwhile.
    pub skipped_renewed: usize,
    /// Already gone.
    pub skipped_gone: usize,
    /// Failed.
    pub failed: usize,
    /// Cells without a TTL left unjudged (no `--stale-after`).
    pub unjudged_without_ttl: usize,
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
    let (mut report, candidates, unjudged) = scan(env, options, &mut progress).await?;
    if apply {
        report.applied = true;
        let total = candidates.len();
        for (i, cell) in report.cells.iter_mut().enumerate() {
            if cell.action == Action::WouldDelete {
                let (action, error) = delete_if_unchanged(env.store.as_ref(), &candidates[i]).await;
                cell.action = action;
                cell.error = error;
            }
            progress(Progress {
                phase: "deleting",
                table: None,
                done: i + 1,
                total: Some(total),
            });
        }
    }
    report.summary = summarise(&report.cells);
    report.summary.unjudged_without_ttl = unjudged;
    Ok(report)
}

/// The verdict on one cell (see the module docs).
fn judge(
    cell: &CensusCell,
    promises: &BTreeMap<String, Option<LeasePromise>>,
    options: &CleanOptions,
) -> Judged {
    let owner_live = cell.owner.registered;
    let announced = cell
        .owner
        .node
        .as_ref()
        .and_then(|n| promises.get(n).copied().flatten());
    let promise = match (announced, cell.ttl_left) {
        (Some(p), _) => Some(Promise {
            source: PromiseSource::Registry,
            ttl_ms: p.ttl_ms,
            renew_every_ms: p.renew_every_ms,
        }),
        (None, Some(left)) => {
            // The TTL it was written with, read back in whole seconds: the
            // age plus what is left (within a second either way).
            let ttl = cell.age.saturating_add(left);
            Some(Promise {
                source: PromiseSource::Cell,
                ttl_ms: ms(ttl),
                renew_every_ms: ms(ttl / 2),
            })
        }
        (None, None) => None,
    };
    // The operator's --stale-after speaks only for owners that announced
    // nothing: a live node's own promise is never overridden.
    let by_promise = promise
        .map(|p| Duration::from_millis(p.renew_every_ms).saturating_mul(options.stale_multiple));
    let by_operator = match promise {
        Some(Promise {
            source: PromiseSource::Registry,
            ..
        }) => None,
        _ => options.stale_after,
    };
    let overdue_after = match (by_promise, by_operator) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => return Judged::Unjudged,
    };
    if cell.age <= overdue_after {
        return Judged::Fine;
    }
    // Until its guaranteed life has passed, an owner that is merely cut off
    // may not have been told that its lease is lost (K3): that life is the
    // written TTL − 1 s − skew allowance, counted from the longest TTL the
    // cell may have been written with (read back from the cell, the TTL is
    // only known to within a second).
    let not_yet_told = match (promise, cell.ttl_left) {
        (Some(p), Some(_)) => {
            let written = match p.source {
                PromiseSource::Registry => {
                    Duration::from_secs(Duration::from_millis(p.ttl_ms).as_secs_f64().ceil() as u64)
                }
                PromiseSource::Cell => {
                    Duration::from_millis(p.ttl_ms).saturating_add(Duration::from_secs(1))
                }
            };
            let life = written
                .saturating_sub(Duration::from_secs(1))
                .saturating_sub(TTL_SKEW_ALLOWANCE);
            cell.age < life
        }
        _ => false,
    };
    let action = if options.force {
        Action::WouldDelete
    } else if owner_live {
        Action::KeptOwnerLive
    } else if not_yet_told {
        Action::KeptOwnerMayHold
    } else {
        Action::WouldDelete
    };
    Judged::Overdue { promise, action }
}

enum Judged {
    Fine,
    Unjudged,
    Overdue {
        promise: Option<Promise>,
        action: Action,
    },
}

/// The scan: every overdue cell, as a dry run would report it, the cells
/// to act on (same order) and the count of cells without a TTL left
/// unjudged.
async fn scan(
    env: &Env,
    options: &CleanOptions,
    progress: &mut impl FnMut(Progress),
) -> anyhow::Result<(CleanReport, Vec<CensusCell>, usize)> {
    let store = env.store.as_ref();
    let (nodes, _) = live_nodes(store)
        .await
        .context("reading the node registry")?;
    let promises: BTreeMap<String, Option<LeasePromise>> = nodes
        .iter()
        .map(|n| (n.info.node.clone(), n.info.lease))
        .collect();
    let mut scanned = Scanned::default();
    let census = take_census(
        store,
        env.clock.as_ref(),
        &nodes,
        CensusOptions {
            // The census's own notion of stale (one threshold for all) is
            // not used: every cell is judged by its owner's promise below.
            stale_after: Staleness::uniform(Duration::MAX),
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
    let mut unjudged = 0;
    let mut candidates = Vec::new();
    let mut cells = Vec::new();
    for c in census.cells {
        let (promise, action) = match judge(&c, &promises, options) {
            Judged::Fine => continue,
            Judged::Unjudged => {
                unjudged += 1;
                continue;
            }
            Judged::Overdue { promise, action } => (promise, action),
        };
        cells.push(CleanCell {
            table: c.table.to_string(),
            lock: c.lock.clone(),
            column: c.column.clone(),
            owner: c.owner.owner.clone(),
            node: c.owner.node.clone(),
            owner_live: c.owner.registered,
            algorithm: c.owner.algorithm,
            reason: if c.table == schema::MAIN {
                Reason::StaleHolder
            } else if c.table == schema::SHADOW {
                Reason::OrphanedShadow
            } else {
                Reason::OrphanedQueue
            },
            promise,
            writetime_us: c.writetime.as_micros(),
            age_ms: ms(c.age),
            ttl_left_ms: c.ttl_left.map(ms),
            action,
            error: None,
        });
        candidates.push(c);
    }
    Ok((
        CleanReport {
            version: JSON_VERSION,
            applied: false,
            forced: options.force,
            stale_after_ms: options.stale_after.map(ms),
            stale_multiple: options.stale_multiple,
            scanned,
            cells,
            summary: CleanSummary::default(),
        },
        candidates,
        unjudged,
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
            Action::KeptOwnerLive | Action::KeptOwnerMayHold => s.kept += 1,
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

    use lockshift::Settings;

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

        // These cells have no TTL: only --stale-after judges them.
        let options = CleanOptions::new(Some(Duration::from_secs(30)), 3, false, 1).unwrap();
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
        let (mut report, candidates, _) = scan(&env, &options, &mut |_| {}).await.unwrap();
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
    fn nonsense_thresholds_are_refused() {
        let e = CleanOptions::new(Some(Duration::from_millis(10)), 3, false, 10).unwrap_err();
        assert!(e.to_string().contains("at least 1s"), "{e}");
        assert!(crate::is_usage_error(&e));
        let e = CleanOptions::new(None, 1, false, 10).unwrap_err();
        assert!(e.to_string().contains("at least 2"), "{e}");
    }

    /// Issue 11 item 2: a cell is judged by its own owner's promise and the
    /// registry, never by the operator's settings (here the defaults:
    /// renew every 10 s). The owner renews every 60 s with a 5 min TTL.
    #[tokio::test]
    async fn live_owners_are_judged_by_their_promise_and_kept() {
        use lockshift_combined::registry::{LeasePromise, NodeInfo, heartbeat};
        use lockshift_combined::{Mode, Stage};
        let clock = Arc::new(ManualClock::new(Timestamp::from_micros(NOW)));
        let store: SharedStore = Arc::new(MemoryStore::with_clock(clock.clone()));
        let env = Env::new(Settings::default(), store.clone(), clock.clone());
        let info = NodeInfo {
            node: "slow".into(),
            version: "0.1.0".into(),
            configured_mode: Mode::Combined,
            effective: Algorithm::Combined,
            degraded: false,
            seen_stage: Some(Stage::Legacy),
            seen_version: Some(0),
            started_at: 0,
            incarnation: None,
            last_used: std::collections::BTreeMap::new(),
            lease: Some(LeasePromise {
                ttl_ms: 300_000,
                renew_every_ms: 60_000,
            }),
            acting_version: Some(0),
            bound: std::collections::BTreeMap::new(),
            view_expired: false,
        };
        let ttl = lockshift_store::Ttl::from_secs(300).unwrap();
        heartbeat(store.as_ref(), clock.as_ref(), &info, ttl)
            .await
            .unwrap();
        let cell = |lock: &'static str, owner: &'static str, age_s: i64| {
            let store = store.clone();
            async move {
                store
                    .write(
                        schema::MAIN,
                        lock,
                        &[CellWrite::new(owner, b"combined".to_vec())],
                        WriteOptions::at(Timestamp::from_micros(NOW - age_s * 1_000_000))
                            .with_ttl(ttl),
                    )
                    .await
                    .unwrap();
            }
        };
        // 36 s without renewal: within a 60 s promise (the case).
        cell("acct-36s", "slow/0000000000000001", 36).await;
        // 200 s: overdue by its promise (3 × 60 s), but the node is live.
        cell("acct-200s", "slow/0000000000000002", 200).await;
        // 200 s, node gone: its 5 min cell may still be believed held.
        cell("acct-gone", "gone/0000000000000003", 200).await;
        // --stale-after speaks for the owner that announced nothing, and
        // never overrides the live node's promise.
        let options = CleanOptions::new(Some(Duration::from_secs(30)), 3, false, 10).unwrap();
        let r = clean(&env, &options, true, |_| {}).await.unwrap();
        let actions: Vec<(&str, Action)> = r
            .cells
            .iter()
            .map(|c| (c.lock.as_str(), c.action))
            .collect();
        assert_eq!(
            actions,
            [
                ("acct-200s", Action::KeptOwnerLive),
                ("acct-gone", Action::KeptOwnerMayHold)
            ],
            "{r:#?}"
        );
        assert_eq!(r.summary.deleted, 0);
        for lock in ["acct-36s", "acct-200s", "acct-gone"] {
            let cells = store
                .read(schema::MAIN, lock, &RowQuery::all())
                .await
                .unwrap();
            assert_eq!(cells.len(), 1, "{lock} must survive");
        }
        // --force: what the promise calls overdue goes, the rest stays.
        let options = CleanOptions::new(Some(Duration::from_secs(30)), 3, true, 10).unwrap();
        let r = clean(&env, &options, true, |_| {}).await.unwrap();
        assert_eq!(r.summary.deleted, 2, "{r:#?}");
        let left = store
            .read(schema::MAIN, "acct-36s", &RowQuery::all())
            .await
            .unwrap();
        assert_eq!(left.len(), 1, "within its promise even under --force");
    }
}
