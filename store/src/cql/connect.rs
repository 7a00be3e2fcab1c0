//! Opening the session and making sure the schema is there: the slow,
//! once-per-process part of [`CqlStore::connect`](super::CqlStore::connect).

use std::time::Duration;

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::errors::ExecutionError;
use scylla::statement::Consistency as DriverConsistency;

use super::errors::{self, at_connect, classify_execution, classify_new_session};
use super::rows::decode_rows;
use super::statements;
use crate::cell::{OpKind, Table};
use crate::error::{StoreError, StoreErrorKind};
use crate::schema;
use crate::settings::CqlSettings;

/// The operation named in errors raised while connecting.
///
/// [`OpKind`] has no "connect"; connecting reads the cluster's metadata (and
/// the schema check reads `system_schema`), so `Read` is the least misleading
/// of the four. DDL and PREPARE failures name the statement's own operation
/// and table instead.
pub(super) const CONNECT_OP: OpKind = OpKind::Read;

/// How to fix a missing schema, quoted in [`StoreErrorKind::SchemaMissing`] errors.
const SCHEMA_HINT: &str =
    "set store.cql.create_schema = true, or run the statements printed by `CqlStore::schema_cql`";

/// Builds the driver session within [`session_deadline`].
pub(super) async fn open_session(settings: &CqlSettings) -> Result<Session, StoreError> {
    let error = |kind, why: String| {
        StoreError::new(
            kind,
            CONNECT_OP,
            None,
            format!(
                "connecting to {} (connect timeout {:?}): {why}",
                settings.contact_points.join(", "),
                settings.connect_timeout
            ),
        )
    };
    // Driver defaults apart from the contact points and connect timeout; in
    // particular schema metadata stays on (the local endpoint supports it).
    let builder = SessionBuilder::new()
        .known_nodes(&settings.contact_points)
        .connection_timeout(settings.connect_timeout);
    let deadline = session_deadline(settings);
    match tokio::time::timeout(deadline, builder.build()).await {
        Ok(Ok(session)) => Ok(session),
        Ok(Err(e)) => Err(error(classify_new_session(&e), e.to_string())),
        Err(_) => Err(error(
            StoreErrorKind::Connection,
            format!(
                "no usable session within {deadline:?} (the handshake or the first \
                 metadata read did not finish)"
            ),
        )),
    }
}

/// How long building the session may take in all.
///
/// The driver's connect timeout covers only the TCP connect, and it sets no
/// limit on the CQL handshake that follows: against a listener that accepts
/// and never answers (a hung process, a proxy in front of nothing) `build()`
/// was still waiting after 30 s in our test, with no end in sight. The driver
/// tries contact points one after another, so each gets `connect_timeout`,
/// and the handshake plus the first metadata read get one more.
pub(super) fn session_deadline(settings: &CqlSettings) -> Duration {
    let tries = u32::try_from(settings.contact_points.len())
        .unwrap_or(u32::MAX)
        .saturating_add(1);
    settings.connect_timeout.saturating_mul(tries)
}

/// Runs the DDL in order. Keyspace first, tables one at a time: concurrent
/// DDL is a classic source of schema disagreement in Cassandra.
pub(super) async fn create_schema(
    session: &Session,
    settings: &CqlSettings,
) -> Result<(), StoreError> {
    let tables = std::iter::once(None).chain(schema::ALL.iter().copied().map(Some));
    for (text, table) in statements::schema_cql(settings).into_iter().zip(tables) {
        // The driver waits for schema agreement after each schema change.
        session
            .query_unpaged(text.as_str(), ())
            .await
            .map_err(|e| connect_error(&e, OpKind::Write, table, &text))?;
    }
    // And once more here, explicitly: the tables must exist on every node
    // before the first PREPARE or write reaches it.
    session.await_schema_agreement().await.map_err(|e| {
        StoreError::new(
            at_connect(errors::classify_schema_agreement(&e)),
            OpKind::Write,
            None,
            format!("waiting for schema agreement after creating the schema: {e}"),
        )
    })?;
    Ok(())
}

/// Checks that the keyspace and every table exist.
pub(super) async fn check_schema(
    session: &Session,
    settings: &CqlSettings,
) -> Result<(), StoreError> {
    let ks = settings.keyspace.as_str();
    let text = statements::LIST_TABLES;
    let mut list = statements::prepare_within(session, text, settings.request_timeout)
        .await
        .map_err(|(kind, why)| StoreError::new(kind, CONNECT_OP, None, why))?;
    // system_schema is node-local (LocalStrategy): ONE is all there is to ask
    // for; agreement between nodes is the driver's schema-agreement business.
    list.set_consistency(DriverConsistency::One);
    list.set_request_timeout(Some(settings.request_timeout));
    list.set_is_idempotent(true);
    let result = session
        .execute_unpaged(&list, (ks,))
        .await
        .map_err(|e| connect_error(&e, CONNECT_OP, None, text))?;
    let found = decode_rows::<(String,)>(result, CONNECT_OP, None)?;
    let missing: Vec<Table> = schema::ALL
        .iter()
        .copied()
        .filter(|t| !found.iter().any(|(name,)| name == t.name()))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let keyspace_known =
        !found.is_empty() || session.get_cluster_state().get_keyspace(ks).is_some();
    Err(StoreError::new(
        StoreErrorKind::SchemaMissing,
        CONNECT_OP,
        None,
        missing_schema_message(ks, keyspace_known, &missing),
    ))
}

pub(super) fn missing_schema_message(
    keyspace: &str,
    keyspace_known: bool,
    missing: &[Table],
) -> String {
    if keyspace_known {
        let names: Vec<String> = missing.iter().map(|t| format!("{keyspace}.{t}")).collect();
        format!(
            "keyspace {keyspace} lacks table{} {}; {SCHEMA_HINT}",
            if missing.len() == 1 { "" } else { "s" },
            names.join(", ")
        )
    } else {
        format!("keyspace {keyspace} does not exist; {SCHEMA_HINT}")
    }
}

fn connect_error(err: &ExecutionError, op: OpKind, table: Option<Table>, text: &str) -> StoreError {
    StoreError::new(
        at_connect(classify_execution(err, op)),
        op,
        table,
        format!("running `{text}`: {err}"),
    )
}
