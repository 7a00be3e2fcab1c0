//! The metric the waiting line records itself: the holder's remaining TTL,
//! which only a waiter's own reads of `main` see. The `lockshift` crate
//! lists it with every other name.

use lockshift_lock::OwnerId;

/// Histogram, label `node` (the waiter's): the TTL a holder's `main` cell
/// had left when a waiter's read of `main` showed it in the way — how long
/// the lock would stay taken should its holder stop renewing.
pub const HOLDER_TTL_SECONDS: &str = "lockshift_waiter_holder_ttl_seconds";

/// Records the `ttl` a waiter of `owner` saw left on the holder's cell,
/// under [`HOLDER_TTL_SECONDS`].
pub(crate) fn holder_ttl_seen(owner: &OwnerId, ttl: std::time::Duration) {
    metrics::histogram!(
        HOLDER_TTL_SECONDS,
        "node" => owner.node().unwrap_or("unknown").to_string()
    )
    .record(ttl.as_secs_f64());
}
