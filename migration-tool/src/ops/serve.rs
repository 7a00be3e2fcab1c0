//! `migrate serve`: the local CQL endpoint (`lockshift-cql-emulator`) as an
//! operator command, so several processes — services, tests, `migrate`
//! itself — share one in-memory store over the real protocol.
//!
//! The keyspace and tables are created before the address is announced, so
//! a process that reads `listening on ADDR` can use them at once (the
//! operator commands never create schema by themselves).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use lockshift::Settings;
use lockshift::metrics::{MetricsServer, STORE_OPERATIONS};
use lockshift_cql_emulator::{Emulator, EmulatorHandle, Fault, FaultRule};
use lockshift_store::{CqlSettings, CqlStore, SharedStore};
use serde::Serialize;

use super::demo::Connector;
use crate::JSON_VERSION;

/// Printed once the endpoint accepts connections and has the schema
/// (JSON schema, `"version": 1`).
#[derive(Debug, Clone, Serialize)]
pub struct Listening {
    /// Schema version, 1.
    pub version: u32,
    /// The bound address (the real port when asked for port 0).
    pub address: SocketAddr,
    /// The keyspace created.
    pub keyspace: String,
    /// Where metrics are served (`--metrics`), if they are.
    pub metrics: Option<SocketAddr>,
}

/// How `migrate serve` runs.
#[derive(Debug, Clone, Copy)]
pub struct ServeOptions<'a> {
    /// Address to listen on (port 0: any).
    pub addr: SocketAddr,
    /// Delay on every read and write of user tables.
    pub latency: Option<Duration>,
    /// Random extra delay on top of `latency`.
    pub jitter: Option<Duration>,
    /// The scrape endpoint, when `--metrics` asked for one: the endpoint's
    /// answered operations are counted into it.
    pub metrics: Option<&'a MetricsServer>,
}

/// The `node` label of the endpoint's own operation counts.
pub const METRICS_NODE: &str = "serve";

/// Counts the statements the endpoint answers, per lockshift table and
/// kind, into [`STORE_OPERATIONS`] (label `node="serve"`; `kind` is `read`
/// for SELECTs and `write` for every mutation, deletes included: CQL makes
/// no difference). The endpoint has no counters of its own; a rule that
/// delays by nothing counts what it matches (`FaultController::fired`), so
/// one such rule per table and kind is the count, copied into the metrics
/// every second.
fn count_operations(endpoint: &EmulatorHandle) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let mut rules = Vec::new();
    for table in lockshift_store::schema::ALL {
        for (kind, rule) in [
            (
                "read",
                FaultRule::new(Fault::Latency(Duration::ZERO)).reads(),
            ),
            (
                "write",
                FaultRule::new(Fault::Latency(Duration::ZERO)).writes(),
            ),
        ] {
            let id = endpoint
                .faults()
                .add(rule.on_table(table.name()))
                .context("counting the endpoint's operations")?;
            let counter = metrics::counter!(
                STORE_OPERATIONS,
                "node" => METRICS_NODE,
                "table" => table.name(),
                "kind" => kind
            );
            counter.absolute(0);
            rules.push((id, counter));
        }
    }
    let faults = endpoint.faults().clone();
    Ok(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            for (id, counter) in &rules {
                if let Some(n) = faults.fired(id) {
                    counter.absolute(n);
                }
            }
        }
    }))
}

/// The seed of `--jitter`'s random delays.
const JITTER_SEED: u64 = 0x6a69_7474_6572;

/// Starts an endpoint on `addr` with `latency` (+ up to `jitter`) on every
/// read and write of user tables.
///
/// # Errors
/// The address cannot be bound, or a fault rule is refused.
pub async fn start_endpoint(
    addr: SocketAddr,
    latency: Option<Duration>,
    jitter: Option<Duration>,
) -> anyhow::Result<EmulatorHandle> {
    // The endpoint's error names the address and the reason.
    let endpoint = Emulator::builder()
        .start(addr)
        .await
        .context("starting the local endpoint")?;
    let latency = latency.unwrap_or_default();
    let jitter = jitter.unwrap_or_default();
    if !latency.is_zero() || !jitter.is_zero() {
        // One rule: every request waits `latency` plus a uniform extra in
        // `[0, jitter)` (seeded, so a run can be replayed).
        endpoint
            .faults()
            .add(FaultRule::new(Fault::Latency(latency)).with_jitter(jitter, JITTER_SEED))
            .context("setting the endpoint's latency")?;
    }
    Ok(endpoint)
}

/// The address clients should dial: the bound one, with loopback for an
/// unspecified IP.
pub fn dial_address(bound: SocketAddr) -> SocketAddr {
    let mut addr = bound;
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    addr
}

/// Creates lockshift's keyspace and tables on the endpoint at `addr`
/// through the driver, as any client would.
///
/// # Errors
/// The connection or a DDL statement failed.
pub async fn create_schema(
    settings: &CqlSettings,
    addr: SocketAddr,
) -> anyhow::Result<SharedStore> {
    let cql = CqlSettings {
        contact_points: vec![dial_address(addr).to_string()],
        create_schema: true,
        ..settings.clone()
    };
    let store = CqlStore::connect(&cql)
        .await
        .with_context(|| format!("creating keyspace {} on the endpoint", cql.keyspace))?;
    Ok(Arc::new(store))
}

/// Runs the endpoint until SIGINT or SIGTERM; calls `ready` once it
/// listens and has the schema.
///
/// # Errors
/// Start-up failures, or `ready`'s error.
pub async fn serve(
    settings: &Settings,
    options: ServeOptions<'_>,
    ready: impl FnOnce(Listening) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let endpoint = start_endpoint(options.addr, options.latency, options.jitter).await?;
    let bound = endpoint.local_addr();
    let schema = create_schema(&settings.store.cql, bound).await?;
    drop(schema);
    let counting = match options.metrics {
        Some(_) => Some(count_operations(&endpoint)?),
        None => None,
    };
    ready(Listening {
        version: JSON_VERSION,
        address: bound,
        keyspace: settings.store.cql.keyspace.clone(),
        metrics: options.metrics.map(MetricsServer::local_addr),
    })?;
    shutdown_signal().await;
    if let Some(task) = counting {
        task.abort();
    }
    endpoint.shutdown().await;
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Connects each demo node over CQL, as a separate service would.
#[derive(Debug, Clone)]
pub struct CqlConnector(pub CqlSettings);

#[async_trait]
impl Connector for CqlConnector {
    async fn connect(&self) -> anyhow::Result<SharedStore> {
        let store = CqlStore::connect(&self.0)
            .await
            .context("connecting a node to the endpoint")?;
        Ok(Arc::new(store))
    }
}
