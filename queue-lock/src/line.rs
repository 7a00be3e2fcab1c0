//! The waiting line: enqueue, wait to be first, enter `main` (listings 7–8).
//!
//! How the first waiter enters `main` is the only difference between the
//! queue lock and the combined lock, so it is a [`MainEntry`] and the rest —
//! enqueueing, polling, re-enqueueing a lost cell, deadlines, cleanup — is
//! one loop, [`Line`].

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use lockshift_lock::{
    AcquireError, AcquireOptions, Algorithm, Lease, LockContext, LockGuard, LockId, OwnerId, Stop,
    TryAcquireError, Waiting, scale_duration,
};
use lockshift_store::{Cell, RowQuery, Store, StoreError, Timestamp, schema};
use std::time::Duration;

use tokio::time::Instant;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::queue::{Position, parse_queue_column, position, queue_column};
use crate::settings::QueueSettings;
use crate::time::TimeSource;

/// What one attempt at entering `main` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// `main` holds exactly my cell: the lock is mine.
    Acquired,
    /// Someone else is in `main` (named if known); my `main` cell, if any,
    /// was removed.
    Busy(Option<OwnerId>),
}

/// Q1's verdict on a read of `main` made after my own `main` write: my cell
/// alone — the lock is mine; anything else — remove my cell (listing 7
/// lines 6–7) and say who else is there. Both entries end with it.
///
/// # Errors
/// The store error of the delete; the cell stays registered with the lease.
pub async fn verdict_on_main(lease: &Lease, main: &[Cell]) -> Result<Entry, StoreError> {
    let me = lease.owner().as_str();
    if matches!(main, [only] if only.column == me) {
        return Ok(Entry::Acquired);
    }
    lease.delete(schema::MAIN, me).await?;
    let holder = main
        .iter()
        .find(|c| c.column != me)
        .map(|c| OwnerId::from_stored(&c.column));
    Ok(Entry::Busy(holder))
}

/// What a poll by a prepared waiter found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prepared {
    /// The lock is mine.
    Acquired,
    /// The one ahead still holds `main`.
    Waiting,
    /// The preparation no longer stands.
    Lost,
}

/// How the first waiter in line enters `main`.
#[async_trait]
pub trait MainEntry: Send + Sync + fmt::Debug {
    /// The algorithm this entry belongs to.
    fn algorithm(&self) -> Algorithm;

    /// One attempt at entering `main` for `lease.owner()`. Every write goes
    /// through `lease`.
    ///
    /// # Errors
    /// A store error; cells it may have written stay registered with the
    /// lease and [`tidy`](MainEntry::tidy) removes them.
    async fn enter(&self, store: &dyn Store, lease: &Lease) -> Result<Entry, StoreError>;

    /// Readies the hand-off while someone else holds `main` alone (see
    /// "Preparing the hand-off" in [`Line`]'s docs): `Ok(true)` when
    /// something was prepared, after which the line calls
    /// [`poll_prepared`](MainEntry::poll_prepared) instead of polling the
    /// queue. `holder` is the cell alone in `main`; `behind_head` says
    /// whether it is the head of this queue's (it holds or is about to), or
    /// an outsider's (a legacy holder — or another waiter's preparation).
    /// The default prepares nothing.
    ///
    /// # Errors
    /// A store error; what was written stays registered with the lease.
    async fn prepare(
        &self,
        _store: &dyn Store,
        _lease: &Lease,
        _holder: &Cell,
        _behind_head: bool,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }

    /// One poll of a prepared waiter that prepared behind the holder whose
    /// `main` column is `behind`, standing at `place` in line: took the
    /// lock, still waiting, or the preparation no longer stands (then the
    /// line tidies up and waits normally).
    ///
    /// # Errors
    /// A store error; the line then tidies up and waits normally.
    async fn poll_prepared(
        &self,
        _store: &dyn Store,
        _lease: &Lease,
        _behind: &str,
        _place: &Place<'_>,
    ) -> Result<Prepared, StoreError> {
        Ok(Prepared::Lost)
    }

    /// Whether the entry prepares hand-offs at all right now (see
    /// [`prepare`](MainEntry::prepare)); `false` skips even the wait for
    /// the holder's cell to age.
    fn prepares(&self) -> bool {
        true
    }

    /// How long the first waiter pauses while `main` is not free, when the
    /// entry paces itself (the combined lock beside legacy contenders, who
    /// poll at their own pace and would otherwise never win a hand-off);
    /// `None`, the default: the line's polling.
    fn busy_pause(&self, _ctx: &LockContext) -> Option<Duration> {
        None
    }

    /// Removes what a failed `enter` may have left (by default, any `main`
    /// cell of this lease).
    ///
    /// # Errors
    /// A store error; the cells stay registered.
    async fn tidy(&self, lease: &Lease) -> Result<(), StoreError> {
        lease.delete_all_in(schema::MAIN).await
    }
}

/// Where a waiter stands, for entries that consult the queue while
/// prepared.
#[derive(Clone, Copy, Debug)]
pub struct Place<'a> {
    /// The waiter's queue column.
    pub column: &'a str,
    /// Now, by the waiter's clock.
    pub now: Timestamp,
    /// Queue cells older than this are dead waiters.
    pub stale_after: Duration,
}

/// One place in line: an owner, its lease, its queue cell.
struct Ticket {
    owner: OwnerId,
    lease: Lease,
    column: String,
}

/// The waiting line of one algorithm: queue lock or combined lock.
///
/// # Preparing the hand-off
///
/// Most of a hand-off is the next waiter's work after the holder leaves:
/// notice, then enter `main` (queue: write + read; combined: five round
/// trips). Part of that work can be done while the holder still holds:
///
/// - **Who prepares.** Only the first waiter that is not the holder: the
///   waiter right behind the head of the queue while the head is alone in
///   `main`, or the first waiter while an outsider (a legacy holder) is alone
///   in `main`. Never while `main` holds two cells.
/// - **When.** Only once the holder's cell is older than three of this
///   waiter's slow round trips (the slowest recent one, decaying): the
///   holder's verifying read of `main` is done by then, so preparing does not
///   make a fresh holder back off and lose its turn.
/// - **What.** [`MainEntry::prepare`]: the queue lock reserves — writes its
///   `main` cell beside the holder's and takes the lock on the first read
///   that shows its cell alone (Q1 still decides); the combined lock writes
///   and checks its `shadow` cell, then needs only the fresh read of `main`,
///   its write and the re-read once the holder leaves.
/// - **Never behind a reservation.** A lone reservation looks like a holder
///   by its column, and two reservations would wait for each other for
///   ever; so reservations are marked, nobody reserves behind one, and a
///   claimed reservation is re-marked a holding (in the background).
#[derive(Clone)]
pub struct Line {
    ctx: Arc<LockContext>,
    time: Arc<dyn TimeSource>,
    settings: QueueSettings,
    entry: Arc<dyn MainEntry>,
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
    /// with `entry`.
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
        }
    }

    /// The context.
    pub fn context(&self) -> &Arc<LockContext> {
        &self.ctx
    }

    fn store(&self) -> &dyn Store {
        self.ctx.store().as_ref()
    }

    fn algorithm(&self) -> Algorithm {
        self.entry.algorithm()
    }

    /// Takes a place at the end of the line: one time-service call and one
    /// write (the queue cell, listing 7 line 1).
    async fn enqueue(
        &self,
        lock: &LockId,
        owner: OwnerId,
    ) -> Result<Ticket, (OwnerId, StoreError)> {
        let time = match self.time.now().await {
            Ok(t) => t,
            Err(e) => return Err((owner, e)),
        };
        let lease = self.ctx.start_lease(lock, &owner, self.algorithm());
        let column = queue_column(time, &owner);
        match lease
            .write(schema::QUEUE, &column, self.algorithm().as_str().as_bytes())
            .await
        {
            Ok(()) => {
                debug!(%owner, column, "enqueued");
                Ok(Ticket {
                    owner,
                    lease,
                    column,
                })
            }
            // Dropping the lease removes a cell that may have been written.
            Err(e) => Err((owner, e)),
        }
    }

    async fn where_am_i(&self, lock: &LockId, ticket: &Ticket) -> Result<Position, StoreError> {
        position(
            self.store(),
            lock.as_str(),
            &ticket.column,
            self.ctx.clock().now(),
            self.stale_after(),
            self.window(),
        )
        .await
    }

    /// How far back distance still changes the poll interval: a waiter
    /// `window` places back already polls at `waiter_poll`.
    fn window(&self) -> u32 {
        let ratio = self.settings.waiter_poll.as_secs_f64()
            / self.settings.head_poll.as_secs_f64().max(1e-6);
        (ratio.ceil() as u32).clamp(1, 64)
    }

    fn stale_after(&self) -> std::time::Duration {
        self.settings.stale_after(self.ctx.lease_settings())
    }

    fn pause_after_error(&self) -> std::time::Duration {
        // Spread retries over a few head polls so a flapping store is not
        // hammered in lock step by every waiter.
        self.settings.head_poll + self.ctx.random_below(self.settings.head_poll * 4)
    }

    /// Listing 7 with leases, polling, dead-waiter skipping and
    /// re-enqueueing. See [`lockshift_lock::Locker::acquire_with`].
    ///
    /// # Errors
    /// As `Locker::acquire_with`.
    pub async fn acquire(
        &self,
        lock: &LockId,
        options: AcquireOptions,
    ) -> Result<LockGuard, AcquireError> {
        let waiting = Waiting::new(&options);
        let mut last_owner = self.ctx.new_owner();
        let span = info_span!("acquire", lock = %lock, owner = tracing::field::Empty, algorithm = %self.algorithm());
        let result = self
            .wait_and_enter(lock, &waiting, &mut last_owner)
            .instrument(span)
            .await;
        match result {
            Ok(guard) => Ok(guard),
            Err((stop, ticket)) => {
                // Leave the line before reporting, so a timed-out waiter does
                // not hold up the others.
                if let Some(ticket) = ticket {
                    abandon(ticket.lease).await;
                }
                Err(stop.into_error(&waiting, lock, &last_owner))
            }
        }
    }

    async fn wait_and_enter(
        &self,
        lock: &LockId,
        waiting: &Waiting,
        last_owner: &mut OwnerId,
    ) -> Result<LockGuard, (Stop, Option<Ticket>)> {
        // The place in line while waiting; `None` before the first enqueue
        // and after a lost one.
        let mut parked: Option<Ticket> = None;
        // The owner drawn by `acquire` names the first place in line.
        let mut fresh_owner = Some(last_owner.clone());
        let mut progress = Progress::default();
        let mut polls: u64 = 0;
        loop {
            if let Err(why) = waiting.check() {
                return Err((why.into(), parked));
            }
            let ticket = match parked.take() {
                Some(t) if !t.lease.lost_token().is_cancelled() => t,
                lost => {
                    if let Some(old) = lost {
                        warn!(owner = %old.owner, "waiter's lease lost; re-enqueueing");
                    }
                    let owner = fresh_owner.take().unwrap_or_else(|| self.ctx.new_owner());
                    match self.enqueue(lock, owner).await {
                        Ok(t) => {
                            tracing::Span::current()
                                .record("owner", tracing::field::display(&t.owner));
                            *last_owner = t.owner.clone();
                            progress = Progress::default();
                            t
                        }
                        Err((owner, e)) => {
                            *last_owner = owner;
                            if !e.is_retryable() {
                                return Err((Stop::Store(e), None));
                            }
                            debug!(error = %e, "enqueue failed, retrying");
                            if let Err(why) = waiting.pause(self.pause_after_error()).await {
                                return Err((why.into(), None));
                            }
                            continue;
                        }
                    }
                }
            };
            polls += 1;
            let pause = match self.step(lock, &ticket, &mut progress).await {
                Ok(Step::Acquired) => match ticket.lease.check_valid() {
                    Ok(()) => {
                        info!(polls, waited = ?waiting.elapsed(), "acquired");
                        return Ok(LockGuard::new(ticket.lease, self.algorithm()));
                    }
                    Err(reason) => {
                        warn!(%reason, "entered main but the lease is no longer proven; re-enqueueing");
                        tokio::spawn(abandon(ticket.lease));
                        continue;
                    }
                },
                Ok(Step::Reenqueue) => {
                    warn!(owner = %ticket.owner, "own queue cell is gone; re-enqueueing");
                    tokio::spawn(abandon(ticket.lease));
                    continue;
                }
                Ok(Step::Wait(d)) => d,
                Err(e) if e.is_retryable() => {
                    debug!(error = %e, "store error while waiting, retrying");
                    self.pause_after_error()
                }
                Err(e) => return Err((Stop::Store(e), Some(ticket))),
            };
            parked = Some(ticket);
            if let Err(why) = waiting.pause(pause).await {
                return Err((why.into(), parked));
            }
        }
    }

    /// The poll interval of a waiter `ahead` places from the front after
    /// `n` polls at that distance: `head_poll × ahead`, growing 3 % per poll,
    /// at most `waiter_poll`. A waiter k places back is k hand-overs from
    /// its turn, so it looks k times less often than the next one — total
    /// polling grows like ln(queue length), not like the queue length — and
    /// when the queue stops moving (a long hold) everyone backs off; when it
    /// moves, the count restarts.
    fn poll_interval(&self, ahead: u32, n: u32) -> Duration {
        let growth = FAST_POLL_GROWTH
            .powi(i32::try_from(n).unwrap_or(i32::MAX))
            .min(1e6);
        let interval = scale_duration(self.settings.head_poll, f64::from(ahead.max(1)) * growth);
        interval.min(self.settings.waiter_poll.max(self.settings.head_poll))
    }

    /// The pause of the first waiter while `main` is not free: the entry's
    /// own pacing if it has one, else the next waiter's poll interval.
    fn busy_pause(&self, polls: u32) -> Duration {
        self.entry
            .busy_pause(&self.ctx)
            .unwrap_or_else(|| self.poll_interval(1, polls))
    }

    /// One poll of the line.
    async fn step(
        &self,
        lock: &LockId,
        ticket: &Ticket,
        progress: &mut Progress,
    ) -> Result<Step, StoreError> {
        if let Some(behind) = progress.prepared.clone() {
            let started = Instant::now();
            let polled = self
                .entry
                .poll_prepared(
                    self.store(),
                    &ticket.lease,
                    &behind,
                    &Place {
                        column: &ticket.column,
                        now: self.ctx.clock().now(),
                        stale_after: self.stale_after(),
                    },
                )
                .await;
            match polled {
                Ok(Prepared::Acquired) => return Ok(Step::Acquired),
                Ok(Prepared::Waiting) => {
                    progress.note_round_trip(started.elapsed());
                    progress.polls_here += 1;
                    return Ok(Step::Wait(self.poll_interval(1, progress.polls_here)));
                }
                Ok(Prepared::Lost) => {
                    progress.prepared = None;
                    progress.dirty = true;
                }
                Err(e) => {
                    progress.prepared = None;
                    progress.dirty = true;
                    return Err(e);
                }
            }
        }
        // Listing 7 line 2: am I first?
        let started = Instant::now();
        let pos = self.where_am_i(lock, ticket).await?;
        progress.note_round_trip(started.elapsed());
        match pos {
            Position::Missing => Ok(Step::Reenqueue),
            Position::Behind { ahead, head } => {
                // Q2: not first (any more), so no main cell of mine may linger.
                if progress.dirty || !ticket.lease.columns_in(schema::MAIN).is_empty() {
                    self.entry.tidy(&ticket.lease).await?;
                    progress.dirty = false;
                }
                progress.main_busy = false;
                if progress.last_ahead != Some(ahead) {
                    // The line moved: look again soon.
                    progress.last_ahead = Some(ahead);
                    progress.polls_here = 0;
                }
                progress.polls_here += 1;
                // Next in line: is the head holding main alone? Then prepare,
                // or come back the moment its cell is old enough to.
                if ahead == 1 {
                    let head_owner = parse_queue_column(&head).map(|(_, o)| o);
                    let main = self
                        .store()
                        .read(schema::MAIN, lock.as_str(), &RowQuery::first(2))
                        .await?;
                    self.ctx.observe_main(lock, &main);
                    if let (Some(owner), [holder]) = (head_owner, main.as_slice())
                        && holder.column == owner.as_str()
                        && let Some(sooner) =
                            self.maybe_prepare(ticket, holder, true, progress).await?
                    {
                        return Ok(Step::Wait(
                            sooner.min(self.poll_interval(ahead, progress.polls_here)),
                        ));
                    }
                }
                Ok(Step::Wait(self.poll_interval(ahead, progress.polls_here)))
            }
            Position::First => {
                // Leftovers of a failed step first: my own cell in main must
                // never be mistaken for a holder.
                if progress.dirty {
                    self.entry.tidy(&ticket.lease).await?;
                    progress.dirty = false;
                }
                if progress.main_busy {
                    // One read instead of a write, a read and a delete while
                    // the previous holder is still in main.
                    let me = ticket.owner.as_str();
                    let main = self
                        .store()
                        .read(schema::MAIN, lock.as_str(), &RowQuery::first(2))
                        .await?;
                    self.ctx.observe_main(lock, &main);
                    // My own cell there is never the holder I wait for (the
                    // tidy above removed any leftover; `enter` rewrites it).
                    let others: Vec<&Cell> = main.iter().filter(|c| c.column != me).collect();
                    if let Some(holder) = others.first() {
                        progress.polls_here += 1;
                        let stale = self.ctx.clock().now().duration_since(holder.writetime)
                            > self.stale_after();
                        if stale {
                            // A holder that stopped renewing is dead: its
                            // cell goes only with its TTL, no point polling fast.
                            return Ok(Step::Wait(self.settings.waiter_poll));
                        }
                        let mut wait = self.busy_pause(progress.polls_here);
                        if let [holder] = others.as_slice()
                            && let Some(sooner) =
                                self.maybe_prepare(ticket, holder, false, progress).await?
                        {
                            wait = wait.min(sooner);
                        }
                        return Ok(Step::Wait(wait));
                    }
                    progress.main_busy = false;
                }
                match self.entry.enter(self.store(), &ticket.lease).await {
                    Ok(Entry::Acquired) => Ok(Step::Acquired),
                    Ok(Entry::Busy(holder)) => {
                        debug!(holder = ?holder.as_ref().map(OwnerId::as_str), "first in line, main busy");
                        progress.main_busy = true;
                        progress.last_ahead = Some(0);
                        progress.polls_here += 1;
                        Ok(Step::Wait(self.busy_pause(progress.polls_here)))
                    }
                    Err(e) => {
                        progress.dirty = true;
                        Err(e)
                    }
                }
            }
        }
    }

    /// Prepares the hand-off if `holder` — the only cell in `main`, held by
    /// the one just ahead — has been there long enough that its holder's own
    /// verifying read of `main` is surely done (three slow round trips: its
    /// write, its read, and slack): preparing earlier could make a fresh
    /// holder back off and lose its turn. When the cell is too young,
    /// returns how long until it is old enough, to poll again then.
    async fn maybe_prepare(
        &self,
        ticket: &Ticket,
        holder: &Cell,
        behind_head: bool,
        progress: &mut Progress,
    ) -> Result<Option<Duration>, StoreError> {
        let Some(round_trip) = progress.round_trip.filter(|_| self.entry.prepares()) else {
            return Ok(None);
        };
        let age = self.ctx.clock().now().duration_since(holder.writetime);
        let old_enough = round_trip * 3;
        if age < old_enough {
            return Ok(Some(old_enough - age));
        }
        match self
            .entry
            .prepare(self.store(), &ticket.lease, holder, behind_head)
            .await
        {
            Ok(prepared) => {
                if prepared {
                    debug!(holder = holder.column, "hand-off prepared");
                    progress.prepared = Some(holder.column.clone());
                }
                Ok(None)
            }
            Err(e) => {
                progress.dirty = true;
                Err(e)
            }
        }
    }

    /// Listing 8: take the lock only if it is free now. See
    /// [`lockshift_lock::Locker::try_acquire`].
    ///
    /// # Errors
    /// As `Locker::try_acquire`.
    pub async fn try_acquire(&self, lock: &LockId) -> Result<LockGuard, TryAcquireError> {
        let span = info_span!("try_acquire", lock = %lock, algorithm = %self.algorithm());
        self.try_inner(lock).instrument(span).await
    }

    async fn try_inner(&self, lock: &LockId) -> Result<LockGuard, TryAcquireError> {
        let owner = self.ctx.new_owner();
        let store_error = |owner: &OwnerId, source| -> TryAcquireError {
            AcquireError::Store {
                lock: lock.clone(),
                owner: owner.clone(),
                source,
            }
            .into()
        };
        let held = |holder| TryAcquireError::Held {
            lock: lock.clone(),
            holder,
        };
        // Line 1: someone in main — busy, without touching the queue.
        let main = self
            .store()
            .read(schema::MAIN, lock.as_str(), &RowQuery::first(1))
            .await
            .map_err(|e| store_error(&owner, e))?;
        if let Some(cell) = main.first() {
            return Err(held(Some(OwnerId::from_stored(&cell.column))));
        }
        // Line 3.
        let ticket = self
            .enqueue(lock, owner)
            .await
            .map_err(|(owner, e)| store_error(&owner, e))?;
        let mut last_holder = None;
        for attempt in 0..self.settings.try_attempts {
            let outcome = async {
                match self.where_am_i(lock, &ticket).await? {
                    Position::First => self
                        .entry
                        .enter(self.store(), &ticket.lease)
                        .await
                        .map(Some),
                    _ => Ok(None),
                }
            }
            .await;
            match outcome {
                Ok(Some(Entry::Acquired)) => {
                    return match ticket.lease.check_valid() {
                        Ok(()) => Ok(LockGuard::new(ticket.lease, self.algorithm())),
                        Err(reason) => {
                            let owner = ticket.owner.clone();
                            abandon(ticket.lease).await;
                            Err(AcquireError::LeaseLost {
                                lock: lock.clone(),
                                owner,
                                reason,
                            }
                            .into())
                        }
                    };
                }
                // Lines 8–10: busy while first — look again shortly.
                Ok(Some(Entry::Busy(holder))) => {
                    last_holder = holder;
                    if attempt + 1 < self.settings.try_attempts {
                        tokio::time::sleep(self.settings.head_poll).await;
                    }
                }
                // Lines 11–13: not first — someone else is ahead.
                Ok(None) => break,
                Err(e) => {
                    let owner = ticket.owner.clone();
                    abandon(ticket.lease).await;
                    return Err(store_error(&owner, e));
                }
            }
        }
        abandon(ticket.lease).await;
        Err(held(last_holder))
    }
}

enum Step {
    Acquired,
    Reenqueue,
    Wait(std::time::Duration),
}

/// What a waiter remembers between polls.
#[derive(Debug, Default)]
struct Progress {
    /// An entry found main taken: the head then polls main with one cheap
    /// read until it empties instead of writing and deleting.
    main_busy: bool,
    /// An enter failed in an unknown way and may have left cells.
    dirty: bool,
    /// The distance seen at the last poll (0: first, blocked on main).
    last_ahead: Option<u32>,
    /// Consecutive polls at that distance.
    polls_here: u32,
    /// The hand-off is prepared behind the holder with this `main` column
    /// (see [`Line`]).
    prepared: Option<String>,
    /// A high estimate of one read's round trip as this waiter sees it: the
    /// slowest recent one, decaying slowly — the guard before preparing must
    /// cover a holder whose round trips run slow, not an average one.
    round_trip: Option<Duration>,
}

impl Progress {
    fn note_round_trip(&mut self, d: Duration) {
        self.round_trip = Some(match self.round_trip {
            None => d,
            Some(old) => d.max(old.mul_f64(0.95)),
        });
    }
}

/// Growth per poll of the poll interval while the line stands still (see
/// [`Line::poll_interval`]).
const FAST_POLL_GROWTH: f64 = 1.03;

/// Gives a place in line up: deletes its cells (the queue cell and any
/// `main` cell), best effort.
async fn abandon(lease: Lease) {
    if let Err(e) = lease.release().await {
        debug!(error = %e, "leaving the line left cells to their TTL");
    }
}
