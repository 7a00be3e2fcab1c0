//! A shared acquisition's steps (docs/design.md §3a): what a permit or a
//! reader does on each read of the queue and of `main`, as pure decisions
//! on what the read showed. The queue and combined locks' waiting line
//! performs them (its `shared` driver).
//!
//! A shared acquisition keeps nothing in `main` while it waits: it writes
//! its `main` cell only when a read showed room for it (P1 on the cells
//! there, P3 on the queue), reads `main` after that write, and holds or
//! withdraws on what that read shows. So it writes no reservation and
//! disregards none (P1), and a waiter never stands in anyone's way longer
//! than one round trip and a delete. An exclusive waiter never reserves
//! behind a shared one: the shared queue cell names no algorithm the
//! exclusive waiter's Q6 accepts (`queue::parse_queue_cell` reads
//! `queue:shared` as no algorithm).

use crate::algorithm::Algorithm;
use crate::cell::Cell;
use crate::cells::is_reservation;
use crate::queue::{TIME_DIGITS, parse_queue_cell, queue_value};
use crate::sharing::{KindConflict, MainVerdict, Sharing, judge_main, may_try};

/// The value of a shared acquisition's queue cell: the exclusive layout
/// (`{arrival}:{algorithm}`) followed by `:` and how it shares.
pub fn shared_queue_value(
    arrival: crate::cell::Timestamp,
    algorithm: Algorithm,
    sharing: Sharing,
) -> Vec<u8> {
    let mut value = queue_value(arrival, algorithm);
    if let Some(suffix) = sharing.suffix() {
        value.push(b':');
        value.extend_from_slice(suffix.as_bytes());
    }
    value
}

/// The value of a shared acquisition's `main` cell: its algorithm, then
/// how it shares (`queue:shared`, `queue:permits=3`); the algorithm alone
/// for an exclusive one, as every holding before.
pub fn shared_main_value(algorithm: Algorithm, sharing: Sharing) -> Vec<u8> {
    match sharing.suffix() {
        Some(suffix) => format!("{}:{suffix}", algorithm.as_str()).into_bytes(),
        None => algorithm.as_str().as_bytes().to_vec(),
    }
}

/// What follows a standing cell's sharing (see [`Step::TakeStand`]).
const STANDING: &str = ":standing";

/// The value of a shared acquisition's *standing* `main` cell: written
/// while there is no room, under the waiting TTL, refreshed by the
/// waiter's reads, re-marked a holding once a read after it shows room —
/// a waiter's cell, not a holding, as a reservation is; counted as its
/// sharing by every acquisition all the same (P1).
pub fn standing_main_value(algorithm: Algorithm, sharing: Sharing) -> Vec<u8> {
    let mut value = shared_main_value(algorithm, sharing);
    value.extend_from_slice(STANDING.as_bytes());
    value
}

/// Whether a `main` cell's value is a shared acquisition's standing cell.
pub fn is_standing(value: &[u8]) -> bool {
    value.ends_with(STANDING.as_bytes()) && main_sharing(value) != Sharing::Exclusive
}

/// The algorithm a shared queue cell's value names (`{arrival}:{algorithm}`
/// or `{arrival}:{algorithm}:{sharing}`); `None` for anything else.
pub fn queue_algorithm(value: &[u8]) -> Option<Algorithm> {
    let value = std::str::from_utf8(value).ok()?;
    let rest = value.get(TIME_DIGITS..)?.strip_prefix(':')?;
    let algorithm = rest.split_once(':').map_or(rest, |(a, _)| a);
    algorithm.parse().ok()
}

/// How the acquisition that wrote a `main` cell shares the lock: a
/// suffix lockshift writes says; anything else — a plain holding, a
/// reservation, a legacy or foreign cell, a suffix no build of this
/// version writes — counts as exclusive, which only ever makes a shared
/// acquisition wait or stop, never hold.
pub fn main_sharing(value: &[u8]) -> Sharing {
    if is_reservation(value) {
        return Sharing::Exclusive;
    }
    std::str::from_utf8(value)
        .ok()
        .and_then(|v| v.split_once(':'))
        .and_then(|(algorithm, suffix)| {
            algorithm.parse::<Algorithm>().ok()?;
            let suffix = suffix.strip_suffix(STANDING).unwrap_or(suffix);
            Sharing::from_suffix(Some(suffix)).ok()
        })
        .unwrap_or(Sharing::Exclusive)
}

/// How the waiter whose queue cell has `value` shares the lock: the
/// suffix after the arrival and the algorithm; exclusive without one (and
/// for a suffix this build does not know: it waits behind it, P3).
pub fn queue_sharing(value: &[u8]) -> Sharing {
    std::str::from_utf8(value)
        .ok()
        .filter(|v| v.len() > TIME_DIGITS && v.as_bytes()[TIME_DIGITS] == b':')
        .and_then(|v| v[TIME_DIGITS + 1..].split_once(':'))
        .and_then(|(_, suffix)| Sharing::from_suffix(Some(suffix)).ok())
        .unwrap_or(Sharing::Exclusive)
}

/// How the live waiters ahead of `me` (my queue column) share the lock,
/// in arrival order; `None` when my cell is not in the read. Cells `dead`
/// says are dead waiters' are skipped (Q3); `me` never is. The order is
/// the queue's (`queue::place`): arrival, then column.
pub fn ahead_of(cells: &[Cell], me: &str, dead: impl Fn(&Cell) -> bool) -> Option<Vec<Sharing>> {
    let arrival = |c: &Cell| parse_queue_cell(&c.column, &c.value).map_or(0, |e| e.arrival);
    let mine = cells.iter().find(|c| c.column == me)?;
    let my_place = (arrival(mine), me);
    let mut ahead: Vec<(u64, &str, Sharing)> = cells
        .iter()
        .filter(|c| c.column != me && !dead(c))
        .map(|c| (arrival(c), c.column.as_str(), queue_sharing(&c.value)))
        .filter(|(a, column, _)| (*a, *column) < my_place)
        .collect();
    ahead.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    Some(ahead.into_iter().map(|(_, _, s)| s).collect())
}

/// P2 for an exclusive acquisition (a plain lock, a writer) on a read of
/// `main`: a semaphore's permit there is a kind it can never share with —
/// the conflict, to stop on, instead of waiting it out. (Shared cells are
/// a read/write lock's readers, whose writer it is: it waits for them.)
pub fn exclusive_conflict(main: &[Cell]) -> Option<KindConflict> {
    main.iter()
        .map(|c| main_sharing(&c.value))
        .find(|s| matches!(s, Sharing::Permit { .. }))
        .map(|theirs| KindConflict {
            mine: Sharing::Exclusive,
            theirs,
        })
}

/// What a shared acquisition does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Its queue cell is gone (expired, cleaned): withdraw any `main` cell
    /// and arrive again.
    Arrive,
    /// Its turn has not come (P3): withdraw any `main` cell, look at the
    /// queue again after a pause in proportion to its distance.
    Wait,
    /// Its turn has come, but not room for it: read `main` (and the
    /// queue) again soon, writing nothing.
    LookAtMain,
    /// There is room: write my `main` cell as the holding and read `main`
    /// after it (P1's verifying read).
    Enter,
    /// No room, but its turn lets it stand: write my `main` cell marked
    /// standing ([`standing_main_value`], under the waiting TTL) and read
    /// `main` after it; stand while the reads show no room.
    TakeStand,
    /// A read after my write showed room (P1): the lock is held.
    Hold,
    /// A read after my standing write showed no room yet, and its turn
    /// still lets it stand: keep the cell and read again soon. Each read
    /// after the write is a verifying read, so the hand-off is the
    /// holder's delete and one read, as a reservation's.
    Stand,
    /// A read after my write showed no room, and my cell is not one that
    /// may stand (a holding whose room went, or a permit no longer first):
    /// delete my `main` cell, then look again soon.
    Withdraw,
}

/// P3, generalised to let permits enter together: whether a waiter sharing
/// `mine`, with the live waiters `ahead` of it in arrival order, may try
/// `main` at all. Exclusive: first in line. Shared: no exclusive waiter
/// ahead. A permit of `n`: fewer than `n` waiters ahead (each of them may
/// take a permit first).
///
/// # Errors
/// [`KindConflict`] for a waiter ahead of a kind `mine` cannot share with
/// (P2).
pub fn turn(mine: Sharing, ahead: &[Sharing]) -> Result<bool, KindConflict> {
    if let Sharing::Permit { permits } = mine {
        if let Some(theirs) = ahead.iter().find(|t| !mine.same_kind(**t)) {
            return Err(KindConflict {
                mine,
                theirs: *theirs,
            });
        }
        return Ok(ahead.len() < permits.get() as usize);
    }
    may_try(mine, ahead)
}

/// Whether a waiter sharing `mine` whose turn has not come (see [`turn`])
/// is next: one hand-off from its turn — a permit of `n` with `n` waiters
/// ahead, a reader with one writer ahead. Such a waiter watches the queue
/// and `main` together at the head's pace, so it can enter on the read
/// that shows its turn, as the second in line reserves behind the first
/// (Q6) for an exclusive one.
pub fn next_in_line(mine: Sharing, ahead: &[Sharing]) -> bool {
    match mine {
        Sharing::Permit { permits } => ahead.len() == permits.get() as usize,
        Sharing::Shared => ahead.iter().filter(|s| **s == Sharing::Exclusive).count() == 1,
        Sharing::Exclusive => ahead.len() == 1,
    }
}

/// What a read of the queue row says to a shared acquisition sharing
/// `mine`: the sharing of the live waiters ahead ([`ahead_of`]), `None`
/// for my cell missing.
///
/// # Errors
/// As [`turn`].
pub fn after_queue(mine: Sharing, ahead: Option<&[Sharing]>) -> Result<Step, KindConflict> {
    let Some(ahead) = ahead else {
        return Ok(Step::Arrive);
    };
    Ok(if turn(mine, ahead)? {
        Step::LookAtMain
    } else {
        Step::Wait
    })
}

/// What a read of `main`, with the queue read just before or beside it
/// (`ahead`), says to a shared acquisition sharing `mine` whose `main`
/// column is `me`; `written` when my `main` cell was written before the
/// read began.
///
/// Every cell but mine counts, reservations included (P1: shared
/// acquisitions disregard none). A permit writes only when the permits
/// the waiters ahead of it may take still leave one, so permits pass in
/// arrival order, several at a time; once written, P1 alone decides.
/// Whose turn it is may *stand* — keep its cell in `main` while there is
/// no room: a reader (readers never count each other out), and the first
/// permit in line. Two standing permits could each count the other out
/// for ever, as two reservations could (Q5); the first in line is one
/// waiter in every read of the queue that shows both, and a permit that
/// is no longer first withdraws.
///
/// # Errors
/// [`KindConflict`] for a waiter ahead or a cell in `main` of a kind
/// `mine` cannot share with (P2).
pub fn after_main(
    mine: Sharing,
    ahead: Option<&[Sharing]>,
    me: &str,
    main: &[Cell],
    written: bool,
) -> Result<Step, KindConflict> {
    let others = main
        .iter()
        .filter(|c| c.column != me)
        .map(|c| main_sharing(&c.value));
    let verdict = judge_main(mine, others.clone())?;
    match after_queue(mine, ahead)? {
        Step::LookAtMain => {}
        other => return Ok(other),
    }
    let ahead = ahead.map_or(0, <[Sharing]>::len);
    let may_stand = match mine {
        // A reader never stands beside an exclusive waiter's reservation:
        // that waiter believes itself first and waits for every cell in
        // its way — a reader that skipped it as dead (Q3) and stood would
        // wait for it in turn. Yielding costs order, never exclusion.
        Sharing::Shared => !main
            .iter()
            .any(|c| c.column != me && is_reservation(&c.value)),
        Sharing::Permit { .. } => ahead == 0,
        Sharing::Exclusive => true,
    };
    let my_cell = main.iter().find(|c| c.column == me);
    Ok(match (written, my_cell, verdict) {
        // My acknowledged write is not there: someone removed it; look
        // again as if it had never been written.
        (true, None, _) | (false, _, _) => {
            let room = match mine {
                Sharing::Permit { permits } => {
                    verdict == MainVerdict::Holds
                        && others.count().saturating_add(ahead) < permits.get() as usize
                }
                _ => verdict == MainVerdict::Holds,
            };
            if room {
                Step::Enter
            } else if may_stand {
                Step::TakeStand
            } else {
                Step::LookAtMain
            }
        }
        (true, Some(_), MainVerdict::Holds) => Step::Hold,
        (true, Some(cell), MainVerdict::Wait) if may_stand && is_standing(&cell.value) => {
            Step::Stand
        }
        (true, Some(_), MainVerdict::Wait) => Step::Withdraw,
    })
}

#[cfg(test)]
#[path = "shared_waiter_tests.rs"]
mod tests;
