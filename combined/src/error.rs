//! Errors of the rollout.

use lockshift_lock::AcquireError;
use lockshift_store::StoreError;

use crate::stage::Stage;

/// A rollout transition could not be evaluated or made. A refusal by the
/// guards is not an error (see [`crate::rollout::TransitionReport`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RolloutError {
    /// The edge is not one step forward or back.
    #[error("cannot move from stage {from} to {to}: {why}")]
    InvalidTransition {
        /// The current stage.
        from: Stage,
        /// The stage asked for.
        to: Stage,
        /// Why not.
        why: String,
    },
    /// Reading or writing the rollout state failed.
    #[error("rollout state unavailable: {0}")]
    Store(#[from] StoreError),
    /// The guards' evidence could not be gathered.
    #[error("rollout evidence unavailable: {0}")]
    Evidence(#[from] EvidenceError),
    /// The rollout lock could not be taken.
    #[error("could not take the rollout lock: {0}")]
    Lock(#[from] AcquireError),
    /// An internal inconsistency (a bug).
    #[error("internal error: {0}")]
    Internal(String),
}

/// The evidence the rollout guards look at could not be gathered.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {source}")]
pub struct EvidenceError {
    /// What was being read, e.g. "reading the node registry".
    pub step: &'static str,
    /// The store error.
    #[source]
    pub source: StoreError,
}
