//! Server-side `DESCRIBE`, as Cassandra 4 answers it: cqlsh 6 sends
//! `DESCRIBE …` as a statement to a 4.x server and prints the rows (names
//! for the list forms, `create_statement` for the others).

use crate::engine::compile::ResultColumn;
use crate::engine::schema::{ColumnKind, KeyspaceDef, TableSchema};
use crate::engine::select::Page;
use crate::engine::{Engine, system};
use crate::error::CqlError;
use crate::parse::ast::{Describe, Order};
use crate::types::CqlType;

/// A DESCRIBE with its names resolved against the session keyspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DescribeTarget {
    Keyspaces,
    Tables(Option<String>),
    Cluster,
    Schema {
        full: bool,
    },
    Keyspace(String),
    Table(String, String),
    /// `DESCRIBE name`: a keyspace if one has that name, else a table of
    /// the session keyspace.
    Name(String, Option<String>),
}

fn column(name: &str) -> ResultColumn {
    ResultColumn {
        keyspace: "system".to_string(),
        table: "describe".to_string(),
        name: name.to_string(),
        ty: CqlType::Text,
    }
}

/// Resolves names and returns the target with its result columns.
pub(crate) fn resolve(
    d: &Describe,
    session: Option<&str>,
) -> Result<(DescribeTarget, Vec<ResultColumn>), CqlError> {
    let no_ks = || {
        CqlError::invalid(
            "No keyspace specified and no current keyspace (USE a keyspace or name one)",
        )
    };
    let target = match d {
        Describe::Keyspaces => DescribeTarget::Keyspaces,
        Describe::Tables => DescribeTarget::Tables(session.map(str::to_string)),
        Describe::Cluster => DescribeTarget::Cluster,
        Describe::Schema { full } => DescribeTarget::Schema { full: *full },
        Describe::Keyspace(ks) => DescribeTarget::Keyspace(
            ks.clone()
                .or(session.map(str::to_string))
                .ok_or_else(no_ks)?,
        ),
        Describe::Table(t) => DescribeTarget::Table(
            t.keyspace
                .clone()
                .or(session.map(str::to_string))
                .ok_or_else(no_ks)?,
            t.name.clone(),
        ),
        Describe::Name(t) => match &t.keyspace {
            Some(ks) => DescribeTarget::Table(ks.clone(), t.name.clone()),
            None => DescribeTarget::Name(t.name.clone(), session.map(str::to_string)),
        },
    };
    let names = ["keyspace_name", "type", "name"];
    let cols: Vec<ResultColumn> = match target {
        DescribeTarget::Cluster => ["cluster", "partitioner", "snitch"].map(column).to_vec(),
        DescribeTarget::Keyspaces | DescribeTarget::Tables(_) => names.map(column).to_vec(),
        _ => names
            .iter()
            .chain(&["create_statement"])
            .map(|n| column(n))
            .collect(),
    };
    Ok((target, cols))
}

/// An identifier as CQL needs it written.
fn ident(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn create_keyspace(k: &KeyspaceDef) -> String {
    let map: Vec<String> = k
        .replication
        .iter()
        .map(|(a, b)| format!("{}: {}", quote(a), quote(b)))
        .collect();
    format!(
        "CREATE KEYSPACE {} WITH replication = {{{}}}  AND durable_writes = {};",
        ident(&k.name),
        map.join(", "),
        k.durable_writes
    )
}

fn create_table(t: &TableSchema) -> String {
    let mut out = format!("CREATE TABLE {}.{} (\n", ident(&t.keyspace), ident(&t.name));
    for c in &t.columns {
        out.push_str(&format!("    {} {},\n", ident(&c.name), c.ty));
    }
    let names = |cols: &[usize]| {
        cols.iter()
            .map(|&i| ident(&t.columns[i].name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let partition = if t.partition_key.len() == 1 {
        names(&t.partition_key)
    } else {
        format!("({})", names(&t.partition_key))
    };
    let key = if t.clustering.is_empty() {
        partition
    } else {
        format!("{partition}, {}", names(&t.clustering))
    };
    out.push_str(&format!("    PRIMARY KEY ({key})\n)"));
    let mut with = Vec::new();
    if !t.clustering.is_empty() {
        let order: Vec<String> = t
            .clustering
            .iter()
            .map(|&i| {
                let c = &t.columns[i];
                let dir = if c.order == Order::Desc {
                    "DESC"
                } else {
                    "ASC"
                };
                debug_assert_eq!(c.kind, ColumnKind::Clustering);
                format!("{} {dir}", ident(&c.name))
            })
            .collect();
        with.push(format!("CLUSTERING ORDER BY ({})", order.join(", ")));
    }
    with.push(format!("comment = {}", quote(&t.comment)));
    with.push(format!("default_time_to_live = {}", t.default_ttl));
    with.push(format!("gc_grace_seconds = {}", t.gc_grace_seconds));
    out.push_str(" WITH ");
    out.push_str(&with.join("\n    AND "));
    out.push(';');
    out
}

fn text(s: &str) -> Option<Vec<u8>> {
    Some(s.as_bytes().to_vec())
}

impl Engine {
    fn describe_keyspace(
        &self,
        name: &str,
        rows: &mut Vec<Vec<Option<Vec<u8>>>>,
    ) -> Result<(), CqlError> {
        let ks = self
            .keyspaces
            .get(name)
            .ok_or_else(|| CqlError::invalid(format!("'{name}' not found in keyspaces")))?;
        rows.push(vec![
            text(name),
            text("keyspace"),
            text(name),
            text(&create_keyspace(&ks.def)),
        ]);
        for t in ks.tables.values() {
            rows.push(vec![
                text(name),
                text("table"),
                text(&t.schema.name),
                text(&create_table(&t.schema)),
            ]);
        }
        Ok(())
    }

    fn describe_table(&self, ks: &str, name: &str) -> Result<Vec<Option<Vec<u8>>>, CqlError> {
        let t = self.schema(ks, name)?;
        Ok(vec![
            text(ks),
            text("table"),
            text(name),
            text(&create_table(&t)),
        ])
    }

    /// Runs a DESCRIBE.
    pub(crate) fn describe(&self, target: &DescribeTarget) -> Result<Page, CqlError> {
        let mut rows = Vec::new();
        match target {
            DescribeTarget::Keyspaces => {
                for name in self.keyspaces.keys() {
                    rows.push(vec![text(name), text("keyspace"), text(name)]);
                }
            }
            DescribeTarget::Tables(session) => {
                for (name, ks) in &self.keyspaces {
                    if session.as_ref().is_some_and(|s| s != name) {
                        continue;
                    }
                    for t in ks.tables.keys() {
                        rows.push(vec![text(name), text("table"), text(t)]);
                    }
                }
            }
            DescribeTarget::Cluster => rows.push(vec![
                text(&self.node.cluster_name),
                text("org.apache.cassandra.dht.Murmur3Partitioner"),
                text("org.apache.cassandra.locator.SimpleSnitch"),
            ]),
            DescribeTarget::Schema { full } => {
                let names: Vec<String> = self
                    .keyspaces
                    .keys()
                    .filter(|k| {
                        *full
                            || !(system::SYSTEM_KEYSPACES.contains(&k.as_str())
                                || *k == super::FAULTS_KEYSPACE)
                    })
                    .cloned()
                    .collect();
                for name in names {
                    self.describe_keyspace(&name, &mut rows)?;
                }
            }
            DescribeTarget::Keyspace(name) => self.describe_keyspace(name, &mut rows)?,
            DescribeTarget::Table(ks, name) => rows.push(self.describe_table(ks, name)?),
            DescribeTarget::Name(name, session) => {
                if self.keyspaces.contains_key(name) {
                    self.describe_keyspace(name, &mut rows)?;
                } else {
                    let ks = session.as_deref().ok_or_else(|| {
                        CqlError::invalid(format!("'{name}' not found in keyspaces"))
                    })?;
                    rows.push(self.describe_table(ks, name)?);
                }
            }
        }
        Ok(Page {
            rows,
            paging_state: None,
            warnings: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::tests::Db;

    #[test]
    fn describe_round_trips_through_create() {
        let mut db = Db::lockshift();
        db.ok("CREATE TABLE ks.\"Odd\" (k int, c1 text, c2 int, v list<int>, PRIMARY KEY ((k, c1), c2)) WITH CLUSTERING ORDER BY (c2 DESC) AND comment = 'it''s'");
        let rows = db.rows("DESCRIBE TABLE ks.\"Odd\"");
        assert_eq!(rows.len(), 1);
        let create = rows[0].split('|').nth(3).unwrap().to_string();
        assert!(create.contains("PRIMARY KEY ((k, c1), c2)"), "{create}");
        assert!(create.contains("CLUSTERING ORDER BY (c2 DESC)"), "{create}");
        // What DESCRIBE prints, CREATE accepts.
        db.ok("DROP TABLE ks.\"Odd\"");
        db.ok(create.trim_end_matches(';'));
        assert_eq!(
            db.rows("DESCRIBE TABLE ks.\"Odd\"")[0]
                .split('|')
                .nth(3)
                .unwrap(),
            create
        );
        let keyspaces = db.rows("DESC KEYSPACES");
        assert!(
            keyspaces.contains(&"ks|keyspace|ks".to_string()),
            "{keyspaces:?}"
        );
        let schema = db.rows("DESCRIBE SCHEMA");
        assert_eq!(schema.len(), 3, "ks, main and Odd: {schema:?}");
        db.ok("USE ks");
        assert_eq!(db.rows("DESCRIBE TABLES").len(), 2);
        assert_eq!(db.rows("DESCRIBE main").len(), 1);
        assert!(
            db.err("DESCRIBE nothing_here")
                .message
                .contains("nothing_here")
        );
        assert!(db.err("DESCRIBE TYPES").message.contains("no user types"));
    }
}
