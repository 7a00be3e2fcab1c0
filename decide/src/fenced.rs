//! The rules of a fenced write (docs/design.md §5, "Fenced writes"): which
//! token wins a cell ([`decide`]), and what a round whose condition did
//! not hold leads to ([`next_round`]). Every store backend applies them:
//! the embedded store to its replicas, the CQL backend to the answers of
//! its lightweight transactions.

use std::fmt;

/// The rule a fenced write applies, on the token `recorded` in the cell
/// (`None`: none yet) and the writer's `token`: written when nothing larger
/// is recorded — an equal token is the same holder writing again.
pub fn decide(recorded: Option<u64>, token: u64) -> Decision {
    match recorded {
        Some(recorded) if recorded > token => Decision::Refuse { recorded },
        _ => Decision::Apply,
    }
}

/// What [`decide`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Write the value and record the token.
    Apply,
    /// Refuse: `recorded` is larger than the writer's token.
    Refuse {
        /// The token recorded in the cell.
        recorded: u64,
    },
}

/// The condition one round of a fenced write is sent with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Condition {
    /// `IF fence <= token`: the cell records a token, not a larger one.
    AtMost,
    /// `IF fence = null`: the cell records none (or does not exist).
    Unfenced,
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Condition::AtMost => "IF fence <= ?",
            Condition::Unfenced => "IF fence = null",
        })
    }
}

/// What to do after a round whose condition was not met, given the fence
/// the database answered with (`current`, `None` for a null or a missing
/// row) and the writer's `token`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Send another round with this condition.
    Send(Condition),
    /// Refused: a larger token is recorded.
    Refused {
        /// The token recorded in the cell.
        recorded: u64,
    },
}

/// The most rounds a fenced write sends: `AtMost`, then `Unfenced` for a
/// cell without a fence, then `AtMost` once more if a racing first write
/// recorded a token not larger than ours in between. Beyond that the cell
/// changes under us faster than we can write it, and the write fails:
/// every round answered "not applied".
pub const MAX_ROUNDS: u32 = 3;

/// The step after a round `sent` with a condition that did not hold and
/// answered `current` ([`Condition`]): pure, so the CQL backend's loop is
/// table-tested.
pub fn next_round(sent: Condition, current: Option<u64>, token: u64) -> Next {
    match (decide(current, token), current) {
        (Decision::Refuse { recorded }, _) => Next::Refused { recorded },
        // `IF fence <= ?` fails on a null: ask for the null.
        (Decision::Apply, None) if sent == Condition::AtMost => Next::Send(Condition::Unfenced),
        // `IF fence = null` lost to a racing first write of a token not
        // larger than ours, or (impossible unless the row changed between
        // the answer and us) a null we were told was there: try `<=`.
        (Decision::Apply, _) => Next::Send(Condition::AtMost),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decide_refuses_only_a_larger_recorded_token() {
        // (recorded, token, expected)
        let cases = [
            (None, 0, Decision::Apply),
            (None, 41, Decision::Apply),
            (Some(41), 41, Decision::Apply),
            (Some(41), 42, Decision::Apply),
            (Some(42), 41, Decision::Refuse { recorded: 42 }),
            (Some(u64::MAX), 0, Decision::Refuse { recorded: u64::MAX }),
        ];
        for (i, (recorded, token, expected)) in cases.into_iter().enumerate() {
            assert_eq!(decide(recorded, token), expected, "case #{i}");
        }
    }

    #[test]
    fn next_round_asks_for_the_null_then_retries_a_race() {
        use Condition::*;
        // (sent, current, token, expected)
        let cases = [
            (AtMost, None, 5, Next::Send(Unfenced)),
            (AtMost, Some(6), 5, Next::Refused { recorded: 6 }),
            (Unfenced, Some(6), 5, Next::Refused { recorded: 6 }),
            (Unfenced, Some(4), 5, Next::Send(AtMost)),
            (Unfenced, Some(5), 5, Next::Send(AtMost)),
            (Unfenced, None, 5, Next::Send(AtMost)),
            // `<=` failed yet the answer is not larger: the row moved; retry.
            (AtMost, Some(5), 5, Next::Send(AtMost)),
        ];
        for (i, (sent, current, token, expected)) in cases.into_iter().enumerate() {
            assert_eq!(next_round(sent, current, token), expected, "case #{i}");
        }
    }

    #[test]
    fn conditions_read_as_their_cql() {
        assert_eq!(Condition::AtMost.to_string(), "IF fence <= ?");
        assert_eq!(Condition::Unfenced.to_string(), "IF fence = null");
    }
}
