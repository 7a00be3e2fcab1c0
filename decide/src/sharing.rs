//! Shared acquisitions on the queue: a semaphore's permits and a read/write
//! lock's two sides (docs/design.md §3a, rules P1–P4).
//!
//! An acquisition says how it shares its lock — [`Sharing`] — in the
//! values of the cells it writes: after the algorithm in a `main` cell
//! (`queue:shared`, `queue:permits=3`), after the arrival and the algorithm
//! in a queue cell (`{arrival}:queue:permits=3`). An exclusive acquisition —
//! every lock so far, and a read/write lock's writer — writes no suffix, so
//! its cells read as they always did. [`judge_main`] is P1 and P2 on what a
//! read of `main` showed; [`may_try`] is P3 on what a read of the queue
//! showed.

use std::fmt;
use std::num::NonZeroU32;

/// How an acquisition shares its lock with other acquisitions of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Sharing {
    /// Alone: a plain lock, or a read/write lock's writer.
    #[default]
    Exclusive,
    /// Beside other shared acquisitions and never beside an exclusive one:
    /// a read/write lock's reader.
    Shared,
    /// One of a semaphore's permits: beside at most `permits − 1` other
    /// permits of the same semaphore, and nothing else.
    Permit {
        /// How many permits the semaphore has: the semaphore's, the same
        /// for every acquisition of it (P2).
        permits: NonZeroU32,
    },
}

/// The text of a shared acquisition's suffix.
const SHARED: &str = "shared";
/// What precedes the number of permits in a permit's suffix.
const PERMITS: &str = "permits=";

impl Sharing {
    /// One of `permits` permits; `None` for zero.
    pub fn permit(permits: u32) -> Option<Sharing> {
        NonZeroU32::new(permits).map(|permits| Sharing::Permit { permits })
    }

    /// What follows the algorithm in the value of a cell this acquisition
    /// writes (`shared`, `permits=3`); `None` for an exclusive one, whose
    /// cells carry no suffix.
    pub fn suffix(self) -> Option<String> {
        match self {
            Sharing::Exclusive => None,
            Sharing::Shared => Some(SHARED.to_string()),
            Sharing::Permit { permits } => Some(format!("{PERMITS}{permits}")),
        }
    }

    /// The sharing a suffix written by [`suffix`](Self::suffix) names:
    /// `None` (no suffix) is exclusive; a suffix it does not know is an
    /// error naming it.
    ///
    /// # Errors
    /// [`UnknownSharing`] for a suffix no lockshift build writes (a newer
    /// build's, or something else's).
    pub fn from_suffix(suffix: Option<&str>) -> Result<Sharing, UnknownSharing> {
        let Some(suffix) = suffix else {
            return Ok(Sharing::Exclusive);
        };
        if suffix == SHARED {
            return Ok(Sharing::Shared);
        }
        suffix
            .strip_prefix(PERMITS)
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u32>().ok())
            .and_then(Sharing::permit)
            .ok_or_else(|| UnknownSharing(suffix.to_string()))
    }

    /// Whether an acquisition sharing `self` may hold beside one sharing
    /// `other` at all (P2): a permit only beside permits of the same
    /// number; shared and exclusive are the two sides of one read/write
    /// lock, so a plain lock is its writer.
    pub fn same_kind(self, other: Sharing) -> bool {
        match (self, other) {
            (Sharing::Permit { permits: a }, Sharing::Permit { permits: b }) => a == b,
            (Sharing::Permit { .. }, _) | (_, Sharing::Permit { .. }) => false,
            _ => true,
        }
    }
}

impl fmt::Display for Sharing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sharing::Exclusive => f.write_str("an exclusive lock"),
            Sharing::Shared => f.write_str("a shared (read) lock"),
            Sharing::Permit { permits } => write!(f, "a semaphore of {permits} permits"),
        }
    }
}

/// How a cell's acquisition shares, in reports: `exclusive`, `shared`,
/// `permits=3`.
impl serde::Serialize for Sharing {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.suffix().unwrap_or_else(|| "exclusive".to_string()))
    }
}

/// A sharing suffix no lockshift build writes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a cell's value names an unknown way of sharing a lock: {0:?}")]
pub struct UnknownSharing(pub String);

/// Two acquisitions of one lock that cannot share it by kind (P2): a
/// semaphore taken as a plain lock, or with another number of permits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("taken here as {mine} and elsewhere as {theirs}: one name is one kind of lock")]
pub struct KindConflict {
    /// How this acquisition shares the lock.
    pub mine: Sharing,
    /// How another acquisition of it, seen in the same row, does.
    pub theirs: Sharing,
}

/// What a read of `main`, made after this acquisition's own `main` write,
/// says (P1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MainVerdict {
    /// The acquisition holds.
    Holds,
    /// Too many others, or one it cannot share with: not now.
    Wait,
}

/// P1 and P2 on a read of `main` made after `mine`'s own `main` write:
/// `others` are how the other acquisitions whose cells the read showed
/// share the lock (holders, and entrants like this one). Exclusive holds
/// only alone; shared only beside no exclusive; a permit of `n` only
/// beside fewer than `n` others.
///
/// # Errors
/// [`KindConflict`] for another cell of a kind `mine` can never share
/// with (P2): said, never waited out.
pub fn judge_main(
    mine: Sharing,
    others: impl IntoIterator<Item = Sharing>,
) -> Result<MainVerdict, KindConflict> {
    let mut count: u64 = 0;
    let mut exclusive = false;
    for theirs in others {
        if !mine.same_kind(theirs) {
            return Err(KindConflict { mine, theirs });
        }
        count += 1;
        exclusive |= theirs == Sharing::Exclusive;
    }
    let holds = match mine {
        Sharing::Exclusive => count == 0,
        Sharing::Shared => !exclusive,
        Sharing::Permit { permits } => count < u64::from(permits.get()),
    };
    Ok(if holds {
        MainVerdict::Holds
    } else {
        MainVerdict::Wait
    })
}

/// P3 on a read of the queue: whether a waiter sharing `mine`, with the
/// live waiters `ahead` of it in arrival order, may try to enter `main`
/// now. Exclusive: first in line. Shared: no exclusive waiter ahead, so a
/// writer in line holds back every reader behind it. A permit: first in
/// line here, the least P3 asks; the waiting line lets up to `n` permits
/// try together, each leaving a permit to those ahead of it
/// ([`crate::shared_waiter::turn`]).
///
/// # Errors
/// [`KindConflict`] for a waiter ahead of a kind `mine` can never share
/// with (P2).
pub fn may_try(mine: Sharing, ahead: &[Sharing]) -> Result<bool, KindConflict> {
    if let Some(theirs) = ahead.iter().find(|t| !mine.same_kind(**t)) {
        return Err(KindConflict {
            mine,
            theirs: *theirs,
        });
    }
    Ok(match mine {
        Sharing::Exclusive | Sharing::Permit { .. } => ahead.is_empty(),
        Sharing::Shared => !ahead.contains(&Sharing::Exclusive),
    })
}

/// Whether `holdings` — how the holders one read of `main` showed share
/// the lock — are more than their kinds allow together (P1, P2): more
/// than one exclusive, an exclusive beside anyone, permits past their
/// number or of two numbers. A crowd `migrate status` warns of; readers
/// together and up to `n` permits of `n` are not one.
pub fn crowded(holdings: &[Sharing]) -> bool {
    let Some(first) = holdings.first() else {
        return false;
    };
    match first {
        Sharing::Exclusive => holdings.len() > 1,
        Sharing::Shared => holdings.iter().any(|h| *h != Sharing::Shared),
        Sharing::Permit { permits } => {
            holdings.len() > permits.get() as usize || holdings.iter().any(|h| h != first)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const X: Sharing = Sharing::Exclusive;
    const S: Sharing = Sharing::Shared;

    fn p(n: u32) -> Sharing {
        Sharing::permit(n).unwrap()
    }

    #[test]
    fn a_crowd_is_more_holders_than_their_kinds_allow() {
        assert!(!crowded(&[]));
        assert!(!crowded(&[X]));
        assert!(crowded(&[X, X]));
        assert!(!crowded(&[S, S, S]));
        assert!(crowded(&[S, X]));
        assert!(crowded(&[X, S]));
        assert!(!crowded(&[p(3), p(3), p(3)]));
        assert!(crowded(&[p(3), p(3), p(3), p(3)]));
        assert!(crowded(&[p(3), p(2)]));
    }

    #[test]
    fn suffixes_read_back_as_written() {
        for sharing in [X, S, p(1), p(3), p(u32::MAX)] {
            let suffix = sharing.suffix();
            assert_eq!(Sharing::from_suffix(suffix.as_deref()), Ok(sharing));
        }
        assert_eq!(S.suffix().as_deref(), Some("shared"));
        assert_eq!(p(3).suffix().as_deref(), Some("permits=3"));
        for bad in [
            "",
            "permits=0",
            "permits=",
            "permits=-1",
            "permits=+3",
            "reader",
            "permits=99999999999",
        ] {
            assert_eq!(
                Sharing::from_suffix(Some(bad)),
                Err(UnknownSharing(bad.to_string())),
                "{bad:?}"
            );
        }
        assert_eq!(Sharing::permit(0), None);
    }

    /// P1 and P2, as a table: (mine, others seen in `main`, verdict).
    #[test]
    fn main_is_judged_by_kind_and_count() {
        use MainVerdict::{Holds, Wait};
        let cases: Vec<(Sharing, Vec<Sharing>, Result<MainVerdict, KindConflict>)> = vec![
            (X, vec![], Ok(Holds)),
            (X, vec![X], Ok(Wait)),
            (X, vec![S], Ok(Wait)),
            (S, vec![], Ok(Holds)),
            (S, vec![S, S, S], Ok(Holds)),
            (S, vec![S, X], Ok(Wait)),
            (p(1), vec![], Ok(Holds)),
            (p(1), vec![p(1)], Ok(Wait)),
            (p(3), vec![p(3), p(3)], Ok(Holds)),
            (p(3), vec![p(3), p(3), p(3)], Ok(Wait)),
            (
                p(3),
                vec![p(3), p(4)],
                Err(KindConflict {
                    mine: p(3),
                    theirs: p(4),
                }),
            ),
            (
                p(3),
                vec![X],
                Err(KindConflict {
                    mine: p(3),
                    theirs: X,
                }),
            ),
            (
                X,
                vec![p(2)],
                Err(KindConflict {
                    mine: X,
                    theirs: p(2),
                }),
            ),
            (
                S,
                vec![p(2)],
                Err(KindConflict {
                    mine: S,
                    theirs: p(2),
                }),
            ),
        ];
        for (mine, others, want) in cases {
            assert_eq!(
                judge_main(mine, others.clone()),
                want,
                "{mine:?} beside {others:?}"
            );
        }
    }

    /// P3, as a table: (mine, waiters ahead, may try).
    #[test]
    fn who_may_try_follows_the_line() {
        let cases: Vec<(Sharing, Vec<Sharing>, Result<bool, KindConflict>)> = vec![
            (X, vec![], Ok(true)),
            (X, vec![S], Ok(false)),
            (S, vec![S, S], Ok(true)),
            (S, vec![S, X, S], Ok(false)),
            (p(4), vec![], Ok(true)),
            (p(4), vec![p(4)], Ok(false)),
            (
                p(4),
                vec![p(2)],
                Err(KindConflict {
                    mine: p(4),
                    theirs: p(2),
                }),
            ),
            (
                S,
                vec![p(2)],
                Err(KindConflict {
                    mine: S,
                    theirs: p(2),
                }),
            ),
        ];
        for (mine, ahead, want) in cases {
            assert_eq!(may_try(mine, &ahead), want, "{mine:?} behind {ahead:?}");
        }
    }

    /// The counting lemma behind P1 (docs/design.md §3a), checked by brute
    /// force: `k` acquisitions each write then read; whatever the order of
    /// those `2k` steps (each write before its own read), if each holds by
    /// P1 on the cells written before its read began, no more than the
    /// kind allows hold at once.
    #[test]
    fn no_interleaving_lets_more_hold_than_the_kind_allows() {
        // Each acquisition: (sharing, write step, read step); a read sees
        // the writes at earlier steps (a write that ended before the read
        // began: read-your-writes, S5). Interleavings of up to 4
        // acquisitions: every assignment of distinct steps.
        fn check(
            kinds: &[Sharing],
            judge: &dyn Fn(Sharing, Vec<Sharing>) -> bool,
        ) -> Result<(), String> {
            let mut broken = None;
            let k = kinds.len();
            let steps: Vec<usize> = (0..2 * k).collect();
            permute(&steps, &mut Vec::new(), &mut |order| {
                // order[i]: the step of event i; events 2j (write of j) and
                // 2j + 1 (read of j).
                if (0..k).any(|j| order[2 * j] > order[2 * j + 1]) {
                    return;
                }
                let holders: Vec<usize> = (0..k)
                    .filter(|&j| {
                        let seen = (0..k)
                            .filter(|&o| o != j && order[2 * o] < order[2 * j + 1])
                            .map(|o| kinds[o]);
                        judge(kinds[j], seen.collect())
                    })
                    .collect();
                let held: Vec<Sharing> = holders.iter().map(|&j| kinds[j]).collect();
                let too_many = held.iter().any(|h| match h {
                    Sharing::Exclusive => held.len() > 1,
                    Sharing::Shared => false,
                    Sharing::Permit { permits } => held.len() > permits.get() as usize,
                });
                if too_many && broken.is_none() {
                    broken = Some(format!("{kinds:?}, steps {order:?}: {held:?} hold at once"));
                }
            });
            broken.map_or(Ok(()), Err)
        }
        let p1 = |mine, seen: Vec<Sharing>| judge_main(mine, seen) == Ok(MainVerdict::Holds);
        // The control: a permit that counts itself out (fewer than n + 1).
        let off_by_one = |mine, seen: Vec<Sharing>| match mine {
            Sharing::Permit { permits } => seen.len() <= permits.get() as usize,
            _ => p1(mine, seen),
        };
        fn permute(rest: &[usize], acc: &mut Vec<usize>, f: &mut dyn FnMut(&[usize])) {
            if rest.is_empty() {
                f(acc);
                return;
            }
            for i in 0..rest.len() {
                let mut r = rest.to_vec();
                let x = r.remove(i);
                acc.push(x);
                permute(&r, acc, f);
                acc.pop();
            }
        }
        for kinds in [
            vec![X, X],
            vec![X, S, S],
            vec![S, S, X, S],
            vec![p(1), p(1), p(1)],
            vec![p(2), p(2), p(2)],
            vec![p(3), p(3), p(3), p(3)],
        ] {
            assert_eq!(check(&kinds, &p1), Ok(()));
        }
        assert!(check(&[p(2), p(2), p(2)], &off_by_one).is_err());
    }
}
