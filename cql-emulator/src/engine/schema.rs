//! Table and keyspace definitions, built from `CREATE` statements and
//! checked the way Cassandra checks them.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use crate::engine::data::{Clustering, KeyPart};
use crate::error::CqlError;
use crate::parse::ast::{CreateTable, Literal, Order};
use crate::types::CqlType;
use crate::value::Collation;

/// The longest TTL Cassandra accepts (20 years), in seconds.
pub(crate) const MAX_TTL_SECS: i64 = 630_720_000;

/// What role a column plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ColumnKind {
    PartitionKey,
    Clustering,
    Regular,
}

impl ColumnKind {
    /// The `system_schema.columns.kind` spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ColumnKind::PartitionKey => "partition_key",
            ColumnKind::Clustering => "clustering",
            ColumnKind::Regular => "regular",
        }
    }
}

/// One column.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ColumnDef {
    pub(crate) name: String,
    pub(crate) ty: CqlType,
    pub(crate) kind: ColumnKind,
    /// Position among the partition key or clustering columns; -1 for regular.
    pub(crate) position: i32,
    pub(crate) order: Order,
    pub(crate) collation: Collation,
}

/// A table's schema. Columns are in `SELECT *` order: partition key,
/// clustering, then regular columns by name.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TableSchema {
    /// Changes when a table is dropped and re-created under the same name,
    /// which invalidates statements prepared against the old one.
    pub(crate) id: Uuid,
    pub(crate) keyspace: String,
    pub(crate) name: String,
    pub(crate) columns: Vec<ColumnDef>,
    pub(crate) partition_key: Vec<usize>,
    pub(crate) clustering: Vec<usize>,
    pub(crate) regular: Vec<usize>,
    pub(crate) default_ttl: u32,
    pub(crate) gc_grace_seconds: u32,
    pub(crate) comment: String,
}

/// Table options accepted and kept only for show (Cassandra tuning knobs
/// that mean nothing to an in-memory store).
const IGNORED_TABLE_OPTIONS: &[&str] = &[
    "bloom_filter_fp_chance",
    "caching",
    "cdc",
    "compaction",
    "compression",
    "crc_check_chance",
    "dclocal_read_repair_chance",
    "extensions",
    "max_index_interval",
    "memtable_flush_period_in_ms",
    "min_index_interval",
    "read_repair",
    "read_repair_chance",
    "speculative_retry",
    "additional_write_policy",
];

fn int_option(name: &str, lit: &Literal, max: i64) -> Result<u32, CqlError> {
    let v = match lit {
        Literal::Int(s) => s.parse::<i64>().ok(),
        _ => None,
    };
    match v {
        Some(v) if (0..=max).contains(&v) => Ok(u32::try_from(v).unwrap_or(u32::MAX)),
        _ => Err(CqlError::invalid(format!(
            "{name} must be an integer between 0 and {max}"
        ))),
    }
}

impl TableSchema {
    /// Builds and checks a schema from `CREATE TABLE` in `keyspace`.
    pub(crate) fn from_create(
        keyspace: &str,
        ct: &CreateTable,
        default_gc_grace: u32,
    ) -> Result<TableSchema, CqlError> {
        let table = &ct.table.name;
        if ct.compact_storage {
            return Err(CqlError::invalid(
                "COMPACT STORAGE is not supported by the lockshift CQL emulator",
            ));
        }
        if !valid_name(table) {
            return Err(CqlError::invalid(format!(
                "\"{table}\" is not a valid table name (letters, digits and _, at most 48 characters)"
            )));
        }
        let (defs, inline_pk) = column_defs(ct)?;
        let (partition, clustering) = primary_key(ct, inline_pk, &defs)?;
        let order_of = |name: &str| {
            ct.clustering_order
                .iter()
                .find(|(n, _)| n == name)
                .map_or(Order::Asc, |(_, o)| *o)
        };
        let mut columns = Vec::new();
        let col = |name: &str, kind, position, order| {
            let ty = defs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, t)| (*t).clone())
                .unwrap_or(CqlType::Blob);
            ColumnDef {
                name: name.to_string(),
                collation: Collation::of(&ty),
                ty,
                kind,
                position,
                order,
            }
        };
        for (i, name) in partition.iter().enumerate() {
            columns.push(col(name, ColumnKind::PartitionKey, i as i32, Order::Asc));
        }
        for (i, name) in clustering.iter().enumerate() {
            columns.push(col(name, ColumnKind::Clustering, i as i32, order_of(name)));
        }
        let mut regular: Vec<&str> = defs
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| !partition.iter().chain(&clustering).any(|k| k == n))
            .collect();
        regular.sort_unstable();
        for name in regular {
            columns.push(col(name, ColumnKind::Regular, -1, Order::Asc));
        }
        let mut schema = TableSchema::new(keyspace, table, columns);
        schema.id = fresh_table_id();
        schema.gc_grace_seconds = default_gc_grace;
        schema.apply_options(&ct.options)?;
        Ok(schema)
    }

    /// The table options of `CREATE TABLE … WITH`, applied.
    fn apply_options(&mut self, options: &[(String, Literal)]) -> Result<(), CqlError> {
        for (name, lit) in options {
            match name.as_str() {
                "default_time_to_live" => {
                    self.default_ttl = int_option(name, lit, MAX_TTL_SECS)?;
                }
                "gc_grace_seconds" => {
                    self.gc_grace_seconds = int_option(name, lit, i64::from(i32::MAX))?;
                }
                "comment" => match lit {
                    Literal::Str(s) => self.comment = s.clone(),
                    _ => return Err(CqlError::invalid("comment must be a string")),
                },
                n if IGNORED_TABLE_OPTIONS.contains(&n) => {}
                other => return Err(CqlError::syntax(format!("Unknown property '{other}'"))),
            }
        }
        Ok(())
    }

    /// A schema from already-ordered columns (system tables use this).
    pub(crate) fn new(keyspace: &str, name: &str, columns: Vec<ColumnDef>) -> TableSchema {
        let of = |k: ColumnKind| {
            columns
                .iter()
                .enumerate()
                .filter(|(_, c)| c.kind == k)
                .map(|(i, _)| i)
                .collect::<Vec<_>>()
        };
        TableSchema {
            id: table_id(keyspace, name),
            keyspace: keyspace.to_string(),
            name: name.to_string(),
            partition_key: of(ColumnKind::PartitionKey),
            clustering: of(ColumnKind::Clustering),
            regular: of(ColumnKind::Regular),
            columns,
            default_ttl: 0,
            gc_grace_seconds: 3600,
            comment: String::new(),
        }
    }

    /// The index of column `name`.
    pub(crate) fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// The column `name` or Cassandra's "Undefined column name" error.
    pub(crate) fn require(&self, name: &str) -> Result<usize, CqlError> {
        self.column(name).ok_or_else(|| {
            CqlError::invalid(format!(
                "Undefined column name {name} in table {}.{}",
                self.keyspace, self.name
            ))
        })
    }

    pub(crate) fn gc_grace(&self) -> Duration {
        Duration::from_secs(u64::from(self.gc_grace_seconds))
    }

    /// Builds a full clustering key from raw component values.
    pub(crate) fn clustering_key(&self, raw: Vec<Vec<u8>>) -> Clustering {
        Clustering::exact(self.key_parts(raw))
    }

    /// Clustering components for a prefix of raw values.
    pub(crate) fn key_parts(&self, raw: Vec<Vec<u8>>) -> Vec<KeyPart> {
        raw.into_iter()
            .zip(&self.clustering)
            .map(|(raw, &i)| KeyPart {
                raw,
                collation: self.columns[i].collation,
                desc: self.columns[i].order == Order::Desc,
            })
            .collect()
    }
}

/// A fresh, random table id. Only the system tables get stable ones (from
/// [`table_id`]); user tables get a new id on every CREATE so a statement
/// prepared against a dropped table is never run against its successor.
pub(crate) fn fresh_table_id() -> Uuid {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid()
}

/// A stable id derived from the table's name.
fn table_id(keyspace: &str, name: &str) -> Uuid {
    let (a, b) = crate::murmur3::hash3_x64_128(format!("{keyspace}.{name}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&a.to_be_bytes());
    bytes[8..].copy_from_slice(&b.to_be_bytes());
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// Keyspace and table names: `[A-Za-z0-9_]{1,48}` (Cassandra's rule).
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 48
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A keyspace definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyspaceDef {
    pub(crate) name: String,
    /// `replication` map, `class` fully qualified as Cassandra stores it.
    pub(crate) replication: Vec<(String, String)>,
    pub(crate) durable_writes: bool,
}

impl KeyspaceDef {
    /// Builds and checks a keyspace from `CREATE KEYSPACE` properties.
    pub(crate) fn from_properties(
        name: &str,
        props: &[(String, Literal)],
    ) -> Result<KeyspaceDef, CqlError> {
        if !valid_name(name) {
            return Err(CqlError::invalid(format!(
                "\"{name}\" is not a valid keyspace name (letters, digits and _, at most 48 characters)"
            )));
        }
        let mut replication = None;
        let mut durable_writes = true;
        for (key, lit) in props {
            match (key.as_str(), lit) {
                ("replication", Literal::Map(entries)) => {
                    let mut map = Vec::new();
                    for (k, v) in entries {
                        let text = |t: &crate::parse::ast::Term| match t {
                            crate::parse::ast::Term::Literal(
                                Literal::Str(s) | Literal::Int(s) | Literal::Float(s),
                            ) => Some(s.clone()),
                            _ => None,
                        };
                        match (text(k), text(v)) {
                            (Some(k), Some(v)) => map.push((k, v)),
                            _ => {
                                return Err(CqlError::syntax(
                                    "replication options must be strings or numbers",
                                ));
                            }
                        }
                    }
                    replication = Some(map);
                }
                ("durable_writes", Literal::Bool(b)) => durable_writes = *b,
                ("durable_writes", Literal::Str(s)) if s.parse::<bool>().is_ok() => {
                    durable_writes = s == "true";
                }
                ("replication" | "durable_writes", _) => {
                    return Err(CqlError::syntax(format!(
                        "Invalid value for property '{key}'"
                    )));
                }
                (other, _) => return Err(CqlError::syntax(format!("Unknown property '{other}'"))),
            }
        }
        let mut replication = replication
            .ok_or_else(|| CqlError::syntax("Missing mandatory option 'replication'"))?;
        let class = replication
            .iter()
            .position(|(k, _)| k == "class")
            .map(|i| replication.remove(i).1)
            .ok_or_else(|| {
                CqlError::new(
                    crate::error::ErrorKind::Invalid,
                    "Missing replication strategy class",
                )
            })?;
        let class = match class.as_str() {
            "SimpleStrategy" | "org.apache.cassandra.locator.SimpleStrategy" => {
                if !replication.iter().any(|(k, _)| k == "replication_factor") {
                    return Err(CqlError::invalid(
                        "SimpleStrategy requires a replication_factor strategy option.",
                    ));
                }
                "org.apache.cassandra.locator.SimpleStrategy"
            }
            "NetworkTopologyStrategy" | "org.apache.cassandra.locator.NetworkTopologyStrategy" => {
                "org.apache.cassandra.locator.NetworkTopologyStrategy"
            }
            "LocalStrategy" | "org.apache.cassandra.locator.LocalStrategy" => {
                "org.apache.cassandra.locator.LocalStrategy"
            }
            other => {
                return Err(CqlError::invalid(format!(
                    "Unable to find replication strategy class '{other}'"
                )));
            }
        };
        for (k, v) in &replication {
            if v.parse::<u32>().is_err() {
                return Err(CqlError::invalid(format!(
                    "Replication factor must be a non-negative integer; found {v} for {k}"
                )));
            }
        }
        replication.push(("class".to_string(), class.to_string()));
        replication.sort();
        Ok(KeyspaceDef {
            name: name.to_string(),
            replication,
            durable_writes,
        })
    }
}

/// A table schema shared by the catalog and compiled statements.
pub(crate) type SharedSchema = Arc<TableSchema>;

/// A column's name and type, as `CREATE TABLE` defines it.
type ColumnDecl<'a> = (&'a str, &'a CqlType);

/// The columns of `CREATE TABLE` (name and type, in order), and those
/// marked `PRIMARY KEY` inline.
fn column_defs(ct: &CreateTable) -> Result<(Vec<ColumnDecl<'_>>, Vec<String>), CqlError> {
    let mut defs: Vec<(&str, &CqlType)> = Vec::new();
    let mut inline_pk = Vec::new();
    for c in &ct.columns {
        if defs.iter().any(|(n, _)| *n == c.name) {
            return Err(CqlError::invalid(format!(
                "Multiple definition of identifier {}",
                c.name
            )));
        }
        if c.is_static {
            return Err(CqlError::invalid(
                "static columns are not supported by the lockshift CQL emulator",
            ));
        }
        if matches!(c.ty.unfrozen(), CqlType::Counter) {
            return Err(CqlError::invalid(
                "counter columns are not supported by the lockshift CQL emulator",
            ));
        }
        if c.primary_key {
            inline_pk.push(c.name.clone());
        }
        defs.push((&c.name, &c.ty));
    }
    Ok((defs, inline_pk))
}

/// The partition and clustering columns, checked: one PRIMARY KEY, every
/// column defined once and of a key type, CLUSTERING ORDER in key order.
fn primary_key(
    ct: &CreateTable,
    inline_pk: Vec<String>,
    defs: &[ColumnDecl<'_>],
) -> Result<(Vec<String>, Vec<String>), CqlError> {
    let (partition, clustering) = match (&ct.primary_key, inline_pk.len()) {
        (Some(_), n) if n > 0 => {
            return Err(CqlError::invalid(
                "Multiple PRIMARY KEYs specified (exactly one required)",
            ));
        }
        (Some((p, c)), _) => (p.clone(), c.clone()),
        (None, 1) => (inline_pk, Vec::new()),
        (None, 0) => {
            return Err(CqlError::invalid(
                "No PRIMARY KEY specified for table (exactly one required)",
            ));
        }
        (None, _) => {
            return Err(CqlError::invalid(
                "Multiple PRIMARY KEYs specified (exactly one required)",
            ));
        }
    };
    let mut key_names: Vec<&String> = partition.iter().chain(&clustering).collect();
    for name in &key_names {
        let Some((_, ty)) = defs.iter().find(|(n, _)| n == name) else {
            return Err(CqlError::invalid(format!(
                "Unknown definition {name} referenced in PRIMARY KEY"
            )));
        };
        if ty.is_multi_cell() {
            return Err(CqlError::invalid(format!(
                "Invalid non-frozen collection type {ty} for PRIMARY KEY component {name}"
            )));
        }
        if matches!(ty.unfrozen(), CqlType::Duration) {
            return Err(CqlError::invalid(format!(
                "duration type is not supported for PRIMARY KEY column '{name}'"
            )));
        }
    }
    key_names.sort();
    if key_names.windows(2).any(|w| w[0] == w[1]) {
        return Err(CqlError::invalid(
            "A column appears more than once in the PRIMARY KEY",
        ));
    }
    // Clustering order must list clustering columns in key order.
    if ct.clustering_order.len() > clustering.len()
        || ct
            .clustering_order
            .iter()
            .zip(&clustering)
            .any(|((n, _), c)| n != c)
    {
        return Err(CqlError::invalid(
            "CLUSTERING ORDER BY must list the clustering columns in the order of the PRIMARY KEY",
        ));
    }
    Ok((partition, clustering))
}
