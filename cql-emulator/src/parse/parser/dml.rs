//! INSERT, UPDATE, DELETE and BATCH, with their `USING` and `IF` clauses.

use super::Parser;
use crate::error::CqlError;
use crate::parse::ast::*;
use crate::parse::lexer::Tok;

impl Parser {
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

    pub(super) fn insert(&mut self) -> Result<Insert, CqlError> {
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

    pub(super) fn update(&mut self) -> Result<Update, CqlError> {
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
        let condition = self.conditions()?;
        Ok(Update {
            table,
            using,
            assignments,
            relations,
            condition,
            markers: self.markers,
        })
    }

    /// An `IF …` clause: `IF EXISTS`, or comparisons joined by `AND` —
    /// `=` (what lock clients use: `IF owner = ?`), `<`, `<=`, `>`, `>=`
    /// (a fenced write's `IF fence <= ?`). Other operators (`!=`, `IN`)
    /// are refused with a message that says so.
    fn conditions(&mut self) -> Result<Option<Condition>, CqlError> {
        if !self.eat_kw("if") {
            return Ok(None);
        }
        if self.eat_kw("exists") {
            return Ok(Some(Condition::Exists));
        }
        let mut compare = Vec::new();
        loop {
            let column = self.ident("a column name in the IF clause")?;
            let op = [
                ("=", Op::Eq),
                ("<=", Op::Le),
                ("<", Op::Lt),
                (">=", Op::Ge),
                (">", Op::Gt),
            ]
            .into_iter()
            .find(|(sym, _)| self.eat_sym(sym))
            .map(|(_, op)| op);
            let Some(op) = op else {
                return Err(CqlError::invalid(format!(
                    "only `=`, `<`, `<=`, `>`, `>=` conditions (IF {column} = …) and IF EXISTS \
                     are supported by the lockshift CQL emulator"
                )));
            };
            compare.push((column, op, self.term()?));
            if !self.eat_kw("and") {
                break;
            }
        }
        Ok(Some(Condition::Compare(compare)))
    }

    pub(super) fn delete(&mut self) -> Result<Delete, CqlError> {
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
        let condition = self.conditions()?;
        Ok(Delete {
            columns,
            table,
            timestamp,
            relations,
            condition,
            markers: self.markers,
        })
    }

    pub(super) fn batch(&mut self) -> Result<Batch, CqlError> {
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
}
