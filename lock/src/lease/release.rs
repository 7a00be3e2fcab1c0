//! Release and drop: stop renewing, delete every cell, give the slot
//! back (L4).

use std::collections::BTreeMap;
use std::sync::PoisonError;
use std::time::Duration;

use futures::future::join_all;
use lockshift_store::{StoreError, Table};
use tokio::time::Instant;
use tracing::{debug, warn};

use super::{CellState, Lease, LeaseParts};
use lockshift_decide::registry::TTL_SKEW_ALLOWANCE;

/// How many times `release` retries a transient delete failure before
/// leaving the cells to their TTL.
const RELEASE_ATTEMPTS: u32 = 3;

impl Lease {
    /// Stops renewing and deletes every cell written, retrying transient
    /// failures a few times.
    ///
    /// # Errors
    /// The last store error if some cells could not be deleted; they expire
    /// within the TTL.
    ///
    /// # Cancel safety
    /// If dropped midway, the remaining cells are removed in the background
    /// (the lease's drop does it).
    pub async fn release(mut self) -> Result<(), StoreError> {
        self.stop_renewing().await;
        // Successful deletes unregister their cells, so Drop finds nothing
        // left unless a delete failed for good.
        let cells = self.shared.mark_all_deleting();
        let result = self.shared.delete_with_retries(cells).await;
        self.shared.give_slot_back(result.is_ok());
        result
    }

    async fn stop_renewing(&mut self) {
        self.stop.cancel();
        if let Some(task) = self.renewer.take() {
            // The task only ends by the stop token or after losing the lease;
            // a join error means it panicked, which it has no path to do.
            if let Err(e) = task.await {
                warn!(error = %e, "lease renewal task ended abnormally");
            }
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(task) = self.renewer.take() {
            task.abort();
        }
        let leftover = self.shared.mark_all_deleting();
        if leftover.is_empty() {
            self.shared.give_slot_back(true);
            return;
        }
        // L4: remove what is left in the background if a runtime is around.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            warn!(lock = %self.shared.lock, owner = %self.shared.owner,
                "lease dropped outside a tokio runtime; its cells expire by TTL");
            self.shared.give_slot_back(false);
            return;
        };
        let shared = self.shared.clone();
        runtime.spawn(async move {
            let result = shared.delete_with_retries(leftover).await;
            if let Err(e) = &result {
                warn!(lock = %shared.lock, owner = %shared.owner, error = %e,
                    "cleanup of a dropped lease failed; its cells expire by TTL");
            }
            shared.give_slot_back(result.is_ok());
        });
    }
}

impl LeaseParts {
    /// Deletes `cells` — one delete per table, all at once, so a release
    /// costs one round trip — retrying transient failures a few times.
    async fn delete_with_retries(
        &self,
        mut cells: BTreeMap<Table, Vec<String>>,
    ) -> Result<(), StoreError> {
        let mut attempt = 0;
        loop {
            if cells.is_empty() {
                return Ok(());
            }
            let stamp = self.stamp(&mut self.state());
            let results = join_all(cells.iter().map(|(table, columns)| async move {
                (
                    *table,
                    self.store
                        .delete(*table, self.lock.as_str(), columns, stamp)
                        .await,
                )
            }))
            .await;
            let mut last_error = None;
            for (table, result) in results {
                match result {
                    Ok(()) => {
                        if let Some(columns) = cells.remove(&table) {
                            let mut st = self.state();
                            for c in columns {
                                st.cells.remove(&(table, c));
                            }
                        }
                    }
                    Err(e) => last_error = Some(e),
                }
            }
            match last_error {
                None => return Ok(()),
                Some(e) if e.is_retryable() && attempt + 1 < RELEASE_ATTEMPTS => {
                    debug!(error = %e, attempt, "delete failed, retrying");
                    tokio::time::sleep(Duration::from_millis(20 << attempt)).await;
                    attempt += 1;
                }
                Some(e) => return Err(e),
            }
        }
    }

    /// Gives the slot back (L7): free at once when every cell is known
    /// deleted, else once the last of them has surely expired — a TTL, the
    /// second Cassandra may round up, and the skew allowance from now (no
    /// write of this lease is sent after this).
    fn give_slot_back(&self, all_deleted: bool) {
        let slot = self
            .slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(slot) = slot {
            let wait = if all_deleted {
                Duration::ZERO
            } else {
                self.ttl.as_duration() + Duration::from_secs(1) + TTL_SKEW_ALLOWANCE
            };
            slot.free_from(Instant::now() + wait);
        }
    }

    fn mark_all_deleting(&self) -> BTreeMap<Table, Vec<String>> {
        let mut st = self.state();
        let mut by_table: BTreeMap<Table, Vec<String>> = BTreeMap::new();
        for ((table, column), cell) in st.cells.iter_mut() {
            cell.state = CellState::Deleting;
            cell.generation += 1;
            by_table.entry(*table).or_default().push(column.clone());
        }
        by_table
    }
}
