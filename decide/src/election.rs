//! Leader election on a lock (docs/design.md §5b): what a leader records
//! and how an observer tells who leads.
//!
//! A leader is the holder of the election's lock. Once it holds, it takes
//! the lock's fencing token and writes a [`LeaderRecord`] into the lock's
//! fencing row (`global_time`, row = the lock's name, column `leader:` and
//! its owner id) through its lease: the record carries the lease TTL, is
//! renewed with the lease and deleted at release, so it lives as long as
//! the leadership can — and longer only by a late landing (L5). The record
//! names the token it took. A reader reads the fencing cell and the
//! records in one slice and names the record with the greatest token only
//! if no later holder has taken a token since: E1, [`current_leader`].

use serde::{Deserialize, Serialize};

/// The first characters of every leader record's column; the fencing
/// cell (`fence`) sorts before them, so the fencing read (one cell from
/// `fence`) never passes a record, and a leader read starting at `fence`
/// finds the fencing cell first, then the records.
pub const LEADER_PREFIX: &str = "leader:";

/// How many leader records one read returns at most: more than one lives
/// only while a former leader's record runs out its TTL. A leader read
/// asks for one cell more, the fencing cell before them
/// ([`LEADER_READ_CELLS`]).
pub const LEADER_READ_LIMIT: u32 = 16;

/// How many cells one leader read asks for: the fencing cell, then up to
/// [`LEADER_READ_LIMIT`] records. Records sort by owner id, not by token,
/// so a row holding more records than that may hide the current one from
/// the read; by E1 the read then names nobody (what it found is below the
/// fence), never a former leader.
pub const LEADER_READ_CELLS: u32 = LEADER_READ_LIMIT + 1;

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
/// decoded, given the fencing cell that read found (`fence`: its write
/// timestamp, the last token handed out; `None`: the row has no fencing
/// cell) — E1 (docs/design.md §5b): the record with the greatest token,
/// if that token is at least the fence; `None`, nobody leads, otherwise.
///
/// - A record below the fence is a former leader's: a later holder took
///   the lock and a token after it, so its leadership is over however
///   long its record lives (a late landing, L5, can keep it a whole TTL).
///   Until that holder's own record is written nobody is named: readers
///   lag the lock by one write.
/// - A record whose token equals the fence is the current leader's (or,
///   while nobody took the lock after it, the last leader's).
/// - No fencing cell: data written before the rule, or by a holder that
///   never took a token — the greatest token leads, as before E1.
/// - A fence above every token nobody was given: a fencing attempt that
///   timed out and landed after a larger token was handed out. Only a
///   writer whose clock was ahead of that token's at the attempt can leave
///   one (§5b says when); nobody is named until the next holder's token
///   passes it — never a leader that is not current.
pub fn current_leader(
    records: impl IntoIterator<Item = LeaderRecord>,
    fence: Option<u64>,
) -> Option<LeaderRecord> {
    let newest = records.into_iter().max_by_key(|r| r.token)?;
    match fence {
        Some(fence) if newest.token < fence => None,
        _ => Some(newest),
    }
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

    /// E1, table-tested: the greatest token leads only if it is not below
    /// the fencing cell's token.
    #[test]
    fn the_greatest_token_leads_unless_a_later_holder_took_a_token() {
        type Case = (
            &'static str,
            Vec<LeaderRecord>,
            Option<u64>,
            Option<&'static str>,
        );
        let cases: Vec<Case> = vec![
            ("nothing", vec![], None, None),
            (
                "nothing, a fence: a holder that never led",
                vec![],
                Some(7),
                None,
            ),
            (
                "one, no fence (old data)",
                vec![record("a", 7)],
                None,
                Some("a"),
            ),
            (
                "one, its token is the fence",
                vec![record("a", 7)],
                Some(7),
                Some("a"),
            ),
            (
                "one below the fence: a later holder took the lock, its record not written yet",
                vec![record("a", 7)],
                Some(9),
                None,
            ),
            (
                "a former leader's record not expired yet",
                vec![record("a", 7), record("b", 9)],
                Some(9),
                Some("b"),
            ),
            (
                "order does not matter",
                vec![record("b", 9), record("a", 7)],
                Some(9),
                Some("b"),
            ),
            (
                "a former leader's record not expired yet, no fence (old data)",
                vec![record("a", 7), record("b", 9)],
                None,
                Some("b"),
            ),
            (
                "a lost leader's record landed late after its successor resigned",
                vec![record("a", 7)],
                Some(9),
                None,
            ),
            (
                "two former leaders' records, a third holder took the lock",
                vec![record("a", 7), record("b", 9)],
                Some(12),
                None,
            ),
            (
                "a fencing attempt landed late above the leader's token",
                vec![record("b", 9)],
                Some(10),
                None,
            ),
            (
                "a fence below the record (written by hand): the record leads",
                vec![record("a", 7)],
                Some(3),
                Some("a"),
            ),
        ];
        for (i, (what, records, fence, want)) in cases.into_iter().enumerate() {
            let got = current_leader(records, fence);
            assert_eq!(
                got.map(|r| r.node),
                want.map(String::from),
                "case #{i}: {what} (fence {fence:?})"
            );
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
            crate::cells::FENCE_COLUMN < LEADER_PREFIX,
            "the fencing read never passes leader cells, and a leader read from the fencing cell finds it first"
        );
    }
}
