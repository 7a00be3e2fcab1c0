//! Owner slots: the column names one process writes, reused from one
//! acquisition of a lock to the next.
//!
//! Cassandra keeps a deleted cell — and an expired one — as a tombstone for
//! the table's `gc_grace_seconds`, and every read of the row passes the
//! tombstones in its slice (above 1 000 it warns, above 100 000 it fails).
//! If every acquisition wrote under a name of its own, every lock's rows
//! would hold one tombstone per acquisition: a lock taken once a second
//! stops after about a day. So an acquisition writes under a *slot*, the
//! owner id `node/IIIIIIIISSSSSSSS` — the process's [`Incarnation`] and a
//! slot number, both in hex — and the next acquisition of the same lock by
//! the same process takes the same slot again once every cell of the
//! previous one is gone. A name reused is one tombstone, however often: a
//! lock's row holds at most one per slot, and a process has as many slots
//! of a lock as it ever had acquisitions of it at once (plus, briefly, one
//! per acquisition whose cells could not be deleted and must expire first).
//!
//! The rule is the lease's L7 ([`lease`](crate::lease)): a slot is used by
//! one acquisition at a time, and by the next only once every cell the
//! previous one wrote is gone — deleted, with the delete acknowledged, or
//! past its TTL.
//!
//! The slot table forgets a lock once all its slots are free: it holds an
//! entry only per lock the process has an acquisition of, or had one of
//! within a lease TTL.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

use crate::id::{Incarnation, LockId, NodeId, OwnerId};

/// How many locks the table holds before it sweeps out the free ones.
const SWEEP_AT: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    /// An acquisition uses it.
    Taken,
    /// Free for the next acquisition from this moment on.
    FreeFrom(Instant),
}

/// The slots of one context (one process's node identity).
pub(crate) struct Slots {
    node: NodeId,
    incarnation: Incarnation,
    table: Mutex<HashMap<LockId, Vec<SlotState>>>,
}

impl fmt::Debug for Slots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slots")
            .field("node", &self.node)
            .field("incarnation", &self.incarnation)
            .field("locks", &self.locked().len())
            .finish()
    }
}

impl Slots {
    pub(crate) fn new(node: NodeId, incarnation: Incarnation) -> Self {
        Slots {
            node,
            incarnation,
            table: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn incarnation(&self) -> Incarnation {
        self.incarnation
    }

    fn locked(&self) -> std::sync::MutexGuard<'_, HashMap<LockId, Vec<SlotState>>> {
        // Critical sections are a few vector operations; none can panic midway.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The lowest free slot of `lock` (L7), or a new one.
    pub(crate) fn take(self: &Arc<Self>, lock: &LockId) -> Slot {
        let now = Instant::now();
        let index = {
            let mut table = self.locked();
            if table.len() >= SWEEP_AT {
                // Locks touched once and never again, whose last slot was
                // still cooling down when it was given back.
                table.retain(|_, slots| {
                    !slots
                        .iter()
                        .all(|s| matches!(s, SlotState::FreeFrom(t) if *t <= now))
                });
            }
            let slots = table.entry(lock.clone()).or_default();
            let free = slots
                .iter()
                .position(|s| matches!(s, SlotState::FreeFrom(t) if *t <= now));
            match free {
                Some(i) => {
                    slots[i] = SlotState::Taken;
                    i
                }
                None => {
                    slots.push(SlotState::Taken);
                    slots.len() - 1
                }
            }
        };
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        Slot {
            owner: OwnerId::for_slot(&self.node, self.incarnation, index),
            slots: self.clone(),
            lock: lock.clone(),
            index,
            returned: false,
        }
    }

    fn give_back(&self, lock: &LockId, index: u32, free_from: Instant) {
        let mut table = self.locked();
        let Some(slots) = table.get_mut(lock) else {
            return;
        };
        if let Some(s) = slots.get_mut(index as usize) {
            *s = SlotState::FreeFrom(free_from);
        }
        // Forget the lock once nothing of it is taken or cooling down.
        let now = Instant::now();
        if slots
            .iter()
            .all(|s| matches!(s, SlotState::FreeFrom(t) if *t <= now))
        {
            table.remove(lock);
        }
    }

    /// Slots of `lock` in the table (tests).
    #[cfg(test)]
    pub(crate) fn count(&self, lock: &LockId) -> usize {
        self.locked().get(lock).map_or(0, Vec::len)
    }
}

/// One slot of one lock, taken by an acquisition: its owner id is the
/// column the acquisition writes. Given back when dropped — free at once
/// unless `free_from` said later (cells that must expire
/// first).
pub struct Slot {
    slots: Arc<Slots>,
    lock: LockId,
    index: u32,
    owner: OwnerId,
    returned: bool,
}

impl fmt::Debug for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slot")
            .field("lock", &self.lock)
            .field("owner", &self.owner)
            .finish()
    }
}

impl Slot {
    /// The owner id this slot writes under.
    pub fn owner(&self) -> &OwnerId {
        &self.owner
    }

    /// The lock.
    pub fn lock(&self) -> &LockId {
        &self.lock
    }

    /// Gives the slot back, free for the next acquisition from `from` on
    /// (L7: once every cell written under it is gone).
    pub(crate) fn free_from(mut self, from: Instant) {
        self.returned = true;
        self.slots.give_back(&self.lock, self.index, from);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if !self.returned {
            // Nothing said otherwise: nothing was written, or the lease
            // that owned it accounted for its cells already.
            self.slots.give_back(&self.lock, self.index, Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn slots() -> Arc<Slots> {
        Arc::new(Slots::new(
            NodeId::new("web-1").unwrap(),
            Incarnation::from_seed(7),
        ))
    }

    #[tokio::test(start_paused = true)]
    async fn a_slot_is_reused_once_free_and_only_then() {
        let s = slots();
        let lock = LockId::new("L").unwrap();
        let a = s.take(&lock);
        let b = s.take(&lock);
        assert_ne!(a.owner(), b.owner(), "two acquisitions at once: two slots");
        let a_owner = a.owner().clone();
        assert!(a_owner.as_str().ends_with("00000000"), "{a_owner}");
        drop(a);
        let c = s.take(&lock);
        assert_eq!(c.owner(), &a_owner, "a freed slot is taken again");
        // Cells that must expire first keep the slot from reuse until then.
        c.free_from(Instant::now() + Duration::from_secs(60));
        let d = s.take(&lock);
        assert_ne!(d.owner(), &a_owner);
        assert_ne!(d.owner(), b.owner());
        tokio::time::sleep(Duration::from_secs(61)).await;
        let e = s.take(&lock);
        assert_eq!(e.owner(), &a_owner);
        drop((b, d, e));
        assert_eq!(s.count(&lock), 0, "a lock with nothing taken is forgotten");
        // Another lock has slots of its own.
        let other = s.take(&LockId::new("M").unwrap());
        assert_eq!(other.owner(), &a_owner);
    }
}
