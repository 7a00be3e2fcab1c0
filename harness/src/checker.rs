//! The exclusion checker: who is inside which lock's critical section, and
//! every time two holders were inside one lock at once.
//!
//! The holders report themselves: each calls [`Oracle::enter`] once it
//! believes it holds the lock, and [`Oracle::exit`] before it lets go. The
//! checker trusts nothing else, so a lock that hands itself to two holders
//! shows up as a [`Violation`], one per pair of holders inside together.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, PoisonError};

/// A violation of exclusion seen by the [`Oracle`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The lock.
    pub lock: String,
    /// Who was inside.
    pub inside: String,
    /// Who entered anyway.
    pub entered: String,
}

impl Violation {
    /// The violation in the words of `migrate demo`'s report:
    /// `lock L held by A and B at once`, where A was inside and B entered.
    /// (Its `Display` form, `B entered lock L while A held it`, is the one
    /// the tests print.)
    pub fn held_at_once(&self) -> String {
        format!(
            "lock {} held by {} and {} at once",
            self.lock, self.inside, self.entered
        )
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} entered lock {} while {} held it",
            self.entered, self.lock, self.inside
        )
    }
}

/// Watches critical sections: who is inside which lock, and every time two
/// were inside one lock at once.
#[derive(Debug, Default)]
pub struct Oracle {
    inside: Mutex<HashMap<String, Vec<String>>>,
    violations: Mutex<Vec<Violation>>,
    entries: Mutex<Vec<(String, String)>>,
    lapses: Mutex<Vec<Lapse>>,
}

/// A holder that left its critical section early because its lease told it
/// the lock was lost. Whoever enters after it left is no violation (the
/// lease tells a holder before its cells can expire, L3); whoever entered
/// before is one, recorded as usual. A run that expected no lapse should
/// say so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lapse {
    /// The lock.
    pub lock: String,
    /// Who was told.
    pub who: String,
    /// Why, in the lease's words.
    pub reason: String,
}

impl Oracle {
    /// `who` enters the critical section of `lock`.
    pub fn enter(&self, lock: &str, who: &str) {
        let mut inside = self.inside.lock().unwrap_or_else(PoisonError::into_inner);
        let holders = inside.entry(lock.to_string()).or_default();
        for other in holders.iter() {
            self.violations
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Violation {
                    lock: lock.to_string(),
                    inside: other.clone(),
                    entered: who.to_string(),
                });
        }
        holders.push(who.to_string());
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((lock.to_string(), who.to_string()));
    }

    /// `who` leaves the critical section of `lock`.
    pub fn exit(&self, lock: &str, who: &str) {
        let mut inside = self.inside.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(holders) = inside.get_mut(lock) {
            holders.retain(|h| h != who);
        }
    }

    /// `who` leaves the critical section of `lock` early: its lease said the
    /// lock was lost, for `reason`. Anyone entering after this is no
    /// violation; the lapse is kept for [`lapses`](Self::lapses).
    pub fn exit_lost(&self, lock: &str, who: &str, reason: &str) {
        self.exit(lock, who);
        self.lapses
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Lapse {
                lock: lock.to_string(),
                who: who.to_string(),
                reason: reason.to_string(),
            });
    }

    /// Every holder that left early because its lease was lost, in order.
    pub fn lapses(&self) -> Vec<Lapse> {
        self.lapses
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Every violation so far.
    pub fn violations(&self) -> Vec<Violation> {
        self.violations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many critical sections were entered so far.
    pub fn entered(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Every entry so far, in order: (lock, who).
    pub fn entries(&self) -> Vec<(String, String)> {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
#[path = "checker_tests.rs"]
mod tests;
