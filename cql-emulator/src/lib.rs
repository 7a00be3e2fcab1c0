//! A local CQL endpoint serving the embedded store over the CQL native protocol.
//!
//! Not implemented yet: this crate is filled by issue 3. It exports nothing,
//! so nothing can mistake it for a working implementation.
