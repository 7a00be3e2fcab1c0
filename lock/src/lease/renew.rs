//! Renewal and the watchdog: the background task that rewrites every
//! proven cell (L2) and fires the lost signal once a proof runs out (L3).

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use lockshift_store::{CellWrite, RowQuery, StoreError, Table, WriteOptions};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::{CellState, Lease, LeaseCell, LeaseParts, LeaseState, Proof, Term};
use crate::error::LeaseLostReason;

impl Lease {
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
}

impl LeaseParts {
    /// The live cell whose proof runs out first: when it does (its last
    /// successful write's send + `lost_after` for that write's TTL, L3),
    /// when it was sent and its limit.
    fn earliest_deadline(&self, st: &LeaseState) -> Option<(Instant, Instant, Duration)> {
        st.cells
            .values()
            .filter_map(LeaseCell::proof)
            .map(|p| {
                let limit = self.lost_after_of(p.term);
                (p.lives_from + limit, p.lives_from, limit)
            })
            .min_by_key(|(deadline, _, _)| *deadline)
    }

    /// The proof that ran out, if one has.
    fn overdue(&self, st: &LeaseState, now: Instant) -> Option<LeaseLostReason> {
        self.earliest_deadline(st)
            .filter(|(deadline, _, _)| now >= *deadline)
            .map(|(_, sent, limit)| LeaseLostReason::RenewalOverdue {
                overdue_for: now.saturating_duration_since(sent),
                limit,
            })
    }

    /// When the watchdog must look next: the earliest proof's deadline.
    fn next_deadline(&self, st: &LeaseState) -> Option<Instant> {
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
    /// flight, their proof a renewal period of its term old), and with
    /// any holding cell every other one (L8: a held lease's cells are
    /// renewed together, so none outlives the others by more than a
    /// renewal's own spread): (table, column).
    ///
    /// The period is the one of the TTL the cell's proven write carried
    /// (`Proof::term`), not of the TTL its next write will carry: a cell
    /// [`start_holding`](Lease::start_holding) moved to the lease TTL whose
    /// promotion has not landed (it failed, or is still on its way) is
    /// still proven only under the waiting TTL, and its watchdog deadline
    /// (L3) counts against that TTL — so it is renewed at the waiting
    /// period, before that deadline, not a lease period later (by when the
    /// deadline has passed and the lease is lost).
    fn renewable(&self, now: Instant) -> Vec<(Table, String)> {
        let st = self.state();
        let ready = |c: &&LeaseCell| !c.in_flight && c.proof().is_some();
        let due = |c: &LeaseCell| {
            c.proof()
                .is_some_and(|p| now >= p.lives_from + self.renew_every_of(p.term))
        };
        let holding_due = st
            .cells
            .values()
            .filter(ready)
            .any(|c| c.term == Term::Holding && due(c));
        st.cells
            .iter()
            .filter(|(_, c)| ready(c) && (due(c) || (holding_due && c.term == Term::Holding)))
            .map(|((t, col), _)| (*t, col.clone()))
            .collect()
    }

    /// When the next renewal is due: the earliest proof plus its term's
    /// period (cells with a rewrite in flight are looked at again a
    /// period later) — the term of the proven write, as in
    /// [`renewable`](Self::renewable).
    fn next_renewal(&self, now: Instant) -> Instant {
        let st = self.state();
        st.cells
            .values()
            .filter_map(|c| {
                let p = c.proof()?;
                let period = self.renew_every_of(p.term);
                Some(if c.in_flight {
                    now + period
                } else {
                    p.lives_from + period
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

    /// Renews one cell: read to prove it is still there (L2), then rewrite
    /// it with the value registered when the rewrite is stamped — a write
    /// of the lease's own that came in meanwhile (a leader proclaiming a
    /// new value) is what it renews, never what it buries under a later
    /// stamp.
    async fn renew_cell(&self, table: Table, column: &str) -> Result<(), RenewFailure> {
        let query = RowQuery::first(1).starting_at(column);
        let found = self
            .store
            .read(table, self.lock.as_str(), &query)
            .await
            .map_err(RenewFailure::Store)?;
        let present = found.first().is_some_and(|c| c.column == column);
        let (stamp, term, value) = {
            let mut st = self.state();
            let (term, value) = match st.cells.get_mut(&(table, column.to_string())) {
                Some(cell) if matches!(cell.state, CellState::Live { .. }) => {
                    cell.generation += 1;
                    (cell.term, cell.value.clone())
                }
                // Deleted or being deleted by the lease's owner meanwhile.
                _ => return Ok(()),
            };
            if !present {
                return Err(RenewFailure::Gone);
            }
            (self.stamp(&mut st), term, value)
        };
        let sent = Instant::now();
        self.store
            .write(
                table,
                self.lock.as_str(),
                &[CellWrite::new(column, value)],
                WriteOptions::at(stamp).with_ttl(self.ttl_of(term)),
            )
            .await
            .map_err(RenewFailure::Store)?;
        self.mark_proven(table, column, Proof::sent_at(sent, term));
        Ok(())
    }
}

enum RenewFailure {
    Store(StoreError),
    Gone,
}

/// The background task: renew every `renew_every` (sooner after a failure),
/// and fire the lost signal at the watchdog deadline (L3).
pub(super) async fn renew_loop(shared: Arc<LeaseParts>, stop: CancellationToken) {
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
                    std::pin::pin!(join_all(cells.iter().map(|(t, c)| shared.renew_cell(*t, c))));
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
                for ((table, column), outcome) in cells.iter().zip(outcomes) {
                    match outcome {
                        Ok(()) => debug!(%table, column, "renewed"),
                        Err(RenewFailure::Gone) => {
                            shared.declare_lost(LeaseLostReason::CellGone { table: *table, column: column.clone() });
                            return;
                        }
                        Err(RenewFailure::Store(e)) => {
                            debug!(%table, column, error = %e, "renewal failed, retrying soon");
                            crate::metrics::renewal_failed(&shared.owner, shared.algorithm);
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
