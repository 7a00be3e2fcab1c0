//! The combined locker, the rollout state machine, the node registry and
//! lockshift's settings.
//!
//! The locker and the stages are filled by issue 5; for now this crate
//! provides the settings every lockshift process loads ([`Settings`]) and
//! the configured [`Mode`].

pub mod config;
mod mode;

pub use config::{Settings, SettingsError};
pub use mode::Mode;
