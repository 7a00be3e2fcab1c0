//! [`RolloutSettings`], the `[rollout]` section: how nodes follow the
//! stage and what the guards assume. The whole settings file — `[node]`,
//! `[store]`, `[lock]`, `[time]` and this — is `lockshift::Settings`, with
//! its loading and validation.

use std::time::Duration;

use lockshift_decide::duration::fmt_duration;
use lockshift_decide::registry::MAX_REGISTRY_TTL;
use lockshift_decide::rollout::GuardTimes;
use lockshift_lock::LeaseSettings;
use lockshift_store::settings::InvalidSetting;
use serde::{Deserialize, Serialize};

/// `[rollout]`: how nodes follow the stage and announce themselves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RolloutSettings {
    /// How often a node re-reads the stage (and its config file).
    /// Default: `10s`.
    #[serde(with = "humantime_serde")]
    pub stage_reread_every: Duration,
    /// How long a node trusts its view of the stage without confirming it:
    /// once its last successful stage read or its last successful heartbeat
    /// is older than this, it acts as combined (safe beside every mode)
    /// until it can confirm the stage again.
    /// Default: `30s`.
    #[serde(with = "humantime_serde")]
    pub stage_valid_for: Duration,
    /// How long no legacy activity must have been seen before `dual`.
    /// Default: `2m`.
    #[serde(with = "humantime_serde")]
    pub quiet_period: Duration,
    /// The clock skew the fleet is assumed to stay within.
    /// Default: `5s`.
    #[serde(with = "humantime_serde")]
    pub clock_skew_margin: Duration,
    /// How often a node refreshes its registry row.
    /// Default: `5s`.
    #[serde(with = "humantime_serde")]
    pub heartbeat_every: Duration,
    /// TTL of the registry row: a node silent this long counts as gone.
    /// Default: `30s`.
    #[serde(with = "humantime_serde")]
    pub heartbeat_ttl: Duration,
}

impl Default for RolloutSettings {
    fn default() -> Self {
        RolloutSettings {
            stage_reread_every: Duration::from_secs(10),
            stage_valid_for: Duration::from_secs(30),
            quiet_period: Duration::from_secs(120),
            clock_skew_margin: Duration::from_secs(5),
            heartbeat_every: Duration::from_secs(5),
            heartbeat_ttl: Duration::from_secs(30),
        }
    }
}

impl RolloutSettings {
    /// The times the rollout guards judge by
    /// ([`evaluate`](crate::rollout::evaluate)): the quiet period and the
    /// heartbeat TTL after which a node counts as silent.
    pub fn guard_times(&self) -> GuardTimes {
        GuardTimes {
            quiet_period: self.quiet_period,
            heartbeat_ttl: self.heartbeat_ttl,
            clock_skew_margin: self.clock_skew_margin,
        }
    }

    /// The shortest quiet period that is safe: a node acts on a stage it
    /// can no longer confirm for at most `stage_valid_for`, a legacy holder's
    /// cells live one lease TTL, and clocks disagree by up to the skew
    /// margin (docs/design.md, "Stages").
    pub fn minimum_quiet_period(&self, lease: &LeaseSettings) -> Duration {
        self.stage_valid_for
            .saturating_add(lease.lease_ttl)
            .saturating_add(self.clock_skew_margin)
    }

    /// How long a silent node's registry row must stay visible: until its
    /// stage view has surely expired (`stage_valid_for` after its last
    /// heartbeat) plus a lease TTL, by clocks that may disagree by the skew
    /// margin — and never less than the heartbeat TTL. Guards count a node
    /// as present for as long as its row is there.
    pub fn registry_ttl(&self, lease: &LeaseSettings) -> Duration {
        self.minimum_quiet_period(lease).max(self.heartbeat_ttl)
    }

    /// Every rule these settings break, given the lease settings.
    pub fn problems(&self, lease: &LeaseSettings) -> Vec<InvalidSetting> {
        let mut out = Vec::new();
        for (key, value) in [
            ("rollout.stage_reread_every", self.stage_reread_every),
            ("rollout.heartbeat_every", self.heartbeat_every),
        ] {
            if value.is_zero() {
                out.push(InvalidSetting::new(
                    key,
                    format!("{key} must be greater than 0"),
                ));
            }
        }
        for (key, period) in [
            ("rollout.stage_reread_every", self.stage_reread_every),
            ("rollout.heartbeat_every", self.heartbeat_every),
        ] {
            if self.stage_valid_for < period.saturating_mul(2) {
                out.push(InvalidSetting::new(
                    "rollout.stage_valid_for",
                    format!(
                        "rollout.stage_valid_for ({}) must be at least twice {key} ({}), or one late read makes every node act as combined",
                        fmt_duration(self.stage_valid_for),
                        fmt_duration(period)
                    ),
                ));
            }
        }
        let minimum = self.minimum_quiet_period(lease);
        if self.quiet_period <= minimum {
            out.push(InvalidSetting::new(
                "rollout.quiet_period",
                format!(
                    "rollout.quiet_period ({}) must exceed rollout.stage_valid_for + lock.lease_ttl + rollout.clock_skew_margin ({})",
                    fmt_duration(self.quiet_period),
                    fmt_duration(minimum)
                ),
            ));
        }
        if self.heartbeat_ttl <= self.heartbeat_every.saturating_mul(2) {
            out.push(InvalidSetting::new(
                "rollout.heartbeat_ttl",
                format!(
                    "rollout.heartbeat_ttl ({}) must be more than twice rollout.heartbeat_every ({}), or live nodes vanish from the registry between heartbeats",
                    fmt_duration(self.heartbeat_ttl),
                    fmt_duration(self.heartbeat_every)
                ),
            ));
        }
        // The registry is read over the minutes a registration can span
        // (lockshift_decide::registry): one that outlived them would go
        // unseen by the guards.
        let registry = self.registry_ttl(lease);
        if registry > MAX_REGISTRY_TTL {
            out.push(InvalidSetting::new(
                "rollout.stage_valid_for",
                format!(
                    "rollout.stage_valid_for + lock.lease_ttl + rollout.clock_skew_margin, and rollout.heartbeat_ttl, must be at most {} (how long the registry keeps a silent process's entry), got {}: shorten the lease TTL or the stage's validity",
                    fmt_duration(MAX_REGISTRY_TTL),
                    fmt_duration(registry)
                ),
            ));
        }
        out
    }
}
