//! The storage engine behind the endpoint: keyspaces of tables with
//! arbitrary schemas, statements compiled against them, and execution with
//! the embedded store's semantics.
//!
//! - [`schema`]: table and keyspace definitions from `CREATE`.
//! - [`data`]: partitions, rows, cells and tombstones (its invariants 1–4).
//! - [`compile`]: statements → plans with typed bind markers.
//! - [`bind`]: resolving a plan's operands against bound values.
//! - [`execute`]: running a prepared statement, a conditional one, a batch.
//! - [`select`] / [`modify`]: running plans; paging state.
//! - [`cas`]: lightweight transactions (`IF …`) and their `[applied]` rows.
//! - [`ddl`]: CREATE / DROP / USE / TRUNCATE, keeping `system_schema` in step.
//! - [`describe`]: server-side DESCRIBE (what cqlsh 6 sends).
//! - [`system`]: the `system` and `system_schema` tables drivers read.
//! - [`virtual_faults`]: the `lockshift_emulator.faults` table.
//!
//! The whole engine sits behind one mutex in the server: every statement is a
//! few map operations, and one lock makes each statement and each batch
//! atomic for free (the store contract's "one row, one write").

pub(crate) mod bind;
mod cas;
pub(crate) mod compile;
pub(crate) mod data;
mod ddl;
mod describe;
mod execute;
mod modify;
pub(crate) mod schema;
pub(crate) mod select;
pub(crate) mod system;
mod virtual_faults;

use std::collections::BTreeMap;

use lockshift_store::{SharedClock, Timestamp, TombstoneThresholds};
use uuid::Uuid;

use crate::engine::compile::{BindSpec, Binder, ModifyPlan, Operand, ResultColumn, SelectPlan};
use crate::engine::data::TableData;
use crate::engine::schema::{KeyspaceDef, SharedSchema};
use crate::engine::select::Page;
use crate::engine::system::NodeInfo;
use crate::error::CqlError;
use crate::faults::{FaultController, RequestOp};
use crate::parse::ast::{Statement, TableName};
use crate::read_costs::ReadCostLog;
use crate::wire::Value;

/// The storage (inter-node) port Cassandra names a replica by in failure
/// messages ("… READ_TOO_MANY_TOMBSTONES from /127.0.0.3:7000"); the
/// endpoint has none, so it names Cassandra's default.
pub(crate) const STORAGE_PORT: u16 = 7000;

/// The keyspace of the endpoint's own virtual tables.
pub(crate) const FAULTS_KEYSPACE: &str = "lockshift_emulator";

/// A compiled statement, ready to run any number of times.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) kind: PreparedKind,
    /// One spec per bind marker, in marker order.
    pub(crate) binds: Vec<BindSpec>,
    /// The marker index of each partition key column, if all are `= ?`.
    pub(crate) pk_indexes: Vec<u16>,
    /// SELECT result columns; empty for other statements.
    pub(crate) result: Vec<ResultColumn>,
    /// Tables the statement reads or writes, with the schema ids it was
    /// compiled against.
    pub(crate) tables: Vec<(String, String, Uuid)>,
    pub(crate) op: RequestOp,
    /// Whether this is a lightweight transaction (its injected latency is
    /// paid once per Paxos round trip, see [`PAXOS_ROUND_TRIPS`]).
    pub(crate) conditional: bool,
    /// The WriteTimeout write type a fault on this statement reports.
    pub(crate) write_type: &'static str,
}

impl Prepared {
    /// `(keyspace, table)` of each table, for fault matching.
    pub(crate) fn table_names(&self) -> Vec<(&str, &str)> {
        self.tables
            .iter()
            .map(|(k, t, _)| (k.as_str(), t.as_str()))
            .collect()
    }
}

/// The round trips between coordinator and replicas a lightweight
/// transaction makes in Cassandra 4.1's default Paxos (v1): prepare/promise,
/// read, propose/accept, commit. A plain write makes one. The endpoint's
/// injected latency models a request's round trip, so a conditional
/// statement waits it this many times: an LWT baseline measured here costs
/// what it would on a cluster, not the price of a plain write.
pub(crate) const PAXOS_ROUND_TRIPS: u32 = 4;

/// What a prepared statement does.
#[derive(Debug)]
pub(crate) enum PreparedKind {
    Select(SelectPlan),
    Modify(ModifyPlan),
    Batch {
        plans: Vec<ModifyPlan>,
        timestamp: Option<Operand>,
    },
    Ddl(ddl::Ddl),
    Use(String),
    Describe(describe::DescribeTarget),
}

/// How one execution was asked for.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ExecOptions<'a> {
    pub(crate) values: &'a [Value],
    pub(crate) page_size: Option<usize>,
    pub(crate) paging_state: Option<&'a [u8]>,
    /// The client's default timestamp (µs), for statements without one.
    pub(crate) default_timestamp: Option<i64>,
    /// The request's consistency (echoed in `READ_FAILURE`).
    pub(crate) consistency: u16,
}

/// A `RESULT SchemaChange`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SchemaChange {
    pub(crate) change: &'static str,
    pub(crate) keyspace: String,
    pub(crate) table: Option<String>,
}

/// What running a statement produced.
#[derive(Debug)]
pub(crate) enum Outcome {
    Void,
    Rows(Page),
    /// A conditional statement's `[applied]` row; its columns depend on
    /// the outcome, so they travel with it (the prepared metadata is none).
    Cas(Vec<ResultColumn>, Page),
    SetKeyspace(String),
    SchemaChange(SchemaChange),
}

#[derive(Debug)]
struct KeyspaceData {
    def: KeyspaceDef,
    tables: BTreeMap<String, TableData>,
}

/// The engine.
#[derive(Debug)]
pub(crate) struct Engine {
    clock: SharedClock,
    /// The last server-chosen timestamp (µs), for strict increase.
    last_timestamp: i64,
    keyspaces: BTreeMap<String, KeyspaceData>,
    schema_version: Uuid,
    node: NodeInfo,
    default_gc_grace: u32,
    faults: FaultController,
    /// When a read's tombstones earn a warning or a failure
    /// (`select::cost`).
    thresholds: TombstoneThresholds,
    /// What charged reads cost, per table, for the handle.
    read_costs: ReadCostLog,
}

fn no_keyspace() -> CqlError {
    CqlError::invalid(
        "No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename",
    )
}

impl Engine {
    /// A fresh engine with its system keyspaces.
    pub(crate) fn new(
        clock: SharedClock,
        node: NodeInfo,
        faults: FaultController,
        default_gc_grace: u32,
        thresholds: TombstoneThresholds,
    ) -> Engine {
        let mut e = Engine {
            clock,
            last_timestamp: i64::MIN,
            keyspaces: BTreeMap::new(),
            schema_version: Uuid::nil(),
            node,
            default_gc_grace,
            faults,
            thresholds,
            read_costs: ReadCostLog::default(),
        };
        e.bootstrap();
        e
    }

    /// The tally of what charged reads cost, shared with whoever holds a
    /// clone.
    pub(crate) fn read_costs(&self) -> &ReadCostLog {
        &self.read_costs
    }

    /// A server timestamp: the clock's µs, strictly above the previous one
    /// so two writes without `USING TIMESTAMP` never tie.
    pub(crate) fn next_timestamp(&mut self) -> Timestamp {
        let now = self.clock.now().as_micros();
        let ts = now.max(self.last_timestamp.saturating_add(1));
        self.last_timestamp = ts;
        Timestamp::from_micros(ts)
    }

    fn keyspace_of<'a>(
        &self,
        session: Option<&'a str>,
        t: &'a TableName,
    ) -> Result<&'a str, CqlError> {
        t.keyspace.as_deref().or(session).ok_or_else(no_keyspace)
    }

    /// The schema of `ks.table`, or Cassandra's error for what is missing.
    fn schema(&self, ks: &str, table: &str) -> Result<SharedSchema, CqlError> {
        let k = self
            .keyspaces
            .get(ks)
            .ok_or_else(|| CqlError::invalid(format!("Keyspace {ks} does not exist")))?;
        k.tables
            .get(table)
            .map(|t| t.schema.clone())
            .ok_or_else(|| CqlError::invalid(format!("unconfigured table {table}")))
    }

    fn table_mut(&mut self, ks: &str, table: &str) -> Result<&mut TableData, CqlError> {
        self.keyspaces
            .get_mut(ks)
            .and_then(|k| k.tables.get_mut(table))
            .ok_or_else(|| CqlError::invalid(format!("unconfigured table {table}")))
    }

    fn writable(schema: &SharedSchema) -> Result<(), CqlError> {
        if system::SYSTEM_KEYSPACES.contains(&schema.keyspace.as_str()) {
            return Err(CqlError::unauthorized(format!(
                "{} keyspace is not user-modifiable",
                schema.keyspace
            )));
        }
        Ok(())
    }

    /// Compiles `stmt` in session keyspace `session`.
    pub(crate) fn compile(
        &self,
        session: Option<&str>,
        stmt: &Statement,
    ) -> Result<Prepared, CqlError> {
        let mut b = Binder::new(stmt.marker_count());
        match stmt {
            Statement::Select(s) => self.compile_select(session, s, b),
            Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) => {
                let plan = self.compile_modify(session, stmt, &mut b)?;
                let pk = compile::pk_indexes(&plan.keys);
                let schema = plan.schema.clone();
                let conditional = plan.condition.is_some();
                prepared(
                    PreparedKind::Modify(plan),
                    b,
                    pk,
                    Vec::new(),
                    vec![&schema],
                    RequestOp::Write,
                    if conditional { "CAS" } else { "SIMPLE" },
                )
                .map(|p| Prepared { conditional, ..p })
            }
            Statement::Batch(batch) => {
                let (plans, timestamp) = self.compile_batch(session, batch, &mut b)?;
                let schemas: Vec<SharedSchema> = plans.iter().map(|p| p.schema.clone()).collect();
                let mut unique: Vec<&SharedSchema> = Vec::new();
                for s in &schemas {
                    if !unique.iter().any(|u| u.id == s.id) {
                        unique.push(s);
                    }
                }
                prepared(
                    PreparedKind::Batch { plans, timestamp },
                    b,
                    Vec::new(),
                    Vec::new(),
                    unique,
                    RequestOp::Write,
                    "BATCH",
                )
            }
            Statement::Use(ks) => prepared(
                PreparedKind::Use(ks.clone()),
                b,
                Vec::new(),
                Vec::new(),
                Vec::new(),
                RequestOp::Schema,
                "SIMPLE",
            ),
            Statement::Truncate(t) => self.compile_truncate(session, t, b),
            Statement::Describe(d) => {
                let (target, cols) = describe::resolve(d, session)?;
                prepared(
                    PreparedKind::Describe(target),
                    b,
                    Vec::new(),
                    cols,
                    Vec::new(),
                    RequestOp::Schema,
                    "SIMPLE",
                )
            }
            Statement::CreateKeyspace(_)
            | Statement::CreateTable(_)
            | Statement::DropKeyspace { .. }
            | Statement::DropTable { .. } => {
                let d = ddl::Ddl::from_statement(session, stmt)?;
                prepared(
                    PreparedKind::Ddl(d),
                    b,
                    Vec::new(),
                    Vec::new(),
                    Vec::new(),
                    RequestOp::Schema,
                    "SIMPLE",
                )
            }
        }
    }

    fn compile_select(
        &self,
        session: Option<&str>,
        s: &crate::parse::ast::Select,
        mut b: Binder,
    ) -> Result<Prepared, CqlError> {
        let schema = self.schema(self.keyspace_of(session, &s.table)?, &s.table.name)?;
        let (plan, cols) = compile::select(schema.clone(), s, &mut b)?;
        let pk = match &plan.partition {
            compile::PartitionSel::Keys(k) => compile::pk_indexes(k),
            compile::PartitionSel::Scan { .. } => Vec::new(),
        };
        let kind = PreparedKind::Select(plan);
        prepared(kind, b, pk, cols, vec![&schema], RequestOp::Read, "SIMPLE")
    }

    fn compile_truncate(
        &self,
        session: Option<&str>,
        t: &TableName,
        b: Binder,
    ) -> Result<Prepared, CqlError> {
        let schema = self.schema(self.keyspace_of(session, t)?, &t.name)?;
        Self::writable(&schema)?;
        let d = ddl::Ddl::Truncate {
            keyspace: schema.keyspace.clone(),
            name: schema.name.clone(),
        };
        let kind = PreparedKind::Ddl(d);
        prepared(
            kind,
            b,
            Vec::new(),
            Vec::new(),
            vec![&schema],
            RequestOp::Write,
            "SIMPLE",
        )
    }

    /// A batch's statements (none conditional) and its `USING TIMESTAMP`.
    fn compile_batch(
        &self,
        session: Option<&str>,
        batch: &crate::parse::ast::Batch,
        b: &mut Binder,
    ) -> Result<(Vec<ModifyPlan>, Option<Operand>), CqlError> {
        if batch.counter {
            return Err(CqlError::invalid(
                "counter batches are not supported by the lockshift CQL emulator",
            ));
        }
        let mut plans = Vec::new();
        for s in &batch.statements {
            plans.push(Self::unconditional(self.compile_modify(session, s, b)?)?);
        }
        let timestamp = match &batch.timestamp {
            Some(t) => {
                if plans.iter().any(|p| p.timestamp.is_some()) {
                    return Err(CqlError::invalid(
                        "Timestamp must be set either on BATCH or individual statements",
                    ));
                }
                let schema = plans.first().map(|p| p.schema.clone()).ok_or_else(|| {
                    CqlError::invalid("a batch with USING TIMESTAMP needs at least one statement")
                })?;
                Some(b.operand(t, &schema, "[timestamp]", &crate::types::CqlType::Bigint)?)
            }
            None => None,
        };
        Ok((plans, timestamp))
    }

    fn compile_modify(
        &self,
        session: Option<&str>,
        stmt: &Statement,
        b: &mut Binder,
    ) -> Result<ModifyPlan, CqlError> {
        let table = match stmt {
            Statement::Insert(s) => &s.table,
            Statement::Update(s) => &s.table,
            Statement::Delete(s) => &s.table,
            _ => {
                return Err(CqlError::invalid(
                    "a batch may only hold INSERT, UPDATE and DELETE",
                ));
            }
        };
        let schema = self.schema(self.keyspace_of(session, table)?, &table.name)?;
        Self::writable(&schema)?;
        match stmt {
            Statement::Insert(s) => compile::insert(schema, s, b),
            Statement::Update(s) => compile::update(schema, s, b),
            Statement::Delete(s) => compile::delete(schema, s, b),
            _ => Err(CqlError::invalid(
                "a batch may only hold INSERT, UPDATE and DELETE",
            )),
        }
    }

    /// Refuses a conditional statement inside a batch (Cassandra runs such
    /// a batch as one Paxos round over one partition; nothing here needs it).
    fn unconditional(plan: ModifyPlan) -> Result<ModifyPlan, CqlError> {
        if plan.condition.is_some() {
            return Err(CqlError::invalid(
                "conditional statements (IF …) inside a BATCH are not supported by the lockshift CQL emulator",
            ));
        }
        Ok(plan)
    }

    /// Whether every table `p` was compiled against still exists unchanged
    /// (a drop and re-create gives a table a new id).
    pub(crate) fn is_current(&self, p: &Prepared) -> bool {
        p.tables.iter().all(|(ks, t, id)| {
            self.keyspaces
                .get(ks)
                .and_then(|k| k.tables.get(t))
                .is_some_and(|t| t.schema.id == *id)
        })
    }
}

/// A compiled statement: `kind`, its binds from `b`, its partition key's
/// bind indexes `pk`, its `result` columns, the `tables` it touches, the
/// request kind `op` and the write type `wt` a timeout names.
fn prepared(
    kind: PreparedKind,
    b: Binder,
    pk: Vec<u16>,
    result: Vec<ResultColumn>,
    tables: Vec<&SharedSchema>,
    op: RequestOp,
    wt: &'static str,
) -> Result<Prepared, CqlError> {
    Ok(Prepared {
        kind,
        binds: b.finish()?,
        pk_indexes: pk,
        result,
        tables: tables
            .into_iter()
            .map(|s| (s.keyspace.clone(), s.name.clone(), s.id))
            .collect(),
        op,
        conditional: false,
        write_type: wt,
    })
}

#[cfg(test)]
#[path = "engine_tests.rs"]
pub(crate) mod tests;

#[cfg(test)]
#[path = "model_tests.rs"]
mod model_tests;
