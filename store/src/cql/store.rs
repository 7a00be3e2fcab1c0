//! The handle: [`CqlStore`], its session and statements; its operations
//! and `Store` impl are in `ops.rs`.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use scylla::client::session::Session;
use scylla::errors::ExecutionError;
use tracing::Instrument;

use super::connect::{CONNECT_OP, open_session};
use super::errors::execution_error;
use super::keyspace::{
    SchemaStep, add_fence_columns, apply_schema, check_datacenters, check_schema, create_schema,
    node_datacenters,
};
use super::statements::{self, Statements};
#[cfg(doc)]
use crate::api::Store;
use crate::cell::{OpKind, Table};
use crate::error::{StoreError, StoreErrorKind};
use crate::route::{Datacenter, Route};
use crate::settings::CqlSettings;
use crate::tombstones;

/// A [`Store`] on a CQL cluster: ScyllaDB, Cassandra, or lockshift's local
/// CQL endpoint.
///
/// One `CqlStore` holds one driver session (a connection pool per node) and
/// every statement prepared; share it behind an `Arc` (e.g. as a
/// [`SharedStore`](crate::SharedStore)) rather than connecting twice.
///
/// Every read and write on the default route runs at the configured
/// consistency (QUORUM unless configured `LOCAL_QUORUM`), sent to the
/// configured local datacenter first when one is named; a request on a
/// route pinned to a datacenter runs at `LOCAL_QUORUM` there and is never
/// sent elsewhere. All with the configured client-side request timeout;
/// see [`StoreErrorKind`] for what each failure means.
///
/// # Examples
///
/// ```no_run
/// use lockshift_store::{CellWrite, CqlSettings, CqlStore, RowQuery, Store, Timestamp, WriteOptions, schema};
///
/// # async fn example() -> Result<(), lockshift_store::StoreError> {
/// let settings = CqlSettings {
///     contact_points: vec!["10.0.0.1:9042".into(), "10.0.0.2:9042".into()],
///     ..CqlSettings::default()
/// };
/// let store = CqlStore::connect(&settings).await?;
/// let at = WriteOptions::at(Timestamp::from_micros(1_700_000_000_000_000));
/// store.write(schema::MAIN, "lock-1", &[CellWrite::new("owner-a", vec![])], at).await?;
/// let cells = store.read(schema::MAIN, "lock-1", &RowQuery::all()).await?;
/// assert_eq!(cells[0].column, "owner-a");
/// # Ok(())
/// # }
/// ```
pub struct CqlStore {
    // Shared with the background probe of unresponsive contact points
    // (which holds it weakly and ends with the store).
    pub(super) session: std::sync::Arc<Session>,
    statements: Arc<Statements>,
    /// The statements pinned to each datacenter a route has named, made on
    /// first use from `statements` (copies, nothing prepared again).
    pinned: Mutex<HashMap<Datacenter, Arc<Statements>>>,
    pub(super) settings: CqlSettings,
    pub(super) description: String,
    keyspace: String,
    /// The conditional updates of fenced writes, per table, prepared on
    /// first use (`cql/fenced.rs` says why not at connect).
    fenced: Mutex<HashMap<Table, Arc<super::fenced::FencedStatements>>>,
}

impl fmt::Debug for CqlStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CqlStore")
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

// ===== impl CqlStore =====

impl CqlStore {
    /// Connects to the cluster, makes sure lockshift's schema is there, and
    /// prepares every statement.
    ///
    /// With `create_schema = true` the keyspace and every table of
    /// [`schema::ALL`](crate::schema::ALL) are created if missing ([`CqlStore::schema_cql`], run
    /// in order, then a wait for schema agreement); otherwise their presence
    /// is checked.
    ///
    /// # Errors
    ///
    /// - [`StoreErrorKind::Invalid`]: a setting breaks a rule (the message
    ///   names the key), or the cluster rejected a statement (wrong table
    ///   shape, missing permission).
    /// - [`StoreErrorKind::Connection`]: no node could be reached or read,
    ///   or a DDL or PREPARE failed transiently. Retrying may help.
    /// - [`StoreErrorKind::SchemaMissing`]: `create_schema = false` and the
    ///   keyspace or a table is missing; the message names them.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future closes the half-built session; DDL already sent
    /// may have been applied, which is harmless (`IF NOT EXISTS`).
    pub async fn connect(settings: &CqlSettings) -> Result<CqlStore, StoreError> {
        if let Some(problem) = settings.problems().into_iter().next() {
            return Err(StoreError::new(
                StoreErrorKind::Invalid,
                CONNECT_OP,
                None,
                format!("invalid settings: {}", problem.message),
            ));
        }
        let description = format!(
            "cql {}/{} ({}{})",
            settings.contact_points.join(","),
            settings.keyspace,
            settings.consistency,
            settings
                .local_datacenter
                .as_ref()
                .map_or_else(String::new, |dc| format!(", local datacenter {dc}"))
        );
        let span = tracing::debug_span!("cql.connect", store = %description);
        async {
            let session = open_session(settings).await?;
            if settings.create_schema {
                create_schema(&session, settings).await?;
                add_missing_fences(&session, settings).await;
            } else {
                check_schema(&session, settings).await?;
            }
            check_datacenters(&session, settings)?;
            let statements = Statements::prepare(&session, settings).await?;
            tracing::debug!("connected");
            Ok(CqlStore {
                session,
                statements: Arc::new(statements),
                pinned: Mutex::new(HashMap::new()),
                settings: settings.clone(),
                description,
                keyspace: settings.keyspace.clone(),
                fenced: Mutex::new(HashMap::new()),
            })
        }
        .instrument(span)
        .await
    }

    /// The driver session, for statements outside the [`Store`] interface
    /// (the benchmark's LWT baseline sends conditional statements on it, so
    /// it measures the same connections and settings as the locks).
    pub fn session(&self) -> &std::sync::Arc<Session> {
        &self.session
    }

    /// The keyspace of lockshift's tables.
    pub fn keyspace(&self) -> &str {
        &self.keyspace
    }

    /// The fenced writes' statements prepared so far.
    pub(super) fn fenced_cache(
        &self,
    ) -> &Mutex<HashMap<Table, Arc<super::fenced::FencedStatements>>> {
        &self.fenced
    }

    /// The coordinator's clock statement sent to the node at `address`
    /// alone ([`Route::Host`]): the driver's single-target policy, which
    /// never falls back to another node. The node is named by the driver's
    /// own record of it, so an address translator cannot mislead it.
    ///
    /// # Errors
    /// [`StoreErrorKind::Connection`] for an address no known node has.
    pub(super) fn clock_of_host(
        &self,
        address: &str,
    ) -> Result<scylla::statement::prepared::PreparedStatement, StoreError> {
        use scylla::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
        let state = self.session.get_cluster_state();
        let nodes = state.get_nodes_info();
        let address_of = |n: &scylla::cluster::Node| {
            std::net::SocketAddr::new(n.address.ip(), n.address.port()).to_string()
        };
        let Some(node) = nodes.iter().find(|n| address_of(n) == address) else {
            let known: Vec<String> = nodes.iter().map(|n| address_of(n)).collect();
            return Err(StoreError::new(
                StoreErrorKind::Connection,
                OpKind::Read,
                Some(crate::schema::ROLLOUT),
                format!(
                    "no node at {:?} is known to the driver (its nodes are {})",
                    lockshift_decide::id::cut_short(address),
                    known.join(", ")
                ),
            ));
        };
        let mut statement = self.statements.server_time.clone();
        statement.set_load_balancing_policy(Some(SingleTargetLoadBalancingPolicy::new(
            NodeIdentifier::Node(node.clone()),
            None,
        )));
        Ok(statement)
    }

    /// The nodes the driver knows, each with its datacenter, sorted by
    /// address: the topology's [`Host`](crate::Host)s.
    pub(super) fn hosts(&self) -> Vec<crate::Host> {
        let state = self.session.get_cluster_state();
        let mut hosts: Vec<crate::Host> = state
            .get_nodes_info()
            .iter()
            .map(|n| crate::Host {
                address: std::net::SocketAddr::new(n.address.ip(), n.address.port()).to_string(),
                datacenter: n.datacenter.clone().and_then(|dc| Datacenter::new(dc).ok()),
            })
            .collect();
        hosts.sort();
        hosts
    }

    /// The statements for `route`: the default ones, or those pinned to
    /// its datacenter (made on first use).
    ///
    /// # Errors
    /// [`StoreErrorKind::Connection`] for a datacenter none of the
    /// cluster's known nodes is in: no node could coordinate the request,
    /// and a pinned request never goes elsewhere.
    pub(super) fn statements_for(
        &self,
        route: &Route,
        op: OpKind,
        table: Table,
    ) -> Result<Arc<Statements>, StoreError> {
        let Some(dc) = route.datacenter() else {
            return Ok(self.statements.clone());
        };
        let mut pinned = self.pinned.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(statements) = pinned.get(dc) {
            return Ok(statements.clone());
        }
        let known = node_datacenters(&self.session);
        if !known.iter().any(|k| k == dc.as_str()) {
            return Err(StoreError::new(
                StoreErrorKind::Connection,
                op,
                Some(table),
                format!(
                    "no node of datacenter {dc} is known to the driver (the cluster's nodes are \
                     in {})",
                    known.join(", ")
                ),
            ));
        }
        let statements = Arc::new(self.statements.pinned(&self.settings, dc));
        pinned.insert(dc.clone(), statements.clone());
        Ok(statements)
    }

    /// Drops this store's keyspace and everything in it (`DROP KEYSPACE IF
    /// EXISTS`). For keyspaces a tool or a test made for itself (`migrate
    /// demo` on a cluster, a test run) — never a fleet's.
    ///
    /// # Errors
    /// The cluster's error; [`StoreErrorKind::MaybeApplied`] on a timeout.
    pub async fn drop_keyspace(&self) -> Result<(), StoreError> {
        let text = format!("DROP KEYSPACE IF EXISTS {}", self.keyspace);
        self.session
            .query_unpaged(text.as_str(), ())
            .await
            .map(|_| ())
            .map_err(|e| {
                StoreError::new(
                    super::errors::classify_execution(&e, OpKind::Delete),
                    OpKind::Delete,
                    None,
                    format!("running `{text}`: {e}"),
                )
            })
    }

    /// The DDL that creates lockshift's keyspace and tables for `settings`,
    /// one statement per string, in the order to run them — what `connect`
    /// runs when `create_schema = true`, for operators who manage schema
    /// themselves.
    ///
    /// # Examples
    ///
    /// ```
    /// use lockshift_store::{CqlSettings, CqlStore};
    ///
    /// let ddl = CqlStore::schema_cql(&CqlSettings::default());
    /// assert!(ddl[0].starts_with("CREATE KEYSPACE IF NOT EXISTS lockshift"));
    /// assert!(ddl[1].starts_with("CREATE TABLE IF NOT EXISTS lockshift.main"));
    /// ```
    pub fn schema_cql(settings: &CqlSettings) -> Vec<String> {
        statements::schema_cql(settings)
    }

    /// Connects to `settings`' cluster and runs what [`schema_cql`] and
    /// [`schema_options_cql`] print: the keyspace and tables where missing,
    /// then every table's options (gc grace, compaction). For `migrate
    /// schema --apply`: a lock whose rows hold more tombstones than the
    /// cluster will read comes back once its tombstones are older than the
    /// gc grace set here.
    ///
    /// [`schema_cql`]: Self::schema_cql
    /// [`schema_options_cql`]: Self::schema_options_cql
    ///
    /// # Errors
    /// No connection, or a refused `CREATE`; a refused `ALTER TABLE` is
    /// reported in its [`SchemaStep`] instead.
    pub async fn apply_schema(settings: &CqlSettings) -> Result<Vec<SchemaStep>, StoreError> {
        let session = open_session(settings).await?;
        apply_schema(&session, settings).await
    }

    /// The `ALTER TABLE` statements that give tables which exist already
    /// lockshift's options ([`crate::schema::options`]): what `CREATE TABLE
    /// IF NOT EXISTS` leaves alone — `main` and `shadow` usually predate
    /// lockshift, and an older lockshift created its tables with other
    /// options — then the `ALTER TABLE … ADD IF NOT EXISTS fence bigint`
    /// that give tables created before fenced writes their column
    /// (Cassandra 4.1 understands `IF NOT EXISTS` there; [`apply_schema`]
    /// checks for the column instead). Idempotent.
    ///
    /// [`apply_schema`]: Self::apply_schema
    pub fn schema_options_cql(settings: &CqlSettings) -> Vec<String> {
        let options = crate::schema::ALL
            .iter()
            .map(|t| statements::alter_table(&settings.keyspace, *t));
        let fences = crate::schema::ALL
            .iter()
            .map(|t| statements::add_fence_if_missing(&settings.keyspace, *t));
        options.chain(fences).collect()
    }
}

/// With `create_schema`, tables made by an earlier version gain the
/// `fence` column fenced writes need, as missing tables are created. The
/// locks never use it, so a failure here — listing the columns, or an
/// `ALTER` another process raced — is logged, not fatal: a fenced write to
/// a table still without it names `migrate schema --apply`.
async fn add_missing_fences(session: &scylla::client::session::Session, settings: &CqlSettings) {
    match add_fence_columns(session, settings).await {
        Ok(steps) => {
            for step in steps {
                match step.refused {
                    None => tracing::info!(statement = %step.statement, "added the fence column"),
                    Some(error) => tracing::warn!(
                        statement = %step.statement,
                        %error,
                        "could not add the fence column fenced writes need"
                    ),
                }
            }
        }
        Err(error) => tracing::warn!(
            %error,
            "could not list the tables' columns to add the fence column fenced writes need"
        ),
    }
}

/// Maps a driver failure, logging it (never the values) at debug level.
fn failed(err: ExecutionError, op: OpKind, table: Table) -> StoreError {
    let error = execution_error(&err, op, table);
    tracing::debug!(kind = ?error.kind(), error = %err, "cql request failed");
    error
}

/// [`failed`] for a request on `route`: a pinned route whose datacenter
/// has no node the driver can use gets an empty plan, which the driver
/// words as a likely bug of its own; say what it means instead.
pub(super) fn failed_on(
    route: &Route,
    err: ExecutionError,
    op: OpKind,
    table: Table,
) -> StoreError {
    match (route.datacenter(), &err) {
        (Some(dc), ExecutionError::EmptyPlan) => {
            tracing::debug!(%dc, "cql request failed: no node of the datacenter to send it to");
            StoreError::new(
                StoreErrorKind::Connection,
                op,
                Some(table),
                format!(
                    "no node of datacenter {dc} is reachable from this client (none is up, or \
                     every connection to them is down), and a request pinned to it goes nowhere \
                     else"
                ),
            )
        }
        _ => failed(err, op, table),
    }
}

/// [`failed`] for a read of `row`: a read aborted for too many tombstones
/// names the row (Cassandra's message names only the replica).
pub(super) fn read_failed(
    route: &Route,
    err: ExecutionError,
    table: Table,
    row: &str,
) -> StoreError {
    let error = failed_on(route, err, OpKind::Read, table);
    if error.kind() != StoreErrorKind::TooManyTombstones {
        return error;
    }
    StoreError::new(
        StoreErrorKind::TooManyTombstones,
        OpKind::Read,
        Some(table),
        format!(
            "the read of row {:?} passed more tombstones than the cluster's \
             tombstone_failure_threshold (100000 by default): {}",
            tombstones::shorten(row),
            error.message()
        ),
    )
}
