//! `[lock.queue]` and `[time]`: polling of waiters, how a waiter's cells
//! live while it waits, the stale-waiter threshold, and which time service
//! names queue cells.

use std::time::Duration;

use lockshift_decide::census::stale_after_renewals;
use lockshift_decide::duration::fmt_duration;
use lockshift_decide::registry::TTL_SKEW_ALLOWANCE;
use lockshift_lock::{LeaseSettings, MIN_LEASE_TTL, WaitingTerms, scale_duration};
use lockshift_store::Ttl;
use lockshift_store::settings::InvalidSetting;
use serde::{Deserialize, Serialize};

/// ```toml
/// [lock.queue]
/// min_poll = "200us"           # no waiter polls more often than this
/// head_poll = "10ms"           # the next waiter's poll before it measured the store's
///                              # round trip, and the longest round trip it assumes
/// waiter_poll = "250ms"        # no waiter polls less often than this
/// waiting_ttl = "4s"           # TTL of a waiter's cells while it waits
/// waiting_renew_every = "1s"   # how often a waiting cell is rewritten
/// stale_after = "3s"           # a queue cell seen unchanged this long is skipped
///                              # (default: 3 × waiting_renew_every)
/// try_attempts = 3             # try-acquire: entries into main while first in line
/// ```
///
/// Waiters poll by the measured round trip (see
/// `lockshift_decide::waiter::poll_policy`): the next waiter about once per round
/// trip while the line moves, a waiter `d` places back every `d` round
/// trips, and everyone less and less often while a hold lasts — always
/// between `min_poll` and `waiter_poll`.
///
/// # A waiter's cells while it waits
///
/// Its queue cell and any reservation in `main` (and `shadow`) carry
/// `waiting_ttl`, not `lock.lease_ttl`, and are rewritten every
/// `waiting_renew_every` — on the back of the waiter's own reads of those
/// rows where it makes them (a write, no extra read), else by its lease (a
/// read and a write). A waiter killed while it waits therefore holds the
/// line up for at most `waiting_ttl`, and its queue cell is skipped once
/// not rewritten for `stale_after`. Once it holds, its `main` cell takes
/// the lease TTL (Q3, L6).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueSettings {
    /// The ceiling: no waiter polls less often than this — far back in a
    /// long line, or during a long hold. Bounds the delay of a hand-off
    /// after a long hold. Default: `250ms`.
    #[serde(with = "humantime_serde")]
    pub waiter_poll: Duration,
    /// The next waiter's poll interval before it has measured the store's
    /// round trip, and the longest round trip it assumes (a slower store is
    /// still polled back to back, one read in flight). Default: `10ms`.
    #[serde(with = "humantime_serde")]
    pub head_poll: Duration,
    /// The floor: no waiter polls more often than this, so an in-process
    /// store (round trips of microseconds) is not polled in a hot loop.
    /// Below a real store's round trip it does not matter. Default:
    /// `200us`.
    #[serde(with = "humantime_serde")]
    pub min_poll: Duration,
    /// The TTL of a waiter's cells while it waits (at least 2 s; written
    /// rounded up to whole seconds): the longest a waiter killed while it waits holds others up.
    /// Its lease counts as lost once `lock.lost_after_fraction ×` this
    /// passes without a proven rewrite (the waiter then queues again).
    /// Default: `4s`.
    #[serde(with = "humantime_serde")]
    pub waiting_ttl: Duration,
    /// How often a waiting cell is rewritten. Default: `1s`.
    #[serde(with = "humantime_serde")]
    pub waiting_renew_every: Duration,
    /// A queue cell a waiter has watched stand still — its write time
    /// unchanged — for this long (the waiter's own time, so clock skew
    /// between nodes does not enter) is a dead waiter's and is skipped.
    /// Safe at any value (Q3; proof in docs/design.md §2), but below the
    /// waiting renewal period live waiters get skipped. Default (`None`):
    /// three `waiting_renew_every` periods, `3s`.
    #[serde(with = "humantime_serde::option")]
    pub stale_after: Option<Duration>,
    /// How many times `try_acquire` tries to enter `main` while first in
    /// line before giving up (listing 8 loops; a bound keeps "try" prompt).
    /// Default: `3`.
    pub try_attempts: u32,
}

impl Default for QueueSettings {
    fn default() -> Self {
        QueueSettings {
            waiter_poll: Duration::from_millis(250),
            head_poll: Duration::from_millis(10),
            min_poll: Duration::from_micros(200),
            waiting_ttl: Duration::from_secs(4),
            waiting_renew_every: Duration::from_secs(1),
            stale_after: None,
            try_attempts: 3,
        }
    }
}

impl QueueSettings {
    /// The stale-waiter threshold in effect: `stale_after`, or three
    /// waiting renewal periods. (The lease settings no longer enter; the
    /// argument stays for the callers that judge holders too, see
    /// [`holder_stale_after`](Self::holder_stale_after).)
    pub fn stale_after(&self, _lease: &LeaseSettings) -> Duration {
        self.stale_after
            .unwrap_or(stale_after_renewals(self.waiting_renew_every))
    }

    /// When a holding cell (renewed every `lock.renew_every`) looks dead:
    /// three renewal periods.
    pub fn holder_stale_after(lease: &LeaseSettings) -> Duration {
        stale_after_renewals(lease.renew_every)
    }

    /// The terms a waiter's lease starts with (lease L6); `None` when
    /// `waiting_ttl` is not a valid TTL (refused by [`problems`](Self::problems)).
    pub fn waiting_terms(&self) -> Option<WaitingTerms> {
        Some(WaitingTerms {
            ttl: Ttl::from_duration(self.waiting_ttl).ok()?,
            renew_every: self.waiting_renew_every,
        })
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
        out.extend(self.waiting_problems(lease));
        let stale_after = self.stale_after(lease);
        if stale_after < self.waiting_renew_every.saturating_mul(2) {
            out.push(InvalidSetting::new(
                "lock.queue.stale_after",
                format!(
                    "lock.queue.stale_after ({}) must be at least twice lock.queue.waiting_renew_every ({}), or live waiters are skipped between rewrites",
                    fmt_duration(stale_after),
                    fmt_duration(self.waiting_renew_every)
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

impl QueueSettings {
    /// How far apart the clocks of two Cassandra nodes may be before a
    /// waiter's cell (written with `waiting_ttl`) can expire, as a reading
    /// coordinator sees it, before the waiter is told (lease invariant L3,
    /// L6): the waiting TTL written (whole seconds) − 1 s −
    /// `lease.lost_after_fraction ×` that TTL; zero when nothing is left or
    /// the TTL is invalid. `LeaseSettings::node_skew_tolerance` is the
    /// holders'; the fleet's clocks must keep within the smaller. The
    /// defaults: 4 s − 1 s − 2 s = 1 s.
    pub fn waiting_node_skew_tolerance(&self, lease: &LeaseSettings) -> Duration {
        let Ok(ttl) = Ttl::from_duration(self.waiting_ttl) else {
            return Duration::ZERO;
        };
        let fraction = lease.lost_after_fraction.clamp(0.0, 1.0);
        ttl.as_duration()
            .saturating_sub(Duration::from_secs(1))
            .saturating_sub(scale_duration(ttl.as_duration(), fraction))
    }

    /// The lease rules (lock settings L3) for the waiting TTL: at least
    /// 2 s (written rounded up to whole seconds); the lost signal before the earliest expiry;
    /// the rewrite period below the lost limit.
    fn waiting_problems(&self, lease: &LeaseSettings) -> Vec<InvalidSetting> {
        let mut out = Vec::new();
        let ttl = match Ttl::from_duration(self.waiting_ttl) {
            Ok(ttl) if self.waiting_ttl >= MIN_LEASE_TTL => ttl,
            _ => {
                out.push(InvalidSetting::new(
                    "lock.queue.waiting_ttl",
                    format!(
                        "lock.queue.waiting_ttl ({}) must be at least {} (and at most 20 years): \
                         Cassandra counts TTLs in whole seconds, so a cell may expire up to 1s \
                         before its TTL",
                        fmt_duration(self.waiting_ttl),
                        fmt_duration(MIN_LEASE_TTL)
                    ),
                ));
                return out;
            }
        };
        let fraction = lease.lost_after_fraction.clamp(0.0, 1.0);
        let lost_after = scale_duration(ttl.as_duration(), fraction);
        let life = ttl
            .as_duration()
            .saturating_sub(Duration::from_secs(1) + TTL_SKEW_ALLOWANCE);
        if self.waiting_renew_every.is_zero() {
            out.push(InvalidSetting::new(
                "lock.queue.waiting_renew_every",
                "lock.queue.waiting_renew_every must be greater than 0",
            ));
        } else if self.waiting_renew_every >= lost_after {
            out.push(InvalidSetting::new(
                "lock.queue.waiting_renew_every",
                format!(
                    "lock.queue.waiting_renew_every ({}) must be less than lock.lost_after_fraction × \
                     lock.queue.waiting_ttl ({}), or every waiter counts as lost between two rewrites",
                    fmt_duration(self.waiting_renew_every),
                    fmt_duration(lost_after)
                ),
            ));
        }
        if fraction > 0.0 && fraction < 1.0 && lost_after >= life {
            out.push(InvalidSetting::new(
                "lock.queue.waiting_ttl",
                format!(
                    "lock.lost_after_fraction × lock.queue.waiting_ttl ({}) must be less than the \
                     waiting TTL − 1s − {} clock skew allowance ({}): a waiting cell may expire \
                     that early and the waiter must be told before; as set, a waiter's cells \
                     tolerate {} of clock difference between Cassandra nodes, less than the {} \
                     they must",
                    fmt_duration(lost_after),
                    fmt_duration(TTL_SKEW_ALLOWANCE),
                    fmt_duration(life),
                    fmt_duration(self.waiting_node_skew_tolerance(lease)),
                    fmt_duration(TTL_SKEW_ALLOWANCE)
                ),
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
    /// The time service. Default: `"hybrid"`.
    pub source: TimeSourceKind,
    /// How often this node pushes its clock into `GlobalTime`. Default:
    /// `500ms`. The hybrid source's updater rests after
    /// [`IDLE_TICKS`](crate::time::IDLE_TICKS) of these with no queue time
    /// asked, until the next ask.
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
            stale_after: Some(Duration::from_millis(1_500)),
            try_attempts: 0,
            ..QueueSettings::default()
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
                "lock.queue.stale_after (1s 500ms) must be at least twice lock.queue.waiting_renew_every (1s), or live waiters are skipped between rewrites",
                "lock.queue.try_attempts must be at least 1",
            ]
        );
    }

    /// The waiting TTL follows the lease's rules (case index printed on
    /// failure): at least 2 s, told before the earliest
    /// expiry, rewritten within the lost limit.
    #[test]
    fn the_waiting_ttl_follows_the_lease_rules() {
        let lease = LeaseSettings::default();
        let q = |ttl_ms: u64, every_ms: u64| QueueSettings {
            waiting_ttl: Duration::from_millis(ttl_ms),
            waiting_renew_every: Duration::from_millis(every_ms),
            stale_after: Some(Duration::from_secs(30)),
            ..QueueSettings::default()
        };
        let cases: [(QueueSettings, &[&str]); 6] = [
            (q(4_000, 1_000), &[]),
            (q(1_000, 100), &["lock.queue.waiting_ttl"]),
            // Written as 3 s, as lock.lease_ttl is.
            (q(2_500, 100), &[]),
            (q(4_000, 2_000), &["lock.queue.waiting_renew_every"]),
            (q(4_000, 0), &["lock.queue.waiting_renew_every"]),
            // Told at 1 s; the cell may be gone 0.75 s after it was sent.
            (q(2_000, 500), &["lock.queue.waiting_ttl"]),
        ];
        for (i, (settings, keys)) in cases.iter().enumerate() {
            let problems = settings.problems(&lease);
            let got: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
            assert_eq!(&got, keys, "case #{i}: {problems:?}");
        }
        let terms = QueueSettings::default().waiting_terms().unwrap();
        assert_eq!(terms.ttl.as_duration(), Duration::from_secs(4));
        // Issue 31 item 4f: how far apart Cassandra nodes' clocks may be
        // for a waiter's cells, and the refusal says it.
        let tolerance = |ttl_ms| q(ttl_ms, 500).waiting_node_skew_tolerance(&lease);
        assert_eq!(tolerance(4_000), Duration::from_secs(1));
        assert_eq!(tolerance(2_500), Duration::from_millis(500));
        assert_eq!(tolerance(2_000), Duration::ZERO);
        let refusal = q(2_000, 500).problems(&lease)[0].to_string();
        assert!(
            refusal.ends_with(
                "as set, a waiter's cells tolerate 0s of clock difference between Cassandra \
                 nodes, less than the 250ms they must"
            ),
            "{refusal}"
        );
        assert_eq!(
            QueueSettings::default().stale_after(&lease),
            Duration::from_secs(3)
        );
    }
}
