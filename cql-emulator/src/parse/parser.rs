//! A recursive-descent parser for the CQL subset (see the crate docs for the
//! grammar). One method per production; every bind marker gets the next
//! index as it is met, so marker order is textual order, as Cassandra binds.

use crate::error::CqlError;
use crate::parse::ast::*;
use crate::parse::lexer::{Spanned, Tok, lex};

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
        } else if self.eat_kw("describe") || self.eat_kw("desc") {
            self.describe().map(Statement::Describe)
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
        } else if func(self, "tounixtimestamp") {
            self.advance();
            self.expect_sym("(")?;
            if !func(self, "now") {
                return Err(CqlError::invalid(
                    "only toUnixTimestamp(now()) is supported by the lockshift CQL emulator",
                ));
            }
            self.advance();
            self.expect_sym("(")?;
            self.expect_sym(")")?;
            self.expect_sym(")")?;
            Selector::UnixNow
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
                 (supported: writetime, ttl, token, count, toUnixTimestamp(now()))",
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
}

mod ddl;
mod dml;
mod terms;

#[cfg(test)]
#[path = "parser_tests.rs"]
mod tests;
