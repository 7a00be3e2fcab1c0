//! `migrate clean`: find stale lock cells and, with `--apply`, delete them
//! without ever breaking an owner that is renewing its lease.
//!
//! # Whose rules decide (issues 11 and 23)
//!
//! Every cell is judged by what **its own owner** promised, never by the
//! operator's local settings (an operator without the fleet's config once
//! deleted the cell of a holder renewing every 60 s because the default
//! `renew_every` is 10 s):
//!
//! - **The promise.** The owner's *process* announces its lease in its
//!   heartbeat ([`LeasePromise`]: TTL, renewal period). A cell is matched
//!   to the row of the very process that wrote it — the owner id's node id
//!   *and* incarnation (docs/design.md §2a, §4 R5): a row of another
//!   process of the same node id (a replacement) says nothing about it.
//!   Otherwise the cell itself tells: its TTL, read back as `age + ttl
//!   left`, is at most a second (TTLs count in whole seconds) and the skew
//!   margin (an owner's clock ahead of this one makes its cells look
//!   younger) short of the TTL it was written with, so the longest it may
//!   have been is taken; and a lockshift owner renews more often than every
//!   TTL/2 (`lock.renew_every < lock.lease_ttl / 2`). A cell without a TTL
//!   promises nothing: `--stale-after` judges it, and nothing else.
//! - **Ages allow for skew.** A cell's age is this machine's clock minus
//!   the owner's write stamp; an owner whose clock is behind by up to
//!   `rollout.clock_skew_margin` makes its cells look that much older, so
//!   every age is judged less the margin.
//! - **Overdue**: not renewed for `--stale-multiple` × the promised renewal
//!   period, or — for a cell without a TTL — for `--stale-after`. (A
//!   promise read off a cell's TTL makes it overdue only after `multiple ×
//!   TTL/2 ≥ TTL`, i.e. never before it expires by itself.)
//! - **Lease over**: older than its guaranteed life by its own process's
//!   promise ([`CensusCell::lease_over`]): its owner has been told that it
//!   lost the lock (lock invariant K3). Nobody holds or waits through such a
//!   cell — a late write brought it back (L5), or its owner could not delete
//!   it — and it is deleted, live process or not.
//! - **May still hold**: any other overdue cell with a TTL. Its owner's
//!   process is live, or the owner may not have been told yet that its
//!   lease is lost — a holder that is paused or cut off looks exactly like
//!   a dead one from here. Such a cell is *kept*, and listed, unless
//!   `--force`.
//!
//! In practice a cell with a TTL whose owner is gone expires on its own
//! before it could be proven safe to delete; `clean` is for cells without a
//! TTL (binaries that predate leases), for cells whose lease is over, and,
//! with `--force`, for an operator who knows an owner is dead.
//!
//! # The second look (issue 23)
//!
//! A cell with a promise is deleted only after a second look: it is read
//! again one and a half promised renewal periods after the scan, and
//! deleted only if its writetime has not moved. The wait is timed by this
//! machine's monotonic clock, so no clock — skewed past the margin, or
//! stepped — can make a renewing owner look idle: an owner whose renewals
//! land within one and a half periods of each other (its period, plus up to
//! half a period for the renewal's own round trips) shows as renewed. A
//! cell without a TTL has no period; it is re-read just before its delete.
//! The judgement of both looks is pure (`judge`, `second_look`); the
//! I/O around them only reads, waits and deletes.
//!
//! # What `--force` still risks
//!
//! Only an owner that is alive but *not* renewing within its promise:
//! paused (a GC pause, SIGSTOP, a frozen VM), cut off from the store, or
//! with its renewals slow or stuck in flight. Its lease tells it at the
//! latest `lost_after_fraction × TTL` after its last renewal that landed
//! (K3), and until then it may still act on the lock beside the process
//! that takes it next — unless the resource is fenced. Worse, a renewal of
//! such an owner still in flight when its cell is deleted lands afterwards
//! and survives the delete (defence 2 below lets a later stamp win): the
//! owner's lease then finds its cell and keeps renewing, never told,
//! beside whoever entered while the cell was gone (lock invariant L5 is
//! about the same late landing, for an owner that was told). Without
//! `--force` neither can happen to a lockshift owner whose clock is within
//! the skew margin: of the cells with a TTL only those whose lease is over
//! by their owner's own promise go, and a lost lease never renews again.
//!
//! # Why deleting cannot hurt a renewing owner (M2)
//!
//! Two defences, in order. (1) The second look: the cell is re-read and
//! skipped if its writetime changed since the scan. (2) The delete is
//! `USING TIMESTAMP` the writetime observed in that re-read, so it shadows
//! only that version: a renewal that lands between the re-read and the
//! delete carries a newer timestamp and survives (store invariant S2; a
//! tie would go to the tombstone, but a renewal is always stamped later
//! than the write it renews). The dry run is the same code path stopping
//! before (1).

use std::num::NonZeroU32;
use std::time::Duration;

use anyhow::Context;
use lockshift_combined::census::{CensusCell, CensusOptions, Staleness, take_census};
use lockshift_combined::registry::{LeasePromise, live_nodes};
use lockshift_lock::Algorithm;
use lockshift_store::{RowQuery, Store, StoreError, Timestamp, schema};
use serde::Serialize;
use tokio::time::{Instant, sleep_until};

use super::{Env, Progress, ms};
use crate::{JSON_VERSION, UsageError};

/// How `clean` judges cells and how it pages.
#[derive(Debug, Clone, Copy)]
pub struct CleanOptions {
    /// Overdue after this many promised renewal periods.
    pub stale_multiple: u32,
    /// Cells without a TTL (no promise): stale after this long; `None`:
    /// never judged, only reported. Never applies to a cell with a TTL.
    pub stale_after: Option<Duration>,
    /// Delete overdue cells even when their owner may still hold the lock
    /// (after the second look).
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
    /// `--force`: overdue cells of owners that may still hold were deleted
    /// too (after the second look).
    pub forced: bool,
    /// `--stale-after`: the threshold for cells without a TTL (`null`: such
    /// cells are only reported).
    pub stale_after_ms: Option<u64>,
    /// `--stale-multiple`: overdue after this many promised renewal periods.
    pub stale_multiple: u32,
    /// `rollout.clock_skew_margin`: every age was judged less this much
    /// (an owner's clock may be that far behind this machine's).
    pub clock_skew_margin_ms: u64,
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
    /// Whether the owner's own process (node id and incarnation) is live in
    /// the registry.
    pub owner_live: bool,
    /// The algorithm its value names (`null`: not written by lockshift).
    pub algorithm: Option<Algorithm>,
    /// `stale_holder` (main), `orphaned_shadow`, `orphaned_queue`.
    pub reason: Reason,
    /// What the cell was judged by (`null`: no TTL, judged by `--stale-after`).
    pub promise: Option<Promise>,
    /// Its lease is over by its own process's promise (older than its
    /// guaranteed life): deleted even without `--force`.
    pub lease_over: bool,
    /// The writetime observed (and used as the delete's timestamp).
    pub writetime_us: i64,
    /// Not renewed for this long when scanned (by this machine's clock).
    pub age_ms: u64,
    /// TTL left when scanned (`null`: none).
    pub ttl_left_ms: Option<u64>,
    /// How long after the scan the second look reads it again before a
    /// delete (one and a half promised renewal periods; 0: at once, no
    /// promise).
    pub second_look_after_ms: u64,
    /// What happened.
    pub action: Action,
    /// For `failed`: the store error.
    pub error: Option<String>,
}

/// What a cell's owner promised, and where that came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Promise {
    /// `registry` (its process's heartbeat) or `cell` (its own TTL).
    pub source: PromiseSource,
    /// The TTL its cells are written with (read off a cell: the longest it
    /// may have been).
    pub ttl_ms: u64,
    /// The longest it may go between renewals.
    pub renew_every_ms: u64,
}

impl Promise {
    fn renew_every(&self) -> Duration {
        Duration::from_millis(self.renew_every_ms)
    }
}

/// Where a [`Promise`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PromiseSource {
    /// The owner's own process announced it in its heartbeat.
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
    /// Dry run: it would be deleted if the second look finds it unchanged.
    WouldDelete,
    /// Deleted at its observed writetime, after the second look.
    Deleted,
    /// Kept: the owner's process is live (`--force` deletes it anyway,
    /// after the second look).
    KeptOwnerLive,
    /// Kept: its owner may not have been told yet that its lease is lost
    /// (`--force` deletes it anyway, after the second look).
    KeptOwnerMayHold,
    /// The second look found it renewed (or rewritten): left alone.
    SkippedRenewed,
    /// It was gone already (expired, released) at the second look.
    SkippedGone,
    /// The re-read or delete failed; see `error`.
    Failed,
}

/// Counts of the report.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CleanSummary {
    /// Overdue cells found (kept ones included).
    pub found: usize,
    /// Kept because the owner may still hold (live process, or not yet told).
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

/// Scans every lock and, when `apply`, deletes the stale cells — each after
/// its second look (see the module docs), the shortest wait first.
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
    let skew_margin = env.settings.rollout.clock_skew_margin;
    let (mut report, candidates, unjudged) = scan(env, options, skew_margin, &mut progress).await?;
    if apply {
        report.applied = true;
        // Every first look happened before this moment.
        let scanned = Instant::now();
        let mut order: Vec<usize> = (0..report.cells.len())
            .filter(|&i| report.cells[i].action == Action::WouldDelete)
            .collect();
        order.sort_by_key(|&i| candidates[i].1);
        let total = order.len();
        for (done, i) in order.into_iter().enumerate() {
            let (cell, wait) = &candidates[i];
            progress(Progress {
                phase: "second look",
                table: None,
                done,
                total: Some(total),
            });
            // A plausible promise keeps the wait within years; should it
            // not, the cell is left alone rather than looked at early.
            let (action, error) = match scanned.checked_add(*wait) {
                Some(due) => {
                    sleep_until(due).await;
                    delete_if_unchanged(env.store.as_ref(), cell).await
                }
                None => (
                    Action::Failed,
                    Some("its second look would be too far off".to_string()),
                ),
            };
            report.cells[i].action = action;
            report.cells[i].error = error;
            progress(Progress {
                phase: "second look",
                table: None,
                done: done + 1,
                total: Some(total),
            });
        }
    }
    report.summary = summarise(&report.cells);
    report.summary.unjudged_without_ttl = unjudged;
    Ok(report)
}

/// The first look's verdict on one cell (see the module docs): pure, the
/// cell as the census saw it, `skew_margin` = `rollout.clock_skew_margin`.
fn judge(cell: &CensusCell, options: &CleanOptions, skew_margin: Duration) -> Judged {
    // The owner's clock may be behind this one by the margin: its cells
    // then look that much older than they are.
    let age = cell.age.saturating_sub(skew_margin);
    let promise = promise_of(cell, skew_margin);
    let overdue_after = match promise {
        Some(p) => p.renew_every().saturating_mul(options.stale_multiple),
        // Only a cell that promises nothing is the operator's to judge:
        // --stale-after never shortens a promise.
        None => match options.stale_after {
            Some(after) => after,
            None => return Judged::Unjudged,
        },
    };
    if age <= overdue_after && !cell.lease_over {
        return Judged::Fine;
    }
    let action = if cell.lease_over || options.force {
        Action::WouldDelete
    } else if cell.owner.process_live {
        Action::KeptOwnerLive
    } else if promise.is_some() {
        // Not known to be over: a cut-off owner may not have been told.
        Action::KeptOwnerMayHold
    } else {
        Action::WouldDelete
    };
    Judged::Overdue {
        promise,
        action,
        second_look: promise.map_or(Duration::ZERO, |p| {
            p.renew_every().saturating_add(p.renew_every() / 2)
        }),
    }
}

/// What `cell`'s owner promised: its own process's announcement, or what
/// the cell's TTL implies; `None` for a cell without a TTL.
fn promise_of(cell: &CensusCell, skew_margin: Duration) -> Option<Promise> {
    match (cell.owner.promise.filter(plausible), cell.ttl_left) {
        (Some(p), _) => Some(Promise {
            source: PromiseSource::Registry,
            ttl_ms: p.ttl_ms,
            renew_every_ms: p.renew_every_ms,
        }),
        (None, Some(left)) => {
            // `age + left` is short of the TTL written by at most a second
            // and the skew margin: take the longest it may have been.
            let ttl = cell
                .age
                .saturating_add(left)
                .saturating_add(Duration::from_secs(1))
                .saturating_add(skew_margin);
            Some(Promise {
                source: PromiseSource::Cell,
                ttl_ms: ms(ttl),
                renew_every_ms: ms(ttl / 2),
            })
        }
        (None, None) => None,
    }
}

/// A promise a lockshift node could have made: its settings validation
/// refuses any other (a row that says otherwise is broken, and says
/// nothing).
fn plausible(p: &LeasePromise) -> bool {
    p.renew_every_ms > 0
        && p.renew_every_ms.saturating_mul(2) < p.ttl_ms
        && p.ttl() >= lockshift_lock::MIN_LEASE_TTL
        && lockshift_store::Ttl::from_duration(p.ttl()).is_ok()
}

/// The second look's verdict on a cell the first look saw written at
/// `first`: `Ok(stamp)` — delete it at that stamp — if it still stands
/// unchanged (`now`: its writetime at the second look, `None` when gone),
/// else what to report. Pure.
fn second_look(first: Timestamp, now: Option<Timestamp>) -> Result<Timestamp, Action> {
    match now {
        None => Err(Action::SkippedGone),
        Some(t) if t != first => Err(Action::SkippedRenewed),
        Some(t) => Ok(t),
    }
}

#[derive(Debug, PartialEq)]
enum Judged {
    Fine,
    Unjudged,
    Overdue {
        promise: Option<Promise>,
        action: Action,
        second_look: Duration,
    },
}

/// The scan: every overdue cell, as a dry run would report it, the cells
/// to act on with their second-look waits (same order) and the count of
/// cells without a TTL left unjudged.
async fn scan(
    env: &Env,
    options: &CleanOptions,
    skew_margin: Duration,
    progress: &mut impl FnMut(Progress),
) -> anyhow::Result<(CleanReport, Vec<(CensusCell, Duration)>, usize)> {
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
            // The census's own notion of stale (one threshold for all) is
            // not used: every cell is judged by its owner's promise below.
            stale_after: Staleness::uniform(Duration::MAX),
            clock_skew_margin: skew_margin,
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
        let (promise, action, wait) = match judge(&c, options, skew_margin) {
            Judged::Fine => continue,
            Judged::Unjudged => {
                unjudged += 1;
                continue;
            }
            Judged::Overdue {
                promise,
                action,
                second_look,
            } => (promise, action, second_look),
        };
        cells.push(CleanCell {
            table: c.table.to_string(),
            lock: c.lock.clone(),
            column: c.column.clone(),
            owner: c.owner.owner.clone(),
            node: c.owner.node.clone(),
            owner_live: c.owner.process_live,
            algorithm: c.owner.algorithm,
            reason: if c.table == schema::MAIN {
                Reason::StaleHolder
            } else if c.table == schema::SHADOW {
                Reason::OrphanedShadow
            } else {
                Reason::OrphanedQueue
            },
            promise,
            lease_over: c.lease_over,
            writetime_us: c.writetime.as_micros(),
            age_ms: ms(c.age),
            ttl_left_ms: c.ttl_left.map(ms),
            second_look_after_ms: ms(wait),
            action,
            error: None,
        });
        candidates.push((c, wait));
    }
    Ok((
        CleanReport {
            version: JSON_VERSION,
            applied: false,
            forced: options.force,
            stale_after_ms: options.stale_after.map(ms),
            stale_multiple: options.stale_multiple,
            clock_skew_margin_ms: ms(skew_margin),
            scanned,
            cells,
            summary: CleanSummary::default(),
        },
        candidates,
        unjudged,
    ))
}

/// The second look: re-reads the cell and deletes it at the observed
/// writetime if that is still the scanned one (M2).
async fn delete_if_unchanged(store: &dyn Store, cell: &CensusCell) -> (Action, Option<String>) {
    let failed = |e: StoreError| (Action::Failed, Some(e.to_string()));
    let reread = store
        .read(
            cell.table,
            &cell.lock,
            &RowQuery::first(1).starting_at(cell.column.clone()),
        )
        .await;
    let now = match reread {
        Err(e) => return failed(e),
        Ok(cells) => cells
            .into_iter()
            .find(|c| c.column == cell.column)
            .map(|c| c.writetime),
    };
    let observed = match second_look(cell.writetime, now) {
        Ok(observed) => observed,
        Err(action) => return (action, None),
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
        CellWrite, KeyPage, ManualClock, MemoryStore, PageCursor, ReadOutcome, SharedStore, Table,
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
        async fn read_observed(
            &self,
            t: Table,
            r: &str,
            q: &RowQuery,
        ) -> Result<ReadOutcome, StoreError> {
            self.inner.read_observed(t, r, q).await
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
        let (mut report, candidates, _) = scan(&env, &options, Duration::from_secs(5), &mut |_| {})
            .await
            .unwrap();
        put(
            store.as_ref(),
            schema::MAIN,
            "acct-renewed",
            "n3/0000000000000003",
            NOW,
        )
        .await;
        for (i, cell) in report.cells.iter_mut().enumerate() {
            (cell.action, cell.error) = delete_if_unchanged(store.as_ref(), &candidates[i].0).await;
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

    /// Issue 11 item 2 and issue 23: a cell is judged by its own owner's
    /// promise and the registry, never by the operator's settings (here
    /// the defaults: renew every 10 s). The owner's process renews every
    /// 60 s with a 5 min TTL; --stale-after speaks only for cells without a
    /// TTL. The claim the issue found untrue: a cell within its promise
    /// survives even --force (schedules with real lockers:
    /// `tests/clean_schedules.rs`).
    #[tokio::test(start_paused = true)]
    async fn live_owners_are_judged_by_their_promise_and_kept() {
        use lockshift_combined::registry::{LeasePromise, NodeInfo, heartbeat};
        use lockshift_combined::{Mode, Stage};
        use lockshift_lock::{Incarnation, NodeId, OwnerId};
        let clock = Arc::new(ManualClock::new(Timestamp::from_micros(NOW)));
        let store: SharedStore = Arc::new(MemoryStore::with_clock(clock.clone()));
        let env = Env::new(Settings::default(), store.clone(), clock.clone());
        let incarnation = Incarnation::from_seed(1);
        let info = NodeInfo {
            node: "slow".into(),
            version: "0.1.0".into(),
            configured_mode: Mode::Combined,
            effective: Algorithm::Combined,
            degraded: false,
            seen_stage: Some(Stage::Legacy),
            seen_version: Some(0),
            started_at: 0,
            incarnation: Some(incarnation.to_string()),
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
        let slot = |node: &str, n| {
            OwnerId::for_slot(&NodeId::new(node).unwrap(), incarnation, n)
                .as_str()
                .to_string()
        };
        let cell = |lock: &'static str, owner: String, age_s: i64| {
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
        cell("acct-36s", slot("slow", 1), 36).await;
        // 200 s: overdue by its promise (3 × 60 s + the 5 s skew margin),
        // but its process is live.
        cell("acct-200s", slot("slow", 2), 200).await;
        // 200 s, no process: its 5 min TTL is its promise (renewal within
        // 2.5 min), and --stale-after 30s does not shorten it.
        cell("acct-gone", slot("gone", 3), 200).await;
        let options = CleanOptions::new(Some(Duration::from_secs(30)), 3, false, 10).unwrap();
        let r = clean(&env, &options, true, |_| {}).await.unwrap();
        let actions: Vec<(&str, Action)> = r
            .cells
            .iter()
            .map(|c| (c.lock.as_str(), c.action))
            .collect();
        assert_eq!(actions, [("acct-200s", Action::KeptOwnerLive)], "{r:#?}");
        assert_eq!(r.summary.deleted, 0);
        for lock in ["acct-36s", "acct-200s", "acct-gone"] {
            let cells = store
                .read(schema::MAIN, lock, &RowQuery::all())
                .await
                .unwrap();
            assert_eq!(cells.len(), 1, "{lock} must survive");
        }
        // --force: what the promise calls overdue goes — after a second
        // look 90 s later found it not renewed — and nothing else.
        let options = CleanOptions::new(Some(Duration::from_secs(30)), 3, true, 10).unwrap();
        let started = tokio::time::Instant::now();
        let r = clean(&env, &options, true, |_| {}).await.unwrap();
        assert_eq!(r.summary.deleted, 1, "{r:#?}");
        assert_eq!(r.cells[0].second_look_after_ms, 90_000);
        assert!(started.elapsed() >= Duration::from_secs(90));
        for (lock, left) in [("acct-36s", 1), ("acct-200s", 0), ("acct-gone", 1)] {
            let cells = store
                .read(schema::MAIN, lock, &RowQuery::all())
                .await
                .unwrap();
            assert_eq!(
                cells.len(),
                left,
                "{lock}: within its promise even under --force"
            );
        }
    }

    fn census_cell(age_s: f64, ttl_left_s: Option<f64>) -> CensusCell {
        use lockshift_combined::census::CellOwner;
        CensusCell {
            table: schema::MAIN,
            lock: "L".into(),
            column: "web/0000000100000000".into(),
            owner: CellOwner {
                owner: "web/0000000100000000".into(),
                node: Some("web".into()),
                registered: false,
                process_live: false,
                promise: None,
                algorithm: Some(Algorithm::Queue),
                reserved: false,
            },
            writetime: Timestamp::from_micros(NOW),
            age: Duration::from_secs_f64(age_s),
            ttl_left: ttl_left_s.map(Duration::from_secs_f64),
            queue_position: None,
            queued_at: None,
            stale: false,
            lease_over: false,
        }
    }

    /// The first look, as a table: (case, cell, options) → verdict. The
    /// skew margin is 5 s throughout (the default).
    #[test]
    fn the_first_look_judges_by_the_owners_own_promise() {
        use lockshift_combined::census::lease_over;
        use lockshift_combined::registry::LeasePromise;
        const MARGIN: Duration = Duration::from_secs(5);
        let promise = |ttl_s: u64, renew_s: u64| LeasePromise {
            ttl_ms: ttl_s * 1000,
            renew_every_ms: renew_s * 1000,
        };
        // A cell of a live process that promised `p`.
        let of_process = |age_s: f64, p: LeasePromise| {
            let mut c = census_cell(age_s, Some(p.ttl().as_secs_f64() - age_s.min(3.0)));
            c.owner.process_live = true;
            c.owner.promise = Some(p);
            c.lease_over = lease_over(c.age, Some(p), MARGIN);
            c
        };
        let opts = |stale_after_s: Option<u64>, multiple, force| {
            CleanOptions::new(stale_after_s.map(Duration::from_secs), multiple, force, 10).unwrap()
        };
        let overdue = |action, second_look_ms| (Some(action), second_look_ms);
        let fine = (None, 0);
        // The expected action (`None`: not overdue) and second look in ms.
        type Expected = (Option<Action>, u64);
        let cases: Vec<(&str, CensusCell, CleanOptions, Expected)> = vec![
            (
                "schedule 1: renewed 0.5 s ago by a clock 5 s behind, --force",
                of_process(5.5, promise(4, 1)),
                opts(None, 3, true),
                fine,
            ),
            (
                "schedule 1: the same, --stale-multiple 5",
                of_process(5.5, promise(4, 1)),
                opts(None, 5, true),
                fine,
            ),
            (
                "overdue beyond the margin, --force: deleted after a second look 1.5 s on",
                of_process(8.5, promise(4, 1)),
                opts(None, 3, true),
                overdue(Action::WouldDelete, 1500),
            ),
            (
                "lease over by its own promise (8.5 s − 5 s > 2.75 s life): deleted, live or not",
                of_process(8.5, promise(4, 1)),
                opts(None, 3, false),
                overdue(Action::WouldDelete, 1500),
            ),
            (
                "lease over, not overdue by a long multiple: still deleted",
                of_process(8.5, promise(4, 1)),
                opts(None, 10, false),
                overdue(Action::WouldDelete, 1500),
            ),
            (
                "issue 11: 36 s into a 60 s promise",
                of_process(36.0, promise(300, 60)),
                opts(Some(30), 3, true),
                fine,
            ),
            (
                "overdue by its promise, within its life, process live",
                of_process(200.0, promise(300, 60)),
                opts(Some(30), 3, false),
                overdue(Action::KeptOwnerLive, 90_000),
            ),
            (
                "the same with --force",
                of_process(200.0, promise(300, 60)),
                opts(Some(30), 3, true),
                overdue(Action::WouldDelete, 90_000),
            ),
            (
                "schedule 2: a cell's TTL promise, --stale-after 1s does not shorten it",
                census_cell(1.25, Some(3.75)),
                opts(Some(1), 3, true),
                fine,
            ),
            (
                "schedule 3: no row of its own process: its 60 s TTL, not another's 4 s",
                census_cell(6.0, Some(54.0)),
                opts(None, 3, true),
                fine,
            ),
            (
                "a promise no lockshift node makes (renewal 0) is no promise",
                {
                    let mut c = census_cell(6.0, Some(54.0));
                    c.owner.promise = Some(promise(60, 0));
                    c
                },
                opts(None, 3, true),
                fine,
            ),
            (
                "a promise past the longest TTL (20 years) is no promise",
                {
                    let mut c = census_cell(6.0, Some(54.0));
                    c.owner.promise = Some(promise(u64::MAX / 1000, 1));
                    c
                },
                opts(None, 3, true),
                fine,
            ),
            (
                "no TTL, --stale-after 30s, 36 s old (31 s less the margin)",
                census_cell(36.0, None),
                opts(Some(30), 3, false),
                overdue(Action::WouldDelete, 0),
            ),
            (
                "no TTL, --stale-after 30s, 34 s old (within, less the margin)",
                census_cell(34.0, None),
                opts(Some(30), 3, false),
                fine,
            ),
            (
                "no TTL, its process live: kept",
                {
                    let mut c = census_cell(600.0, None);
                    c.owner.process_live = true;
                    c
                },
                opts(Some(30), 3, false),
                overdue(Action::KeptOwnerLive, 0),
            ),
        ];
        for (case, cell, options, (action, second_look_ms)) in cases {
            let got = judge(&cell, &options, MARGIN);
            match (got, action) {
                (Judged::Fine, None) => {}
                (
                    Judged::Overdue {
                        action: got,
                        second_look,
                        ..
                    },
                    Some(want),
                ) => {
                    assert_eq!(got, want, "{case}");
                    assert_eq!(ms(second_look), second_look_ms, "{case}");
                }
                (got, want) => panic!("{case}: {got:?}, expected {want:?}"),
            }
        }
        assert_eq!(
            judge(&census_cell(600.0, None), &opts(None, 3, true), MARGIN),
            Judged::Unjudged,
            "no TTL and no --stale-after: counted, never judged"
        );
        // A promise read off a cell: the longest TTL it may have had (what
        // it says, a second, the margin), and renewal within half of it —
        // so it is never overdue before it expires (2 × 63 s > 126 s).
        let cell = census_cell(100.0, Some(20.0));
        assert_eq!(
            promise_of(&cell, MARGIN),
            Some(Promise {
                source: PromiseSource::Cell,
                ttl_ms: 126_000,
                renew_every_ms: 63_000
            })
        );
        assert_eq!(judge(&cell, &opts(None, 2, true), MARGIN), Judged::Fine);
    }

    /// The second look, as a table.
    #[test]
    fn the_second_look_deletes_only_an_unchanged_cell() {
        let t = |us| Timestamp::from_micros(us);
        assert_eq!(second_look(t(10), Some(t(10))), Ok(t(10)));
        assert_eq!(
            second_look(t(10), Some(t(11))),
            Err(Action::SkippedRenewed),
            "renewed"
        );
        assert_eq!(
            second_look(t(10), Some(t(9))),
            Err(Action::SkippedRenewed),
            "rewritten (a stamp from a clock behind)"
        );
        assert_eq!(second_look(t(10), None), Err(Action::SkippedGone));
    }
}
