//! `[lock.queue]` and `[time]`: polling of waiters, stale-waiter threshold,
//! and which time service names queue cells.

use std::time::Duration;

use lockshift_lock::{LeaseSettings, fmt_duration};
use lockshift_store::settings::InvalidSetting;
use serde::{Deserialize, Serialize};

/// ```toml
/// [lock.queue]
/// min_poll = "200us"     # no waiter polls more often than this
/// head_poll = "10ms"     # the next waiter's poll before it measured the store's
///                        # round trip, and the longest round trip it assumes
/// waiter_poll = "250ms"  # no waiter polls less often than this
/// stale_after = "30s"    # a queue cell not renewed for this long is skipped
///                        # (default: 3 × lock.renew_every)
/// try_attempts = 3       # try-acquire: entries into main while first in line
/// ```
///
/// Waiters poll by the measured round trip (see `line/poll.rs`): the next
/// waiter about once per round trip while the line moves, a waiter `d`
/// places back every `d` round trips, and everyone less and less often while
/// a hold lasts — always between `min_poll` and `waiter_poll`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueSettings {
    /// The ceiling: no waiter polls less often than this — far back in a
    /// long line, or during a long hold. Bounds the delay of a hand-off
    /// after a long hold.
    #[serde(with = "humantime_serde")]
    pub waiter_poll: Duration,
    /// The next waiter's poll interval before it has measured the store's
    /// round trip, and the longest round trip it assumes (a slower store is
    /// still polled back to back, one read in flight).
    #[serde(with = "humantime_serde")]
    pub head_poll: Duration,
    /// The floor: no waiter polls more often than this, so an in-process
    /// store (round trips of microseconds) is not polled in a hot loop.
    /// Below a real store's round trip it does not matter.
    #[serde(with = "humantime_serde")]
    pub min_poll: Duration,
    /// A queue cell whose write time is older than this is a dead waiter and
    /// is skipped. Safe at any value (exclusion rests on `main`), but below
    /// the renewal period plus clock skew live waiters get skipped. `None`:
    /// three renewal periods.
    #[serde(with = "humantime_serde::option")]
    pub stale_after: Option<Duration>,
    /// How many times `try_acquire` tries to enter `main` while first in
    /// line before giving up (listing 8 loops; a bound keeps "try" prompt).
    pub try_attempts: u32,
}

impl Default for QueueSettings {
    fn default() -> Self {
        QueueSettings {
            waiter_poll: Duration::from_millis(250),
            head_poll: Duration::from_millis(10),
            min_poll: Duration::from_micros(200),
            stale_after: None,
            try_attempts: 3,
        }
    }
}

impl QueueSettings {
    /// The stale-waiter threshold in effect with `lease`.
    pub fn stale_after(&self, lease: &LeaseSettings) -> Duration {
        self.stale_after
            .unwrap_or(lease.renew_every.saturating_mul(3))
    }

    /// Every rule these settings break, given the lease settings.
    pub fn problems(&self, lease: &LeaseSettings) -> Vec<InvalidSetting> {
        let mut out = Vec::new();
        if self.min_poll.is_zero() {
            out.push(InvalidSetting::new(
                "lock.queue.min_poll",
                "lock.queue.min_poll must be greater than 0 (a zero poll is a hot loop against the store)",
            ));
        }
        if self.head_poll < self.min_poll {
            out.push(InvalidSetting::new(
                "lock.queue.head_poll",
                format!(
                    "lock.queue.head_poll ({}) must be at least lock.queue.min_poll ({})",
                    fmt_duration(self.head_poll),
                    fmt_duration(self.min_poll)
                ),
            ));
        }
        if self.waiter_poll < self.head_poll {
            out.push(InvalidSetting::new(
                "lock.queue.waiter_poll",
                format!(
                    "lock.queue.waiter_poll ({}) must be at least lock.queue.head_poll ({})",
                    fmt_duration(self.waiter_poll),
                    fmt_duration(self.head_poll)
                ),
            ));
        }
        let stale_after = self.stale_after(lease);
        if stale_after < lease.renew_every.saturating_mul(2) {
            out.push(InvalidSetting::new(
                "lock.queue.stale_after",
                format!(
                    "lock.queue.stale_after ({}) must be at least twice lock.renew_every ({}), or live waiters are skipped between renewals",
                    fmt_duration(stale_after),
                    fmt_duration(lease.renew_every)
                ),
            ));
        }
        if self.try_attempts == 0 {
            out.push(InvalidSetting::new(
                "lock.queue.try_attempts",
                "lock.queue.try_attempts must be at least 1",
            ));
        }
        out
    }
}

/// Which time names queue cells (thesis §5.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeSourceKind {
    /// `max(last + 1 µs, local clock, cached GlobalTime)`: never decreases on
    /// a node, never stalls, and no store round trip per acquisition.
    #[default]
    Hybrid,
    /// The thesis' service: the current `GlobalTime` value (one store read per
    /// acquisition); stalls if the fastest updater dies (§7.1).
    Global,
    /// This node's clock, made strictly increasing; no coordination at all.
    Local,
}

/// ```toml
/// [time]
/// source = "hybrid"       # or "global" (thesis), "local"
/// update_every = "500ms"  # GlobalTime updates (listing 9)
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimeSettings {
    /// The time service.
    pub source: TimeSourceKind,
    /// How often this node pushes its clock into `GlobalTime`.
    #[serde(with = "humantime_serde")]
    pub update_every: Duration,
}

impl Default for TimeSettings {
    fn default() -> Self {
        TimeSettings {
            source: TimeSourceKind::Hybrid,
            update_every: Duration::from_millis(500),
        }
    }
}

impl TimeSettings {
    /// Every rule these settings break.
    pub fn problems(&self) -> Vec<InvalidSetting> {
        if self.source != TimeSourceKind::Local && self.update_every.is_zero() {
            return vec![InvalidSetting::new(
                "time.update_every",
                "time.update_every must be greater than 0",
            )];
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_rules_name_keys() {
        let lease = LeaseSettings::default();
        assert!(QueueSettings::default().problems(&lease).is_empty());
        assert!(TimeSettings::default().problems().is_empty());
        let bad = QueueSettings {
            waiter_poll: Duration::from_millis(5),
            head_poll: Duration::from_millis(10),
            min_poll: Duration::ZERO,
            stale_after: Some(Duration::from_secs(15)),
            try_attempts: 0,
        };
        let msgs: Vec<String> = bad
            .problems(&lease)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            msgs,
            [
                "lock.queue.min_poll must be greater than 0 (a zero poll is a hot loop against the store)",
                "lock.queue.waiter_poll (5ms) must be at least lock.queue.head_poll (10ms)",
                "lock.queue.stale_after (15s) must be at least twice lock.renew_every (10s), or live waiters are skipped between renewals",
                "lock.queue.try_attempts must be at least 1",
            ]
        );
    }
}
