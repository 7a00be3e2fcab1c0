//! A recursive-descent parser for the CQL subset (see the crate docs for the
//! grammar). One method per production; every bind marker gets the next
//! index as it is met, so marker order is textual order, as Cassandra binds.

use crate::error::CqlError;
use crate::parse::ast::*;
use crate::parse::lexer::{Spanned, Tok, lex};
use crate::types::CqlType;

/// Words that cannot be unquoted names (Cassandra's reserved keywords).
const RESERVED: &[&str] = &[
    "add",
    "allow",
    "alter",
    "and",
    "apply",
    "asc",
    "authorize",
    "batch",
    "begin",
    "by",
    "columnfamily",
    "create",
    "delete",
    "desc",
    "describe",
    "drop",
    "entries",
    "execute",
    "from",
    "full",
    "grant",
    "if",
    "in",
    "index",
    "infinity",
    "insert",
    "into",
    "keyspace",
    "limit",
    "modify",
    "nan",
    "norecursive",
    "not",
    "null",
    "of",
    "on",
    "or",
    "order",
    "primary",
    "rename",
    "replace",
    "revoke",
    "schema",
    "select",
    "set",
    "table",
    "to",
    "token",
    "truncate",
    "unlogged",
    "update",
    "use",
    "using",
    "where",
    "with",
];

/// Statements recognised but outside the subset, with what to say.
const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "alter",
        "ALTER is not supported by the lockshift CQL emulator; drop and re-create the table",
    ),
    (
        "grant",
        "GRANT is not supported: the lockshift CQL emulator has no authorization",
    ),
    (
        "revoke",
        "REVOKE is not supported: the lockshift CQL emulator has no authorization",
    ),
    (
        "list",
        "LIST is not supported: the lockshift CQL emulator has no authorization",
    ),
    (
        "describe",
        "DESCRIBE is not supported by the lockshift CQL emulator; query system_schema instead",
    ),
    (
        "desc",
        "DESCRIBE is not supported by the lockshift CQL emulator; query system_schema instead",
    ),
];

/// Parses one statement (a trailing `;` is allowed).
pub(crate) fn parse(text: &str) -> Result<Statement, CqlError> {
    let tokens = lex(text)?;
    let mut p = Parser {
        toks: tokens,
        pos: 0,
        markers: 0,
    };
    let stmt = p.statement()?;
    p.eat_sym(";");
    p.expect_eof()?;
    Ok(stmt)
}

struct Parser {
    toks: Vec<Spanned>,
    pos: usize,
    markers: usize,
}

impl Parser {
    // ===== token helpers =====

    fn peek(&self) -> &Tok {
        self.peek_at(0)
    }

    fn peek_at(&self, n: usize) -> &Tok {
        // The token list always ends with Eof; clamp to it.
        let i = (self.pos + n).min(self.toks.len().saturating_sub(1));
        self.toks.get(i).map_or(&Tok::Eof, |s| &s.tok)
    }

    fn advance(&mut self) -> Tok {
        let t = self.peek().clone();
        if self.pos < self.toks.len().saturating_sub(1) {
            self.pos += 1;
        }
        t
    }

    fn error_here(&self, expected: &str) -> CqlError {
        let (line, col) = self.toks.get(self.pos).map_or((1, 0), |s| (s.line, s.col));
        let found = self.peek().describe();
        CqlError::syntax(format!(
            "line {line}:{col} unexpected input '{found}', expecting {expected}"
        ))
    }

    fn is_kw(&self, kw: &str) -> bool {
        self.is_kw_at(0, kw)
    }

    fn is_kw_at(&self, n: usize, kw: &str) -> bool {
        matches!(self.peek_at(n), Tok::Word(w) if w.eq_ignore_ascii_case(kw))
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        if self.is_kw(kw) {
            self.advance();
            true
        } else {
            false
        }
    }

    fn expect_kw(&mut self, kw: &str) -> Result<(), CqlError> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            Err(self.error_here(&kw.to_ascii_uppercase()))
        }
    }

    fn is_sym(&self, s: &str) -> bool {
        matches!(self.peek(), Tok::Sym(x) if *x == s)
    }

    fn eat_sym(&mut self, s: &str) -> bool {
        if self.is_sym(s) {
            self.advance();
            true
        } else {
            false
        }
    }

    fn expect_sym(&mut self, s: &str) -> Result<(), CqlError> {
        if self.eat_sym(s) {
            Ok(())
        } else {
            Err(self.error_here(&format!("'{s}'")))
        }
    }

    fn expect_eof(&self) -> Result<(), CqlError> {
        if matches!(self.peek(), Tok::Eof) {
            Ok(())
        } else {
            Err(self.error_here("end of statement"))
        }
    }

    /// An identifier: unquoted (lower-cased, not reserved) or quoted.
    fn ident(&mut self, what: &str) -> Result<String, CqlError> {
        match self.peek().clone() {
            Tok::Word(w) if !RESERVED.contains(&w.to_ascii_lowercase().as_str()) => {
                self.advance();
                Ok(w.to_ascii_lowercase())
            }
            Tok::Quoted(q) => {
                self.advance();
                Ok(q)
            }
            _ => Err(self.error_here(what)),
        }
    }

    fn table_name(&mut self) -> Result<TableName, CqlError> {
        let first = self.ident("a table name")?;
        if self.eat_sym(".") {
            let name = self.ident("a table name")?;
            Ok(TableName {
                keyspace: Some(first),
                name,
            })
        } else {
            Ok(TableName {
                keyspace: None,
                name: first,
            })
        }
    }

    fn marker(&mut self, name: Option<String>) -> Marker {
        let m = Marker {
            index: self.markers,
            name,
        };
        self.markers += 1;
        m
    }

    // ===== statements =====

    fn statement(&mut self) -> Result<Statement, CqlError> {
        for (kw, msg) in UNSUPPORTED {
            if self.is_kw(kw) {
                return Err(CqlError::invalid(*msg));
            }
        }
        if self.eat_kw("select") {
            self.select().map(Statement::Select)
        } else if self.eat_kw("insert") {
            self.insert().map(Statement::Insert)
        } else if self.eat_kw("update") {
            self.update().map(Statement::Update)
        } else if self.eat_kw("delete") {
            self.delete().map(Statement::Delete)
        } else if self.eat_kw("begin") {
            self.batch().map(Statement::Batch)
        } else if self.eat_kw("create") {
            self.create()
        } else if self.eat_kw("drop") {
            self.drop()
        } else if self.eat_kw("use") {
            Ok(Statement::Use(self.ident("a keyspace name")?))
        } else if self.eat_kw("truncate") {
            if !self.eat_kw("table") {
                self.eat_kw("columnfamily");
            }
            Ok(Statement::Truncate(self.table_name()?))
        } else {
            Err(self.error_here(
                "a statement (SELECT, INSERT, UPDATE, DELETE, BEGIN BATCH, CREATE, DROP, USE, TRUNCATE)",
            ))
        }
    }

    fn select(&mut self) -> Result<Select, CqlError> {
        if self.is_kw("json") {
            return Err(CqlError::invalid(
                "SELECT JSON is not supported by the lockshift CQL emulator",
            ));
        }
        let distinct = self.eat_kw("distinct");
        let selectors = if self.eat_sym("*") {
            None
        } else {
            let mut list = vec![self.selector()?];
            while self.eat_sym(",") {
                list.push(self.selector()?);
            }
            Some(list)
        };
        self.expect_kw("from")?;
        let table = self.table_name()?;
        let relations = if self.eat_kw("where") {
            self.relations()?
        } else {
            Vec::new()
        };
        if self.is_kw("group") {
            return Err(CqlError::invalid(
                "GROUP BY is not supported by the lockshift CQL emulator",
            ));
        }
        let mut order_by = Vec::new();
        if self.eat_kw("order") {
            self.expect_kw("by")?;
            loop {
                let col = self.ident("a column name")?;
                let order = self.order()?;
                order_by.push((col, order));
                if !self.eat_sym(",") {
                    break;
                }
            }
        }
        let mut per_partition_limit = None;
        if self.is_kw("per") {
            self.advance();
            self.expect_kw("partition")?;
            self.expect_kw("limit")?;
            per_partition_limit = Some(self.term()?);
        }
        let limit = if self.eat_kw("limit") {
            Some(self.term()?)
        } else {
            None
        };
        let allow_filtering = if self.eat_kw("allow") {
            self.expect_kw("filtering")?;
            true
        } else {
            false
        };
        Ok(Select {
            distinct,
            selectors,
            table,
            relations,
            order_by,
            per_partition_limit,
            limit,
            allow_filtering,
            markers: self.markers,
        })
    }

    fn order(&mut self) -> Result<Order, CqlError> {
        if self.eat_kw("desc") {
            Ok(Order::Desc)
        } else {
            self.eat_kw("asc");
            Ok(Order::Asc)
        }
    }

    fn selector(&mut self) -> Result<(Selector, Option<String>), CqlError> {
        let func = |p: &Parser, name: &str| p.is_kw(name) && matches!(p.peek_at(1), Tok::Sym("("));
        let sel = if func(self, "writetime") || func(self, "ttl") {
            let ttl = self.is_kw("ttl");
            self.advance();
            self.expect_sym("(")?;
            let col = self.ident("a column name")?;
            self.expect_sym(")")?;
            if ttl {
                Selector::Ttl(col)
            } else {
                Selector::WriteTime(col)
            }
        } else if func(self, "token") {
            self.advance();
            Selector::Token(self.paren_idents()?)
        } else if func(self, "count") {
            self.advance();
            self.expect_sym("(")?;
            if !(self.eat_sym("*") || matches!(self.advance(), Tok::Int(ref i) if i == "1")) {
                return Err(CqlError::invalid(
                    "only count(*) and count(1) are supported by the lockshift CQL emulator",
                ));
            }
            self.expect_sym(")")?;
            Selector::CountAll
        } else if matches!(self.peek(), Tok::Word(_)) && matches!(self.peek_at(1), Tok::Sym("(")) {
            return Err(CqlError::invalid(format!(
                "function {}() is not supported in selections by the lockshift CQL emulator \
                 (supported: writetime, ttl, token, count)",
                self.peek().describe()
            )));
        } else {
            Selector::Column(self.ident("a column name or '*'")?)
        };
        let alias = if self.eat_kw("as") {
            Some(self.ident("an alias")?)
        } else {
            None
        };
        Ok((sel, alias))
    }

    fn paren_idents(&mut self) -> Result<Vec<String>, CqlError> {
        self.expect_sym("(")?;
        let mut out = vec![self.ident("a column name")?];
        while self.eat_sym(",") {
            out.push(self.ident("a column name")?);
        }
        self.expect_sym(")")?;
        Ok(out)
    }

    fn relations(&mut self) -> Result<Vec<Relation>, CqlError> {
        let mut out = vec![self.relation()?];
        while self.eat_kw("and") {
            out.push(self.relation()?);
        }
        Ok(out)
    }

    fn op(&mut self) -> Result<Op, CqlError> {
        let op = match self.peek() {
            Tok::Sym("=") => Op::Eq,
            Tok::Sym("<") => Op::Lt,
            Tok::Sym("<=") => Op::Le,
            Tok::Sym(">") => Op::Gt,
            Tok::Sym(">=") => Op::Ge,
            Tok::Sym("!=") => {
                return Err(CqlError::invalid(
                    "Unsupported \"!=\" relation: the lockshift CQL emulator supports =, <, <=, >, >= and IN",
                ));
            }
            Tok::Word(w)
                if w.eq_ignore_ascii_case("contains") || w.eq_ignore_ascii_case("like") =>
            {
                return Err(CqlError::invalid(format!(
                    "{} relations are not supported by the lockshift CQL emulator",
                    w.to_ascii_uppercase()
                )));
            }
            _ => return Err(self.error_here("a comparison operator or IN")),
        };
        self.advance();
        Ok(op)
    }

    fn relation(&mut self) -> Result<Relation, CqlError> {
        if self.is_kw("token") && matches!(self.peek_at(1), Tok::Sym("(")) {
            self.advance();
            let columns = self.paren_idents()?;
            let op = self.op()?;
            let value = self.token_term()?;
            return Ok(Relation::Token { columns, op, value });
        }
        if self.is_sym("(") {
            return Err(CqlError::invalid(
                "multi-column relations such as (a, b) > (1, 2) are not supported by the lockshift CQL emulator",
            ));
        }
        let column = self.ident("a column name")?;
        if self.eat_kw("in") {
            if let Tok::Marker(name) = self.peek().clone() {
                self.advance();
                let m = self.marker(name);
                return Ok(Relation::In {
                    column,
                    values: InValues::Marker(m),
                });
            }
            self.expect_sym("(")?;
            let mut values = Vec::new();
            if !self.is_sym(")") {
                values.push(self.term()?);
                while self.eat_sym(",") {
                    values.push(self.term()?);
                }
            }
            self.expect_sym(")")?;
            return Ok(Relation::In {
                column,
                values: InValues::List(values),
            });
        }
        let op = self.op()?;
        let value = self.term()?;
        Ok(Relation::Compare { column, op, value })
    }

    /// The right side of `token(…) op`: a term, or `token(terms)`.
    fn token_term(&mut self) -> Result<Term, CqlError> {
        if self.is_kw("token") && matches!(self.peek_at(1), Tok::Sym("(")) {
            self.advance();
            self.expect_sym("(")?;
            let mut args = vec![self.term()?];
            while self.eat_sym(",") {
                args.push(self.term()?);
            }
            self.expect_sym(")")?;
            return Ok(Term::Call("token".to_string(), args));
        }
        self.term()
    }

    fn using(&mut self, allow_ttl: bool) -> Result<Using, CqlError> {
        let mut using = Using::default();
        loop {
            if allow_ttl && self.eat_kw("ttl") {
                if using.ttl.is_some() {
                    return Err(CqlError::invalid("TTL is given twice"));
                }
                using.ttl = Some(self.term()?);
            } else if self.eat_kw("timestamp") {
                if using.timestamp.is_some() {
                    return Err(CqlError::invalid("TIMESTAMP is given twice"));
                }
                using.timestamp = Some(self.term()?);
            } else if self.is_kw("timeout") {
                return Err(CqlError::invalid(
                    "USING TIMEOUT is a ScyllaDB extension the lockshift CQL emulator does not support",
                ));
            } else {
                return Err(self.error_here(if allow_ttl {
                    "TTL or TIMESTAMP"
                } else {
                    "TIMESTAMP"
                }));
            }
            if !self.eat_kw("and") {
                return Ok(using);
            }
        }
    }

    fn insert(&mut self) -> Result<Insert, CqlError> {
        self.expect_kw("into")?;
        let table = self.table_name()?;
        if self.is_kw("json") {
            return Err(CqlError::invalid(
                "INSERT JSON is not supported by the lockshift CQL emulator",
            ));
        }
        let columns = self.paren_idents()?;
        self.expect_kw("values")?;
        self.expect_sym("(")?;
        let mut values = vec![self.term()?];
        while self.eat_sym(",") {
            values.push(self.term()?);
        }
        self.expect_sym(")")?;
        let mut if_not_exists = false;
        if self.eat_kw("if") {
            self.expect_kw("not")?;
            self.expect_kw("exists")?;
            if_not_exists = true;
        }
        let using = if self.eat_kw("using") {
            self.using(true)?
        } else {
            Using::default()
        };
        if !if_not_exists && self.eat_kw("if") {
            self.expect_kw("not")?;
            self.expect_kw("exists")?;
            if_not_exists = true;
        }
        Ok(Insert {
            table,
            columns,
            values,
            if_not_exists,
            using,
            markers: self.markers,
        })
    }

    fn update(&mut self) -> Result<Update, CqlError> {
        let table = self.table_name()?;
        let using = if self.eat_kw("using") {
            self.using(true)?
        } else {
            Using::default()
        };
        self.expect_kw("set")?;
        let mut assignments = Vec::new();
        loop {
            let col = self.ident("a column name")?;
            if self.is_sym("[") {
                return Err(CqlError::invalid(
                    "setting collection elements (c[k] = v) is not supported by the lockshift CQL emulator",
                ));
            }
            self.expect_sym("=")?;
            let arithmetic = matches!(self.peek(), Tok::Word(_) | Tok::Quoted(_))
                && matches!(self.peek_at(1), Tok::Sym("+") | Tok::Sym("-"));
            let value = if arithmetic {
                Term::Literal(Literal::Null)
            } else {
                self.term()?
            };
            if arithmetic || self.is_sym("+") || self.is_sym("-") {
                return Err(CqlError::invalid(
                    "counter and collection arithmetic (c = c + x) is not supported by the lockshift CQL emulator",
                ));
            }
            assignments.push((col, value));
            if !self.eat_sym(",") {
                break;
            }
        }
        self.expect_kw("where")?;
        let relations = self.relations()?;
        let conditional = self.conditions()?;
        Ok(Update {
            table,
            using,
            assignments,
            relations,
            conditional,
            markers: self.markers,
        })
    }

    /// Skips an `IF …` clause, reporting whether there was one.
    fn conditions(&mut self) -> Result<bool, CqlError> {
        if !self.eat_kw("if") {
            return Ok(false);
        }
        // Lightweight transactions are refused when compiled; consume the
        // rest so the refusal says why rather than "unexpected input".
        while !matches!(self.peek(), Tok::Eof | Tok::Sym(";")) && !self.is_kw("apply") {
            if let Tok::Marker(name) = self.peek().clone() {
                self.marker(name);
            }
            self.advance();
        }
        Ok(true)
    }

    fn delete(&mut self) -> Result<Delete, CqlError> {
        let mut columns = Vec::new();
        if !self.is_kw("from") {
            loop {
                columns.push(self.ident("a column name or FROM")?);
                if self.is_sym("[") || self.is_sym(".") {
                    return Err(CqlError::invalid(
                        "deleting collection elements or fields is not supported by the lockshift CQL emulator",
                    ));
                }
                if !self.eat_sym(",") {
                    break;
                }
            }
        }
        self.expect_kw("from")?;
        let table = self.table_name()?;
        let timestamp = if self.eat_kw("using") {
            self.using(false)?.timestamp
        } else {
            None
        };
        self.expect_kw("where")?;
        let relations = self.relations()?;
        let conditional = self.conditions()?;
        Ok(Delete {
            columns,
            table,
            timestamp,
            relations,
            conditional,
            markers: self.markers,
        })
    }

    fn batch(&mut self) -> Result<Batch, CqlError> {
        let counter = if self.eat_kw("unlogged") || self.eat_kw("logged") {
            false
        } else {
            self.eat_kw("counter")
        };
        self.expect_kw("batch")?;
        let timestamp = if self.eat_kw("using") {
            self.using(false)?.timestamp
        } else {
            None
        };
        let mut statements = Vec::new();
        loop {
            if self.eat_kw("apply") {
                self.expect_kw("batch")?;
                break;
            }
            let stmt = if self.eat_kw("insert") {
                Statement::Insert(self.insert()?)
            } else if self.eat_kw("update") {
                Statement::Update(self.update()?)
            } else if self.eat_kw("delete") {
                Statement::Delete(self.delete()?)
            } else {
                return Err(self.error_here("INSERT, UPDATE, DELETE or APPLY BATCH"));
            };
            statements.push(stmt);
            self.eat_sym(";");
        }
        Ok(Batch {
            counter,
            timestamp,
            statements,
            markers: self.markers,
        })
    }

    fn if_not_exists(&mut self) -> Result<bool, CqlError> {
        if self.eat_kw("if") {
            self.expect_kw("not")?;
            self.expect_kw("exists")?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn create(&mut self) -> Result<Statement, CqlError> {
        if self.eat_kw("keyspace") || self.eat_kw("schema") {
            let if_not_exists = self.if_not_exists()?;
            let name = self.ident("a keyspace name")?;
            let properties = if self.eat_kw("with") {
                self.properties()?
            } else {
                Vec::new()
            };
            return Ok(Statement::CreateKeyspace(CreateKeyspace {
                name,
                if_not_exists,
                properties,
            }));
        }
        if self.eat_kw("table") || self.eat_kw("columnfamily") {
            return self.create_table().map(Statement::CreateTable);
        }
        for what in [
            "index",
            "type",
            "function",
            "aggregate",
            "materialized",
            "trigger",
            "role",
            "user",
            "custom",
        ] {
            if self.is_kw(what) {
                return Err(CqlError::invalid(format!(
                    "CREATE {} is not supported by the lockshift CQL emulator",
                    what.to_ascii_uppercase()
                )));
            }
        }
        Err(self.error_here("KEYSPACE or TABLE"))
    }

    fn create_table(&mut self) -> Result<CreateTable, CqlError> {
        let if_not_exists = self.if_not_exists()?;
        let table = self.table_name()?;
        self.expect_sym("(")?;
        let mut columns = Vec::new();
        let mut primary_key = None;
        loop {
            if self.is_kw("primary") {
                self.advance();
                self.expect_kw("key")?;
                self.expect_sym("(")?;
                let partition = if self.eat_sym("(") {
                    let mut p = vec![self.ident("a column name")?];
                    while self.eat_sym(",") {
                        p.push(self.ident("a column name")?);
                    }
                    self.expect_sym(")")?;
                    p
                } else {
                    vec![self.ident("a column name")?]
                };
                let mut clustering = Vec::new();
                while self.eat_sym(",") {
                    clustering.push(self.ident("a column name")?);
                }
                self.expect_sym(")")?;
                if primary_key.is_some() {
                    return Err(CqlError::invalid(
                        "Multiple PRIMARY KEYs specified (exactly one required)",
                    ));
                }
                primary_key = Some((partition, clustering));
            } else {
                let name = self.ident("a column definition or PRIMARY KEY")?;
                let ty = self.cql_type()?;
                let is_static = self.eat_kw("static");
                let pk = if self.eat_kw("primary") {
                    self.expect_kw("key")?;
                    true
                } else {
                    false
                };
                columns.push(crate::parse::ast::ColumnSpec {
                    name,
                    ty,
                    is_static,
                    primary_key: pk,
                });
            }
            if !self.eat_sym(",") {
                break;
            }
            if self.is_sym(")") {
                break;
            }
        }
        self.expect_sym(")")?;
        let mut clustering_order = Vec::new();
        let mut options = Vec::new();
        let mut compact_storage = false;
        if self.eat_kw("with") {
            loop {
                if self.eat_kw("clustering") {
                    self.expect_kw("order")?;
                    self.expect_kw("by")?;
                    self.expect_sym("(")?;
                    loop {
                        let col = self.ident("a clustering column")?;
                        clustering_order.push((col, self.order()?));
                        if !self.eat_sym(",") {
                            break;
                        }
                    }
                    self.expect_sym(")")?;
                } else if self.eat_kw("compact") {
                    self.expect_kw("storage")?;
                    compact_storage = true;
                } else {
                    options.push(self.property()?);
                }
                if !self.eat_kw("and") {
                    break;
                }
            }
        }
        Ok(CreateTable {
            table,
            if_not_exists,
            columns,
            primary_key,
            clustering_order,
            options,
            compact_storage,
        })
    }

    fn cql_type(&mut self) -> Result<CqlType, CqlError> {
        let name = match self.peek().clone() {
            Tok::Word(w) => w.to_ascii_lowercase(),
            Tok::Quoted(q) => {
                return Err(CqlError::invalid(format!(
                    "Unknown type \"{q}\": user-defined types are not supported by the lockshift CQL emulator"
                )));
            }
            _ => return Err(self.error_here("a type")),
        };
        self.advance();
        let params = |p: &mut Parser, n: usize| -> Result<Vec<CqlType>, CqlError> {
            p.expect_sym("<")?;
            let mut out = vec![p.cql_type()?];
            while p.eat_sym(",") {
                out.push(p.cql_type()?);
            }
            p.expect_sym(">")?;
            if n != 0 && out.len() != n {
                return Err(CqlError::syntax(format!(
                    "{name} takes {n} type parameter(s), got {}",
                    out.len()
                )));
            }
            Ok(out)
        };
        let ty = match name.as_str() {
            "list" => CqlType::List(Box::new(params(self, 1)?.remove(0))),
            "set" => CqlType::Set(Box::new(params(self, 1)?.remove(0))),
            "map" => {
                let mut kv = params(self, 2)?;
                let v = kv.remove(1);
                CqlType::Map(Box::new(kv.remove(0)), Box::new(v))
            }
            "tuple" => CqlType::Tuple(params(self, 0)?),
            "frozen" => CqlType::Frozen(Box::new(params(self, 1)?.remove(0))),
            other => CqlType::simple(other).ok_or_else(|| {
                CqlError::invalid(format!(
                    "Unknown type {other}: user-defined types are not supported by the lockshift CQL emulator"
                ))
            })?,
        };
        Ok(ty)
    }

    fn properties(&mut self) -> Result<Vec<(String, Literal)>, CqlError> {
        let mut out = vec![self.property()?];
        while self.eat_kw("and") {
            out.push(self.property()?);
        }
        Ok(out)
    }

    fn property(&mut self) -> Result<(String, Literal), CqlError> {
        let name = match self.advance() {
            Tok::Word(w) => w.to_ascii_lowercase(),
            Tok::Quoted(q) => q,
            _ => {
                self.pos = self.pos.saturating_sub(1);
                return Err(self.error_here("a property name"));
            }
        };
        self.expect_sym("=")?;
        let value = match self.term()? {
            Term::Literal(l) => l,
            _ => {
                return Err(CqlError::syntax(format!(
                    "property {name} needs a constant value"
                )));
            }
        };
        Ok((name, value))
    }

    // ===== terms =====

    fn term(&mut self) -> Result<Term, CqlError> {
        let tok = self.peek().clone();
        let lit = match tok {
            Tok::Marker(name) => {
                self.advance();
                return Ok(Term::Marker(self.marker(name)));
            }
            Tok::Str(s) => Literal::Str(s),
            Tok::Int(i) => Literal::Int(i),
            Tok::Float(f) => Literal::Float(f),
            Tok::Hex(h) => Literal::Hex(h),
            Tok::Uuid(u) => Literal::Uuid(u),
            Tok::Sym("-") if self.is_kw_at(1, "infinity") || self.is_kw_at(1, "nan") => {
                self.advance();
                let w = self.advance().describe();
                return Ok(Term::Literal(Literal::Float(format!("-{w}"))));
            }
            Tok::Sym("[") => {
                self.advance();
                let items = self.term_list("]")?;
                return Ok(Term::Literal(Literal::List(items)));
            }
            Tok::Sym("(") => {
                self.advance();
                let items = self.term_list(")")?;
                return Ok(Term::Literal(Literal::Tuple(items)));
            }
            Tok::Sym("{") => {
                self.advance();
                return self.set_or_map();
            }
            Tok::Word(w) => {
                let lw = w.to_ascii_lowercase();
                match lw.as_str() {
                    "null" => Literal::Null,
                    "true" => Literal::Bool(true),
                    "false" => Literal::Bool(false),
                    "nan" => Literal::Float("NaN".into()),
                    "infinity" => Literal::Float("Infinity".into()),
                    _ if matches!(self.peek_at(1), Tok::Sym("(")) => {
                        self.advance();
                        self.advance();
                        let args = if self.is_sym(")") {
                            Vec::new()
                        } else {
                            self.term_list_until(")")?
                        };
                        self.expect_sym(")")?;
                        return Ok(Term::Call(lw, args));
                    }
                    _ => {
                        return Err(self.error_here("a constant, a bind marker or a function call"));
                    }
                }
            }
            _ => return Err(self.error_here("a constant or a bind marker")),
        };
        self.advance();
        Ok(Term::Literal(lit))
    }

    fn term_list_until(&mut self, close: &str) -> Result<Vec<Term>, CqlError> {
        let mut items = vec![self.term()?];
        while self.eat_sym(",") {
            if self.is_sym(close) {
                break;
            }
            items.push(self.term()?);
        }
        Ok(items)
    }

    fn term_list(&mut self, close: &str) -> Result<Vec<Term>, CqlError> {
        if self.eat_sym(close) {
            return Ok(Vec::new());
        }
        let items = self.term_list_until(close)?;
        self.expect_sym(close)?;
        Ok(items)
    }

    fn set_or_map(&mut self) -> Result<Term, CqlError> {
        if self.eat_sym("}") {
            // `{}` is an empty set or map; the column type decides.
            return Ok(Term::Literal(Literal::Map(Vec::new())));
        }
        let first = self.term()?;
        if self.eat_sym(":") {
            let mut entries = vec![(first, self.term()?)];
            while self.eat_sym(",") {
                let k = self.term()?;
                self.expect_sym(":")?;
                entries.push((k, self.term()?));
            }
            self.expect_sym("}")?;
            Ok(Term::Literal(Literal::Map(entries)))
        } else {
            let mut items = vec![first];
            while self.eat_sym(",") {
                items.push(self.term()?);
            }
            self.expect_sym("}")?;
            Ok(Term::Literal(Literal::Set(items)))
        }
    }

    fn drop(&mut self) -> Result<Statement, CqlError> {
        let keyspace = if self.eat_kw("keyspace") || self.eat_kw("schema") {
            true
        } else if self.eat_kw("table") || self.eat_kw("columnfamily") {
            false
        } else {
            return Err(self.error_here("KEYSPACE or TABLE"));
        };
        let if_exists = if self.eat_kw("if") {
            self.expect_kw("exists")?;
            true
        } else {
            false
        };
        if keyspace {
            Ok(Statement::DropKeyspace {
                name: self.ident("a keyspace name")?,
                if_exists,
            })
        } else {
            Ok(Statement::DropTable {
                table: self.table_name()?,
                if_exists,
            })
        }
    }
}

#[cfg(test)]
#[path = "parser_tests.rs"]
mod tests;
