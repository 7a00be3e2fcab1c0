//! Shared setup for the integration tests: an endpoint on a manual clock, a
//! scylla session with schema metadata on or off, lockshift's schema and its
//! prepared statements exactly as the CQL backend sends them (`store/src/cql/statements.rs`).

// Not every test file uses every helper.
#![allow(dead_code)]
// Test helpers: a failed unwrap is a failed test (clippy only exempts #[test] fns).
#![allow(clippy::unwrap_used)]

pub mod raw;

use std::net::SocketAddr;
use std::sync::Arc;

use lockshift_cql_emulator::{Emulator, EmulatorHandle};
use lockshift_store::{ManualClock, Timestamp};
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::statement::prepared::PreparedStatement;

/// 2023-11-14T22:13:20Z: a fixed "now" for every test clock.
pub const START: i64 = 1_700_000_000_000_000;

/// lockshift's tables (`lockshift_store::schema::ALL`).
pub const TABLES: [&str; 7] = [
    "main",
    "shadow",
    "queue",
    "global_time",
    "rollout",
    "nodes",
    "scratch",
];

/// An endpoint on a manual clock.
pub async fn endpoint() -> (EmulatorHandle, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(Timestamp::from_micros(START)));
    let handle = Emulator::builder()
        .clock(clock.clone())
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    (handle, clock)
}

/// A session with the driver's defaults, or with schema metadata off.
pub async fn session(addr: SocketAddr, metadata: bool) -> Session {
    let mut b = SessionBuilder::new().known_node_addr(addr);
    if !metadata {
        b = b
            .fetch_schema_metadata(false)
            .fetch_full_schema_metadata(false);
    }
    b.build().await.unwrap()
}

/// Both session flavours the issue asks for.
pub const MODES: [bool; 2] = [true, false];

/// Runs lockshift's DDL (idempotent).
pub async fn create_schema(s: &Session) {
    s.query_unpaged(
        "CREATE KEYSPACE IF NOT EXISTS lockshift WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1} AND durable_writes = true",
        &(),
    )
    .await
    .unwrap();
    for t in TABLES {
        s.query_unpaged(
            format!("CREATE TABLE IF NOT EXISTS lockshift.{t} (row_key text, column_name text, value blob, PRIMARY KEY ((row_key), column_name)) WITH CLUSTERING ORDER BY (column_name ASC)"),
            &(),
        )
        .await
        .unwrap();
    }
}

/// The hot-path statements for one table, prepared.
pub struct Statements {
    pub insert: PreparedStatement,
    pub delete: PreparedStatement,
    pub read: PreparedStatement,
    pub read_from: PreparedStatement,
    pub keys: PreparedStatement,
}

impl Statements {
    pub async fn prepare(s: &Session, table: &str) -> Statements {
        let p = |q: String| async move { s.prepare(q).await.unwrap() };
        Statements {
            insert: p(format!("INSERT INTO lockshift.{table} (row_key, column_name, value) VALUES (?, ?, ?) USING TTL ? AND TIMESTAMP ?")).await,
            delete: p(format!("DELETE FROM lockshift.{table} USING TIMESTAMP ? WHERE row_key = ? AND column_name = ?")).await,
            read: p(format!("SELECT column_name, value, writetime(value), ttl(value) FROM lockshift.{table} WHERE row_key = ? LIMIT ?")).await,
            read_from: p(format!("SELECT column_name, value, writetime(value), ttl(value) FROM lockshift.{table} WHERE row_key = ? AND column_name >= ? LIMIT ?")).await,
            keys: p(format!("SELECT DISTINCT row_key FROM lockshift.{table}")).await,
        }
    }
}

/// A cell as the read statements return it.
pub type Cell = (String, Vec<u8>, i64, Option<i32>);

pub async fn read(s: &Session, st: &Statements, row: &str, limit: i32) -> Vec<Cell> {
    s.execute_unpaged(&st.read, (row, limit))
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .rows::<Cell>()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

pub async fn write(
    s: &Session,
    st: &Statements,
    row: &str,
    col: &str,
    value: &[u8],
    ttl: i32,
    ts: i64,
) {
    s.execute_unpaged(&st.insert, (row, col, value.to_vec(), ttl, ts))
        .await
        .unwrap();
}

pub async fn delete(s: &Session, st: &Statements, row: &str, col: &str, ts: i64) {
    s.execute_unpaged(&st.delete, (ts, row, col)).await.unwrap();
}
