//! Who leads an election (docs/design.md §5b): the leader records in a
//! lock's fencing row, read at the lock's home with the fencing cell.

use lockshift_decide::cells::FENCE_COLUMN;
use lockshift_decide::election::{LEADER_PREFIX, LEADER_READ_CELLS, LeaderRecord, current_leader};
use lockshift_store::{RowQuery, Store, StoreError, schema};

use crate::{LockGuard, LockId};

/// Records `guard`'s holder as the leader of the election its lock names:
/// `record` (an encoded leader record) in the cell `column` of the lock's
/// fencing row, written through the lease — it carries the lease TTL, is
/// renewed with the holding and deleted at release, so it lives exactly as
/// long as the lock is held (docs/design.md §5b). `None` once the lock was
/// released for its holder.
///
/// # Errors
/// The store error (the cell stays registered with the lease and is
/// removed at release either way).
pub async fn write_leader(
    guard: &LockGuard,
    column: &str,
    record: &[u8],
) -> Option<Result<(), StoreError>> {
    guard.write_cell(schema::GLOBAL_TIME, column, record).await
}

/// The current leader of `election` by E1 (docs/design.md §5b): one slice
/// of the lock's fencing row from the fencing cell, which sorts before
/// every record — the fencing cell's token (its write timestamp, as the
/// fencing token reads it) and the leader records after it, in one round
/// trip — and of the records, the one with the greatest token, if no
/// later holder took a token since (`None`: nobody leads). A record that
/// does not decode names no token this build can order, and is skipped.
///
/// # Errors
/// The store error.
pub async fn read_leader(
    store: &dyn Store,
    election: &LockId,
) -> Result<Option<LeaderRecord>, StoreError> {
    let cells = store
        .read(
            schema::GLOBAL_TIME,
            election.as_str(),
            &RowQuery::first(LEADER_READ_CELLS).starting_at(FENCE_COLUMN),
        )
        .await?;
    // A write timestamp below zero is nobody's token: no fence.
    let fence = cells
        .iter()
        .find(|c| c.column == FENCE_COLUMN)
        .and_then(|c| u64::try_from(c.writetime.as_micros()).ok());
    let records = cells
        .iter()
        .filter(|c| c.column.starts_with(LEADER_PREFIX))
        .filter_map(|c| serde_json::from_slice::<LeaderRecord>(&c.value).ok());
    Ok(current_leader(records, fence))
}
