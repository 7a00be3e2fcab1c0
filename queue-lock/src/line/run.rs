//! One acquisition's run through the line: the waiter decides every step
//! (`lockshift_decide::waiter`), and [`Run`] performs the action it names
//! and reports back what it saw — the store's answer, a lost lease, an
//! interruption. Nothing here chooses what comes next.

use std::time::Duration;

use lockshift_decide::waiter::{Action, Leaving, Observation, Waiter};
use lockshift_lock::{
    AcquireError, Binding, Interrupted, LeaseLostReason, LockGuard, LockId, OwnerId, Seen, Slot,
    Stop, Waiting,
};
use lockshift_store::{StoreError, StoreErrorKind, schema};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::perform::main_of;
use super::{Line, Ticket, abandon, reads_the_lock, report};
use lockshift_decide::shared_waiter::exclusive_conflict;
use lockshift_decide::sharing::KindConflict;

/// The driver of one acquisition and what it recorded on the way, for the
/// caller's error.
pub(super) struct Run<'a> {
    pub(super) line: &'a Line,
    pub(super) lock: &'a LockId,
    pub(super) waiting: &'a Waiting,
    pub(super) binding: &'a Binding,
    /// The current place in line.
    pub(super) ticket: Option<Ticket>,
    /// The slot taken by the caller names the first place in line; every
    /// later place takes a slot of its own while the old place's lease
    /// still holds its slot (L7), so a lingering cleanup of an old place
    /// can never delete a new cell.
    fresh_slot: Option<Slot>,
    /// The owner of the last place taken.
    pub(super) owner: OwnerId,
    pub(super) seen: Seen,
    /// What the last observation that may end a run was: an
    /// interruption, a store error (retried or not), a lost lease.
    cause: Option<Cause>,
    steps: u64,
    /// Whether the run said it waits for a moving home (once a run).
    told_moving: bool,
}

impl<'a> Run<'a> {
    pub(super) fn new(
        line: &'a Line,
        lock: &'a LockId,
        waiting: &'a Waiting,
        binding: &'a Binding,
        first: Slot,
    ) -> Self {
        Run {
            line,
            lock,
            waiting,
            binding,
            ticket: None,
            owner: first.owner().clone(),
            fresh_slot: Some(first),
            seen: Seen::default(),
            cause: None,
            steps: 0,
            told_moving: false,
        }
    }

    /// Runs `waiter` to its end: the lock, or why it left. A place left
    /// behind is given up before this returns.
    pub(super) async fn run(
        &mut self,
        mut waiter: Waiter,
        fast: bool,
    ) -> Result<LockGuard, Leaving> {
        let mut action = waiter.start(fast);
        loop {
            self.steps += 1;
            let (observation, took) = match action {
                Action::Leave(why) => {
                    if let Some(ticket) = self.ticket.take() {
                        abandon(ticket.lease).await;
                    }
                    return Err(why);
                }
                // A lock taken as the wait was cut short is given back:
                // the caller asked to stop.
                Action::Acquired { .. } if let Err(why) = self.waiting.check() => {
                    (self.interrupted(why), Duration::ZERO)
                }
                Action::Acquired { marked_reservation } => {
                    match self.hand_out(marked_reservation, waiter.contended()) {
                        Ok(guard) => return Ok(guard),
                        Err(lost) => (lost, Duration::ZERO),
                    }
                }
                other => {
                    // What may end the run is this step's to record.
                    self.cause = None;
                    self.observe(other).await
                }
            };
            // A new place in line is the waiter's own from now on.
            if let (Observation::Arrived(_), Some(ticket)) = (&observation, &self.ticket) {
                waiter.set_place(ticket.owner.as_str(), ticket.lease.mark());
            }
            action = waiter.on(observation, &self.line.context_now(took, self.binding));
            self.line.remember(&waiter);
        }
    }

    /// Performs `action` and says what it showed and how long its I/O
    /// took (the pause before it aside); what the watcher and the record of
    /// the run learn from it is noted on the way.
    async fn observe(&mut self, action: Action) -> (Observation, Duration) {
        if let Err(why) = self.waiting.check() {
            return (self.interrupted(why), Duration::ZERO);
        }
        // An arrival gives the old place up first: whatever became of its
        // lease no longer matters.
        if let Action::Arrive { .. } = action {
            self.leave_place();
        }
        if self
            .ticket
            .as_ref()
            .is_some_and(|t| t.lease.lost_token().is_cancelled())
        {
            warn!("waiter's lease lost");
            let reason = self.ticket.as_ref().and_then(|t| t.lease.lost_reason());
            return (self.lost(reason), Duration::ZERO);
        }
        if let Err(why) = self.pause(action.pause()).await {
            return (self.interrupted(why), Duration::ZERO);
        }
        let started = Instant::now();
        let result = match action {
            Action::Arrive { fast, .. } => self.arrive(fast).await,
            other => self.perform(other).await,
        };
        let took = started.elapsed();
        let observation = match result {
            Ok(observation) => observation,
            Err(e) => return (self.failed(e), took),
        };
        // P2: a semaphore's permit in `main` is never an exclusive
        // acquisition's to wait out; it stops, naming both.
        if let Some(conflict) = main_of(&observation).and_then(exclusive_conflict) {
            self.cause = Some(Cause::Conflict(conflict));
            return (Observation::Fatal, took);
        }
        self.seen.lock_read |= reads_the_lock(&observation);
        if let Some(current) = &self.ticket {
            self.seen.in_the_way |= report(self.waiting, &observation, current);
        }
        (observation, took)
    }

    fn interrupted(&mut self, why: Interrupted) -> Observation {
        self.cause = Some(Cause::Stop(Stop::Interrupted(why)));
        Observation::Interrupted
    }

    fn failed(&mut self, e: StoreError) -> Observation {
        // Refused as moving: nothing was sent, and the refusal says when
        // the new home serves — the waiter waits that long, in place,
        // saying so once.
        if e.kind() == StoreErrorKind::HomeMoving {
            let serves_in = e.retry_after().unwrap_or_default();
            if !self.told_moving {
                self.told_moving = true;
                info!(lock = %self.lock, waits = ?serves_in, reason = %e,
                    "the lock's home is moving; waiting until the new home serves");
            }
            self.seen.last_error = Some(e.clone());
            self.cause = Some(Cause::Stop(Stop::Store(e)));
            return Observation::Moving { serves_in };
        }
        let retryable = e.is_retryable();
        if retryable {
            debug!(error = %e, "store error while waiting");
            self.seen.last_error = Some(e.clone());
        }
        self.cause = Some(Cause::Stop(Stop::Store(e)));
        if retryable {
            Observation::Failed
        } else {
            Observation::Fatal
        }
    }

    /// The lease is lost (or the place is gone: `reason` is `None`).
    pub(super) fn lost(&mut self, reason: Option<LeaseLostReason>) -> Observation {
        let reason = reason.unwrap_or_else(|| LeaseLostReason::CellGone {
            table: schema::QUEUE,
            column: self.owner.as_str().to_string(),
        });
        self.cause = Some(Cause::Lost(reason));
        Observation::LeaseLost
    }

    /// Sleeps `after` (interruptibly) unless it is zero: tokio's timer
    /// would last until its next millisecond tick, a whole round trip on a
    /// fast cluster, on every uncontended acquisition.
    async fn pause(&self, after: Duration) -> Result<(), Interrupted> {
        if after.is_zero() {
            return Ok(());
        }
        self.waiting.pause(after).await
    }

    /// Gives the current place in line (if any) up, in the background.
    fn leave_place(&mut self) {
        if let Some(old) = self.ticket.take() {
            debug!(owner = %old.owner, "giving the place in line up");
            tokio::spawn(abandon(old.lease));
        }
    }

    /// A new place in line.
    async fn arrive(&mut self, fast: bool) -> Result<Observation, StoreError> {
        let line = self.line;
        let slot = self
            .fresh_slot
            .take()
            .unwrap_or_else(|| line.ctx.take_slot(self.lock));
        tracing::Span::current().record("owner", tracing::field::display(slot.owner()));
        self.owner = slot.owner().clone();
        let ticket = line
            .ticket(slot, lockshift_lock::Sharing::Exclusive)
            .await?;
        let arrived = line.arrive(self.lock, &ticket, fast, self.binding).await;
        self.ticket = Some(ticket);
        Ok(Observation::Arrived(arrived?))
    }

    /// The lock is taken: hands out the guard if the lease is still proven
    /// (etcd's lesson: the lease can run out while an acquisition is
    /// slow); else the lease is lost.
    fn hand_out(
        &mut self,
        marked_reservation: bool,
        contended: bool,
    ) -> Result<LockGuard, Observation> {
        let Some(held) = self.ticket.take() else {
            return Err(self.lost(None));
        };
        if let Err(reason) = held.lease.check_valid() {
            warn!(%reason, "took main but the lease is no longer proven");
            self.ticket = Some(held);
            return Err(self.lost(Some(reason)));
        }
        self.line.settle(&held, marked_reservation);
        self.line.contended.record(self.lock, contended);
        info!(steps = self.steps, waited = ?self.waiting.elapsed(), "acquired");
        Ok(held.lease.into_guard(self.line.algorithm()))
    }

    /// The caller's error for a run that left without the lock (`why`,
    /// other than busy, which a try reports itself): the cause the
    /// observation it left on recorded. The waiter leaves only in answer
    /// to such an observation (its tables); a cause missing all the same
    /// is a bug of this crate, reported as what `why` names with what the
    /// run knows.
    pub(super) fn error(&mut self, why: &Leaving) -> AcquireError {
        let (lock, owner) = (self.lock.clone(), self.owner.clone());
        let cause = self.cause.take().unwrap_or_else(|| {
            debug_assert!(false, "the waiter left ({why:?}) with no cause recorded");
            match (why, self.waiting.check(), self.seen.last_error.clone()) {
                (Leaving::Interrupted, Err(interrupted), _) => {
                    Cause::Stop(Stop::Interrupted(interrupted))
                }
                (Leaving::Failed, _, Some(error)) => Cause::Stop(Stop::Store(error)),
                _ => Cause::Lost(LeaseLostReason::CellGone {
                    table: schema::QUEUE,
                    column: owner.as_str().to_string(),
                }),
            }
        });
        match cause {
            Cause::Stop(stop) => stop.into_error(self.waiting, &lock, &owner),
            Cause::Lost(reason) => AcquireError::LeaseLost {
                lock,
                owner,
                reason,
            },
            Cause::Conflict(conflict) => AcquireError::KindConflict {
                lock,
                owner,
                conflict,
            },
        }
    }
}

/// What ended a run without the lock.
enum Cause {
    Stop(Stop),
    Lost(LeaseLostReason),
    /// P2: another acquisition shares the lock as a semaphore.
    Conflict(KindConflict),
}
