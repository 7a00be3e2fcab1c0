//! The `[store.cql]` section: which cluster, how to talk to it, and the
//! rules its keys follow.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{InvalidSetting, Secret, TlsSettings, echo, show_path, unreadable_file};
use crate::route::Datacenter;

/// Consistency level of every lockshift read and write on the store's
/// default route (requests routed to a lock's home run at `LOCAL_QUORUM` in
/// that datacenter whatever this says: docs/design.md §4a).
///
/// The exclusion proofs need read-your-writes across clients (Lemma 1), which
/// QUORUM writes plus QUORUM reads give. `LOCAL_QUORUM` gives it only among
/// requests *coordinated* in one datacenter: it needs
/// `store.cql.local_datacenter` (a store refuses to connect without it to a
/// keyspace replicated in several datacenters), and then it is safe only
/// when every client of a lock names the same one — for locks shared
/// across datacenters use `lock.home_datacenter` instead.
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
    /// Consistency of every read and write on the default route (see
    /// [`Consistency`]).
    /// Default: `"quorum"`.
    pub consistency: Consistency,
    /// The datacenter this process runs in, as the cluster's snitch names
    /// it (`dc1`). The driver then sends requests to its nodes first, and
    /// a request at a LOCAL consistency never to another datacenter, even
    /// when none of its nodes answers. Required for `consistency =
    /// "local_quorum"` on a keyspace replicated in more than one datacenter
    /// — without it the driver's default policy prefers no datacenter, and
    /// "local" is whichever one coordinated each request — and for
    /// `lock.home_datacenter`, which counts the requests that leave it.
    /// Default: none (no datacenter preferred).
    pub local_datacenter: Option<Datacenter>,
    /// How long to wait for the first connection. Each node's TCP connect
    /// within it is limited to 1 s (or this, if shorter): a node that has
    /// not accepted by then is connected to in the background, and the
    /// session starts on the others.
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
            local_datacenter: None,
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
