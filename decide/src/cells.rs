//! What lockshift writes into cells, and what a cell read back says about
//! who wrote it — shared by the lockers, the census and legacy-activity
//! detection so they can never disagree.

use crate::algorithm::Algorithm;
use crate::id::OwnerId;

/// The value of a queue waiter's reservation in `main` (a `main` cell
/// written ahead of its turn, not a holding). Holders' cells carry their
/// algorithm's name.
pub const RESERVED_VALUE: &[u8] = b"queue:reserved";

/// What follows the algorithm's name in the value of a reservation
/// *behind* a waiter; the rest is that waiter's owner id.
const RESERVED_BEHIND: &str = ":reserved:";

/// The value of a waiter's cell reserved behind `ahead` (the owner id, as
/// stored, of the waiter directly ahead of it in the queue): the only
/// waiter that may take the lock beside it (see the queue lock's crate,
/// Q6). `algorithm` is the reserving waiter's.
pub fn reserved_behind(algorithm: Algorithm, ahead: &str) -> Vec<u8> {
    format!("{}{RESERVED_BEHIND}{ahead}", algorithm.as_str()).into_bytes()
}

/// The algorithm of a reservation behind another waiter and that waiter's
/// owner id, if `value` is one written by [`reserved_behind`].
pub fn reserved_behind_of(value: &[u8]) -> Option<(Algorithm, &str)> {
    let value = std::str::from_utf8(value).ok()?;
    let (algorithm, ahead) = value.split_once(RESERVED_BEHIND)?;
    let algorithm = algorithm.parse().ok()?;
    (!ahead.is_empty()).then_some((algorithm, ahead))
}

/// Whether a cell's value marks a reservation (a waiter's cell, not a
/// holding): [`RESERVED_VALUE`] or a reservation behind another waiter.
pub fn is_reservation(value: &[u8]) -> bool {
    value == RESERVED_VALUE || reserved_behind_of(value).is_some()
}

/// The column of a lock's fencing cell, in the `global_time` table's row
/// named by the lock id: the last fencing token handed out for the lock, as
/// both the value and the write timestamp (the `GlobalTime` trick, so the
/// cell only moves forward). See the lock guard's `fencing_token`.
pub const FENCE_COLUMN: &str = "fence";

/// Who wrote a cell, when lockshift did: its algorithm, and whether it is a
/// reservation. `None` when the cell is not lockshift's — an owner id that
/// is not `node/<16 hex digits>` or a value lockshift never writes: a binary that
/// predates lockshift.
///
/// The lock crate re-exports it under the name it had there.
pub fn writer_of(column: &str, value: &[u8]) -> Option<(Algorithm, bool)> {
    OwnerId::from_stored(column).node()?;
    if value == RESERVED_VALUE {
        return Some((Algorithm::Queue, true));
    }
    if let Some((algorithm, _)) = reserved_behind_of(value) {
        return Some((algorithm, true));
    }
    let value = std::str::from_utf8(value).ok()?;
    if let Ok(algorithm) = value.parse::<Algorithm>() {
        return Some((algorithm, false));
    }
    // A shared acquisition's holding: the algorithm, then how it shares
    // (`queue:shared`, `queue:permits=3`; docs/design.md §3a); a standing
    // one (`queue:permits=3:standing`) is a waiter's, as a reservation.
    let (algorithm, suffix) = value.split_once(':')?;
    let standing = crate::shared_waiter::is_standing(value.as_bytes());
    let suffix = if standing {
        suffix.strip_suffix(":standing")?
    } else {
        suffix
    };
    crate::sharing::Sharing::from_suffix(Some(suffix)).ok()?;
    Some((algorithm.parse().ok()?, standing))
}

/// Whether a `main` or `shadow` cell is evidence of the legacy algorithm:
/// written by lockshift's legacy mode or by something that is not lockshift.
pub fn is_legacy_evidence(column: &str, value: &[u8]) -> bool {
    matches!(
        writer_of(column, value),
        None | Some((Algorithm::Legacy, _))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_say_who_wrote_them() {
        let ours = "web-1/00000000000000ab";
        assert_eq!(writer_of(ours, b"queue"), Some((Algorithm::Queue, false)));
        assert_eq!(
            writer_of(ours, RESERVED_VALUE),
            Some((Algorithm::Queue, true))
        );
        assert_eq!(
            writer_of(ours, b"combined"),
            Some((Algorithm::Combined, false))
        );
        assert_eq!(
            writer_of(ours, b"something"),
            None,
            "a value lockshift never writes"
        );
        assert_eq!(
            writer_of("3f2504e0-4f89-11d3-9a0c-0305e82c3301", b"queue"),
            None,
            "a foreign owner id"
        );
        assert!(is_legacy_evidence(ours, b"legacy"));
        assert!(is_legacy_evidence("thread-17", b""));
        assert!(!is_legacy_evidence(ours, b"combined"));
        assert!(!is_legacy_evidence(ours, RESERVED_VALUE));
        // Shared acquisitions' holdings (§3a) are the queue's.
        assert_eq!(
            writer_of(ours, b"queue:shared"),
            Some((Algorithm::Queue, false))
        );
        assert_eq!(
            writer_of(ours, b"queue:permits=3"),
            Some((Algorithm::Queue, false))
        );
        assert_eq!(writer_of(ours, b"queue:permits=0"), None);
        assert_eq!(writer_of(ours, b"queue:sharing"), None);
        assert_eq!(
            writer_of(ours, b"combined:permits=3:standing"),
            Some((Algorithm::Combined, true)),
            "a standing cell is a waiter's"
        );
        assert_eq!(writer_of(ours, b"queue:standing"), None);
        let behind = reserved_behind(Algorithm::Combined, "web-2/00000000000000cd");
        assert_eq!(writer_of(ours, &behind), Some((Algorithm::Combined, true)));
        assert!(!is_legacy_evidence(ours, &behind));
    }

    #[test]
    fn reservations_behind_name_the_waiter_ahead() {
        let ahead = "web-2/00000000000000cd";
        for algorithm in [Algorithm::Queue, Algorithm::Combined] {
            let value = reserved_behind(algorithm, ahead);
            assert_eq!(reserved_behind_of(&value), Some((algorithm, ahead)));
            assert!(is_reservation(&value));
        }
        assert_eq!(
            reserved_behind(Algorithm::Queue, ahead),
            b"queue:reserved:web-2/00000000000000cd"
        );
        assert!(is_reservation(RESERVED_VALUE));
        assert_eq!(reserved_behind_of(RESERVED_VALUE), None);
        assert_eq!(reserved_behind_of(b"queue:reserved:"), None, "no owner");
        assert_eq!(reserved_behind_of(b"nonsense:reserved:a/1"), None);
        assert_eq!(reserved_behind_of(b"queue"), None);
        assert!(!is_reservation(b"queue"));
        assert!(!is_reservation(b"combined"));
        assert!(!is_reservation(b"queue:reserved:\xff"), "not UTF-8");
    }
}
