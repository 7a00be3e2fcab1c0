//! The syntax tree of the CQL subset: what the parser produces and the
//! engine compiles against a schema.
//!
//! Names are already normalised: unquoted identifiers lower-cased, quoted
//! ones kept as written. Every bind marker carries its index in textual
//! order, which is the order values are bound in.

use crate::types::CqlType;

/// A parsed statement.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Statement {
    Select(Select),
    Insert(Insert),
    Update(Update),
    Delete(Delete),
    Batch(Batch),
    CreateKeyspace(CreateKeyspace),
    CreateTable(CreateTable),
    DropKeyspace { name: String, if_exists: bool },
    DropTable { table: TableName, if_exists: bool },
    Use(String),
    Truncate(TableName),
    Describe(Describe),
}

/// What a `DESCRIBE` asks for (Cassandra 4's server-side DESCRIBE, which
/// cqlsh 6 sends as a statement).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Describe {
    Keyspaces,
    Tables,
    Cluster,
    Schema {
        full: bool,
    },
    /// `DESCRIBE KEYSPACE [name]` (none: the session keyspace).
    Keyspace(Option<String>),
    Table(TableName),
    /// `DESCRIBE name`: a keyspace, or a table of the session keyspace.
    Name(TableName),
}

impl Statement {
    /// The number of bind markers in the statement.
    pub(crate) fn marker_count(&self) -> usize {
        match self {
            Statement::Select(s) => s.markers,
            Statement::Insert(s) => s.markers,
            Statement::Update(s) => s.markers,
            Statement::Delete(s) => s.markers,
            Statement::Batch(b) => b.markers,
            _ => 0,
        }
    }
}

/// `[keyspace.]table`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TableName {
    pub(crate) keyspace: Option<String>,
    pub(crate) name: String,
}

/// A `?` or `:name` bind marker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Marker {
    /// Position among the statement's markers, from 0.
    pub(crate) index: usize,
    /// The name of a `:name` marker.
    pub(crate) name: Option<String>,
}

/// A value in a statement.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Term {
    Marker(Marker),
    Literal(Literal),
    /// A function call such as `now()`; name lower-cased.
    Call(String, Vec<Term>),
}

/// A constant.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Literal {
    Null,
    Str(String),
    /// An integer as written (optional `-`, digits).
    Int(String),
    /// A float as written, or `NaN` / `Infinity` / `-Infinity`.
    Float(String),
    Bool(bool),
    Hex(Vec<u8>),
    Uuid(uuid::Uuid),
    List(Vec<Term>),
    Set(Vec<Term>),
    Map(Vec<(Term, Term)>),
    Tuple(Vec<Term>),
}

impl Literal {
    /// The literal's kind as Cassandra names it in "Invalid X constant".
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Literal::Null => "NULL",
            Literal::Str(_) => "STRING",
            Literal::Int(_) => "INTEGER",
            Literal::Float(_) => "FLOAT",
            Literal::Bool(_) => "BOOLEAN",
            Literal::Hex(_) => "HEX",
            Literal::Uuid(_) => "UUID",
            Literal::List(_) => "LIST",
            Literal::Set(_) => "SET",
            Literal::Map(_) => "MAP",
            Literal::Tuple(_) => "TUPLE",
        }
    }
}

/// A comparison operator of a relation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

/// One restriction of a WHERE clause.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Relation {
    /// `column op term`.
    Compare { column: String, op: Op, value: Term },
    /// `column IN (terms)` or `column IN ?`.
    In { column: String, values: InValues },
    /// `token(columns) op term`.
    Token {
        columns: Vec<String>,
        op: Op,
        value: Term,
    },
}

/// The right-hand side of `IN`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum InValues {
    List(Vec<Term>),
    Marker(Marker),
}

/// Clustering direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Order {
    Asc,
    Desc,
}

/// One element of a SELECT clause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Selector {
    Column(String),
    WriteTime(String),
    Ttl(String),
    Token(Vec<String>),
    CountAll,
    /// `toUnixTimestamp(now())`: the coordinator's clock, in milliseconds.
    UnixNow,
}

/// `SELECT`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Select {
    pub(crate) distinct: bool,
    /// `None` for `*`.
    pub(crate) selectors: Option<Vec<(Selector, Option<String>)>>,
    pub(crate) table: TableName,
    pub(crate) relations: Vec<Relation>,
    pub(crate) order_by: Vec<(String, Order)>,
    pub(crate) per_partition_limit: Option<Term>,
    pub(crate) limit: Option<Term>,
    pub(crate) allow_filtering: bool,
    pub(crate) markers: usize,
}

/// `USING TTL … AND TIMESTAMP …`.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Using {
    pub(crate) ttl: Option<Term>,
    pub(crate) timestamp: Option<Term>,
}

/// `INSERT`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Insert {
    pub(crate) table: TableName,
    pub(crate) columns: Vec<String>,
    pub(crate) values: Vec<Term>,
    pub(crate) if_not_exists: bool,
    pub(crate) using: Using,
    pub(crate) markers: usize,
}

/// `UPDATE`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Update {
    pub(crate) table: TableName,
    pub(crate) using: Using,
    pub(crate) assignments: Vec<(String, Term)>,
    pub(crate) relations: Vec<Relation>,
    /// `IF EXISTS` or `IF col op term AND …` (a lightweight transaction).
    pub(crate) condition: Option<Condition>,
    pub(crate) markers: usize,
}

/// The `IF` clause of an `UPDATE` or `DELETE`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Condition {
    /// `IF EXISTS`.
    Exists,
    /// `IF col op term [AND col op term …]`, `op` one of `=`, `<`, `<=`,
    /// `>`, `>=`.
    Compare(Vec<(String, Op, Term)>),
}

/// `DELETE`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Delete {
    pub(crate) columns: Vec<String>,
    pub(crate) table: TableName,
    pub(crate) timestamp: Option<Term>,
    pub(crate) relations: Vec<Relation>,
    /// `IF EXISTS` or `IF col op term AND …` (a lightweight transaction).
    pub(crate) condition: Option<Condition>,
    pub(crate) markers: usize,
}

/// `BEGIN … BATCH … APPLY BATCH`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Batch {
    pub(crate) counter: bool,
    pub(crate) timestamp: Option<Term>,
    pub(crate) statements: Vec<Statement>,
    pub(crate) markers: usize,
}

/// `CREATE KEYSPACE`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CreateKeyspace {
    pub(crate) name: String,
    pub(crate) if_not_exists: bool,
    pub(crate) properties: Vec<(String, Literal)>,
}

/// One column of `CREATE TABLE`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ColumnSpec {
    pub(crate) name: String,
    pub(crate) ty: CqlType,
    pub(crate) is_static: bool,
    pub(crate) primary_key: bool,
}

/// `CREATE TABLE`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CreateTable {
    pub(crate) table: TableName,
    pub(crate) if_not_exists: bool,
    pub(crate) columns: Vec<ColumnSpec>,
    /// `PRIMARY KEY ((partition…), clustering…)` when given as a clause.
    pub(crate) primary_key: Option<(Vec<String>, Vec<String>)>,
    pub(crate) clustering_order: Vec<(String, Order)>,
    pub(crate) options: Vec<(String, Literal)>,
    pub(crate) compact_storage: bool,
}
