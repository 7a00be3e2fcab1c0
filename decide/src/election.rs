//! Leader election on a lock (docs/design.md §5b): what a leader records
//! and how an observer tells who leads.
//!
//! A leader is the holder of the election's lock. Once it holds, it writes
//! a [`LeaderRecord`] into the lock's fencing row (`global_time`, row =
//! the lock's name, column `leader:` and its owner id) through
//! its lease: the record carries the lease TTL, is renewed with the lease
//! and deleted at release, so it lives exactly as long as the leadership
//! can. The record names the lock's fencing token, taken before it was
//! written: tokens grow with every holder that asks (the fencing cell only
//! moves forward), so where a former leader's record has not expired yet
//! the current leader's is the one with the greatest token
//! ([`current_leader`]).

use serde::{Deserialize, Serialize};

/// The first characters of every leader record's column; the fencing
/// cell (`fence`) sorts before them, so neither read passes the other's
/// cells.
pub const LEADER_PREFIX: &str = "leader:";

/// How many leader records one read returns at most: more than one lives
/// only while a former leader's record runs out its TTL.
pub const LEADER_READ_LIMIT: u32 = 16;

/// The longest proclaimed value, in bytes: a record is read by every
/// observer every poll.
pub const MAX_VALUE_BYTES: usize = 4096;

/// The column of the leader record of the lock owner `owner`: owner ids
/// are reused per process (docs/design.md §2a), so the records' tombstones
/// are bounded by the processes that led, not by the terms.
pub fn leader_column(owner: &str) -> String {
    format!("{LEADER_PREFIX}{owner}")
}

/// What a leader records of itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderRecord {
    /// The leader's node id.
    pub node: String,
    /// The lock owner of its acquisition.
    pub owner: String,
    /// What it proclaims (a URL, a shard list, …).
    pub value: String,
    /// When it became leader (µs since the epoch, its clock).
    pub since: i64,
    /// The lock's fencing token it holds.
    pub token: u64,
}

/// The current leader among the records a read of the fencing row
/// decoded: the one with the greatest token (`None`: nobody leads).
pub fn current_leader(records: impl IntoIterator<Item = LeaderRecord>) -> Option<LeaderRecord> {
    records.into_iter().max_by_key(|r| r.token)
}

/// Why a proclaimed value is refused, if it is: too long, or holding a
/// control character (it is printed by `migrate leader`).
pub fn check_value(value: &str) -> Result<(), String> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(format!(
            "the value is {} bytes, more than the {MAX_VALUE_BYTES} a leader may proclaim: {:?}",
            value.len(),
            crate::id::cut_short(value)
        ));
    }
    if let Some(c) = value.chars().find(|c| c.is_control()) {
        return Err(format!(
            "the value holds the control character {c:?}: {:?}",
            crate::id::cut_short(value)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(node: &str, token: u64) -> LeaderRecord {
        LeaderRecord {
            node: node.into(),
            owner: format!("{node}/1"),
            value: String::new(),
            since: 0,
            token,
        }
    }

    #[test]
    fn the_greatest_token_leads() {
        let cases: &[(&str, Vec<LeaderRecord>, Option<&str>)] = &[
            ("nothing", vec![], None),
            ("one", vec![record("a", 7)], Some("a")),
            (
                "a former leader's record not expired yet",
                vec![record("a", 7), record("b", 9)],
                Some("b"),
            ),
            (
                "order does not matter",
                vec![record("b", 9), record("a", 7)],
                Some("b"),
            ),
        ];
        for (what, records, want) in cases {
            let got = current_leader(records.iter().cloned());
            assert_eq!(got.map(|r| r.node), want.map(String::from), "{what}");
        }
    }

    #[test]
    fn proclaimed_values_are_short_and_printable() {
        assert!(check_value("http://10.0.0.7:8080").is_ok());
        assert!(check_value("").is_ok());
        let long = "x".repeat(MAX_VALUE_BYTES + 1);
        assert!(check_value(&long).unwrap_err().contains("4097 bytes"));
        assert!(
            check_value("a\u{1b}[2J")
                .unwrap_err()
                .contains("control character")
        );
        assert!(leader_column("n/1").starts_with(LEADER_PREFIX));
        assert!(
            "fence" < LEADER_PREFIX,
            "the fencing read never passes leader cells"
        );
    }
}
