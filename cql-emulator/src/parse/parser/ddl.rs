//! CREATE and DROP of keyspaces and tables, column types and properties.

use super::Parser;
use crate::error::CqlError;
use crate::parse::ast::*;
use crate::parse::lexer::Tok;
use crate::types::CqlType;

impl Parser {
    fn if_not_exists(&mut self) -> Result<bool, CqlError> {
        if self.eat_kw("if") {
            self.expect_kw("not")?;
            self.expect_kw("exists")?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    pub(super) fn create(&mut self) -> Result<Statement, CqlError> {
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

    pub(super) fn describe(&mut self) -> Result<Describe, CqlError> {
        let end = |p: &Parser| matches!(p.peek(), Tok::Eof | Tok::Sym(";"));
        if self.eat_kw("keyspaces") {
            return Ok(Describe::Keyspaces);
        }
        if self.eat_kw("tables") || self.eat_kw("columnfamilies") {
            return Ok(Describe::Tables);
        }
        if self.eat_kw("cluster") {
            return Ok(Describe::Cluster);
        }
        if self.eat_kw("full") {
            self.expect_kw("schema")?;
            return Ok(Describe::Schema { full: true });
        }
        if self.eat_kw("schema") {
            return Ok(Describe::Schema { full: false });
        }
        if self.eat_kw("keyspace") {
            if end(self) {
                return Ok(Describe::Keyspace(None));
            }
            return Ok(Describe::Keyspace(Some(self.ident("a keyspace name")?)));
        }
        if self.eat_kw("table") || self.eat_kw("columnfamily") {
            return Ok(Describe::Table(self.table_name()?));
        }
        for what in [
            "types",
            "type",
            "functions",
            "function",
            "aggregates",
            "aggregate",
            "index",
            "materialized",
        ] {
            if self.is_kw(what) {
                return Err(CqlError::invalid(format!(
                    "DESCRIBE {}: the lockshift CQL emulator has no user types, functions, aggregates, indexes or views",
                    what.to_ascii_uppercase()
                )));
            }
        }
        Ok(Describe::Name(self.table_name()?))
    }

    pub(super) fn drop(&mut self) -> Result<Statement, CqlError> {
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
