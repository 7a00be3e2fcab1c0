//! Running prepared statements: one at a time, conditionally (LWT), or
//! as a protocol BATCH.

use lockshift_store::Timestamp;

use crate::engine::bind::Bound;
use crate::engine::compile::ModifyPlan;
use crate::engine::data::{Change, PartitionKey};
use crate::engine::schema::SharedSchema;
use crate::engine::{
    Engine, ExecOptions, FAULTS_KEYSPACE, Outcome, Prepared, PreparedKind, STORAGE_PORT, cas,
    modify, select, system, virtual_faults,
};
use crate::error::CqlError;
use crate::wire::Value;

impl Engine {
    /// Runs `p`.
    pub(crate) fn execute(
        &mut self,
        p: &Prepared,
        opts: &ExecOptions<'_>,
    ) -> Result<Outcome, CqlError> {
        let now = self.clock.now();
        let values = Bound::new(opts.values, &p.binds, now)?;
        match &p.kind {
            PreparedKind::Select(plan) => {
                let (ks, name) = (&plan.schema.keyspace, &plan.schema.name);
                let page = if ks == FAULTS_KEYSPACE {
                    let mut snapshot = virtual_faults::snapshot(&self.faults, plan.schema.clone());
                    select::run(
                        &mut snapshot,
                        plan,
                        &values,
                        opts.page_size,
                        opts.paging_state,
                        None,
                    )?
                } else {
                    // Cassandra exempts its local system keyspaces.
                    let charging = (!system::SYSTEM_KEYSPACES.contains(&ks.as_str())).then(|| {
                        select::cost::Charging {
                            thresholds: self.thresholds,
                            replica: format!("{}:{STORAGE_PORT}", self.node.rpc_address),
                            consistency: opts.consistency,
                        }
                    });
                    let table = self.table_mut(ks, name)?;
                    let page = select::run(
                        table,
                        plan,
                        &values,
                        opts.page_size,
                        opts.paging_state,
                        charging.as_ref(),
                    )?;
                    if let Some(tombstones) = page.tombstones {
                        self.read_costs
                            .record(ks, name, tombstones, !page.warnings.is_empty());
                    }
                    page
                };
                Ok(Outcome::Rows(page))
            }
            PreparedKind::Modify(plan) if plan.condition.is_some() => {
                self.execute_cas(plan, &values, now)
            }
            PreparedKind::Modify(plan) => {
                let ts = self.default_timestamp(opts.default_timestamp);
                let changes = modify::changes(plan, &values, ts)?;
                self.apply_all(vec![(plan.schema.clone(), changes)], now)?;
                Ok(Outcome::Void)
            }
            PreparedKind::Batch { plans, timestamp } => {
                let ts = match timestamp {
                    Some(op) => match values.value(op)? {
                        Value::Bytes(b) => crate::value::as_i64(&b)
                            .map(Timestamp::from_micros)
                            .ok_or_else(|| CqlError::invalid("Invalid timestamp value"))?,
                        Value::Null => {
                            return Err(CqlError::invalid("Invalid null value of timestamp"));
                        }
                        Value::Unset => self.default_timestamp(opts.default_timestamp),
                    },
                    None => self.default_timestamp(opts.default_timestamp),
                };
                let mut all = Vec::new();
                for plan in plans {
                    all.push((plan.schema.clone(), modify::changes(plan, &values, ts)?));
                }
                self.apply_all(all, now)?;
                Ok(Outcome::Void)
            }
            PreparedKind::Ddl(d) => self.ddl(d),
            PreparedKind::Describe(t) => Ok(Outcome::Rows(self.describe(t)?)),
            PreparedKind::Use(ks) => {
                if self.keyspaces.contains_key(ks) {
                    Ok(Outcome::SetKeyspace(ks.clone()))
                } else {
                    Err(CqlError::invalid(format!("Keyspace '{ks}' does not exist")))
                }
            }
        }
    }

    /// Runs a conditional statement: read the addressed row, check the
    /// condition, apply iff it holds — all under the engine lock, so per
    /// partition (indeed globally) linearizable.
    fn execute_cas(
        &mut self,
        plan: &ModifyPlan,
        values: &Bound<'_>,
        now: Timestamp,
    ) -> Result<Outcome, CqlError> {
        let Some(condition) = &plan.condition else {
            return Err(CqlError::server("a plain statement ran as conditional"));
        };
        // Cassandra stamps an LWT with its Paxos ballot, never the client's
        // timestamp; the server clock's strictly increasing timestamp plays
        // that part, so a later LWT always supersedes an earlier one.
        let ts = self.next_timestamp();
        let changes = modify::changes(plan, values, ts)?;
        let (key, ck) = modify::cas_row(plan, values)?;
        let table = self.table_mut(&plan.schema.keyspace, &plan.schema.name)?;
        let current = cas::current_row(table, &key, &ck, now);
        let applied = cas::applies(&plan.schema, condition, current.as_ref(), values)?;
        if applied {
            self.apply_all(vec![(plan.schema.clone(), changes)], now)?;
        }
        let (columns, page) = cas::result(&plan.schema, condition, applied, current);
        Ok(Outcome::Cas(columns, page))
    }

    /// Runs a protocol BATCH: each statement with its own values, all with
    /// one timestamp, checked whole before anything is applied.
    pub(crate) fn execute_batch(
        &mut self,
        items: &[(&Prepared, &[Value])],
        default_timestamp: Option<i64>,
    ) -> Result<Outcome, CqlError> {
        let now = self.clock.now();
        let ts = self.default_timestamp(default_timestamp);
        let mut all = Vec::new();
        for (p, vals) in items {
            let PreparedKind::Modify(plan) = &p.kind else {
                return Err(CqlError::invalid(
                    "Invalid statement in batch: only UPDATE, INSERT and DELETE statements are allowed.",
                ));
            };
            if plan.condition.is_some() {
                return Err(CqlError::invalid(
                    "conditional statements (IF …) inside a BATCH are not supported by the lockshift CQL emulator",
                ));
            }
            let values = Bound::new(vals, &p.binds, now)?;
            all.push((plan.schema.clone(), modify::changes(plan, &values, ts)?));
        }
        self.apply_all(all, now)?;
        Ok(Outcome::Void)
    }

    fn default_timestamp(&mut self, client: Option<i64>) -> Timestamp {
        match client {
            Some(t) => Timestamp::from_micros(t),
            None => self.next_timestamp(),
        }
    }

    /// Applies changes to their tables; the virtual fault table's are
    /// checked first, so a rejected fault row leaves nothing applied.
    fn apply_all(
        &mut self,
        groups: Vec<(SharedSchema, Vec<(PartitionKey, Change)>)>,
        now: Timestamp,
    ) -> Result<(), CqlError> {
        let mut fault_ops = Vec::new();
        for (schema, changes) in &groups {
            if schema.keyspace == FAULTS_KEYSPACE {
                fault_ops.extend(virtual_faults::plan(&self.faults, schema, changes)?);
            }
        }
        for (schema, changes) in groups {
            if schema.keyspace == FAULTS_KEYSPACE {
                continue;
            }
            let table = self.table_mut(&schema.keyspace, &schema.name)?;
            for (key, change) in changes {
                table.apply(key, change, now);
            }
        }
        virtual_faults::apply(&self.faults, fault_ops)
    }
}
