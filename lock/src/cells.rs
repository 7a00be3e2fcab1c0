//! What lockshift writes into cells, and what a cell read back says about
//! who wrote it — shared by the lockers, the census and legacy-activity
//! detection so they can never disagree.
//!
//! The values and their judgements are pure and live in
//! `lockshift_decide::cells`; what stays here is [`LegacySightings`], the
//! state a node shares with its acquisitions (through their
//! [`Binding`](crate::Binding)) to learn of the legacy holders they see.

use std::sync::{Mutex, PoisonError};

use lockshift_store::{Cell, Timestamp};
use tracing::debug;

use crate::id::LockId;

use lockshift_decide::cells::is_legacy_evidence;

/// The last time any acquisition of a node saw a legacy holder in `main` —
/// how binaries that never register are noticed in time for the rollout's
/// quiet period (docs/design.md §4). Acquisitions write it through their
/// [`Binding`](crate::Binding); the node reads it when it reports activity.
#[derive(Debug, Default)]
pub struct LegacySightings {
    last: Mutex<Option<Timestamp>>,
}

impl LegacySightings {
    /// When a legacy holder was last seen (`None`: never).
    pub fn last_seen(&self) -> Option<Timestamp> {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the legacy holders among `main`'s `cells` of `lock`, seen at
    /// `now`.
    pub(crate) fn record(&self, lock: &LockId, cells: &[Cell], now: Timestamp) {
        for cell in cells
            .iter()
            .filter(|c| is_legacy_evidence(&c.column, &c.value))
        {
            debug!(%lock, owner = cell.column.as_str(), "legacy holder seen");
            let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
            *last = Some(last.map_or(now, |t| t.max(now)));
        }
    }
}
