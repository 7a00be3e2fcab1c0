//! Errors of the rollout.
//!
//! Every message shows its cause (`…: {0}`), so `to_string()` says it all;
//! the cause is a field to match on and not also returned by
//! [`std::error::Error::source`], which would make a chain printer
//! (anyhow's `{:#}`) print it twice — the rule of every error type in the
//! workspace (`lockshift_lock`'s error module says more).

use lockshift_lock::AcquireError;
use lockshift_store::StoreError;

use lockshift_decide::algorithm::Stage;

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
    Store(StoreError),
    /// The guards' evidence could not be gathered.
    #[error("rollout evidence unavailable: {0}")]
    Evidence(EvidenceError),
    /// The rollout lock could not be taken.
    #[error("could not take the rollout lock: {0}")]
    Lock(AcquireError),
    /// An internal inconsistency (a bug).
    #[error("internal error: {0}")]
    Internal(String),
}

// The causes convert with `?`; by hand, since thiserror's `#[from]` would
// also chain them (see the module docs).
impl From<StoreError> for RolloutError {
    fn from(e: StoreError) -> Self {
        RolloutError::Store(e)
    }
}

impl From<EvidenceError> for RolloutError {
    fn from(e: EvidenceError) -> Self {
        RolloutError::Evidence(e)
    }
}

impl From<AcquireError> for RolloutError {
    fn from(e: AcquireError) -> Self {
        RolloutError::Lock(e)
    }
}

/// The evidence the rollout guards look at could not be gathered.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {error}")]
pub struct EvidenceError {
    /// What was being read, e.g. "reading the node registry".
    pub step: &'static str,
    /// The store error (shown in the message, not chained).
    pub error: StoreError,
}

#[cfg(test)]
mod tests {
    use lockshift_store::{OpKind, StoreErrorKind, schema};

    use super::*;

    /// The error and its causes, `: `-separated — what anyhow's `{:#}`
    /// and every other chain printer show.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut out = e.to_string();
        let mut next = e.source();
        while let Some(cause) = next {
            out.push_str(": ");
            out.push_str(&cause.to_string());
            next = cause.source();
        }
        out
    }

    /// A nested rollout error says the store's refusal once, printed as a
    /// chain or as a message: `to_string()` shows every cause, and no
    /// cause is chained as well (a census refused on too many tombstones
    /// was printed twice, then three times).
    #[test]
    fn a_nested_error_says_its_cause_once() {
        let store = StoreError::new(
            StoreErrorKind::TooManyTombstones,
            OpKind::Scan,
            Some(schema::MAIN),
            "Operation failed - received 0 responses and 1 failures: READ_TOO_MANY_TOMBSTONES",
        );
        let cause = store.to_string();
        let evidence = EvidenceError {
            step: "taking a census of lock cells",
            error: store.clone(),
        };
        let errors: [(&dyn std::error::Error, &str); 3] = [
            (&evidence, "taking a census of lock cells: "),
            (
                &RolloutError::from(EvidenceError {
                    step: "taking a census of lock cells",
                    error: store.clone(),
                }),
                "rollout evidence unavailable: taking a census of lock cells: ",
            ),
            (
                &RolloutError::from(store.clone()),
                "rollout state unavailable: ",
            ),
        ];
        for (i, (e, prefix)) in errors.into_iter().enumerate() {
            assert_eq!(e.to_string(), format!("{prefix}{cause}"), "#{i}");
            let printed = chain(e);
            assert_eq!(printed.matches(&cause).count(), 1, "#{i}: {printed}");
            assert_eq!(printed, e.to_string(), "#{i}: nothing chained twice");
        }
    }
}
