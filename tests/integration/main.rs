//! Integration tests across crates, on the embedded backend and (where
//! configured) the local CQL endpoint or a real cluster.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used)]

mod cql_faults;
mod cut_off_node;
mod locks_over_cql;
mod repository;
mod secure_cluster;
mod sharing_over_cql;
mod store_conformance;
