//! What an acquisition is after ([`Goal`]), how its algorithm's entry
//! into `main` behaves ([`Policy`]), and why it may end without the lock
//! ([`Leaving`]): values the waiter is handed or hands back.

use std::time::Duration;

use crate::binding::Pacing;

/// What an acquisition is after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Goal {
    /// Wait in line until the lock is mine (listing 7).
    Wait,
    /// Take the lock only if it is free now (listing 8): nobody in `main`
    /// at the start, nobody ahead in line, and at most `attempts` entries
    /// into `main`, a head poll apart.
    Try {
        /// Entries into `main` while first in line.
        attempts: u32,
    },
}

/// How an algorithm's entry into `main` behaves, as the waiter needs to
/// know it: a value, not a question put to the entry at every step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Beside legacy contenders ([`Pacing::BesideLegacy`]) the entry
    /// prepares no hand-off and, while `main` is taken, pauses a random
    /// time below their `owner_wait_max` (the combined lock: legacy
    /// contenders poll at their own pace and would otherwise never win a
    /// hand-off).
    pub yields_to_legacy: bool,
}

impl Policy {
    /// The queue lock's entry.
    pub const QUEUE: Policy = Policy {
        yields_to_legacy: false,
    };
    /// The combined lock's entry.
    pub const COMBINED: Policy = Policy {
        yields_to_legacy: true,
    };

    /// Whether the entry keeps its `main` cell as a reservation while
    /// someone else holds, paced by `pacing`; if not, it withdraws and
    /// waits for `main` to empty.
    pub fn prepares(self, pacing: Pacing) -> bool {
        !(self.yields_to_legacy && pacing.beside_legacy())
    }

    /// The entry's own pause while `main` is taken, paced by `pacing`, for
    /// a uniform `draw` in `[0, 1)`; `None`: the line's polling.
    pub fn busy_pause(self, pacing: Pacing, draw: f64) -> Option<Duration> {
        match pacing {
            Pacing::BesideLegacy { owner_wait_max } if self.yields_to_legacy => {
                Some(owner_wait_max.mul_f64(draw.clamp(0.0, 1.0)))
            }
            _ => None,
        }
    }
}

/// Why an acquisition ends without the lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Leaving {
    /// A try found the lock busy; `holder`: the other owner a read of
    /// `main` showed last, if one did.
    Busy {
        /// The owner id of the holder seen.
        holder: Option<String>,
    },
    /// A store error not worth retrying (for a try: any store error).
    Failed,
    /// A try's lease was lost before the lock could be handed out.
    LeaseLost,
    /// The deadline passed, the caller cancelled, or the binding was
    /// invalidated.
    Interrupted,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each policy, under each pacing: whether the entry prepares a
    /// hand-off, and its own pause while `main` is taken.
    #[test]
    fn an_entry_yields_to_legacy_contenders_only_beside_them() {
        let beside = Pacing::BesideLegacy {
            owner_wait_max: Duration::from_secs(4),
        };
        #[rustfmt::skip]
        let table: &[(Policy, Pacing, f64, bool, Option<Duration>)] = &[
            // policy,          pacing,             draw, prepares, busy pause
            (Policy::QUEUE,    Pacing::FullSpeed,  0.5,  true,     None),
            (Policy::QUEUE,    beside,             0.5,  true,     None),
            (Policy::COMBINED, Pacing::FullSpeed,  0.5,  true,     None),
            (Policy::COMBINED, beside,             0.0,  false,    Some(Duration::ZERO)),
            (Policy::COMBINED, beside,             0.5,  false,    Some(Duration::from_secs(2))),
            // A draw outside [0, 1) is clamped, never a pause beyond
            // the legacy contenders' own.
            (Policy::COMBINED, beside,             7.0,  false,    Some(Duration::from_secs(4))),
            (Policy::COMBINED, beside,             -1.0, false,    Some(Duration::ZERO)),
        ];
        for (i, &(policy, pacing, draw, prepares, pause)) in table.iter().enumerate() {
            assert_eq!(policy.prepares(pacing), prepares, "row {i}: prepares");
            assert_eq!(
                policy.busy_pause(pacing, draw),
                pause,
                "row {i}: busy pause"
            );
        }
    }
}
