//! The locks a line found contended lately, which skip the fast path.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use lockshift_lock::LockId;

/// The locks a line found contended lately (see
/// [`Line::entry_may_take_fast_path`](super::Line::entry_may_take_fast_path)).
/// An entry is dropped when an acquisition meets nobody; the set is bounded
/// by forgetting everything when full — a forgotten lock costs one
/// fast-path attempt.
#[derive(Debug, Default)]
pub(super) struct Contended(Mutex<HashSet<LockId>>);

/// The most locks remembered as contended.
const CONTENDED_REMEMBERED: usize = 4096;

impl Contended {
    pub(super) fn contains(&self, lock: &LockId) -> bool {
        self.locked().contains(lock)
    }

    pub(super) fn record(&self, lock: &LockId, contended: bool) {
        let mut set = self.locked();
        if !contended {
            set.remove(lock);
            return;
        }
        if set.len() >= CONTENDED_REMEMBERED && !set.contains(lock) {
            set.clear();
        }
        set.insert(lock.clone());
    }

    fn locked(&self) -> std::sync::MutexGuard<'_, HashSet<LockId>> {
        // Critical sections are single set operations; none can panic midway.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
