//! The try path (listing 8): take the lock only if it is free now, without
//! waiting in line.

use lockshift_lock::{AcquireError, Binding, LockGuard, LockId, OwnerId, TryAcquireError};
use lockshift_store::{RowQuery, StoreError, schema};
use tracing::{Instrument, info_span};

use super::{Entered, Line, Standing, Ticket, abandon, standing};

impl Line {
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
        let span = info_span!("try_acquire", lock = %lock, algorithm = %self.algorithm());
        self.try_inner(lock, binding).instrument(span).await
    }

    async fn try_inner(
        &self,
        lock: &LockId,
        binding: &Binding,
    ) -> Result<LockGuard, TryAcquireError> {
        let slot = self.ctx.take_slot(lock);
        let owner = slot.owner().clone();
        let store_error = |owner: &OwnerId, error| -> TryAcquireError {
            AcquireError::Store {
                lock: lock.clone(),
                owner: owner.clone(),
                error,
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
            .read(schema::MAIN, lock.as_str(), &RowQuery::all())
            .await
            .map_err(|e| store_error(&owner, e))?;
        if let Some(cell) = main.first() {
            return Err(held(Some(OwnerId::from_stored(&cell.column))));
        }
        // Line 3, with the fast path beside it.
        let ticket = self
            .ticket(slot)
            .await
            .map_err(|e| store_error(&owner, e))?;
        let outcome = self.try_with(&ticket, binding).await;
        match outcome {
            Ok(Some(marked_reservation)) => match ticket.lease.check_valid() {
                Ok(()) => {
                    self.settle(&ticket, marked_reservation);
                    Ok(ticket.lease.into_guard(self.algorithm()))
                }
                Err(reason) => {
                    abandon(ticket.lease).await;
                    Err(AcquireError::LeaseLost {
                        lock: lock.clone(),
                        owner,
                        reason,
                    }
                    .into())
                }
            },
            Ok(None) => {
                let holder = self
                    .store()
                    .read(schema::MAIN, lock.as_str(), &RowQuery::all())
                    .await
                    .ok()
                    .and_then(|m| {
                        m.into_iter()
                            .find(|c| c.column != owner.as_str())
                            .map(|c| OwnerId::from_stored(&c.column))
                    });
                abandon(ticket.lease).await;
                Err(held(holder))
            }
            Err(e) => {
                abandon(ticket.lease).await;
                Err(store_error(&owner, e))
            }
        }
    }

    /// Listing 8 lines 3–13 for `ticket`: `Some(reserved)` when the lock was
    /// taken, `None` when someone else is ahead or in `main`.
    async fn try_with(
        &self,
        ticket: &Ticket,
        binding: &Binding,
    ) -> Result<Option<bool>, StoreError> {
        let lock = ticket.lease.lock().clone();
        let (me, mark) = (ticket.owner.as_str(), ticket.lease.mark());
        let arrived = self.arrive(&lock, ticket, true, binding).await?;
        if arrived.position.is_first()
            && arrived
                .main
                .as_deref()
                .is_some_and(|m| standing(me, mark, m) == Standing::Alone)
        {
            return Ok(Some(false));
        }
        if arrived.wrote {
            self.entry.tidy(&ticket.lease).await?;
        }
        // Lines 11–13: not first — someone else is ahead.
        if !arrived.position.is_first() {
            return Ok(None);
        }
        // Lines 8–10: first, but `main` was busy (an entry or a lingering
        // cell): look again shortly, a bounded number of times.
        let mut shadow_checked = false;
        for attempt in 0..self.settings.try_attempts {
            if attempt > 0 || arrived.wrote {
                tokio::time::sleep(self.settings.head_poll).await;
            }
            match self
                .entry
                .enter(
                    self.store(),
                    &ticket.lease,
                    shadow_checked,
                    binding.pacing(),
                )
                .await?
            {
                Entered::Read {
                    main,
                    marked_reservation,
                } if standing(me, mark, &main) == Standing::Alone => {
                    return Ok(Some(marked_reservation));
                }
                Entered::Read { .. } => {
                    shadow_checked = false;
                    self.entry.tidy(&ticket.lease).await?;
                }
                Entered::Blocked { shadow_checked: p } => shadow_checked = p,
            }
        }
        Ok(None)
    }
}
