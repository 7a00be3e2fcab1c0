//! The census's reads: one paged scan of cells per table, its token ring
//! cut into ranges read a few at a time, each lock's row classified as
//! soon as its last cell has come (docs/design.md §6a, "The census as a
//! scan").
//!
//! A scan costs what Cassandra charges for one: a page at a time, each
//! page passing the tombstones in its slice. Three things take a second
//! look, and only they:
//! - a range the database refuses (too many tombstones in one page) is
//!   cut in two, again and again, keeping every row before the refusal,
//!   down to one token, whose row a page of one cell names when a live
//!   cell comes before its tombstones; a row of tombstones alone no scan
//!   can name ([`Census::unreadable`] says which table and token);
//! - the row of such a token is read by key for every lock another
//!   table names there, so a refused row of a known lock is named;
//! - a page whose answer says it passed more than
//!   [`MANY_TOMBSTONES`](super::MANY_TOMBSTONES) tombstones: its rows are
//!   read one by one (at most [`SECOND_LOOKS`] rows a census) to find the
//!   rows heading for the refusal ([`Census::tombstone_heavy`]).

use std::num::NonZeroU32;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use futures::stream::{self, StreamExt};
use lockshift_store::{
    Cell, CellPage, Clock, PageCursor, RowCells, RowQuery, Store, StoreError, Table, Timestamp,
    TokenRange,
};
use tokio::time::Instant;

use super::classify::{Registry, classify_row};
use super::plan::{Own, Pass};
use super::{CensusOptions, MANY_TOMBSTONES, concerns_only_the_row, short_reason};
use crate::rollout::retry_reads;
use lockshift_decide::census::{Census, CensusCell, TombstoneHeavyRow, UnreadableRow};

/// Which cells a census keeps whole (the rest it only counts).
pub type Keep<'a> = &'a (dyn Fn(&CensusCell) -> bool + Sync);

/// Ranges each table's ring is cut into: enough for each range's scan to
/// be a small part of the whole (a refusal or a retry costs one range).
pub const RANGES: u32 = 32;

/// Ranges read at once: a few, so a scan keeps a node's two cores busy
/// without taking them from the fleet's locks.
pub const IN_FLIGHT: usize = 4;

/// Rows read one by one a census, at most, for pages that passed many
/// tombstones: the bound on the second looks of a badly churned table.
pub const SECOND_LOOKS: usize = 256;

/// How long one page is tried again after failures that may pass.
const PAGE_RETRY: Duration = Duration::from_secs(10);

/// What one range's scan found besides its cells (which go straight into
/// the census's tally).
#[derive(Default)]
pub(super) struct RangeScan {
    pub(super) rows: usize,
    pub(super) unreadable: Vec<UnreadableRow>,
    /// Tokens whose row the database refused to scan, with why.
    pub(super) refused: Vec<(i64, String)>,
    /// Keys of this pass's rows in pages that passed many tombstones.
    pub(super) heavy_pages: Vec<String>,
    /// What is left of ranges this pass's datacenter did not answer for
    /// ([`Pass::may_fail`]), with why.
    pub(super) failed: Vec<(TokenRange, String)>,
}

/// Scans every range of `table` on `pass`'s route, calling
/// `progress(rows)` as ranges end. Once a range of a pass that may fail
/// went unanswered, the pass's other ranges are not sent, in this table
/// or the next: the datacenter is out of reach for this census.
#[allow(clippy::too_many_arguments)]
pub(super) async fn scan_table(
    store: &dyn Store,
    clock: &dyn Clock,
    registry: &Registry,
    options: &CensusOptions,
    into: (&Mutex<Census>, Keep<'_>),
    table: Table,
    pass: Pass<'_>,
    mut progress: impl FnMut(usize),
) -> Result<RangeScan, StoreError> {
    let ranges = TokenRange::FULL.split(RANGES);
    let mut done: Vec<Option<RangeScan>> = (0..ranges.len()).map(|_| None).collect();
    // A datacenter that did not answer for an earlier table is not asked
    // again in this census.
    let down: Mutex<Option<String>> = Mutex::new(pass.down());
    let down = &down;
    let mut scans = stream::iter(ranges.into_iter().enumerate())
        .map(|(i, range)| async move {
            let gone = down.lock().unwrap_or_else(PoisonError::into_inner).clone();
            if let Some(reason) = gone {
                let skipped = RangeScan {
                    failed: vec![(range, reason)],
                    ..RangeScan::default()
                };
                return (i, Ok(skipped));
            }
            let ctx = (registry, options, into, pass);
            let scan = scan_range(store, clock, ctx, table, range).await;
            if let Ok(RangeScan { failed, .. }) = &scan
                && let Some((_, reason)) = failed.first()
            {
                let mut down = down.lock().unwrap_or_else(PoisonError::into_inner);
                down.get_or_insert_with(|| reason.clone());
            }
            (i, scan)
        })
        .buffer_unordered(IN_FLIGHT);
    let mut rows = 0;
    while let Some((i, scan)) = scans.next().await {
        let scan = scan?;
        rows += scan.rows;
        progress(rows);
        done[i] = Some(scan);
    }
    drop(scans);
    // Put together in token order, as one scan of the ring would be.
    let mut whole = RangeScan::default();
    for scan in done.into_iter().flatten() {
        whole.rows += scan.rows;
        whole.unreadable.extend(scan.unreadable);
        whole.refused.extend(scan.refused);
        whole.heavy_pages.extend(scan.heavy_pages);
        whole.failed.extend(scan.failed);
    }
    if let Some((_, reason)) = whole.failed.first() {
        whole.unreadable.push(UnreadableRow {
            table,
            lock: None,
            reason: format!(
                "{}: {} token range(s) unread, the locks homed there are named where \
                 another datacenter's scan saw them: {reason}",
                pass.route,
                whole.failed.len()
            ),
        });
        pass.failed_over(table, whole.failed.clone());
    }
    Ok(whole)
}

/// Scans `range` of `table` page by page into the census, classifying
/// the rows `pass` owns ([`Pass::own`]); a refused page cuts what is left
/// of the range in two. A pass that may fail records what it could not
/// read ([`RangeScan::failed`]) instead of failing.
pub(super) async fn scan_range(
    store: &dyn Store,
    clock: &dyn Clock,
    ctx: RangeCtx<'_>,
    table: Table,
    range: TokenRange,
) -> Result<RangeScan, StoreError> {
    let (_, options, _, pass) = ctx;
    let mut out = RangeScan::default();
    // Ranges still to read, the next first.
    let mut todo = vec![range];
    while let Some(range) = todo.pop() {
        let mut cursor: Option<PageCursor> = None;
        // The last row of the latest page, which the next may continue.
        let mut open: Option<RowCells> = None;
        // Every row up to this token is classified.
        let mut done_up_to = range.start;
        loop {
            let page = page(
                store,
                pass,
                table,
                range,
                cursor.as_ref(),
                options.page_size,
            )
            .await;
            // What is left of the range after the last whole row.
            let rest = TokenRange {
                start: done_up_to,
                end: range.end,
            };
            let page = match page {
                Ok(page) => page,
                Err(e) if concerns_only_the_row(e.kind()) => {
                    cut_refused(store, pass, table, (rest, &e), &mut todo, &mut out).await;
                    break;
                }
                Err(e) if pass.may_fail() && e.is_retryable() && e.was_sent() => {
                    // This datacenter did not answer: what is left of the
                    // range, and every range still to read, go unread.
                    let reason = short_reason(&e);
                    out.failed.push((rest, reason.clone()));
                    out.failed
                        .extend(todo.drain(..).map(|r| (r, reason.clone())));
                    return Ok(out);
                }
                Err(e) => return Err(e),
            };
            if page.tombstones.is_some_and(|t| t > MANY_TOMBSTONES) {
                out.heavy_pages.extend(
                    page.rows
                        .iter()
                        .filter(|r| pass.own(table, &r.key, r.token) == Own::Classify)
                        .map(|r| r.key.clone()),
                );
            }
            let finished = page.next.is_none();
            let whole = whole_rows(&mut open, page.rows, finished);
            if let Some(last) = whole.last() {
                done_up_to = last.token;
            }
            add_rows(ctx, (table, clock.now()), whole, &mut out);
            if finished {
                break;
            }
            cursor = page.next;
        }
    }
    Ok(out)
}

/// What a range's scan puts its rows into: the registry and options that
/// classify them, the census (and which cells it keeps whole), the pass.
pub(super) type RangeCtx<'a> = (
    &'a Registry,
    &'a CensusOptions,
    (&'a Mutex<Census>, Keep<'a>),
    Pass<'a>,
);

/// A refused page: what is left of its range (`rest`, after the last
/// whole row) is cut in two halves, the lower read first; one refused
/// token is named by its first live cell, or counted refused.
async fn cut_refused(
    store: &dyn Store,
    pass: Pass<'_>,
    table: Table,
    (rest, e): (TokenRange, &StoreError),
    todo: &mut Vec<TokenRange>,
    out: &mut RangeScan,
) {
    match rest.split(2).as_slice() {
        // (`split(2)` gives at most two.)
        [lower, upper, ..] => {
            todo.push(*upper);
            todo.push(*lower);
        }
        // Nothing is left (a refusal past the range's last row, which
        // passed its tombstones).
        [] => {}
        [_] => match first_key(store, pass, table, rest).await {
            // A live cell ahead of the tombstones names it (the pass of
            // its home says so; the keeper names a row no pass reads).
            Some(lock) => match pass.own(table, &lock, rest.end) {
                Own::Classify => out.unreadable.push(UnreadableRow {
                    table,
                    lock: Some(lock),
                    reason: short_reason(e),
                }),
                Own::Skip => {}
                Own::Unreadable(reason) => out.unreadable.push(UnreadableRow {
                    table,
                    lock: Some(lock),
                    reason,
                }),
            },
            None => out.refused.push((rest.end, short_reason(e))),
        },
    }
}

/// The rows a page completes, in order: `open` (the last row of the page
/// before) joined with the page's first row when they are one row, every
/// row but the page's last, and that one too when the range is
/// `finished`; else it is left `open` for the next page.
fn whole_rows(open: &mut Option<RowCells>, rows: Vec<RowCells>, finished: bool) -> Vec<RowCells> {
    let mut rows = rows.into_iter();
    let mut whole: Vec<RowCells> = Vec::new();
    match (open.take(), rows.next()) {
        (Some(mut row), Some(next)) if row.key == next.key => {
            row.cells.extend(next.cells);
            *open = Some(row);
        }
        (previous, first) => {
            whole.extend(previous);
            *open = first;
        }
    }
    for row in rows {
        whole.extend(open.replace(row));
    }
    if finished {
        whole.extend(open.take());
    }
    whole
}

/// Classifies the rows of `whole` that `pass` owns into the census, as
/// of `now`; rows it names unreadable go into `out`.
fn add_rows(
    (registry, options, (census, keep), pass): RangeCtx<'_>,
    (table, now): (Table, Timestamp),
    whole: Vec<RowCells>,
    out: &mut RangeScan,
) {
    let mut census = census.lock().unwrap_or_else(PoisonError::into_inner);
    for row in whole {
        match pass.own(table, &row.key, row.token) {
            Own::Classify => {
                out.rows += 1;
                let cells = classify_row(table, &row.key, row.cells, registry, now, options);
                census.add_row(table, cells, keep);
            }
            Own::Skip => {}
            Own::Unreadable(reason) => out.unreadable.push(UnreadableRow {
                table,
                lock: Some(row.key),
                reason,
            }),
        }
    }
}

/// The key of the row at the one token of `range`, read by a page of one
/// cell: it stops at the row's first live cell, before the tombstones
/// that refused the scan. `None` when the row has no live cell ahead of
/// them (or the page fails all the same).
pub(super) async fn first_key(
    store: &dyn Store,
    pass: Pass<'_>,
    table: Table,
    range: TokenRange,
) -> Option<String> {
    let page = page(store, pass, table, range, None, NonZeroU32::MIN)
        .await
        .ok()?;
    page.rows.into_iter().next().map(|r| r.key)
}

/// One page on `pass`'s route, tried again for [`PAGE_RETRY`] after
/// failures that may pass: a timeout costs a page, not the census. Each
/// try is counted.
async fn page(
    store: &dyn Store,
    pass: Pass<'_>,
    table: Table,
    range: TokenRange,
    cursor: Option<&PageCursor>,
    page_size: NonZeroU32,
) -> Result<CellPage, StoreError> {
    retry_reads(Instant::now() + PAGE_RETRY, async || {
        pass.meter.count(table, pass.route);
        store
            .scan_cells_via(pass.route, table, range, cursor, page_size)
            .await
    })
    .await
}

/// The second looks: each row in `keys` (at most [`SECOND_LOOKS`] of them
/// in all: `looked` counts them across passes) read by key at its home
/// (the pass that named it); rows that passed more than
/// [`MANY_TOMBSTONES`] go into `census`. Rows the database refuses to
/// read are named unreadable.
pub(super) async fn look_again(
    census: &mut Census,
    store: &dyn Store,
    pass: Pass<'_>,
    table: Table,
    keys: &[String],
    looked: &mut usize,
) -> Result<(), StoreError> {
    for lock in keys {
        if *looked >= SECOND_LOOKS {
            break;
        }
        *looked += 1;
        read_noting_cost(census, store, pass, table, lock).await?;
    }
    Ok(())
}

/// Reads `lock`'s row of `table` on `pass`'s route (its home), counted,
/// and notes in `census` what the read tells beside the cells: more than
/// [`MANY_TOMBSTONES`] tombstones passed, or a row the database refuses
/// to read alone (then `None`).
///
/// # Errors
/// A store error that concerns more than the row.
pub(super) async fn read_noting_cost(
    census: &mut Census,
    store: &dyn Store,
    pass: Pass<'_>,
    table: Table,
    lock: &str,
) -> Result<Option<Vec<Cell>>, StoreError> {
    pass.meter.count(table, pass.route);
    match store
        .read_observed_via(pass.route, table, lock, &RowQuery::all())
        .await
    {
        Ok(outcome) => {
            if let Some(tombstones) = outcome.tombstones.filter(|&t| t > MANY_TOMBSTONES) {
                census.tombstone_heavy.push(TombstoneHeavyRow {
                    table,
                    lock: lock.to_string(),
                    tombstones,
                });
            }
            Ok(Some(outcome.cells))
        }
        Err(e) if concerns_only_the_row(e.kind()) => {
            census.unreadable.push(UnreadableRow {
                table,
                lock: Some(lock.to_string()),
                reason: short_reason(&e),
            });
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
