//! The CQL backend: [`CqlStore`], the [`Store`](crate::Store) contract on a ScyllaDB or
//! Cassandra cluster (or the local CQL endpoint) through the `scylla` driver.
//!
//! The cluster does the real work — last-write-wins by the timestamps we
//! send, tombstones winning ties, TTLs, clustering order — so this module is
//! mostly a translation: each [`Store`](crate::Store) call becomes one prepared statement or
//! one single-partition batch, and each driver error becomes a
//! [`StoreErrorKind`](crate::StoreErrorKind) saying whether the data may have changed.
//!
//! - `store.rs`: the handle, [`CqlStore`], and its [`Store`](crate::Store) impl.
//! - `connect.rs`: opening the session, creating or checking the schema.
//! - `statements.rs`: the CQL text, preparation, per-statement settings.
//! - `rows.rs`: bind values out, result rows in.
//! - `errors.rs`: the error mapping and the retry policy that keeps it honest.
//!
//! # Round trips
//!
//! | method | requests |
//! |---|---|
//! | [`write`](crate::Store::write), [`delete`](crate::Store::delete) | 1 (EXECUTE, or one UNLOGGED BATCH for several cells); 0 when empty |
//! | [`read`](crate::Store::read) | 1 (EXECUTE, unpaged) |
//! | [`scan_keys`](crate::Store::scan_keys) | 1 (EXECUTE of one page) |
//! | [`CqlStore::connect`] | session setup; then 8 DDL (the driver polls for schema agreement after each) and one more agreement wait, or 1 PREPARE + 1 query to check the schema; then 35 PREPAREs (concurrent) |
//!
//! The driver may add attempts on other nodes (see `errors.rs` for which),
//! and re-prepares by itself when a node forgot a statement.
//!
//! # Invariants
//!
//! - **W1.** Every write and delete carries the caller's timestamp
//!   (`USING TIMESTAMP ?`); the driver sends no client timestamps of its own
//!   and nothing here lets the coordinator pick one. Store invariants S1/S2
//!   then hold because the cluster reconciles by exactly these numbers.
//! - **W2.** All cells of one call go to one partition in one request, so the
//!   cluster applies them as one mutation (store contract 6).
//! - **W3.** An error reports [`StoreErrorKind::NotApplied`](crate::StoreErrorKind::NotApplied) or
//!   [`StoreErrorKind::Unavailable`](crate::StoreErrorKind::Unavailable) only when no attempt of the request can
//!   have been applied (see `errors.rs`).

mod connect;
mod errors;
mod rows;
mod statements;
mod store;

pub use store::CqlStore;

#[cfg(test)]
#[path = "cql_tests.rs"]
mod tests;
