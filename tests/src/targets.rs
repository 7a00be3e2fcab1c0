//! Conformance targets beyond the embedded one the store crate ships.
//!
//! `LOCKSHIFT_TEST_CONTACT_POINTS` (comma-separated `host:port`) points the
//! suite at a real ScyllaDB or Cassandra cluster as well; the suite then
//! creates (if missing) and uses the keyspace named by
//! `LOCKSHIFT_TEST_KEYSPACE`, `lockshift_test` by default, writing only rows
//! whose keys start with a per-run random prefix in the `scratch` table.
//!
//! [`CqlTarget`] serves both a real cluster (time passes by sleeping) and
//! the local CQL endpoint (time passes by moving the endpoint's
//! [`ManualClock`]); only the [`TimeAdvance`] differs.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lockshift_store::conformance::Target;
use lockshift_store::{
    Clock, CqlSettings, CqlStore, ManualClock, Store, StoreError, SystemClock, Timestamp,
};

/// The environment variable naming a real cluster's contact points.
pub const CONTACT_POINTS_VAR: &str = "LOCKSHIFT_TEST_CONTACT_POINTS";

/// The environment variable naming the keyspace to test in.
pub const KEYSPACE_VAR: &str = "LOCKSHIFT_TEST_KEYSPACE";

/// The contact points of a real cluster to test against, if configured.
pub fn real_cluster_contact_points() -> Option<Vec<String>> {
    let raw = std::env::var(CONTACT_POINTS_VAR).ok()?;
    let points: Vec<String> = raw
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect();
    (!points.is_empty()).then_some(points)
}

/// Settings for the real cluster named by the environment, if any: its
/// contact points, the test keyspace, schema created on demand, everything
/// else at its default (QUORUM, 5 s timeouts, replication factor 1).
pub fn real_cluster_settings() -> Option<CqlSettings> {
    let contact_points = real_cluster_contact_points()?;
    let keyspace = std::env::var(KEYSPACE_VAR)
        .ok()
        .filter(|k| !k.trim().is_empty())
        .unwrap_or_else(|| "lockshift_test".to_string());
    Some(CqlSettings {
        contact_points,
        keyspace,
        create_schema: true,
        ..CqlSettings::default()
    })
}

/// How time passes on a CQL target's TTL clock when the suite asks.
#[derive(Clone, Debug)]
pub enum TimeAdvance {
    /// A real cluster: its nodes' clocks cannot be moved, so wait. Write
    /// timestamps come from this machine's clock.
    Sleep,
    /// The local endpoint serving a store on this manual clock: move it.
    /// Write timestamps come from the same clock.
    Manual(Arc<ManualClock>),
}

/// A [`CqlStore`] under the conformance suite.
///
/// ```ignore
/// // A real cluster:
/// let target = CqlTarget::connect(&settings, TimeAdvance::Sleep).await?;
/// // The local endpoint, whose store runs on `clock`:
/// let target = CqlTarget::connect(&settings, TimeAdvance::Manual(clock)).await?;
/// ```
#[derive(Debug)]
pub struct CqlTarget {
    store: CqlStore,
    settings: CqlSettings,
    time: TimeAdvance,
    prefix: String,
}

impl CqlTarget {
    /// Connects a [`CqlStore`] with `settings`; `time` says how the suite's
    /// "let time pass" reaches the server's TTL clock.
    ///
    /// # Errors
    /// Whatever [`CqlStore::connect`] returns.
    pub async fn connect(settings: &CqlSettings, time: TimeAdvance) -> Result<Self, StoreError> {
        let store = CqlStore::connect(settings).await?;
        Ok(CqlTarget {
            store,
            settings: settings.clone(),
            time,
            prefix: run_prefix(),
        })
    }

    /// The prefix of every row key this target hands out.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

#[async_trait]
impl Target for CqlTarget {
    fn store(&self) -> &dyn Store {
        &self.store
    }

    fn now(&self) -> Timestamp {
        match &self.time {
            TimeAdvance::Sleep => SystemClock.now(),
            TimeAdvance::Manual(clock) => clock.now(),
        }
    }

    async fn advance(&self, d: Duration) {
        match &self.time {
            TimeAdvance::Sleep => tokio::time::sleep(d).await,
            TimeAdvance::Manual(clock) => clock.advance(d),
        }
    }

    fn unique(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    fn keyspace(&self) -> String {
        self.store.keyspace().to_string()
    }

    /// On a real cluster, the keyspace `{keyspace}_tombstones`: rows of
    /// tombstones there outlive the run by `gc_grace_seconds`, and no test
    /// scans it whole. The local endpoint is new with each target.
    ///
    /// # Panics
    /// If that keyspace cannot be reached: the test cannot run then.
    async fn apart(&self) -> Option<Box<dyn Target>> {
        let TimeAdvance::Sleep = self.time else {
            return None;
        };
        let settings = CqlSettings {
            keyspace: format!("{}_tombstones", self.settings.keyspace),
            ..self.settings.clone()
        };
        match CqlTarget::connect(&settings, TimeAdvance::Sleep).await {
            Ok(target) => Some(Box::new(target)),
            Err(e) => panic!(
                "connecting to keyspace {} for a test that leaves tombstones failed: {e}",
                settings.keyspace
            ),
        }
    }
}

/// `run-` and 16 random hex digits: row keys of concurrent or repeated runs
/// on a shared cluster never meet.
///
/// The randomness only names rows, it decides nothing a test checks, so it
/// needs no seed to replay (only what a test decides must replay from its
/// seed): std's per-process random hasher keys
/// are enough and cost no dependency.
pub fn run_prefix() -> String {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("run-{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_prefixes_differ() {
        let a = run_prefix();
        let b = run_prefix();
        assert_ne!(a, b);
        assert_eq!(a.len(), "run-".len() + 16, "{a}");
    }
}

/// A local CQL endpoint (in this process, on a free port) serving a store on
/// a manual clock, and settings that point a [`CqlStore`] at it.
///
/// # Errors
/// The endpoint could not bind a port.
pub async fn start_endpoint(
    clock: lockshift_store::SharedClock,
) -> Result<
    (lockshift_cql_emulator::EmulatorHandle, CqlSettings),
    lockshift_cql_emulator::EmulatorError,
> {
    let local: std::net::SocketAddr = ([127, 0, 0, 1], 0).into();
    let endpoint = lockshift_cql_emulator::Emulator::builder()
        .clock(clock)
        .start(local)
        .await?;
    let settings = CqlSettings {
        contact_points: vec![endpoint.local_addr().to_string()],
        // A fresh endpoint has no keyspace; tests create it on request.
        create_schema: true,
        ..CqlSettings::default()
    };
    Ok((endpoint, settings))
}

/// The conformance target of the local endpoint: the real driver through
/// [`CqlStore`] against an endpoint whose TTL clock the suite moves.
#[derive(Debug)]
pub struct EndpointTarget {
    // Kept alive for the target's lifetime; dropping it stops the endpoint.
    _endpoint: lockshift_cql_emulator::EmulatorHandle,
    inner: CqlTarget,
}

impl EndpointTarget {
    /// Starts an endpoint and connects to it.
    ///
    /// # Panics
    /// If the endpoint cannot start or the store cannot connect: the test
    /// cannot run at all then.
    pub async fn start() -> Self {
        let clock = Arc::new(ManualClock::new(SystemClock.now()));
        let (endpoint, settings) = start_endpoint(clock.clone())
            .await
            .expect("endpoint starts");
        let inner = CqlTarget::connect(&settings, TimeAdvance::Manual(clock))
            .await
            .expect("CqlStore connects to the local endpoint");
        EndpointTarget {
            _endpoint: endpoint,
            inner,
        }
    }
}

#[async_trait]
impl Target for EndpointTarget {
    fn store(&self) -> &dyn Store {
        self.inner.store()
    }
    fn now(&self) -> Timestamp {
        self.inner.now()
    }
    async fn advance(&self, d: Duration) {
        self.inner.advance(d).await;
    }
    fn unique(&self, name: &str) -> String {
        self.inner.unique(name)
    }
    fn keyspace(&self) -> String {
        self.inner.keyspace()
    }
}

// ===== a cluster with authentication and TLS =====

/// `host:port` of a node that requires password authentication and TLS
/// (`start-cassandra.sh --auth --tls CERTDIR`).
pub const TLS_CONTACT_POINTS_VAR: &str = "LOCKSHIFT_TEST_TLS_CONTACT_POINTS";
/// `host:port` of a node that requires authentication, TLS and a client
/// certificate (`--auth --tls CERTDIR --tls-client-auth`); optional.
pub const TLS_CLIENT_AUTH_CONTACT_POINTS_VAR: &str =
    "LOCKSHIFT_TEST_TLS_CLIENT_AUTH_CONTACT_POINTS";
/// The CERTDIR: `ca.crt` (the CA that signed the nodes' certificates),
/// `client.crt` and `client.key`.
pub const TLS_DIR_VAR: &str = "LOCKSHIFT_TEST_TLS_DIR";
/// `user:password` of a role that may create keyspaces (default
/// `cassandra:cassandra`, Cassandra's own superuser).
pub const AUTH_VAR: &str = "LOCKSHIFT_TEST_AUTH";
/// Set (by CI, when it started the nodes): a missing secure cluster fails
/// the tests instead of skipping them.
pub const REQUIRE_SECURE_VAR: &str = "LOCKSHIFT_REQUIRE_SECURE_CLUSTER";

/// Nodes that require authentication and TLS, and what it takes to use
/// them.
#[derive(Clone, Debug)]
pub struct SecureCluster {
    /// The auth + TLS node(s).
    pub tls_points: Vec<String>,
    /// The auth + TLS + client-certificate node(s), if configured.
    pub client_auth_points: Option<Vec<String>>,
    /// The CERTDIR.
    pub tls_dir: std::path::PathBuf,
    /// A role that may create keyspaces.
    pub user: String,
    /// Its password.
    pub password: String,
}

impl SecureCluster {
    /// The cluster named by the environment, or why there is none.
    ///
    /// # Errors
    /// Why the secure cluster tests cannot run (a variable missing).
    pub fn from_env() -> Result<SecureCluster, String> {
        let points = |var: &str| {
            std::env::var(var).ok().map(|raw| {
                raw.split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(String::from)
                    .collect::<Vec<_>>()
            })
        };
        let tls_points = points(TLS_CONTACT_POINTS_VAR)
            .filter(|p| !p.is_empty())
            .ok_or_else(|| format!("{TLS_CONTACT_POINTS_VAR} is not set"))?;
        let tls_dir = std::env::var(TLS_DIR_VAR)
            .map(std::path::PathBuf::from)
            .map_err(|_| format!("{TLS_DIR_VAR} is not set"))?;
        let auth = std::env::var(AUTH_VAR).unwrap_or_else(|_| "cassandra:cassandra".into());
        let (user, password) = auth
            .split_once(':')
            .ok_or_else(|| format!("{AUTH_VAR} is not user:password"))?;
        Ok(SecureCluster {
            tls_points,
            client_auth_points: points(TLS_CLIENT_AUTH_CONTACT_POINTS_VAR)
                .filter(|p| !p.is_empty()),
            tls_dir,
            user: user.to_string(),
            password: password.to_string(),
        })
    }

    /// The cluster, or `None` after printing why the test is skipped —
    /// unless [`REQUIRE_SECURE_VAR`] is set, when a missing cluster panics.
    ///
    /// # Panics
    /// When the cluster is required and not named.
    pub fn or_skip(test: &str) -> Option<SecureCluster> {
        match SecureCluster::from_env() {
            Ok(cluster) => Some(cluster),
            Err(why) if std::env::var_os(REQUIRE_SECURE_VAR).is_some() => {
                panic!("{test}: {REQUIRE_SECURE_VAR} is set but {why}")
            }
            Err(why) => {
                println!(
                    "skipped {test}: {why}; start a node with start-cassandra.sh --auth --tls \
                     CERTDIR and set {TLS_CONTACT_POINTS_VAR}=host:port and {TLS_DIR_VAR}=CERTDIR \
                     (.ci/run does, when the Cassandra bundle is there)"
                );
                None
            }
        }
    }

    /// Settings for the auth + TLS node with the right credentials and CA,
    /// in keyspace `keyspace` (created if missing).
    pub fn settings(&self, keyspace: &str) -> CqlSettings {
        CqlSettings {
            contact_points: self.tls_points.clone(),
            keyspace: keyspace.to_string(),
            create_schema: true,
            connect_timeout: Duration::from_secs(20),
            request_timeout: Duration::from_secs(10),
            username: Some(self.user.clone()),
            password: Some(lockshift_store::settings::Secret::new(
                self.password.clone(),
            )),
            tls: lockshift_store::settings::TlsSettings {
                ca_file: Some(self.tls_dir.join("ca.crt")),
                ..Default::default()
            },
            ..CqlSettings::default()
        }
    }
}
