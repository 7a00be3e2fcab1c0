//! CREATE / DROP KEYSPACE and TABLE, TRUNCATE: the catalog changes, and
//! `system_schema` plus `system.local.schema_version` follow each one.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::engine::data::{Change, Clustering, Edge, PartitionKey, TableData};
use crate::engine::schema::{KeyspaceDef, TableSchema};
use crate::engine::{Engine, FAULTS_KEYSPACE, KeyspaceData, Outcome, SchemaChange, system};
use crate::error::{CqlError, ErrorKind};
use crate::parse::ast::{CreateKeyspace, CreateTable, Statement};

/// A schema statement with its keyspace resolved.
#[derive(Debug)]
pub(crate) enum Ddl {
    CreateKeyspace(CreateKeyspace),
    CreateTable {
        keyspace: String,
        stmt: CreateTable,
    },
    DropKeyspace {
        name: String,
        if_exists: bool,
    },
    DropTable {
        keyspace: String,
        name: String,
        if_exists: bool,
    },
    Truncate {
        keyspace: String,
        name: String,
    },
}

fn protected(ks: &str) -> Result<(), CqlError> {
    if system::SYSTEM_KEYSPACES.contains(&ks) || ks == FAULTS_KEYSPACE {
        return Err(CqlError::unauthorized(format!(
            "{ks} keyspace is not user-modifiable"
        )));
    }
    Ok(())
}

impl Ddl {
    pub(crate) fn from_statement(session: Option<&str>, stmt: &Statement) -> Result<Ddl, CqlError> {
        let ks_of = |t: &crate::parse::ast::TableName| {
            t.keyspace
                .clone()
                .or_else(|| session.map(str::to_string))
                .ok_or_else(super::no_keyspace)
        };
        let d = match stmt {
            Statement::CreateKeyspace(c) => {
                protected(&c.name)?;
                Ddl::CreateKeyspace(c.clone())
            }
            Statement::CreateTable(c) => {
                let keyspace = ks_of(&c.table)?;
                protected(&keyspace)?;
                Ddl::CreateTable {
                    keyspace,
                    stmt: c.clone(),
                }
            }
            Statement::DropKeyspace { name, if_exists } => {
                protected(name)?;
                Ddl::DropKeyspace {
                    name: name.clone(),
                    if_exists: *if_exists,
                }
            }
            Statement::DropTable { table, if_exists } => {
                let keyspace = ks_of(table)?;
                protected(&keyspace)?;
                Ddl::DropTable {
                    keyspace,
                    name: table.name.clone(),
                    if_exists: *if_exists,
                }
            }
            _ => return Err(CqlError::server("not a schema statement")),
        };
        Ok(d)
    }
}

fn text(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

impl Engine {
    pub(super) fn ddl(&mut self, d: &Ddl) -> Result<Outcome, CqlError> {
        match d {
            Ddl::CreateKeyspace(c) => self.create_keyspace(c),
            Ddl::CreateTable { keyspace, stmt } => self.create_table(keyspace, stmt),
            Ddl::DropKeyspace { name, if_exists } => self.drop_keyspace(name, *if_exists),
            Ddl::DropTable {
                keyspace,
                name,
                if_exists,
            } => self.drop_table(keyspace, name, *if_exists),
            Ddl::Truncate { keyspace, name } => {
                if keyspace == FAULTS_KEYSPACE {
                    self.faults.clear();
                } else {
                    self.table_mut(keyspace, name)?.partitions.clear();
                }
                Ok(Outcome::Void)
            }
        }
    }

    fn create_keyspace(&mut self, c: &CreateKeyspace) -> Result<Outcome, CqlError> {
        let def = KeyspaceDef::from_properties(&c.name, &c.properties)?;
        if self.keyspaces.contains_key(&c.name) {
            if c.if_not_exists {
                return Ok(Outcome::Void);
            }
            return Err(CqlError::new(
                ErrorKind::AlreadyExists {
                    keyspace: c.name.clone(),
                    table: String::new(),
                },
                format!("Keyspace {} already exists", c.name),
            ));
        }
        self.put_system_row("system_schema", "keyspaces", system::keyspace_row(&def));
        self.keyspaces.insert(
            c.name.clone(),
            KeyspaceData {
                def,
                tables: BTreeMap::new(),
            },
        );
        self.bump_schema_version();
        Ok(Outcome::SchemaChange(SchemaChange {
            change: "CREATED",
            keyspace: c.name.clone(),
            table: None,
        }))
    }

    fn create_table(&mut self, keyspace: &str, stmt: &CreateTable) -> Result<Outcome, CqlError> {
        let name = &stmt.table.name;
        let Some(ks) = self.keyspaces.get(keyspace) else {
            return Err(CqlError::invalid(format!(
                "Keyspace {keyspace} does not exist"
            )));
        };
        if ks.tables.contains_key(name) {
            if stmt.if_not_exists {
                return Ok(Outcome::Void);
            }
            return Err(CqlError::new(
                ErrorKind::AlreadyExists {
                    keyspace: keyspace.to_string(),
                    table: name.to_string(),
                },
                format!("Cannot add already existing table \"{name}\" to keyspace \"{keyspace}\""),
            ));
        }
        let schema = TableSchema::from_create(keyspace, stmt, self.default_gc_grace)?;
        self.write_table_schema(&schema);
        if let Some(ks) = self.keyspaces.get_mut(keyspace) {
            ks.tables
                .insert(name.clone(), TableData::new(Arc::new(schema)));
        }
        self.bump_schema_version();
        Ok(Outcome::SchemaChange(SchemaChange {
            change: "CREATED",
            keyspace: keyspace.to_string(),
            table: Some(name.to_string()),
        }))
    }

    fn drop_keyspace(&mut self, name: &str, if_exists: bool) -> Result<Outcome, CqlError> {
        if self.keyspaces.remove(name).is_none() {
            if if_exists {
                return Ok(Outcome::Void);
            }
            return Err(CqlError::invalid(format!(
                "Cannot drop non existing keyspace '{name}'."
            )));
        }
        for table in [
            "keyspaces",
            "tables",
            "columns",
            "types",
            "functions",
            "aggregates",
            "triggers",
            "indexes",
            "views",
        ] {
            self.delete_system(table, name, None);
        }
        self.bump_schema_version();
        Ok(Outcome::SchemaChange(SchemaChange {
            change: "DROPPED",
            keyspace: name.to_string(),
            table: None,
        }))
    }

    fn drop_table(
        &mut self,
        keyspace: &str,
        name: &str,
        if_exists: bool,
    ) -> Result<Outcome, CqlError> {
        let removed = self
            .keyspaces
            .get_mut(keyspace)
            .and_then(|k| k.tables.remove(name));
        if removed.is_none() {
            if if_exists {
                return Ok(Outcome::Void);
            }
            return Err(CqlError::invalid(format!(
                "Table '{keyspace}.{name}' doesn't exist"
            )));
        }
        for table in ["tables", "columns", "triggers", "indexes"] {
            self.delete_system(table, keyspace, Some(name));
        }
        self.bump_schema_version();
        Ok(Outcome::SchemaChange(SchemaChange {
            change: "DROPPED",
            keyspace: keyspace.to_string(),
            table: Some(name.to_string()),
        }))
    }

    /// Deletes a keyspace's partition of a `system_schema` table, or the
    /// rows of one table in it (a range over the first clustering column).
    fn delete_system(&mut self, table: &str, keyspace: &str, only_table: Option<&str>) {
        let ts = self.next_timestamp();
        let now = self.clock.now();
        let Ok(data) = self.table_mut("system_schema", table) else {
            return;
        };
        let key = PartitionKey::new(&[keyspace.as_bytes()]);
        let change = match only_table {
            None => Change::DeletePartition { timestamp: ts },
            Some(t) => {
                let parts = data.schema.key_parts(vec![text(t)]);
                Change::DeleteRange {
                    start: Clustering::bound(parts.clone(), Edge::Before),
                    end: Clustering::bound(parts, Edge::After),
                    timestamp: ts,
                }
            }
        };
        data.apply(key, change, now);
    }
}
