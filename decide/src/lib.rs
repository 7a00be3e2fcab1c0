//! Every pure decision lockshift makes, in one crate that cannot do I/O.
//!
//! A lock algorithm is a loop of "read some cells, decide, write some
//! cells". This crate holds the *decide* part, and only that: it reads no
//! store, opens no socket or file, spawns nothing and logs nothing. It has
//! no clock of its own — a decision that depends on time takes `now` as an
//! argument — and no randomness of its own — a decision that needs a drawn
//! value takes the value. So every decision is a plain function of its
//! inputs: the same inputs give the same answer, in a unit test as in a
//! node, and a table of cases is the natural way to test it.
//!
//! The crates that do the I/O (the store, the lock algorithms, the
//! rollout, the node) depend on this one; it depends on no other lockshift
//! crate and on nothing beyond `std`, `serde` and `thiserror`.
//! `tests/layout` checks both rules, on its `Cargo.toml` and on every source
//! file.
//!
//! # Modules
//!
//! - [`cell`]: the vocabulary of Cassandra's cell model — [`cell::Timestamp`],
//!   [`cell::Ttl`], [`cell::Table`], [`cell::Cell`], the shapes of reads and
//!   scans ([`cell::RowQuery`], [`cell::KeyPage`]), the key limits
//!   ([`cell::check_key`]) and [`cell::InvalidArgument`].
//! - [`reconcile`]: Cassandra's per-cell reconciliation rule (which version
//!   of a cell wins), TTL deadlines and when a tombstone may be purged.
//! - [`schema`]: every table lockshift uses and its options.
//!
//! The store crate re-exports all three at the paths they had before they
//! moved here (its `Timestamp`, `schema::MAIN`, …); more decisions move
//! here step by step (issue 21), each with the tests that pin it.

pub mod cell;
pub mod reconcile;
pub mod schema;
