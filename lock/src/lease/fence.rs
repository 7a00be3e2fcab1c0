//! The fencing token: taken under the lease, while it is proven.

use std::time::Duration;

use lockshift_store::{CellWrite, RowQuery, StoreError, Timestamp, WriteOptions, schema};
use tokio::time::Instant;
use tracing::debug;

use super::Lease;
use crate::error::LeaseLostReason;
use lockshift_decide::cells::FENCE_COLUMN;

impl Lease {
    /// Takes the next fencing token of the lock: reads the lock's fencing
    /// cell, advances it to `max(last + 1, now in µs)` — as the value and as
    /// the write timestamp, so the cell never moves back — and checks the
    /// lease is still proven once the write is acknowledged. Two round
    /// trips. The caller must hold the lock (the argument in
    /// [`crate::LockGuard::fencing_token`] rests on it).
    ///
    /// A store failure that may pass ([`lockshift_store::StoreError::is_retryable`]) is
    /// retried, with pauses doubling from [`FENCE_RETRY_FIRST`] up to a
    /// quarter of the renew period, for as long as the lease is proven and
    /// at most one lease TTL: a token is worth having only while the lock
    /// is held, so the lease, not a count, bounds the retries — and the TTL
    /// bounds them too when only the fencing cell's partition is out of
    /// reach while renewals still succeed.
    ///
    /// # Why repeating the fence write is safe
    ///
    /// A write that failed as `MaybeApplied` may land now or later, and is
    /// never blindly repeated elsewhere in lockshift. This one may be: the
    /// fencing cell's value *is* its write timestamp, and every write
    /// carries `max(last + 1, now)`, so a write that lands — once, twice,
    /// late — can only move the cell to a larger timestamp (last write
    /// wins), never below a token already handed out. The retry reads the
    /// cell again, so its own token is above whatever landed before that
    /// read; a lost attempt that lands after the retry's read merely raises
    /// the cell above a token nobody was given, which the next holder reads
    /// and exceeds. The guarantee the token rests on — the cell is at least
    /// every token handed out, before the next holder can read it — holds
    /// whatever subset of the attempts applied.
    ///
    /// # Errors
    /// A store error that retrying cannot fix, or the reason the lease was
    /// lost (also when it was lost while retrying).
    pub(crate) async fn next_fencing_token(&self) -> Result<u64, FenceFailure> {
        let cap = (self.shared.settings.renew_every / 4).max(FENCE_RETRY_FIRST);
        let give_up_at = Instant::now() + self.shared.settings.lease_ttl;
        let mut pause = FENCE_RETRY_FIRST;
        loop {
            match self.try_fencing_token().await {
                Err(FenceFailure::Store(e)) if e.is_retryable() && Instant::now() < give_up_at => {
                    self.check_valid().map_err(FenceFailure::Lost)?;
                    debug!(lock = %self.shared.lock, error = %e, ?pause, "fencing token: store failure, retrying within the lease");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(cap);
                    self.check_valid().map_err(FenceFailure::Lost)?;
                }
                other => return other,
            }
        }
    }

    /// One attempt of [`next_fencing_token`](Self::next_fencing_token):
    /// read, advance, check the lease.
    async fn try_fencing_token(&self) -> Result<u64, FenceFailure> {
        let row = self.shared.lock.as_str();
        let cells = self
            .shared
            .store
            .read(
                schema::GLOBAL_TIME,
                row,
                &RowQuery::first(1).starting_at(FENCE_COLUMN),
            )
            .await
            .map_err(FenceFailure::Store)?;
        let last = cells
            .iter()
            .find(|c| c.column == FENCE_COLUMN)
            .map_or(0, |c| c.writetime.as_micros());
        let token = last
            .saturating_add(1)
            .max(self.shared.clock.now().as_micros())
            .max(1);
        self.shared
            .store
            .write(
                schema::GLOBAL_TIME,
                row,
                &[CellWrite::new(FENCE_COLUMN, token.to_string().into_bytes())],
                WriteOptions::at(Timestamp::from_micros(token)),
            )
            .await
            .map_err(FenceFailure::Store)?;
        self.check_valid().map_err(FenceFailure::Lost)?;
        // `token` ≥ 1 by construction, so the conversion cannot fail.
        Ok(u64::try_from(token).unwrap_or(1))
    }
}

/// The first pause before a fencing-token attempt is repeated.
const FENCE_RETRY_FIRST: Duration = Duration::from_millis(20);

/// Why [`Lease::next_fencing_token`] gave no token.
#[derive(Debug)]
pub(crate) enum FenceFailure {
    Store(StoreError),
    Lost(LeaseLostReason),
}
