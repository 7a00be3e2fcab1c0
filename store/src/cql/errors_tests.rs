//! The driver-error → [`StoreErrorKind`] table, case by case. Each case is
//! built from the driver's own public error types, so a driver upgrade that
//! changes them breaks the build here rather than the mapping silently.

use std::time::Duration;

use scylla::errors::{
    BadQuery, BrokenConnectionErrorKind, ConnectionError, ConnectionPoolError, CqlResponseKind,
    DbError, ExecutionError, MetadataError, NewSessionError, OperationType, PrepareError,
    RequestAttemptError, SchemaAgreementError, WriteType,
};
use scylla::statement::Consistency;

use super::*;
use crate::schema;

use OpKind::{Delete, Read, Scan, Write};
use StoreErrorKind::{
    Connection, Invalid, MaybeApplied, NotApplied, SchemaMissing, TooManyTombstones, Unavailable,
};

fn db(err: DbError, message: &str) -> RequestAttemptError {
    RequestAttemptError::DbError(err, message.to_string())
}

fn last(attempt: RequestAttemptError) -> ExecutionError {
    ExecutionError::LastAttemptError(attempt)
}

fn broken() -> RequestAttemptError {
    RequestAttemptError::BrokenConnectionError(BrokenConnectionErrorKind::ChannelError.into())
}

fn unavailable() -> DbError {
    DbError::Unavailable {
        consistency: Consistency::Quorum,
        required: 2,
        alive: 1,
    }
}

fn write_timeout() -> DbError {
    DbError::WriteTimeout {
        consistency: Consistency::Quorum,
        received: 1,
        required: 2,
        write_type: WriteType::Simple,
    }
}

fn read_timeout() -> DbError {
    DbError::ReadTimeout {
        consistency: Consistency::Quorum,
        received: 1,
        required: 2,
        data_present: false,
    }
}

/// Cassandra 4.1.1's READ_FAILURE for too many tombstones, as the driver
/// decodes the v4 frame (crate::tombstones (f)).
fn read_failure() -> DbError {
    DbError::ReadFailure {
        consistency: Consistency::LocalQuorum,
        received: 0,
        required: 1,
        numfailures: 1,
        data_present: false,
    }
}

fn rate_limited(rejected_by_coordinator: bool) -> DbError {
    DbError::RateLimitReached {
        op_type: OperationType::Write,
        rejected_by_coordinator,
    }
}

/// The mapping table of issue 2 item 5, one row per driver error and
/// operation. Failures name the case index.
#[test]
fn execution_errors_map_to_store_kinds() {
    let cases: Vec<(ExecutionError, OpKind, StoreErrorKind)> = vec![
        // Unavailable: the coordinator refused before sending to replicas.
        (last(db(unavailable(), "")), Write, Unavailable),
        (last(db(unavailable(), "")), Read, Unavailable),
        // Server-side timeouts: outcome unknown.
        (last(db(write_timeout(), "")), Write, MaybeApplied),
        (last(db(write_timeout(), "")), Delete, MaybeApplied),
        (last(db(read_timeout(), "")), Read, MaybeApplied),
        (last(db(read_timeout(), "")), Scan, MaybeApplied),
        // Client-side timeout: the request may be running.
        (
            ExecutionError::RequestTimeout(Duration::from_secs(5)),
            Write,
            MaybeApplied,
        ),
        (
            ExecutionError::RequestTimeout(Duration::from_secs(5)),
            Read,
            MaybeApplied,
        ),
        // An overloaded write may have reached some replicas; a read did nothing.
        (last(db(DbError::Overloaded, "")), Write, MaybeApplied),
        (last(db(DbError::Overloaded, "")), Read, NotApplied),
        // Refused by the coordinator before execution.
        (last(db(DbError::IsBootstrapping, "")), Write, NotApplied),
        (last(db(rate_limited(true), "")), Write, NotApplied),
        (last(db(rate_limited(false), "")), Write, MaybeApplied),
        (last(db(rate_limited(false), "")), Read, NotApplied),
        // Proven never sent.
        (ExecutionError::EmptyPlan, Write, NotApplied),
        (
            ExecutionError::ConnectionPoolError(ConnectionPoolError::Initializing),
            Write,
            NotApplied,
        ),
        (
            ExecutionError::ConnectionPoolError(ConnectionPoolError::Broken {
                last_connection_error: ConnectionError::ConnectTimeout,
            }),
            Delete,
            NotApplied,
        ),
        (
            last(RequestAttemptError::UnableToAllocStreamId),
            Write,
            NotApplied,
        ),
        // A broken connection cannot prove the request unsent.
        (last(broken()), Write, MaybeApplied),
        (last(broken()), Delete, MaybeApplied),
        // Server failures and unreadable answers: outcome unknown.
        (last(db(DbError::ServerError, "")), Write, MaybeApplied),
        (
            last(db(
                DbError::WriteFailure {
                    consistency: Consistency::Quorum,
                    received: 1,
                    required: 2,
                    numfailures: 1,
                    write_type: WriteType::UnloggedBatch,
                },
                "",
            )),
            Write,
            MaybeApplied,
        ),
        (
            last(RequestAttemptError::UnexpectedResponse(
                CqlResponseKind::Ready,
            )),
            Write,
            MaybeApplied,
        ),
        (last(db(DbError::Other(0x7777), "")), Write, MaybeApplied),
        // A read failed by its replicas: nothing applied; for too many
        // tombstones (Cassandra 4.1.1's exact answer) retrying is useless.
        (last(db(read_failure(), "")), Read, NotApplied),
        (
            last(db(
                read_failure(),
                "Operation failed - received 0 responses and 1 failures: \
                 READ_TOO_MANY_TOMBSTONES from /127.0.0.3:7000",
            )),
            Read,
            TooManyTombstones,
        ),
        (
            last(db(
                read_failure(),
                "Operation failed - received 0 responses and 1 failures: \
                 READ_TOO_MANY_TOMBSTONES from /127.0.0.3:7000",
            )),
            Scan,
            TooManyTombstones,
        ),
        // Wrong requests: retrying will not help.
        (
            last(db(DbError::Invalid, "Invalid STRING constant")),
            Write,
            Invalid,
        ),
        (
            last(db(DbError::SyntaxError, "line 1:7 no viable alternative")),
            Read,
            Invalid,
        ),
        (last(db(DbError::Unauthorized, "")), Write, Invalid),
        (last(db(DbError::ProtocolError, "")), Write, Invalid),
        (
            ExecutionError::BadQuery(BadQuery::PartitionKeyExtraction),
            Write,
            Invalid,
        ),
        (
            last(RequestAttemptError::NonfinishedPagingState),
            Read,
            Invalid,
        ),
        // Missing schema, as Cassandra and ScyllaDB word it.
        (
            last(db(DbError::Invalid, "unconfigured table main")),
            Write,
            SchemaMissing,
        ),
        (
            last(db(DbError::Invalid, "Keyspace lockshift does not exist")),
            Read,
            SchemaMissing,
        ),
        (
            last(db(DbError::Invalid, "keyspace 'lockshift' does not exist")),
            Scan,
            SchemaMissing,
        ),
        // DDL aftermath (connect only).
        (
            ExecutionError::SchemaAgreementError(SchemaAgreementError::Timeout(
                Duration::from_secs(60),
            )),
            Write,
            MaybeApplied,
        ),
    ];
    for (i, (err, op, want)) in cases.iter().enumerate() {
        assert_eq!(
            classify_execution(err, *op),
            *want,
            "case #{i}: {op} failing with {err:?}"
        );
    }
}

#[test]
fn prepare_errors_never_claim_an_effect() {
    let cases = [
        (
            PrepareError::AllAttemptsFailed {
                first_attempt: db(DbError::Invalid, "unconfigured table queue"),
            },
            SchemaMissing,
        ),
        (
            PrepareError::AllAttemptsFailed {
                first_attempt: db(DbError::SyntaxError, "bad"),
            },
            Invalid,
        ),
        // A PREPARE that timed out or lost its connection changed nothing.
        (
            PrepareError::AllAttemptsFailed {
                first_attempt: broken(),
            },
            NotApplied,
        ),
        (
            PrepareError::ConnectionPoolError(ConnectionPoolError::Initializing),
            NotApplied,
        ),
        (PrepareError::PreparedStatementIdsMismatch, Invalid),
    ];
    for (i, (err, want)) in cases.iter().enumerate() {
        assert_eq!(classify_prepare(err, Write), *want, "case #{i}: {err:?}");
        let wrapped = ExecutionError::PrepareError(err.clone());
        assert_eq!(
            classify_execution(&wrapped, Write),
            *want,
            "case #{i} wrapped"
        );
    }
}

#[test]
fn session_errors_are_connection_errors_unless_the_config_is_wrong() {
    let refused = NewSessionError::MetadataError(MetadataError::ConnectionPoolError(
        ConnectionPoolError::Broken {
            last_connection_error: ConnectionError::IoError(std::sync::Arc::new(
                std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
            )),
        },
    ));
    assert_eq!(classify_new_session(&refused), Connection);
    assert_eq!(
        classify_new_session(&NewSessionError::FailedToResolveAnyHostname(vec![
            "nowhere.invalid:9042".into()
        ])),
        Connection
    );
    assert_eq!(
        classify_new_session(&NewSessionError::EmptyKnownNodesList),
        Invalid
    );
}

#[test]
fn at_connect_turns_transient_failures_into_connection_errors() {
    for (i, (kind, want)) in [
        (NotApplied, Connection),
        (MaybeApplied, Connection),
        (Unavailable, Connection),
        (Connection, Connection),
        (Invalid, Invalid),
        (SchemaMissing, SchemaMissing),
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(at_connect(kind), want, "case #{i}");
    }
}

#[test]
fn schema_missing_messages_are_recognised_loosely_but_not_too_loosely() {
    for m in [
        "unconfigured table main",
        "Unconfigured table lockshift.shadow",
        "Keyspace lockshift does not exist",
        "keyspace 'ks' does not exist",
        "Table lockshift.main does not exist",
    ] {
        assert!(is_schema_missing_message(m), "{m}");
    }
    for m in [
        "Undefined column name valu",
        "Invalid STRING constant (x) for \"ttl\" of type int",
        "user does not exist",
    ] {
        assert!(!is_schema_missing_message(m), "{m}");
    }
}

/// The retry policy stops at exactly the attempts whose outcome is unknown,
/// so a later attempt's "not applied" never hides an earlier maybe-applied one.
#[test]
fn mutation_retries_stop_at_ambiguous_attempts() {
    let stop = [
        broken(),
        db(write_timeout(), ""),
        db(DbError::ServerError, ""),
        db(rate_limited(false), ""),
        db(DbError::Overloaded, ""),
        RequestAttemptError::UnexpectedResponse(CqlResponseKind::Ready),
    ];
    for (i, e) in stop.iter().enumerate() {
        assert!(attempt_may_have_applied(e), "stop case #{i}: {e:?}");
    }
    let may_retry = [
        db(unavailable(), ""),
        db(DbError::IsBootstrapping, ""),
        RequestAttemptError::UnableToAllocStreamId,
        db(rate_limited(true), ""),
    ];
    for (i, e) in may_retry.iter().enumerate() {
        assert!(!attempt_may_have_applied(e), "retry case #{i}: {e:?}");
    }
}

#[test]
fn store_error_keeps_operation_table_and_driver_text() {
    let err = last(db(
        write_timeout(),
        "Operation timed out - received only 1 responses.",
    ));
    let e = execution_error(&err, Write, schema::MAIN);
    assert_eq!(e.kind(), MaybeApplied);
    assert_eq!(e.op(), Write);
    assert_eq!(e.table(), Some(schema::MAIN));
    assert!(e.may_have_applied());
    assert!(
        e.message()
            .contains("Operation timed out - received only 1 responses."),
        "{e}"
    );
    assert!(e.message().contains("write_type: Simple"), "{e}");
    assert!(
        e.to_string()
            .starts_with("write on table main timed out and may have been applied: "),
        "{e}"
    );
}
