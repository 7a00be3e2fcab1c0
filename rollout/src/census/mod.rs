//! A census of lock cells: every cell of `main`, `shadow` and `queue`,
//! classified by algorithm, owner and age — for rollout guards, `migrate
//! status`, `inspect` and `clean`.
//!
//! The census's data and the judgements on it are pure and live in
//! `lockshift_decide::census`. This module takes the census ([`take_census`], [`inspect_lock`]): it reads
//! the rows, matches each cell to its process's registry row, and judges
//! by that process's promise whether the cell outlived its lease
//! ([`lease_over`], which applies the lease rules of `lockshift_lock`).
//!
//! Binaries that predate lockshift do not register and do not name their
//! cells lockshift's way; a cell whose owner is not `node/<16 hex digits>`, or whose
//! value says `legacy`, is legacy activity.
//!
//! A lockshift owner id names the process that wrote it (node id and
//! incarnation, docs/design.md §2a), and so does a registry row (§4, R5):
//! each cell is matched to its own process's row, never to another
//! process's of the same node id — a replacement's promise says nothing
//! about its predecessor's cells. By that process's own promise a cell can
//! be known to have outlived its lease ([`CensusCell::lease_over`]): a
//! late write brought it back (lock invariant L5), or its owner could not
//! delete it. Nobody holds or waits through such a cell; it only makes
//! others wait until it expires.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU32;
use std::time::Duration;

use std::sync::{Mutex, PoisonError};

use lockshift_store::offset::measure_offset;
use lockshift_store::{
    Clock, Route, RowQuery, Store, StoreError, StoreErrorKind, Table, TokenRange, schema,
};

use classify::{Registry, classify_row};
use lockshift_decide::offset::ClockReading;
use lockshift_decide::registry::LiveNode;
use plan::{FailedRange, Meter, Pass, Plan};

mod classify;
mod plan;
mod scan;

pub use scan::{IN_FLIGHT, Keep, RANGES, SECOND_LOOKS};

use lockshift_decide::census::{
    CellOwner, Census, CensusCell, Staleness, UnreadableRow, lease_over,
};

/// The fleet's [`Staleness`] thresholds, from the queue lock's and the
/// lease's settings ([`Staleness::of_fleet`] on the durations they set).
/// (This was an inherent function of `Staleness` before it moved; bring
/// this trait into scope to call `Staleness::of` as before.)
pub trait FleetStaleness {
    /// The fleet's thresholds: `lock.queue.stale_after` for waiters' cells,
    /// three `lock.renew_every` periods for holdings.
    fn of(
        queue: &lockshift_queue_lock::QueueSettings,
        lease: &lockshift_lock::LeaseSettings,
    ) -> Staleness;
}

impl FleetStaleness for Staleness {
    fn of(
        queue: &lockshift_queue_lock::QueueSettings,
        lease: &lockshift_lock::LeaseSettings,
    ) -> Staleness {
        Staleness::of_fleet(queue.stale_after(lease), lease.renew_every)
    }
}

/// Whether a failed read of one lock's row concerns only that row — the
/// census records it as unreadable and goes on — rather than the store
/// (which fails the census). The tombstone refusal is the row's own, and so
/// is a lock whose home datacenter is out of this client's reach (its
/// home's side still reads it; docs/design.md §4a), or moving:
/// the other kinds are transient, or say something is wrong with the
/// connection, the credentials or the schema for every row alike (an
/// `Invalid` answer cannot be told apart from a schema mismatch).
pub fn concerns_only_the_row(kind: StoreErrorKind) -> bool {
    match kind {
        StoreErrorKind::TooManyTombstones
        | StoreErrorKind::HomeUnreachable
        | StoreErrorKind::HomeMoving => true,
        StoreErrorKind::NotApplied
        | StoreErrorKind::MaybeApplied
        | StoreErrorKind::Unavailable
        | StoreErrorKind::Invalid
        | StoreErrorKind::SchemaMissing
        | StoreErrorKind::Connection
        | StoreErrorKind::Authentication => false,
        // A kind added later fails the census until it is judged here.
        _ => false,
    }
}

/// How long an unreadable row's reason may be in a census (bytes).
const REASON_MAX: usize = 300;

fn short_reason(e: &StoreError) -> String {
    let mut text = e.to_string();
    if text.len() > REASON_MAX {
        let mut end = REASON_MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// How a census pages through row keys and what counts as stale.
#[derive(Clone, Copy, Debug)]
pub struct CensusOptions {
    /// Cells not renewed for longer than their threshold are stale.
    pub stale_after: Staleness,
    /// How far an owner's clock may be behind the observer's
    /// (`rollout.clock_skew_margin`): ages judged against an owner's
    /// promise allow for it ([`lease_over`]).
    pub clock_skew_margin: Duration,
    /// Cells per scan page.
    pub page_size: NonZeroU32,
    /// The census taker's clock against the database's ([`read_own_clock`];
    /// `None`: not read, and allowed `clock_skew_margin`).
    pub reader: Option<ClockReading>,
}

/// How many readings of its own clock a census taker takes (the fastest
/// kept): one round trip each, once per census, not per lock.
pub const OWN_CLOCK_SAMPLES: usize = 3;

/// The census taker's clock against the database's: [`OWN_CLOCK_SAMPLES`]
/// reads of the coordinator's clock ([`measure_offset`]), the fastest kept;
/// `None` when none was answered (the census then allows the margin).
///
/// # Cancel safety
/// Cancel safe: nothing is written.
pub async fn read_own_clock(store: &dyn Store, clock: &dyn Clock) -> Option<ClockReading> {
    measure_offset(store, clock, &Route::Default, OWN_CLOCK_SAMPLES)
        .await
        .reading
}

/// Reads one lock's cells in all three tables.
///
/// # Errors
/// The store error.
pub async fn inspect_lock(
    store: &dyn Store,
    clock: &dyn Clock,
    nodes: &[LiveNode],
    lock: &str,
    options: CensusOptions,
) -> Result<Vec<CensusCell>, StoreError> {
    let registry = Registry::of(nodes);
    let now = clock.now();
    let mut out = Vec::new();
    for table in [schema::MAIN, schema::SHADOW, schema::QUEUE] {
        let cells = store.read(table, lock, &RowQuery::all()).await?;
        out.extend(classify_row(table, lock, cells, &registry, now, &options));
    }
    Ok(out)
}

/// Takes a census of every lock: one paged scan of cells per table and
/// home datacenter, its ring cut into [`RANGES`] ranges, [`IN_FLIGHT`]
/// read at once, calling `progress(table, rows_done)` as ranges end. A
/// row the database refuses to read ([`concerns_only_the_row`]) is
/// recorded in [`Census::unreadable`] and the census goes on with the
/// others.
///
/// Every cell goes into the census's tally ([`Census::tally`]); the cells
/// `keep` asks for are kept whole as well ([`Census::cells`]), so what a
/// census holds grows with what its taker keeps, not with the locks.
///
/// Through a homes router ([`Store::homes`]) each lock is read where its
/// home rule says, as its writers read and write it: each table is
/// scanned once at each datacenter that is some rule's home (and at the
/// client's own), `LOCAL_QUORUM` there, and each row is classified only
/// from the scan of its home (`plan.rs`; docs/design.md §6a). A lock
/// whose home refuses it (out of reach, moving) is named unreadable; a
/// datacenter that does not answer leaves its ranges unread — its locks
/// named unreadable where the client's own scan saw them — and the census
/// goes on. What it sent is counted by table and datacenter
/// ([`Census::requests`]).
///
/// # Errors
/// The first store error that concerns the store, not one row, once each
/// page has been tried again for a few seconds.
pub async fn take_census(
    store: &dyn Store,
    clock: &dyn Clock,
    nodes: &[LiveNode],
    options: CensusOptions,
    keep: Keep<'_>,
    mut progress: impl FnMut(Table, usize),
) -> Result<Census, StoreError> {
    let registry = Registry::of(nodes);
    let plan = Plan::of(store);
    let meter = Meter::default();
    let failed = Mutex::new(Vec::new());
    let passes = Passes {
        plan: &plan,
        failed: &failed,
        meter: &meter,
    };
    let census = Mutex::new(Census {
        taken_at: clock.now(),
        reader: options.reader,
        ..Census::default()
    });
    let tables = [schema::MAIN, schema::SHADOW, schema::QUEUE];
    // Tokens whose row a scan refused, by table, token and route.
    let mut refused = Refused::new();
    let mut heavy: Vec<(Table, &Route, Vec<String>)> = Vec::new();
    for table in tables {
        let mut before = 0;
        for route in plan.passes() {
            let pass = passes.on(route);
            let into = (&census, keep);
            let scanned = scan::scan_table(
                store,
                clock,
                &registry,
                &options,
                into,
                table,
                pass,
                |rows| progress(table, before + rows),
            )
            .await?;
            before += scanned.rows;
            let mut c = census.lock().unwrap_or_else(PoisonError::into_inner);
            c.unreadable.extend(scanned.unreadable);
            drop(c);
            for (token, reason) in scanned.refused {
                refused
                    .entry((table_order(table), token))
                    .or_insert_with(|| (table, reason, Vec::new()))
                    .2
                    .push(route.clone());
            }
            heavy.push((table, route, scanned.heavy_pages));
        }
    }
    let mut census = census.into_inner().unwrap_or_else(PoisonError::into_inner);
    let mut looked = 0;
    for (table, route, keys) in heavy {
        let pass = passes.on(route);
        scan::look_again(&mut census, store, pass, table, &keys, &mut looked).await?;
    }
    read_refused(
        &mut census,
        store,
        clock,
        (&registry, &options, keep),
        passes,
        refused,
    )
    .await?;
    // Ranges end in any order: the kept cells by table and lock (a stable
    // sort, each row's cells in the order classified).
    census
        .cells
        .sort_by(|a, b| (table_order(a.table), &a.lock).cmp(&(table_order(b.table), &b.lock)));
    census.requests = meter.requests();
    Ok(census)
}

/// Tokens whose row a scan refused, by table (in [`table_order`]) and
/// token: the table, why, and the routes whose scans refused it.
type Refused = BTreeMap<(usize, i64), (Table, String, Vec<Route>)>;

/// What a census's passes share: its plan, the ranges they could not
/// read, the count of what they sent.
#[derive(Clone, Copy)]
struct Passes<'a> {
    plan: &'a Plan,
    failed: &'a Mutex<Vec<FailedRange>>,
    meter: &'a Meter,
}

impl<'a> Passes<'a> {
    /// The pass on `route`.
    fn on(self, route: &'a Route) -> Pass<'a> {
        Pass {
            route,
            plan: self.plan,
            failed: self.failed,
            meter: self.meter,
        }
    }
}

/// Each token whose row a scan refused: named once in `census`, and read
/// by key for the lock another table names there (a one-cell page of that
/// one token in each, on the route that refused it), where that lock's
/// home is the route.
async fn read_refused(
    census: &mut Census,
    store: &dyn Store,
    clock: &dyn Clock,
    (registry, options, keep): (&Registry, &CensusOptions, Keep<'_>),
    passes: Passes<'_>,
    refused: Refused,
) -> Result<(), StoreError> {
    let tables = [schema::MAIN, schema::SHADOW, schema::QUEUE];
    for ((_, token), (table, reason, routes)) in refused {
        census.unreadable.push(UnreadableRow {
            table,
            lock: None,
            reason: format!("token {token}: {reason}"),
        });
        let at = TokenRange {
            start: token.saturating_sub(1),
            end: token,
        };
        for route in &routes {
            let pass = passes.on(route);
            let mut locks = BTreeSet::new();
            for other in tables.into_iter().filter(|t| *t != table) {
                // A page of one cell: the other table's row at the token
                // may be full of tombstones too, behind its first live cell.
                locks.extend(scan::first_key(store, pass, other, at).await);
            }
            for lock in locks
                .iter()
                .filter(|l| passes.plan.home(table, l).as_ref() == Ok(route))
            {
                let row = (table, lock.as_str());
                read_row(census, store, clock, registry, options, keep, pass, row).await?;
            }
        }
    }
    Ok(())
}

/// `main`, `shadow`, `queue`: the order a census reads them in.
fn table_order(table: Table) -> usize {
    [schema::MAIN, schema::SHADOW, schema::QUEUE]
        .iter()
        .position(|t| *t == table)
        .unwrap_or(usize::MAX)
}

/// More tombstones than this in one read of a lock row and the census
/// flags the row ([`Census::tombstone_heavy`]): Cassandra's default
/// `tombstone_warn_threshold`, above which it warns in its logs and
/// answers — and the count it can report (a cluster says how many
/// tombstones a read passed only then; the embedded store always does).
pub const MANY_TOMBSTONES: u64 = lockshift_store::tombstones::DEFAULT_WARN_THRESHOLD;

/// Reads `lock`'s row of `table` into `census` on `pass`'s route (its
/// home) — or, when the database refuses that row alone, records it as
/// unreadable. A read that passed more than [`MANY_TOMBSTONES`]
/// tombstones is recorded as well.
#[allow(clippy::too_many_arguments)]
async fn read_row(
    census: &mut Census,
    store: &dyn Store,
    clock: &dyn Clock,
    registry: &Registry,
    options: &CensusOptions,
    keep: Keep<'_>,
    pass: Pass<'_>,
    (table, lock): (Table, &str),
) -> Result<(), StoreError> {
    if let Some(cells) = scan::read_noting_cost(census, store, pass, table, lock).await? {
        let cells = classify_row(table, lock, cells, registry, clock.now(), options);
        census.add_row(table, cells, keep);
    }
    Ok(())
}

#[cfg(test)]
mod datacenter_tests;
#[cfg(test)]
mod skew_tests;
#[cfg(test)]
mod tests;
