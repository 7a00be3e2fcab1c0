//! The combined locker, rollout stages, node registry and settings.
//!
//! Not implemented yet: this crate is filled by issue 5. It exports nothing,
//! so nothing can mistake it for a working implementation.
