// Each test binary uses part of the shared harness.
#![allow(dead_code)]

//! The e2e harness: a local CQL endpoint in this test process (port 0, its
//! fault controller at hand), the built `migrate` binary run against it,
//! and a store connection for seeding and checking cells.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use lockshift::{Node, Settings};
use lockshift_combined::registry::NodeInfo;
use lockshift_combined::{Mode, Stage};
use lockshift_cql_emulator::{Emulator, EmulatorHandle};
use lockshift_store::{CqlSettings, CqlStore, SharedClock, SharedStore, SystemClock};

/// Short leases, so loss and expiry happen within seconds.
pub const FAST: &[(&str, &str)] = &[
    ("LOCKSHIFT__LOCK__LEASE_TTL", "3s"),
    ("LOCKSHIFT__LOCK__RENEW_EVERY", "1s"),
];

/// A running endpoint and a client of it.
pub struct Endpoint {
    pub handle: EmulatorHandle,
    pub addr: SocketAddr,
    /// Connected with `create_schema = true` (when made by [`Endpoint::with_schema`]).
    pub store: Option<SharedStore>,
    pub clock: SharedClock,
}

impl Endpoint {
    /// An endpoint with lockshift's keyspace and tables.
    pub async fn with_schema() -> Endpoint {
        let mut e = Endpoint::bare().await;
        let store = CqlStore::connect(&CqlSettings {
            contact_points: vec![e.addr.to_string()],
            create_schema: true,
            ..CqlSettings::default()
        })
        .await
        .expect("connect and create schema");
        e.store = Some(Arc::new(store));
        e
    }

    /// An endpoint with nothing in it.
    pub async fn bare() -> Endpoint {
        let handle = Emulator::builder()
            .start("127.0.0.1:0".parse().expect("a socket address"))
            .await
            .expect("endpoint starts");
        Endpoint {
            addr: handle.local_addr(),
            handle,
            store: None,
            clock: Arc::new(SystemClock),
        }
    }

    pub fn store(&self) -> &SharedStore {
        self.store.as_ref().expect("endpoint made with schema")
    }

    pub fn addr(&self) -> String {
        self.addr.to_string()
    }

    /// Runs `migrate --contact-points <this> args…`.
    pub async fn migrate(&self, args: &[&str]) -> Run {
        migrate(Some(&self.addr()), args, &[]).await
    }

    /// As [`migrate`](Self::migrate) with extra environment.
    pub async fn migrate_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        migrate(Some(&self.addr()), args, env).await
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
    let out = tokio::time::timeout(
        Duration::from_secs(90),
        command(contact, args, env).output(),
    )
    .await
    .unwrap_or_else(|_| panic!("migrate {args:?} did not finish within 90 s"))
    .expect("migrate runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
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
    }
}
