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
//!
//! # Where each section lives
//!
//! Each section's struct is in a file of its own and re-exported here, so
//! its path is `lockshift_store::settings::…` whatever the file:
//!
//! - `[store]`: [`StoreSettings`] and [`StoreBackend`], with what every
//!   section shares ([`InvalidSetting`], [`Secret`], [`echo`],
//!   [`show_path`]), in `settings/mod.rs`;
//! - `[store.cql]`: [`CqlSettings`], [`Consistency`], [`Replication`] and
//!   [`ConnectionSecurity`], in `settings/cql.rs`;
//! - `[store.cql.tls]`: [`TlsSettings`], in `settings/tls.rs`;
//! - `[store.embedded]`: [`EmbeddedSettings`], in `settings/embedded.rs`.

mod cql;
mod embedded;
mod tls;

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use cql::{ConnectionSecurity, Consistency, CqlSettings, Replication};
pub use embedded::EmbeddedSettings;
pub use tls::TlsSettings;

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

#[cfg(test)]
mod tests;
