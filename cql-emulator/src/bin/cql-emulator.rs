//! `cql-emulator`: run a local CQL endpoint serving lockshift's embedded store.
//!
//! ```text
//! cql-emulator --listen 127.0.0.1:9042 [--latency 5ms [--jitter 2ms]] [--host-id <uuid>]
//! ```
//!
//! Prints `listening on <addr>` on stdout once it accepts connections (tests
//! that start it with `--listen 127.0.0.1:0` read the port from that line)
//! and stops on Ctrl-C or SIGTERM.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use lockshift_cql_emulator::{DEFAULT_HOST_ID, Emulator, Fault, FaultRule};
use tracing_subscriber::EnvFilter;

/// Serve lockshift's embedded store over the CQL native protocol v4.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// Address to listen on; port 0 picks a free port.
    #[arg(
        long,
        env = "LOCKSHIFT_EMULATOR_LISTEN",
        default_value = "127.0.0.1:9042"
    )]
    listen: SocketAddr,
    /// Delay every read and write of user tables by this much (e.g. "5ms").
    #[arg(long, value_parser = humantime::parse_duration)]
    latency: Option<Duration>,
    /// Add a uniform extra delay in [0, jitter) to each request (e.g. "2ms").
    #[arg(long, value_parser = humantime::parse_duration, requires = "latency")]
    jitter: Option<Duration>,
    /// Host id reported in system.local; keep it across restarts.
    #[arg(long, default_value_t = DEFAULT_HOST_ID)]
    host_id: uuid::Uuid,
    /// Address advertised as rpc_address (default: the listen address).
    #[arg(long)]
    rpc_address: Option<std::net::IpAddr>,
    /// Log filter, e.g. "info" or "lockshift_cql_emulator=debug".
    #[arg(long, env = "RUST_LOG", default_value = "warn")]
    log: String,
}

async fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    let mut builder = Emulator::builder().host_id(cli.host_id);
    if let Some(ip) = cli.rpc_address {
        builder = builder.rpc_address(ip);
    }
    let endpoint = builder.start(cli.listen).await?;
    if let Some(d) = cli.latency {
        let mut rule = FaultRule::new(Fault::Latency(d));
        if let Some(jitter) = cli.jitter {
            rule = rule.with_jitter(jitter, 0);
        }
        endpoint.faults().add(rule)?;
    }
    let mut out = std::io::stdout();
    writeln!(out, "listening on {}", endpoint.local_addr())?;
    out.flush()?;
    shutdown_signal().await;
    endpoint.shutdown().await;
    Ok(())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new(&cli.log))
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: could not start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
