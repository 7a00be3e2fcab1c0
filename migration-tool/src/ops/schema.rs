//! `migrate schema`: the CQL that creates lockshift's keyspace and tables,
//! for operators who manage schema themselves (`cqlsh -f`). Nothing is
//! created by a service or by `migrate` unless asked; this is how to ask
//! with the replication the cluster needs.

use std::collections::BTreeMap;

use anyhow::Context;

use lockshift_store::CqlStore;
use lockshift_store::schema::{LOCK_TABLES_GC_GRACE_SECONDS, REGISTRY_GC_GRACE_SECONDS};
use lockshift_store::settings::{CqlSettings, Replication};
use serde::Serialize;

use crate::{JSON_VERSION, UsageError};

/// The report of `migrate schema` (JSON schema, `"version": 1`).
#[derive(Debug, Clone, Serialize)]
pub struct SchemaReport {
    /// Schema version, 1.
    pub version: u32,
    /// The keyspace.
    pub keyspace: String,
    /// Its replication, as CQL.
    pub replication: String,
    /// Every statement, in the order to run them: the keyspace, every
    /// table, then `ALTER TABLE` for every table so that tables which
    /// exist already (`main` and `shadow` usually predate lockshift) get
    /// lockshift's options too (docs/design.md §2a).
    pub statements: Vec<String>,
    /// What the operator should know before running them (printed as CQL
    /// comments, so the output still pipes into `cqlsh`).
    pub warnings: Vec<String>,
    /// The tables' options and why, in words (printed as a CQL comment).
    pub options: String,
    /// With `--apply`: what became of each statement run against the
    /// cluster; `null` when only printed.
    pub applied: Option<Vec<AppliedStep>>,
    /// With `--home`: the first home, recorded before any process starts
    /// (`null` without it).
    pub home: Option<super::schema_home::HomeRecorded>,
}

/// One statement `migrate schema --apply` ran.
#[derive(Debug, Clone, Serialize)]
pub struct AppliedStep {
    /// The statement.
    pub statement: String,
    /// What the cluster did with it.
    pub outcome: StepOutcome,
    /// The cluster's answer when it did not apply it.
    pub error: Option<String>,
}

/// What became of a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepOutcome {
    /// Run (a `CREATE … IF NOT EXISTS` of something that exists changes
    /// nothing).
    Applied,
    /// The local CQL endpoint does not implement `ALTER`; its tables were
    /// created with these options, so nothing is missing there.
    Unsupported,
    /// The cluster refused it (`migrate` exits 1).
    Refused,
}

/// The local CQL endpoint's answer to `ALTER` (cql-emulator's parser).
const ENDPOINT_NO_ALTER: &str = "ALTER is not supported by the lockshift CQL emulator";

/// How a refusal of a step reads: an `ALTER` the local endpoint does not
/// implement is tolerated, any other refusal is not.
pub fn step_outcome(refusal: Option<&str>) -> StepOutcome {
    match refusal {
        None => StepOutcome::Applied,
        Some(message) if message.contains(ENDPOINT_NO_ALTER) => StepOutcome::Unsupported,
        Some(_) => StepOutcome::Refused,
    }
}

/// Runs `report`'s statements (made by [`schema`] from `cql`, with
/// [`with_replication`] applied) against `cql`'s cluster (the keyspace and
/// tables where missing, then every table's options) and records what
/// became of each in `report.applied`.
///
/// # Errors
/// No connection, or a refused `CREATE` (the store error).
pub async fn apply(cql: &CqlSettings, report: &mut SchemaReport) -> anyhow::Result<()> {
    let steps = CqlStore::apply_schema(cql)
        .await
        .with_context(|| format!("applying the schema of keyspace {}", report.keyspace))?;
    report.applied = Some(
        steps
            .into_iter()
            .map(|step| {
                let error = step.refused.map(|e| e.to_string());
                AppliedStep {
                    outcome: step_outcome(error.as_deref()),
                    statement: step.statement,
                    error,
                }
            })
            .collect(),
    );
    Ok(())
}

/// The statements for `cql`'s keyspace, with `datacenters`
/// (NetworkTopologyStrategy) or `replication_factor` (SimpleStrategy)
/// replacing the configured replication when given.
///
/// # Errors
/// A [`UsageError`] for a replication factor of 0.
pub fn schema(
    cql: &CqlSettings,
    datacenters: &[(String, u32)],
    replication_factor: Option<u32>,
) -> anyhow::Result<SchemaReport> {
    let cql = with_replication(cql, datacenters, replication_factor)?;
    let mut warnings = Vec::new();
    if let Replication::SimpleStrategy {
        replication_factor: rf @ (1 | 2),
    } = cql.replication
    {
        // QUORUM of 1 or 2 replicas is all of them: one node down stops
        // every lock, and with one replica a lost disk loses the lock state.
        warnings.push(format!(
            "{rf} replica(s): every lock stops while one replica is down; for a \
             production cluster give --datacenter NAME:3 (or set store.cql.replication)"
        ));
    }
    Ok(SchemaReport {
        version: JSON_VERSION,
        keyspace: cql.keyspace.clone(),
        replication: cql.replication.to_cql(),
        statements: CqlStore::schema_cql(&cql)
            .into_iter()
            .chain(CqlStore::schema_options_cql(&cql))
            .collect(),
        warnings,
        options: options_why(),
        applied: None,
        home: None,
    })
}

/// The tables' options and why: gc grace per table, compaction left at
/// Cassandra's default ([`lockshift_store::schema`]).
fn options_why() -> String {
    use lockshift_store::schema::{ALL, options};
    let at = |grace: u32| -> String {
        ALL.iter()
            .filter(|t| options(**t).gc_grace_seconds == grace)
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "{} keep tombstones for gc_grace_seconds = {LOCK_TABLES_GC_GRACE_SECONDS} and {} for \
         {REGISTRY_GC_GRACE_SECONDS}: every cell lockshift writes there has a TTL below it (a \
         lease TTL, 60s by default; the registry's, at most 5m), so purging a tombstone cannot \
         bring a deleted cell back live, and a read of a lock passes about one tombstone per \
         process that took it in the last gc grace and lease TTL (docs/design.md §2a); the \
         other tables are only overwritten and keep Cassandra's default. Compaction is \
         Cassandra's default: what tombstones cost a read does not depend on it",
        at(LOCK_TABLES_GC_GRACE_SECONDS),
        at(REGISTRY_GC_GRACE_SECONDS),
    )
}

/// `cql` with `datacenters` (NetworkTopologyStrategy) or
/// `replication_factor` (SimpleStrategy) replacing its replication when
/// given.
///
/// # Errors
/// A [`UsageError`] for a replication factor of 0.
pub fn with_replication(
    cql: &CqlSettings,
    datacenters: &[(String, u32)],
    replication_factor: Option<u32>,
) -> anyhow::Result<CqlSettings> {
    let mut cql = cql.clone();
    if datacenters.iter().any(|(_, rf)| *rf == 0) || replication_factor == Some(0) {
        return Err(UsageError("a replication factor must be at least 1".into()).into());
    }
    if !datacenters.is_empty() {
        cql.replication = Replication::NetworkTopologyStrategy {
            datacenters: datacenters.iter().cloned().collect::<BTreeMap<_, _>>(),
        };
    } else if let Some(rf) = replication_factor {
        cql.replication = Replication::SimpleStrategy {
            replication_factor: rf,
        };
    }
    Ok(cql)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--apply`: an `ALTER` the local endpoint does not implement is
    /// tolerated (its tables were created with the options); any other
    /// refusal is not.
    #[test]
    fn only_the_endpoint_s_missing_alter_is_tolerated() {
        for (refusal, outcome) in [
            (None, StepOutcome::Applied),
            (
                Some(
                    "write on table main failed: running `ALTER TABLE lockshift.main WITH …`: \
                     ALTER is not supported by the lockshift CQL emulator; drop and re-create \
                     the table",
                ),
                StepOutcome::Unsupported,
            ),
            (
                Some("write on table main was rejected as invalid: Unauthorized"),
                StepOutcome::Refused,
            ),
        ] {
            assert_eq!(step_outcome(refusal), outcome, "{refusal:?}");
        }
    }
}
