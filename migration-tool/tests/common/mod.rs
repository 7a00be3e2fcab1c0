// Each test binary uses part of the shared harness.
#![allow(dead_code)]

//! The e2e harness: where the tests run — the real cluster named by
//! `LOCKSHIFT_TEST_CONTACT_POINTS` when it is set, each test in a keyspace
//! of its own, else a local CQL endpoint in this test process (port 0) —
//! the built `migrate` binary run against it, and a store connection for
//! seeding and checking cells. Tests that inject server-side faults always
//! use a local endpoint ([`Endpoint::local_with_schema`]).

pub mod fleet;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use lockshift::{Node, Settings};
use lockshift_cql_emulator::{Emulator, EmulatorHandle, FaultController};
use lockshift_decide::algorithm::{Mode, Stage};
use lockshift_decide::registry::NodeInfo;
use lockshift_store::{
    CqlSettings, CqlStore, SharedClock, SharedStore, StoreErrorKind, SystemClock,
};

/// The variable naming a real cluster to run on (`host:port[,host:port]`).
pub const CONTACT_POINTS_VAR: &str = "LOCKSHIFT_TEST_CONTACT_POINTS";

/// The contact points of the real cluster to run on, if one is named.
pub fn real_cluster() -> Option<String> {
    let raw = std::env::var(CONTACT_POINTS_VAR).ok()?;
    let points: Vec<&str> = raw
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    (!points.is_empty()).then(|| points.join(","))
}

/// A keyspace for the running test on a shared cluster: named after the
/// test (its thread's name), so a re-run reuses — after dropping — the
/// same one, and concurrent tests never meet. `suffix` tells apart two
/// keyspaces of one test. At most 48 characters, Cassandra's limit.
fn test_keyspace(suffix: &str) -> String {
    use std::hash::{Hash, Hasher};
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("test");
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (test, suffix).hash(&mut hasher);
    let readable: String = test
        .rsplit("::")
        .next()
        .unwrap_or(test)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(30)
        .collect();
    format!("e2e_{readable}_{:08x}", hasher.finish() as u32)
}

/// Where `migrate` runs point: contact points and keyspace. Cheap to clone
/// into spawned tasks.
#[derive(Clone, Debug)]
pub struct At {
    pub contact: String,
    pub keyspace: String,
}

impl At {
    /// The binary pointed here, with `env` (which may override).
    pub fn command(&self, args: &[&str], env: &[(&str, &str)]) -> tokio::process::Command {
        let mut all = vec![("LOCKSHIFT__STORE__CQL__KEYSPACE", self.keyspace.as_str())];
        all.extend_from_slice(env);
        command(Some(&self.contact), args, &all)
    }

    /// Runs `migrate --contact-points <here> args…` in this keyspace.
    pub async fn migrate(&self, args: &[&str]) -> Run {
        self.migrate_env(args, &[]).await
    }

    /// As [`migrate`](Self::migrate) with extra environment.
    pub async fn migrate_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        run(self.command(args, env), args).await
    }
}

/// Short leases, so loss and expiry happen within seconds.
pub const FAST: &[(&str, &str)] = &[
    ("LOCKSHIFT__LOCK__LEASE_TTL", "3s"),
    ("LOCKSHIFT__LOCK__RENEW_EVERY", "1s"),
];

/// Where a test runs — a local endpoint or a keyspace on the real cluster
/// — and a client of it.
pub struct Endpoint {
    /// The local endpoint; `None` on a real cluster.
    local: Option<EmulatorHandle>,
    pub at: At,
    /// Connected with `create_schema = true` (when made by [`Endpoint::with_schema`]).
    pub store: Option<SharedStore>,
    /// The same connection as a CQL store, for statements outside the
    /// store interface (`ALTER TABLE`, `system_schema`): [`Endpoint::cql`].
    cql: Option<Arc<CqlStore>>,
    pub clock: SharedClock,
}

impl Endpoint {
    /// Lockshift's keyspace and tables: on the real cluster if one is
    /// named (a keyspace of this test's own, fresh), else on a local
    /// endpoint.
    pub async fn with_schema() -> Endpoint {
        match real_cluster() {
            Some(contact) => Endpoint::on_cluster(contact, test_keyspace("")).await,
            None => Endpoint::local_with_schema().await,
        }
    }

    /// A local endpoint with lockshift's keyspace and tables, wherever the
    /// other tests run: for tests that inject server-side faults.
    pub async fn local_with_schema() -> Endpoint {
        let mut e = Endpoint::local_bare().await;
        let cql = Arc::new(connect(&e.at, true).await);
        e.store = Some(cql.clone());
        e.cql = Some(cql);
        e
    }

    /// A keyspace that does not exist: on the real cluster if one is named
    /// (dropped if a previous run left it), else a local endpoint with
    /// nothing in it.
    pub async fn bare() -> Endpoint {
        let Some(contact) = real_cluster() else {
            return Endpoint::local_bare().await;
        };
        let at = At {
            contact,
            keyspace: test_keyspace("bare"),
        };
        drop_if_there(&at).await;
        Endpoint {
            local: None,
            at,
            store: None,
            cql: None,
            clock: Arc::new(SystemClock),
        }
    }

    async fn local_bare() -> Endpoint {
        let handle = Emulator::builder()
            .start("127.0.0.1:0".parse().expect("a socket address"))
            .await
            .expect("endpoint starts");
        let addr: SocketAddr = handle.local_addr();
        Endpoint {
            local: Some(handle),
            at: At {
                contact: addr.to_string(),
                keyspace: "lockshift".to_string(),
            },
            store: None,
            cql: None,
            clock: Arc::new(SystemClock),
        }
    }

    async fn on_cluster(contact: String, keyspace: String) -> Endpoint {
        let at = At { contact, keyspace };
        drop_if_there(&at).await;
        let cql = Arc::new(connect(&at, true).await);
        Endpoint {
            local: None,
            at,
            store: Some(cql.clone()),
            cql: Some(cql),
            clock: Arc::new(SystemClock),
        }
    }

    /// The local endpoint's fault controller.
    ///
    /// # Panics
    /// On a real cluster: such tests use [`Endpoint::local_with_schema`].
    pub fn faults(&self) -> &FaultController {
        self.local
            .as_ref()
            .expect("fault injection needs a local endpoint: Endpoint::local_with_schema")
            .faults()
    }

    pub fn store(&self) -> &SharedStore {
        self.store.as_ref().expect("endpoint made with schema")
    }

    /// The store's CQL connection ([`CqlStore::session`] runs any
    /// statement).
    pub fn cql(&self) -> &Arc<CqlStore> {
        self.cql.as_ref().expect("endpoint made with schema")
    }

    /// The contact points (`host:port[,…]`).
    pub fn addr(&self) -> String {
        self.at.contact.clone()
    }

    /// The keyspace the tables are in.
    pub fn keyspace(&self) -> &str {
        &self.at.keyspace
    }

    /// Whether this runs on the real cluster.
    pub fn is_cluster(&self) -> bool {
        self.local.is_none()
    }

    /// Runs `migrate --contact-points <this> args…`.
    pub async fn migrate(&self, args: &[&str]) -> Run {
        self.at.migrate(args).await
    }

    /// As [`migrate`](Self::migrate) with extra environment.
    pub async fn migrate_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        self.at.migrate_env(args, env).await
    }

    /// The binary pointed here (not yet run).
    pub fn command(&self, args: &[&str], env: &[(&str, &str)]) -> tokio::process::Command {
        self.at.command(args, env)
    }

    /// A service node on this endpoint.
    pub async fn node(&self, id: &str, mode: Mode) -> Node {
        let mut s = Settings::default();
        s.node.id = Some(id.to_string());
        s.node.mode = mode;
        s.lock.lease_ttl = Duration::from_secs(3);
        s.lock.renew_every = Duration::from_secs(1);
        Node::builder()
            .settings(s)
            .store(self.store().clone())
            .clock(self.clock.clone())
            .start()
            .await
            .expect("node starts")
    }
}

/// What a run of the binary produced.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout parsed as JSON (a failed parse fails the test with the output).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{self:#?}"))
    }

    /// The JSON report at the end of stderr (`run-with-lock --json`, whose
    /// stdout is the command's); notes may come before it.
    pub fn stderr_json(&self) -> serde_json::Value {
        let start = if self.stderr.starts_with("{\n") {
            0
        } else {
            self.stderr
                .find("\n{\n")
                .map(|i| i + 1)
                .unwrap_or_else(|| panic!("no JSON report on stderr:\n{self:#?}"))
        };
        serde_json::from_str(&self.stderr[start..])
            .unwrap_or_else(|e| panic!("stderr's report is not JSON ({e}):\n{self:#?}"))
    }

    /// Asserts the exit code, printing everything on mismatch.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Run {
        assert_eq!(self.code, code, "unexpected exit code:\n{self:#?}");
        self
    }

    #[track_caller]
    pub fn stdout_has(&self, needle: &str) -> &Run {
        assert!(
            self.stdout.contains(needle),
            "stdout lacks {needle:?}:\n{self:#?}"
        );
        self
    }

    #[track_caller]
    pub fn stderr_has(&self, needle: &str) -> &Run {
        assert!(
            self.stderr.contains(needle),
            "stderr lacks {needle:?}:\n{self:#?}"
        );
        self
    }
}

/// The binary with a clean environment (no LOCKSHIFT settings leaking in
/// from the developer's shell).
pub fn command(
    contact: Option<&str>,
    args: &[&str],
    env: &[(&str, &str)],
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_migrate"));
    if let Some(addr) = contact {
        cmd.arg("--contact-points").arg(addr);
    }
    cmd.args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("LOCKSHIFT") {
            cmd.env_remove(k);
        }
    }
    cmd.env_remove("RUST_LOG");
    cmd.envs(env.iter().copied());
    cmd.kill_on_drop(true);
    cmd.stdin(std::process::Stdio::null());
    cmd
}

/// `migrate demo` on a small fleet (2 nodes, 2 workers, 4 accounts), with
/// JSON output, settling for `settle` after each step, then `extra`.
pub fn small_demo<'a>(settle: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "demo",
        "--json",
        "--nodes",
        "2",
        "--workers",
        "2",
        "--accounts",
        "4",
        "--settle",
        settle,
    ];
    args.extend_from_slice(extra);
    args
}

/// Runs the binary to completion (at most 90 s: a generous bound, only
/// there so a hang fails instead of blocking the suite).
pub async fn migrate(contact: Option<&str>, args: &[&str], env: &[(&str, &str)]) -> Run {
    run(command(contact, args, env), args).await
}

async fn run(mut cmd: tokio::process::Command, args: &[&str]) -> Run {
    let out = tokio::time::timeout(Duration::from_secs(90), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("migrate {args:?} did not finish within 90 s"))
        .expect("migrate runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A store on `at`, creating the keyspace and tables if asked.
async fn connect(at: &At, create_schema: bool) -> CqlStore {
    CqlStore::connect(&CqlSettings {
        contact_points: at.contact.split(',').map(String::from).collect(),
        keyspace: at.keyspace.clone(),
        create_schema,
        ..CqlSettings::default()
    })
    .await
    .unwrap_or_else(|e| panic!("connecting to {} ({}): {e}", at.contact, at.keyspace))
}

/// Drops `at`'s keyspace if a previous run left it.
async fn drop_if_there(at: &At) {
    let settings = CqlSettings {
        contact_points: at.contact.split(',').map(String::from).collect(),
        keyspace: at.keyspace.clone(),
        ..CqlSettings::default()
    };
    match CqlStore::connect(&settings).await {
        Ok(store) => store.drop_keyspace().await.expect("drop the keyspace"),
        Err(e) if e.kind() == StoreErrorKind::SchemaMissing => {}
        Err(e) => panic!("{CONTACT_POINTS_VAR} is set, but {}: {e}", at.contact),
    }
}

/// Polls `check` every 50 ms until it holds (at most `within`).
pub async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A registry entry as a live node at stage `legacy` (version 0) writes it,
/// running `algorithm`, with no lease promise: tests imitate nodes with it.
pub fn node_info(node: &str, algorithm: lockshift_lock::Algorithm) -> NodeInfo {
    NodeInfo {
        node: node.into(),
        version: "0.0.9".into(),
        configured_mode: Mode::from(algorithm),
        effective: algorithm,
        degraded: false,
        seen_stage: Some(Stage::Legacy),
        seen_version: Some(0),
        started_at: 0,
        incarnation: None,
        last_used: std::collections::BTreeMap::new(),
        lease: None,
        acting_version: Some(0),
        bound: std::collections::BTreeMap::new(),
        view_expired: false,
        datacenter: None,
        homes: None,
        stage_valid_for_ms: None,
        registry_ttl_ms: None,
        left: false,
        clock: None,
        host_clock: None,
    }
}
