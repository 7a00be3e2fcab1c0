//! What `migrate clean` may delete: its judgement on each lock cell it
//! found, as a pure function of the cell as the census saw it (its owner,
//! the owner's promise from the registry, its age and TTL left), the
//! operator's [`Criteria`] and the clock skew margin.
//!
//! `clean` looks at a cell twice. The first look ([`judge`]) says whether
//! the cell is overdue and, if so, whether it may go ([`Judged`]); the
//! second look ([`second_look`]), a promised renewal period and a half
//! later, deletes it only if it has not been rewritten since. Reading the
//! rows, waiting, deleting and printing are the operator tool's; the
//! reasons the delete cannot hurt a renewing owner are in its docs.
//!
//! # Whose rules decide (issues 11 and 23)
//!
//! Every cell is judged by what **its own owner** promised, never by the
//! operator's local settings (an operator without the fleet's config once
//! deleted the cell of a holder renewing every 60 s because the default
//! `renew_every` is 10 s):
//!
//! - **The promise.** The owner's *process* announces its lease in its
//!   heartbeat ([`LeasePromise`]: TTL, renewal period). A cell is matched
//!   to the row of the very process that wrote it — the owner id's node id
//!   *and* incarnation (docs/design.md §2a, §4 R5): a row of another
//!   process of the same node id (a replacement) says nothing about it.
//!   Otherwise the cell itself tells: its TTL, read back as `age + ttl
//!   left`, is at most a second (TTLs count in whole seconds) and the skew
//!   margin (an owner's clock ahead of this one makes its cells look
//!   younger) short of the TTL it was written with, so the longest it may
//!   have been is taken; and a lockshift owner renews more often than every
//!   TTL/2 (`lock.renew_every < lock.lease_ttl / 2`). A cell without a TTL
//!   promises nothing: `--stale-after` judges it, and nothing else.
//! - **The longer of the row and the cell** (issue 31). A registry row
//!   can understate its process's lease — a config edited after the row
//!   was written, a bug, a hand-written row — and the second look is what
//!   keeps a renewing owner's cell: it must outwait the owner's real next
//!   renewal, not the row's. The cell itself tells when that comes, and
//!   it tells it with the one number that neither a clock nor a late
//!   write bends, its TTL left:
//!
//!   - `age + left` is the TTL written only for a write applied as it was
//!     stamped. A write applied late (L5) counts its TTL from the landing,
//!     so `age + left` overstates it by the delay — taken as the TTL it
//!     would make every late write look alive, and `clean` could never
//!     delete one — and `age` crosses two clocks (the owner's stamp, this
//!     machine's now).
//!   - `left` is a sure lower bound of the TTL written (a cell cannot have
//!     more left than it was given). So a promised TTL below it is wrong
//!     about this cell, and cannot say its lease is over
//!     ([`crate::census::lease_over`]).
//!   - `left` also bounds the owner's next renewal. Written with TTL `n`
//!     at second `s + f` (on the store's clock) it expires at `s + n`; its
//!     owner renews within `n/2` of sending it (lockshift refuses
//!     `renew_every ≥ lease_ttl / 2`), and sent it no later than it was
//!     applied. So from any moment `t` the next renewal is due within
//!     `s + f + n/2 − t = left_true/2 + (s + f − t)/2 + f/2 < left/2 + ½ s`
//!     (`left_true = s + n − t`, at most the whole seconds read back).
//!
//!   The second look waits one and a half times the longer of the
//!   promised period and that bound ([`renewal_due_within`]): the half for
//!   the renewal's own round trips, as before. An understated row can then
//!   cost a second look, never a renewing owner's cell. Overdue is still
//!   judged by the promised period: it only picks candidates.
//! - **Ages allow for skew.** A cell's age is judged on the database's
//!   clock ([`CensusCell::least_age`]): the owner's write stamp taken there
//!   by the clock reading in its registry row, this machine's clock by its
//!   own, each at its error's worst. A side without a reading may be off by
//!   up to `rollout.clock_skew_margin`, so its ages are judged less the
//!   margin. An owner minutes behind whose reading says so keeps its cells
//!   (design §4b, C1).
//! - **Overdue**: not renewed for `--stale-multiple` × the promised renewal
//!   period, or — for a cell without a TTL — for `--stale-after`. (A
//!   promise read off a cell's TTL makes it overdue only after `multiple ×
//!   TTL/2 ≥ TTL`, i.e. never before it expires by itself.)
//! - **Lease over**: older than its guaranteed life by its own process's
//!   promise ([`CensusCell::lease_over`]): its owner has been told that it
//!   lost the lock (lease invariant L3). Nobody holds or waits through such a
//!   cell — a late write brought it back (L5), or its owner could not delete
//!   it — and it is deleted, live process or not.
//! - **May still hold**: any other overdue cell with a TTL. Its owner's
//!   process is live, or the owner may not have been told yet that its
//!   lease is lost — a holder that is paused or cut off looks exactly like
//!   a dead one from here. Such a cell is *kept*, and listed, unless
//!   `--force`.
//!
//! In practice a cell with a TTL whose owner is gone expires on its own
//! before it could be proven safe to delete; `clean` is for cells without a
//! TTL (binaries that predate leases), for cells whose lease is over, and,
//! with `--force`, for an operator who knows an owner is dead.

use std::time::Duration;

use serde::Serialize;

use crate::cell::{Timestamp, Ttl};
use crate::census::CensusCell;
use crate::registry::LeasePromise;

/// What `clean` judges cells by: the operator's flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Criteria {
    /// Overdue after this many promised renewal periods.
    pub stale_multiple: u32,
    /// Cells without a TTL (no promise): stale after this long; `None`:
    /// never judged, only reported. Never applies to a cell with a TTL.
    pub stale_after: Option<Duration>,
    /// Delete overdue cells even when their owner may still hold the lock
    /// (after the second look).
    pub force: bool,
}

impl Criteria {
    /// The criteria of the flags.
    ///
    /// # Errors
    /// [`InvalidCriteria`] for a multiple below 2 (a renewing owner can be
    /// one period late) or a `--stale-after` under a second.
    pub fn new(
        stale_after: Option<Duration>,
        stale_multiple: u32,
        force: bool,
    ) -> Result<Criteria, InvalidCriteria> {
        if stale_multiple < 2 {
            return Err(InvalidCriteria {
                message: format!(
                    "--stale-multiple ({stale_multiple}) must be at least 2: a renewing owner may \
                     be one renewal period late"
                ),
            });
        }
        if stale_after.is_some_and(|d| d < Duration::from_secs(1)) {
            return Err(InvalidCriteria {
                message: "--stale-after must be at least 1s (it judges cells without a TTL)"
                    .to_string(),
            });
        }
        Ok(Criteria {
            stale_multiple,
            stale_after,
            force,
        })
    }
}

/// Flags [`Criteria::new`] refuses: the message names the flag and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidCriteria {
    message: String,
}

/// What a cell's owner promised, and where that came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Promise {
    /// `registry` (its process's heartbeat) or `cell` (its own TTL).
    pub source: PromiseSource,
    /// The TTL its cells are written with (read off a cell: the longest it
    /// may have been).
    pub ttl_ms: u64,
    /// The longest it may go between renewals.
    pub renew_every_ms: u64,
}

impl Promise {
    fn renew_every(&self) -> Duration {
        Duration::from_millis(self.renew_every_ms)
    }
}

/// Where a [`Promise`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PromiseSource {
    /// The owner's own process announced it in its heartbeat.
    Registry,
    /// Read off the cell: its TTL, and the lockshift rule renew < TTL/2.
    Cell,
}

/// What happened to a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Dry run: it would be deleted if the second look finds it unchanged.
    WouldDelete,
    /// Deleted at its observed writetime, after the second look.
    Deleted,
    /// Kept: the owner's process is live (`--force` deletes it anyway,
    /// after the second look).
    KeptOwnerLive,
    /// Kept: its owner may not have been told yet that its lease is lost
    /// (`--force` deletes it anyway, after the second look).
    KeptOwnerMayHold,
    /// The second look found it renewed (or rewritten): left alone.
    SkippedRenewed,
    /// It was gone already (expired, released) at the second look.
    SkippedGone,
    /// The re-read or delete failed; see `error`.
    Failed,
}

/// The first look's verdict on one cell.
#[derive(Debug, PartialEq)]
pub enum Judged {
    /// Not overdue: not a candidate.
    Fine,
    /// No TTL and no `--stale-after`: counted, never judged.
    Unjudged,
    /// Overdue: a candidate.
    Overdue {
        /// What it was judged by (`None`: no TTL, judged by
        /// `--stale-after`).
        promise: Option<Promise>,
        /// [`Action::WouldDelete`], or why it is kept.
        action: Action,
        /// How long after the scan the second look reads it again (one
        /// and a half promised renewal periods; zero without a promise).
        second_look: Duration,
    },
}

/// The first look's verdict on one cell (see the module docs): the cell as
/// the census saw it, `skew_margin` = `rollout.clock_skew_margin`, and
/// `min_lease_ttl` the shortest `lock.lease_ttl` a node accepts (a promise
/// of a shorter TTL is no promise).
pub fn judge(
    cell: &CensusCell,
    criteria: &Criteria,
    skew_margin: Duration,
    min_lease_ttl: Duration,
) -> Judged {
    // The least the cell's age can be on the database's clock: its owner's
    // clock and this one allowed for by their readings, or by the margin
    // (a slower owner's cells look that much older than they are).
    let age = cell.least_age;
    let promise = promise_of(cell, skew_margin, min_lease_ttl);
    let overdue_after = match promise {
        Some(p) => p.renew_every().saturating_mul(criteria.stale_multiple),
        // Only a cell that promises nothing is the operator's to judge:
        // --stale-after never shortens a promise.
        None => match criteria.stale_after {
            Some(after) => after,
            None => return Judged::Unjudged,
        },
    };
    if age <= overdue_after && !cell.lease_over {
        return Judged::Fine;
    }
    let action = if cell.lease_over || criteria.force {
        Action::WouldDelete
    } else if cell.owner.process_live {
        Action::KeptOwnerLive
    } else if promise.is_some() {
        // Not known to be over: a cut-off owner may not have been told.
        Action::KeptOwnerMayHold
    } else {
        Action::WouldDelete
    };
    Judged::Overdue {
        promise,
        action,
        second_look: promise.map_or(Duration::ZERO, |p| {
            let wait = renewal_due_within(&p, cell.ttl_left);
            wait.saturating_add(wait / 2)
        }),
    }
}

/// How soon a renewing lockshift owner of a cell with `promise` and
/// `ttl_left` rewrites it, at the latest: the longer of the promised
/// renewal period and what the cell's own TTL left allows, `left/2 + ½ s`
/// (the module docs, "The longer of the row and the cell", argue it).
/// The second look waits one and a half of it.
pub fn renewal_due_within(promise: &Promise, ttl_left: Option<Duration>) -> Duration {
    let by_cell = ttl_left.map_or(Duration::ZERO, |left| {
        (left / 2).saturating_add(Duration::from_millis(500))
    });
    promise.renew_every().max(by_cell)
}

/// What `cell`'s owner promised: its own process's announcement, or what
/// the cell's TTL implies; `None` for a cell without a TTL. `skew_margin`
/// and `min_lease_ttl` as for [`judge`].
pub fn promise_of(
    cell: &CensusCell,
    skew_margin: Duration,
    min_lease_ttl: Duration,
) -> Option<Promise> {
    let plausible = |p: &LeasePromise| plausible(p, min_lease_ttl);
    match (cell.owner.promise.filter(plausible), cell.ttl_left) {
        (Some(p), _) => Some(Promise {
            source: PromiseSource::Registry,
            ttl_ms: p.ttl_ms,
            renew_every_ms: p.renew_every_ms,
        }),
        (None, Some(left)) => {
            // `age + left` is short of the TTL written by at most a second
            // and the skew margin: take the longest it may have been.
            let ttl = cell
                .age
                .saturating_add(left)
                .saturating_add(Duration::from_secs(1))
                .saturating_add(skew_margin);
            Some(Promise {
                source: PromiseSource::Cell,
                ttl_ms: ms(ttl),
                renew_every_ms: ms(ttl / 2),
            })
        }
        (None, None) => None,
    }
}

/// A promise a lockshift node could have made: its settings validation
/// refuses any other (a row that says otherwise is broken, and says
/// nothing).
fn plausible(p: &LeasePromise, min_lease_ttl: Duration) -> bool {
    p.renew_every_ms > 0
        && p.renew_every_ms.saturating_mul(2) < p.ttl_ms
        && p.ttl() >= min_lease_ttl
        && Ttl::from_duration(p.ttl()).is_ok()
}

/// Whole milliseconds, saturating (a report's `*_ms` fields).
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The second look's verdict on a cell the first look saw written at
/// `first`: `Ok(stamp)` — delete it at that stamp — if it still stands
/// unchanged (`now`: its writetime at the second look, `None` when gone),
/// else what to report.
///
/// # Errors
/// The [`Action`] to report instead of a delete:
/// [`Action::SkippedGone`] or [`Action::SkippedRenewed`].
pub fn second_look(first: Timestamp, now: Option<Timestamp>) -> Result<Timestamp, Action> {
    match now {
        None => Err(Action::SkippedGone),
        Some(t) if t != first => Err(Action::SkippedRenewed),
        Some(t) => Ok(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The second look, as a table.
    #[test]
    fn the_second_look_deletes_only_an_unchanged_cell() {
        let t = |us| Timestamp::from_micros(us);
        assert_eq!(second_look(t(10), Some(t(10))), Ok(t(10)));
        assert_eq!(
            second_look(t(10), Some(t(11))),
            Err(Action::SkippedRenewed),
            "renewed"
        );
        assert_eq!(
            second_look(t(10), Some(t(9))),
            Err(Action::SkippedRenewed),
            "rewritten (a stamp from a slow clock)"
        );
        assert_eq!(second_look(t(10), None), Err(Action::SkippedGone));
    }
}
