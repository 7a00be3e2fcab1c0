//! Cassandra's per-cell reconciliation rule, as one small value type.
//!
//! Kept apart from the embedded backend (the store's `MemoryStore`) so that
//! the local CQL endpoint, which stores arbitrary CQL schemas, resolves every
//! cell with the very same rule as the embedded backend.
//!
//! # The rule (thesis listing 1, Cassandra 3+ `Cells.reconcile`)
//!
//! 1. The higher timestamp wins.
//! 2. On a tie, a dead version (tombstone, or a cell whose TTL has run out)
//!    wins over a live one.
//! 3. On a tie between two dead or two live versions, the one whose
//!    deletion time is later wins (a cell without TTL never dies, so it beats
//!    an expiring one); then the greater value.
//!
//! An expired cell is a tombstone at its own timestamp: a late write with an
//! older timestamp does not bring the column back.

use crate::cell::Timestamp;

/// One version of a cell as a replica holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CellVersion {
    /// A written value.
    Live {
        /// Value bytes.
        value: Vec<u8>,
        /// Write timestamp.
        timestamp: Timestamp,
        /// When the TTL runs out, on the store's clock; `None` never.
        expires_at: Option<Timestamp>,
    },
    /// A deletion marker.
    Tombstone {
        /// Delete timestamp.
        timestamp: Timestamp,
        /// When the store applied the delete, on its clock (for purging).
        deleted_at: Timestamp,
    },
}

impl CellVersion {
    /// The version's timestamp.
    pub fn timestamp(&self) -> Timestamp {
        match self {
            CellVersion::Live { timestamp, .. } | CellVersion::Tombstone { timestamp, .. } => {
                *timestamp
            }
        }
    }

    /// Whether the version is a visible value at `now`.
    pub fn is_live(&self, now: Timestamp) -> bool {
        match self {
            CellVersion::Live { expires_at, .. } => expires_at.is_none_or(|at| at > now),
            CellVersion::Tombstone { .. } => false,
        }
    }

    /// The value and remaining lifetime if live at `now`.
    pub fn live_value(&self, now: Timestamp) -> Option<(&[u8], Option<Timestamp>)> {
        match self {
            CellVersion::Live {
                value, expires_at, ..
            } if self.is_live(now) => Some((value, *expires_at)),
            _ => None,
        }
    }

    /// When the version stops (or stopped) being live; `None` if never.
    fn death_time(&self) -> Option<Timestamp> {
        match self {
            CellVersion::Live { expires_at, .. } => *expires_at,
            CellVersion::Tombstone { deleted_at, .. } => Some(*deleted_at),
        }
    }

    /// Whether a dead version may be forgotten at `now`: dead, and its
    /// [`purge_time`] reached (Cassandra's `gc_grace_seconds`, counted in
    /// whole seconds from its local deletion time). Forgetting it earlier
    /// would let a delayed older write resurrect the cell; until then it
    /// also costs every read that passes it (the store's `tombstones` module).
    pub fn is_purgeable(&self, now: Timestamp, gc_grace: std::time::Duration) -> bool {
        !self.is_live(now) && self.purge_time(gc_grace).is_some_and(|at| at <= now)
    }

    /// When this version, once dead, becomes purgeable; `None` for a live
    /// version that never expires.
    pub fn purge_time(&self, gc_grace: std::time::Duration) -> Option<Timestamp> {
        self.death_time().map(|dead| purge_time(dead, gc_grace))
    }

    /// Whether `self` (arriving) beats `existing` under the rule above.
    pub fn supersedes(&self, existing: &CellVersion, now: Timestamp) -> bool {
        use std::cmp::Ordering::*;
        match self.timestamp().cmp(&existing.timestamp()) {
            Greater => return true,
            Less => return false,
            Equal => {}
        }
        match (self.is_live(now), existing.is_live(now)) {
            (false, true) => return true,
            (true, false) => return false,
            _ => {}
        }
        // Later death wins; "never" is latest of all.
        let death = |v: &CellVersion| v.death_time().map_or(i64::MAX, Timestamp::as_micros);
        match death(self).cmp(&death(existing)) {
            Greater => return true,
            Less => return false,
            Equal => {}
        }
        match (self, existing) {
            (CellVersion::Live { value: a, .. }, CellVersion::Live { value: b, .. }) => a > b,
            _ => false,
        }
    }
}

/// When a cell applied at `applied` (on the store's clock) with a TTL of
/// `ttl` stops being live: the start of `applied`'s whole second plus the
/// TTL. Cassandra stores a cell's local deletion time in whole seconds —
/// the coordinator's `nowInSeconds` at the write plus the TTL — so a cell
/// written at second `s + f` with TTL `n` expires at `s + n` and lives
/// `n - f` (measured on Cassandra 4.1.1: 2.97 s, 2.52 s and 2.07 s for a
/// 3 s TTL written at .04, .49 and .94 of a second). Every backend that
/// serves cells computes expiry here, so none can be more generous than a
/// real cluster and hide a lease bug.
pub fn ttl_deadline(applied: Timestamp, ttl: std::time::Duration) -> Timestamp {
    let second = applied
        .as_micros()
        .div_euclid(1_000_000)
        .saturating_mul(1_000_000);
    Timestamp::from_micros(second).saturating_add(ttl)
}

/// When a tombstone whose local deletion time is `dead` (the store clock
/// when the delete was applied; for an expired cell, its expiry) becomes
/// purgeable under `gc_grace`: the start of the second *after*
/// `dead`'s whole second plus `gc_grace`.
///
/// Cassandra keeps local deletion times in whole seconds and purges, in
/// every read as in compaction, when `localDeletionTime < nowInSec −
/// gc_grace_seconds`; measured on Cassandra 4.1.1 with `gc_grace_seconds =
/// 5`: a row deleted 7 s before a read no longer counts, an expired TTL
/// row counts until its expiry (not its write) plus 5 s
/// (the store's `tombstones` module, (d)).
pub fn purge_time(dead: Timestamp, gc_grace: std::time::Duration) -> Timestamp {
    let second = dead
        .as_micros()
        .div_euclid(1_000_000)
        .saturating_mul(1_000_000);
    Timestamp::from_micros(second)
        .saturating_add(gc_grace)
        .saturating_add(std::time::Duration::from_secs(1))
}

/// `ttl()` of a live cell expiring at `expires_at`, seen at `now`: whole
/// seconds, rounded up, never below 1 (Cassandra reports a live cell's TTL
/// in seconds and never 0). Shared by every backend that serves cells.
pub fn ttl_seconds_left(expires_at: Timestamp, now: Timestamp) -> u32 {
    let left = expires_at.duration_since(now);
    let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    u32::try_from(secs.max(1)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(value: &[u8], ts: i64, expires: Option<i64>) -> CellVersion {
        CellVersion::Live {
            value: value.to_vec(),
            timestamp: Timestamp::from_micros(ts),
            expires_at: expires.map(Timestamp::from_micros),
        }
    }

    fn dead(ts: i64, at: i64) -> CellVersion {
        CellVersion::Tombstone {
            timestamp: Timestamp::from_micros(ts),
            deleted_at: Timestamp::from_micros(at),
        }
    }

    const NOW: Timestamp = Timestamp::from_micros(1_000);

    #[test]
    fn ttl_deadlines_count_from_the_start_of_the_second() {
        let ttl = std::time::Duration::from_secs(3);
        for (applied, expires) in [
            (10_040_000, 13_000_000),
            (10_490_000, 13_000_000),
            (10_940_000, 13_000_000),
            (10_000_000, 13_000_000),
            (-500_000, 2_000_000),
        ] {
            assert_eq!(
                ttl_deadline(Timestamp::from_micros(applied), ttl),
                Timestamp::from_micros(expires),
                "applied at {applied} µs"
            );
        }
    }

    #[test]
    fn higher_timestamp_wins_either_way() {
        assert!(live(b"a", 2, None).supersedes(&dead(1, 0), NOW));
        assert!(!live(b"a", 1, None).supersedes(&dead(2, 0), NOW));
        assert!(dead(2, 0).supersedes(&live(b"a", 1, None), NOW));
    }

    #[test]
    fn tie_goes_to_tombstone_and_expired_cell_is_a_tombstone() {
        assert!(dead(5, 0).supersedes(&live(b"a", 5, None), NOW));
        assert!(!live(b"a", 5, None).supersedes(&dead(5, 0), NOW));
        // Expired at 500 < NOW: acts as a tombstone at ts 5.
        assert!(!live(b"b", 5, None).supersedes(&live(b"a", 5, Some(500)), NOW));
        assert!(!live(b"b", 4, None).supersedes(&live(b"a", 5, Some(500)), NOW));
    }

    #[test]
    fn live_tie_prefers_later_expiry_then_greater_value() {
        assert!(live(b"a", 5, None).supersedes(&live(b"z", 5, Some(5_000)), NOW));
        assert!(live(b"a", 5, Some(6_000)).supersedes(&live(b"z", 5, Some(5_000)), NOW));
        assert!(live(b"b", 5, None).supersedes(&live(b"a", 5, None), NOW));
        assert!(!live(b"a", 5, None).supersedes(&live(b"b", 5, None), NOW));
        assert!(!live(b"a", 5, None).supersedes(&live(b"a", 5, None), NOW));
    }

    #[test]
    fn ttl_left_is_whole_seconds_rounded_up_and_at_least_one() {
        let at = |us| Timestamp::from_micros(us);
        assert_eq!(ttl_seconds_left(at(10_000_000), at(2_500_000)), 8);
        assert_eq!(ttl_seconds_left(at(10_000_000), at(9_999_999)), 1);
        assert_eq!(ttl_seconds_left(at(10_000_000), at(7_000_000)), 3);
    }

    #[test]
    fn purge_only_after_gc_grace_in_whole_seconds() {
        let grace = std::time::Duration::from_secs(5);
        let s = |secs: f64| (secs * 1e6) as i64;
        // Deleted at 10.7 s: local deletion time 10, purgeable once
        // 10 < now − 5, i.e. from 16.0 s.
        let d = dead(1, s(10.7));
        let at = |secs: f64| Timestamp::from_micros(s(secs));
        assert!(!d.is_purgeable(at(15.99), grace));
        assert!(d.is_purgeable(at(16.0), grace));
        assert_eq!(d.purge_time(grace), Some(at(16.0)));
        // Expired at 12 s (TTL deadlines are whole seconds): from 18 s.
        let e = live(b"a", 1, Some(s(12.0)));
        assert!(!e.is_purgeable(at(17.99), grace));
        assert!(e.is_purgeable(at(18.0), grace));
        // Still live: never purgeable.
        assert!(!e.is_purgeable(at(11.0), std::time::Duration::ZERO));
        assert!(!live(b"a", 1, None).is_purgeable(at(1e6), grace));
        assert_eq!(live(b"a", 1, None).purge_time(grace), None);
        assert_eq!(purge_time(Timestamp::from_micros(-1), grace), at(5.0));
    }
}
