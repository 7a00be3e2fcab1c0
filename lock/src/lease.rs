//! Leases (thesis §5.3): every cell an acquisition writes carries a TTL, is
//! rewritten in the background, is removed on release — and the holder is told
//! the moment the lease can no longer be proven.
//!
//! A [`Lease`] is created when an acquisition starts (waiters' queue cells need
//! renewing too) and moves into the [`LockGuard`](crate::LockGuard) on success.
//! All of an acquisition's writes and deletes go through it, so it knows every
//! cell to renew and to remove, whichever algorithm wrote them.
//!
//! # Invariants
//!
//! - **L1. Stamps increase.** Every write and delete of one lease carries a
//!   timestamp greater than all earlier ones of that lease — and of every
//!   earlier lease of the same context — even if the clock steps back, so
//!   the release's delete always beats the last renewal, and the next
//!   acquisition in the same slot (K1) beats both.
//! - **L2. No resurrection.** A renewal rewrites a cell only after a read shows
//!   it still there, and never after its deletion was stamped: a renewal whose
//!   stamp precedes a delete's loses to it by L1; one that would follow it is
//!   not sent. So a lease never brings back a cell that expired, was deleted by
//!   its owner, or was cleaned by an operator.
//! - **L3. Told before the TTL.** A cell's lease counts from the moment its
//!   last successful write was *sent*. The store applied it no earlier, but
//!   Cassandra counts TTLs in whole seconds (expiry = the end of the applying
//!   second + ttl, on the coordinator's clock), so the cell is only sure to
//!   live until `sent + ttl − 1 s − TTL_SKEW_ALLOWANCE`
//!   ([`LeaseSettings::guaranteed_life`]). The lost signal fires once that
//!   moment is older than `lost_after_fraction × ttl`, which settings
//!   validation keeps strictly below that guaranteed life — or as soon as a
//!   renewal finds the cell gone. It is a [`CancellationToken`]: once fired
//!   it stays fired.
//! - **L4. Clean exit.** Dropping a lease that was not released stops its
//!   renewals and removes its cells in the background (best effort; the TTL
//!   removes them otherwise). Its slot is given back once its cells are
//!   gone: at once after acknowledged deletes, a TTL (plus a second and the
//!   skew allowance) later otherwise (K1).
//! - **L5. Late writes hold nothing.** L2 cannot stop a write already sent:
//!   one the store answered with a timeout may still be applied later — a
//!   client cannot bound how much later — with its TTL counted from then,
//!   so a renewal in flight when the lease is lost can bring its cell back
//!   after the loss, beside the next holder, for up to one TTL after it
//!   lands. On Cassandra's semantics no client can rule that out: only a
//!   delete stamped above the write shadows it, and the owner that lost
//!   its lease is typically the one that cannot reach the store (anyone
//!   else stamping that high could bury a live holder's renewal). So it is
//!   bounded instead. The owner was told (L3) and never renews again, so
//!   the cell holds nothing and only keeps others waiting. Release and drop
//!   delete above every stamp the lease sent (L1): once any such delete
//!   lands, the late write is shadowed whenever it arrives. The slot's next
//!   acquisition writes above it (K1), and the legacy entry never takes it
//!   for its own holding (legacy G3). `migrate status` and `inspect` mark
//!   it *lease over* (by its process's own promise it has outlived its
//!   guaranteed life) and `migrate clean` deletes it without `--force`
//!   (docs/design.md §5). The one landing L5 does not cover is for an owner
//!   not yet told: when `migrate clean --force` deleted the cell of an
//!   owner with a renewal in flight, the renewal brings it back and the
//!   lease, finding its cell, renews on — what `--force` risks, and why it
//!   is only for owners known dead.
//! - **L6. Waiting cells live briefly.** A lease started with
//!   [`WaitingTerms`] writes its cells with the waiting TTL (seconds, not a
//!   lease TTL) and rewrites them every waiting renewal period, until
//!   [`start_holding`](Lease::start_holding): from then on every cell
//!   carries the lease TTL, and the cells still under the waiting TTL are
//!   rewritten with it at once. A cell written with
//!   [`write_holding`](Lease::write_holding) carries the lease TTL from the
//!   start. L3 holds per cell: each cell's proof counts against
//!   `lost_after_fraction ×` the TTL its proven write carried, which
//!   settings validation keeps below that TTL's guaranteed life. So a
//!   waiter killed while it waits leaves cells that expire within the
//!   waiting TTL, whatever the lease TTL (why others may then go ahead:
//!   docs/design.md §2, DW1).
//!
//! # Refreshes that ride on the waiter's own reads (L2)
//!
//! A waiter reads its own rows all the time (its place in the queue, `main`
//! while it is next). [`read_mark`](Lease::read_mark) taken before such a
//! read and [`refresh_seen`](Lease::refresh_seen) after it, when the read
//! showed the cell, rewrite a waiting cell without a read of its own: the
//! waiter's read *is* the read L2 asks for. It started after every write
//! and delete this lease made of the cell (the mark records the cell's
//! generation, and any write or delete of the lease since changes it, which
//! cancels the refresh), it showed the cell present, and the rewrite is
//! sent right after — exactly the order of a renewal's own read and write.
//! Between the read and the rewrite the cell can only vanish the ways it
//! can between a renewal's read and write: an operator's `clean`, whose
//! delete a renewal racing it was always allowed to beat (`migrate clean`,
//! M2), or expiry, which L3 rules out while the lease is proven (a refresh
//! is sent only then). The background renewal covers what the waiter does
//! not read, at the waiting period; a cell refreshed by reads is never due
//! there.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::future::join_all;
use lockshift_store::{
    CellWrite, RowQuery, SharedClock, SharedStore, StoreError, Table, Timestamp, Ttl, WriteOptions,
    schema,
};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span, warn};

use crate::cells::FENCE_COLUMN;
use crate::error::LeaseLostReason;
use crate::id::{LockId, OwnerId};
use crate::settings::{LeaseSettings, TTL_SKEW_ALLOWANCE};
use crate::slots::Slot;

/// How many times `release` retries a transient delete failure before
/// leaving the cells to their TTL.
const RELEASE_ATTEMPTS: u32 = 3;

/// How a waiter's cells live while it waits (L6): a TTL of a few seconds,
/// rewritten every `renew_every` — so a waiter killed while it waits holds
/// nobody up for longer than `ttl`. Settings validation (`lock.queue`)
/// keeps `lost_after_fraction × ttl` below the TTL's guaranteed life and
/// above `renew_every`, as for the lease TTL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitingTerms {
    /// The TTL of every cell written while waiting.
    pub ttl: Ttl,
    /// How often a waiting cell is rewritten (by the waiter's own reads,
    /// see the module docs, or else by the background renewal).
    pub renew_every: Duration,
}

/// Which TTL a cell's writes carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Term {
    /// The waiting TTL (L6).
    Waiting,
    /// The lease TTL.
    Holding,
}

/// A successful write: when it was sent, and which TTL it carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Proof {
    sent: Instant,
    term: Term,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CellState {
    /// Written (or being written); `proven` is the last successful write,
    /// `None` until one succeeds.
    Live { proven: Option<Proof> },
    /// Its delete has been stamped: no longer renewed (L2), not part of the
    /// lease's validity.
    Deleting,
}

#[derive(Debug, Clone)]
struct LeaseCell {
    value: Vec<u8>,
    state: CellState,
    /// The TTL the cell's next writes carry.
    term: Term,
    /// Changes with every write or delete this lease stamps on the cell:
    /// a refresh riding on a read is sent only if none came in between.
    generation: u64,
    /// A background rewrite (refresh, promotion) is in flight: the renewal
    /// leaves the cell alone meanwhile.
    in_flight: bool,
}

impl LeaseCell {
    fn new(value: &[u8], term: Term) -> Self {
        LeaseCell {
            value: value.to_vec(),
            state: CellState::Live { proven: None },
            term,
            generation: 0,
            in_flight: false,
        }
    }

    fn proof(&self) -> Option<Proof> {
        match self.state {
            CellState::Live { proven } => proven,
            CellState::Deleting => None,
        }
    }
}

/// A waiter's note, taken just before it reads a row its cell is in, of
/// the cell as this lease last wrote it ([`Lease::read_mark`]).
#[derive(Debug, Clone)]
pub struct ReadMark {
    table: Table,
    column: String,
    generation: u64,
}

#[derive(Debug)]
struct State {
    cells: BTreeMap<(Table, String), LeaseCell>,
    last_stamp: i64,
    lost: Option<LeaseLostReason>,
    /// Waiting (L6): new cells take the waiting TTL.
    waiting: bool,
}

#[derive(Debug)]
struct Shared {
    store: SharedStore,
    clock: SharedClock,
    ttl: Ttl,
    /// The terms of the waiting phase, if the lease started in it.
    waiting: Option<WaitingTerms>,
    settings: LeaseSettings,
    lock: LockId,
    owner: OwnerId,
    /// This acquisition among those of its slot (see [`Lease::mark`]).
    mark: Option<String>,
    algorithm: &'static str,
    state: Mutex<State>,
    lost: CancellationToken,
    /// The slot the cells are written under, given back once they are gone.
    slot: Mutex<Option<Slot>>,
    /// The last stamp of any lease of the context (L1).
    stamps: Arc<AtomicI64>,
}

/// The cells one acquisition wrote, kept alive in the background.
///
/// Created by a locker at the start of an acquisition; see the module docs.
pub struct Lease {
    shared: Arc<Shared>,
    stop: CancellationToken,
    renewer: Option<JoinHandle<()>>,
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("lock", &self.shared.lock)
            .field("owner", &self.shared.owner)
            .field("algorithm", &self.shared.algorithm)
            .field("lost", &self.shared.lost.is_cancelled())
            .finish()
    }
}

impl Lease {
    /// Starts a lease for `owner` on `lock`: nothing is written yet, the
    /// renewal task is spawned and renews whatever cells get written.
    ///
    /// # Panics
    /// Outside a tokio runtime (it spawns the renewal task).
    pub fn start(
        store: SharedStore,
        clock: SharedClock,
        settings: LeaseSettings,
        ttl: Ttl,
        lock: LockId,
        owner: OwnerId,
        algorithm: &'static str,
    ) -> Lease {
        Self::spawn(Shared {
            store,
            clock,
            ttl,
            waiting: None,
            settings,
            lock,
            owner,
            mark: None,
            algorithm,
            state: Mutex::new(State {
                cells: BTreeMap::new(),
                last_stamp: i64::MIN,
                lost: None,
                waiting: false,
            }),
            lost: CancellationToken::new(),
            slot: Mutex::new(None),
            stamps: Arc::new(AtomicI64::new(i64::MIN)),
        })
    }

    /// As [`start`](Self::start), writing under `slot` (its lock and owner
    /// id) with stamps above every earlier one in `stamps` (L1), and
    /// giving the slot back once the cells are gone (L4, K1). With
    /// `waiting`, the lease starts in the waiting phase (L6).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    #[allow(clippy::too_many_arguments)]
    pub fn start_in_slot(
        store: SharedStore,
        clock: SharedClock,
        settings: LeaseSettings,
        ttl: Ttl,
        slot: Slot,
        algorithm: &'static str,
        mark: Option<String>,
        stamps: Arc<AtomicI64>,
        waiting: Option<WaitingTerms>,
    ) -> Lease {
        Self::spawn(Shared {
            store,
            clock,
            ttl,
            waiting,
            settings,
            lock: slot.lock().clone(),
            owner: slot.owner().clone(),
            mark,
            algorithm,
            state: Mutex::new(State {
                cells: BTreeMap::new(),
                last_stamp: i64::MIN,
                lost: None,
                waiting: waiting.is_some(),
            }),
            lost: CancellationToken::new(),
            slot: Mutex::new(Some(slot)),
            stamps,
        })
    }

    fn spawn(shared: Shared) -> Lease {
        let shared = Arc::new(shared);
        let stop = CancellationToken::new();
        let span = info_span!("lease", lock = %shared.lock, owner = %shared.owner, algorithm = shared.algorithm);
        let renewer = tokio::spawn(renew_loop(shared.clone(), stop.clone()).instrument(span));
        Lease {
            shared,
            stop,
            renewer: Some(renewer),
        }
    }

    /// The lock.
    pub fn lock(&self) -> &LockId {
        &self.shared.lock
    }

    /// The owner.
    pub fn owner(&self) -> &OwnerId {
        &self.shared.owner
    }

    /// What names this acquisition apart from others of the same owner id
    /// (they follow one another in one slot, K1): the waiter's mark in the
    /// queue, which a reservation behind it names (Q6). The owner id when
    /// none was given.
    pub fn mark(&self) -> &str {
        self.shared
            .mark
            .as_deref()
            .unwrap_or(self.shared.owner.as_str())
    }

    /// The lease TTL: what every cell carries once the lease holds (L6).
    pub fn ttl(&self) -> Ttl {
        self.shared.ttl
    }

    /// Whether the lease is still in its waiting phase (L6).
    pub fn is_waiting(&self) -> bool {
        self.shared.state().waiting
    }

    /// The one-way lost signal (L3).
    pub fn lost_token(&self) -> CancellationToken {
        self.shared.lost.clone()
    }

    /// Why the lease was lost, once it was.
    pub fn lost_reason(&self) -> Option<LeaseLostReason> {
        self.shared.state().lost.clone()
    }

    /// A timestamp for the next operation (L1).
    pub fn stamp(&self) -> Timestamp {
        self.shared.stamp(&mut self.shared.state())
    }

    /// Writes the cell `column` of this lock's row in `table` with the lease's
    /// TTL, and renews it from then on.
    ///
    /// # Errors
    /// The store error. The cell stays registered either way, so a write that
    /// may have been applied is still removed on release.
    ///
    /// # Cancel safety
    /// If dropped, the write may or may not land; the cell stays registered
    /// and is removed on release.
    pub async fn write(&self, table: Table, column: &str, value: &[u8]) -> Result<(), StoreError> {
        self.write_with(table, column, value, None).await
    }

    /// As [`write`](Self::write), with the lease TTL even while waiting
    /// (L6): for a cell that is the holding itself if the attempt succeeds
    /// — and is removed at once if it does not — so that taking the lock
    /// needs no rewrite of it.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    ///
    /// # Cancel safety
    /// As [`write`](Self::write).
    pub async fn write_holding(
        &self,
        table: Table,
        column: &str,
        value: &[u8],
    ) -> Result<(), StoreError> {
        self.write_with(table, column, value, Some(Term::Holding))
            .await
    }

    async fn write_with(
        &self,
        table: Table,
        column: &str,
        value: &[u8],
        term: Option<Term>,
    ) -> Result<(), StoreError> {
        let (stamp, term) = {
            let mut st = self.shared.state();
            let term = term.unwrap_or(if st.waiting {
                Term::Waiting
            } else {
                Term::Holding
            });
            let entry = st
                .cells
                .entry((table, column.to_string()))
                .or_insert_with(|| LeaseCell::new(value, term));
            entry.value = value.to_vec();
            entry.term = term;
            entry.generation += 1;
            if entry.state == CellState::Deleting {
                entry.state = CellState::Live { proven: None };
            }
            (self.shared.stamp(&mut st), term)
        };
        let sent = Instant::now();
        let result = self
            .shared
            .store
            .write(
                table,
                self.shared.lock.as_str(),
                &[CellWrite::new(column, value.to_vec())],
                WriteOptions::at(stamp).with_ttl(self.shared.ttl_of(term)),
            )
            .await;
        if result.is_ok() {
            self.shared.mark_proven(table, column, sent, term);
        }
        result
    }

    /// Deletes the cell `column` of this lock's row in `table` and stops
    /// renewing it.
    ///
    /// # Errors
    /// The store error; the cell then stays registered for release to retry.
    pub async fn delete(&self, table: Table, column: &str) -> Result<(), StoreError> {
        let stamp = {
            let mut st = self.shared.state();
            if let Some(cell) = st.cells.get_mut(&(table, column.to_string())) {
                // L2: from here on the renewer leaves this cell alone.
                cell.state = CellState::Deleting;
                cell.generation += 1;
            }
            self.shared.stamp(&mut st)
        };
        let result = self
            .shared
            .store
            .delete(
                table,
                self.shared.lock.as_str(),
                &[column.to_string()],
                stamp,
            )
            .await;
        if result.is_ok() {
            let mut st = self.shared.state();
            let key = (table, column.to_string());
            if st
                .cells
                .get(&key)
                .is_some_and(|c| c.state == CellState::Deleting)
            {
                st.cells.remove(&key);
            }
        }
        result
    }

    /// Columns of `table` this lease wrote and has not yet deleted for sure
    /// (including cells whose write or delete failed in an unknown way).
    pub fn columns_in(&self, table: Table) -> Vec<String> {
        self.shared
            .state()
            .cells
            .keys()
            .filter(|(t, _)| *t == table)
            .map(|(_, c)| c.clone())
            .collect()
    }

    /// Deletes every cell this lease still has in `table`: the tidy-up after a
    /// step failed in an unknown way. No round trip when there is none.
    ///
    /// # Errors
    /// The first store error; the cells stay registered.
    pub async fn delete_all_in(&self, table: Table) -> Result<(), StoreError> {
        for column in self.columns_in(table) {
            self.delete(table, &column).await?;
        }
        Ok(())
    }

    /// Whether the lease is still proven now: not lost, and every live cell's
    /// last successful write was sent less than `lost_after` ago (for a
    /// write under the waiting TTL, `lost_after_fraction ×` that TTL: L6). Lockers call
    /// it just before `acquire` returns (a lesson from etcd's bug tracker: the
    /// lease can run out while an acquisition is slow).
    ///
    /// It reads the clock itself, so it is right even when the renewal task
    /// has not run — a process paused longer than the limit (GC, a blocked
    /// runtime, SIGSTOP) learns on its first check after resuming, not when
    /// the watchdog gets scheduled. An overdue lease is declared lost here
    /// (L3: the signal fires and stays fired).
    ///
    /// # Errors
    /// The reason it is not.
    pub fn check_valid(&self) -> Result<(), LeaseLostReason> {
        let overdue = {
            let st = self.shared.state();
            if let Some(reason) = &st.lost {
                return Err(reason.clone());
            }
            self.shared.overdue(&st, Instant::now())
        };
        match overdue {
            Some(reason) => {
                self.shared.declare_lost(reason.clone());
                Err(reason)
            }
            None => Ok(()),
        }
    }

    /// Takes the next fencing token of the lock: reads the lock's fencing
    /// cell, advances it to `max(last + 1, now in µs)` — as the value and as
    /// the write timestamp, so the cell never moves back — and checks the
    /// lease is still proven once the write is acknowledged. Two round
    /// trips. The caller must hold the lock (the argument in
    /// [`crate::LockGuard::fencing_token`] rests on it).
    ///
    /// A store failure that may pass ([`lockshift_store::StoreError::is_retryable`]) is
    /// retried, with pauses doubling from [`FENCE_RETRY_FIRST`] up to a
    /// quarter of the renew period, for as long as the lease is proven and
    /// at most one lease TTL: a token is worth having only while the lock
    /// is held, so the lease, not a count, bounds the retries — and the TTL
    /// bounds them too when only the fencing cell's partition is out of
    /// reach while renewals still succeed.
    ///
    /// # Why repeating the fence write is safe
    ///
    /// A write that failed as `MaybeApplied` may land now or later, and is
    /// never blindly repeated elsewhere in lockshift. This one may be: the
    /// fencing cell's value *is* its write timestamp, and every write
    /// carries `max(last + 1, now)`, so a write that lands — once, twice,
    /// late — can only move the cell to a larger timestamp (last write
    /// wins), never below a token already handed out. The retry reads the
    /// cell again, so its own token is above whatever landed before that
    /// read; a lost attempt that lands after the retry's read merely raises
    /// the cell above a token nobody was given, which the next holder reads
    /// and exceeds. The guarantee the token rests on — the cell is at least
    /// every token handed out, before the next holder can read it — holds
    /// whatever subset of the attempts applied.
    ///
    /// # Errors
    /// A store error that retrying cannot fix, or the reason the lease was
    /// lost (also when it was lost while retrying).
    pub(crate) async fn next_fencing_token(&self) -> Result<u64, FenceFailure> {
        let cap = (self.shared.settings.renew_every / 4).max(FENCE_RETRY_FIRST);
        let give_up_at = Instant::now() + self.shared.settings.lease_ttl;
        let mut pause = FENCE_RETRY_FIRST;
        loop {
            match self.try_fencing_token().await {
                Err(FenceFailure::Store(e)) if e.is_retryable() && Instant::now() < give_up_at => {
                    self.check_valid().map_err(FenceFailure::Lost)?;
                    debug!(lock = %self.shared.lock, error = %e, ?pause, "fencing token: store failure, retrying within the lease");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(cap);
                    self.check_valid().map_err(FenceFailure::Lost)?;
                }
                other => return other,
            }
        }
    }

    /// One attempt of [`next_fencing_token`](Self::next_fencing_token):
    /// read, advance, check the lease.
    async fn try_fencing_token(&self) -> Result<u64, FenceFailure> {
        let row = self.shared.lock.as_str();
        let cells = self
            .shared
            .store
            .read(
                schema::GLOBAL_TIME,
                row,
                &RowQuery::first(1).starting_at(FENCE_COLUMN),
            )
            .await
            .map_err(FenceFailure::Store)?;
        let last = cells
            .iter()
            .find(|c| c.column == FENCE_COLUMN)
            .map_or(0, |c| c.writetime.as_micros());
        let token = last
            .saturating_add(1)
            .max(self.shared.clock.now().as_micros())
            .max(1);
        self.shared
            .store
            .write(
                schema::GLOBAL_TIME,
                row,
                &[CellWrite::new(FENCE_COLUMN, token.to_string().into_bytes())],
                WriteOptions::at(Timestamp::from_micros(token)),
            )
            .await
            .map_err(FenceFailure::Store)?;
        self.check_valid().map_err(FenceFailure::Lost)?;
        // `token` ≥ 1 by construction, so the conversion cannot fail.
        Ok(u64::try_from(token).unwrap_or(1))
    }

    /// Changes the value of a cell this lease holds, without waiting: the
    /// registered value changes at once (renewals write it from now on) and
    /// one write goes out in the background. Nothing happens if the cell is
    /// not live — a cell being deleted is never written again (L2), and the
    /// write's stamp precedes any later delete's (L1).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn rewrite_in_background(&self, table: Table, column: &str, value: &[u8]) {
        let job = {
            let mut st = self.shared.state();
            match st.cells.get_mut(&(table, column.to_string())) {
                Some(cell) if matches!(cell.state, CellState::Live { .. }) => {
                    cell.value = value.to_vec()
                }
                _ => return,
            }
            self.shared.rewrite_job(&mut st, table, column)
        };
        if let Some(job) = job {
            tokio::spawn(self.shared.clone().rewrite(job));
        }
    }

    /// The acquisition holds the lock now (L6): the lease leaves its
    /// waiting phase, every later write carries the lease TTL, and each
    /// live cell still under the waiting TTL — or given a new value in
    /// `values` (a reservation re-marked a holding) — is rewritten with the
    /// lease TTL in the background, one write per cell. A cell written
    /// with [`write_holding`](Self::write_holding) and not re-marked costs
    /// nothing. Until a rewrite is acknowledged the cell's proof still
    /// counts against the waiting TTL (L3 per cell).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start_holding(&self, values: &[(Table, &str, &[u8])]) {
        let jobs = {
            let mut st = self.shared.state();
            st.waiting = false;
            let mut keys: Vec<(Table, String)> = Vec::new();
            for (table, column, value) in values {
                if let Some(cell) = st.cells.get_mut(&(*table, (*column).to_string()))
                    && matches!(cell.state, CellState::Live { .. })
                {
                    cell.value = value.to_vec();
                    keys.push((*table, (*column).to_string()));
                }
            }
            for (key, cell) in &st.cells {
                if matches!(cell.state, CellState::Live { .. })
                    && cell.term == Term::Waiting
                    && !keys.contains(key)
                {
                    keys.push(key.clone());
                }
            }
            let mut jobs = Vec::new();
            for (table, column) in keys {
                if let Some(cell) = st.cells.get_mut(&(table, column.clone())) {
                    cell.term = Term::Holding;
                }
                jobs.extend(self.shared.rewrite_job(&mut st, table, &column));
            }
            jobs
        };
        for job in jobs {
            tokio::spawn(self.shared.clone().rewrite(job));
        }
    }

    /// Notes `column` of `table` as this lease last wrote it, just before
    /// the waiter reads that row (see the module docs); `None` when there
    /// is nothing to refresh (not a waiting cell, not proven).
    pub fn read_mark(&self, table: Table, column: &str) -> Option<ReadMark> {
        let st = self.shared.state();
        let cell = st.cells.get(&(table, column.to_string()))?;
        (cell.term == Term::Waiting && cell.proof().is_some()).then(|| ReadMark {
            table,
            column: column.to_string(),
            generation: cell.generation,
        })
    }

    /// The read that followed `mark` showed the cell: rewrite it in the
    /// background if it is due — three quarters of the waiting renewal
    /// period since its last proof — and nothing of this lease touched it
    /// since the mark (L2, module docs). At most one such rewrite is in
    /// flight per cell.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn refresh_seen(&self, mark: ReadMark) {
        let Some(terms) = self.shared.waiting else {
            return;
        };
        let job = {
            let mut st = self.shared.state();
            if st.lost.is_some() {
                return;
            }
            let Some(cell) = st.cells.get(&(mark.table, mark.column.clone())) else {
                return;
            };
            let due = cell.proof().is_some_and(|p| {
                p.term == Term::Waiting
                    && p.sent.elapsed() >= terms.renew_every.mul_f64(0.75)
                    // L3: only while the cell is proven; an overdue lease is lost.
                    && p.sent.elapsed() < self.shared.lost_after_of(Term::Waiting)
            });
            if cell.generation != mark.generation
                || cell.term != Term::Waiting
                || cell.in_flight
                || !due
            {
                return;
            }
            self.shared.rewrite_job(&mut st, mark.table, &mark.column)
        };
        if let Some(job) = job {
            tokio::spawn(self.shared.clone().rewrite(job));
        }
    }

    /// Deletes a cell this lease holds, without waiting: the cell stops
    /// being renewed at once (L2: it is marked deleted before anything is
    /// sent) and one delete goes out in the background, stamped now, so it
    /// beats every earlier write of the lease (L1). If the delete fails the
    /// cell stays registered and the release deletes it again; unrenewed,
    /// it expires within a TTL anyway. Nothing happens for a cell the lease
    /// does not hold.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn delete_in_background(&self, table: Table, column: &str) {
        let stamp = {
            let mut st = self.shared.state();
            match st.cells.get_mut(&(table, column.to_string())) {
                Some(cell) => {
                    cell.state = CellState::Deleting;
                    cell.generation += 1;
                }
                None => return,
            }
            self.shared.stamp(&mut st)
        };
        let shared = self.shared.clone();
        let column = column.to_string();
        tokio::spawn(async move {
            let deleted = shared
                .store
                .delete(
                    table,
                    shared.lock.as_str(),
                    std::slice::from_ref(&column),
                    stamp,
                )
                .await;
            match deleted {
                Ok(()) => {
                    let mut st = shared.state();
                    let key = (table, column);
                    if st
                        .cells
                        .get(&key)
                        .is_some_and(|c| c.state == CellState::Deleting)
                    {
                        st.cells.remove(&key);
                    }
                }
                Err(e) => {
                    debug!(%table, column, error = %e, "background delete failed; the release deletes it again")
                }
            }
        });
    }

    /// Whether the cell is registered, live and proven.
    pub fn is_proven(&self, table: Table, column: &str) -> bool {
        self.shared
            .state()
            .cells
            .get(&(table, column.to_string()))
            .is_some_and(|c| c.proof().is_some())
    }

    /// Stops renewing and deletes every cell written, retrying transient
    /// failures a few times.
    ///
    /// # Errors
    /// The last store error if some cells could not be deleted; they expire
    /// within the TTL.
    ///
    /// # Cancel safety
    /// If dropped midway, the remaining cells are removed in the background
    /// (the lease's drop does it).
    pub async fn release(mut self) -> Result<(), StoreError> {
        self.stop_renewing().await;
        // Successful deletes unregister their cells, so Drop finds nothing
        // left unless a delete failed for good.
        let cells = self.shared.mark_all_deleting();
        let result = self.shared.delete_with_retries(cells).await;
        self.shared.give_slot_back(result.is_ok());
        result
    }

    async fn stop_renewing(&mut self) {
        self.stop.cancel();
        if let Some(task) = self.renewer.take() {
            // The task only ends by the stop token or after losing the lease;
            // a join error means it panicked, which it has no path to do.
            if let Err(e) = task.await {
                warn!(error = %e, "lease renewal task ended abnormally");
            }
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(task) = self.renewer.take() {
            task.abort();
        }
        let leftover = self.shared.mark_all_deleting();
        if leftover.is_empty() {
            self.shared.give_slot_back(true);
            return;
        }
        // L4: remove what is left in the background if a runtime is around.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            warn!(lock = %self.shared.lock, owner = %self.shared.owner,
                "lease dropped outside a tokio runtime; its cells expire by TTL");
            self.shared.give_slot_back(false);
            return;
        };
        let shared = self.shared.clone();
        runtime.spawn(async move {
            let result = shared.delete_with_retries(leftover).await;
            if let Err(e) = &result {
                warn!(lock = %shared.lock, owner = %shared.owner, error = %e,
                    "cleanup of a dropped lease failed; its cells expire by TTL");
            }
            shared.give_slot_back(result.is_ok());
        });
    }
}

impl Shared {
    /// Deletes `cells` — one delete per table, all at once, so a release
    /// costs one round trip — retrying transient failures a few times.
    async fn delete_with_retries(
        &self,
        mut cells: BTreeMap<Table, Vec<String>>,
    ) -> Result<(), StoreError> {
        let mut attempt = 0;
        loop {
            if cells.is_empty() {
                return Ok(());
            }
            let stamp = self.stamp(&mut self.state());
            let results = join_all(cells.iter().map(|(table, columns)| async move {
                (
                    *table,
                    self.store
                        .delete(*table, self.lock.as_str(), columns, stamp)
                        .await,
                )
            }))
            .await;
            let mut last_error = None;
            for (table, result) in results {
                match result {
                    Ok(()) => {
                        if let Some(columns) = cells.remove(&table) {
                            let mut st = self.state();
                            for c in columns {
                                st.cells.remove(&(table, c));
                            }
                        }
                    }
                    Err(e) => last_error = Some(e),
                }
            }
            match last_error {
                None => return Ok(()),
                Some(e) if e.is_retryable() && attempt + 1 < RELEASE_ATTEMPTS => {
                    debug!(error = %e, attempt, "delete failed, retrying");
                    tokio::time::sleep(Duration::from_millis(20 << attempt)).await;
                    attempt += 1;
                }
                Some(e) => return Err(e),
            }
        }
    }

    /// The TTL a write of `term` carries.
    fn ttl_of(&self, term: Term) -> Ttl {
        match (term, self.waiting) {
            (Term::Waiting, Some(w)) => w.ttl,
            _ => self.ttl,
        }
    }

    /// How long after a proof of `term` the lease counts as lost (L3).
    fn lost_after_of(&self, term: Term) -> Duration {
        match (term, self.waiting) {
            (Term::Waiting, Some(w)) => w
                .ttl
                .as_duration()
                .mul_f64(self.settings.lost_after_fraction.clamp(0.0, 1.0)),
            _ => self.settings.lost_after(),
        }
    }

    /// How often a cell of `term` is renewed.
    fn renew_every_of(&self, term: Term) -> Duration {
        match (term, self.waiting) {
            (Term::Waiting, Some(w)) => w.renew_every,
            _ => self.settings.renew_every,
        }
    }

    /// Stamps a background rewrite of the live cell `column` of `table`
    /// with its registered value and term; `None` if it is not live.
    fn rewrite_job(&self, st: &mut State, table: Table, column: &str) -> Option<Rewrite> {
        let cell = st.cells.get_mut(&(table, column.to_string()))?;
        if !matches!(cell.state, CellState::Live { .. }) {
            return None;
        }
        cell.generation += 1;
        cell.in_flight = true;
        let (value, term, generation) = (cell.value.clone(), cell.term, cell.generation);
        Some(Rewrite {
            table,
            column: column.to_string(),
            value,
            term,
            generation,
            stamp: self.stamp(st),
        })
    }

    /// Sends a rewrite stamped by [`rewrite_job`](Self::rewrite_job).
    async fn rewrite(self: Arc<Self>, job: Rewrite) {
        let sent = Instant::now();
        let written = self
            .store
            .write(
                job.table,
                self.lock.as_str(),
                &[CellWrite::new(job.column.clone(), job.value)],
                WriteOptions::at(job.stamp).with_ttl(self.ttl_of(job.term)),
            )
            .await;
        let mut st = self.state();
        if let Some(cell) = st.cells.get_mut(&(job.table, job.column.clone()))
            && cell.generation == job.generation
        {
            cell.in_flight = false;
        }
        drop(st);
        match written {
            Ok(()) => self.mark_proven(job.table, &job.column, sent, job.term),
            Err(e) => {
                debug!(table = %job.table, column = job.column, error = %e,
                    "background rewrite failed; the renewal writes the cell again")
            }
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every critical section is a few field updates; none can panic midway.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stamp(&self, st: &mut State) -> Timestamp {
        // L1: above this lease's last stamp and every earlier lease's of the
        // context (the slot's previous acquisition among them).
        let floor = st
            .last_stamp
            .max(self.stamps.load(Ordering::Acquire))
            .saturating_add(1);
        let next = self.clock.now().as_micros().max(floor);
        self.stamps.fetch_max(next, Ordering::AcqRel);
        st.last_stamp = next;
        Timestamp::from_micros(next)
    }

    /// Gives the slot back (K1): free at once when every cell is known
    /// deleted, else once the last of them has surely expired — a TTL, the
    /// second Cassandra may round up, and the skew allowance from now (no
    /// write of this lease is sent after this).
    fn give_slot_back(&self, all_deleted: bool) {
        let slot = self
            .slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(slot) = slot {
            let wait = if all_deleted {
                Duration::ZERO
            } else {
                self.ttl.as_duration() + Duration::from_secs(1) + TTL_SKEW_ALLOWANCE
            };
            slot.free_from(Instant::now() + wait);
        }
    }

    /// A write of `term` sent at `sent` succeeded. The cell's proof is its
    /// latest successful write: stamps increase with sending (L1), so that
    /// write's version is the one the store keeps, with its TTL.
    fn mark_proven(&self, table: Table, column: &str, sent: Instant, term: Term) {
        let mut st = self.state();
        if let Some(cell) = st.cells.get_mut(&(table, column.to_string()))
            && let CellState::Live { proven } = &mut cell.state
            && proven.is_none_or(|p| p.sent <= sent)
        {
            *proven = Some(Proof { sent, term });
        }
    }

    fn mark_all_deleting(&self) -> BTreeMap<Table, Vec<String>> {
        let mut st = self.state();
        let mut by_table: BTreeMap<Table, Vec<String>> = BTreeMap::new();
        for ((table, column), cell) in st.cells.iter_mut() {
            cell.state = CellState::Deleting;
            cell.generation += 1;
            by_table.entry(*table).or_default().push(column.clone());
        }
        by_table
    }

    /// The live cell whose proof runs out first: when it does (its last
    /// successful write's send + `lost_after` for that write's TTL, L3),
    /// when it was sent and its limit.
    fn earliest_deadline(&self, st: &State) -> Option<(Instant, Instant, Duration)> {
        st.cells
            .values()
            .filter_map(LeaseCell::proof)
            .map(|p| {
                let limit = self.lost_after_of(p.term);
                (p.sent + limit, p.sent, limit)
            })
            .min_by_key(|(deadline, _, _)| *deadline)
    }

    /// The proof that ran out, if one has.
    fn overdue(&self, st: &State, now: Instant) -> Option<LeaseLostReason> {
        self.earliest_deadline(st)
            .filter(|(deadline, _, _)| now >= *deadline)
            .map(|(_, sent, limit)| LeaseLostReason::RenewalOverdue {
                overdue_for: now.saturating_duration_since(sent),
                limit,
            })
    }

    /// When the watchdog must look next: the earliest proof's deadline.
    fn next_deadline(&self, st: &State) -> Option<Instant> {
        self.earliest_deadline(st).map(|(deadline, _, _)| deadline)
    }

    fn declare_lost(&self, reason: LeaseLostReason) {
        let mut st = self.state();
        if st.lost.is_none() {
            warn!(lock = %self.lock, owner = %self.owner, algorithm = self.algorithm, %reason, "lease lost");
            st.lost = Some(reason);
        }
        drop(st);
        self.lost.cancel();
    }

    /// Proven live cells due for renewal at `now` (no rewrite of theirs in
    /// flight, their proof a renewal period of their term old): (table,
    /// column, value).
    fn renewable(&self, now: Instant) -> Vec<(Table, String, Vec<u8>)> {
        self.state()
            .cells
            .iter()
            .filter(|(_, c)| {
                !c.in_flight
                    && c.proof()
                        .is_some_and(|p| now >= p.sent + self.renew_every_of(c.term))
            })
            .map(|((t, col), c)| (*t, col.clone(), c.value.clone()))
            .collect()
    }

    /// When the next renewal is due: the earliest proof plus its term's
    /// period (cells with a rewrite in flight are looked at again a
    /// period later).
    fn next_renewal(&self, now: Instant) -> Instant {
        let st = self.state();
        st.cells
            .values()
            .filter_map(|c| {
                let period = self.renew_every_of(c.term);
                let p = c.proof()?;
                Some(if c.in_flight {
                    now + period
                } else {
                    p.sent + period
                })
            })
            .min()
            .unwrap_or(
                now + self.renew_every_of(if st.waiting {
                    Term::Waiting
                } else {
                    Term::Holding
                }),
            )
    }

    /// Renews one cell: read to prove it is still there (L2), then rewrite.
    async fn renew_cell(
        &self,
        table: Table,
        column: &str,
        value: &[u8],
    ) -> Result<(), RenewFailure> {
        let query = RowQuery::first(1).starting_at(column);
        let found = self
            .store
            .read(table, self.lock.as_str(), &query)
            .await
            .map_err(RenewFailure::Store)?;
        let present = found.first().is_some_and(|c| c.column == column);
        let (stamp, term) = {
            let mut st = self.state();
            let term = match st.cells.get_mut(&(table, column.to_string())) {
                Some(cell) if matches!(cell.state, CellState::Live { .. }) => {
                    cell.generation += 1;
                    cell.term
                }
                // Deleted or being deleted by the lease's owner meanwhile.
                _ => return Ok(()),
            };
            if !present {
                return Err(RenewFailure::Gone);
            }
            (self.stamp(&mut st), term)
        };
        let sent = Instant::now();
        self.store
            .write(
                table,
                self.lock.as_str(),
                &[CellWrite::new(column, value.to_vec())],
                WriteOptions::at(stamp).with_ttl(self.ttl_of(term)),
            )
            .await
            .map_err(RenewFailure::Store)?;
        self.mark_proven(table, column, sent, term);
        Ok(())
    }
}

/// A background rewrite, stamped and ready to send.
struct Rewrite {
    table: Table,
    column: String,
    value: Vec<u8>,
    term: Term,
    generation: u64,
    stamp: Timestamp,
}

/// The first pause before a fencing-token attempt is repeated.
const FENCE_RETRY_FIRST: Duration = Duration::from_millis(20);

/// Why [`Lease::next_fencing_token`] gave no token.
#[derive(Debug)]
pub(crate) enum FenceFailure {
    Store(StoreError),
    Lost(LeaseLostReason),
}

enum RenewFailure {
    Store(StoreError),
    Gone,
}

/// The background task: renew every `renew_every` (sooner after a failure),
/// and fire the lost signal at the watchdog deadline (L3).
async fn renew_loop(shared: Arc<Shared>, stop: CancellationToken) {
    // Retries after a failure come at a quarter of the shortest period.
    let shortest = shared.waiting.map_or(shared.settings.renew_every, |w| {
        w.renew_every.min(shared.settings.renew_every)
    });
    let retry = (shortest / 4).max(Duration::from_millis(10));
    // After a failed renewal, nothing is renewed again before this.
    let mut not_before = Instant::now();
    loop {
        let next_renewal = shared.next_renewal(Instant::now()).max(not_before);
        let deadline = shared.next_deadline(&shared.state());
        tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            _ = sleep_until_opt(deadline) => {
                let overdue = shared.overdue(&shared.state(), Instant::now());
                if let Some(reason) = overdue {
                    shared.declare_lost(reason);
                    return;
                }
            }
            _ = tokio::time::sleep_until(next_renewal) => {
                let cells = shared.renewable(Instant::now());
                if cells.is_empty() {
                    // Woken for a cell written again meanwhile: nothing due.
                    not_before = Instant::now() + Duration::from_millis(1);
                    continue;
                }
                let mut renewal =
                    std::pin::pin!(join_all(cells.iter().map(|(t, c, v)| shared.renew_cell(*t, c, v))));
                // A renewal stuck in a slow store must not hold back the
                // watchdog: race it against the (moving) deadline.
                let outcomes = loop {
                    let deadline = shared.next_deadline(&shared.state());
                    tokio::select! {
                        biased;
                        _ = stop.cancelled() => return,
                        outcomes = &mut renewal => break outcomes,
                        _ = sleep_until_opt(deadline) => {
                            // Bind first: the state guard must be gone before declare_lost locks it.
                            let overdue = shared.overdue(&shared.state(), Instant::now());
                            if let Some(reason) = overdue {
                                shared.declare_lost(reason);
                                return;
                            }
                        }
                    }
                };
                let mut failed = false;
                for ((table, column, _), outcome) in cells.iter().zip(outcomes) {
                    match outcome {
                        Ok(()) => debug!(%table, column, "renewed"),
                        Err(RenewFailure::Gone) => {
                            shared.declare_lost(LeaseLostReason::CellGone { table: *table, column: column.clone() });
                            return;
                        }
                        Err(RenewFailure::Store(e)) => {
                            debug!(%table, column, error = %e, "renewal failed, retrying soon");
                            failed = true;
                        }
                    }
                }
                if failed {
                    not_before = Instant::now() + retry;
                }
            }
        }
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
#[path = "lease_tests.rs"]
mod tests;
