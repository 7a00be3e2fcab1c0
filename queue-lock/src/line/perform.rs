//! The I/O of each action the waiter names, on the current place in line,
//! and what its result tells the acquisition's watcher.

use lockshift_decide::waiter::{Action, Observation};
use lockshift_lock::{Binding, LockId, ReadMark, Waiting};
use lockshift_store::{RowQuery, StoreError, schema};

use super::run::Run;
use super::{Arrived, Entered, Line, Standing, Ticket, holder_in_my_way, read_main, standing};
use lockshift_decide::queue::Position;

impl Run<'_> {
    /// The I/O of one action (an arrival aside) on the current place in
    /// line, paced by the binding as it reads now.
    pub(super) async fn perform(&mut self, action: Action) -> Result<Observation, StoreError> {
        if action == Action::Peek {
            return self.peek().await;
        }
        let Some(ticket) = self.ticket.as_ref() else {
            // No place in line to act on: it is gone.
            return Ok(self.lost(None));
        };
        let (line, lock, binding) = (self.line, self.lock, self.binding);
        line.perform(lock, ticket, action, binding).await
    }

    /// A try's look at `main` before it arrives (listing 8 line 1).
    async fn peek(&self) -> Result<Observation, StoreError> {
        let cells = self
            .line
            .store()
            .read(schema::MAIN, self.lock.as_str(), &RowQuery::all())
            .await?;
        Ok(Observation::Main {
            cells,
            can_claim: false,
        })
    }
}

impl Line {
    /// The I/O of one action on `ticket`'s place in line, paced by
    /// `binding`; legacy holders a read of `main` shows go to the binding's
    /// sightings.
    async fn perform(
        &self,
        lock: &LockId,
        ticket: &Ticket,
        action: Action,
        binding: &Binding,
    ) -> Result<Observation, StoreError> {
        let store = self.store();
        match action {
            // Listing 7 line 2: where am I? One read of the queue row.
            Action::Poll { .. } => self.poll(lock, ticket, self.window()).await,
            // Q5: am I first? One read, one cell past the head is enough.
            Action::AskQueue { .. } => self.poll(lock, ticket, 1).await,
            // Listing 7 lines 3–4 (and the entry's own steps): write my
            // `main` cell, read `main` after it.
            Action::Enter { shadow_checked, .. } => self
                .entry
                .enter(store, &ticket.lease, shadow_checked, binding.pacing())
                .await
                .map(Observation::Entered),
            Action::PollMain { .. } => self.poll_main(lock, ticket, binding).await,
            // Q6: second in line, my `main` cell reserved behind the first —
            // so the hand-off after it is one queue read and one `main` read.
            Action::ReserveBehind { ahead } => self
                .entry
                .reserve_behind(store, &ticket.lease, &ahead)
                .await
                .map(|()| Observation::ReservedBehind),
            Action::PollBehind { .. } => self.poll_behind(lock, ticket).await,
            // Q2: no `main` cell may linger while not first. One delete per
            // table holding one.
            Action::Withdraw => self
                .entry
                .tidy(&ticket.lease)
                .await
                .map(|()| Observation::Withdrawn),
            // The run's own steps; never performed on a place.
            Action::Arrive { .. } | Action::Peek | Action::Acquired { .. } | Action::Leave(_) => {
                Ok(Observation::Failed)
            }
        }
    }

    /// Every read of a row holding one of my waiting cells that shows it
    /// there refreshes it (lease L6 and L2: the read, begun after `mark`
    /// was taken, is the proof a rewrite needs), so a waiter's own polling
    /// keeps its cells alive without a read of their own.
    fn refresh_queue(ticket: &Ticket, mark: Option<ReadMark>, position: &Position) {
        if *position != Position::Missing
            && let Some(mark) = mark
        {
            ticket.lease.refresh_seen(mark);
        }
    }

    /// Where `ticket` stands, reading at most `window` live cells ahead.
    async fn poll(
        &self,
        lock: &LockId,
        ticket: &Ticket,
        window: u32,
    ) -> Result<Observation, StoreError> {
        let mark = ticket.lease.read_mark(schema::QUEUE, &ticket.column);
        let position = self.where_am_i(lock, ticket, window).await?;
        Self::refresh_queue(ticket, mark, &position);
        Ok(Observation::Position(position))
    }

    /// The next waiter watching `main`: one read — of a reservation, the
    /// claim itself (Q1: it follows my write).
    async fn poll_main(
        &self,
        lock: &LockId,
        ticket: &Ticket,
        binding: &Binding,
    ) -> Result<Observation, StoreError> {
        let main_mark = ticket.lease.read_mark(schema::MAIN, ticket.owner.as_str());
        let cells = read_main(self.store(), &ticket.lease).await?;
        // Still waiting: refresh. (Alone, the claim follows, and holding
        // rewrites the cell anyway.)
        if let Some(mark) = main_mark
            && cells.iter().any(|c| c.column == ticket.owner.as_str())
            && standing(ticket.owner.as_str(), ticket.lease.mark(), &cells) != Standing::Alone
        {
            ticket.lease.refresh_seen(mark);
        }
        binding.saw_main(lock, &cells, self.ctx.clock().as_ref());
        Ok(Observation::Main {
            cells,
            can_claim: self.entry.can_claim(&ticket.lease),
        })
    }

    /// Q6: the place, and what the entry's claim needs besides, read
    /// together — both before any read of `main` that may claim.
    async fn poll_behind(&self, lock: &LockId, ticket: &Ticket) -> Result<Observation, StoreError> {
        let mark = ticket.lease.read_mark(schema::QUEUE, &ticket.column);
        let (position, ready) = tokio::join!(
            self.where_am_i(lock, ticket, self.window()),
            self.entry.ready_behind(self.store(), &ticket.lease)
        );
        let position = position?;
        Self::refresh_queue(ticket, mark, &position);
        Ok(Observation::PlaceBehind {
            position,
            ready: ready?,
        })
    }
}

/// The cells of `main` an observation read, if it read `main`.
pub(super) fn main_of(observation: &Observation) -> Option<&[lockshift_store::Cell]> {
    match observation {
        Observation::Main { cells, .. } => Some(cells),
        Observation::Entered(Entered::Read { main, .. }) => Some(main),
        Observation::Arrived(Arrived { main: Some(m), .. }) => Some(m),
        _ => None,
    }
}

/// Tells the acquisition's watcher what `observation` shows in the way of
/// `ticket`: the first waiter ahead and how far, from a read of the queue;
/// the holder, from a read of `main`. Returns whether it showed anyone in
/// the way (waiters ahead, a holder, or an entry blocked by another).
pub(super) fn report(waiting: &Waiting, observation: &Observation, ticket: &Ticket) -> bool {
    let place = match observation {
        Observation::Position(p) | Observation::PlaceBehind { position: p, .. } => Some(p),
        Observation::Arrived(a) => Some(&a.position),
        _ => None,
    };
    let main = main_of(observation);
    let holder = main.and_then(|main| {
        holder_in_my_way(ticket.owner.as_str(), ticket.lease.mark(), main)
            .map(|h| h.as_str().to_string())
    });
    // How long the holder's cell has left, as this read showed it.
    let holder_ttl = main
        .zip(holder.as_deref())
        .and_then(|(main, h)| main.iter().find(|c| c.column == h).and_then(|c| c.ttl));
    if let Some(ttl) = holder_ttl {
        crate::metrics::holder_ttl_seen(&ticket.owner, ttl);
    }
    let in_the_way = holder.is_some()
        || matches!(place, Some(Position::Queued { .. }))
        || matches!(observation, Observation::Entered(Entered::Blocked { .. }));
    waiting.saw(|w| {
        let before = w.clone();
        match place {
            Some(Position::Queued { ahead, head, .. }) => {
                let owner = head.split_once('@').map_or(head.as_str(), |(o, _)| o);
                w.ahead = Some((*ahead, owner.to_string()));
            }
            Some(Position::First | Position::FirstPastDead) => w.ahead = None,
            Some(Position::Missing) | None => {}
        }
        if main.is_some() {
            w.holder = holder.clone();
            w.holder_ttl = holder_ttl;
        }
        *w != before
    });
    in_the_way
}
