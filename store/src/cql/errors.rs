//! From the scylla driver's errors to [`StoreErrorKind`]: what a failed
//! request means for the data it touched.
//!
//! Every function here is pure, so the whole table is unit-tested by building
//! driver error values directly.
//!
//! # The question each mapping answers
//!
//! Lock code needs one fact from a failure: *can the write or delete have
//! taken effect?* The driver's errors answer it at three levels of certainty:
//!
//! - **Proven not sent** — the request never left this process:
//!   [`ExecutionError::EmptyPlan`] (no node to try),
//!   [`ExecutionError::ConnectionPoolError`] (no connection to hand it to),
//!   [`RequestAttemptError::UnableToAllocStreamId`] (the connection's writer
//!   refuses it before writing a byte — `Connection::writer` allocates the
//!   stream id first), serialisation errors (they fail while building the frame).
//! - **Sent, but refused before execution** — the coordinator answered with an
//!   error that by protocol means "not processed": `Unavailable`,
//!   `IsBootstrapping` (Cassandra checks it before reading anything),
//!   `Unprepared` (the coordinator did not know the statement), and Scylla's
//!   `RateLimitReached` when `rejected_by_coordinator` is set (Scylla documents
//!   that such writes reach no replica). `Overloaded` is here for reads only; an
//!   overloaded write may have reached some replicas (see [`classify_db`]).
//! - **Outcome unknown** — everything that can happen after the frame may have
//!   been written: timeouts on the server or the client, a broken connection,
//!   a server error, an answer we could not parse. These are
//!   [`StoreErrorKind::MaybeApplied`], for reads too (where
//!   [`StoreError::may_have_applied`](crate::StoreError::may_have_applied) is
//!   false anyway, so the kind only says "retry may help").
//!
//! A broken connection is never "proven not sent": when the connection's
//! router task fails it hands *the same* error to every request still waiting
//! for an answer, including requests that were written and flushed long
//! before, and `ChannelError` covers both "the writer task was already gone"
//! (not sent) and "the answer channel was dropped" (maybe sent).
//!
//! # Retries must not hide an earlier ambiguous attempt
//!
//! The driver retries a request on another node after some failures and then
//! reports only the *last* attempt's error. With the default policy an
//! idempotent write could fail with a broken connection (maybe applied), be
//! retried, and end with `Unavailable` — which reads as "nothing applied".
//! [`MutationRetryPolicy`] closes that hole for writes and deletes: it lets
//! the default policy decide only after attempts that provably applied
//! nothing, and stops at the first ambiguous one, so the final error describes
//! the whole request. Speculative execution would break the same reasoning,
//! so writes never get it. Reads have [`ReadRetryPolicy`] and speculative
//! execution instead: an earlier attempt of a read changes nothing (see
//! `mod.rs`, "Retries").

use scylla::errors::{
    ConnectionError, ConnectionPoolError, ConnectionSetupRequestError,
    ConnectionSetupRequestErrorKind, DbError, ExecutionError, NewSessionError, PrepareError,
    RequestAttemptError, SchemaAgreementError, UseKeyspaceError,
};
use scylla::policies::retry::{
    DefaultRetryPolicy, RequestInfo, RetryDecision, RetryPolicy, RetrySession,
};

use crate::cell::{OpKind, Table};
use crate::error::{StoreError, StoreErrorKind};

// ===== classification =====

/// What a failed execution (`execute_*`, `batch`, `query_*`) means.
pub(crate) fn classify_execution(err: &ExecutionError, op: OpKind) -> StoreErrorKind {
    match err {
        // Rejected by the driver before anything was sent; the same call
        // will be rejected again.
        ExecutionError::BadQuery(_) => StoreErrorKind::Invalid,
        // Proven not sent: no node was chosen / no connection was available.
        ExecutionError::EmptyPlan | ExecutionError::ConnectionPoolError(_) => {
            StoreErrorKind::NotApplied
        }
        // Only unprepared statements with values are prepared on the fly; the
        // statement itself never ran.
        ExecutionError::PrepareError(e) => classify_prepare(e, op),
        ExecutionError::LastAttemptError(e) => classify_attempt(e, op),
        // The client stopped waiting; the request may be executing right now.
        ExecutionError::RequestTimeout(_) => StoreErrorKind::MaybeApplied,
        ExecutionError::UseKeyspaceError(e) => classify_use_keyspace(e, op),
        // Only after a DDL statement succeeded on its coordinator: it took
        // effect there, agreement across the cluster is unknown.
        ExecutionError::SchemaAgreementError(e) => classify_schema_agreement(e),
        ExecutionError::MetadataError(_) => StoreErrorKind::MaybeApplied,
        // New variants: assume the worst for the data.
        _ => StoreErrorKind::MaybeApplied,
    }
}

/// What one failed attempt means (the driver's last attempt, or the one the
/// retry policy is asked about).
pub(crate) fn classify_attempt(err: &RequestAttemptError, op: OpKind) -> StoreErrorKind {
    match err {
        RequestAttemptError::DbError(db, message) => classify_db(db, message, op),
        // Proven not sent: `Connection::writer` fails the stream-id
        // allocation before writing the frame.
        RequestAttemptError::UnableToAllocStreamId => StoreErrorKind::NotApplied,
        // Not provable either way (see the module docs).
        RequestAttemptError::BrokenConnectionError(_) => StoreErrorKind::MaybeApplied,
        // Failed while building the frame: never sent, and will fail again.
        RequestAttemptError::SerializationError(_)
        | RequestAttemptError::CqlRequestSerialization(_) => StoreErrorKind::Invalid,
        // The server answered, but we cannot read the answer: it may have
        // been "done" as well as an error.
        RequestAttemptError::BodyExtensionsParseError(_)
        | RequestAttemptError::CqlResultParseError(_)
        | RequestAttemptError::CqlErrorParseError(_)
        | RequestAttemptError::UnexpectedResponse(_) => StoreErrorKind::MaybeApplied,
        // The statement changed under us on re-preparation (it was never
        // executed), or the server paged an unpaged request: protocol-level
        // disagreements a retry does not fix.
        RequestAttemptError::RepreparedIdChanged { .. }
        | RequestAttemptError::RepreparedIdMissingInBatch
        | RequestAttemptError::NonfinishedPagingState => StoreErrorKind::Invalid,
        _ => StoreErrorKind::MaybeApplied,
    }
}

/// What an error sent by the database means. `message` is the server's text,
/// needed to tell a missing table from other invalid requests.
pub(crate) fn classify_db(err: &DbError, message: &str, op: OpKind) -> StoreErrorKind {
    match err {
        DbError::Unavailable { .. } => StoreErrorKind::Unavailable,
        // The coordinator sent the mutation and did not hear back from
        // enough replicas: some may have applied it, and the rest may still
        // apply it (hints, repair).
        DbError::WriteTimeout { .. } | DbError::WriteFailure { .. } => {
            StoreErrorKind::MaybeApplied
        }
        // A read applies nothing; "outcome unknown, may retry" is what the
        // kind says (`may_have_applied()` is false for reads).
        DbError::ReadTimeout { .. } => StoreErrorKind::MaybeApplied,
        // Replicas failed the read. Too many tombstones is named only in
        // the message in protocol v4 (the reason codes are v5's), and
        // retrying fails the same way (crate::tombstones (f)).
        DbError::ReadFailure { .. } if is_too_many_tombstones_message(message) => {
            StoreErrorKind::TooManyTombstones
        }
        // Another replica failure: nothing applied, retry may help.
        DbError::ReadFailure { .. } => StoreErrorKind::NotApplied,
        // A bootstrapping node refuses before executing anything.
        DbError::IsBootstrapping => StoreErrorKind::NotApplied,
        // Cassandra raises OverloadedException ("too many in-flight hints")
        // from a per-replica check while dispatching a mutation, so some
        // replicas may already have it. For a lock, wrongly believing
        // "nothing changed" is the dangerous mistake: a write is MaybeApplied.
        DbError::Overloaded if op.is_mutation() => StoreErrorKind::MaybeApplied,
        DbError::Overloaded => StoreErrorKind::NotApplied,
        // Scylla: "Writes rejected on the coordinator are guaranteed not to
        // be applied on any replica"; otherwise a replica refused after the
        // coordinator may have sent the write to others.
        DbError::RateLimitReached {
            rejected_by_coordinator,
            ..
        } => {
            if *rejected_by_coordinator || !op.is_mutation() {
                StoreErrorKind::NotApplied
            } else {
                StoreErrorKind::MaybeApplied
            }
        }
        // The coordinator did not know the statement id, so it ran nothing
        // (the driver re-prepares by itself; this surfaces only if that failed).
        DbError::Unprepared { .. } => StoreErrorKind::NotApplied,
        // An exception at an unknown point of execution.
        DbError::ServerError => StoreErrorKind::MaybeApplied,
        DbError::Invalid | DbError::ConfigError if is_schema_missing_message(message) => {
            StoreErrorKind::SchemaMissing
        }
        DbError::SyntaxError
        | DbError::Invalid
        | DbError::ConfigError
        | DbError::AlreadyExists { .. }
        | DbError::FunctionFailure { .. }
        | DbError::AuthenticationError
        | DbError::Unauthorized
        | DbError::TruncateError
        // The server could not parse our frame: it executed nothing, and the
        // same bytes will fail the same way.
        | DbError::ProtocolError => StoreErrorKind::Invalid,
        // Unknown codes: assume the worst for the data.
        DbError::Other(_) => StoreErrorKind::MaybeApplied,
        _ => StoreErrorKind::MaybeApplied,
    }
}

/// Whether a `READ_FAILURE` message names Cassandra's
/// `READ_TOO_MANY_TOMBSTONES` reason: "Operation failed - received 0
/// responses and 1 failures: READ_TOO_MANY_TOMBSTONES from
/// /127.0.0.3:7000" (Cassandra 4.1.1, measured).
pub(crate) fn is_too_many_tombstones_message(message: &str) -> bool {
    message.contains(crate::tombstones::READ_TOO_MANY_TOMBSTONES)
}

/// Whether a server message says the keyspace or a table does not exist.
///
/// Cassandra and ScyllaDB both answer a statement on a missing table with
/// `Invalid` `"unconfigured table <t>"`, and on a missing keyspace with
/// `"Keyspace <ks> does not exist"` (capitalisation and quoting vary by
/// version), so the text is matched loosely.
pub(crate) fn is_schema_missing_message(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("unconfigured table")
        || (m.contains("does not exist") && (m.contains("keyspace") || m.contains("table")))
}

/// What a failed PREPARE means for the statement it was preparing: it never
/// ran, so nothing can have been applied.
pub(crate) fn classify_prepare(err: &PrepareError, op: OpKind) -> StoreErrorKind {
    match err {
        PrepareError::ConnectionPoolError(_) => StoreErrorKind::NotApplied,
        PrepareError::AllAttemptsFailed { first_attempt } => {
            match classify_attempt(first_attempt, op) {
                StoreErrorKind::MaybeApplied => StoreErrorKind::NotApplied,
                other => other,
            }
        }
        PrepareError::PreparedStatementIdsMismatch => StoreErrorKind::Invalid,
        _ => StoreErrorKind::NotApplied,
    }
}

fn classify_use_keyspace(err: &UseKeyspaceError, op: OpKind) -> StoreErrorKind {
    match err {
        UseKeyspaceError::RequestError(e) => classify_attempt(e, op),
        UseKeyspaceError::RequestTimeout(_) => StoreErrorKind::MaybeApplied,
        UseKeyspaceError::BadKeyspaceName(_) | UseKeyspaceError::KeyspaceNameMismatch { .. } => {
            StoreErrorKind::Invalid
        }
        _ => StoreErrorKind::MaybeApplied,
    }
}

pub(crate) fn classify_schema_agreement(err: &SchemaAgreementError) -> StoreErrorKind {
    match err {
        SchemaAgreementError::ConnectionPoolError(_) => StoreErrorKind::NotApplied,
        _ => StoreErrorKind::MaybeApplied,
    }
}

/// What a failure to build the session means: nearly always "no connection".
pub(crate) fn classify_new_session(err: &NewSessionError) -> StoreErrorKind {
    match err {
        // Caught by `CqlSettings::problems` first; kept for completeness.
        NewSessionError::EmptyKnownNodesList | NewSessionError::IllegalConfig(_) => {
            StoreErrorKind::Invalid
        }
        // Unresolvable hosts, refused or timed-out connections, a failed
        // first metadata fetch: the cluster could not be reached or read.
        _ => StoreErrorKind::Connection,
    }
}

/// Why a session could not be built, in the operator's words: an
/// authentication failure (missing credentials, or credentials refused) is
/// said as such, with the setting to fix; anything else keeps the driver's
/// text and [`classify_new_session`]'s kind.
pub(crate) fn describe_new_session(
    err: &NewSessionError,
    settings: &crate::settings::CqlSettings,
) -> (StoreErrorKind, String) {
    match auth_failure(err) {
        Some(AuthFailure::Missing) => (
            StoreErrorKind::Authentication,
            "authentication failed: the cluster requires a user name and password and none \
             was given (set store.cql.username and store.cql.password_file or \
             store.cql.password)"
                .to_string(),
        ),
        Some(AuthFailure::Refused(message)) => (
            StoreErrorKind::Authentication,
            format!(
                "authentication failed: the cluster refused user {} — wrong user name or \
                 password (store.cql.username, store.cql.password_file / store.cql.password): \
                 {}",
                crate::settings::echo(settings.username.as_deref().unwrap_or("")),
                crate::settings::echo(&message)
            ),
        ),
        None => (classify_new_session(err), err.to_string()),
    }
}

/// How the cluster refused this client's authentication.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AuthFailure {
    /// It asked for credentials and the driver had none.
    Missing,
    /// It refused the credentials; the server's message.
    Refused(String),
}

/// The authentication failure somewhere in `err`'s chain of causes, if any.
pub(crate) fn auth_failure(err: &(dyn std::error::Error + 'static)) -> Option<AuthFailure> {
    let mut next = Some(err);
    while let Some(e) = next {
        // `ConnectionError` is `#[error(transparent)]` over the setup error,
        // so its `source()` skips it: look inside by hand.
        let setup = e
            .downcast_ref::<ConnectionSetupRequestError>()
            .or_else(|| match e.downcast_ref::<ConnectionError>() {
                Some(ConnectionError::ConnectionSetupRequestError(setup)) => Some(setup),
                _ => None,
            });
        if let Some(setup) = setup {
            match setup.get_error() {
                ConnectionSetupRequestErrorKind::MissingAuthentication => {
                    return Some(AuthFailure::Missing);
                }
                ConnectionSetupRequestErrorKind::DbError(DbError::AuthenticationError, msg) => {
                    return Some(AuthFailure::Refused(msg.clone()));
                }
                _ => {}
            }
        }
        // The driver keeps a broken pool's last connection error in a field
        // that is not its `source()`: follow it by hand.
        if let Some(ConnectionPoolError::Broken {
            last_connection_error,
        }) = e.downcast_ref::<ConnectionPoolError>()
        {
            next = Some(last_connection_error);
            continue;
        }
        next = e.source();
    }
    None
}

/// During [`CqlStore::connect`](super::CqlStore::connect) a transient
/// failure means the store could not be set up, whatever the request was:
/// the caller's remedy is to retry the connect, not to re-read a row.
pub(crate) fn at_connect(kind: StoreErrorKind) -> StoreErrorKind {
    match kind {
        StoreErrorKind::NotApplied
        | StoreErrorKind::MaybeApplied
        | StoreErrorKind::Unavailable
        | StoreErrorKind::Connection => StoreErrorKind::Connection,
        other => other,
    }
}

/// A store error for a failed execution, keeping the driver's text.
pub(crate) fn execution_error(err: &ExecutionError, op: OpKind, table: Table) -> StoreError {
    StoreError::new(
        classify_execution(err, op),
        op,
        Some(table),
        err.to_string(),
    )
}

// ===== MutationRetryPolicy =====

/// The driver's default retry policy, except that it never retries after an
/// attempt that may have been applied (see the module docs).
///
/// Retrying such an attempt would be safe for the data — every lockshift
/// write is idempotent — but the driver would then report the retry's error,
/// which may claim "not applied" for a write that landed.
#[derive(Debug, Default)]
pub(crate) struct MutationRetryPolicy {
    inner: DefaultRetryPolicy,
}

impl RetryPolicy for MutationRetryPolicy {
    fn new_session(&self) -> Box<dyn RetrySession> {
        Box::new(MutationRetrySession {
            inner: self.inner.new_session(),
        })
    }
}

struct MutationRetrySession {
    inner: Box<dyn RetrySession>,
}

impl RetrySession for MutationRetrySession {
    fn decide_should_retry(&mut self, request_info: RequestInfo) -> RetryDecision {
        if attempt_may_have_applied(request_info.error) {
            RetryDecision::DontRetry
        } else {
            self.inner.decide_should_retry(request_info)
        }
    }

    fn reset(&mut self) {
        self.inner.reset();
    }
}

// ===== ReadRetryPolicy =====

/// How many times a read is sent again after its first attempt failed:
/// two, so a read reaches a third coordinator when one node of three is
/// cut off and a second one answers with an error.
pub(crate) const READ_RETRIES: usize = 2;

/// For reads only: an attempt that failed in a way another coordinator may
/// not (a broken connection, a timeout or refusal on that coordinator) is
/// sent to the next node of the plan, up to [`READ_RETRIES`] times.
///
/// Safe because a read changes nothing: an earlier attempt that is still
/// running somewhere can only return rows nobody waits for. Errors that
/// every node would give alike (invalid statement, missing table,
/// permission) are not retried.
#[derive(Debug, Default)]
pub(crate) struct ReadRetryPolicy;

impl RetryPolicy for ReadRetryPolicy {
    fn new_session(&self) -> Box<dyn RetrySession> {
        Box::new(ReadRetrySession { retries: 0 })
    }
}

struct ReadRetrySession {
    retries: usize,
}

impl RetrySession for ReadRetrySession {
    fn decide_should_retry(&mut self, request_info: RequestInfo) -> RetryDecision {
        if self.retries >= READ_RETRIES || !read_may_succeed_elsewhere(request_info.error) {
            return RetryDecision::DontRetry;
        }
        self.retries += 1;
        RetryDecision::RetryNextTarget(None)
    }

    fn reset(&mut self) {
        self.retries = 0;
    }
}

/// Whether a failed read attempt may succeed on another coordinator.
pub(crate) fn read_may_succeed_elsewhere(err: &RequestAttemptError) -> bool {
    match err {
        RequestAttemptError::BrokenConnectionError(_)
        | RequestAttemptError::UnableToAllocStreamId => true,
        RequestAttemptError::DbError(db, _) => matches!(
            db,
            DbError::Unavailable { .. }
                | DbError::ReadTimeout { .. }
                | DbError::ReadFailure { .. }
                | DbError::Overloaded
                | DbError::IsBootstrapping
                | DbError::ServerError
                | DbError::RateLimitReached { .. }
        ),
        _ => false,
    }
}

/// Whether a failed write or delete attempt may have taken effect: the
/// retry policy's test, factored out to be testable.
pub(crate) fn attempt_may_have_applied(err: &RequestAttemptError) -> bool {
    classify_attempt(err, OpKind::Write) == StoreErrorKind::MaybeApplied
}

#[cfg(test)]
#[path = "errors_tests.rs"]
mod tests;
