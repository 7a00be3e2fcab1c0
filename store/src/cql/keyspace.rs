//! Making sure the schema is there: creating it, applying its options
//! (`migrate schema --apply`), or checking that it exists — the part of
//! [`CqlStore::connect`](super::CqlStore::connect) after the session is open.

use scylla::client::session::Session;
use scylla::errors::ExecutionError;
use scylla::statement::Consistency as DriverConsistency;

use super::connect::CONNECT_OP;
use super::errors::{self, at_connect, classify_execution};
use super::rows::{ResultRow, decode_rows};
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
/// stops it), then every table's `ALTER TABLE … WITH` options and, for a
/// table that lacks the `fence` column (created before fenced writes),
/// `ALTER TABLE … ADD fence bigint` — a refusal of an `ALTER` is recorded
/// in its step and the next one runs — then waits for schema agreement.
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
        steps.push(run_step(session, table, statement).await);
    }
    steps.extend(add_fence_columns(session, settings).await?);
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

/// Runs `ALTER TABLE … ADD fence bigint` for every table of the keyspace
/// that lacks the column (created before fenced writes existed), one step
/// each: a refusal is recorded in its step and the next one runs.
///
/// # Errors
/// When the tables' columns cannot be listed.
pub(super) async fn add_fence_columns(
    session: &Session,
    settings: &CqlSettings,
) -> Result<Vec<SchemaStep>, StoreError> {
    let mut steps = Vec::new();
    for table in unfenced_tables(session, settings).await? {
        let statement = statements::add_fence(&settings.keyspace, table);
        steps.push(run_step(session, table, statement).await);
    }
    Ok(steps)
}

/// Runs `statement`, a schema change of `table`: a refusal is recorded in
/// the step, not returned, so that the next step runs.
async fn run_step(session: &Session, table: Table, statement: String) -> SchemaStep {
    let refused = session
        .query_unpaged(statement.as_str(), ())
        .await
        .err()
        .map(|e| connect_error(&e, OpKind::Write, Some(table), &statement));
    SchemaStep { statement, refused }
}

/// The rows `text`, a query of `system_schema` about the configured
/// keyspace, answers. `system_schema` is node-local (LocalStrategy): ONE is
/// all there is to ask for; agreement between nodes is the driver's
/// schema-agreement business.
async fn read_system_schema<R>(
    session: &Session,
    settings: &CqlSettings,
    text: &str,
) -> Result<Vec<R>, StoreError>
where
    R: for<'frame, 'metadata> scylla::deserialize::row::DeserializeRow<'frame, 'metadata>
        + ResultRow,
{
    let mut list = statements::prepare_within(session, text, settings.request_timeout)
        .await
        .map_err(|(kind, why)| StoreError::new(kind, CONNECT_OP, None, why))?;
    list.set_consistency(DriverConsistency::One);
    list.set_request_timeout(Some(settings.request_timeout));
    list.set_is_idempotent(true);
    let result = session
        .execute_unpaged(&list, (settings.keyspace.as_str(),))
        .await
        .map_err(|e| connect_error(&e, CONNECT_OP, None, text))?;
    decode_rows::<R>(result, CONNECT_OP, None)
}

/// The tables of the keyspace without the `fence` column a fenced write
/// needs: created before fenced writes existed.
async fn unfenced_tables(
    session: &Session,
    settings: &CqlSettings,
) -> Result<Vec<Table>, StoreError> {
    let columns: Vec<(String, String)> =
        read_system_schema(session, settings, statements::LIST_COLUMNS).await?;
    Ok(schema::ALL
        .iter()
        .copied()
        .filter(|t| {
            !columns
                .iter()
                .any(|(table, column)| table == t.name() && column == "fence")
        })
        .collect())
}

/// Checks that the keyspace and every table exist.
pub(super) async fn check_schema(
    session: &Session,
    settings: &CqlSettings,
) -> Result<(), StoreError> {
    let ks = settings.keyspace.as_str();
    let found: Vec<(String,)> =
        read_system_schema(session, settings, statements::LIST_TABLES).await?;
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

/// The datacenters of the keyspace's replication, with their factors
/// (`NetworkTopologyStrategy`); empty for any other strategy, whose
/// replicas ignore datacenters.
pub(super) fn replicated_datacenters(session: &Session, settings: &CqlSettings) -> Vec<String> {
    use scylla::cluster::metadata::Strategy;
    if settings.create_schema {
        // Just created (or found) with these settings; the driver's
        // metadata may not have caught up yet.
        if let crate::settings::Replication::NetworkTopologyStrategy { datacenters } =
            &settings.replication
        {
            return datacenters.keys().cloned().collect();
        }
    }
    let state = session.get_cluster_state();
    match state.get_keyspace(&settings.keyspace).map(|k| &k.strategy) {
        Some(Strategy::NetworkTopologyStrategy {
            datacenter_repfactors,
        }) => {
            let mut dcs: Vec<String> = datacenter_repfactors
                .iter()
                .filter(|(_, rf)| **rf > 0)
                .map(|(dc, _)| dc.clone())
                .collect();
            dcs.sort();
            dcs
        }
        _ => Vec::new(),
    }
}

/// The datacenters the cluster's nodes are in, sorted.
pub(super) fn node_datacenters(session: &Session) -> Vec<String> {
    let state = session.get_cluster_state();
    let mut dcs: Vec<String> = state
        .get_nodes_info()
        .iter()
        .filter_map(|n| n.datacenter.clone())
        .collect();
    dcs.sort();
    dcs.dedup();
    dcs
}

/// Refuses settings under which "LOCAL" would mean another datacenter
/// from request to request, or a datacenter the cluster does not have:
///
/// - `store.cql.local_datacenter` must name a datacenter of the cluster's
///   nodes (a typo would otherwise leave every pinned request without a
///   coordinator);
/// - `consistency = "local_quorum"` without `local_datacenter`, on a
///   keyspace replicated in more than one datacenter: the driver's
///   default policy prefers no datacenter, so each request's "local"
///   quorum is whichever datacenter coordinated it, and two clients can
///   both hold one lock (measured: both sides of a split held it in 3
///   rounds of 3, docs/design.md §4a).
pub(super) fn check_datacenters(
    session: &Session,
    settings: &CqlSettings,
) -> Result<(), StoreError> {
    let invalid =
        |message: String| StoreError::new(StoreErrorKind::Invalid, CONNECT_OP, None, message);
    let nodes = node_datacenters(session);
    if let Some(local) = &settings.local_datacenter
        && !nodes.is_empty()
        && !nodes.iter().any(|dc| dc == local.as_str())
    {
        return Err(invalid(format!(
            "store.cql.local_datacenter = {} is not a datacenter of this cluster (its nodes \
             are in {})",
            crate::settings::echo(local.as_str()),
            nodes.join(", ")
        )));
    }
    let replicated = replicated_datacenters(session, settings);
    if settings.consistency == crate::settings::Consistency::LocalQuorum
        && settings.local_datacenter.is_none()
        && replicated.len() > 1
    {
        return Err(invalid(format!(
            "store.cql.consistency = \"local_quorum\" needs store.cql.local_datacenter: \
             keyspace {} is replicated in {}, and without a local datacenter each request \
             counts the quorum of whichever datacenter coordinates it, so two clients could \
             both hold one lock. Set store.cql.local_datacenter to this process's datacenter \
             (LOCKSHIFT__STORE__CQL__LOCAL_DATACENTER) — and, for locks shared across \
             datacenters, lock.home_datacenter",
            settings.keyspace,
            replicated.join(", ")
        )));
    }
    Ok(())
}
