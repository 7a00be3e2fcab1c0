//! `[lock.legacy]`: the retry pauses of GetLock (thesis listing 5).

use std::time::Duration;

use lockshift_store::settings::InvalidSetting;
use serde::{Deserialize, Serialize};

/// How long to pause after a `ConcurrentAttempt`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backoff {
    /// The thesis: uniform in `[0, unit × attempt)`.
    #[default]
    Thesis,
    /// The shipped C# lock: uniform in `[0, unit × e^min(attempt, 5))`.
    Exponential,
}

/// ```toml
/// [lock.legacy]
/// backoff = "thesis"          # or "exponential"
/// owner_wait_max = "1s"       # after AnotherThreadIsOwner: pause U[0, 1s)
/// contention_unit = "50ms"    # after ConcurrentAttempt: U[0, 50ms × attempt)
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LegacySettings {
    /// The pause rule after a concurrent attempt.
    /// Default: `"thesis"`.
    pub backoff: Backoff,
    /// Upper bound of the pause after finding another owner.
    /// Default: `1s`.
    #[serde(with = "humantime_serde")]
    pub owner_wait_max: Duration,
    /// The unit of the pause after a concurrent attempt.
    /// Default: `50ms`.
    #[serde(with = "humantime_serde")]
    pub contention_unit: Duration,
}

impl Default for LegacySettings {
    fn default() -> Self {
        LegacySettings {
            backoff: Backoff::Thesis,
            owner_wait_max: Duration::from_millis(1000),
            contention_unit: Duration::from_millis(50),
        }
    }
}

impl LegacySettings {
    /// The upper bound of the pause after the `attempt`-th concurrent attempt
    /// (counting from 1).
    pub fn contention_wait_max(&self, attempt: u32) -> Duration {
        match self.backoff {
            Backoff::Thesis => self.contention_unit.saturating_mul(attempt.max(1)),
            Backoff::Exponential => lockshift_lock::scale_duration(
                self.contention_unit,
                f64::from(attempt.clamp(1, 5)).exp(),
            ),
        }
    }

    /// Every rule these settings break; empty when valid.
    pub fn problems(&self) -> Vec<InvalidSetting> {
        let mut out = Vec::new();
        for (key, value) in [
            ("lock.legacy.owner_wait_max", self.owner_wait_max),
            ("lock.legacy.contention_unit", self.contention_unit),
        ] {
            if value.is_zero() {
                out.push(InvalidSetting::new(
                    key,
                    format!("{key} must be greater than 0"),
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_bounds_follow_the_thesis_and_the_csharp_lock() {
        let s = LegacySettings::default();
        assert_eq!(s.contention_wait_max(1), Duration::from_millis(50));
        assert_eq!(s.contention_wait_max(7), Duration::from_millis(350));
        let e = LegacySettings {
            backoff: Backoff::Exponential,
            ..s
        };
        assert_eq!(e.contention_wait_max(1).as_millis(), 135); // 50·e
        assert_eq!(e.contention_wait_max(9), e.contention_wait_max(5)); // capped at e^5
        assert!(LegacySettings::default().problems().is_empty());
        let bad = LegacySettings {
            contention_unit: Duration::ZERO,
            ..LegacySettings::default()
        };
        assert_eq!(
            bad.problems()[0].to_string(),
            "lock.legacy.contention_unit must be greater than 0"
        );
    }
}
