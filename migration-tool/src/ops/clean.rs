//! `migrate clean`: find stale lock cells and, with `--apply`, delete them
//! without ever breaking an owner that is renewing its lease.
//!
//! # Whose rules decide (issues 11 and 23)
//!
//! Every cell is judged by what **its own owner** promised, never by the
//! operator's local settings. The rules are written down where they are
//! applied, in [`lockshift_decide::clean`]; this module reads the rows,
//! waits, deletes and reports.
//!
//! # The second look (issue 23)
//!
//! A cell with a promise is deleted only after a second look: it is read
//! again one and a half renewal periods after the scan — the promised
//! period, or the one the cell's own TTL left allows if that is longer
//! (a registry row can understate its process's lease:
//! [`lockshift_decide::clean`], "The longer of the row and the cell") — and
//! deleted only if its writetime has not moved. The wait is timed by this
//! machine's monotonic clock, so no clock — skewed past the margin, or
//! stepped — can make a renewing owner look idle: an owner whose renewals
//! land within one and a half periods of each other (its period, plus up to
//! half a period for the renewal's own round trips) shows as renewed. A
//! cell without a TTL has no period; it is re-read just before its delete.
//! The judgement of both looks is pure ([`judge`], [`second_look`]); the
//! I/O around them only reads, waits and deletes.
//!
//! # What `--force` still risks
//!
//! Only an owner that is alive but *not* renewing within its promise:
//! paused (a GC pause, SIGSTOP, a frozen VM), cut off from the store, or
//! with its renewals slow or stuck in flight. Its lease tells it at the
//! latest `lost_after_fraction × TTL` after its last renewal that landed
//! (L3), and until then it may still act on the lock beside the process
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
//! # Why deleting cannot hurt a renewing owner (invariant 2 of `lib.rs`)
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
use lockshift_decide::census::{CensusCell, Staleness};
use lockshift_decide::clean::{Action, Criteria, Judged, Promise, judge, second_look};
use lockshift_lock::{Algorithm, MIN_LEASE_TTL};
use lockshift_rollout::census::{CensusOptions, read_own_clock, take_census};
use lockshift_rollout::registry::live_nodes;
use lockshift_store::{RowQuery, Store, StoreError, schema};
use serde::Serialize;
use tokio::time::{Instant, sleep_until};

use super::{Env, Progress, ms};
use crate::{JSON_VERSION, UsageError};

/// How `clean` judges cells and how it pages.
#[derive(Debug, Clone, Copy)]
pub struct CleanOptions {
    /// What cells are judged by: `--stale-multiple`, `--stale-after`,
    /// `--force`.
    pub criteria: Criteria,
    /// Row keys per scan page.
    pub page_size: NonZeroU32,
}

impl CleanOptions {
    /// Options from the flags.
    ///
    /// # Errors
    /// A [`UsageError`] for a multiple below 2 (a renewing owner can be
    /// one period late) or a zero `--stale-after` ([`Criteria::new`]).
    pub fn new(
        stale_after: Option<Duration>,
        stale_multiple: u32,
        force: bool,
        page_size: u32,
    ) -> anyhow::Result<CleanOptions> {
        let criteria = Criteria::new(stale_after, stale_multiple, force)
            .map_err(|e| UsageError(e.to_string()))?;
        Ok(CleanOptions {
            criteria,
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
    /// delete (one and a half renewal periods: the promised one, or the
    /// one the cell's TTL left allows if longer; 0: at once, no
    /// promise).
    pub second_look_after_ms: u64,
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
    let (nodes, _) = live_nodes(store, env.clock.now(), skew_margin)
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
            reader: read_own_clock(store, env.clock.as_ref()).await,
        },
        // Kept whole: the cells judged below other than fine — the rest
        // are only counted.
        &|c| {
            !matches!(
                judge(c, &options.criteria, skew_margin, MIN_LEASE_TTL),
                Judged::Fine
            )
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
    scanned.cells = census.tally.cells;
    let mut unjudged = 0;
    let mut candidates = Vec::new();
    let mut cells = Vec::new();
    for c in census.cells {
        let (promise, action, wait) = match judge(&c, &options.criteria, skew_margin, MIN_LEASE_TTL)
        {
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
            forced: options.criteria.force,
            stale_after_ms: options.criteria.stale_after.map(ms),
            stale_multiple: options.criteria.stale_multiple,
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
/// writetime if that is still the scanned one (invariant 2 of `lib.rs`).
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
#[path = "clean_tests.rs"]
mod tests;
