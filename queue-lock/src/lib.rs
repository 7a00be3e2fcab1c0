//! The fair queue lock (thesis listings 6-9): leases, time service, fencing tokens.
//!
//! Not implemented yet: this crate is filled by issue 4. It exports nothing,
//! so nothing can mistake it for a working implementation.
