//! How a store is chosen and connected: the `[store]` section of lockshift's
//! settings.
//!
//! ```toml
//! [store]
//! backend = "cql"            # or "embedded"; default: "cql" if [store.cql] is given, else "embedded"
//!
//! [store.cql]
//! contact_points = ["10.0.0.1:9042", "10.0.0.2:9042"]
//! keyspace = "lockshift"
//! consistency = "quorum"     # or "local_quorum"
//! connect_timeout = "5s"
//! request_timeout = "2s"
//! create_schema = false     # default; true creates keyspace and tables if missing
//! replication = { class = "NetworkTopologyStrategy", datacenters = { dc1 = 3 } }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::tombstones::{DEFAULT_FAILURE_THRESHOLD, DEFAULT_WARN_THRESHOLD, TombstoneThresholds};

/// Which backend serves the store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreBackend {
    /// In-process [`crate::MemoryStore`]: nothing to install, nothing shared
    /// between processes.
    #[default]
    Embedded,
    /// A CQL cluster (ScyllaDB, Cassandra, or the local endpoint).
    Cql,
}

/// The `[store]` section.
///
/// # Which backend when `backend` is not given
///
/// Settings that name a cluster (a `[store.cql]` section, or any
/// `LOCKSHIFT__STORE__CQL__…` variable) mean that cluster: `backend`
/// defaults to `cql` then, and to `embedded` only when nothing about CQL was
/// said. The alternative — embedded unless told otherwise — gave every
/// process of a fleet configured with only `contact_points` its own
/// in-memory store, and two processes held one lock. Refusing such settings
/// was the other option; it protects as well but fails the operator's
/// evident intent, so lockshift follows it instead (and logs the backend at
/// start, see [`StoreSettings::open`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, from = "RawStoreSettings")]
pub struct StoreSettings {
    /// The backend.
    pub backend: StoreBackend,
    /// Connection settings, used when `backend = "cql"`.
    pub cql: CqlSettings,
    /// Embedded-backend settings.
    pub embedded: EmbeddedSettings,
}

/// `[store]` as written: which keys were given at all.
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RawStoreSettings {
    backend: Option<StoreBackend>,
    cql: Option<CqlSettings>,
    embedded: EmbeddedSettings,
}

impl From<RawStoreSettings> for StoreSettings {
    fn from(raw: RawStoreSettings) -> Self {
        let backend = raw.backend.unwrap_or(match raw.cql {
            Some(_) => StoreBackend::Cql,
            None => StoreBackend::Embedded,
        });
        StoreSettings {
            backend,
            cql: raw.cql.unwrap_or_default(),
            embedded: raw.embedded,
        }
    }
}

/// The `[store.embedded]` section.
///
/// ```toml
/// [store.embedded]
/// gc_grace = "1h"                        # default: each table's own (crate::schema; 10 days)
/// tombstone_warn_threshold = 1000        # Cassandra's defaults
/// tombstone_failure_threshold = 100000
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbeddedSettings {
    /// How long dead cells shadow late, older writes — and cost every read
    /// that passes them — before being forgotten, for every table; unset,
    /// each table keeps its own `gc_grace_seconds`
    /// ([`crate::schema::options`]), as a cluster created from
    /// `migrate schema` would.
    #[serde(with = "humantime_serde::option")]
    pub gc_grace: Option<Duration>,
    /// Above this many tombstones a read's answer carries a warning
    /// (Cassandra's `tombstone_warn_threshold`).
    pub tombstone_warn_threshold: u64,
    /// Above this many tombstones a read fails (Cassandra's
    /// `tombstone_failure_threshold`).
    pub tombstone_failure_threshold: u64,
}

impl Default for EmbeddedSettings {
    fn default() -> Self {
        EmbeddedSettings {
            gc_grace: None,
            tombstone_warn_threshold: DEFAULT_WARN_THRESHOLD,
            tombstone_failure_threshold: DEFAULT_FAILURE_THRESHOLD,
        }
    }
}

impl EmbeddedSettings {
    /// A fresh embedded store with these settings, on the system clock.
    pub fn store(&self) -> crate::MemoryStore {
        let store = crate::MemoryStore::new().with_tombstone_thresholds(TombstoneThresholds {
            warn: self.tombstone_warn_threshold,
            fail: self.tombstone_failure_threshold,
        });
        match self.gc_grace {
            Some(grace) => store.with_gc_grace(grace),
            None => store,
        }
    }
}

/// Consistency level for every lockshift read and write.
///
/// The exclusion proofs need read-your-writes across clients (Lemma 1), which
/// QUORUM writes plus QUORUM reads give. `LOCAL_QUORUM` gives it only among
/// clients of one datacenter: use it only when every client of a lock lives in
/// the same datacenter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Consistency {
    /// `QUORUM`.
    #[default]
    Quorum,
    /// `LOCAL_QUORUM`.
    LocalQuorum,
}

impl fmt::Display for Consistency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Consistency::Quorum => "QUORUM",
            Consistency::LocalQuorum => "LOCAL_QUORUM",
        })
    }
}

/// Keyspace replication, as in `CREATE KEYSPACE … WITH replication = {…}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "class", deny_unknown_fields)]
pub enum Replication {
    /// `SimpleStrategy` with one replication factor.
    SimpleStrategy {
        /// Replicas per row.
        replication_factor: u32,
    },
    /// `NetworkTopologyStrategy` with a factor per datacenter.
    NetworkTopologyStrategy {
        /// Replicas per row in each datacenter.
        datacenters: BTreeMap<String, u32>,
    },
}

impl Default for Replication {
    fn default() -> Self {
        Replication::SimpleStrategy {
            replication_factor: 1,
        }
    }
}

impl Replication {
    /// The CQL map literal: `{'class': 'SimpleStrategy', 'replication_factor': 3}`.
    pub fn to_cql(&self) -> String {
        match self {
            Replication::SimpleStrategy { replication_factor } => {
                format!("{{'class': 'SimpleStrategy', 'replication_factor': {replication_factor}}}")
            }
            Replication::NetworkTopologyStrategy { datacenters } => {
                let mut s = String::from("{'class': 'NetworkTopologyStrategy'");
                for (dc, rf) in datacenters {
                    s.push_str(&format!(", '{}': {rf}", dc.replace('\'', "''")));
                }
                s.push('}');
                s
            }
        }
    }
}

/// The `[store.cql]` section.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CqlSettings {
    /// `host:port` of one or more nodes; the driver discovers the rest.
    pub contact_points: Vec<String>,
    /// The keyspace holding lockshift's tables.
    pub keyspace: String,
    /// Replication used when lockshift creates the keyspace.
    pub replication: Replication,
    /// Consistency of every read and write.
    pub consistency: Consistency,
    /// How long to wait for the first connection.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Client-side limit on one request; on expiry a write counts as
    /// "may have been applied".
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// Create the keyspace and tables if missing (`IF NOT EXISTS`), with
    /// `replication`. Off by default: a keyspace is created on request only
    /// — a service that silently created one with SimpleStrategy and one
    /// replica would give up every guarantee QUORUM was meant to give.
    /// `migrate schema` prints the statements for operators who run them
    /// themselves.
    pub create_schema: bool,
}

impl Default for CqlSettings {
    fn default() -> Self {
        CqlSettings {
            contact_points: vec!["127.0.0.1:9042".to_string()],
            keyspace: "lockshift".to_string(),
            replication: Replication::default(),
            consistency: Consistency::default(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(5),
            create_schema: false,
        }
    }
}

/// What a process on the embedded store is told at start.
pub const EMBEDDED_WARNING: &str = "store.backend = \"embedded\": locks exclude only within this \
     process (an in-memory store); set store.backend = \"cql\" and store.cql.contact_points for \
     locks shared by a fleet";

/// A setting that breaks a rule: which key, and the rule in words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidSetting {
    /// The dotted key, e.g. `store.cql.keyspace`.
    pub key: String,
    /// The whole message, naming the key and the rule.
    pub message: String,
}

impl InvalidSetting {
    /// A problem with `key`: `message` should name the key and the rule.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        InvalidSetting {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl StoreSettings {
    /// Opens the store these settings describe: a fresh embedded store (on
    /// the system clock), or a connection to the CQL cluster.
    ///
    /// # Errors
    /// Invalid settings, or the CQL connection's error.
    ///
    /// The embedded store is said out loud (a warning): it excludes only the
    /// tasks of this one process, which is right for tests and demos and
    /// wrong for a fleet.
    pub async fn open(&self) -> Result<crate::SharedStore, crate::StoreError> {
        match self.backend {
            StoreBackend::Embedded => Ok(std::sync::Arc::new({
                tracing::warn!("{EMBEDDED_WARNING}");
                self.embedded.store()
            })),
            StoreBackend::Cql => Ok(std::sync::Arc::new(
                crate::CqlStore::connect(&self.cql).await?,
            )),
        }
    }

    /// Every rule these settings break; empty when valid.
    pub fn problems(&self) -> Vec<InvalidSetting> {
        let mut out = Vec::new();
        if self.backend == StoreBackend::Cql {
            out.extend(self.cql.problems());
        }
        out
    }
}

impl CqlSettings {
    /// Every rule these settings break; empty when valid.
    pub fn problems(&self) -> Vec<InvalidSetting> {
        let mut out = Vec::new();
        if self.contact_points.is_empty() {
            out.push(InvalidSetting::new(
                "store.cql.contact_points",
                "store.cql.contact_points must list at least one host:port",
            ));
        }
        for (i, point) in self.contact_points.iter().enumerate() {
            if let Err(why) = check_contact_point(point) {
                out.push(InvalidSetting::new(
                    "store.cql.contact_points",
                    format!("store.cql.contact_points[{i}] ({point:?}) {why}"),
                ));
            }
        }
        if !is_cql_identifier(&self.keyspace) {
            out.push(InvalidSetting::new(
                "store.cql.keyspace",
                format!(
                    "store.cql.keyspace ({:?}) must be 1-48 characters of a-z, 0-9 and _, starting with a letter",
                    self.keyspace
                ),
            ));
        }
        match &self.replication {
            Replication::SimpleStrategy {
                replication_factor: 0,
            } => out.push(InvalidSetting::new(
                "store.cql.replication.replication_factor",
                "store.cql.replication.replication_factor must be at least 1",
            )),
            Replication::NetworkTopologyStrategy { datacenters } if datacenters.is_empty() => out
                .push(InvalidSetting::new(
                    "store.cql.replication.datacenters",
                    "store.cql.replication.datacenters must name at least one datacenter",
                )),
            _ => {}
        }
        for (key, value) in [
            ("store.cql.connect_timeout", self.connect_timeout),
            ("store.cql.request_timeout", self.request_timeout),
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

fn check_contact_point(point: &str) -> Result<(), &'static str> {
    let (host, port) = point
        .rsplit_once(':')
        .ok_or("must be host:port, e.g. 127.0.0.1:9042")?;
    if host.is_empty() {
        return Err("has an empty host");
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err("has a port that is not a number from 1 to 65535"),
    }
}

fn is_cql_identifier(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 48
        && bytes[0].is_ascii_lowercase()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_even_for_cql() {
        let s = StoreSettings {
            backend: StoreBackend::Cql,
            ..StoreSettings::default()
        };
        assert!(s.problems().is_empty(), "{:?}", s.problems());
    }

    #[test]
    fn each_problem_names_its_key() {
        let s = StoreSettings {
            backend: StoreBackend::Cql,
            cql: CqlSettings {
                contact_points: vec!["nohost".into(), "h:0".into()],
                keyspace: "Bad-Name".into(),
                replication: Replication::SimpleStrategy {
                    replication_factor: 0,
                },
                request_timeout: Duration::ZERO,
                ..CqlSettings::default()
            },
            ..StoreSettings::default()
        };
        let msgs: Vec<String> = s.problems().iter().map(|p| p.to_string()).collect();
        assert_eq!(msgs.len(), 5, "{msgs:#?}");
        assert!(msgs[0].starts_with("store.cql.contact_points[0] (\"nohost\") must be host:port"));
        assert!(msgs[1].contains("contact_points[1]") && msgs[1].contains("port"));
        assert!(msgs[2].starts_with("store.cql.keyspace (\"Bad-Name\")"));
        assert!(msgs[3].contains("replication_factor must be at least 1"));
        assert_eq!(msgs[4], "store.cql.request_timeout must be greater than 0");
    }

    /// Issue 11 item 4: a process on the embedded store is told at start
    /// that its locks exclude only within itself.
    #[test]
    fn the_embedded_store_says_it_excludes_only_this_process() {
        #[derive(Clone, Default)]
        struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Captured {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        tracing::subscriber::with_default(subscriber, || {
            runtime.block_on(StoreSettings::default().open()).unwrap();
        });
        let logged = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(logged.contains("WARN"), "{logged}");
        assert!(
            logged.contains("locks exclude only within this process"),
            "{logged}"
        );
    }

    #[test]
    fn replication_renders_as_cql() {
        let mut dcs = BTreeMap::new();
        dcs.insert("dc1".to_string(), 3);
        dcs.insert("dc2".to_string(), 2);
        assert_eq!(
            Replication::NetworkTopologyStrategy { datacenters: dcs }.to_cql(),
            "{'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 2}"
        );
        assert_eq!(
            Replication::default().to_cql(),
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        );
    }
}
