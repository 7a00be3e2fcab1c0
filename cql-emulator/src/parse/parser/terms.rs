//! WHERE relations and the terms they compare against: literals, bind
//! markers, `token(…)`, collections.

use super::Parser;
use crate::error::CqlError;
use crate::parse::ast::*;
use crate::parse::lexer::Tok;

impl Parser {
    pub(super) fn relations(&mut self) -> Result<Vec<Relation>, CqlError> {
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

    // ===== terms =====

    pub(super) fn term(&mut self) -> Result<Term, CqlError> {
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
}
