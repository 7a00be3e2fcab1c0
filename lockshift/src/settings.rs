//! lockshift's settings: one TOML file plus `LOCKSHIFT__…` environment
//! overrides, typed with serde and validated with messages that name the key
//! and the rule.
//!
//! ```toml
//! [node]
//! id = "web-1"               # default: <hostname>-<pid>
//! mode = "auto"              # legacy | combined | queue | auto
//!
//! [store]
//! backend = "cql"            # or "embedded"
//! [store.cql]
//! contact_points = ["10.0.0.1:9042"]
//!
//! [lock]
//! lease_ttl = "60s"
//! renew_every = "10s"
//! lost_after_fraction = 0.5
//! [lock.legacy]
//! backoff = "thesis"
//! [lock.queue]
//! head_poll = "10ms"
//!
//! [time]
//! source = "hybrid"
//!
//! [rollout]
//! stage_reread_every = "10s"
//! stage_valid_for = "30s"
//! quiet_period = "2m"
//! ```
//!
//! Every key can be overridden from the environment: `LOCKSHIFT__` then the
//! dotted path with `__` for the dots, e.g. `LOCKSHIFT__LOCK__RENEW_EVERY=20s`,
//! `LOCKSHIFT__STORE__CQL__CONTACT_POINTS=10.0.0.1:9042,10.0.0.2:9042`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use config::{Config, Environment, File, FileFormat};
use lockshift_lock::{NodeId, fmt_duration};
use serde::{Deserialize, Serialize};

use crate::Mode;
pub use lockshift_combined::{LockSettings, RolloutSettings};
pub use lockshift_legacy::{Backoff, LegacySettings};
pub use lockshift_queue_lock::{QueueSettings, TimeSettings, TimeSourceKind};
pub use lockshift_store::settings::InvalidSetting;
pub use lockshift_store::{Consistency, CqlSettings, StoreBackend, StoreSettings};

/// The prefix of environment overrides.
pub const ENV_PREFIX: &str = "LOCKSHIFT";

/// The longest period, poll or timeout accepted: nothing lockshift does
/// waits a year, and far beyond it timer arithmetic overflows.
const LONGEST_PERIOD: Duration = Duration::from_secs(365 * 24 * 3600);

/// Keys whose environment value is a comma-separated list.
const LIST_KEYS: [&str; 1] = ["store.cql.contact_points"];

/// All of lockshift's settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// This node.
    pub node: NodeSettings,
    /// The store.
    pub store: StoreSettings,
    /// Leases and the algorithms.
    pub lock: LockSettings,
    /// The time service.
    pub time: TimeSettings,
    /// The rollout state machine and node registry.
    pub rollout: RolloutSettings,
}

/// `[node]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeSettings {
    /// This node's id; `None` derives `<hostname>-<pid>`.
    pub id: Option<String>,
    /// The algorithm for new acquisitions.
    pub mode: Mode,
}

impl NodeSettings {
    /// The node id, configured or derived.
    ///
    /// # Errors
    /// When the configured id is invalid (also reported by
    /// [`Settings::problems`]).
    pub fn node_id(&self) -> Result<NodeId, InvalidSetting> {
        match &self.id {
            Some(id) => NodeId::new(id.clone()).map_err(|e| {
                InvalidSetting::new("node.id", format!("node.id ({id:?}) is invalid: {e}"))
            }),
            None => Ok(NodeId::for_this_process()),
        }
    }
}

/// Settings could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// The file is missing or unreadable, or not valid TOML.
    #[error("cannot read settings file {}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: config::ConfigError,
    },
    /// A value has the wrong type or an unknown key was given.
    #[error("invalid settings: {message}")]
    Parse {
        /// The parser's message, naming the key where it can.
        message: String,
    },
    /// Values parse but break rules.
    #[error("invalid settings:\n  - {}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  - "))]
    Invalid {
        /// Every rule broken.
        problems: Vec<InvalidSetting>,
    },
}

impl Settings {
    /// Loads `path` (if given; it must then exist) with the process
    /// environment's `LOCKSHIFT__…` overrides on top, and validates.
    ///
    /// # Errors
    /// [`SettingsError`] naming the file, key and rule.
    pub fn load(path: Option<&Path>) -> Result<Settings, SettingsError> {
        Self::load_with_env(path, None)
    }

    /// As [`load`](Self::load) with an explicit environment instead of the
    /// process's (for tests).
    ///
    /// # Errors
    /// [`SettingsError`] naming the file, key and rule.
    pub fn load_with_env(
        path: Option<&Path>,
        env: Option<HashMap<String, String>>,
    ) -> Result<Settings, SettingsError> {
        let mut builder = Config::builder();
        if let Some(path) = path {
            if !path.is_file() {
                return Err(SettingsError::File {
                    path: path.to_path_buf(),
                    source: config::ConfigError::Message("no such file".to_string()),
                });
            }
            builder = builder.add_source(File::from(path).format(FileFormat::Toml).required(true));
        }
        let mut environment = Environment::with_prefix(ENV_PREFIX)
            .prefix_separator("__")
            .separator("__")
            .try_parsing(true)
            .list_separator(",")
            .source(env);
        for key in LIST_KEYS {
            environment = environment.with_list_parse_key(key);
        }
        let built = builder
            .add_source(environment)
            .build()
            .map_err(|e| match path {
                Some(p)
                    if matches!(
                        e,
                        config::ConfigError::FileParse { .. } | config::ConfigError::Foreign(_)
                    ) =>
                {
                    SettingsError::File {
                        path: p.to_path_buf(),
                        source: e,
                    }
                }
                _ => SettingsError::Parse {
                    message: e.to_string(),
                },
            })?;
        Self::from_built(built)
    }

    /// Parses TOML text and validates.
    ///
    /// # Errors
    /// [`SettingsError`] naming the key and rule.
    pub fn from_toml(text: &str) -> Result<Settings, SettingsError> {
        let built = Config::builder()
            .add_source(File::from_str(text, FileFormat::Toml))
            .build()
            .map_err(|e| SettingsError::Parse {
                message: e.to_string(),
            })?;
        Self::from_built(built)
    }

    /// The settings `built` holds, validated.
    fn from_built(built: Config) -> Result<Settings, SettingsError> {
        let settings: Settings = built.try_deserialize().map_err(|e| SettingsError::Parse {
            message: e.to_string(),
        })?;
        settings.validated()
    }

    /// These settings if they break no rule.
    ///
    /// # Errors
    /// [`SettingsError::Invalid`] listing every rule broken.
    pub fn validated(self) -> Result<Settings, SettingsError> {
        let problems = self.problems();
        if problems.is_empty() {
            Ok(self)
        } else {
            Err(SettingsError::Invalid { problems })
        }
    }

    /// Every period, poll and timeout, by key (the lease TTL is bounded by
    /// Cassandra's own TTL limit instead).
    fn periods(&self) -> Vec<(&'static str, Duration)> {
        let mut periods = vec![
            ("lock.renew_every", self.lock.renew_every),
            (
                "lock.legacy.owner_wait_max",
                self.lock.legacy.owner_wait_max,
            ),
            (
                "lock.legacy.contention_unit",
                self.lock.legacy.contention_unit,
            ),
            ("lock.queue.waiter_poll", self.lock.queue.waiter_poll),
            ("lock.queue.head_poll", self.lock.queue.head_poll),
            ("time.update_every", self.time.update_every),
            (
                "rollout.stage_reread_every",
                self.rollout.stage_reread_every,
            ),
            ("rollout.stage_valid_for", self.rollout.stage_valid_for),
            ("rollout.quiet_period", self.rollout.quiet_period),
            ("rollout.clock_skew_margin", self.rollout.clock_skew_margin),
            ("rollout.heartbeat_every", self.rollout.heartbeat_every),
            ("rollout.heartbeat_ttl", self.rollout.heartbeat_ttl),
            ("store.cql.connect_timeout", self.store.cql.connect_timeout),
            ("store.cql.request_timeout", self.store.cql.request_timeout),
        ];
        if let Some(gc_grace) = self.store.embedded.gc_grace {
            periods.push(("store.embedded.gc_grace", gc_grace));
        }
        if let Some(stale_after) = self.lock.queue.stale_after {
            periods.push(("lock.queue.stale_after", stale_after));
        }
        periods
    }

    /// Every rule these settings break; empty when valid.
    pub fn problems(&self) -> Vec<InvalidSetting> {
        let lease = self.lock.lease();
        let mut out = Vec::new();
        for (key, value) in self.periods() {
            if value > LONGEST_PERIOD {
                out.push(InvalidSetting::new(
                    key,
                    format!("{key} ({}) is longer than a year; no lockshift period, poll or timeout may be", fmt_duration(value)),
                ));
            }
        }
        if let Err(e) = self.node.node_id() {
            out.push(e);
        }
        out.extend(self.store.problems());
        out.extend(lease.problems());
        out.extend(self.lock.legacy.problems());
        out.extend(self.lock.queue.problems(&lease));
        out.extend(self.time.problems());
        out.extend(self.rollout.problems(&lease));
        out
    }
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
