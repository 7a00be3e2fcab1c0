//! The hand-off: what a read of `main`, made after the waiter's own `main`
//! write, says — and why a waiter may leave its cell there while someone
//! else holds (a *reservation*).
//!
//! # Where my cell stands (Q1)
//!
//! The lock is mine only on a read, made after my own `main` write, that
//! shows my cell alone — or beside cells that name me as the waiter they
//! are behind (Q6, below): Lemma 1 on `main` against every other writer of
//! `main` that verifies (queue, combined). That is the only way any waiter
//! of the waiting line ever takes the lock — entering, preparing, or on the
//! fast path.
//!
//! # Reservations (beyond the thesis)
//!
//! Most of a hand-off is the next waiter's work after the holder leaves:
//! notice, write `main`, read it back. The first waiter in line does the
//! write *while the holder still holds*: its cell waits in `main` beside
//! the holder's, marked [`RESERVED_VALUE`], and the first read that shows it
//! alone hands it the lock — the hand-off is then the holder's delete and
//! one read. Q1 still decides, so this is queue + queue, safe whoever else
//! is in `main`.
//!
//! - **Who.** Only the first waiter in line writes a plain reservation
//!   (plus, for one round trip, an arrival on the fast path). Holders leave
//!   the queue once their verifying read is done (Q2), so the first waiter
//!   never writes beside a holder that is still verifying: whoever is alone
//!   in `main` while it is first has verified already — or is an arrival
//!   that is not first and withdraws.
//! - **Marked.** A reservation is not a holding: it is marked, so the
//!   census, `migrate status` and other waiters can tell, and re-marked a
//!   holding once claimed (in the background).
//! - **Never for ever (Q5).** Two waiters can each believe they are first
//!   (a slow clock sorts a late arrival ahead), so two
//!   reservations can meet; once the holder leaves, each would wait for the
//!   other. A waiter that sees only reservations beside its own asks the
//!   queue: every one that is not first in line withdraws (always safe: it
//!   only gives up the preparation), and of two waiters in the queue at most
//!   one is first.
//!
//! # Reservations behind the waiter ahead (Q6, beyond the thesis)
//!
//! When holds are shorter than a round trip, the holder is gone before the
//! next waiter even learns it is first, and every hand-off is that chain:
//! the holder's queue delete lands, the next waiter's poll sees it, its
//! write, its read. So the queue waiter *second* in line writes its `main`
//! cell early too, marked as reserved behind the one directly ahead of it
//! ([`reserved_behind`]: the value names that waiter's *mark*, its owner id
//! and arrival — the owner id alone passes on to the next acquisition in
//! the same slot, L7, which must not take the cell for one behind it), and
//! the hand-off shrinks to that poll and one read of `main`.
//!
//! A plain reservation would make the waiter ahead fail Q1 on its
//! verifying read; so the waiter ahead, X, disregards the cells that name
//! it, and only those; and the owner W of a cell naming X claims only on
//! a read of `main` that *starts after* a read of the queue found X's queue cell gone (not
//! skipped as dead: gone). A cell that looks dead may be a paused
//! waiter's, so W falls back to a plain entry when the queue showed X only
//! as dead ([`Position::FirstPastDead`]). A cell that names someone else
//! counts as a reservation like any other. Why this keeps exclusion is
//! Q6's proof, written once in docs/design.md §3 ("The reservation behind
//! the waiter ahead"); the combined lock reserves in `shadow` too
//! (the combined lock's entry keeps the legacy argument's order).
//!
//! [`RESERVED_VALUE`]: crate::cells::RESERVED_VALUE
//! [`reserved_behind`]: crate::cells::reserved_behind
//! [`Position::FirstPastDead`]: crate::queue::Position::FirstPastDead

use crate::cell::Cell;
use crate::cells::{is_reservation, reserved_behind_of};
use crate::id::OwnerId;

/// How many `main` cells a waiter reads when it looks at `main` after its
/// own write: enough to tell "a holding is among them" from "only
/// reservations" in every case but a crowd of four reservations with the
/// holding beyond them — and then the waiter only waits longer, it never
/// deadlocks (the first in line stays; the rest withdraw).
pub const MAIN_CELLS_READ: u32 = 4;

/// Where my cell stands in a read of `main` (or, for the combined lock,
/// `shadow`) made after my own write: what Q1, Q5 and Q6 decide on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// My cell alone (beside cells behind me at most): the lock is mine.
    Alone,
    /// Someone else holds or is entering (a cell that is not a
    /// reservation): wait.
    Wait {
        /// The first such cell's owner.
        holder: OwnerId,
    },
    /// Only reservations beside mine: the queue decides who stays (Q5).
    OnlyReservations,
    /// My cell is not there (expired, cleaned, or never landed): whatever
    /// was prepared no longer stands.
    Missing,
}

/// Where `me` (my `main` column) stands, marked `mark` (what a
/// reservation behind me names, Q6) on `main` (read with
/// [`MAIN_CELLS_READ`] as the limit, or more).
pub fn standing(me: &str, mark: &str, main: &[Cell]) -> Standing {
    let mine = main.iter().any(|c| c.column == me);
    // A read short of the limit saw the whole row: without my cell there,
    // it is gone. (A full read may have stopped before it: cells sort by
    // owner id.)
    if !mine && main.len() < MAIN_CELLS_READ as usize {
        return Standing::Missing;
    }
    let others: Vec<&Cell> = main.iter().filter(|c| in_my_way(me, mark, c)).collect();
    if let Some(holder) = others.iter().find(|c| !is_reservation(&c.value)) {
        return Standing::Wait {
            holder: OwnerId::from_stored(&holder.column),
        };
    }
    if mine && others.is_empty() {
        return Standing::Alone;
    }
    Standing::OnlyReservations
}

/// The owner of the first holding (a cell that is not a reservation) in my
/// way in `main`, if any: whom I wait for.
pub fn holder_in_my_way(me: &str, mark: &str, main: &[Cell]) -> Option<OwnerId> {
    main.iter()
        .find(|c| in_my_way(me, mark, c) && !is_reservation(&c.value))
        .map(|c| OwnerId::from_stored(&c.column))
}

/// Whether any cell of `main` other than `me`'s is in my way (cells behind
/// me — naming `mark` — are not, Q6).
pub fn others_in(me: &str, mark: &str, main: &[Cell]) -> bool {
    main.iter().any(|c| in_my_way(me, mark, c))
}

/// Whether someone else's cells are in my way in `main`, and all of them
/// are reservations: nobody holds, and the queue decides who goes (Q5).
pub fn only_reservations_in_my_way(me: &str, mark: &str, main: &[Cell]) -> bool {
    let mut others = main.iter().filter(|c| in_my_way(me, mark, c)).peekable();
    others.peek().is_some() && others.all(|c| is_reservation(&c.value))
}

/// A cell of someone else's that is not a reservation behind me (Q6): one
/// naming my mark, not merely my owner id.
fn in_my_way(me: &str, mark: &str, cell: &Cell) -> bool {
    cell.column != me && reserved_behind_of(&cell.value).is_none_or(|(_, ahead)| ahead != mark)
}

#[cfg(test)]
mod tests {
    use crate::algorithm::Algorithm;
    use crate::cell::Timestamp;
    use crate::cells::{RESERVED_VALUE, reserved_behind};

    use super::*;

    fn cell(column: &str, value: &[u8]) -> Cell {
        Cell {
            column: column.to_string(),
            value: value.to_vec(),
            writetime: Timestamp::from_micros(1),
            ttl: None,
        }
    }

    #[test]
    fn where_my_cell_stands_in_main() {
        let me = "me/01";
        let mark = "me/01@00000000000000000007";
        let mine = cell(me, RESERVED_VALUE);
        let holder = cell("h/01", b"queue");
        let legacy = cell("legacy-thread", b"");
        let other_res = cell("w/01", RESERVED_VALUE);
        let behind_me = cell("w/02", &reserved_behind(Algorithm::Queue, mark));
        // Behind an earlier acquisition of my slot (L7): not behind me.
        let behind_my_slot = cell(
            "w/04",
            &reserved_behind(Algorithm::Queue, "me/01@00000000000000000003"),
        );
        let behind_other = cell("w/03", &reserved_behind(Algorithm::Combined, "h/01"));
        let wait = |h: &str| Standing::Wait {
            holder: OwnerId::from_stored(h),
        };
        #[rustfmt::skip]
        let cases: Vec<(Vec<Cell>, Standing)> = vec![
            (vec![mine.clone()], Standing::Alone),
            (vec![holder.clone(), mine.clone()], wait("h/01")),
            (vec![legacy.clone(), mine.clone()], wait("legacy-thread")),
            (vec![mine.clone(), other_res.clone()], Standing::OnlyReservations),
            (vec![holder.clone(), other_res.clone(), mine.clone()], wait("h/01")),
            (vec![], Standing::Missing),
            (vec![holder.clone()], Standing::Missing),
            (vec![other_res.clone()], Standing::Missing),
            // Four reservations read, mine beyond them: still the queue's call.
            ((0..4).map(|i| cell(&format!("a/{i}"), RESERVED_VALUE)).collect(), Standing::OnlyReservations),
            // Q6: cells behind me are not in my way; cells behind others are
            // reservations like any other.
            (vec![mine.clone(), behind_me.clone()], Standing::Alone),
            (vec![holder.clone(), mine.clone(), behind_me.clone()], wait("h/01")),
            (vec![mine.clone(), behind_other.clone()], Standing::OnlyReservations),
            (vec![mine.clone(), behind_me.clone(), other_res.clone()], Standing::OnlyReservations),
            (vec![behind_me.clone()], Standing::Missing),
            // A full read of cells behind me, mine beyond them: not Alone
            // (my cell was not seen), the queue's call.
            ((0..4).map(|i| cell(&format!("a/{i}"), &reserved_behind(Algorithm::Combined, mark))).collect(), Standing::OnlyReservations),
            // A reservation naming my owner id with another arrival is
            // someone else's business: in my way.
            (vec![mine.clone(), behind_my_slot.clone()], Standing::OnlyReservations),
            // One naming my bare owner id (an older build) too.
            (vec![mine.clone(), cell("w/05", &reserved_behind(Algorithm::Queue, me))], Standing::OnlyReservations),
        ];
        for (i, (main, want)) in cases.iter().enumerate() {
            assert_eq!(&standing(me, mark, main), want, "case #{i}");
        }
        assert!(others_in(me, mark, std::slice::from_ref(&holder)));
        assert!(!others_in(me, mark, std::slice::from_ref(&mine)));
        assert!(!others_in(me, mark, &[mine, behind_me.clone()]));
        assert!(others_in(me, mark, std::slice::from_ref(&behind_other)));
        assert!(others_in(me, mark, std::slice::from_ref(&behind_my_slot)));
        assert!(only_reservations_in_my_way(
            me,
            mark,
            &[behind_other.clone(), other_res.clone()]
        ));
        assert!(!only_reservations_in_my_way(
            me,
            mark,
            &[behind_other, holder]
        ));
        assert!(
            !only_reservations_in_my_way(me, mark, &[behind_me]),
            "nothing in my way"
        );
        assert!(!only_reservations_in_my_way(me, mark, &[]));
    }
}
