//! The metrics the lock crates record themselves: renewal failures, which
//! only the lease's renewal task sees (it retries them), and the holder's
//! remaining TTL, which only a waiter's own reads of `main` see. Everything
//! else (waits, holds, losses, store operations, mode and stage) is
//! recorded by the node runtime in the `lockshift` crate, which lists every
//! name.

use crate::id::OwnerId;

/// Counter, labels `node` and `algorithm`: renewals of a lease's cells
/// that failed in the store (and were retried); a lease is lost only once
/// they keep failing past `lock.lost_after_fraction × lock.lease_ttl`.
pub const RENEWAL_FAILURES: &str = "lockshift_lease_renewal_failures_total";

/// Histogram, label `node` (the waiter's): the TTL a holder's `main` cell
/// had left when a waiter's read of `main` showed it in the way — how long
/// the lock would stay taken should its holder stop renewing.
pub const HOLDER_TTL_SECONDS: &str = "lockshift_waiter_holder_ttl_seconds";

/// Records the `ttl` a waiter of `owner` saw left on the holder's cell,
/// under [`HOLDER_TTL_SECONDS`].
pub fn holder_ttl_seen(owner: &OwnerId, ttl: std::time::Duration) {
    metrics::histogram!(
        HOLDER_TTL_SECONDS,
        "node" => owner.node().unwrap_or("unknown").to_string()
    )
    .record(ttl.as_secs_f64());
}

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
