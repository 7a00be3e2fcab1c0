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
