//! The `[store.embedded]` section.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::tombstones::{DEFAULT_FAILURE_THRESHOLD, DEFAULT_WARN_THRESHOLD, TombstoneThresholds};

/// The `[store.embedded]` section.
///
/// ```toml
/// [store.embedded]
/// gc_grace = "1h"                        # default: each table's own (crate::schema; 10 days)
/// tombstone_warn_threshold = 1000        # Cassandra's defaults
/// tombstone_failure_threshold = 100000
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbeddedSettings {
    /// How long dead cells shadow late, older writes — and cost every read
    /// that passes them — before being forgotten, for every table; unset,
    /// each table keeps its own `gc_grace_seconds`
    /// ([`crate::schema::options`]), as a cluster created from
    /// `migrate schema` would.
    /// Default: none (each table's own).
    #[serde(with = "humantime_serde::option")]
    pub gc_grace: Option<Duration>,
    /// Above this many tombstones a read's answer carries a warning
    /// (Cassandra's `tombstone_warn_threshold`).
    /// Default: `1000`.
    pub tombstone_warn_threshold: u64,
    /// Above this many tombstones a read fails (Cassandra's
    /// `tombstone_failure_threshold`).
    /// Default: `100000`.
    pub tombstone_failure_threshold: u64,
}

impl Default for EmbeddedSettings {
    fn default() -> Self {
        EmbeddedSettings {
            gc_grace: None,
            tombstone_warn_threshold: DEFAULT_WARN_THRESHOLD,
            tombstone_failure_threshold: DEFAULT_FAILURE_THRESHOLD,
        }
    }
}

impl EmbeddedSettings {
    /// A fresh embedded store with these settings, on the system clock.
    pub fn store(&self) -> crate::MemoryStore {
        let store = crate::MemoryStore::new().with_tombstone_thresholds(TombstoneThresholds {
            warn: self.tombstone_warn_threshold,
            fail: self.tombstone_failure_threshold,
        });
        match self.gc_grace {
            Some(grace) => store.with_gc_grace(grace),
            None => store,
        }
    }
}
