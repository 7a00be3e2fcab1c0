//! Errors of starting a node.
//!
//! As everywhere in lockshift, a message shows its cause (`…: {0}`) and the
//! cause is not also returned by [`std::error::Error::source`], so a chain
//! printer (anyhow's `{:#}`) prints it once and `to_string()` has it all.

use lockshift_store::StoreError;
use lockshift_store::settings::InvalidSetting;

use crate::settings::SettingsError;

/// A node could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The settings file or environment could not be read, or a value
    /// breaks a rule (the message names the key, the rule and the file).
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// A setting is invalid for a running node.
    #[error("invalid settings: {0}")]
    Invalid(InvalidSetting),
    /// The settings name no store and none was given to the builder: a
    /// node never falls back to an in-memory store by itself. The message
    /// says what to add.
    #[error("{}", lockshift_store::settings::NO_STORE_CHOSEN)]
    NoStore,
    /// The store named by `[store]` could not be opened (unreachable
    /// cluster, missing keyspace or tables: `migrate schema` prints them).
    #[error("cannot open the store: {0}")]
    Store(StoreError),
}

// By hand: thiserror's `#[from]` would also chain the cause the message
// already shows (see the module docs).
impl From<InvalidSetting> for StartError {
    fn from(e: InvalidSetting) -> Self {
        StartError::Invalid(e)
    }
}

impl From<StoreError> for StartError {
    fn from(e: StoreError) -> Self {
        StartError::Store(e)
    }
}
