//! The algorithm a node runs for new acquisitions, as configured.

/// `node.mode`, moved to `lockshift_decide::algorithm`, re-exported at its
/// old path.
pub use lockshift_decide::algorithm::Mode;
