//! The CQL subset's lexer, syntax tree and parser.
//!
//! Hand-written rather than generated or borrowed: `cql3-parser` mis-parses
//! `USING TTL ? AND TIMESTAMP ?` and `LIMIT ?` and drops DELETE's timestamp
//! (see the driver contract), and a recursive-descent parser over a dozen
//! statement forms is a few hundred lines that can record the role of every
//! bind marker — which is what decides the marker's type in PREPARED.
//!
//! - [`lexer`]: tokens with positions.
//! - [`ast`]: the tree.
//! - [`parser`]: [`parse`], one statement per call.

pub(crate) mod ast;
pub(crate) mod lexer;
mod parser;

pub(crate) use parser::parse;
