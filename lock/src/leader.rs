//! Who leads an election (docs/design.md §5b): the leader records in a
//! lock's fencing row, read at the lock's home.

use lockshift_decide::election::{LEADER_PREFIX, LEADER_READ_LIMIT, LeaderRecord, current_leader};
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

/// The current leader of `election`: of the leader records its fencing
/// row holds, the one with the greatest token (`None`: nobody leads). A
/// record that does not decode names no token this build can order, and
/// is skipped.
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
            &RowQuery::first(LEADER_READ_LIMIT).starting_at(LEADER_PREFIX),
        )
        .await?;
    let records = cells
        .iter()
        .filter(|c| c.column.starts_with(LEADER_PREFIX))
        .filter_map(|c| serde_json::from_slice::<LeaderRecord>(&c.value).ok());
    Ok(current_leader(records))
}
