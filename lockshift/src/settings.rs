//! lockshift's settings: one TOML file plus `LOCKSHIFT__…` environment
//! overrides, typed with serde and validated with messages that name the key
//! and the rule.
//!
//! ```toml
//! [node]
//! id = "web-1"               # default: <hostname>-<pid>
//! mode = "auto"              # legacy | combined | queue | auto
//!
//! [store]                    # required: a cluster, or "embedded" said out loud
//! backend = "cql"            # or "embedded" (this process only); implied by [store.cql]
//! [store.cql]
//! contact_points = ["10.0.0.1:9042"]
//! local_datacenter = "dc1"   # the datacenter this process runs in
//! username = "app"           # with password_file (or password): authentication
//! password_file = "/run/secrets/cql-password"
//! [store.cql.tls]            # TLS when ca_file is given; cert/key for client auth
//! ca_file = "/etc/lockshift/ca.crt"
//!
//! [lock]
//! home_datacenter = "dc1"    # several datacenters: where locks live (needs store.cql.local_datacenter)
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
//! `LOCKSHIFT__STORE__CQL__CONTACT_POINTS=10.0.0.1:9042,10.0.0.2:9042`,
//! `LOCKSHIFT__STORE__CQL__TLS__CA_FILE=/etc/lockshift/ca.crt`. User names,
//! passwords and file names are taken from the environment as they are
//! (never read as numbers or booleans). The password is never logged nor
//! shown in `Debug` output ([`lockshift_store::settings::Secret`]).
//!
//! Settings that name no store — no `[store.cql]`, no `store.backend` —
//! are valid to load, but a node refuses to start on them
//! ([`crate::StartError::NoStore`]): the embedded store is never a silent
//! default.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use config::{Config, Environment, File, FileFormat};
use lockshift_decide::duration::fmt_duration;
use lockshift_lock::NodeId;
use serde::{Deserialize, Serialize};

use crate::Mode;
use crate::homes::Configured;
/// What the settings give the parts built from them: a lease's terms
/// ([`LockSettings::lease`]) and a waiter's, the rollout guards' times.
pub use lockshift_decide::rollout::GuardTimes;
pub use lockshift_legacy::{Backoff, LegacySettings};
pub use lockshift_lock::{LeaseSettings, WaitingTerms};
pub use lockshift_queue_lock::{QueueSettings, TimeSettings, TimeSourceKind};
pub use lockshift_rollout::RolloutSettings;
pub use lockshift_store::settings::InvalidSetting;
pub use lockshift_store::settings::{ConnectionSecurity, Secret, TlsSettings};
pub use lockshift_store::settings::{EmbeddedSettings, Replication};
pub use lockshift_store::{Consistency, CqlSettings, StoreBackend, StoreSettings};
/// The values the settings hold (a datacenter's name, a keyspace's
/// replication, the embedded store's settings).
pub use lockshift_store::{Datacenter, InvalidArgument, InvalidDatacenter, Ttl};
/// The prefix of environment overrides.
pub const ENV_PREFIX: &str = "LOCKSHIFT";

/// The longest period, poll or timeout accepted: nothing lockshift does
/// waits a year, and far beyond it timer arithmetic overflows.
const LONGEST_PERIOD: Duration = Duration::from_secs(365 * 24 * 3600);

/// Keys whose environment value is a comma-separated list.
const LIST_KEYS: [&str; 1] = ["store.cql.contact_points"];

/// Keys whose environment value is taken as it is, never parsed: the
/// loader otherwise reads `0123` as the number 123 and `True` as `true`,
/// which would change a password, a user name or a file name.
const VERBATIM_KEYS: [&str; 9] = [
    "node.id",
    "store.cql.local_datacenter",
    "lock.home_datacenter",
    "store.cql.username",
    "store.cql.password",
    "store.cql.password_file",
    "store.cql.tls.ca_file",
    "store.cql.tls.cert_file",
    "store.cql.tls.key_file",
];

/// The `LOCKSHIFT__…` variable of a dotted key.
pub fn env_var_of(key: &str) -> String {
    format!("{ENV_PREFIX}__{}", key.to_uppercase().replace('.', "__"))
}

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
    /// Default: none — each process derives `<hostname>-<pid>-<tag>`, `tag` drawn at every start.
    pub id: Option<String>,
    /// The algorithm for new acquisitions.
    /// Default: `"auto"`.
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
                // The id error quotes the id, cut short: once is enough.
                InvalidSetting::new("node.id", format!("node.id is invalid: {e}"))
            }),
            None => Ok(lockshift_lock::node_id_for_this_process()),
        }
    }
}

/// One entry of `lock.homes`: the locks whose names start with `prefix`
/// are homed in `datacenter`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefixHome {
    /// The start of the lock names (not empty).
    pub prefix: String,
    /// Their home.
    pub datacenter: Datacenter,
}

/// `[lock]`: the lease keys shared by every algorithm, each algorithm's
/// own section, and where locks live across datacenters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LockSettings {
    /// See [`LeaseSettings::lease_ttl`].
    /// Default: `60s`.
    #[serde(with = "humantime_serde")]
    pub lease_ttl: Duration,
    /// See [`LeaseSettings::renew_every`].
    /// Default: `10s`.
    #[serde(with = "humantime_serde")]
    pub renew_every: Duration,
    /// See [`LeaseSettings::lost_after_fraction`].
    /// Default: `0.5`.
    pub lost_after_fraction: f64,
    /// `[lock.legacy]`.
    pub legacy: LegacySettings,
    /// `[lock.queue]`.
    pub queue: QueueSettings,
    /// The datacenter every lock's cells are read and written in, at
    /// `LOCAL_QUORUM` through its coordinators, from every client wherever
    /// it runs — and the fleet's own rows (stage, registry): its *home*
    /// (docs/design.md §4a). A client there makes no request to another
    /// datacenter to take, renew, hand off or release a lock; a client
    /// elsewhere takes it in the same line, one cross-datacenter round
    /// trip slower per request, and is refused at once while it cannot
    /// reach the home. Needs `store.cql.local_datacenter`. The homes the
    /// store records win: this seeds the record of a fleet that has none,
    /// and `migrate home move` changes it.
    /// Default: none (every request at `store.cql.consistency`).
    pub home_datacenter: Option<Datacenter>,
    /// Homes of the locks whose names start with a prefix (the longest
    /// matching prefix wins; the others follow `home_datacenter`), for
    /// fleets whose locks belong to different datacenters:
    /// `homes = [{ prefix = "eu/", datacenter = "dc2" }]`. Seeded like
    /// `home_datacenter`.
    /// Default: `[]`.
    pub homes: Vec<PrefixHome>,
}

impl Default for LockSettings {
    fn default() -> Self {
        let lease = LeaseSettings::default();
        LockSettings {
            lease_ttl: lease.lease_ttl,
            renew_every: lease.renew_every,
            lost_after_fraction: lease.lost_after_fraction,
            legacy: LegacySettings::default(),
            queue: QueueSettings::default(),
            home_datacenter: None,
            homes: Vec::new(),
        }
    }
}

impl LockSettings {
    /// The homes these settings name.
    pub fn configured_homes(&self) -> Configured {
        Configured::new(
            self.home_datacenter.clone(),
            self.homes
                .iter()
                .map(|h| (h.prefix.clone(), h.datacenter.clone())),
        )
    }

    /// Every rule the home settings break.
    fn home_problems(&self, store: &StoreSettings) -> Vec<InvalidSetting> {
        let mut out = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (i, home) in self.homes.iter().enumerate() {
            // The one check every way of writing a prefix rule goes through.
            if let Err(e) = lockshift_decide::home::Rule::prefix(home.prefix.as_str()) {
                let and = if home.prefix.is_empty() {
                    "; the default home is lock.home_datacenter"
                } else {
                    ""
                };
                out.push(InvalidSetting::new(
                    "lock.homes",
                    format!("lock.homes[{i}].prefix: {e}{and}"),
                ));
            } else if !seen.insert(home.prefix.as_str()) {
                out.push(InvalidSetting::new(
                    "lock.homes",
                    format!(
                        "lock.homes[{i}].prefix ({}) is given twice; give each prefix one home",
                        lockshift_store::settings::echo(&home.prefix)
                    ),
                ));
            }
        }
        let homed = self.home_datacenter.is_some() || !self.homes.is_empty();
        if homed && store.backend == Some(StoreBackend::Cql) && store.cql.local_datacenter.is_none()
        {
            out.push(InvalidSetting::new(
                "store.cql.local_datacenter",
                "lock.home_datacenter (or lock.homes) needs store.cql.local_datacenter: the \
                 datacenter this process runs in, so that requests to its home stay in it and \
                 those that leave it are known (LOCKSHIFT__STORE__CQL__LOCAL_DATACENTER)",
            ));
        }
        out
    }

    /// The lease part.
    pub fn lease(&self) -> LeaseSettings {
        LeaseSettings {
            lease_ttl: self.lease_ttl,
            renew_every: self.renew_every,
            lost_after_fraction: self.lost_after_fraction,
        }
    }
}

/// Settings could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// The file is missing or unreadable (a directory, say), or not valid
    /// TOML.
    #[error("cannot read settings file {}: {error}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong (shown in the message, not chained).
        error: config::ConfigError,
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
            let not_a_file = if path.is_dir() {
                Some("it is a directory; name the TOML settings file in it")
            } else if !path.exists() {
                Some("no such file")
            } else if !path.is_file() {
                Some("not a regular file")
            } else {
                None
            };
            if let Some(why) = not_a_file {
                return Err(SettingsError::File {
                    path: path.to_path_buf(),
                    error: config::ConfigError::Message(why.to_string()),
                });
            }
            builder = builder.add_source(File::from(path).format(FileFormat::Toml).required(true));
        }
        // The environment as a map (the process's, or the one given), so
        // the verbatim keys can be taken out and set as plain strings.
        let mut env: HashMap<String, String> = env.unwrap_or_else(|| {
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .filter(|(k, _)| k.starts_with(ENV_PREFIX))
                .collect()
        });
        let mut verbatim = Vec::new();
        for key in VERBATIM_KEYS {
            if let Some(value) = env.remove(&env_var_of(key)) {
                verbatim.push((key, value));
            }
        }
        let mut environment = Environment::with_prefix(ENV_PREFIX)
            .prefix_separator("__")
            .separator("__")
            .try_parsing(true)
            .list_separator(",")
            .source(Some(env));
        for key in LIST_KEYS {
            environment = environment.with_list_parse_key(key);
        }
        builder = builder.add_source(environment);
        for (key, value) in verbatim {
            // Overrides sit above every source, where the environment's
            // values sit anyway (above the file).
            builder = builder
                .set_override(key, value)
                .map_err(|e| SettingsError::Parse {
                    message: e.to_string(),
                })?;
        }
        let built = builder.build().map_err(|e| match path {
            Some(p)
                if matches!(
                    e,
                    config::ConfigError::FileParse { .. } | config::ConfigError::Foreign(_)
                ) =>
            {
                SettingsError::File {
                    path: p.to_path_buf(),
                    error: e,
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
            (
                "lock.queue.waiting_renew_every",
                self.lock.queue.waiting_renew_every,
            ),
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
            (
                "store.cql.speculative_read_after",
                self.store.cql.speculative_read_after,
            ),
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
        out.extend(self.lock.home_problems(&self.store));
        if self.time.source == TimeSourceKind::Global
            && let Some(home) = self
                .lock
                .homes
                .iter()
                .find(|h| Some(&h.datacenter) != self.lock.home_datacenter.as_ref())
        {
            // `GlobalTime` is one fleet row, read on every queue
            // acquisition, at the default home: a lock homed elsewhere
            // would stop whenever its home is cut off from that one.
            out.push(InvalidSetting::new(
                "time.source",
                format!(
                    "time.source = \"global\" reads one fleet-wide row on every acquisition, \
                     at the default home ({}), so locks homed in {} (lock.homes, prefix {}) \
                     would stop whenever the two datacenters are cut apart; use \"hybrid\" \
                     (the default) with per-prefix homes",
                    self.lock
                        .home_datacenter
                        .as_ref()
                        .map_or_else(|| "none named".to_string(), ToString::to_string),
                    home.datacenter,
                    lockshift_store::settings::echo(&home.prefix)
                ),
            ));
        }
        out
    }
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
