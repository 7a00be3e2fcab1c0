//! A local CQL endpoint: lockshift's embedded store served over the CQL
//! native protocol v4, so the real `scylla` driver, the `migrate` CLI and
//! multi-process tests run without a database installed.
//!
//! The endpoint stores tables of any schema, in memory, with the exact
//! per-cell semantics of [`lockshift_store::MemoryStore`]: every cell is a
//! [`lockshift_store::reconcile::CellVersion`] reconciled by the same rule.
//! Drivers see one Cassandra 4.0 node (`release_version` 4.0.11, Murmur3
//! partitioner, one token) with the `system` and `system_schema` tables
//! they read, kept in step with DDL.
//!
//! # Examples
//!
//! ```
//! use lockshift_cql_emulator::{Emulator, Fault, FaultRule};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let endpoint = Emulator::builder().start("127.0.0.1:0".parse()?).await?;
//! let addr = endpoint.local_addr(); // point any CQL driver here
//! // Make the next write to lockshift.main time out.
//! endpoint.faults().add(FaultRule::new(Fault::WriteTimeout).on_table("lockshift.main").writes().times(1))?;
//! # let _ = addr;
//! endpoint.shutdown().await;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Invariants
//!
//! 1. **Same semantics as the embedded store.** A cell's versions are
//!    reconciled by `CellVersion::supersedes` (higher timestamp wins, a
//!    tombstone wins a tie); TTLs count from apply time on the injected clock;
//!    rows sort by clustering key byte-wise (per type collation); LIMIT counts
//!    live rows only. A lockshift cell is a CQL row whose marker and `value`
//!    cell share one timestamp and TTL, so it is live exactly when the
//!    embedded store's cell is. Tombstones cost what they cost on Cassandra
//!    4.1.1: kept for the table's `gc_grace_seconds`, counted by the reads
//!    that pass them, answered with Cassandra's warning (the frame's warning
//!    list) above 1 000 and `READ_FAILURE` (`READ_TOO_MANY_TOMBSTONES`)
//!    above 100 000 — `engine::select::cost`, thresholds set with
//!    [`EmulatorBuilder::tombstone_thresholds`]. The endpoint counts
//!    every read, not only those it warns about, and tells whoever runs it
//!    ([`EmulatorHandle::take_read_costs`]).
//! 2. **Server timestamps strictly increase** (µs from the clock, at
//!    least one more than the last) for statements without `USING TIMESTAMP`.
//! 3. **No client input can panic the server** or disturb another
//!    connection: lengths are checked before use, frames are capped
//!    (256 MiB by default), and engine work runs under a panic guard.
//! 4. **Stable identity.** The host id is fixed unless configured, and a
//!    prepared statement's id is a hash of its keyspace and text, so drivers
//!    survive an endpoint restart by re-preparing on `Unprepared`.
//!
//! # What is served
//!
//! Protocol v4 only; other versions get `ERROR 0x000A` "Invalid or
//! unsupported protocol version" on their own stream id. Requests pipeline
//! on any number of stream ids and are answered as they finish. No
//! compression, no authentication, no events (REGISTER is acknowledged).
//!
//! The CQL subset:
//!
//! - `CREATE KEYSPACE [IF NOT EXISTS] … WITH replication = {…} [AND durable_writes = …]`,
//!   `CREATE TABLE [IF NOT EXISTS] … (…, PRIMARY KEY ((…), …)) [WITH CLUSTERING ORDER BY (…)
//!   AND default_time_to_live = … AND gc_grace_seconds = … AND comment = …]`,
//!   `DROP KEYSPACE|TABLE [IF EXISTS]`, `USE`, `TRUNCATE`.
//! - `INSERT … VALUES … [USING TTL … AND TIMESTAMP …]`, `UPDATE … [USING …] SET c = v, … WHERE …`,
//!   `DELETE [c, …] FROM … [USING TIMESTAMP …] WHERE …` (rows, cells, clustering ranges,
//!   whole partitions), `BEGIN [UNLOGGED|LOGGED] BATCH … APPLY BATCH`.
//! - Lightweight transactions on one row: `INSERT … IF NOT EXISTS [USING TTL …]`,
//!   `UPDATE … SET … WHERE … IF EXISTS | IF c op v [AND …]`, `DELETE … WHERE … IF EXISTS |
//!   IF c op v [AND …]` (`op`: `=`, `<`, `<=`, `>`, `>=`; a fenced write's `IF fence <= ?`), linearizable (every statement runs under one lock), answering a
//!   boolean `[applied]` column and, when not applied, the row's current values as
//!   Cassandra does. Injected latency is paid once per Paxos round trip (4), as a cluster
//!   pays it. Not in batches, not with `USING TIMESTAMP`; no `!=` or `IN` conditions.
//! - `SELECT [DISTINCT] *|c, writetime(c), ttl(c), token(pk), count(*) [AS alias] FROM … WHERE
//!   pk = ?|IN (…)|IN ? AND ck = …|IN …|slices … | token(pk) >|>=|<|<= … [ORDER BY …]
//!   [PER PARTITION LIMIT n] [LIMIT n] [ALLOW FILTERING]`; paging with an opaque state that
//!   encodes the last position.
//! - Types: every native type, `list`, `set`, `map`, `tuple`, `frozen<…>`. Collections are
//!   stored as one value (like `frozen`), so `c = c + …` and element updates are refused.
//! - Functions: `now()`, `uuid()`, `currentTimestamp()` in values.
//!
//! - `DESCRIBE KEYSPACES | TABLES | CLUSTER | [FULL] SCHEMA | KEYSPACE k | TABLE t | name`,
//!   answered server-side as Cassandra 4 does (cqlsh 6 sends it as a statement).
//!
//! Anything else (other `IF` conditions, counters, static columns, secondary indexes, UDTs, ALTER,
//! JSON, GROUP BY) is answered with a SyntaxError or Invalid that names what is
//! unsupported — never a hang.
//!
//! # Fault injection
//!
//! From Rust: [`EmulatorHandle::faults`] → [`FaultController::add`] with a
//! [`FaultRule`]. Black-box, from any CQL client, the virtual table
//! `lockshift_emulator.faults`:
//!
//! ```text
//! INSERT INTO lockshift_emulator.faults (id, fault, tables, ops, times)
//!     VALUES ('t1', 'write_timeout', {'lockshift.main'}, 'write', 2);
//! INSERT INTO lockshift_emulator.faults (id, fault, latency_ms, probability, seed)
//!     VALUES ('slow', 'latency', 50, 0.5, 7);
//! SELECT * FROM lockshift_emulator.faults;        -- every rule with fired / remaining
//! DELETE FROM lockshift_emulator.faults WHERE id = 't1';
//! TRUNCATE lockshift_emulator.faults;
//! ```
//!
//! `fault` ∈ `latency` (with `latency_ms`), `unavailable`, `write_timeout`,
//! `read_timeout`, `overloaded`, `drop_connection`; `ops` ∈ `read`, `write`,
//! `all`; `tables` entries are `ks.table`, `table` or `ks.*` (none: every
//! user table); `times` counts firings; `probability` with `seed`;
//! `after_apply = true` fails the request after applying it.
//!
//! # Why a hand-written codec
//!
//! `cassandra-protocol` would decode requests, but its response serialisers
//! panic on inconsistent metadata, it has no frame-size guard and no
//! custom-payload parsing, and the driver-side `scylla-cql` cannot decode
//! requests at all. The v4 bodies the endpoint needs are a few hundred lines
//! (`wire`, `frame`, `messages`), all bounds-checked in one reader, and the
//! dependency tree stays small.
//!
//! # Performance
//!
//! One mutex around the engine; without fault rules each request runs on its
//! connection's reader task (no spawn per request); reads and writes are
//! buffered. On the 2-core build machine (otherwise idle), release build,
//! scylla driver, prepared statements on one connection, 5 s per phase
//! (ranges over repeated runs):
//!
//! | endpoint                  | in flight | INSERT ops/s      | SELECT (LIMIT 10) ops/s |
//! |---------------------------|-----------|-------------------|-------------------------|
//! | separate process (binary) | 128       | 135 000 – 142 000 | 74 000 – 86 000         |
//! | separate process (binary) | 16        | ~55 000           | ~49 000                 |
//! | separate process (binary) | 1         | ~12 000           | ~9 700                  |
//! | same process as client    | 128       | 114 000 – 120 000 | 80 000 – 93 000         |
//!
//! ```text
//! cargo build --release -p lockshift-cql-emulator --example throughput --bin cql-emulator
//! target/release/cql-emulator --listen 127.0.0.1:9042 &
//! target/release/examples/throughput --in-flight 128 --seconds 5 --addr 127.0.0.1:9042
//! target/release/examples/throughput --in-flight 128 --seconds 5   # in-process endpoint
//! ```
//!
//! # Modules
//!
//! - `server`: [`Emulator`], [`EmulatorBuilder`], [`EmulatorHandle`].
//! - `connection`: per-connection reader and writer; `connection::requests`
//!   runs QUERY / PREPARE / EXECUTE / BATCH with the fault rules around them.
//! - `frame`, `wire`, `messages`: the v4 envelope, notation and bodies.
//! - `parse`: lexer, syntax tree, recursive-descent parser (`parser::dml`,
//!   `parser::ddl`).
//! - `engine`: schemas, storage (`data`), compilation with typed bind
//!   markers (`compile`, `compile::restrict` for WHERE rules), SELECT and
//!   paging (`select`, `select::paging`), modifications, DDL, DESCRIBE,
//!   system tables, the fault table.
//! - `types`, `value`, `murmur3`: CQL types, constants and collations,
//!   Cassandra's token.
//! - [`faults`](FaultController): rules and controller; `faults::table` maps
//!   rules to rows of the CQL fault table.
//! - [`EmulatorError`]: what starting or configuring can fail with.
//!
//! # Tests
//!
//! Unit tests beside the code (the engine's `model_tests` check invariant 1 against
//! the embedded store with random operations); `src/fuzz_tests.rs` fuzzes
//! the frame decoder and the parser/engine with proptest and replays
//! `tests/corpus/`; `tests/` drives the endpoint with the scylla driver
//! (metadata on and off), raw sockets, a second OS process, the store
//! conformance suite, and — when installed — the Python driver and cqlsh
//! (`pip install cassandra-driver cqlsh`).

// Every public item is documented (the workspace warns, CI denies warnings).
#![warn(missing_docs)]
// Debug on every public type, for logs and test failures.
#![warn(missing_debug_implementations)]

mod connection;
mod engine;
mod error;
mod faults;
mod frame;
mod messages;
mod murmur3;
mod parse;
mod read_costs;
mod server;
mod types;
mod value;
mod wire;

#[cfg(test)]
mod fuzz_tests;

pub use error::EmulatorError;
pub use faults::{Fault, FaultController, FaultId, FaultOps, FaultRule, FaultStatus};
pub use frame::DEFAULT_MAX_FRAME_BYTES;
pub use read_costs::TableReadCosts;
pub use server::{DEFAULT_HOST_ID, Emulator, EmulatorBuilder, EmulatorHandle};
