//! Making sure the schema is there: creating it, applying its options
//! (`migrate schema --apply`), or checking that it exists — the part of
//! [`CqlStore::connect`](super::CqlStore::connect) after the session is open.

use scylla::client::session::Session;
use scylla::errors::ExecutionError;
use scylla::statement::Consistency as DriverConsistency;

use super::connect::CONNECT_OP;
use super::errors::{self, at_connect, classify_execution};
use super::rows::decode_rows;
use super::statements;
use crate::cell::{OpKind, Table};
use crate::error::{StoreError, StoreErrorKind};
use crate::schema;
use crate::settings::CqlSettings;

/// How to fix a missing schema, quoted in [`StoreErrorKind::SchemaMissing`] errors.
const SCHEMA_HINT: &str = "run the statements `migrate schema` prints (cqlsh -f), or set \
     store.cql.create_schema = true to create them with store.cql.replication";

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

/// One statement `migrate schema --apply` ran, and whether the cluster
/// refused it ([`super::CqlStore::apply_schema`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaStep {
    /// The statement, as `migrate schema` prints it.
    pub statement: String,
    /// `None`: applied. An `ALTER TABLE` the cluster refused: its error
    /// (the local CQL endpoint does not implement `ALTER`).
    pub refused: Option<StoreError>,
}

/// Runs the keyspace's and tables' `CREATE … IF NOT EXISTS` (a refusal
/// stops it), then every table's `ALTER TABLE … WITH` options (a refusal
/// is recorded in its step and the next one runs), then waits for schema
/// agreement.
pub(super) async fn apply_schema(
    session: &Session,
    settings: &CqlSettings,
) -> Result<Vec<SchemaStep>, StoreError> {
    create_schema(session, settings).await?;
    let mut steps: Vec<SchemaStep> = statements::schema_cql(settings)
        .into_iter()
        .map(|statement| SchemaStep {
            statement,
            refused: None,
        })
        .collect();
    for table in schema::ALL {
        let statement = statements::alter_table(&settings.keyspace, table);
        let refused = session
            .query_unpaged(statement.as_str(), ())
            .await
            .err()
            .map(|e| connect_error(&e, OpKind::Write, Some(table), &statement));
        steps.push(SchemaStep { statement, refused });
    }
    session.await_schema_agreement().await.map_err(|e| {
        StoreError::new(
            at_connect(errors::classify_schema_agreement(&e)),
            OpKind::Write,
            None,
            format!("waiting for schema agreement after altering the tables: {e}"),
        )
    })?;
    Ok(steps)
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
