//! The metric the lease records itself: renewal failures, which only the
//! lease's renewal task sees (it retries them). The waiting line records
//! the holder's remaining TTL (`lockshift_queue_lock::metrics`); everything
//! else (waits, holds, losses, store operations, mode and stage) is
//! recorded by the node runtime in the `lockshift` crate, which lists every
//! name.

use crate::id::OwnerId;

/// Counter, labels `node` and `algorithm`: renewals of a lease's cells
/// that failed in the store (and were retried); a lease is lost only once
/// they keep failing past `lock.lost_after_fraction × lock.lease_ttl`.
pub const RENEWAL_FAILURES: &str = "lockshift_lease_renewal_failures_total";

/// Counts one failed renewal of a cell of `owner`'s lease, under
/// [`RENEWAL_FAILURES`]; `algorithm` is the lease's
/// ([`Algorithm::as_str`](crate::Algorithm::as_str)).
pub(crate) fn renewal_failed(owner: &OwnerId, algorithm: &'static str) {
    metrics::counter!(
        RENEWAL_FAILURES,
        "node" => owner.node().unwrap_or("unknown").to_string(),
        "algorithm" => algorithm
    )
    .increment(1);
}
