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
//! - `connect.rs`: opening the session, probing the contact points first.
//! - `keyspace.rs`: creating, applying or checking the schema.
//! - `statements.rs`: the CQL text, preparation, per-statement settings.
//! - `fenced.rs`: fenced writes, the conditional updates and their rounds.
//! - `rows.rs`: bind values out, result rows in.
//! - `errors.rs`: the error mapping and the retry policies that keep it honest.
//! - `tls.rs`: TLS (rustls with *ring*) and what a failed handshake means.
//!
//! # Connecting: authentication and TLS
//!
//! `store.cql.username` with `password` or `password_file` logs in with
//! the driver's plain-text authenticator (SASL PLAIN, as Cassandra's and
//! ScyllaDB's `PasswordAuthenticator` expect); `[store.cql.tls]` wraps every
//! connection — the driver's and the contact-point probe's — in TLS. A
//! refusal is [`StoreErrorKind::Authentication`](crate::StoreErrorKind::Authentication)
//! with the reason in words (missing or refused credentials, TLS required,
//! an untrusted certificate, a client certificate required), found at once
//! by the probe (TLS) or from the driver's setup error (authentication) —
//! never left to end as a connect timeout.
//!
//! # Retries
//!
//! What is repeated after a failure, and why (thesis-free: this is about
//! the driver):
//!
//! - **Reads and scans** — every `SELECT` on the lock tables: the stage,
//!   the registry, the census, `inspect`, the locks' own reads — change
//!   nothing, so repeating them is always safe. They run with an execution
//!   profile of their own: [`ReadRetryPolicy`](errors::ReadRetryPolicy)
//!   sends a failed attempt to the next node of the plan when another
//!   coordinator may succeed (broken connection, timeout, unavailable,
//!   overloaded, bootstrapping; at most twice), and speculative execution
//!   sends a second copy to another node when the first has not answered
//!   within `store.cql.speculative_read_after` (250 ms; up to two extra
//!   copies). A node that is cut off but keeps its connections open — the
//!   case the driver cannot see — then costs a read one speculation delay,
//!   not a request timeout: with three nodes and one cut off, reads go on.
//! - **Writes and deletes** are idempotent for the data (each carries its
//!   own timestamp, invariant 1: applying one twice gives the same cell), so the
//!   driver may retry them — but only after an attempt that provably
//!   applied nothing ([`MutationRetryPolicy`](errors::MutationRetryPolicy)),
//!   and never speculatively. Not for the data's sake: for the error's. An
//!   error after a retry describes the last attempt only, and a retry after
//!   an ambiguous attempt could turn "may have applied" into "not applied"
//!   — a lie the lock code would act on (invariant 3). So an ambiguous write comes
//!   back as [`StoreErrorKind::MaybeApplied`](crate::StoreErrorKind::MaybeApplied),
//!   and the caller decides: lock code re-reads or cleans up as if it
//!   landed. The one write lockshift does repeat after `MaybeApplied` is
//!   the fencing cell's, whose value is its own timestamp, so any landing
//!   only raises it (`LockGuard::fencing_token`).
//! - **Connecting** is not retried here: [`CqlStore::connect`] fails with
//!   the reason, and the caller (a node's start, `migrate`) reports it.
//!
//! # Round trips
//!
//! | method | requests |
//! |---|---|
//! | [`write`](crate::Store::write), [`delete`](crate::Store::delete) | 1 (EXECUTE, or one UNLOGGED BATCH for several cells); 0 when empty |
//! | [`read`](crate::Store::read) | 1 (EXECUTE, unpaged) |
//! | [`scan_keys`](crate::Store::scan_keys) | 1 (EXECUTE of one page) |
//! | [`write_fenced`](crate::Store::write_fenced) | 1 conditional UPDATE (one Paxos round); 2 on a cell never fenced; +2 PREPAREs on a table's first |
//! | [`CqlStore::connect`] | session setup; then 8 DDL (the driver polls for schema agreement after each) and one more agreement wait, or 1 PREPARE + 1 query to check the schema; then 35 PREPAREs (concurrent) |
//!
//! The driver may add attempts on other nodes (see `errors.rs` for which),
//! and re-prepares by itself when a node forgot a statement.
//!
//! # Invariants
//!
//! 1. Every write and delete carries the caller's timestamp
//!    (`USING TIMESTAMP ?`); the driver sends no client timestamps of its own
//!    and nothing here lets the coordinator pick one. Store invariants S1/S2
//!    then hold because the cluster reconciles by exactly these numbers.
//! 2. All cells of one call go to one partition in one request, so the
//!    cluster applies them as one mutation (store invariant S7).
//! 3. An error reports
//!    [`StoreErrorKind::NotApplied`](crate::StoreErrorKind::NotApplied) or
//!    [`StoreErrorKind::Unavailable`](crate::StoreErrorKind::Unavailable)
//!    only when no attempt of the request can have been applied (see
//!    `errors.rs`).

mod connect;
mod errors;
mod fenced;
mod keyspace;
mod ops;
mod rows;
mod statements;
mod store;
mod tls;

pub use keyspace::SchemaStep;
pub use store::CqlStore;

#[cfg(test)]
#[path = "cql_tests.rs"]
mod tests;
