//! `migrate schema`: the CQL that creates lockshift's keyspace and tables,
//! for operators who manage schema themselves (`cqlsh -f`). Nothing is
//! created by a service or by `migrate` unless asked; this is how to ask
//! with the replication the cluster needs.

use std::collections::BTreeMap;

use lockshift_store::CqlStore;
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
    })
}
