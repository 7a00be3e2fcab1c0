//! Rewrites sent in the background: a new value, the promotion to the
//! lease TTL once the acquisition holds (L6), and the refreshes that ride
//! on the waiter's own reads (L2, see the module docs of the lease).

use std::sync::Arc;

use lockshift_store::{CellWrite, Table, Timestamp, WriteOptions};
use tokio::time::Instant;
use tracing::debug;

use super::{CellState, Lease, LeaseParts, LeaseState, Proof, ReadMark, Term};

impl Lease {
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
                    && p.lives_from.elapsed() >= terms.renew_every.mul_f64(0.75)
                    // L3: only while the cell is proven; an overdue lease is lost.
                    && p.lives_from.elapsed() < self.shared.lost_after_of(Term::Waiting)
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
}

impl LeaseParts {
    /// Stamps a background rewrite of the live cell `column` of `table`
    /// with its registered value and term; `None` if it is not live.
    fn rewrite_job(&self, st: &mut LeaseState, table: Table, column: &str) -> Option<Rewrite> {
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
            Ok(()) => self.mark_proven(job.table, &job.column, Proof::sent_at(sent, job.term)),
            Err(e) => {
                debug!(table = %job.table, column = job.column, error = %e,
                    "background rewrite failed; the renewal writes the cell again")
            }
        }
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
