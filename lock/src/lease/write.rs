//! Writes and deletes of a lease's cells: each registers or unregisters
//! the cell, so the lease knows what to renew and what to remove.

use std::time::Duration;

use lockshift_store::{CellWrite, StoreError, Table, Ttl, WriteOptions};
use tokio::time::Instant;
use tracing::debug;

use super::{CellState, Lease, LeaseCell, Proof, Term};

impl Lease {
    /// Writes the cell `column` of this lock's row in `table` with the lease's
    /// TTL, and renews it from then on.
    ///
    /// Once the lease holds, a cell written beside its proven holding cells
    /// takes only the TTL they have left, rounded up to whole seconds, and
    /// is renewed with them (L8, docs/design.md §5): it lives no longer than
    /// the holding it was written under.
    ///
    /// # Errors
    /// The store error. The cell stays registered, so a write that may have
    /// been applied is still removed on release — unless the write was
    /// refused before it was sent ([`StoreError::was_sent`]) and nothing of
    /// the cell was written before: then nothing is there to remove.
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
        let key = (table, column.to_string());
        let (stamp, term, horizon, fresh) = {
            let mut st = self.shared.state();
            let term = term.unwrap_or(if st.waiting {
                Term::Waiting
            } else {
                Term::Holding
            });
            let horizon = match term {
                Term::Holding => self.shared.holding_horizon(&st, &key),
                Term::Waiting => None,
            };
            // No write or delete of this cell before: if this one is never
            // sent, the cell cannot be in the store.
            let fresh = !st.cells.contains_key(&key);
            let entry = st
                .cells
                .entry(key.clone())
                .or_insert_with(|| LeaseCell::new(value, term));
            entry.value = value.to_vec();
            entry.term = term;
            entry.generation += 1;
            if entry.state == CellState::Deleting {
                entry.state = CellState::Live { proven: None };
            }
            let fresh = fresh.then_some(entry.generation);
            (self.shared.stamp(&mut st), term, horizon, fresh)
        };
        let sent = Instant::now();
        let full = self.shared.ttl_of(term);
        // L8: what the holding cells have left, rounded up, so this cell
        // expires with them (a second later at most); a whole TTL if none.
        // Less than a second left (the lease is overdue then, L3): one
        // second, the least a store takes, and the release deletes it.
        let (ttl, lives_from) = match horizon {
            Some(from) if from < sent => {
                let left = (from + full.as_duration()).saturating_duration_since(sent);
                let left = Ttl::from_duration(left.max(Duration::from_secs(1)));
                (left.map_or(full, |left| left.min(full)), from)
            }
            _ => (full, sent),
        };
        let result = self
            .shared
            .store
            .write(
                table,
                self.shared.lock.as_str(),
                &[CellWrite::new(column, value.to_vec())],
                WriteOptions::at(stamp).with_ttl(ttl),
            )
            .await;
        match &result {
            Ok(()) => self.shared.mark_proven(
                table,
                column,
                Proof {
                    sent,
                    lives_from,
                    term,
                },
            ),
            // Refused before it was sent (a homes router's refusal): it
            // left nothing, so a cell this write registered is forgotten —
            // no delete of it at release, no warning when that delete is
            // refused too. Unless another write or delete of the cell came
            // since (its generation moved): that one decides.
            Err(e) if !e.was_sent() => {
                let mut st = self.shared.state();
                if let Some(generation) = fresh
                    && st.cells.get(&key).is_some_and(|c| {
                        c.generation == generation && c.state == CellState::Live { proven: None }
                    })
                {
                    st.cells.remove(&key);
                }
            }
            Err(_) => {}
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
}
