//! The lock API shared by lockshift's algorithms: acquire, try-acquire, guards, leases.
//!
//! Not implemented yet: this crate is filled by issue 4. It exports nothing,
//! so nothing can mistake it for a working implementation.
