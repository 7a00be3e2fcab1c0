//! Throughput of the endpoint through the real `scylla` driver: N requests
//! in flight (prepared INSERTs of lockshift's shape, then prepared SELECTs of
//! a row's first cells), for a fixed time each.
//!
//! ```text
//! cargo run --release -p lockshift-cql-emulator --example throughput -- --in-flight 128 --seconds 5
//! ```
//!
//! Without `--addr` the endpoint runs in this process (sharing its cores
//! with the client, as on a CI machine); with `--addr` it measures an
//! endpoint started elsewhere, e.g. the release `cql-emulator` binary.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use lockshift_cql_emulator::Emulator;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::statement::prepared::PreparedStatement;

/// Measure operations per second with N requests in flight.
#[derive(Debug, Parser)]
struct Args {
    /// Concurrent requests.
    #[arg(long, default_value_t = 128)]
    in_flight: usize,
    /// Seconds per phase.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// An endpoint to measure instead of starting one in-process.
    #[arg(long)]
    addr: Option<SocketAddr>,
}

async fn phase(
    name: &str,
    session: &Arc<Session>,
    stmt: &PreparedStatement,
    args: &Args,
    read: bool,
) -> Result<f64, Box<dyn std::error::Error>> {
    let ops = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..args.in_flight {
        let (session, stmt, ops) = (session.clone(), stmt.clone(), ops.clone());
        tasks.push(tokio::spawn(async move {
            let mut i: u64 = 0;
            while Instant::now() < deadline {
                let row = format!("lock-{}", (worker as u64 * 7919 + i) % 1000);
                let r = if read {
                    session
                        .execute_unpaged(&stmt, (row, 10i32))
                        .await
                        .map(|_| ())
                } else {
                    let col = format!("{:020}-owner-{worker}", i);
                    session
                        .execute_unpaged(&stmt, (row, col, vec![0u8; 16], 60i32, i as i64 + 1))
                        .await
                        .map(|_| ())
                };
                r?;
                ops.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
            Ok::<(), scylla::errors::ExecutionError>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let rate = ops.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64();
    println!(
        "{name:<7} {:>10.0} ops/s  ({} in flight, {} s)",
        rate, args.in_flight, args.seconds
    );
    Ok(rate)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let (_endpoint, addr) = match args.addr {
        Some(a) => (None, a),
        None => {
            let e = Emulator::builder().start("127.0.0.1:0".parse()?).await?;
            let a = e.local_addr();
            (Some(e), a)
        }
    };
    let session = Arc::new(SessionBuilder::new().known_node_addr(addr).build().await?);
    session
        .query_unpaged(
            "CREATE KEYSPACE IF NOT EXISTS lockshift WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            &(),
        )
        .await?;
    session
        .query_unpaged(
            "CREATE TABLE IF NOT EXISTS lockshift.main (row_key text, column_name text, value blob, PRIMARY KEY ((row_key), column_name)) WITH CLUSTERING ORDER BY (column_name ASC)",
            &(),
        )
        .await?;
    let insert = session
        .prepare("INSERT INTO lockshift.main (row_key, column_name, value) VALUES (?, ?, ?) USING TTL ? AND TIMESTAMP ?")
        .await?;
    let select = session
        .prepare("SELECT column_name, value, writetime(value), ttl(value) FROM lockshift.main WHERE row_key = ? LIMIT ?")
        .await?;
    phase("insert", &session, &insert, &args, false).await?;
    phase("select", &session, &select, &args, true).await?;
    Ok(())
}
