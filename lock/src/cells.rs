//! What lockshift writes into cells, and what a cell read back says about
//! who wrote it — shared by the lockers, the census and legacy-activity
//! detection so they can never disagree.

use std::fmt;
use std::sync::Arc;

use lockshift_store::{Cell, Timestamp};

use crate::api::Algorithm;
use crate::id::{LockId, OwnerId};

/// The value of a queue waiter's reservation in `main` (a `main` cell
/// written ahead of its turn, not a holding). Holders' cells carry their
/// algorithm's name.
pub const RESERVED_VALUE: &[u8] = b"queue:reserved";

/// The column of a lock's fencing cell, in the `global_time` table's row
/// named by the lock id: the last fencing token handed out for the lock, as
/// both the value and the write timestamp (the `GlobalTime` trick, so the
/// cell only moves forward). See [`crate::LockGuard::fencing_token`].
pub const FENCE_COLUMN: &str = "fence";

/// Who wrote a cell, when lockshift did: its algorithm, and whether it is a
/// reservation. `None` when the cell is not lockshift's — an owner id that
/// is not `node/nonce` or a value lockshift never writes: a binary that
/// predates lockshift.
pub fn lockshift_writer(column: &str, value: &[u8]) -> Option<(Algorithm, bool)> {
    OwnerId::from_stored(column).node()?;
    if value == RESERVED_VALUE {
        return Some((Algorithm::Queue, true));
    }
    let algorithm = std::str::from_utf8(value).ok()?.parse::<Algorithm>().ok()?;
    Some((algorithm, false))
}

/// Whether a `main` or `shadow` cell is evidence of the legacy algorithm:
/// written by lockshift's legacy mode or by something that is not lockshift.
pub fn is_legacy_evidence(column: &str, value: &[u8]) -> bool {
    matches!(
        lockshift_writer(column, value),
        None | Some((Algorithm::Legacy, _))
    )
}

/// Hears of legacy holders a locker happens to see while it waits — how
/// binaries that never register are noticed in time for the rollout's quiet
/// period.
pub trait ActivityObserver: Send + Sync + fmt::Debug {
    /// A legacy holder (`owner`) of `lock` was in `main` at `at`.
    fn legacy_seen(&self, lock: &LockId, owner: &str, at: Timestamp);
}

/// Reports the legacy holders among `main`'s `cells` to `observer`.
pub(crate) fn observe_main(
    observer: &Arc<dyn ActivityObserver>,
    lock: &LockId,
    cells: &[Cell],
    now: Timestamp,
) {
    for cell in cells
        .iter()
        .filter(|c| is_legacy_evidence(&c.column, &c.value))
    {
        observer.legacy_seen(lock, &cell.column, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_say_who_wrote_them() {
        let ours = "web-1/00000000000000ab";
        assert_eq!(
            lockshift_writer(ours, b"queue"),
            Some((Algorithm::Queue, false))
        );
        assert_eq!(
            lockshift_writer(ours, RESERVED_VALUE),
            Some((Algorithm::Queue, true))
        );
        assert_eq!(
            lockshift_writer(ours, b"combined"),
            Some((Algorithm::Combined, false))
        );
        assert_eq!(
            lockshift_writer(ours, b"something"),
            None,
            "a value lockshift never writes"
        );
        assert_eq!(
            lockshift_writer("3f2504e0-4f89-11d3-9a0c-0305e82c3301", b"queue"),
            None,
            "a foreign owner id"
        );
        assert!(is_legacy_evidence(ours, b"legacy"));
        assert!(is_legacy_evidence("thread-17", b""));
        assert!(!is_legacy_evidence(ours, b"combined"));
        assert!(!is_legacy_evidence(ours, RESERVED_VALUE));
    }
}
