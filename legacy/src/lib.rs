//! The legacy main/shadow-table lock (thesis listings 4-5).
//!
//! Not implemented yet: this crate is filled by issue 4. It exports nothing,
//! so nothing can mistake it for a working implementation.
