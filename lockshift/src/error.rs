//! Errors of starting a node.

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
    Invalid(#[from] InvalidSetting),
    /// The settings name no store and none was given to the builder: a
    /// node never falls back to an in-memory store by itself. The message
    /// says what to add.
    #[error("{}", lockshift_store::settings::NO_STORE_CHOSEN)]
    NoStore,
    /// The store named by `[store]` could not be opened (unreachable
    /// cluster, missing keyspace or tables: `migrate schema` prints them).
    #[error("cannot open the store: {0}")]
    Store(#[from] StoreError),
}
