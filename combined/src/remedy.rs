//! What to do about a refusal: one text per way a guard (or a transition)
//! can fail. The texts are pure data and live in `lockshift_decide::remedy`;
//! this module re-exports them at their old paths.

/// The remedies and the runbook table built from them, moved to
/// `lockshift_decide::remedy`, re-exported at their old paths.
pub use lockshift_decide::remedy::{Remedy, UNREADABLE_ACTION, refusal_table};
