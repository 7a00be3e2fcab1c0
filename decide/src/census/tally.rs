//! A census folded as it is taken: totals over every cell and a few cells
//! kept whole for what a judgement names, so what the census holds does
//! not grow with the number of locks (docs/design.md §6a).
//!
//! Rows are added one at a time ([`Tally::add_row`]), `main`'s before
//! `queue`'s: a queue cell is a waiter unless its owner holds the same
//! lock in `main` ([`super::waiters`]), and the tally remembers each
//! holding by a 64-bit hash of lock and owner for that — 8 bytes a holder,
//! the only part that grows with the locks.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};

use crate::algorithm::Algorithm;
use crate::cell::Table;
use crate::rollout::ROLLOUT_LOCK;
use crate::schema;

use super::CensusCell;

/// Cells kept whole of each kind a judgement lists: the first this many by
/// lock and owner, so the same state gives the same list.
pub const SAMPLE: usize = 20;

/// Totals over every cell a census saw, and the few cells kept whole.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Every cell.
    pub cells: usize,
    /// Cells per table.
    pub by_table: BTreeMap<Table, usize>,
    /// Holdings: `main` cells that are not a waiter's reservation.
    pub held: usize,
    /// Holdings whose lease is over by their owner's promise.
    pub held_lease_over: usize,
    /// Holdings per algorithm (`None`: foreign).
    pub held_by: BTreeMap<Option<Algorithm>, usize>,
    /// Holdings per algorithm of the fleet's locks (the rollout's own lock
    /// left out: a transition holds it), with the first [`SAMPLE`] of them.
    pub fleet_held_by: BTreeMap<Option<Algorithm>, Sampled>,
    /// Queue cells of waiters ([`super::waiters`]).
    pub waiting: usize,
    /// Locks with at least one waiter.
    pub locks_with_waiters: usize,
    /// The waiter that arrived first (by its queue cell's arrival).
    pub oldest_waiter: Option<CensusCell>,
    /// Stale cells ([`CensusCell::stale`]).
    pub stale: usize,
    /// Stale cells per table.
    pub stale_by_table: BTreeMap<Table, usize>,
    /// Locks with at least one stale cell.
    pub stale_locks: usize,
    /// Cells in `main` or `shadow` that are evidence of legacy activity.
    pub legacy_activity: usize,
    /// Algorithms whose cells are in `main` or `shadow` of the fleet's
    /// locks now (the rollout's own lock left out).
    pub seen: BTreeSet<Algorithm>,
    /// Locks with more holdings in `main` than their kinds allow together
    /// (more than one, but for readers and a semaphore's permits:
    /// `sharing::crowded`), with the first [`SAMPLE`] of them and their
    /// holdings.
    pub crowded: Sampled<(String, usize)>,
    holders: HashSet<u64>,
    stale_lock_hashes: HashSet<u64>,
}

/// A count, and the first [`SAMPLE`] of what it counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sampled<T = CensusCell> {
    /// How many.
    pub count: usize,
    /// The first [`SAMPLE`] by their order.
    pub first: Vec<T>,
}

impl<T> Default for Sampled<T> {
    fn default() -> Self {
        Sampled {
            count: 0,
            first: Vec::new(),
        }
    }
}

impl<T> Sampled<T> {
    fn add(&mut self, item: T, order: impl Fn(&T, &T) -> std::cmp::Ordering) {
        self.count += 1;
        let at = self
            .first
            .partition_point(|kept| order(kept, &item) != std::cmp::Ordering::Greater);
        if at < SAMPLE {
            self.first.insert(at, item);
            self.first.truncate(SAMPLE);
        }
    }
}

fn by_lock_and_owner(a: &CensusCell, b: &CensusCell) -> std::cmp::Ordering {
    (&a.lock, &a.owner.owner).cmp(&(&b.lock, &b.owner.owner))
}

fn hash_of(parts: &[&str]) -> u64 {
    let mut h = DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

impl Tally {
    /// Adds one lock's row of `table`: every cell the census classified in
    /// it. `main`'s rows must come before `queue`'s (see the module docs).
    pub fn add_row(&mut self, table: Table, cells: &[CensusCell]) {
        let Some(lock) = cells.first().map(|c| c.lock.as_str()) else {
            return;
        };
        *self.by_table.entry(table).or_default() += cells.len();
        self.cells += cells.len();
        let mut holdings = 0;
        let mut kinds = Vec::new();
        let mut waiters = 0;
        let mut stale = 0;
        for c in cells {
            if c.stale {
                stale += 1;
                *self.stale_by_table.entry(table).or_default() += 1;
            }
            if table != schema::QUEUE {
                if c.owner.is_legacy_activity() {
                    self.legacy_activity += 1;
                }
                if let Some(algorithm) = c.owner.algorithm
                    && lock != ROLLOUT_LOCK
                {
                    self.seen.insert(algorithm);
                }
            }
            if table == schema::MAIN && !c.owner.reserved {
                holdings += 1;
                kinds.push(c.owner.sharing);
                self.held += 1;
                self.held_lease_over += usize::from(c.lease_over);
                *self.held_by.entry(c.owner.algorithm).or_default() += 1;
                self.holders.insert(hash_of(&[lock, &c.owner.owner]));
                if lock != ROLLOUT_LOCK {
                    self.fleet_held_by
                        .entry(c.owner.algorithm)
                        .or_default()
                        .add(c.clone(), by_lock_and_owner);
                }
            }
            if table == schema::QUEUE
                && c.queue_position.is_some()
                && !self.holders.contains(&hash_of(&[lock, &c.owner.owner]))
            {
                waiters += 1;
                let earlier = match &self.oldest_waiter {
                    None => true,
                    Some(o) => {
                        (c.queued_at.unwrap_or(u64::MAX), &c.lock, &c.owner.owner)
                            < (o.queued_at.unwrap_or(u64::MAX), &o.lock, &o.owner.owner)
                    }
                };
                if earlier {
                    self.oldest_waiter = Some(c.clone());
                }
            }
        }
        self.stale += stale;
        if stale > 0 && self.stale_lock_hashes.insert(hash_of(&[lock])) {
            self.stale_locks += 1;
        }
        self.waiting += waiters;
        self.locks_with_waiters += usize::from(waiters > 0);
        if crate::sharing::crowded(&kinds) {
            self.crowded
                .add((lock.to_string(), holdings), |a, b| a.0.cmp(&b.0));
        }
    }

    /// Holdings of the fleet's locks by `algorithm` (the rollout's own lock
    /// left out), with the first [`SAMPLE`].
    pub fn fleet_held_by(&self, algorithm: Option<Algorithm>) -> Sampled {
        self.fleet_held_by
            .get(&algorithm)
            .cloned()
            .unwrap_or_default()
    }
}

#[cfg(test)]
#[path = "tally_tests.rs"]
mod tests;
