//! `migrate serve` (placeholder until the local endpoint crate lands).

use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;
use lockshift_combined::Settings;
use lockshift_store::{CqlSettings, SharedStore};
use serde::Serialize;

use super::demo::Connector;

/// Printed once the endpoint accepts connections.
#[derive(Debug, Clone, Serialize)]
pub struct Listening {
    /// Schema version, 1.
    pub version: u32,
    /// The bound address.
    pub address: SocketAddr,
}

/// A running endpoint.
#[derive(Debug)]
pub struct Endpoint;

impl Endpoint {
    /// The address.
    pub fn local_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 0))
    }
    /// Stops it.
    pub async fn shutdown(self) {}
}

/// Starts an endpoint.
///
/// # Errors
/// Always, for now.
pub async fn start_endpoint(
    _addr: SocketAddr,
    _latency: Option<Duration>,
    _jitter: Option<Duration>,
) -> anyhow::Result<Endpoint> {
    anyhow::bail!("the local endpoint is not available in this build")
}

/// Serves until interrupted.
///
/// # Errors
/// Always, for now.
pub async fn serve(
    _settings: &Settings,
    addr: SocketAddr,
    latency: Option<Duration>,
    jitter: Option<Duration>,
    _ready: impl FnOnce(Listening) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    start_endpoint(addr, latency, jitter).await.map(|_| ())
}

/// Connects nodes over CQL.
#[derive(Debug, Clone)]
pub struct CqlConnector(pub CqlSettings);

#[async_trait]
impl Connector for CqlConnector {
    async fn connect(&self) -> anyhow::Result<SharedStore> {
        Ok(std::sync::Arc::new(
            lockshift_store::CqlStore::connect(&self.0).await?,
        ))
    }
}
