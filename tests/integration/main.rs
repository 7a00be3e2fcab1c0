//! Integration tests across crates, on the embedded backend and (where
//! configured) the local CQL endpoint or a real cluster.

mod store_conformance;
