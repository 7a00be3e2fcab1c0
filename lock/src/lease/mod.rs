//! Leases (thesis §5.3): every cell an acquisition writes carries a TTL, is
//! rewritten in the background, is removed on release — and the holder is told
//! the moment the lease can no longer be proven.
//!
//! A [`Lease`] is created when an acquisition starts (waiters' queue cells need
//! renewing too) and moves into the [`LockGuard`](crate::LockGuard) on
//! success ([`Lease::into_guard`]).
//! All of an acquisition's writes and deletes go through it, so it knows every
//! cell to renew and to remove, whichever algorithm wrote them.
//!
//! # Invariants
//!
//! The lease keeps L1–L6 and L8 (docs/design.md §5) and, with the slot
//! table (`slots.rs`), L7 (docs/design.md §2a): stamps increase, no
//! resurrection, told before the TTL, every cell goes through its lease,
//! late writes hold nothing, waiting cells live briefly, a slot is reused
//! only once its cells are gone, a held lease's cells expire together.
//! Each is stated and proved there, once.
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
//! migration-tool/src/lib.rs, invariant 2), or expiry, which L3 rules out
//! while the lease is proven (a refresh is sent only then). The background
//! renewal covers what the waiter does not read, at the waiting period; a
//! cell refreshed by reads is never due there.

mod fence;
mod refresh;
mod release;
mod renew;
mod write;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use lockshift_store::{SharedClock, SharedStore, Table, Timestamp, Ttl};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info_span};

use crate::error::LeaseLostReason;
use crate::id::{LockId, OwnerId};
use crate::settings::LeaseSettings;
use crate::slots::Slot;

pub(crate) use fence::FenceFailure;
use renew::renew_loop;

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

/// A successful write: when it was sent, from when its life counts, and
/// which TTL it carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Proof {
    /// When the write was sent: orders a cell's writes (L1).
    sent: Instant,
    /// From when the write's TTL counts (L3): its own send, or, for a cell
    /// a held lease added later (L8), the send of the lease's earliest
    /// holding proof, whose expiry the write's shorter TTL ends at.
    lives_from: Instant,
    term: Term,
}

impl Proof {
    /// A write whose TTL counts from its own send.
    fn sent_at(sent: Instant, term: Term) -> Self {
        Proof {
            sent,
            lives_from: sent,
            term,
        }
    }
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
struct LeaseState {
    cells: BTreeMap<(Table, String), LeaseCell>,
    last_stamp: i64,
    lost: Option<LeaseLostReason>,
    /// Waiting (L6): new cells take the waiting TTL.
    waiting: bool,
}

#[derive(Debug)]
struct LeaseParts {
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
    state: Mutex<LeaseState>,
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
    shared: Arc<LeaseParts>,
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
        Self::spawn(LeaseParts {
            store,
            clock,
            ttl,
            waiting: None,
            settings,
            lock,
            owner,
            mark: None,
            algorithm,
            state: Mutex::new(LeaseState {
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
    /// giving the slot back once the cells are gone (L4, L7). With
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
        Self::spawn(LeaseParts {
            store,
            clock,
            ttl,
            waiting,
            settings,
            lock: slot.lock().clone(),
            owner: slot.owner().clone(),
            mark,
            algorithm,
            state: Mutex::new(LeaseState {
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

    fn spawn(shared: LeaseParts) -> Lease {
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
    /// (they follow one another in one slot, L7): the waiter's mark in the
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

    /// Whether the cell is registered, live and proven.
    pub fn is_proven(&self, table: Table, column: &str) -> bool {
        self.shared
            .state()
            .cells
            .get(&(table, column.to_string()))
            .is_some_and(|c| c.proof().is_some())
    }
}

impl LeaseParts {
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

    fn state(&self) -> MutexGuard<'_, LeaseState> {
        // Every critical section is a few field updates; none can panic midway.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stamp(&self, st: &mut LeaseState) -> Timestamp {
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

    /// A write succeeded. The cell's proof is its latest successful write:
    /// stamps increase with sending (L1), so that write's version is the
    /// one the store keeps, with its TTL.
    fn mark_proven(&self, table: Table, column: &str, proof: Proof) {
        let mut st = self.state();
        if let Some(cell) = st.cells.get_mut(&(table, column.to_string()))
            && let CellState::Live { proven } = &mut cell.state
            && proven.is_none_or(|p| p.sent <= proof.sent)
        {
            *proven = Some(proof);
        }
    }

    /// L8: when a held lease's holding cells expire first — the send of
    /// the earliest holding proof among its live cells other than `key` —
    /// or `None` while the lease waits or holds no other proven cell.
    fn holding_horizon(&self, st: &LeaseState, key: &(Table, String)) -> Option<Instant> {
        if st.waiting {
            return None;
        }
        st.cells
            .iter()
            .filter(|(k, _)| *k != key)
            .filter_map(|(_, c)| c.proof())
            .filter(|p| p.term == Term::Holding)
            .map(|p| p.lives_from)
            .min()
    }
}

#[cfg(test)]
mod tests;
