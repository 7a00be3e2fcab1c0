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
use lockshift_combined::Settings;
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
    let endpoint = Emulator::builder()
        .start(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
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
    addr: SocketAddr,
    latency: Option<Duration>,
    jitter: Option<Duration>,
    ready: impl FnOnce(Listening) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let endpoint = start_endpoint(addr, latency, jitter).await?;
    let bound = endpoint.local_addr();
    let schema = create_schema(&settings.store.cql, bound).await?;
    drop(schema);
    ready(Listening {
        version: JSON_VERSION,
        address: bound,
        keyspace: settings.store.cql.keyspace.clone(),
    })?;
    shutdown_signal().await;
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
