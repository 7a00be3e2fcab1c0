//! What the benchmark measures: lockshift's three locks, and the LWT lease
//! Cassandra users build instead (a baseline, never a lock mode).

use std::fmt;

use lockshift_lock::Algorithm;
use serde::{Deserialize, Serialize};

/// One contender of the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BenchAlgorithm {
    /// The main/shadow lock.
    Legacy,
    /// The fair queue lock.
    Queue,
    /// The combined lock of the rollout.
    Combined,
    /// The lightweight-transaction lease (see [`crate::lwt`]).
    Lwt,
}

impl BenchAlgorithm {
    /// Every contender, in the order the benchmark runs them.
    pub const ALL: [BenchAlgorithm; 4] = [
        BenchAlgorithm::Legacy,
        BenchAlgorithm::Queue,
        BenchAlgorithm::Combined,
        BenchAlgorithm::Lwt,
    ];

    /// Lowercase name, as on the command line and in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            BenchAlgorithm::Legacy => "legacy",
            BenchAlgorithm::Queue => "queue",
            BenchAlgorithm::Combined => "combined",
            BenchAlgorithm::Lwt => "lwt",
        }
    }

    /// The lockshift lock it is, if it is one.
    pub fn lock(self) -> Option<Algorithm> {
        match self {
            BenchAlgorithm::Legacy => Some(Algorithm::Legacy),
            BenchAlgorithm::Queue => Some(Algorithm::Queue),
            BenchAlgorithm::Combined => Some(Algorithm::Combined),
            BenchAlgorithm::Lwt => None,
        }
    }
}

impl From<Algorithm> for BenchAlgorithm {
    fn from(a: Algorithm) -> Self {
        match a {
            Algorithm::Legacy => BenchAlgorithm::Legacy,
            Algorithm::Queue => BenchAlgorithm::Queue,
            Algorithm::Combined => BenchAlgorithm::Combined,
        }
    }
}

impl fmt::Display for BenchAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for BenchAlgorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        BenchAlgorithm::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| {
                format!("unknown algorithm {s:?}; expected legacy, queue, combined or lwt")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_only_lwt_is_not_a_lock() {
        for a in BenchAlgorithm::ALL {
            assert_eq!(a.as_str().parse::<BenchAlgorithm>(), Ok(a));
            assert_eq!(a.lock().is_none(), a == BenchAlgorithm::Lwt);
            if let Some(lock) = a.lock() {
                assert_eq!(BenchAlgorithm::from(lock), a);
            }
        }
        assert!(
            "paxos"
                .parse::<BenchAlgorithm>()
                .unwrap_err()
                .contains("lwt")
        );
    }
}
