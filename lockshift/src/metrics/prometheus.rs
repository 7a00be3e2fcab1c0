//! A Prometheus scrape endpoint: installs the `metrics-exporter-prometheus`
//! recorder and answers every HTTP request on its address with the text
//! format. A few lines of tokio instead of the exporter's own listener,
//! which would bring an HTTP stack (hyper) for one fixed response.

use std::net::SocketAddr;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tracing::debug;

/// Histogram buckets, seconds: lock waits run from a millisecond
/// (uncontended, local) to minutes (the legacy lock under contention).
const BUCKETS: [f64; 16] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// The scrape endpoint could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetricsError {
    /// The address could not be bound.
    #[error("cannot listen for metrics scrapes on {addr}: {error}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why (shown in the message, not chained).
        error: std::io::Error,
    },
    /// A recorder is already installed in this process, or the buckets
    /// were refused.
    #[error("cannot install the Prometheus recorder: {0}")]
    Install(String),
}

/// A running scrape endpoint; stops when dropped.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    handle: PrometheusHandle,
    tasks: [JoinHandle<()>; 2],
}

impl MetricsServer {
    /// The bound address (the real port when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The current text, as a scrape would get it.
    pub fn render(&self) -> String {
        self.handle.render()
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Installs a Prometheus recorder for this process (the global `metrics`
/// recorder: once per process) and serves its text on `addr`, e.g.
/// `127.0.0.1:9100`, at any path. Call it before starting nodes: handles
/// made earlier stay no-ops.
///
/// # Errors
/// [`MetricsError`] if the address cannot be bound or a recorder is
/// already installed.
pub async fn serve_prometheus(addr: SocketAddr) -> Result<MetricsServer, MetricsError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|error| MetricsError::Bind { addr, error })?;
    let bound = listener
        .local_addr()
        .map_err(|error| MetricsError::Bind { addr, error })?;
    let handle = PrometheusBuilder::new()
        .set_buckets(&BUCKETS)
        .map_err(|e| MetricsError::Install(e.to_string()))?
        .install_recorder()
        .map_err(|e| MetricsError::Install(e.to_string()))?;
    super::describe();
    // Histogram samples are buffered until upkeep drains them: between
    // scrapes too, so the buffers stay small.
    let upkeep = handle.clone();
    let upkeep = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    let serving = handle.clone();
    let server = tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    let serving = serving.clone();
                    tokio::spawn(async move {
                        if let Err(e) = answer(stream, &serving).await {
                            debug!(%peer, error = %e, "metrics scrape failed");
                        }
                    });
                }
                Err(e) => {
                    debug!(error = %e, "accepting a metrics scrape failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    Ok(MetricsServer {
        addr: bound,
        handle,
        tasks: [server, upkeep],
    })
}

/// Reads the request head (whatever it asks for) and answers with the text.
async fn answer(mut stream: TcpStream, handle: &PrometheusHandle) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    let read = async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        Ok::<(), std::io::Error>(())
    };
    // A client that never finishes its request does not hold a task for ever.
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "request head"))??;
    handle.run_upkeep();
    let body = handle.render();
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}
