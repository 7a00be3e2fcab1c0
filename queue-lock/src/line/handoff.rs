//! The hand-off: what a read of `main`, made after the waiter's own `main`
//! write, says — and why a waiter may leave its cell there while someone
//! else holds (a *reservation*).
//!
//! # The verdict (Q1)
//!
//! The lock is mine only on a read, made after my own `main` write, that
//! shows my cell alone: Lemma 1 on `main` against every other writer of
//! `main` that verifies (queue, combined). That is the only way any waiter
//! of this crate ever takes the lock — entering, preparing, or on the fast
//! path.
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
//! - **Who.** Only the first waiter in line writes `main` (plus, for one
//!   round trip, an arrival on the fast path). Holders leave the queue once
//!   their verifying read is done (Q2), so the first waiter never writes
//!   beside a holder that is still verifying: whoever is alone in `main`
//!   while it is first has verified already — or is an arrival that is not
//!   first and withdraws.
//! - **Marked.** A reservation is not a holding: it is marked, so the
//!   census, `migrate status` and other waiters can tell, and re-marked a
//!   holding once claimed (in the background).
//! - **Never for ever (Q5).** Two waiters can each believe they are first
//!   (a clock behind the others sorts a late arrival ahead), so two
//!   reservations can meet; once the holder leaves, each would wait for the
//!   other. A waiter that sees only reservations beside its own asks the
//!   queue: every one that is not first in line withdraws (always safe: it
//!   only gives up the preparation), and of two waiters in the queue at most
//!   one is first.
//!
//! [`RESERVED_VALUE`]: lockshift_lock::RESERVED_VALUE

use lockshift_lock::{OwnerId, RESERVED_VALUE};
use lockshift_store::Cell;

/// How many `main` cells a waiter reads when it looks at `main` after its
/// own write: enough to tell "a holding is among them" from "only
/// reservations" in every case but a crowd of four reservations with the
/// holding beyond them — and then the waiter only waits longer, it never
/// deadlocks (the first in line stays; the rest withdraw).
pub const MAIN_CELLS_READ: u32 = 4;

/// What a read of `main`, made after my own write, says (Q1, Q5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// My cell alone: the lock is mine.
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

/// Q1's verdict for `me` on `main` (read with [`MAIN_CELLS_READ`] as the
/// limit, or more).
pub fn verdict(me: &str, main: &[Cell]) -> Verdict {
    let mine = main.iter().any(|c| c.column == me);
    // A read short of the limit saw the whole row: without my cell there,
    // it is gone. (A full read may have stopped before it: cells sort by
    // owner id.)
    if !mine && main.len() < MAIN_CELLS_READ as usize {
        return Verdict::Missing;
    }
    if let Some(holder) = main
        .iter()
        .find(|c| c.column != me && c.value != RESERVED_VALUE)
    {
        return Verdict::Wait {
            holder: OwnerId::from_stored(&holder.column),
        };
    }
    if main.iter().all(|c| c.column == me) {
        return Verdict::Alone;
    }
    Verdict::OnlyReservations
}

/// Whether any cell of `main` other than `me`'s is there.
pub fn others_in(me: &str, main: &[Cell]) -> bool {
    main.iter().any(|c| c.column != me)
}

#[cfg(test)]
mod tests {
    use lockshift_store::Timestamp;

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
    fn verdicts_on_main() {
        let me = "me/01";
        let mine = cell(me, RESERVED_VALUE);
        let holder = cell("h/01", b"queue");
        let legacy = cell("legacy-thread", b"");
        let other_res = cell("w/01", RESERVED_VALUE);
        let wait = |h: &str| Verdict::Wait {
            holder: OwnerId::from_stored(h),
        };
        #[rustfmt::skip]
        let cases: Vec<(Vec<Cell>, Verdict)> = vec![
            (vec![mine.clone()], Verdict::Alone),
            (vec![holder.clone(), mine.clone()], wait("h/01")),
            (vec![legacy.clone(), mine.clone()], wait("legacy-thread")),
            (vec![mine.clone(), other_res.clone()], Verdict::OnlyReservations),
            (vec![holder.clone(), other_res.clone(), mine.clone()], wait("h/01")),
            (vec![], Verdict::Missing),
            (vec![holder.clone()], Verdict::Missing),
            (vec![other_res.clone()], Verdict::Missing),
            // Four reservations read, mine beyond them: still the queue's call.
            ((0..4).map(|i| cell(&format!("a/{i}"), RESERVED_VALUE)).collect(), Verdict::OnlyReservations),
        ];
        for (i, (main, want)) in cases.iter().enumerate() {
            assert_eq!(&verdict(me, main), want, "case #{i}");
        }
        assert!(others_in(me, &[holder]));
        assert!(!others_in(me, &[mine]));
    }
}
