//! Rollout stages (docs/design.md §4) and how a node's configured mode resolves
//! against the current stage.
//!
//! The stages and the resolution are pure and live in
//! `lockshift_decide::algorithm`; this module re-exports them at their old
//! paths.

/// The rollout stage, and how a configured mode resolves against it:
/// moved to `lockshift_decide::algorithm`, re-exported at their old paths.
pub use lockshift_decide::algorithm::{Resolution, Stage, resolve};
