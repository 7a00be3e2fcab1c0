//! What lockshift writes into cells, and what a cell read back says about
//! who wrote it — shared by the lockers, the census and legacy-activity
//! detection so they can never disagree.
//!
//! The values and their judgements are pure and live in
//! `lockshift_decide::cells`; what stays here is [`ActivityObserver`], the hook through which a locker reports
//! the legacy holders it sees.

use std::fmt;
use std::sync::Arc;

use lockshift_store::{Cell, Timestamp};

use crate::id::LockId;

use lockshift_decide::cells::is_legacy_evidence;

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
