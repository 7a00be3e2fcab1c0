//! A census of lock cells, as data: every cell of `main`, `shadow` and
//! `queue`, classified by algorithm, owner and age — for rollout guards,
//! `migrate status`, `inspect` and `clean` — and the judgements made on it.
//! Taking the census (reading the rows, matching each cell to its
//! process's registry row) is I/O and lives with the rollout.
//!
//! Binaries that predate lockshift do not register and do not name their
//! cells lockshift's way; a cell whose owner is not `node/<16 hex digits>`,
//! or whose value says `legacy`, is legacy activity.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;

use crate::algorithm::Algorithm;
use crate::cell::{Table, Timestamp};
use crate::datacenter::Datacenter;
use crate::id::cut_short;
use crate::offset::ClockReading;
use crate::registry::LeasePromise;
use crate::schema;
use crate::sharing::Sharing;

mod tally;

pub use tally::{SAMPLE, Sampled, Tally};

/// Who wrote a cell, as far as can be told.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CellOwner {
    /// The owner id (the column; for a queue cell of the thesis' layout,
    /// the column's suffix).
    pub owner: String,
    /// The lockshift node in the owner id, if it has lockshift's shape.
    pub node: Option<String>,
    /// Whether that node is in the registry now (any process of it).
    pub registered: bool,
    /// Whether the owner's own process — its node id *and* incarnation —
    /// is in the registry now. A row of a build that predates incarnations
    /// cannot be told apart from its node id's other processes, so it
    /// counts for every owner of that node id here (the cautious reading:
    /// a live owner's cells are kept).
    pub process_live: bool,
    /// The lease the owner's own process announced in its registry row;
    /// `None` when that process has no row, did not say, or has a row of a
    /// build that predates incarnations (whose promise may be another
    /// process's).
    pub promise: Option<LeasePromise>,
    /// The owner's own process's clock reading, from the same registry
    /// row as `promise` (`None` when that process has no row or reports
    /// none): the cell's write time is on the owner's clock, and this
    /// says how that clock stood against the database's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockReading>,
    /// The algorithm the value names; `None` for a foreign value (an old
    /// binary).
    pub algorithm: Option<Algorithm>,
    /// A waiter's reservation (waiting, not holding): a queue waiter's in
    /// `main`, or a queue or combined waiter's reserved behind the waiter
    /// ahead (in `main`, and for combined also in `shadow`), or a shared
    /// acquisition's standing cell (docs/design.md §3a).
    pub reserved: bool,
    /// How the acquisition shares the lock (docs/design.md §3a): `exclusive`
    /// for a plain lock (and every cell not lockshift's), `shared` for a
    /// reader, `permits=N` for a semaphore's permit.
    pub sharing: Sharing,
}

impl CellOwner {
    /// Whether the cell is evidence of the legacy algorithm: written by
    /// lockshift's legacy mode or by something that is not lockshift.
    pub fn is_legacy_activity(&self) -> bool {
        matches!(self.algorithm, None | Some(Algorithm::Legacy))
    }
}

/// One cell as the census saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CensusCell {
    /// The table.
    #[serde(serialize_with = "serialize_table")]
    pub table: Table,
    /// The lock (row key).
    pub lock: String,
    /// The column.
    pub column: String,
    /// Who wrote it.
    pub owner: CellOwner,
    /// Its write time.
    pub writetime: Timestamp,
    /// Time since it was last written (renewed), on the database's clock:
    /// the writer's time and the observer's each taken to the database's
    /// by its own clock reading (`offset::age`; a side without one is
    /// taken at its word: [`Age::shown`](crate::offset::Age::shown)).
    pub age: Duration,
    /// The least `age` can be: the writer's reading and the observer's
    /// at their errors' worst, and the `rollout.clock_skew_margin` for a
    /// side without a reading. Whatever deletes or writes a cell off
    /// (stale, lease over, `migrate clean`) judges by this one.
    pub least_age: Duration,
    /// TTL left, if any.
    pub ttl_left: Option<Duration>,
    /// Queue cells: the position among the lock's live queue cells (0 = head).
    pub queue_position: Option<usize>,
    /// Queue cells: when the waiter arrived (µs, by the time service).
    pub queued_at: Option<u64>,
    /// Not renewed for longer than the staleness threshold.
    pub stale: bool,
    /// Its lease is over by its owner's own promise (judged when the census
    /// is taken, by the lease rules): not
    /// renewed for longer than the cell's guaranteed life, allowing for the
    /// clock skew margin, so its owner has been told it lost the lock. It
    /// stands because a write of its lease landed late (L5) or its owner
    /// could not delete it; nobody holds or waits through it, and it keeps
    /// others waiting until it expires (or `migrate clean` deletes it).
    /// Always `false` when the owner's process has no registry row: only
    /// its own promise can tell.
    pub lease_over: bool,
}

fn serialize_table<S: serde::Serializer>(t: &Table, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(t.name())
}

/// Everything the census found: totals over every cell ([`Tally`]), and
/// the cells kept whole — those the census's taker asked for (`migrate
/// clean` its candidates, a test every cell), by table, lock, column.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Census {
    /// Totals over every cell of `main`, `shadow` and `queue`.
    #[serde(skip)]
    pub tally: Tally,
    /// The cells kept whole. The methods below range over these alone.
    pub cells: Vec<CensusCell>,
    /// When the census was taken.
    pub taken_at: Timestamp,
    /// The census taker's clock against the database's, when it could be
    /// read: what its `now` is turned into the database's time by.
    #[serde(skip)]
    pub reader: Option<ClockReading>,
    /// Rows the database refused to read, by table and lock: their cells
    /// are not in `cells`, so whatever a guard concludes from the census
    /// does not hold for these locks.
    pub unreadable: Vec<UnreadableRow>,
    /// Rows whose read passed many tombstones (more than Cassandra's
    /// warning threshold), by table and lock: readable now, but heading for
    /// the refusal (docs/design.md §2a, "The bound").
    pub tombstone_heavy: Vec<TombstoneHeavyRow>,
    /// The requests the census sent, by table and by the datacenter that
    /// coordinated them, sorted: they grow with token ranges, pages and
    /// home datacenters, never with locks (docs/design.md §6a).
    pub requests: Vec<CensusRequests>,
}

/// How many requests a census sent to read one table, coordinated where.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct CensusRequests {
    /// The table.
    #[serde(serialize_with = "serialize_table")]
    pub table: Table,
    /// The datacenter that coordinated them (`LOCAL_QUORUM` there);
    /// `None`: the store's default route (no home names a datacenter).
    pub datacenter: Option<Datacenter>,
    /// Pages of scans and reads of single rows.
    pub requests: u64,
}

impl Census {
    /// Every request the census sent.
    pub fn requests_total(&self) -> u64 {
        self.requests.iter().map(|r| r.requests).sum()
    }

    /// The requests the census sent by datacenter (all tables), in the
    /// order of [`Census::requests`]: the default route first, then by
    /// name.
    pub fn requests_by_datacenter(&self) -> Vec<(Option<Datacenter>, u64)> {
        let mut by: BTreeMap<Option<Datacenter>, u64> = BTreeMap::new();
        for r in &self.requests {
            *by.entry(r.datacenter.clone()).or_default() += r.requests;
        }
        by.into_iter().collect()
    }
}

/// A lock's row in one table whose read passed many tombstones: one per
/// name that wrote to it and is gone since less than the table's gc
/// grace — with lockshift's names, about one per *process* that took the
/// lock in that window (docs/design.md §2a).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TombstoneHeavyRow {
    /// The table.
    #[serde(serialize_with = "serialize_table")]
    pub table: Table,
    /// The lock (row key).
    pub lock: String,
    /// The tombstones the census's read of the row passed.
    pub tombstones: u64,
}

impl TombstoneHeavyRow {
    /// `lock "jobs" (table queue): a read passes 1517 tombstones`.
    pub fn describe(&self) -> String {
        format!(
            "lock {:?} (table {}): a read passes {} tombstones",
            cut_short(&self.lock),
            self.table,
            self.tombstones
        )
    }
}

/// A lock's row in one table that the database refused to read (more
/// tombstones than its failure threshold): the census went on without it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UnreadableRow {
    /// The table.
    #[serde(serialize_with = "serialize_table")]
    pub table: Table,
    /// The lock (row key); `None` when the table's key scan was refused,
    /// which cannot say whose row it met.
    pub lock: Option<String>,
    /// What the database answered (the store error, cut short).
    pub reason: String,
}

impl UnreadableRow {
    /// The row's lock and table, cut short, with the reason:
    /// `lock "jobs" (table queue): read on table queue failed: …`.
    pub fn describe(&self) -> String {
        match &self.lock {
            Some(lock) => format!(
                "lock {:?} (table {}): {}",
                cut_short(lock),
                self.table,
                self.reason
            ),
            None => format!(
                "a lock the key scan of table {} cannot name (its rows were read for the locks \
                 other tables name): {}",
                self.table, self.reason
            ),
        }
    }
}

impl Census {
    /// Adds one lock's row of `table` to the tally, keeping the cells
    /// `keep` asks for whole (`main`'s rows before `queue`'s: [`Tally`]).
    pub fn add_row(
        &mut self,
        table: Table,
        cells: Vec<CensusCell>,
        keep: &dyn Fn(&CensusCell) -> bool,
    ) {
        self.tally.add_row(table, &cells);
        self.cells.extend(cells.into_iter().filter(|c| keep(c)));
    }

    /// Kept cells of `table`.
    pub fn kept_in_table(&self, table: Table) -> impl Iterator<Item = &CensusCell> {
        self.cells.iter().filter(move |c| c.table == table)
    }

    /// Kept holders in `main` (reservations of queue waiters excluded).
    pub fn kept_held(&self) -> impl Iterator<Item = &CensusCell> {
        self.kept_in_table(schema::MAIN)
            .filter(|c| !c.owner.reserved)
    }

    /// Kept queue cells of waiters, with the oldest first (see [`waiters`]).
    pub fn kept_waiting(&self) -> Vec<&CensusCell> {
        let mut w = waiters(&self.cells);
        w.sort_by_key(|c| std::cmp::Reverse(c.age));
        w
    }

    /// Kept cells in `main` or `shadow` that are evidence of legacy activity now.
    pub fn kept_legacy_activity(&self) -> impl Iterator<Item = &CensusCell> {
        self.cells
            .iter()
            .filter(|c| c.table != schema::QUEUE && c.owner.is_legacy_activity())
    }

    /// Kept cells in `main` held by `algorithm`.
    pub fn kept_held_by(&self, algorithm: Algorithm) -> impl Iterator<Item = &CensusCell> {
        self.kept_held()
            .filter(move |c| c.owner.algorithm == Some(algorithm))
    }

    /// Kept stale cells.
    pub fn kept_stale(&self) -> impl Iterator<Item = &CensusCell> {
        self.cells.iter().filter(|c| c.stale)
    }
}

/// What counts as stale: waiters' cells (queue cells and reservations,
/// rewritten every `lock.queue.waiting_renew_every`) and holdings (renewed
/// every `lock.renew_every`) are judged each by their own period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Staleness {
    /// Waiters' cells not rewritten for longer than this are stale (the
    /// threshold waiters skip queue cells by, `lock.queue.stale_after`).
    pub waiting: Duration,
    /// Holdings (and cells of binaries that predate lockshift) not renewed
    /// for longer than this are stale.
    pub holding: Duration,
}

/// How many renewal periods a cell may miss before it looks dead.
pub const MISSED_RENEWALS: u32 = 3;

/// When a cell rewritten every `renew_every` looks dead: after
/// [`MISSED_RENEWALS`] periods without a rewrite (saturating). The rule
/// for holdings (renewed every `lock.renew_every`) and, unless
/// `lock.queue.stale_after` says otherwise, for waiters' cells (rewritten
/// every `lock.queue.waiting_renew_every`).
pub fn stale_after_renewals(renew_every: Duration) -> Duration {
    renew_every.saturating_mul(MISSED_RENEWALS)
}

impl Staleness {
    /// The fleet's thresholds: `waiting` for waiters' cells (the queue
    /// lock's stale-waiter threshold in effect), and for holdings
    /// [`stale_after_renewals`] of `renew_every` (`lock.renew_every`).
    pub fn of_fleet(waiting: Duration, renew_every: Duration) -> Staleness {
        Staleness {
            waiting,
            holding: stale_after_renewals(renew_every),
        }
    }

    /// One threshold for every cell.
    pub fn uniform(after: Duration) -> Staleness {
        Staleness {
            waiting: after,
            holding: after,
        }
    }

    /// The threshold for a cell of `table` written by `owner`.
    pub fn for_cell(&self, table: Table, owner: &CellOwner) -> Duration {
        if table == schema::QUEUE || owner.reserved {
            self.waiting
        } else {
            self.holding
        }
    }
}

/// Whether a cell not renewed for at least `least_age` in the database's
/// time ([`CensusCell::least_age`]: the owner's clock and the observer's
/// each allowed for by its reading, or by `rollout.clock_skew_margin`
/// where it has none), with `ttl_left`, has outlived the lease its owner
/// promised: older than the cell's guaranteed life (`ttl − 1 s − skew
/// allowance`, lock invariant L3, [`LeasePromise::guaranteed_life`]).
/// Its owner has then been told it lost the lock (lease invariant L3).
/// `None` promise: unknown, `false`. An owner minutes off the database's
/// clock whose reading says so is judged by its reading (design §4b, C1):
/// a renewing holder at −120 s is not over.
///
/// A cell with more TTL left than the promised TTL (in the whole seconds
/// it was written as) was written with a longer TTL than the promise says:
/// the row understates this cell's lease (a config edited since, a bug, a
/// hand-written row) and cannot tell when it ends — `false`. A late write
/// of the promised lease itself (L5) never has more left than its TTL, so
/// it is still told apart. (A row that understates by less shows no such
/// sign; `migrate clean`'s second look, which waits for the longer of the
/// row's renewal period and the cell's own TTL, keeps that owner's cell:
/// `lockshift_decide::clean`.)
pub fn lease_over(
    least_age: Duration,
    ttl_left: Option<Duration>,
    promise: Option<LeasePromise>,
) -> bool {
    let Some(promise) = promise else {
        return false;
    };
    // The TTL the promise's cells are written with: whole seconds, up.
    let written = crate::cell::Ttl::from_duration(promise.ttl()).map(|t| t.as_duration());
    if let (Some(left), Ok(written)) = (ttl_left, written)
        && left > written
    {
        return false;
    }
    promise
        .guaranteed_life()
        .is_some_and(|life| least_age > life)
}

/// The live queue cells among `cells` whose owner does not hold its lock:
/// the waiters. A holder leaves the queue once it holds (its queue cell is
/// deleted right after its verifying read), but until that delete lands —
/// and for holders that predate that rule, which keep their queue cell at
/// the head for the whole hold — a holder's queue cell is in the queue too;
/// it is told apart by its owner's holding (not reserved) `main` cell.
pub fn waiters(cells: &[CensusCell]) -> Vec<&CensusCell> {
    let holders: BTreeSet<(&str, &str)> = cells
        .iter()
        .filter(|c| c.table == schema::MAIN && !c.owner.reserved)
        .map(|c| (c.lock.as_str(), c.owner.owner.as_str()))
        .collect();
    cells
        .iter()
        .filter(|c| {
            c.table == schema::QUEUE
                && c.queue_position.is_some()
                && !holders.contains(&(c.lock.as_str(), c.owner.owner.as_str()))
        })
        .collect()
}

/// Counts per algorithm of `main` holders (`None`: foreign), over every
/// cell the census saw.
pub fn holders_by_algorithm(census: &Census) -> BTreeMap<Option<Algorithm>, usize> {
    census.tally.held_by.clone()
}
