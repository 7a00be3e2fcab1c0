//! Store errors, classified by what they mean for the caller's lock state.

use std::fmt;
use std::num::NonZeroU32;
use std::time::Duration;

use crate::cell::{InvalidArgument, OpKind, Table};

/// What a failed store operation means for the data it touched.
///
/// Lock code must react differently to each: after [`NotApplied`] or
/// [`Unavailable`] nothing changed and the step can simply be retried; after
/// [`MaybeApplied`] the cell may or may not be there, so the caller must either
/// re-read or clean up as if it were (a lock that wrote its main cell and timed
/// out may be the holder).
///
/// [`NotApplied`]: StoreErrorKind::NotApplied
/// [`Unavailable`]: StoreErrorKind::Unavailable
/// [`MaybeApplied`]: StoreErrorKind::MaybeApplied
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The operation certainly did not take effect: rejected before it was
    /// applied (no node reachable, connection failed before sending, a
    /// bootstrapping coordinator).
    NotApplied,
    /// The operation timed out after it was sent: it may or may not have been
    /// applied, now or later.
    MaybeApplied,
    /// Too few replicas were alive to reach the consistency level; nothing was
    /// applied.
    Unavailable,
    /// The request itself is wrong (bad argument, schema mismatch); retrying
    /// will not help.
    Invalid,
    /// The keyspace or a table is missing.
    SchemaMissing,
    /// No connection to the database could be established.
    Connection,
    /// The cluster refused this client: wrong or missing credentials, or a
    /// TLS handshake that failed (an untrusted certificate, a client
    /// certificate required, TLS required or not spoken). Retrying with the
    /// same settings will not help.
    Authentication,
    /// A read passed more tombstones than the failure threshold and was
    /// aborted (Cassandra's `READ_FAILURE` with `READ_TOO_MANY_TOMBSTONES`;
    /// [`crate::tombstones`]). Nothing changed, but retrying fails the same
    /// way until the tombstones are older than the table's gc grace: not
    /// retryable.
    TooManyTombstones,
    /// The request belongs to a lock (or to the fleet's rollout rows) whose
    /// home datacenter this client cannot reach, or whose home it could not
    /// confirm lately (docs/design.md §4a): nothing was sent. Retrying from
    /// here does not help while the link is down — the home's own side
    /// keeps serving it; the message names the home and what failed.
    HomeUnreachable,
    /// The request belongs to a lock (or to the fleet's rows) whose home is
    /// moving to another datacenter, which does not serve yet
    /// (docs/design.md §4a, H3): nothing was sent. Retrying succeeds once
    /// the new home serves, at the time the refusal names
    /// ([`StoreError::retry_after`]) — not sooner.
    HomeMoving,
}

impl StoreErrorKind {
    /// What the failure means, in words, for an operation `op`: a read that
    /// timed out changed nothing, whatever a write's timeout means.
    fn describe(self, op: OpKind) -> &'static str {
        match self {
            StoreErrorKind::MaybeApplied if !op.is_mutation() => "timed out",
            StoreErrorKind::NotApplied => "was not applied",
            StoreErrorKind::MaybeApplied => "timed out and may have been applied",
            StoreErrorKind::Unavailable => "failed: not enough replicas available",
            StoreErrorKind::Invalid => "was rejected as invalid",
            StoreErrorKind::SchemaMissing => "failed: schema missing",
            StoreErrorKind::Connection => "failed: no connection",
            StoreErrorKind::Authentication => "failed: refused by the cluster",
            StoreErrorKind::TooManyTombstones => "failed: too many tombstones",
            StoreErrorKind::HomeUnreachable => "was not sent",
            // The message says where the home moves and when it serves.
            StoreErrorKind::HomeMoving => "was not sent",
        }
    }
}

/// A failed store operation: which operation, on which table, and what it
/// means (its [`StoreErrorKind`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{op}{on} {}: {message}", kind.describe(*op), on = TableSuffix(*table))]
pub struct StoreError {
    kind: StoreErrorKind,
    op: OpKind,
    table: Option<Table>,
    message: String,
    /// For a refusal whose end is known: how long until trying again can
    /// succeed, in ms (at least 1; at most about 49 days). Four bytes, so
    /// the error stays as small as it was: every lock error carries one.
    retry_after_ms: Option<NonZeroU32>,
}

struct TableSuffix(Option<Table>);

impl fmt::Display for TableSuffix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(t) => write!(f, " on table {t}"),
            None => Ok(()),
        }
    }
}

impl StoreError {
    /// An error of `kind` for `op` on `table`.
    pub fn new(
        kind: StoreErrorKind,
        op: OpKind,
        table: Option<Table>,
        message: impl Into<String>,
    ) -> Self {
        StoreError {
            kind,
            op,
            table,
            message: message.into(),
            retry_after_ms: None,
        }
    }

    /// This error, saying that trying again can succeed in `after` and not
    /// sooner (a home that serves then: [`StoreErrorKind::HomeMoving`]).
    /// (To the millisecond, rounded up: at least 1 ms, at most about 49
    /// days.)
    pub fn with_retry_after(mut self, after: Duration) -> Self {
        let ms = after.as_nanos().div_ceil(1_000_000);
        self.retry_after_ms = NonZeroU32::new(u32::try_from(ms).unwrap_or(u32::MAX).max(1));
        self
    }

    /// How long until trying again can succeed, when the refusal knows it
    /// (a moving home: when the new one serves); `None` when it does not.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after_ms
            .map(|ms| Duration::from_millis(u64::from(ms.get())))
    }

    /// Whether the request may have left this process: `false` only for a
    /// request a homes router refused without sending it
    /// ([`StoreErrorKind::HomeUnreachable`], [`StoreErrorKind::HomeMoving`]),
    /// which is known to have left nothing in the store — no cell to
    /// clean up after it, nothing that may land later.
    pub fn was_sent(&self) -> bool {
        !matches!(
            self.kind,
            StoreErrorKind::HomeUnreachable | StoreErrorKind::HomeMoving
        )
    }

    /// What the error means for the data.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    /// The operation that failed.
    pub fn op(&self) -> OpKind {
        self.op
    }

    /// The table it touched, if one.
    pub fn table(&self) -> Option<Table> {
        self.table
    }

    /// A read of `row` aborted after passing `tombstones` tombstones, more
    /// than the failure threshold `threshold` (the embedded store's
    /// [`StoreErrorKind::TooManyTombstones`]); the message names the row
    /// (shortened), the count and the threshold.
    pub fn too_many_tombstones(
        op: OpKind,
        table: Table,
        row: &str,
        tombstones: u64,
        threshold: u64,
    ) -> Self {
        let what = match op {
            OpKind::Scan => "the key scan page".to_string(),
            _ => format!("the read of row {:?}", crate::tombstones::shorten(row)),
        };
        StoreError::new(
            StoreErrorKind::TooManyTombstones,
            op,
            Some(table),
            format!(
                "{what} passed {tombstones} tombstones, more than the failure threshold \
                 {threshold} (Cassandra's tombstone_failure_threshold): aborted"
            ),
        )
    }

    /// A request the store rejected before touching data because one of its
    /// arguments is one the cell model cannot represent ([`InvalidArgument`]):
    /// kind [`StoreErrorKind::Invalid`], for `op` on `table`, whose message is
    /// the argument error's.
    pub(crate) fn invalid_argument(err: InvalidArgument, op: OpKind, table: Table) -> Self {
        StoreError::new(StoreErrorKind::Invalid, op, Some(table), err.message())
    }

    /// The backend's description of the failure.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the write or delete may have taken effect despite the error.
    pub fn may_have_applied(&self) -> bool {
        self.kind == StoreErrorKind::MaybeApplied && self.op.is_mutation()
    }

    /// Whether retrying the same operation can succeed (transient failures).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.kind,
            StoreErrorKind::NotApplied
                | StoreErrorKind::MaybeApplied
                | StoreErrorKind::Unavailable
                | StoreErrorKind::Connection
                | StoreErrorKind::HomeMoving
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema;

    #[test]
    fn message_names_operation_table_and_meaning() {
        let e = StoreError::new(
            StoreErrorKind::MaybeApplied,
            OpKind::Write,
            Some(schema::MAIN),
            "coordinator timeout (2 of 3 acks)",
        );
        assert_eq!(
            e.to_string(),
            "write on table main timed out and may have been applied: coordinator timeout (2 of 3 acks)"
        );
        assert!(e.may_have_applied());
        assert!(e.is_retryable());
        let read_timeout = StoreError::new(StoreErrorKind::MaybeApplied, OpKind::Read, None, "x");
        assert!(!read_timeout.may_have_applied(), "a read changes nothing");
        let on_rollout = StoreError::new(
            StoreErrorKind::MaybeApplied,
            OpKind::Read,
            Some(schema::ROLLOUT),
            "x",
        );
        assert_eq!(
            on_rollout.to_string(),
            "read on table rollout timed out: x",
            "a read never 'may have been applied'"
        );
        let invalid = StoreError::new(StoreErrorKind::Invalid, OpKind::Read, None, "bad");
        assert!(!invalid.is_retryable());
        assert_eq!(invalid.to_string(), "read was rejected as invalid: bad");
    }

    /// Issue 42 item 5: a refusal of a moving home says that nothing was
    /// sent and when to try again, not that replicas were missing.
    #[test]
    fn a_refusal_says_nothing_was_sent_and_when_to_try_again() {
        let cases = [
            // (kind, retryable, sent, describes)
            (StoreErrorKind::HomeMoving, true, false, "was not sent"),
            (
                StoreErrorKind::HomeUnreachable,
                false,
                false,
                "was not sent",
            ),
            (
                StoreErrorKind::Unavailable,
                true,
                true,
                "not enough replicas",
            ),
            (StoreErrorKind::NotApplied, true, true, "was not applied"),
            (
                StoreErrorKind::MaybeApplied,
                true,
                true,
                "may have been applied",
            ),
        ];
        for (i, (kind, retryable, sent, says)) in cases.into_iter().enumerate() {
            let e = StoreError::new(kind, OpKind::Write, Some(schema::MAIN), "why");
            assert_eq!(e.is_retryable(), retryable, "case #{i}");
            assert_eq!(e.was_sent(), sent, "case #{i}");
            assert!(e.to_string().contains(says), "case #{i}: {e}");
            assert_eq!(e.retry_after(), None, "case #{i}");
        }
        let moving = StoreError::new(StoreErrorKind::HomeMoving, OpKind::Read, None, "x")
            .with_retry_after(Duration::from_secs(57));
        assert_eq!(moving.retry_after(), Some(Duration::from_secs(57)));
        // To the millisecond, rounded up; never zero.
        let soon = |after| {
            StoreError::new(StoreErrorKind::HomeMoving, OpKind::Read, None, "x")
                .with_retry_after(after)
                .retry_after()
        };
        assert_eq!(soon(Duration::ZERO), Some(Duration::from_millis(1)));
        assert_eq!(
            soon(Duration::from_micros(1_500)),
            Some(Duration::from_millis(2))
        );
        // No bigger than it was: every lock error carries one.
        assert!(std::mem::size_of::<StoreError>() <= 48);
        assert_eq!(moving.to_string(), "read was not sent: x");
    }

    #[test]
    fn too_many_tombstones_names_table_row_and_count_and_is_final() {
        let e = StoreError::too_many_tombstones(
            OpKind::Read,
            schema::QUEUE,
            "lock-1",
            100_001,
            100_000,
        );
        assert_eq!(e.kind(), StoreErrorKind::TooManyTombstones);
        assert_eq!(
            e.to_string(),
            "read on table queue failed: too many tombstones: the read of row \"lock-1\" passed \
             100001 tombstones, more than the failure threshold 100000 (Cassandra's \
             tombstone_failure_threshold): aborted"
        );
        assert!(!e.is_retryable());
        assert!(!e.may_have_applied());
    }
}
