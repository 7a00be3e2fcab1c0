//! A shared acquisition's run through the line: a semaphore's permit or a
//! read/write lock's reader (docs/design.md §3a). The steps are decided in
//! `lockshift_decide::shared_waiter` on what each read showed; this file
//! does the I/O they name.
//!
//! Its cells are the exclusive waiter's, with a suffix: the queue cell
//! (named by the owner id, the arrival and how it shares in the value),
//! and a `main` cell — written as the holding when a read showed room
//! (deleted at once if the read after it shows none), or, when its turn
//! has come without room, marked *standing* under the waiting TTL and kept
//! while the reads after it show no room (design §3a, "Standing"). Holding,
//! it leaves the queue (Q2), as every holder does.

use std::time::Duration;

use std::sync::PoisonError;

use lockshift_decide::shared_waiter::{
    Step, after_main, after_queue, ahead_of, next_in_line, shared_main_value, standing_main_value,
};
use lockshift_decide::waiter::poll_policy::sleep_before_next;
use lockshift_lock::{
    AcquireError, AcquireOptions, Binding, LockGuard, LockId, OwnerId, Seen, Sharing, Stop,
    TryAcquireError, Waiting,
};
use lockshift_store::{Cell, RowQuery, StoreError, schema};
use tokio::time::Instant;
use tracing::{Instrument, debug, info, info_span};

use super::{Line, Ticket, abandon};
use lockshift_decide::sharing::KindConflict;

/// How a shared run ended without the lock.
enum Ending {
    /// Interrupted (deadline, cancellation, invalidation) or a store error
    /// retrying cannot fix.
    Stop(Stop),
    /// P2: another acquisition shares the lock another way.
    Conflict(KindConflict),
    /// The lease could not be proven when the lock was taken.
    Lost(lockshift_lock::LeaseLostReason),
    /// A try found no room (the holder seen, if any).
    Busy(Option<String>),
}

/// What a shared run does next: the I/O before its next decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Io {
    /// A new place in line, then a read of the queue.
    Arrive,
    /// A read of the queue.
    Queue,
    /// A read of `main` (the queue was just read).
    Main,
    /// Both, at once.
    Both,
    /// My `main` cell — the holding, or standing — then a read of `main`
    /// after it.
    Enter {
        /// Written marked standing (under the waiting TTL).
        standing: bool,
    },
}

/// One shared acquisition: its place in line and what it saw.
struct SharedRun<'a> {
    line: &'a Line,
    lock: &'a LockId,
    sharing: Sharing,
    waiting: &'a Waiting,
    binding: &'a Binding,
    ticket: Option<Ticket>,
    owner: OwnerId,
    seen: Seen,
    /// How the live waiters ahead share the lock, at the last read of the
    /// queue.
    ahead: Vec<Sharing>,
    /// Whether my `main` cell may be there (written, or its write sent).
    written: bool,
    /// Whether it was written marked standing.
    standing: bool,
    /// How long the last look's I/O took.
    took: Duration,
}

impl Line {
    /// Takes `lock` shared as `options.sharing` says (a reader, a permit),
    /// waiting its turn by P3 and holding by P1 (docs/design.md §3a).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), and [`AcquireError::KindConflict`]
    /// when another acquisition of the lock shares it another way (P2).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub(super) async fn acquire_shared(
        &self,
        lock: &LockId,
        options: AcquireOptions,
        binding: &Binding,
    ) -> Result<LockGuard, AcquireError> {
        let waiting = Waiting::new(&options, binding);
        let mut run = SharedRun::new(self, lock, options.sharing, &waiting, binding);
        let span = info_span!("acquire", lock = %lock, sharing = %options.sharing, algorithm = %self.algorithm());
        let outcome = run.run(false).instrument(span).await;
        outcome.map_err(|ending| run.error(ending))
    }

    /// Takes `lock` shared as `sharing` says if there is room for it right
    /// now: its turn come (P3) and room in `main` (P1); never waits. An
    /// exclusive one is [`try_acquire`](Self::try_acquire).
    ///
    /// # Errors
    /// As [`try_acquire`](Self::try_acquire), and
    /// [`AcquireError::KindConflict`] (as a failure) for P2.
    pub async fn try_acquire_shared(
        &self,
        lock: &LockId,
        sharing: Sharing,
        binding: &Binding,
    ) -> Result<LockGuard, TryAcquireError> {
        if sharing == Sharing::Exclusive {
            return self.try_acquire(lock, binding).await;
        }
        let waiting = Waiting::new(&AcquireOptions::default(), &Binding::unbound());
        let mut run = SharedRun::new(self, lock, sharing, &waiting, binding);
        let span = info_span!("try_acquire", lock = %lock, sharing = %sharing, algorithm = %self.algorithm());
        match run.run(true).instrument(span).await {
            Ok(guard) => Ok(guard),
            Err(Ending::Busy(holder)) => Err(TryAcquireError::Held {
                lock: lock.clone(),
                holder: holder.as_deref().map(OwnerId::from_stored),
            }),
            Err(ending) => Err(run.error(ending).into()),
        }
    }

    /// How long a shared waiter pauses before it looks again, `distance`
    /// hand-offs from its turn (1: its turn has come, or is next): the
    /// line's measured round trip (a head poll before one was measured) times the
    /// distance, between the line's least and longest polls, counted from
    /// the start of the look that just took `took` — so the waiter whose
    /// turn it is looks back to back, about once a round trip, as an
    /// exclusive one (Q4, the waiter's `poll_policy`).
    fn shared_pause(&self, distance: usize, took: Duration) -> Duration {
        let base = self.measured().0.get().unwrap_or(self.settings.head_poll);
        let factor = u32::try_from(distance.max(1)).unwrap_or(u32::MAX);
        let ceiling = if distance <= 1 {
            self.settings.head_poll
        } else {
            self.settings.waiter_poll
        };
        let interval = base
            .saturating_mul(factor)
            .clamp(self.settings.min_poll, ceiling.max(self.settings.min_poll));
        sleep_before_next(interval, took, self.settings.min_poll)
    }
}

impl<'a> SharedRun<'a> {
    fn new(
        line: &'a Line,
        lock: &'a LockId,
        sharing: Sharing,
        waiting: &'a Waiting,
        binding: &'a Binding,
    ) -> Self {
        SharedRun {
            line,
            lock,
            sharing,
            waiting,
            binding,
            ticket: None,
            owner: OwnerId::from_stored(""),
            seen: Seen::default(),
            ahead: Vec::new(),
            written: false,
            standing: false,
            took: Duration::ZERO,
        }
    }

    /// Runs to the lock or to why it left; a place left behind is given up
    /// before this returns. A `try` decides on its first look at `main`.
    async fn run(&mut self, once: bool) -> Result<LockGuard, Ending> {
        let outcome = self.steps(once).await;
        if outcome.is_err()
            && let Some(ticket) = self.ticket.take()
        {
            abandon(ticket.lease).await;
        }
        outcome
    }

    async fn steps(&mut self, once: bool) -> Result<LockGuard, Ending> {
        let mut next = Io::Arrive;
        loop {
            self.check()?;
            let started = Instant::now();
            let looked = self.look(next).await;
            self.took = started.elapsed();
            let step = match looked {
                Ok(step) => step,
                Err(Ending::Stop(Stop::Store(e))) => {
                    // A failed write of my `main` cell may have landed:
                    // withdraw it before waiting (an entry writes it again).
                    self.withdraw().await;
                    self.failed(e, once).await?;
                    next = if self.ticket.is_some() {
                        Io::Queue
                    } else {
                        Io::Arrive
                    };
                    continue;
                }
                Err(other) => return Err(other),
            };
            let head = self.line.shared_pause(1, self.took);
            next = match step {
                Step::Hold => return self.hold(),
                Step::Enter => Io::Enter { standing: false },
                // Its turn came on a read of the queue alone: `main` now.
                Step::LookAtMain if next == Io::Queue || next == Io::Arrive => Io::Main,
                _ if once => {
                    self.withdraw().await;
                    return Err(Ending::Busy(self.holder()));
                }
                Step::TakeStand => Io::Enter { standing: true },
                Step::Arrive => {
                    self.withdraw().await;
                    Io::Arrive
                }
                Step::Wait if next_in_line(self.sharing, &self.ahead) => {
                    self.withdraw().await;
                    self.pause(head).await?;
                    Io::Both
                }
                Step::Wait => {
                    self.withdraw().await;
                    let far = self
                        .line
                        .shared_pause(self.ahead.len().saturating_add(1), self.took);
                    self.pause(far).await?;
                    Io::Queue
                }
                Step::LookAtMain | Step::Stand => {
                    self.pause(head).await?;
                    Io::Both
                }
                Step::Withdraw => {
                    self.withdraw().await;
                    self.pause(head).await?;
                    Io::Both
                }
            };
        }
    }

    /// Performs `next` — reads, or the entry's write and the read after
    /// it — and decides the step on what it showed.
    async fn look(&mut self, next: Io) -> Result<Step, Ending> {
        let main = match next {
            Io::Arrive | Io::Queue => {
                if next == Io::Arrive {
                    self.arrive().await?;
                }
                let cells = self.read(schema::QUEUE).await?;
                let ahead = self.place(&cells);
                return after_queue(self.sharing, ahead.as_deref()).map_err(Ending::Conflict);
            }
            Io::Main => self.read(schema::MAIN).await?,
            Io::Both => {
                let (queue, main) = tokio::join!(self.read(schema::QUEUE), self.read(schema::MAIN));
                if self.place(&queue?).is_none() {
                    return Ok(Step::Arrive);
                }
                main?
            }
            Io::Enter { standing } => {
                self.write_main(standing).await?;
                self.read(schema::MAIN).await?
            }
        };
        self.binding
            .saw_main(self.lock, &main, self.line.ctx.clock().as_ref());
        note_main(&mut self.seen, self.waiting, &self.owner, &main);
        after_main(
            self.sharing,
            Some(&self.ahead),
            self.owner.as_str(),
            &main,
            self.written,
        )
        .map_err(Ending::Conflict)
    }

    /// A new place in line: a new slot (L7), its ticket, the queue cell.
    async fn arrive(&mut self) -> Result<(), Ending> {
        if let Some(old) = self.ticket.take() {
            tokio::spawn(abandon(old.lease));
        }
        self.written = false;
        let slot = self.line.ctx.take_slot(self.lock);
        self.owner = slot.owner().clone();
        let ticket = self
            .line
            .ticket(slot, self.sharing)
            .await
            .map_err(store_stop)?;
        let written = ticket
            .lease
            .write(schema::QUEUE, &ticket.column, &ticket.value)
            .await;
        self.ticket = Some(ticket);
        written.map_err(store_stop)
    }

    /// One read of `table`'s row of the lock, measured; a read of the
    /// queue refreshes my waiting cells when it shows them (lease L2).
    async fn read(&self, table: lockshift_store::Table) -> Result<Vec<Cell>, Ending> {
        let Some(ticket) = self.ticket.as_ref() else {
            return Err(self.gone());
        };
        let mark = ticket.lease.read_mark(table, &ticket.column);
        let started = Instant::now();
        let cells = self
            .line
            .store()
            .read(table, self.lock.as_str(), &RowQuery::all())
            .await
            .map_err(store_stop)?;
        self.measured(started.elapsed());
        if let Some(mark) = mark
            && cells.iter().any(|c| c.column == ticket.column)
        {
            ticket.lease.refresh_seen(mark);
        }
        Ok(cells)
    }

    /// Notes a read's round trip (Q4).
    fn measured(&self, took: Duration) {
        let mut m = self
            .line
            .measured
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        m.0.note(took);
    }

    /// Where my queue cell stands in `cells` (a read of the queue): the
    /// waiters ahead, remembered; `None` when my cell is gone.
    fn place(&mut self, cells: &[Cell]) -> Option<Vec<Sharing>> {
        let ticket = self.ticket.as_ref()?;
        let now = Instant::now().into_std();
        let ahead = {
            let mut sightings = ticket
                .sightings
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            sightings.observe(cells, now);
            ahead_of(cells, &ticket.column, |c| sightings.is_dead(c, now))
        };
        self.seen.lock_read = true;
        let count = ahead.as_ref().map_or(0, Vec::len);
        self.seen.in_the_way |= count > 0;
        self.waiting.saw(|w| {
            let before = w.ahead.clone();
            w.ahead =
                (count > 0).then(|| (u32::try_from(count).unwrap_or(u32::MAX), String::new()));
            w.ahead != before
        });
        self.ahead = ahead.clone().unwrap_or_default();
        ahead
    }

    /// My `main` cell: the holding value with how I share, under the lease
    /// TTL (it is the holding if the read after it shows room); or marked
    /// standing, under the waiting TTL, refreshed by my reads that show it
    /// (lease L6, L2) and re-marked a holding once I hold.
    async fn write_main(&mut self, standing: bool) -> Result<(), Ending> {
        let Some(ticket) = self.ticket.as_ref() else {
            return Err(self.gone());
        };
        self.written = true;
        self.standing = standing;
        let me = ticket.owner.as_str();
        let algorithm = self.line.algorithm();
        let written = if standing {
            let value = standing_main_value(algorithm, self.sharing);
            ticket.lease.write(schema::MAIN, me, &value).await
        } else {
            let value = shared_main_value(algorithm, self.sharing);
            ticket.lease.write_holding(schema::MAIN, me, &value).await
        };
        written.map_err(store_stop)
    }

    /// Deletes my `main` cell if it may be there; a failed delete leaves
    /// it to the lease's own cleanup (a standing cell only delays others).
    async fn withdraw(&mut self) {
        if !std::mem::take(&mut self.written) {
            return;
        }
        self.standing = false;
        if let Some(ticket) = self.ticket.as_ref()
            && let Err(e) = ticket
                .lease
                .delete(schema::MAIN, ticket.owner.as_str())
                .await
        {
            debug!(error = %e, "withdrawing my main cell failed; the place's release deletes it");
        }
    }

    /// The read after my write showed room: hand the guard out if the
    /// lease is still proven; leave the queue (Q2) and hold, off the
    /// acquire path.
    fn hold(&mut self) -> Result<LockGuard, Ending> {
        let Some(ticket) = self.ticket.take() else {
            return Err(self.gone());
        };
        if let Err(reason) = ticket.lease.check_valid() {
            self.ticket = Some(ticket);
            return Err(Ending::Lost(reason));
        }
        ticket
            .lease
            .delete_in_background(schema::QUEUE, &ticket.column);
        let holding = shared_main_value(self.line.algorithm(), self.sharing);
        let remark = [(schema::MAIN, ticket.owner.as_str(), holding.as_slice())];
        ticket
            .lease
            .start_holding(if self.standing { &remark[..] } else { &[] });
        info!(waited = ?self.waiting.elapsed(), "acquired");
        Ok(ticket.lease.into_guard(self.line.algorithm()))
    }

    /// No place in line: it was given up, its lease with it.
    fn gone(&self) -> Ending {
        Ending::Lost(lockshift_lock::LeaseLostReason::CellGone {
            table: schema::QUEUE,
            column: self.owner.as_str().to_string(),
        })
    }

    /// The holder the watcher was last told of.
    fn holder(&self) -> Option<String> {
        let mut holder = None;
        self.waiting.saw(|w| {
            holder.clone_from(&w.holder);
            false
        });
        holder
    }

    /// Whether to go on: not interrupted, the lease still proven.
    fn check(&self) -> Result<(), Ending> {
        self.waiting
            .check()
            .map_err(|why| Ending::Stop(Stop::Interrupted(why)))?;
        if let Some(ticket) = &self.ticket
            && ticket.lease.lost_token().is_cancelled()
        {
            let reason =
                ticket
                    .lease
                    .lost_reason()
                    .unwrap_or(lockshift_lock::LeaseLostReason::CellGone {
                        table: schema::QUEUE,
                        column: ticket.column.clone(),
                    });
            return Err(Ending::Lost(reason));
        }
        Ok(())
    }

    /// Sleeps `after` (interruptibly) unless it is zero: tokio's timer
    /// would last until its next millisecond tick, a whole round trip on a
    /// fast cluster.
    async fn pause(&self, after: Duration) -> Result<(), Ending> {
        if after.is_zero() {
            return Ok(());
        }
        self.waiting
            .pause(after)
            .await
            .map_err(|why| Ending::Stop(Stop::Interrupted(why)))
    }

    /// A store failure: one retrying may fix is retried after a pause (a
    /// try gives up); anything else ends the run.
    async fn failed(&mut self, e: StoreError, once: bool) -> Result<(), Ending> {
        if !e.is_retryable() || once {
            return Err(Ending::Stop(Stop::Store(e)));
        }
        debug!(error = %e, "store error while waiting");
        self.seen.last_error = Some(e);
        self.pause(self.line.pause_after_error()).await
    }

    /// The caller's error for `ending`.
    fn error(&mut self, ending: Ending) -> AcquireError {
        let (lock, owner) = (self.lock.clone(), self.owner.clone());
        match ending {
            Ending::Stop(stop) => {
                let error = stop.into_error(self.waiting, &lock, &owner);
                std::mem::take(&mut self.seen).explain(error)
            }
            Ending::Conflict(conflict) => AcquireError::KindConflict {
                lock,
                owner,
                conflict,
            },
            Ending::Lost(reason) => AcquireError::LeaseLost {
                lock,
                owner,
                reason,
            },
            Ending::Busy(_) => AcquireError::Timeout {
                lock,
                owner,
                waited: self.waiting.elapsed(),
            },
        }
    }
}

/// Tells the watcher (and the run's record) who else a read of `main`
/// showed besides `me`.
fn note_main(seen: &mut Seen, waiting: &Waiting, me: &OwnerId, main: &[Cell]) {
    let holder = main
        .iter()
        .find(|c| c.column != me.as_str())
        .map(|c| c.column.clone());
    seen.lock_read = true;
    seen.in_the_way |= holder.is_some();
    waiting.saw(|w| {
        let changed = w.holder != holder;
        w.holder.clone_from(&holder);
        changed
    });
}

fn store_stop(e: StoreError) -> Ending {
    Ending::Stop(Stop::Store(e))
}
