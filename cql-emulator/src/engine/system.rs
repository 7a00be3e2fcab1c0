//! The `system` and `system_schema` keyspaces drivers read, kept as ordinary
//! tables so every driver query about them goes through the normal SELECT
//! path (paging, prepared statements, `IN ?` filters and all).
//!
//! Their column sets follow Cassandra 4.0, because drivers pick their schema
//! parser from `release_version` and the Python driver reads them with
//! `SELECT *`. `system_schema` rows are rewritten on every DDL, and
//! `system.local.schema_version` changes with them, which is what a driver
//! polls to learn that its DDL has reached every node.

use std::net::IpAddr;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::engine::data::{Change, PartitionKey, TableData};
use crate::engine::schema::{ColumnKind, KeyspaceDef, TableSchema};
use crate::engine::{Engine, FAULTS_KEYSPACE, KeyspaceData, virtual_faults};
use crate::parse::ast::{Order, Statement};
use crate::value;

/// The keyspaces the endpoint owns: no user DDL or writes.
pub(crate) const SYSTEM_KEYSPACES: [&str; 2] = ["system", "system_schema"];

/// What `system.local` says about this node.
#[derive(Clone, Debug)]
pub(crate) struct NodeInfo {
    pub(crate) host_id: uuid::Uuid,
    pub(crate) rpc_address: IpAddr,
    pub(crate) rpc_port: u16,
    pub(crate) cluster_name: String,
    pub(crate) data_center: String,
    pub(crate) rack: String,
}

/// Cassandra's release string: drivers choose their schema parser by it.
pub(crate) const RELEASE_VERSION: &str = "4.0.11";
/// The CQL language version.
pub(crate) const CQL_VERSION: &str = "3.4.5";
/// The single token this node owns: one is enough for a one-node ring, and
/// drivers refuse a node without tokens.
pub(crate) const TOKEN: &str = "0";

const TABLES: &[&str] = &[
    "CREATE TABLE system.local (key text PRIMARY KEY, bootstrapped text, broadcast_address inet, \
     broadcast_port int, cluster_name text, cql_version text, data_center text, gossip_generation int, \
     host_id uuid, listen_address inet, listen_port int, native_protocol_version text, partitioner text, \
     rack text, release_version text, rpc_address inet, rpc_port int, schema_version uuid, \
     tokens set<text>, truncated_at map<uuid, blob>)",
    "CREATE TABLE system.peers (peer inet PRIMARY KEY, data_center text, host_id uuid, preferred_ip inet, \
     rack text, release_version text, rpc_address inet, schema_version uuid, tokens set<text>)",
    "CREATE TABLE system_schema.keyspaces (keyspace_name text PRIMARY KEY, durable_writes boolean, \
     replication frozen<map<text, text>>)",
    "CREATE TABLE system_schema.tables (keyspace_name text, table_name text, bloom_filter_fp_chance double, \
     caching frozen<map<text, text>>, cdc boolean, comment text, compaction frozen<map<text, text>>, \
     compression frozen<map<text, text>>, crc_check_chance double, dclocal_read_repair_chance double, \
     default_time_to_live int, extensions frozen<map<text, blob>>, flags frozen<set<text>>, \
     gc_grace_seconds int, id uuid, max_index_interval int, memtable_flush_period_in_ms int, \
     min_index_interval int, read_repair_chance double, speculative_retry text, \
     PRIMARY KEY ((keyspace_name), table_name))",
    "CREATE TABLE system_schema.columns (keyspace_name text, table_name text, column_name text, \
     clustering_order text, column_name_bytes blob, kind text, position int, type text, \
     PRIMARY KEY ((keyspace_name), table_name, column_name))",
    "CREATE TABLE system_schema.types (keyspace_name text, type_name text, field_names frozen<list<text>>, \
     field_types frozen<list<text>>, PRIMARY KEY ((keyspace_name), type_name))",
    "CREATE TABLE system_schema.functions (keyspace_name text, function_name text, \
     argument_types frozen<list<text>>, argument_names frozen<list<text>>, body text, \
     called_on_null_input boolean, language text, return_type text, \
     PRIMARY KEY ((keyspace_name), function_name, argument_types))",
    "CREATE TABLE system_schema.aggregates (keyspace_name text, aggregate_name text, \
     argument_types frozen<list<text>>, final_func text, initcond text, return_type text, \
     state_func text, state_type text, PRIMARY KEY ((keyspace_name), aggregate_name, argument_types))",
    "CREATE TABLE system_schema.triggers (keyspace_name text, table_name text, trigger_name text, \
     options frozen<map<text, text>>, PRIMARY KEY ((keyspace_name), table_name, trigger_name))",
    "CREATE TABLE system_schema.indexes (keyspace_name text, table_name text, index_name text, \
     kind text, options frozen<map<text, text>>, PRIMARY KEY ((keyspace_name), table_name, index_name))",
    "CREATE TABLE system_schema.views (keyspace_name text, view_name text, base_table_id uuid, \
     base_table_name text, bloom_filter_fp_chance double, caching frozen<map<text, text>>, cdc boolean, \
     comment text, compaction frozen<map<text, text>>, compression frozen<map<text, text>>, \
     crc_check_chance double, dclocal_read_repair_chance double, default_time_to_live int, \
     extensions frozen<map<text, blob>>, gc_grace_seconds int, id uuid, include_all_columns boolean, \
     max_index_interval int, memtable_flush_period_in_ms int, min_index_interval int, \
     read_repair_chance double, speculative_retry text, where_clause text, \
     PRIMARY KEY ((keyspace_name), view_name))",
];

/// The schemas of every system table, with stable ids.
pub(crate) fn system_tables() -> Vec<TableSchema> {
    TABLES
        .iter()
        .filter_map(|text| match crate::parse::parse(text) {
            Ok(Statement::CreateTable(ct)) => {
                let ks = ct.table.keyspace.clone().unwrap_or_default();
                let mut s = TableSchema::from_create(&ks, &ct, 0).ok()?;
                s.id = TableSchema::new(&ks, &s.name, Vec::new()).id;
                Some(s)
            }
            _ => None,
        })
        .collect()
}

/// The definition of a system keyspace.
pub(crate) fn system_keyspace(name: &str) -> KeyspaceDef {
    KeyspaceDef {
        name: name.to_string(),
        replication: vec![(
            "class".to_string(),
            "org.apache.cassandra.locator.LocalStrategy".to_string(),
        )],
        durable_writes: true,
    }
}

/// Values of a `system_schema.keyspaces` row.
pub(crate) fn keyspace_row(ks: &KeyspaceDef) -> SystemRow {
    let pairs: Vec<(&str, &str)> = ks
        .replication
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    vec![
        ("keyspace_name", Some(ks.name.as_bytes().to_vec())),
        ("durable_writes", Some(vec![u8::from(ks.durable_writes)])),
        ("replication", Some(value::text_map(&pairs))),
    ]
}

/// Values of a `system_schema.tables` row.
pub(crate) fn table_row(t: &TableSchema) -> SystemRow {
    let map = |pairs: &[(&str, &str)]| Some(value::text_map(pairs));
    let int = |v: i32| Some(v.to_be_bytes().to_vec());
    let double = |v: f64| Some(v.to_be_bytes().to_vec());
    vec![
        ("keyspace_name", Some(t.keyspace.as_bytes().to_vec())),
        ("table_name", Some(t.name.as_bytes().to_vec())),
        ("bloom_filter_fp_chance", double(0.01)),
        (
            "caching",
            map(&[("keys", "ALL"), ("rows_per_partition", "NONE")]),
        ),
        ("cdc", Some(vec![0])),
        ("comment", Some(t.comment.as_bytes().to_vec())),
        (
            "compaction",
            map(&[
                (
                    "class",
                    "org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy",
                ),
                ("max_threshold", "32"),
                ("min_threshold", "4"),
            ]),
        ),
        (
            "compression",
            map(&[
                ("chunk_length_in_kb", "16"),
                ("class", "org.apache.cassandra.io.compress.LZ4Compressor"),
            ]),
        ),
        ("crc_check_chance", double(1.0)),
        ("dclocal_read_repair_chance", double(0.0)),
        (
            "default_time_to_live",
            int(i32::try_from(t.default_ttl).unwrap_or(i32::MAX)),
        ),
        ("extensions", Some(value::map(std::iter::empty()))),
        ("flags", Some(value::text_collection(&["compound"]))),
        (
            "gc_grace_seconds",
            int(i32::try_from(t.gc_grace_seconds).unwrap_or(i32::MAX)),
        ),
        ("id", Some(t.id.as_bytes().to_vec())),
        ("max_index_interval", int(2048)),
        ("memtable_flush_period_in_ms", int(0)),
        ("min_index_interval", int(128)),
        ("read_repair_chance", double(0.0)),
        ("speculative_retry", Some(b"99p".to_vec())),
    ]
}

/// Named cell values of one system table row.
pub(crate) type SystemRow = Vec<(&'static str, Option<Vec<u8>>)>;

/// Values of the `system_schema.columns` rows of a table.
pub(crate) fn column_rows(t: &TableSchema) -> Vec<SystemRow> {
    t.columns
        .iter()
        .map(|c| {
            let order = match (c.kind, c.order) {
                (ColumnKind::Clustering, Order::Desc) => "desc",
                (ColumnKind::Clustering, Order::Asc) => "asc",
                _ => "none",
            };
            vec![
                ("keyspace_name", Some(t.keyspace.as_bytes().to_vec())),
                ("table_name", Some(t.name.as_bytes().to_vec())),
                ("column_name", Some(c.name.as_bytes().to_vec())),
                ("clustering_order", Some(order.as_bytes().to_vec())),
                ("column_name_bytes", Some(c.name.as_bytes().to_vec())),
                ("kind", Some(c.kind.as_str().as_bytes().to_vec())),
                ("position", Some(c.position.to_be_bytes().to_vec())),
                ("type", Some(c.ty.to_string().into_bytes())),
            ]
        })
        .collect()
}

/// Values of the `system.local` row.
pub(crate) fn local_row(node: &NodeInfo, schema_version: uuid::Uuid) -> SystemRow {
    let text = |s: &str| Some(s.as_bytes().to_vec());
    let inet = Some(value::inet(node.rpc_address));
    let port = Some(i32::from(node.rpc_port).to_be_bytes().to_vec());
    vec![
        ("key", text("local")),
        ("bootstrapped", text("COMPLETED")),
        ("broadcast_address", inet.clone()),
        ("broadcast_port", Some(7000i32.to_be_bytes().to_vec())),
        ("cluster_name", text(&node.cluster_name)),
        ("cql_version", text(CQL_VERSION)),
        ("data_center", text(&node.data_center)),
        ("gossip_generation", Some(1i32.to_be_bytes().to_vec())),
        ("host_id", Some(node.host_id.as_bytes().to_vec())),
        ("listen_address", inet.clone()),
        ("listen_port", Some(7000i32.to_be_bytes().to_vec())),
        ("native_protocol_version", text("4")),
        (
            "partitioner",
            text("org.apache.cassandra.dht.Murmur3Partitioner"),
        ),
        ("rack", text(&node.rack)),
        ("release_version", text(RELEASE_VERSION)),
        ("rpc_address", inet),
        ("rpc_port", port),
        ("schema_version", Some(schema_version.as_bytes().to_vec())),
        ("tokens", Some(value::text_collection(&[TOKEN]))),
    ]
}

// ===== Upkeep =====

impl Engine {
    /// Writes a row into a system table with a server timestamp.
    pub(super) fn put_system_row(
        &mut self,
        ks: &str,
        table: &str,
        cells: Vec<(&str, Option<Vec<u8>>)>,
    ) {
        let ts = self.next_timestamp();
        let now = self.clock.now();
        let Ok(schema) = self.schema(ks, table) else {
            return;
        };
        let find = |name: &str| {
            cells
                .iter()
                .find(|(n, _)| *n == name)
                .and_then(|(_, v)| v.clone())
        };
        let key_parts: Vec<Vec<u8>> = schema
            .partition_key
            .iter()
            .map(|&i| find(&schema.columns[i].name).unwrap_or_default())
            .collect();
        let ck: Vec<Vec<u8>> = schema
            .clustering
            .iter()
            .map(|&i| find(&schema.columns[i].name).unwrap_or_default())
            .collect();
        let refs: Vec<&[u8]> = key_parts.iter().map(Vec::as_slice).collect();
        let key = PartitionKey::new(&refs);
        let regular: Vec<(usize, Option<Vec<u8>>)> = schema
            .regular
            .iter()
            .filter_map(|&i| {
                cells
                    .iter()
                    .find(|(n, _)| *n == schema.columns[i].name)
                    .map(|(_, v)| (i, v.clone()))
            })
            .collect();
        let change = Change::Upsert {
            clustering: schema.clustering_key(ck),
            marker: true,
            cells: regular,
            timestamp: ts,
            ttl: None,
        };
        if let Ok(t) = self.table_mut(ks, table) {
            t.apply(key, change, now);
        }
    }

    pub(super) fn bootstrap(&mut self) {
        for ks in SYSTEM_KEYSPACES {
            self.keyspaces.insert(
                ks.to_string(),
                KeyspaceData {
                    def: system_keyspace(ks),
                    tables: BTreeMap::new(),
                },
            );
        }
        let tables = system_tables();
        for t in &tables {
            if let Some(k) = self.keyspaces.get_mut(&t.keyspace) {
                k.tables
                    .insert(t.name.clone(), TableData::new(Arc::new(t.clone())));
            }
        }
        for ks in SYSTEM_KEYSPACES {
            self.put_system_row(
                "system_schema",
                "keyspaces",
                keyspace_row(&system_keyspace(ks)),
            );
        }
        for t in &tables {
            self.write_table_schema(t);
        }
        // The fault table is listed in system_schema so clients that check
        // statements against their schema metadata (cqlsh) accept it.
        let faults = virtual_faults::schema();
        self.put_system_row(
            "system_schema",
            "keyspaces",
            keyspace_row(&system_keyspace(FAULTS_KEYSPACE)),
        );
        self.write_table_schema(&faults);
        self.keyspaces.insert(
            FAULTS_KEYSPACE.to_string(),
            KeyspaceData {
                def: system_keyspace(FAULTS_KEYSPACE),
                tables: BTreeMap::from([("faults".to_string(), TableData::new(Arc::new(faults)))]),
            },
        );
        self.bump_schema_version();
    }

    pub(super) fn write_table_schema(&mut self, t: &TableSchema) {
        self.put_system_row("system_schema", "tables", table_row(t));
        for row in column_rows(t) {
            self.put_system_row("system_schema", "columns", row);
        }
    }

    /// A new schema version, published in `system.local`.
    pub(super) fn bump_schema_version(&mut self) {
        self.schema_version = uuid::Builder::from_random_bytes(rand::random()).into_uuid();
        let row = local_row(&self.node, self.schema_version);
        self.put_system_row("system", "local", row);
    }
}

/// lockshift's table shape, for unit tests.
#[cfg(test)]
pub(crate) fn test_schema() -> TableSchema {
    match crate::parse::parse(
        "CREATE TABLE ks.main (row_key text, column_name text, value blob, PRIMARY KEY ((row_key), column_name))",
    ) {
        Ok(Statement::CreateTable(ct)) => {
            TableSchema::from_create("ks", &ct, 3600).expect("schema")
        }
        other => panic!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_system_table_builds_with_a_stable_id() {
        let a = system_tables();
        assert_eq!(a.len(), TABLES.len());
        let b = system_tables();
        assert!(a.iter().zip(&b).all(|(x, y)| x.id == y.id));
        let columns = a.iter().find(|t| t.name == "columns").unwrap();
        assert_eq!(columns.partition_key.len(), 1);
        assert_eq!(columns.clustering.len(), 2);
    }
}
