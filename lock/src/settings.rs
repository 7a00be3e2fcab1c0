//! Lease settings: the `[lock]` keys every algorithm shares.

use std::time::Duration;

use lockshift_store::Ttl;
use lockshift_store::settings::InvalidSetting;
use serde::{Deserialize, Serialize};

use lockshift_decide::registry::{TTL_SKEW_ALLOWANCE, guaranteed_life};
use lockshift_decide::schema;

/// The shortest `lock.lease_ttl` accepted. Cassandra counts TTLs in whole
/// seconds, so a cell may live a second less than its TTL: a 1 s TTL
/// guarantees nothing at all, and sub-second ones cannot be written.
pub const MIN_LEASE_TTL: Duration = Duration::from_secs(2);

/// How long cells live and how they are kept alive.
///
/// # How long a cell is sure to live
///
/// A cell sent at `sent` with TTL `n` (whole seconds) is applied no
/// earlier than `sent`, and Cassandra expires it at the end of the second
/// it was applied in plus `n`, on the coordinator's clock: it is sure to
/// live until `sent + n - 1 s - TTL_SKEW_ALLOWANCE`
/// ([`guaranteed_life`](Self::guaranteed_life)). The lost signal must come
/// before that, so [`problems`](Self::problems) refuses a
/// `lost_after_fraction × lease_ttl` that does not.
///
/// # How far apart Cassandra nodes' clocks may be
///
/// The expiry is fixed on the clock of the coordinator that applied the
/// write and checked on the clock of the one coordinating each read (S3):
/// a reader whose clock is `δ` ahead of the writer's sees the cell vanish
/// `δ` early. The holder is told at `sent + lost_after_fraction ×
/// lease_ttl`, so the lease keeps its promise (L3) as long as the nodes'
/// clocks differ by less than [`node_skew_tolerance`](Self::node_skew_tolerance):
/// the written TTL − 1 s − that. Validation refuses settings that leave
/// less than the [`TTL_SKEW_ALLOWANCE`] (250 ms) the lease assumes; the
/// defaults leave 29 s (a 5 s lease: 1.5 s). A waiter's cells have their
/// own, shorter TTL and tolerance (`lock.queue.waiting_ttl`: 1 s by
/// default). The fleet's clocks must stay within the smaller one
/// (docs/operating.md, "Clocks").
///
/// ```toml
/// [lock]
/// lease_ttl = "60s"          # TTL of every cell a waiter or holder writes
/// renew_every = "10s"        # background rewrite period
/// lost_after_fraction = 0.5  # lease-lost fires once the last proven renewal is this old, × lease_ttl
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeaseSettings {
    /// TTL of every cell written by a waiter or holder: how long a crashed
    /// process blocks a lock at most.
    /// Default: `60s`.
    #[serde(with = "humantime_serde")]
    pub lease_ttl: Duration,
    /// How often cells are rewritten.
    /// Default: `10s`.
    #[serde(with = "humantime_serde")]
    pub renew_every: Duration,
    /// The lease-lost signal fires once the last proven renewal was sent
    /// longer ago than this fraction of `lease_ttl` (the shipped C# lock: ½).
    /// Default: `0.5`.
    pub lost_after_fraction: f64,
}

impl Default for LeaseSettings {
    fn default() -> Self {
        LeaseSettings {
            lease_ttl: Duration::from_secs(60),
            renew_every: Duration::from_secs(10),
            lost_after_fraction: 0.5,
        }
    }
}

impl LeaseSettings {
    /// The TTL written on cells (rounded up to whole seconds).
    ///
    /// # Errors
    /// When `lease_ttl` is zero or longer than 20 years (see [`Self::problems`]).
    pub fn ttl(&self) -> Result<Ttl, InvalidSetting> {
        Ttl::from_duration(self.lease_ttl).map_err(|e| {
            InvalidSetting::new(
                "lock.lease_ttl",
                format!(
                    "lock.lease_ttl ({}) is not a valid TTL: {e}",
                    fmt_duration(self.lease_ttl)
                ),
            )
        })
    }

    /// How long a cell is sure to live after it was sent: the TTL written
    /// (whole seconds) − 1 s (Cassandra expires at the end of the write's
    /// second + TTL) − [`TTL_SKEW_ALLOWANCE`]. `None` when the TTL is
    /// invalid or too short to guarantee anything.
    pub fn guaranteed_life(&self) -> Option<Duration> {
        guaranteed_life(self.lease_ttl)
    }

    /// How long after the last proven renewal the lease counts as lost.
    pub fn lost_after(&self) -> Duration {
        self.lease_ttl
            .mul_f64(self.lost_after_fraction.clamp(0.0, 1.0))
    }

    /// How far apart the clocks of two Cassandra nodes may be before a cell
    /// of this lease can expire, as a reading coordinator sees it, before
    /// its holder is told (lease invariant L3): the TTL written (whole
    /// seconds) − 1 s − [`lost_after`](Self::lost_after); zero when
    /// nothing is left, or the TTL is invalid. Settings validation refuses
    /// less than [`TTL_SKEW_ALLOWANCE`].
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use lockshift_lock::LeaseSettings;
    ///
    /// let five = LeaseSettings {
    ///     lease_ttl: Duration::from_secs(5),
    ///     renew_every: Duration::from_secs(1),
    ///     lost_after_fraction: 0.5,
    /// };
    /// // Told at 2.5 s; the cell lives at least 4 s on one clock.
    /// assert_eq!(five.node_skew_tolerance(), Duration::from_millis(1_500));
    /// assert_eq!(LeaseSettings::default().node_skew_tolerance(), Duration::from_secs(29));
    /// ```
    pub fn node_skew_tolerance(&self) -> Duration {
        self.ttl().map_or(Duration::ZERO, |ttl| {
            ttl.as_duration()
                .saturating_sub(Duration::from_secs(1))
                .saturating_sub(self.lost_after())
        })
    }

    /// What these settings cost without breaking a rule, in words: a lease
    /// TTL too long for the lock tables' gc grace, so that a replica that
    /// missed a release can show the released cell again until its TTL
    /// runs out — a lock that looks held that long, never two holders (the
    /// gc grace rule, docs/design.md §2a). `None` for the defaults. A node
    /// logs it as a warning when it starts.
    pub fn gc_grace_caution(&self) -> Option<String> {
        let gc_grace = schema::MAIN_OPTIONS.gc_grace();
        let ttl = self.ttl().ok()?.as_duration();
        (!schema::ttl_within_gc_grace(ttl, gc_grace)).then(|| {
            format!(
                "lock.lease_ttl ({}) is not {} below the lock tables' gc_grace_seconds ({}): \
                 a replica that missed a release can bring the released cell back until its \
                 TTL runs out, and the lock looks held that long (never by two holders)",
                fmt_duration(ttl),
                fmt_duration(schema::GC_GRACE_SLACK),
                fmt_duration(gc_grace)
            )
        })
    }

    /// Every rule these settings break; empty when valid.
    pub fn problems(&self) -> Vec<InvalidSetting> {
        let mut out = Vec::new();
        let ttl_ok = match self.ttl() {
            Err(e) => {
                out.push(e);
                false
            }
            Ok(_) if self.lease_ttl < MIN_LEASE_TTL => {
                out.push(InvalidSetting::new(
                    "lock.lease_ttl",
                    format!(
                        "lock.lease_ttl ({}) must be at least {}: Cassandra counts TTLs in whole \
                         seconds, so a cell may expire up to 1s before its TTL",
                        fmt_duration(self.lease_ttl),
                        fmt_duration(MIN_LEASE_TTL)
                    ),
                ));
                false
            }
            Ok(_) => true,
        };
        let renew_flagged =
            self.renew_every.is_zero() || self.renew_every.saturating_mul(2) >= self.lease_ttl;
        if self.renew_every.is_zero() {
            out.push(InvalidSetting::new(
                "lock.renew_every",
                "lock.renew_every must be greater than 0",
            ));
        } else if self.renew_every.saturating_mul(2) >= self.lease_ttl {
            out.push(InvalidSetting::new(
                "lock.renew_every",
                format!(
                    "lock.renew_every ({}) must be less than half of lock.lease_ttl ({})",
                    fmt_duration(self.renew_every),
                    fmt_duration(self.lease_ttl)
                ),
            ));
        }
        if !(self.lost_after_fraction > 0.0 && self.lost_after_fraction < 1.0) {
            out.push(InvalidSetting::new(
                "lock.lost_after_fraction",
                format!(
                    "lock.lost_after_fraction ({}) must be between 0 and 1, exclusive: the holder must hear of a lost lease before the TTL runs out",
                    self.lost_after_fraction
                ),
            ));
        } else if let Some(life) = self.guaranteed_life().filter(|_| ttl_ok)
            && self.lost_after() >= life
        {
            out.push(InvalidSetting::new(
                "lock.lost_after_fraction",
                format!(
                    "lock.lost_after_fraction × lock.lease_ttl ({}) must be less than the \
                     written TTL ({}) − 1s − {} clock skew allowance ({}): Cassandra counts TTLs \
                     in whole seconds, so a cell may expire that early and the holder must be \
                     told before; as set, a lease tolerates {} of clock difference between \
                     Cassandra nodes, less than the {} it must",
                    fmt_duration(self.lost_after()),
                    fmt_duration(self.ttl().map_or(Duration::ZERO, |t| t.as_duration())),
                    fmt_duration(TTL_SKEW_ALLOWANCE),
                    fmt_duration(life),
                    fmt_duration(self.node_skew_tolerance()),
                    fmt_duration(TTL_SKEW_ALLOWANCE)
                ),
            ));
        } else if !renew_flagged && self.renew_every >= self.lost_after() {
            out.push(InvalidSetting::new(
                "lock.renew_every",
                format!(
                    "lock.renew_every ({}) must be less than lock.lost_after_fraction × lock.lease_ttl ({}), or every lease counts as lost between two renewals",
                    fmt_duration(self.renew_every),
                    fmt_duration(self.lost_after())
                ),
            ));
        }
        out
    }
}

/// `d × factor`, saturating at `Duration::MAX` instead of panicking (and
/// zero for a negative or NaN factor): for durations that come from settings.
pub fn scale_duration(d: Duration, factor: f64) -> Duration {
    Duration::try_from_secs_f64(d.as_secs_f64() * factor).unwrap_or(if factor > 0.0 {
        Duration::MAX
    } else {
        Duration::ZERO
    })
}

use lockshift_decide::duration::fmt_duration;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_ttl_near_the_gc_grace_is_cautioned_not_refused() {
        assert_eq!(LeaseSettings::default().gc_grace_caution(), None);
        let long = LeaseSettings {
            lease_ttl: Duration::from_secs(300),
            renew_every: Duration::from_secs(30),
            lost_after_fraction: 0.5,
        };
        assert!(long.problems().is_empty(), "{:?}", long.problems());
        let caution = long.gc_grace_caution().unwrap();
        assert!(caution.contains("lock.lease_ttl (5m)"), "{caution}");
        assert!(caution.contains("gc_grace_seconds (2m)"), "{caution}");
        let edge = LeaseSettings {
            lease_ttl: Duration::from_secs(117),
            ..long
        };
        assert_eq!(edge.gc_grace_caution(), None);
    }

    #[test]
    fn defaults_are_valid() {
        assert!(LeaseSettings::default().problems().is_empty());
        assert_eq!(
            LeaseSettings::default().lost_after(),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn renew_every_must_be_under_half_the_ttl() {
        let s = LeaseSettings {
            renew_every: Duration::from_secs(40),
            ..LeaseSettings::default()
        };
        let p = s.problems();
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].key, "lock.renew_every");
        assert_eq!(
            p[0].to_string(),
            "lock.renew_every (40s) must be less than half of lock.lease_ttl (1m)"
        );
    }

    /// Issue 11: Cassandra counts TTLs in whole seconds, so a cell written
    /// with TTL n may be gone n − 1 s (minus skew) after it was sent; the
    /// holder must be told before that (case index printed on failure).
    #[test]
    fn the_lost_signal_must_come_before_the_earliest_expiry() {
        let lease = |ttl_ms: u64, renew_ms: u64, fraction: f64| LeaseSettings {
            lease_ttl: Duration::from_millis(ttl_ms),
            renew_every: Duration::from_millis(renew_ms),
            lost_after_fraction: fraction,
        };
        // (settings, the keys refused, a phrase of the first message)
        let cases: [(LeaseSettings, &[&str], &str); 7] = [
            // Told at 1.2 s, the cell may be gone at 0.75 s.
            (
                lease(2_000, 200, 0.6),
                &["lock.lost_after_fraction"],
                "(750ms)",
            ),
            (
                lease(1, 0, 0.5),
                &["lock.lease_ttl", "lock.renew_every"],
                "at least 2s",
            ),
            (lease(999, 100, 0.5), &["lock.lease_ttl"], "whole"),
            (lease(1_000, 100, 0.3), &["lock.lease_ttl"], "at least 2s"),
            // 2.5 s is written as 3 s: sure for 1.75 s; told at 1.25 s.
            (lease(2_500, 500, 0.5), &[], ""),
            (lease(3_000, 500, 0.5), &[], ""),
            (
                lease(3_000, 500, 0.6),
                &["lock.lost_after_fraction"],
                "1s 750ms",
            ),
        ];
        for (i, (settings, keys, phrase)) in cases.iter().enumerate() {
            let problems = settings.problems();
            let got: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
            assert_eq!(&got, keys, "case #{i}: {problems:?}");
            if let Some(first) = problems.first() {
                assert!(first.to_string().contains(phrase), "case #{i}: {first}");
            }
        }
        assert_eq!(
            lease(3_000, 500, 0.5).guaranteed_life(),
            Some(Duration::from_millis(1_750))
        );
        assert_eq!(lease(1_000, 100, 0.5).guaranteed_life(), None);
    }

    /// Issue 31 item 4f: how far apart Cassandra nodes' clocks may be
    /// before a cell can expire, as a reader sees it, before its holder is
    /// told — the written TTL − 1 s − the lost limit — and the refusal
    /// says it when it is below the 250 ms the lease assumes (table;
    /// index printed).
    #[test]
    fn the_node_clock_skew_a_lease_tolerates() {
        let lease = |ttl_ms: u64, fraction: f64| LeaseSettings {
            lease_ttl: Duration::from_millis(ttl_ms),
            renew_every: Duration::from_millis(200),
            lost_after_fraction: fraction,
        };
        // (settings, tolerance in ms, refused)
        let cases = [
            (lease(5_000, 0.5), 1_500, false),
            (lease(60_000, 0.5), 29_000, false),
            (lease(3_000, 0.5), 500, false),
            // 2.5 s is written as 3 s.
            (lease(2_500, 0.5), 750, false),
            (lease(3_000, 0.6), 200, true),
            (lease(2_000, 0.6), 0, true),
            (lease(0, 0.5), 0, true),
        ];
        for (i, (settings, tolerance_ms, refused)) in cases.into_iter().enumerate() {
            assert_eq!(
                settings.node_skew_tolerance(),
                Duration::from_millis(tolerance_ms),
                "case #{i}"
            );
            let problems = settings.problems();
            assert_eq!(!problems.is_empty(), refused, "case #{i}: {problems:?}");
        }
        let refusal = lease(3_000, 0.6).problems()[0].to_string();
        assert!(
            refusal.ends_with(
                "as set, a lease tolerates 200ms of clock difference between Cassandra nodes, \
                 less than the 250ms it must"
            ),
            "{refusal}"
        );
    }

    #[test]
    fn fraction_and_ttl_are_checked() {
        let s = LeaseSettings {
            lost_after_fraction: 1.0,
            ..LeaseSettings::default()
        };
        assert_eq!(s.problems()[0].key, "lock.lost_after_fraction");
        let s = LeaseSettings {
            lost_after_fraction: 0.1,
            ..LeaseSettings::default()
        };
        assert!(
            s.problems()[0]
                .to_string()
                .contains("counts as lost between two renewals")
        );
        let s = LeaseSettings {
            lease_ttl: Duration::ZERO,
            renew_every: Duration::ZERO,
            ..LeaseSettings::default()
        };
        let keys: Vec<_> = s.problems().into_iter().map(|p| p.key).collect();
        assert_eq!(keys, ["lock.lease_ttl", "lock.renew_every"]);
    }
}
