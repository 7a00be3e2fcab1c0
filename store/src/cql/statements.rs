//! The CQL the backend sends, as text and as prepared statements.
//!
//! The text is an agreement with the local CQL endpoint
//! (`lockshift-cql-emulator`), whose parser accepts exactly these shapes —
//! pinned byte for byte by `statement_text_is_exactly_the_agreed_cql` below —
//! so a change here is a change to the endpoint's grammar too. Every table of
//! [`schema::ALL`] has the same columns, so one set of statements, rendered
//! per table, serves them all.
//!
//! # Statement settings, and why
//!
//! - **Consistency** from [`CqlSettings::consistency`] on every hot-path
//!   statement and batch: QUORUM writes plus QUORUM reads give the
//!   read-your-writes the exclusion proofs need (store invariant S5, thesis
//!   Lemma 1). A route pinned to a datacenter runs at `LOCAL_QUORUM` there
//!   instead, on copies of the same prepared statements ([`Statements::pinned`]).
//! - **Where a request goes**: the driver's default policy, told the
//!   datacenter to prefer and whether it may leave it ([`load_balancing`]).
//! - **Request timeout** from [`CqlSettings::request_timeout`]: the driver's
//!   client-side limit, reported as "may have been applied".
//! - **Idempotent**: every statement is. Writes and deletes carry a timestamp
//!   chosen by the caller (`USING TIMESTAMP ?`), so applying one twice yields
//!   the same cell version, and reconciliation (S1, S2) makes the order of a
//!   duplicate and any other write irrelevant. One nuance: a write with a TTL
//!   re-applied later counts its TTL from the later apply, so the cell may
//!   outlive the first apply by up to the time between the attempts (bounded
//!   by the request timeout) — the same slack a slow coordinator already
//!   causes, and one the lease arithmetic must tolerate anyway. Reads change
//!   nothing.
//! - **Retry policy** for writes and deletes: [`MutationRetryPolicy`], so the
//!   error after retries still tells whether the write may have landed.
//! - **Reads** (and scans): [`ReadRetryPolicy`] — the next coordinator after
//!   a failure another node may not share, at most twice — and speculative
//!   execution after [`CqlSettings::speculative_read_after`] through an
//!   execution profile of their own (writes never get it; see `mod.rs`,
//!   "Retries").

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::try_join_all;
use scylla::client::execution_profile::{ExecutionProfile, ExecutionProfileHandle};
use scylla::client::session::Session;
use scylla::policies::load_balancing::{DefaultPolicy, LoadBalancingPolicy};
use scylla::policies::speculative_execution::SimpleSpeculativeExecutionPolicy;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::{Consistency as DriverConsistency, SerialConsistency};

use super::errors::{
    MutationRetryPolicy, READ_RETRIES, ReadRetryPolicy, at_connect, classify_prepare,
};
use crate::cell::{OpKind, Table};
use crate::error::{StoreError, StoreErrorKind};
use crate::route::Datacenter;
use crate::schema;
use crate::settings::{Consistency, CqlSettings};

// ===== CQL text =====

/// `CREATE KEYSPACE IF NOT EXISTS …` with the configured replication.
pub(crate) fn create_keyspace(settings: &CqlSettings) -> String {
    format!(
        "CREATE KEYSPACE IF NOT EXISTS {} WITH replication = {} AND durable_writes = true",
        settings.keyspace,
        settings.replication.to_cql()
    )
}

/// `CREATE TABLE IF NOT EXISTS <ks>.<t> …`: the one shape of every table,
/// with the table's options from [`schema::options`] (its gc grace). The
/// `fence` column holds the token of a fenced write (`cql/fenced.rs`); no
/// lock statement names it.
pub(crate) fn create_table(keyspace: &str, table: Table) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {keyspace}.{table} (row_key text, column_name text, value blob, \
         fence bigint, PRIMARY KEY ((row_key), column_name)) WITH CLUSTERING ORDER BY \
         (column_name ASC) AND {}",
        schema::options(table).to_cql()
    )
}

/// `ALTER TABLE <ks>.<t> WITH …`: the table's options from
/// [`schema::options`], for a table that exists already (`CREATE TABLE IF
/// NOT EXISTS` leaves its options as they were — `main` and `shadow`
/// usually predate lockshift).
pub(crate) fn alter_table(keyspace: &str, table: Table) -> String {
    format!(
        "ALTER TABLE {keyspace}.{table} WITH {}",
        schema::options(table).to_cql()
    )
}

/// `ALTER TABLE <ks>.<t> ADD IF NOT EXISTS fence bigint`: the column a
/// fenced write records its token in (`cql/fenced.rs`), for a table
/// created before it existed — `main` and `shadow` usually predate
/// lockshift. `IF NOT EXISTS` on `ALTER` needs Cassandra 4.1;
/// `migrate schema --apply` looks for the column first and sends a plain
/// [`add_fence`] only where it is missing.
pub(crate) fn add_fence_if_missing(keyspace: &str, table: Table) -> String {
    format!("ALTER TABLE {keyspace}.{table} ADD IF NOT EXISTS fence bigint")
}

/// `ALTER TABLE <ks>.<t> ADD fence bigint`, for a table known to lack it.
pub(crate) fn add_fence(keyspace: &str, table: Table) -> String {
    format!("ALTER TABLE {keyspace}.{table} ADD fence bigint")
}

/// Lists the columns of a keyspace's tables (bind: the keyspace name).
pub(crate) const LIST_COLUMNS: &str =
    "SELECT table_name, column_name FROM system_schema.columns WHERE keyspace_name = ?";

/// Lists the tables of a keyspace (bind: the keyspace name).
pub(crate) const LIST_TABLES: &str =
    "SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?";

/// Binds: row_key text, column_name text, value blob, ttl int (0 = none),
/// timestamp bigint (µs).
pub(crate) fn insert(keyspace: &str, table: Table) -> String {
    format!(
        "INSERT INTO {keyspace}.{table} (row_key, column_name, value) VALUES (?, ?, ?) \
         USING TTL ? AND TIMESTAMP ?"
    )
}

/// Binds: timestamp bigint, row_key text, column_name text.
pub(crate) fn delete(keyspace: &str, table: Table) -> String {
    format!(
        "DELETE FROM {keyspace}.{table} USING TIMESTAMP ? WHERE row_key = ? AND column_name = ?"
    )
}

/// Binds: row_key text, limit int. Rows: column_name text, value blob,
/// writetime bigint, ttl int (null when none).
pub(crate) fn select_first(keyspace: &str, table: Table) -> String {
    format!(
        "SELECT column_name, value, writetime(value), ttl(value) FROM {keyspace}.{table} \
         WHERE row_key = ? LIMIT ?"
    )
}

/// Binds: row_key text, start column text (inclusive), limit int.
pub(crate) fn select_from(keyspace: &str, table: Table) -> String {
    format!(
        "SELECT column_name, value, writetime(value), ttl(value) FROM {keyspace}.{table} \
         WHERE row_key = ? AND column_name >= ? LIMIT ?"
    )
}

/// No binds; executed one page at a time.
pub(crate) fn scan(keyspace: &str, table: Table) -> String {
    format!("SELECT DISTINCT row_key FROM {keyspace}.{table}")
}

/// Binds: token start (exclusive) bigint, token end (inclusive) bigint;
/// executed one page at a time. Rows: token bigint, row_key text,
/// column_name text, value blob, writetime bigint, ttl int (null when
/// none) — in token order, each partition's in column order.
pub(crate) fn scan_cells(keyspace: &str, table: Table) -> String {
    format!(
        "SELECT token(row_key), row_key, column_name, value, writetime(value), ttl(value) \
         FROM {keyspace}.{table} WHERE token(row_key) > ? AND token(row_key) <= ?"
    )
}

/// The coordinator's clock in whole milliseconds; no binds.
pub(crate) const SERVER_TIME: &str =
    "SELECT toUnixTimestamp(now()) FROM system.local WHERE key = 'local'";

/// The DDL, in order: the keyspace, then every table of [`schema::ALL`].
pub(crate) fn schema_cql(settings: &CqlSettings) -> Vec<String> {
    std::iter::once(create_keyspace(settings))
        .chain(
            schema::ALL
                .iter()
                .map(|t| create_table(&settings.keyspace, *t)),
        )
        .collect()
}

pub(crate) fn driver_consistency(c: Consistency) -> DriverConsistency {
    match c {
        Consistency::Quorum => DriverConsistency::Quorum,
        Consistency::LocalQuorum => DriverConsistency::LocalQuorum,
    }
}

// ===== prepared statements =====

/// The hot-path statements of one table, prepared and configured.
#[derive(Debug)]
pub(crate) struct TableStatements {
    pub(crate) insert: PreparedStatement,
    pub(crate) delete: PreparedStatement,
    pub(crate) select_first: PreparedStatement,
    pub(crate) select_from: PreparedStatement,
    pub(crate) scan: PreparedStatement,
    pub(crate) scan_cells: PreparedStatement,
}

/// Every table's statements, plus an empty, configured batch to copy and
/// the settings to give the statements prepared later (fenced writes).
pub(crate) struct Statements {
    tables: HashMap<Table, TableStatements>,
    /// `SELECT toUnixTimestamp(now()) …`: the coordinator's clock.
    pub(crate) server_time: PreparedStatement,
    batch: Batch,
    config: StatementConfig,
}

impl std::fmt::Debug for Statements {
    // `Batch` has no Debug; the prepared statements say everything.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Statements")
            .field("tables", &self.tables)
            .finish_non_exhaustive()
    }
}

impl Statements {
    /// Prepares all six statements of every table (42 PREPAREs, issued
    /// concurrently), once per connect.
    pub(crate) async fn prepare(
        session: &Session,
        settings: &CqlSettings,
    ) -> Result<Statements, StoreError> {
        let config = StatementConfig::new(settings);
        let ks = settings.keyspace.as_str();
        let per_table = schema::ALL.iter().map(|&table| {
            let config = &config;
            async move {
                let (insert, delete, select_first, select_from, scan, scan_cells) = futures::try_join!(
                    config.prepare(session, table, OpKind::Write, insert(ks, table)),
                    config.prepare(session, table, OpKind::Delete, delete(ks, table)),
                    config.prepare(session, table, OpKind::Read, select_first(ks, table)),
                    config.prepare(session, table, OpKind::Read, select_from(ks, table)),
                    config.prepare(session, table, OpKind::Scan, scan(ks, table)),
                    config.prepare(session, table, OpKind::Scan, scan_cells(ks, table)),
                )?;
                Ok::<_, StoreError>((
                    table,
                    TableStatements {
                        insert,
                        delete,
                        select_first,
                        select_from,
                        scan,
                        scan_cells,
                    },
                ))
            }
        });
        let tables = try_join_all(per_table).await?.into_iter().collect();
        let server_time = config
            .prepare(
                session,
                schema::ROLLOUT,
                OpKind::Read,
                SERVER_TIME.to_string(),
            )
            .await?;
        Ok(Statements {
            tables,
            server_time,
            batch: config.batch(),
            config,
        })
    }

    /// The statements of `table`.
    ///
    /// # Errors
    /// [`StoreErrorKind::Invalid`] for a [`Table`] outside [`schema::ALL`]
    /// (`Table::new` is public, so one can be made; nothing was prepared for it).
    pub(crate) fn get(&self, table: Table, op: OpKind) -> Result<&TableStatements, StoreError> {
        self.tables.get(&table).ok_or_else(|| {
            StoreError::new(
                StoreErrorKind::Invalid,
                op,
                Some(table),
                format!("table {table} is not one of lockshift's tables (schema::ALL)"),
            )
        })
    }

    /// These statements pinned to `datacenter`: coordinated by its nodes
    /// only, at `LOCAL_QUORUM` (a lock's home, docs/design.md §4a).
    /// Clones of the prepared statements — nothing is prepared again.
    pub(crate) fn pinned(&self, settings: &CqlSettings, datacenter: &Datacenter) -> Statements {
        let config = StatementConfig::pinned(settings, datacenter);
        let tables = self
            .tables
            .iter()
            .map(|(table, t)| {
                let pin = |statement: &PreparedStatement, op: OpKind| {
                    let mut statement = statement.clone();
                    config.configure(&mut statement, op);
                    statement
                };
                (
                    *table,
                    TableStatements {
                        insert: pin(&t.insert, OpKind::Write),
                        delete: pin(&t.delete, OpKind::Delete),
                        select_first: pin(&t.select_first, OpKind::Read),
                        select_from: pin(&t.select_from, OpKind::Read),
                        scan: pin(&t.scan, OpKind::Scan),
                        scan_cells: pin(&t.scan_cells, OpKind::Scan),
                    },
                )
            })
            .collect();
        let mut server_time = self.server_time.clone();
        config.configure(&mut server_time, OpKind::Read);
        Statements {
            tables,
            server_time,
            batch: config.batch(),
            config,
        }
    }

    /// Gives `statement`, a conditional update (a lightweight
    /// transaction), this route's settings: its consistency for the commit,
    /// `SERIAL` for the Paxos round — `LOCAL_SERIAL` where the commit is
    /// `LOCAL_QUORUM` (a pinned route, or `consistency = "local_quorum"`),
    /// so the round stays in the datacenter the quorum counts — the write
    /// profile and retry policy, and not idempotent: re-sent after an
    /// ambiguous attempt, it could answer "not applied" to its own landing.
    pub(crate) fn configure_conditional(&self, statement: &mut PreparedStatement) {
        self.config.configure(statement, OpKind::FencedWrite);
        statement.set_is_idempotent(false);
        statement.set_serial_consistency(Some(
            if self.config.consistency == DriverConsistency::LocalQuorum {
                SerialConsistency::LocalSerial
            } else {
                SerialConsistency::Serial
            },
        ));
    }

    /// An UNLOGGED batch executing `statement` once per value row.
    ///
    /// Unlogged is right here: every statement hits one partition (the row),
    /// which Cassandra applies as a single mutation — atomic and isolated per
    /// replica, store invariant S7 — and a logged batch's batchlog would only
    /// add a round trip to guard multi-partition atomicity we do not need.
    pub(crate) fn batch_of(&self, statement: &PreparedStatement, count: usize) -> Batch {
        let mut batch = self.batch.clone();
        batch.statements.reserve(count);
        for _ in 0..count {
            batch.append_statement(statement.clone());
        }
        batch
    }
}

/// PREPAREs `text`, giving up after `timeout`: the driver puts no time limit
/// on PREPARE (its own comment on `Session::prepare_on_all`: "just one stuck
/// node freezes the driver here, potentially indefinitely long"). The error
/// is already in connect terms.
pub(crate) async fn prepare_within(
    session: &Session,
    text: &str,
    timeout: Duration,
) -> Result<PreparedStatement, (StoreErrorKind, String)> {
    match tokio::time::timeout(timeout, session.prepare(text)).await {
        Ok(Ok(statement)) => Ok(statement),
        Ok(Err(e)) => Err((
            at_connect(classify_prepare(&e, OpKind::Read)),
            format!("preparing `{text}`: {e}"),
        )),
        Err(_) => Err((
            StoreErrorKind::Connection,
            format!("preparing `{text}`: no answer within {timeout:?}"),
        )),
    }
}

/// The settings applied to every statement (see the module docs).
struct StatementConfig {
    consistency: DriverConsistency,
    request_timeout: Duration,
    /// Writes' profile: where they go (their retry policy is set on each).
    writes: ExecutionProfileHandle,
    mutation_retry: Arc<MutationRetryPolicy>,
    /// Reads' profile: where they go, their retry policy and speculative
    /// execution.
    reads: ExecutionProfileHandle,
}

impl StatementConfig {
    /// The default route: the configured consistency and local datacenter.
    fn new(settings: &CqlSettings) -> Self {
        let consistency = driver_consistency(settings.consistency);
        Self::at(settings, None, consistency)
    }

    /// A route pinned to `datacenter`, at `LOCAL_QUORUM`.
    fn pinned(settings: &CqlSettings, datacenter: &Datacenter) -> Self {
        Self::at(settings, Some(datacenter), DriverConsistency::LocalQuorum)
    }

    /// Coordinated in `datacenter` (`None`: the configured local one), at
    /// `consistency`.
    fn at(
        settings: &CqlSettings,
        datacenter: Option<&Datacenter>,
        consistency: DriverConsistency,
    ) -> Self {
        let policy = load_balancing(settings, datacenter);
        StatementConfig {
            consistency,
            request_timeout: settings.request_timeout,
            writes: write_profile(settings, consistency, policy.clone()).into_handle(),
            mutation_retry: Arc::new(MutationRetryPolicy::default()),
            reads: read_profile(settings, consistency, policy).into_handle(),
        }
    }

    async fn prepare(
        &self,
        session: &Session,
        table: Table,
        op: OpKind,
        text: String,
    ) -> Result<PreparedStatement, StoreError> {
        let mut statement = prepare_within(session, &text, self.request_timeout)
            .await
            .map_err(|(kind, why)| StoreError::new(kind, op, Some(table), why))?;
        self.configure(&mut statement, op);
        Ok(statement)
    }

    fn configure(&self, statement: &mut PreparedStatement, op: OpKind) {
        statement.set_consistency(self.consistency);
        statement.set_request_timeout(Some(self.request_timeout));
        // Idempotent: see the module docs.
        statement.set_is_idempotent(true);
        if op.is_mutation() {
            statement.set_retry_policy(Some(self.mutation_retry.clone()));
            statement.set_execution_profile_handle(Some(self.writes.clone()));
        } else {
            // The statement's own consistency and timeout (set above) win
            // over the profile's; the profile adds where it goes,
            // speculation and retries.
            statement.set_execution_profile_handle(Some(self.reads.clone()));
        }
    }

    /// A batch carries its own settings; those of its statements are ignored.
    fn batch(&self) -> Batch {
        let mut batch = Batch::new(BatchType::Unlogged);
        batch.set_consistency(self.consistency);
        batch.set_request_timeout(Some(self.request_timeout));
        batch.set_is_idempotent(true);
        batch.set_retry_policy(Some(self.mutation_retry.clone()));
        batch.set_execution_profile_handle(Some(self.writes.clone()));
        batch
    }
}

/// Where requests go: the driver's default policy (token-aware), told the
/// datacenter to prefer — `pinned`, or else `store.cql.local_datacenter`
/// — and allowed to leave it only for a request that is not pinned and
/// not at a LOCAL consistency. Without either it prefers none: each
/// request goes to a replica in any datacenter, which is why
/// `local_quorum` needs `local_datacenter` (`keyspace.rs` refuses it).
pub(crate) fn load_balancing(
    settings: &CqlSettings,
    pinned: Option<&Datacenter>,
) -> Arc<dyn LoadBalancingPolicy> {
    let builder = DefaultPolicy::builder().token_aware(true);
    match (pinned, &settings.local_datacenter) {
        (Some(dc), _) => builder
            .prefer_datacenter(dc.to_string())
            .permit_dc_failover(false),
        (None, Some(local)) => builder
            .prefer_datacenter(local.to_string())
            .permit_dc_failover(settings.consistency != Consistency::LocalQuorum),
        (None, None) => builder,
    }
    .build()
}

/// The execution profile of every write and delete: where they go and
/// their timeout. Never speculative (see [`read_profile`]).
fn write_profile(
    settings: &CqlSettings,
    consistency: DriverConsistency,
    policy: Arc<dyn LoadBalancingPolicy>,
) -> ExecutionProfile {
    ExecutionProfile::builder()
        .consistency(consistency)
        .request_timeout(Some(settings.request_timeout))
        .load_balancing_policy(policy)
        .retry_policy(Arc::new(MutationRetryPolicy::default()))
        .build()
}

/// The execution profile of every read and scan: where they go,
/// [`ReadRetryPolicy`], and speculative execution after
/// `speculative_read_after` (off at `0s`) to as many extra nodes as a read
/// may be retried on — within the datacenter when the route is pinned.
///
/// Why reads only: a speculative copy of a write is a second attempt whose
/// outcome the driver never reports, so a "not applied" answer could hide
/// a copy that landed (the argument of `errors.rs`). A read's copies change
/// nothing.
pub(crate) fn read_profile(
    settings: &CqlSettings,
    consistency: DriverConsistency,
    policy: Arc<dyn LoadBalancingPolicy>,
) -> ExecutionProfile {
    let mut profile = ExecutionProfile::builder()
        .consistency(consistency)
        .request_timeout(Some(settings.request_timeout))
        .load_balancing_policy(policy)
        .retry_policy(Arc::new(ReadRetryPolicy));
    if !settings.speculative_read_after.is_zero() {
        profile = profile.speculative_execution_policy(Some(Arc::new(
            SimpleSpeculativeExecutionPolicy {
                max_retry_count: READ_RETRIES,
                retry_interval: settings.speculative_read_after,
            },
        )));
    }
    profile.build()
}

#[cfg(test)]
#[path = "statements_tests.rs"]
mod tests;
