//! The waiting line: arrive, wait for the turn, take `main` (listings 7–8),
//! shared by the queue lock and the combined lock.
//!
//! How a waiter writes and verifies `main` is the only difference between
//! the two, so it is a [`MainEntry`]; the rest is one state machine and one
//! driver:
//!
//! - `lockshift_decide::waiter`: the waiter's states and the pure decision
//!   function (observation + now → action), with how often to look (its
//!   `poll_policy`: follows the measured round trip) and where a read of `main`
//!   shows my cell standing (its `handoff`: Q1, and reservations, Q5 and
//!   Q6);
//! - [`entry`]: the [`MainEntry`] trait;
//! - this file: [`Line`], the thin async driver doing the I/O each action
//!   names ([`perform`]), and remembering which locks were contended
//!   lately ([`contended`]). The waiter keeps `std` instants; the driver
//!   takes tokio's and converts them at this boundary (`into_std`), which
//!   under tokio's paused test clock gives its base instant plus the time
//!   advanced — monotonic, as the waiter needs;
//! - [`run`]: one acquisition's run — a waiting one or a try, the same
//!   waiter with another goal — performing what the waiter names.

mod contended;
mod entry;
mod perform;
mod run;
mod shared;

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lockshift_decide::shared_waiter::shared_queue_value;
use lockshift_lock::{
    AcquireError, AcquireOptions, Algorithm, Binding, Lease, LockContext, LockGuard, LockId,
    OwnerId, Sharing, Slot, TryAcquireError, Waiting,
};
use lockshift_store::{Store, StoreError, schema};
use tokio::time::Instant;
use tracing::{Instrument, debug, info_span};

pub use entry::{Arrival, MainEntry, StoreFuture, read_main, reserve_and_read};
use lockshift_decide::waiter::handoff::{Standing, holder_in_my_way, standing};
use lockshift_decide::waiter::{Arrived, Entered};

use crate::queue::position;
use crate::settings::QueueSettings;
use crate::time::TimeSource;
use contended::Contended;
use lockshift_decide::queue::{Position, Sightings, mark};
use lockshift_decide::waiter::poll_policy::{Average, Bounds};
use lockshift_decide::waiter::{Context, Goal, Leaving, Observation, Waiter};
use perform::report;
use run::Run;

/// One place in line: an owner (a slot, L7), its lease, its queue cell —
/// named by the owner id, the arrival in the value — and its mark (Q6).
struct Ticket {
    owner: OwnerId,
    lease: Lease,
    column: String,
    value: Vec<u8>,
    /// The queue cells this place in line has watched stand still.
    sightings: Mutex<Sightings>,
}

/// The waiting line of one algorithm: queue lock or combined lock.
///
/// A waiter arrives (writes its queue cell — on the fast path together
/// with its `main` cell, reading both back at once: an uncontended
/// acquisition is one write round and one read round), waits its turn
/// polling in proportion to its distance (the waiter's `poll_policy`), and once
/// first writes `main` and reads it back; if someone else still holds, its
/// cell stays as a reservation and the first read that shows it alone
/// hands it the lock (the waiter's `handoff`). A holder leaves the queue
/// once it holds (Q2): the next waiter sees itself first and reserves at
/// once.
#[derive(Clone)]
pub struct Line {
    ctx: Arc<LockContext>,
    time: Arc<dyn TimeSource>,
    settings: QueueSettings,
    entry: Arc<dyn MainEntry>,
    contended: Arc<Contended>,
    /// The store's round trip and the line's pace as this line's waiters
    /// measured them: a new waiter starts from them (see the waiter's
    /// `poll_policy`) instead of `head_poll` and nothing — every
    /// acquisition is a new waiter.
    measured: Arc<Mutex<(Average, Average)>>,
}

impl fmt::Debug for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Line")
            .field("algorithm", &self.entry.algorithm())
            .field("settings", &self.settings)
            .field("time", &self.time)
            .finish()
    }
}

impl Line {
    /// A line over `ctx` naming queue cells with `time` and entering `main`
    /// with `entry`, which behaves as its [`MainEntry::policy`] says.
    pub fn new(
        ctx: Arc<LockContext>,
        time: Arc<dyn TimeSource>,
        settings: QueueSettings,
        entry: Arc<dyn MainEntry>,
    ) -> Self {
        Line {
            ctx,
            time,
            settings,
            entry,
            contended: Arc::default(),
            measured: Arc::default(),
        }
    }

    /// The context.
    pub fn context(&self) -> &Arc<LockContext> {
        &self.ctx
    }

    fn store(&self) -> &dyn Store {
        self.ctx.store().as_ref()
    }

    /// The algorithm of the entry this line enters `main` with.
    pub(crate) fn algorithm(&self) -> Algorithm {
        self.entry.algorithm()
    }

    fn bounds(&self) -> Bounds {
        Bounds {
            floor: self.settings.min_poll,
            head: self.settings.head_poll,
            ceiling: self.settings.waiter_poll,
        }
    }

    /// How far back distance still changes the poll interval: a waiter
    /// `window` places back already polls at the ceiling.
    fn window(&self) -> u32 {
        let ratio = self.settings.waiter_poll.as_secs_f64()
            / self.settings.head_poll.as_secs_f64().max(1e-6);
        (ratio.ceil() as u32).clamp(1, 64)
    }

    fn stale_after(&self) -> Duration {
        self.settings.stale_after(self.ctx.lease_settings())
    }

    fn holder_stale_after(&self) -> Duration {
        QueueSettings::holder_stale_after(self.ctx.lease_settings())
    }

    fn pause_after_error(&self) -> Duration {
        // Spread retries over a few head polls so a flapping store is not
        // hammered in lock step by every waiter.
        self.settings.head_poll + self.ctx.random_below(self.settings.head_poll * 4)
    }

    /// Where `ticket` stands in `lock`'s queue, reading at most `window`
    /// live cells ahead of it.
    async fn where_am_i(
        &self,
        lock: &LockId,
        ticket: &Ticket,
        window: u32,
    ) -> Result<Position, StoreError> {
        position(
            self.store(),
            lock.as_str(),
            &ticket.column,
            &ticket.sightings,
            window,
        )
        .await
    }

    /// A new place in line in `slot`: one time-service call (a store read
    /// with the thesis' global service), a lease marked with the arrival,
    /// the queue cell's name and value. Nothing is written yet.
    async fn ticket(&self, slot: Slot, sharing: Sharing) -> Result<Ticket, StoreError> {
        let time = self.time.now().await?;
        let owner = slot.owner().clone();
        let arrival = u64::try_from(time.as_micros()).unwrap_or(0);
        // A waiter's cells live by the waiting terms until it holds (Q3,
        // lease L6): killed while it waits, it holds the line up seconds.
        let mark = Some(mark(owner.as_str(), arrival));
        let lease = match self.settings.waiting_terms() {
            Some(terms) => self
                .ctx
                .start_waiting_lease(slot, self.algorithm(), mark, terms),
            None => self.ctx.start_lease(slot, self.algorithm(), mark),
        };
        Ok(Ticket {
            column: owner.as_str().to_string(),
            value: shared_queue_value(time, self.algorithm(), sharing),
            owner,
            lease,
            sightings: Mutex::new(Sightings::new(self.stale_after())),
        })
    }

    /// Arrives: the queue cell (listing 7 line 1) and the first look at the
    /// place (line 2), with the entry's own writes and reads beside them on
    /// the fast path.
    async fn arrive(
        &self,
        lock: &LockId,
        ticket: &Ticket,
        fast: bool,
        binding: &Binding,
    ) -> Result<Arrived, StoreError> {
        let arrival = Arrival {
            enqueue: Box::pin(
                ticket
                    .lease
                    .write(schema::QUEUE, &ticket.column, &ticket.value),
            ),
            position: Box::pin(self.where_am_i(lock, ticket, self.window())),
        };
        self.entry
            .arrive(self.store(), &ticket.lease, arrival, fast, binding.pacing())
            .await
    }

    /// What the waiter needs to know besides the I/O result.
    fn context_now(&self, took: Duration, binding: &Binding) -> Context {
        Context {
            now: Instant::now().into_std(),
            wall: self.ctx.clock().now(),
            took,
            pacing: binding.pacing(),
            draw: self.ctx.random_fraction(),
            pause_after_error: self.pause_after_error(),
        }
    }

    /// After the lock was taken: leave the queue — the sign to the next
    /// waiter that this holder's verifying read is done, so its reservation
    /// cannot disturb it (Q2) — and hold: the `main` cell takes the lease
    /// TTL (re-marked a holding if it was a reservation) where it does not
    /// carry it yet (lease L6). All in the background, off the acquire path:
    /// one delete, and one write unless the cell was written as the
    /// holding (the fast path).
    fn settle(&self, ticket: &Ticket, marked_reservation: bool) {
        ticket
            .lease
            .delete_in_background(schema::QUEUE, &ticket.column);
        self.entry.settle(&ticket.lease);
        let remark = [(
            schema::MAIN,
            ticket.owner.as_str(),
            self.entry.holding_value(),
        )];
        ticket
            .lease
            .start_holding(if marked_reservation { &remark[..] } else { &[] });
    }

    /// Listing 7 with leases, the fast path, polling, reservations,
    /// dead-waiter skipping and re-enqueueing, paced by `binding` (read at
    /// each step) and leaving the line when it is invalidated. See
    /// [`lockshift_lock::Locker::acquire_with`].
    ///
    /// # Errors
    /// As `Locker::acquire_with`.
    ///
    /// # Cancel safety
    /// Dropping the future drops the waiter's lease, which deletes its
    /// cells in the background; the others wait at most until that lands.
    pub async fn acquire(
        &self,
        lock: &LockId,
        options: AcquireOptions,
        binding: &Binding,
    ) -> Result<LockGuard, AcquireError> {
        if options.sharing != Sharing::Exclusive {
            return self.acquire_shared(lock, options, binding).await;
        }
        let waiting = Waiting::new(&options, binding);
        let mut run = Run::new(self, lock, &waiting, binding, self.ctx.take_slot(lock));
        let waiter = self.waiter(Goal::Wait, &run.owner);
        let fast = self.entry_may_take_fast_path(lock);
        let span = info_span!("acquire", lock = %lock, owner = tracing::field::Empty, algorithm = %self.algorithm());
        match run.run(waiter, fast).instrument(span).await {
            Ok(guard) => Ok(guard),
            Err(why) => {
                let error = run.error(&why);
                Err(std::mem::take(&mut run.seen).explain(error))
            }
        }
    }

    /// Listing 8: take the lock only if it is free now, paced by `binding`
    /// (read at each step). See [`lockshift_lock::Locker::try_acquire`].
    ///
    /// # Errors
    /// As `Locker::try_acquire`.
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire(
        &self,
        lock: &LockId,
        binding: &Binding,
    ) -> Result<LockGuard, TryAcquireError> {
        // A try is bounded by its attempts: no deadline, no cancel, and an
        // invalidation is the node's to notice when it hands the lock out.
        let waiting = Waiting::new(&AcquireOptions::default(), &Binding::unbound());
        let mut run = Run::new(self, lock, &waiting, binding, self.ctx.take_slot(lock));
        let goal = Goal::Try {
            attempts: self.settings.try_attempts,
        };
        let waiter = self.waiter(goal, &run.owner);
        let span = info_span!("try_acquire", lock = %lock, algorithm = %self.algorithm());
        match run.run(waiter, true).instrument(span).await {
            Ok(guard) => Ok(guard),
            Err(Leaving::Busy { holder }) => Err(TryAcquireError::Held {
                lock: lock.clone(),
                holder: holder.as_deref().map(OwnerId::from_stored),
            }),
            Err(why) => Err(run.error(&why).into()),
        }
    }

    /// A new waiter for `goal`, owner `owner`, starting from what this
    /// line's waiters measured.
    fn waiter(&self, goal: Goal, owner: &OwnerId) -> Waiter {
        let (round_trip, pace) = self.measured();
        Waiter::new(
            self.bounds(),
            self.holder_stale_after(),
            owner.as_str(),
            Instant::now().into_std(),
        )
        .with(self.entry.policy(), goal)
        .knowing(round_trip, pace)
    }

    fn measured(&self) -> (Average, Average) {
        *self.measured.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn remember(&self, waiter: &Waiter) {
        let mut m = self.measured.lock().unwrap_or_else(PoisonError::into_inner);
        if waiter.round_trip().get().is_some() {
            m.0 = waiter.round_trip();
        }
        if waiter.pace().get().is_some() {
            m.1 = waiter.pace();
        }
    }

    /// Whether a new acquisition of `lock` may take the fast path: not when
    /// this line found the lock contended lately — writing `main` before
    /// knowing the place would disturb the waiter whose turn it is (it
    /// would see two cells and wait a poll longer).
    fn entry_may_take_fast_path(&self, lock: &LockId) -> bool {
        !self.contended.contains(lock)
    }
}

/// Whether `observation` came from a read of the lock's rows (a
/// withdrawal or a reservation behind another is a write alone).
fn reads_the_lock(observation: &Observation) -> bool {
    match observation {
        Observation::Arrived(_)
        | Observation::Position(_)
        | Observation::Entered(_)
        | Observation::Main { .. }
        | Observation::PlaceBehind { .. } => true,
        Observation::Withdrawn
        | Observation::ReservedBehind
        | Observation::Failed
        | Observation::Moving { .. }
        | Observation::Fatal
        | Observation::LeaseLost
        | Observation::Interrupted => false,
    }
}

/// Gives a place in line up: deletes its cells (the queue cell and any
/// `main` or `shadow` cell), best effort.
async fn abandon(lease: Lease) {
    if let Err(e) = lease.release().await {
        debug!(error = %e, "leaving the line left cells to their TTL");
    }
}
