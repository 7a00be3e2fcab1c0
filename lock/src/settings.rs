//! Lease settings: the `[lock]` keys every algorithm shares.

use std::time::Duration;

use lockshift_store::Ttl;
use lockshift_store::settings::InvalidSetting;
use serde::{Deserialize, Serialize};

/// How long cells live and how they are kept alive.
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
    #[serde(with = "humantime_serde")]
    pub lease_ttl: Duration,
    /// How often cells are rewritten.
    #[serde(with = "humantime_serde")]
    pub renew_every: Duration,
    /// The lease-lost signal fires once the last proven renewal was sent
    /// longer ago than this fraction of `lease_ttl` (the shipped C# lock: ½).
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

    /// How long after the last proven renewal the lease counts as lost.
    pub fn lost_after(&self) -> Duration {
        self.lease_ttl
            .mul_f64(self.lost_after_fraction.clamp(0.0, 1.0))
    }

    /// Every rule these settings break; empty when valid.
    pub fn problems(&self) -> Vec<InvalidSetting> {
        let mut out = Vec::new();
        if let Err(e) = self.ttl() {
            out.push(e);
        }
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

/// A duration as an operator writes it: `40s`, `1m 30s`, `250ms`.
pub fn fmt_duration(d: Duration) -> String {
    humantime_serde::re::humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

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
