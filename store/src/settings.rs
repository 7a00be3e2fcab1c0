//! How a store is chosen and connected: the `[store]` section of lockshift's
//! settings.
//!
//! ```toml
//! [store]
//! backend = "cql"            # or "embedded"; "cql" if [store.cql] is given; no default
//!
//! [store.cql]
//! contact_points = ["10.0.0.1:9042", "10.0.0.2:9042"]
//! keyspace = "lockshift"
//! consistency = "quorum"     # or "local_quorum"
//! connect_timeout = "5s"
//! request_timeout = "2s"
//! speculative_read_after = "250ms"
//! keepalive_every = "500ms"  # a node silent this long + keepalive_timeout is left
//! keepalive_timeout = "1s"
//! create_schema = false     # default; true creates keyspace and tables if missing
//! replication = { class = "NetworkTopologyStrategy", datacenters = { dc1 = 3 } }
//! username = "app"           # password authentication (PasswordAuthenticator)
//! password_file = "/run/secrets/cql-password"   # or password = "…", not both
//!
//! [store.cql.tls]            # TLS on when ca_file is given
//! ca_file = "/etc/lockshift/ca.crt"       # the CA that signed the nodes' certificates
//! cert_file = "/etc/lockshift/client.crt" # a client certificate, when the nodes require one
//! key_file = "/etc/lockshift/client.key"
//! verify_hostname = true     # default; false is UNSAFE (see TlsSettings::verify_hostname)
//! ```
//!
//! # No store by default
//!
//! Settings that name no store are refused where a store is opened
//! ([`StoreSettings::open`], and so a lockshift node's start) with
//! [`NO_STORE_CHOSEN`], which says what to add. The embedded store must be
//! asked for (`backend = "embedded"`): a fleet whose settings forgot the
//! cluster would otherwise run one in-memory store per process, and two
//! processes would hold one lock while the logs said so only in passing.
//!
//! # Secrets
//!
//! `password` is a [`Secret`]: its `Debug` says `"<redacted>"`, it is never
//! serialised, and nothing in lockshift logs it. `password_file` is read when
//! the store connects (one trailing newline dropped), so the secret need not
//! sit in the settings file or the environment at all.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::tombstones::{DEFAULT_FAILURE_THRESHOLD, DEFAULT_WARN_THRESHOLD, TombstoneThresholds};

/// Which backend serves the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreBackend {
    /// In-process [`crate::MemoryStore`]: nothing to install, nothing shared
    /// between processes.
    Embedded,
    /// A CQL cluster (ScyllaDB, Cassandra, or the local endpoint).
    Cql,
}

/// The `[store]` section.
///
/// # Which backend when `backend` is not given
///
/// Settings that name a cluster (a `[store.cql]` section, or any
/// `LOCKSHIFT__STORE__CQL__…` variable) mean that cluster: `backend` is
/// `cql` then. When nothing about the store was said, `backend` is `None`
/// — no store — and opening one fails with [`NO_STORE_CHOSEN`]. The
/// embedded store was once the silent default; a fleet that forgot its
/// cluster then ran one in-memory store per process, and two processes held
/// one lock while only a log line said so. Now it takes
/// `backend = "embedded"`, written out.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, from = "RawStoreSettings")]
pub struct StoreSettings {
    /// The backend; `None` when the settings chose none (opening a store
    /// then fails with [`NO_STORE_CHOSEN`]).
    /// Default: none (`"cql"` when a `[store.cql]` section is given).
    pub backend: Option<StoreBackend>,
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
        let backend = raw
            .backend
            .or_else(|| raw.cql.as_ref().map(|_| StoreBackend::Cql));
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
    /// Default: none (each table's own).
    #[serde(with = "humantime_serde::option")]
    pub gc_grace: Option<Duration>,
    /// Above this many tombstones a read's answer carries a warning
    /// (Cassandra's `tombstone_warn_threshold`).
    /// Default: `1000`.
    pub tombstone_warn_threshold: u64,
    /// Above this many tombstones a read fails (Cassandra's
    /// `tombstone_failure_threshold`).
    /// Default: `100000`.
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
    /// Default: `["127.0.0.1:9042"]` (only where `[store.cql]` is given without it).
    pub contact_points: Vec<String>,
    /// The keyspace holding lockshift's tables.
    /// Default: `"lockshift"`.
    pub keyspace: String,
    /// Replication used when lockshift creates the keyspace.
    /// Default: `{ class = "SimpleStrategy", replication_factor = 1 }` (one test node only).
    pub replication: Replication,
    /// Consistency of every read and write.
    /// Default: `"quorum"`.
    pub consistency: Consistency,
    /// How long to wait for the first connection.
    /// Default: `5s`.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Client-side limit on one request; on expiry a write counts as
    /// "may have been applied".
    /// Default: `5s`.
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// Create the keyspace and tables if missing (`IF NOT EXISTS`), with
    /// `replication`. Off by default: a keyspace is created on request only
    /// — a service that silently created one with SimpleStrategy and one
    /// replica would give up every guarantee QUORUM was meant to give.
    /// `migrate schema` prints the statements for operators who run them
    /// themselves.
    /// Default: `false`.
    pub create_schema: bool,
    /// A read that has no answer after this long is sent to a second node
    /// as well (the driver's speculative execution, for reads only: a read
    /// changes nothing, so two in flight cannot hurt); the first answer
    /// wins. This keeps reads going when one node is cut off but its
    /// connections stay open. `0s` turns it off. See the CQL backend's
    /// docs (`store/src/cql/mod.rs`, "Retries") for the whole policy.
    /// Default: `250ms`.
    #[serde(with = "humantime_serde")]
    pub speculative_read_after: Duration,
    /// How often every connection to a node sends a keepalive request
    /// (the CQL `OPTIONS` request, a few bytes; the node answers at once).
    /// With [`keepalive_timeout`](Self::keepalive_timeout) it bounds how
    /// long a node that was cut off or stopped, whose connections stay
    /// open, keeps getting requests: its connections close after at most
    /// `keepalive_every + keepalive_timeout` without an answer, the
    /// requests in flight on them fail at once (a write as "may have been
    /// applied"), and new requests go to the other nodes until it answers
    /// again. Without it they would wait out `request_timeout`, each. The
    /// cost: two small requests a second per connection at the default.
    /// Default: `500ms`.
    #[serde(with = "humantime_serde")]
    pub keepalive_every: Duration,
    /// A connection whose keepalives have had no answer for this long is
    /// closed (see [`keepalive_every`](Self::keepalive_every)). Too short
    /// for a node's worst pause (a long garbage collection) only costs a
    /// reconnection: the requests that were on it fail as they would on a
    /// timeout, and the driver connects again as soon as the node answers.
    /// Default: `1s`.
    #[serde(with = "humantime_serde")]
    pub keepalive_timeout: Duration,
    /// User name for password authentication (Cassandra's
    /// `PasswordAuthenticator`, ScyllaDB's `PasswordAuthenticator`); with
    /// `password` or `password_file`.
    /// Default: none (no authentication).
    pub username: Option<String>,
    /// The password, inline. Prefer `password_file`. Never logged, never
    /// in `Debug` output, never serialised.
    /// Default: none.
    #[serde(skip_serializing)]
    pub password: Option<Secret>,
    /// A file holding the password (one trailing newline is dropped), read
    /// when the store connects. Exclusive with `password`.
    /// Default: none.
    pub password_file: Option<PathBuf>,
    /// TLS to the nodes; on when `tls.ca_file` is given.
    pub tls: TlsSettings,
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
            speculative_read_after: Duration::from_millis(250),
            keepalive_every: Duration::from_millis(500),
            keepalive_timeout: Duration::from_secs(1),
            username: None,
            password: None,
            password_file: None,
            tls: TlsSettings::default(),
        }
    }
}

/// The `[store.cql.tls]` section: TLS between lockshift and the nodes'
/// CQL port (Cassandra's `client_encryption_options`).
///
/// TLS is on when [`ca_file`](Self::ca_file) is given: lockshift trusts
/// exactly the CA named there (not the system's store — a cluster's
/// certificates are nearly always signed by a private CA, and trusting
/// every public CA as well would only widen who can impersonate a node).
/// The connection uses rustls (TLS 1.2 and 1.3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSettings {
    /// PEM file of the CA certificate(s) that signed the nodes'
    /// certificates. Turns TLS on.
    /// Default: none (no TLS).
    pub ca_file: Option<PathBuf>,
    /// PEM file of this client's certificate (chain), for nodes that
    /// require one (`require_client_auth: true`); with `key_file`.
    /// Default: none.
    pub cert_file: Option<PathBuf>,
    /// PEM file of the client certificate's private key (PKCS#8, PKCS#1 or
    /// SEC1, unencrypted); with `cert_file`.
    /// Default: none.
    pub key_file: Option<PathBuf>,
    /// Check that each node's certificate is valid for the address
    /// lockshift connects to.
    ///
    /// The driver connects to nodes by IP address — the ones it discovers
    /// as well as the contact points — so a node's certificate must list
    /// its IP address in `subjectAltName`. `false` is **UNSAFE**: the
    /// certificate must still be signed by the CA, but any certificate that
    /// CA ever signed — another node's, a client's — then passes for any
    /// node, so whoever holds one can stand in for the cluster. Use it only
    /// for certificates that cannot carry IP addresses, and only while you
    /// control every certificate the CA signs.
    /// Default: `true`.
    pub verify_hostname: bool,
}

impl Default for TlsSettings {
    fn default() -> Self {
        TlsSettings {
            ca_file: None,
            cert_file: None,
            key_file: None,
            verify_hostname: true,
        }
    }
}

impl TlsSettings {
    /// Whether TLS is on (a CA file is given).
    pub fn enabled(&self) -> bool {
        self.ca_file.is_some()
    }

    /// Whether a client certificate is presented.
    pub fn client_cert(&self) -> bool {
        self.cert_file.is_some()
    }
}

/// A secret setting (a password): compared and cloned like a string, but
/// `Debug` prints `"<redacted>"` and nothing in lockshift logs it.
///
/// Settings structs never serialise it (`#[serde(skip_serializing)]` on the
/// field): a secret a tool writes out as JSON ends up in a log or on a
/// command line sooner or later.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"<redacted>\"")
    }
}

/// What the connection to the cluster is protected by: for status reports
/// (`migrate status`), never the secrets themselves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ConnectionSecurity {
    /// TLS to the nodes.
    pub encrypted: bool,
    /// The node's certificate is checked against the address connected to.
    pub hostname_verified: bool,
    /// A client certificate is presented.
    pub client_certificate: bool,
    /// Password authentication (a user name and a password are sent).
    pub authenticated: bool,
}

impl CqlSettings {
    /// What protects the connection these settings open.
    pub fn security(&self) -> ConnectionSecurity {
        ConnectionSecurity {
            encrypted: self.tls.enabled(),
            hostname_verified: self.tls.enabled() && self.tls.verify_hostname,
            client_certificate: self.tls.enabled() && self.tls.client_cert(),
            authenticated: self.username.is_some(),
        }
    }

    /// The password to send: `password`, or the contents of `password_file`
    /// (one trailing `\n` or `\r\n` dropped); `None` without a user name.
    ///
    /// # Errors
    /// The file cannot be read, is not UTF-8, or is empty — naming
    /// `store.cql.password_file` and the path, never the contents.
    pub fn credentials(&self) -> Result<Option<(String, Secret)>, InvalidSetting> {
        let Some(user) = &self.username else {
            return Ok(None);
        };
        if let Some(password) = &self.password {
            return Ok(Some((user.clone(), password.clone())));
        }
        let Some(path) = &self.password_file else {
            return Err(InvalidSetting::new(
                "store.cql.password",
                "store.cql.username is set, but neither store.cql.password nor \
                 store.cql.password_file is",
            ));
        };
        let key = "store.cql.password_file";
        let bytes = std::fs::read(path).map_err(|e| {
            InvalidSetting::new(
                key,
                format!("{key} ({}) cannot be read: {e}", show_path(path)),
            )
        })?;
        let mut text = String::from_utf8(bytes).map_err(|_| {
            InvalidSetting::new(
                key,
                format!("{key} ({}) is not UTF-8 text", show_path(path)),
            )
        })?;
        if text.ends_with('\n') {
            text.pop();
            if text.ends_with('\r') {
                text.pop();
            }
        }
        if text.is_empty() {
            return Err(InvalidSetting::new(
                key,
                format!("{key} ({}) is empty", show_path(path)),
            ));
        }
        Ok(Some((user.clone(), Secret(text))))
    }
}

/// The longest setting value echoed in a message, in characters.
const ECHO_MAX: usize = 80;

/// `value`, cut to 80 characters (with `…`), quoted: how a setting's value is echoed in a message.
pub fn echo(value: &str) -> String {
    if value.chars().count() <= ECHO_MAX {
        format!("{value:?}")
    } else {
        let cut: String = value.chars().take(ECHO_MAX).collect();
        format!("{cut:?}…")
    }
}

/// A path as echoed in a message: quoted, cut short.
pub fn show_path(path: &Path) -> String {
    echo(&path.to_string_lossy())
}

/// Why a store cannot be opened from settings that chose none, and what to
/// add.
pub const NO_STORE_CHOSEN: &str = "no store chosen: the settings name no cluster. Add \
     `[store.cql] contact_points = [\"HOST:9042\", …]` to the settings file (or set \
     LOCKSHIFT__STORE__CQL__CONTACT_POINTS=HOST:9042,…) for locks shared by a fleet, or \
     `store.backend = \"embedded\"` (LOCKSHIFT__STORE__BACKEND=embedded) for locks that \
     exclude only within this one process (tests, demos)";

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
    /// wrong for a fleet. Settings that chose no backend open nothing
    /// ([`NO_STORE_CHOSEN`]).
    pub async fn open(&self) -> Result<crate::SharedStore, crate::StoreError> {
        match self.backend {
            None => Err(crate::StoreError::new(
                crate::StoreErrorKind::Invalid,
                crate::OpKind::Read,
                None,
                NO_STORE_CHOSEN,
            )),
            Some(StoreBackend::Embedded) => Ok(std::sync::Arc::new({
                tracing::warn!("{EMBEDDED_WARNING}");
                self.embedded.store()
            })),
            Some(StoreBackend::Cql) => Ok(std::sync::Arc::new(
                crate::CqlStore::connect(&self.cql).await?,
            )),
        }
    }

    /// Every rule these settings break; empty when valid. (No backend at
    /// all is not one of them: it is refused where a store is opened.)
    pub fn problems(&self) -> Vec<InvalidSetting> {
        let mut out = Vec::new();
        if self.backend == Some(StoreBackend::Cql) {
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
                    format!("store.cql.contact_points[{i}] ({}) {why}", echo(point)),
                ));
            }
        }
        if !is_cql_identifier(&self.keyspace) {
            out.push(InvalidSetting::new(
                "store.cql.keyspace",
                format!(
                    "store.cql.keyspace ({}) must be 1-48 characters of a-z, 0-9 and _, starting with a letter",
                    echo(&self.keyspace)
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
            ("store.cql.keepalive_every", self.keepalive_every),
            ("store.cql.keepalive_timeout", self.keepalive_timeout),
        ] {
            if value.is_zero() {
                out.push(InvalidSetting::new(
                    key,
                    format!("{key} must be greater than 0"),
                ));
            }
        }
        if !self.speculative_read_after.is_zero()
            && !self.request_timeout.is_zero()
            && self.speculative_read_after >= self.request_timeout
        {
            out.push(InvalidSetting::new(
                "store.cql.speculative_read_after",
                format!(
                    "store.cql.speculative_read_after ({:?}) must be less than \
                     store.cql.request_timeout ({:?}), or 0s to turn it off",
                    self.speculative_read_after, self.request_timeout
                ),
            ));
        }
        out.extend(self.credential_problems());
        out.extend(self.tls_problems());
        out
    }

    fn credential_problems(&self) -> Vec<InvalidSetting> {
        let mut out = Vec::new();
        if self.password.is_some() && self.password_file.is_some() {
            out.push(InvalidSetting::new(
                "store.cql.password",
                "store.cql.password and store.cql.password_file are both set; give one",
            ));
        }
        match &self.username {
            Some(user) if user.is_empty() => out.push(InvalidSetting::new(
                "store.cql.username",
                "store.cql.username is empty",
            )),
            Some(_) if self.password.is_none() && self.password_file.is_none() => {
                out.push(InvalidSetting::new(
                    "store.cql.password",
                    "store.cql.username is set, but neither store.cql.password nor \
                     store.cql.password_file is",
                ));
            }
            None if self.password.is_some() || self.password_file.is_some() => {
                let key = if self.password.is_some() {
                    "store.cql.password"
                } else {
                    "store.cql.password_file"
                };
                out.push(InvalidSetting::new(
                    "store.cql.username",
                    format!("{key} is set, but store.cql.username is not"),
                ));
            }
            _ => {}
        }
        if let Some(p) = &self.password
            && p.expose().is_empty()
        {
            out.push(InvalidSetting::new(
                "store.cql.password",
                "store.cql.password is empty",
            ));
        }
        if let Some(path) = &self.password_file
            && let Some(why) = unreadable_file(path)
        {
            out.push(InvalidSetting::new(
                "store.cql.password_file",
                format!("store.cql.password_file ({}) {why}", show_path(path)),
            ));
        }
        out
    }

    fn tls_problems(&self) -> Vec<InvalidSetting> {
        let tls = &self.tls;
        let mut out = Vec::new();
        for (key, path) in [
            ("store.cql.tls.ca_file", &tls.ca_file),
            ("store.cql.tls.cert_file", &tls.cert_file),
            ("store.cql.tls.key_file", &tls.key_file),
        ] {
            if let Some(path) = path
                && let Some(why) = unreadable_file(path)
            {
                out.push(InvalidSetting::new(
                    key,
                    format!("{key} ({}) {why}", show_path(path)),
                ));
            }
        }
        match (&tls.cert_file, &tls.key_file) {
            (Some(_), None) => out.push(InvalidSetting::new(
                "store.cql.tls.key_file",
                "store.cql.tls.cert_file is set, but store.cql.tls.key_file (its private key) is not",
            )),
            (None, Some(_)) => out.push(InvalidSetting::new(
                "store.cql.tls.cert_file",
                "store.cql.tls.key_file is set, but store.cql.tls.cert_file (the certificate) is not",
            )),
            _ => {}
        }
        if tls.ca_file.is_none() && (tls.cert_file.is_some() || tls.key_file.is_some()) {
            out.push(InvalidSetting::new(
                "store.cql.tls.ca_file",
                "store.cql.tls.cert_file/key_file are set, but store.cql.tls.ca_file is not: \
                 TLS needs the CA that signed the nodes' certificates",
            ));
        }
        out
    }
}

/// Why `path` cannot serve as a settings file, if it cannot: missing, not
/// a file, unreadable.
fn unreadable_file(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some("does not exist".to_string()),
        Err(e) => Some(format!("cannot be read: {e}")),
        Ok(m) if !m.is_file() => Some("is not a file".to_string()),
        Ok(_) => std::fs::File::open(path)
            .err()
            .map(|e| format!("cannot be read: {e}")),
    }
}

fn check_contact_point(point: &str) -> Result<(), &'static str> {
    let (host, port) = point
        .rsplit_once(':')
        .ok_or("must be host:port, e.g. 127.0.0.1:9042")?;
    if host.is_empty() {
        return Err("has an empty host");
    }
    // A DNS name is at most 253 characters; an address far shorter. (It
    // also keeps every message that names a contact point short.)
    if host.len() > 255 {
        return Err("has a host name longer than 255 characters");
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
            backend: Some(StoreBackend::Cql),
            ..StoreSettings::default()
        };
        assert!(s.problems().is_empty(), "{:?}", s.problems());
    }

    #[test]
    fn each_problem_names_its_key() {
        let s = StoreSettings {
            backend: Some(StoreBackend::Cql),
            cql: CqlSettings {
                contact_points: vec!["nohost".into(), "h:0".into()],
                keyspace: "Bad-Name".into(),
                replication: Replication::SimpleStrategy {
                    replication_factor: 0,
                },
                request_timeout: Duration::ZERO,
                keepalive_timeout: Duration::ZERO,
                ..CqlSettings::default()
            },
            ..StoreSettings::default()
        };
        let msgs: Vec<String> = s.problems().iter().map(|p| p.to_string()).collect();
        assert_eq!(msgs.len(), 6, "{msgs:#?}");
        assert!(msgs[0].starts_with("store.cql.contact_points[0] (\"nohost\") must be host:port"));
        assert!(msgs[1].contains("contact_points[1]") && msgs[1].contains("port"));
        assert!(msgs[2].starts_with("store.cql.keyspace (\"Bad-Name\")"));
        assert!(msgs[3].contains("replication_factor must be at least 1"));
        assert_eq!(msgs[4], "store.cql.request_timeout must be greater than 0");
        assert_eq!(
            msgs[5],
            "store.cql.keepalive_timeout must be greater than 0"
        );
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
            let embedded = StoreSettings {
                backend: Some(StoreBackend::Embedded),
                ..StoreSettings::default()
            };
            runtime.block_on(embedded.open()).unwrap();
        });
        let logged = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(logged.contains("WARN"), "{logged}");
        assert!(
            logged.contains("locks exclude only within this process"),
            "{logged}"
        );
    }

    /// Issue 19 item 2: settings that name no store open none, and the
    /// error says exactly what to add.
    #[test]
    fn no_store_is_chosen_unless_asked() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(StoreSettings::default().backend, None);
        let err = runtime
            .block_on(StoreSettings::default().open())
            .unwrap_err();
        assert_eq!(err.kind(), crate::StoreErrorKind::Invalid);
        for needle in [
            "no store chosen",
            "[store.cql] contact_points = [",
            "store.backend = \"embedded\"",
            "LOCKSHIFT__STORE__CQL__CONTACT_POINTS",
        ] {
            assert!(err.message().contains(needle), "{needle}: {err}");
        }
    }

    fn tls_dir() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        for f in ["ca.crt", "client.crt", "client.key", "password"] {
            std::fs::write(path.join(f), "x\n").unwrap();
        }
        (dir, path)
    }

    /// A change to default CQL settings, for table-driven cases.
    type Edit<'a> = Box<dyn FnOnce(&mut CqlSettings) + 'a>;

    fn cql_with(f: impl FnOnce(&mut CqlSettings)) -> Vec<String> {
        let mut cql = CqlSettings::default();
        f(&mut cql);
        cql.problems().iter().map(ToString::to_string).collect()
    }

    /// Issue 19 item 1: each mistake in the credentials and TLS keys is
    /// refused with a message naming the key (and the file).
    #[test]
    fn credential_and_tls_mistakes_name_their_key() {
        let (_keep, dir) = tls_dir();
        let missing = dir.join("nope.crt");
        let cases: Vec<(&str, Edit<'_>)> = vec![
            (
                "store.cql.password and store.cql.password_file are both set",
                Box::new(|c| {
                    c.username = Some("app".into());
                    c.password = Some(Secret::new("pw"));
                    c.password_file = Some(dir.join("password"));
                }),
            ),
            (
                "store.cql.username is set, but neither store.cql.password nor store.cql.password_file is",
                Box::new(|c| c.username = Some("app".into())),
            ),
            (
                "store.cql.password is set, but store.cql.username is not",
                Box::new(|c| c.password = Some(Secret::new("pw"))),
            ),
            (
                "store.cql.tls.ca_file (",
                Box::new(|c| c.tls.ca_file = Some(missing.clone())),
            ),
            (
                "store.cql.tls.cert_file is set, but store.cql.tls.key_file (its private key) is not",
                Box::new(|c| {
                    c.tls.ca_file = Some(dir.join("ca.crt"));
                    c.tls.cert_file = Some(dir.join("client.crt"));
                }),
            ),
            (
                "store.cql.tls.key_file is set, but store.cql.tls.cert_file (the certificate) is not",
                Box::new(|c| {
                    c.tls.ca_file = Some(dir.join("ca.crt"));
                    c.tls.key_file = Some(dir.join("client.key"));
                }),
            ),
            (
                "but store.cql.tls.ca_file is not",
                Box::new(|c| {
                    c.tls.cert_file = Some(dir.join("client.crt"));
                    c.tls.key_file = Some(dir.join("client.key"));
                }),
            ),
            (
                "store.cql.password_file (",
                Box::new(|c| {
                    c.username = Some("app".into());
                    c.password_file = Some(dir.join("missing-password"));
                }),
            ),
        ];
        for (i, (want, set)) in cases.into_iter().enumerate() {
            let msgs = cql_with(set);
            assert_eq!(msgs.len(), 1, "case #{i}: {msgs:#?}");
            assert!(msgs[0].contains(want), "case #{i}: {msgs:#?}");
        }
        let msgs = cql_with(|c| c.tls.ca_file = Some(missing.clone()));
        assert!(msgs[0].ends_with("nope.crt\") does not exist"), "{msgs:?}");
        // Right settings: no problem.
        let ok = cql_with(|c| {
            c.username = Some("app".into());
            c.password_file = Some(dir.join("password"));
            c.tls.ca_file = Some(dir.join("ca.crt"));
            c.tls.cert_file = Some(dir.join("client.crt"));
            c.tls.key_file = Some(dir.join("client.key"));
        });
        assert!(ok.is_empty(), "{ok:?}");
    }

    /// The password never shows in Debug output nor in serialised settings.
    #[test]
    fn the_password_is_never_shown() {
        let cql = CqlSettings {
            username: Some("app".into()),
            password: Some(Secret::new("hunter2-secret")),
            ..CqlSettings::default()
        };
        let debug = format!(
            "{cql:?} {:#?}",
            StoreSettings {
                cql: cql.clone(),
                ..StoreSettings::default()
            }
        );
        assert!(!debug.contains("hunter2"), "{debug}");
        assert!(debug.contains("<redacted>"), "{debug}");
        let json = serde_json::to_string(&cql).unwrap();
        assert!(!json.contains("hunter2"), "{json}");
        assert!(json.contains("\"username\":\"app\""), "{json}");
    }

    #[test]
    fn the_password_file_is_read_without_its_newline() {
        let (_keep, dir) = tls_dir();
        std::fs::write(dir.join("password"), "s3cret\r\n").unwrap();
        let cql = CqlSettings {
            username: Some("app".into()),
            password_file: Some(dir.join("password")),
            ..CqlSettings::default()
        };
        let (user, pw) = cql.credentials().unwrap().unwrap();
        assert_eq!((user.as_str(), pw.expose()), ("app", "s3cret"));
        std::fs::write(dir.join("password"), "\n").unwrap();
        let err = cql.credentials().unwrap_err().to_string();
        assert!(err.starts_with("store.cql.password_file ("), "{err}");
        assert!(err.ends_with("is empty"), "{err}");
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
