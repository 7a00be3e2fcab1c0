//! Request bodies decoded and response bodies encoded (spec §4), hand-written
//! for v4.
//!
//! Why not `cassandra-protocol`: the bodies needed are few and small, the
//! crate's pitfalls (panicking serialisers, no frame-size guard, no custom
//! payload parsing) would each need a guard anyway, and a hand-written codec
//! keeps the dependency tree lean — the reader in [`crate::wire`] is the
//! single place where untrusted lengths are checked.

use crate::engine::compile::{ColumnSpec, ResultColumn};
use crate::engine::select::Page;
use crate::engine::{Prepared, SchemaChange};
use crate::error::CqlError;
use crate::frame::opcode;
use crate::wire::{Reader, Value, Writer};

/// Query parameters of QUERY and EXECUTE.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct QueryParams {
    pub(crate) consistency: u16,
    pub(crate) values: Vec<Value>,
    /// Names of the values, when the client sent them by name.
    pub(crate) names: Option<Vec<String>>,
    pub(crate) page_size: Option<usize>,
    pub(crate) paging_state: Option<Vec<u8>>,
    pub(crate) default_timestamp: Option<i64>,
}

/// One statement of a BATCH.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum BatchQuery<'a> {
    Text(&'a str),
    Prepared(&'a [u8]),
}

/// A BATCH request.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BatchRequest<'a> {
    pub(crate) kind: u8,
    pub(crate) items: Vec<(BatchQuery<'a>, Vec<Value>)>,
    pub(crate) consistency: u16,
    pub(crate) default_timestamp: Option<i64>,
}

/// A decoded request.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Request<'a> {
    Startup(Vec<(&'a str, &'a str)>),
    Options,
    Query(&'a str, QueryParams),
    Prepare(&'a str),
    Execute(&'a [u8], QueryParams),
    Batch(BatchRequest<'a>),
    Register,
    AuthResponse,
}

fn consistency(r: &mut Reader<'_>) -> Result<u16, CqlError> {
    let c = r.short()?;
    if c > 0x000A {
        return Err(CqlError::protocol(format!(
            "Unknown code {c} for a consistency level"
        )));
    }
    Ok(c)
}

fn query_params(r: &mut Reader<'_>) -> Result<QueryParams, CqlError> {
    let mut p = QueryParams {
        consistency: consistency(r)?,
        ..QueryParams::default()
    };
    let flags = r.byte()?;
    if flags & 0x80 != 0 {
        return Err(CqlError::protocol(format!(
            "unknown query flags 0x{flags:02x}"
        )));
    }
    if flags & 0x01 != 0 {
        let n = r.short()?;
        let with_names = flags & 0x40 != 0;
        let mut names = Vec::new();
        for _ in 0..n {
            if with_names {
                names.push(r.string()?.to_ascii_lowercase());
            }
            p.values.push(r.value()?);
        }
        if with_names {
            p.names = Some(names);
        }
    }
    if flags & 0x04 != 0 {
        let size = r.int()?;
        p.page_size = usize::try_from(size).ok().filter(|s| *s > 0);
    }
    if flags & 0x08 != 0 {
        p.paging_state = r.bytes()?.map(<[u8]>::to_vec);
    }
    if flags & 0x10 != 0 {
        consistency(r)?;
    }
    if flags & 0x20 != 0 {
        p.default_timestamp = Some(r.long()?);
    }
    Ok(p)
}

/// Decodes the body of a request with `op`.
pub(crate) fn decode(op: u8, body: &[u8]) -> Result<Request<'_>, CqlError> {
    let mut r = Reader::new(body);
    Ok(match op {
        opcode::STARTUP => Request::Startup(r.string_map()?),
        opcode::OPTIONS => Request::Options,
        opcode::QUERY => {
            let q = r.long_string()?;
            Request::Query(q, query_params(&mut r)?)
        }
        opcode::PREPARE => Request::Prepare(r.long_string()?),
        opcode::EXECUTE => {
            let id = r.short_bytes()?;
            Request::Execute(id, query_params(&mut r)?)
        }
        opcode::BATCH => {
            let kind = r.byte()?;
            let n = r.short()?;
            let mut items = Vec::new();
            // The flags (and so "with names") come after the statements in
            // v4; names in batches are rejected by Cassandra too.
            for _ in 0..n {
                let q = match r.byte()? {
                    0 => BatchQuery::Text(r.long_string()?),
                    1 => BatchQuery::Prepared(r.short_bytes()?),
                    k => return Err(CqlError::protocol(format!("invalid batch query kind {k}"))),
                };
                let count = r.short()?;
                let mut values = Vec::new();
                for _ in 0..count {
                    values.push(r.value()?);
                }
                items.push((q, values));
            }
            let consistency = consistency(&mut r)?;
            let flags = r.byte()?;
            if flags & 0x40 != 0 {
                return Err(CqlError::protocol(
                    "named values are not supported in batches",
                ));
            }
            if flags & 0x10 != 0 {
                self::consistency(&mut r)?;
            }
            let default_timestamp = if flags & 0x20 != 0 {
                Some(r.long()?)
            } else {
                None
            };
            Request::Batch(BatchRequest {
                kind,
                items,
                consistency,
                default_timestamp,
            })
        }
        opcode::REGISTER => {
            r.string_list()?;
            Request::Register
        }
        opcode::AUTH_RESPONSE => Request::AuthResponse,
        other => {
            return Err(CqlError::protocol(format!(
                "unknown or unexpected request opcode 0x{other:02x}"
            )));
        }
    })
}

// ===== Responses =====

/// A response body and its opcode, and the warnings to send with it (the
/// frame's warning flag and list, spec §2.2).
#[derive(Debug, PartialEq)]
pub(crate) struct Response {
    pub(crate) opcode: u8,
    pub(crate) body: Vec<u8>,
    pub(crate) warnings: Vec<String>,
}

impl Response {
    /// This response with `warnings` for the client.
    pub(crate) fn with_warnings(mut self, warnings: Vec<String>) -> Response {
        self.warnings = warnings;
        self
    }
}

pub(crate) fn ready() -> Response {
    Response {
        opcode: opcode::READY,
        body: Vec::new(),
        warnings: Vec::new(),
    }
}

/// SUPPORTED: no `SCYLLA_*` keys (drivers would assume ScyllaDB extensions)
/// and no compression.
pub(crate) fn supported() -> Response {
    let mut w = Writer::new();
    w.string_multimap(&[
        ("COMPRESSION", &[]),
        ("CQL_VERSION", &[crate::engine::system::CQL_VERSION]),
        ("PROTOCOL_VERSIONS", &["4/v4"]),
    ]);
    Response {
        opcode: opcode::SUPPORTED,
        body: w.buf,
        warnings: Vec::new(),
    }
}

pub(crate) fn error(e: &CqlError) -> Response {
    let mut w = Writer::new();
    e.encode(&mut w);
    Response {
        opcode: opcode::ERROR,
        body: w.buf,
        warnings: Vec::new(),
    }
}

fn result(kind: i32, w: impl FnOnce(&mut Writer)) -> Response {
    let mut out = Writer::new();
    out.int(kind);
    w(&mut out);
    Response {
        opcode: opcode::RESULT,
        body: out.buf,
        warnings: Vec::new(),
    }
}

pub(crate) fn void() -> Response {
    result(1, |_| {})
}

pub(crate) fn set_keyspace(ks: &str) -> Response {
    result(3, |w| w.string(ks))
}

pub(crate) fn schema_change(c: &SchemaChange) -> Response {
    result(5, |w| {
        w.string(c.change);
        w.string(if c.table.is_some() {
            "TABLE"
        } else {
            "KEYSPACE"
        });
        w.string(&c.keyspace);
        if let Some(t) = &c.table {
            w.string(t);
        }
    })
}

/// Column specs with the global-table-spec flag when all share one table.
fn specs(
    w: &mut Writer,
    flags: i32,
    cols: &[ColumnSpec],
    paging_state: Option<&[u8]>,
    pk: Option<&[u16]>,
) {
    let first = cols.first().map(|c| (&c.keyspace, &c.table));
    let global = first.is_some_and(|(k, t)| cols.iter().all(|c| &c.keyspace == k && &c.table == t));
    w.int(
        flags | if global { 0x0001 } else { 0 } | if paging_state.is_some() { 0x0002 } else { 0 },
    );
    w.len_int(cols.len());
    if let Some(pk) = pk {
        w.len_int(pk.len());
        for i in pk {
            w.short(*i);
        }
    }
    if let Some(p) = paging_state {
        w.bytes(Some(p));
    }
    if let (true, Some((k, t))) = (global, first) {
        w.string(k);
        w.string(t);
    }
    for c in cols {
        if !global {
            w.string(&c.keyspace);
            w.string(&c.table);
        }
        w.string(&c.name);
        c.ty.encode_option(w);
    }
}

/// RESULT Prepared: id, bind metadata (with `pk_indexes`), result metadata
/// (NO_METADATA for statements that return no rows).
pub(crate) fn prepared(id: &[u8], p: &Prepared) -> Response {
    result(4, |w| {
        w.short_bytes(id);
        specs(w, 0, &p.binds, None, Some(&p.pk_indexes));
        if p.result.is_empty() {
            w.int(0x0004);
            w.int(0);
        } else {
            specs(w, 0, &p.result, None, None);
        }
    })
}

/// RESULT Rows, always with full metadata.
pub(crate) fn rows(columns: &[ResultColumn], page: &Page) -> Response {
    result(2, |w| {
        specs(w, 0, columns, page.paging_state.as_deref(), None);
        w.len_int(page.rows.len());
        for row in &page.rows {
            for cell in row {
                w.bytes(cell.as_deref());
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(flags: u8, tail: &[u8]) -> Vec<u8> {
        let mut b = vec![0, 4, flags];
        b.extend_from_slice(tail);
        b
    }

    #[test]
    fn query_with_values_page_size_state_and_timestamp() {
        let mut body = Vec::new();
        let q = b"SELECT 1";
        body.extend_from_slice(&(q.len() as i32).to_be_bytes());
        body.extend_from_slice(q);
        let mut tail = vec![0, 2, 0, 0, 0, 1, 7, 0xff, 0xff, 0xff, 0xfe];
        tail.extend_from_slice(&10i32.to_be_bytes());
        tail.extend_from_slice(&[0, 0, 0, 2, 9, 9]);
        tail.extend_from_slice(&42i64.to_be_bytes());
        body.extend(params(0x01 | 0x04 | 0x08 | 0x20, &tail));
        let Request::Query(text, p) = decode(opcode::QUERY, &body).unwrap() else {
            panic!()
        };
        assert_eq!(text, "SELECT 1");
        assert_eq!(p.consistency, 4);
        assert_eq!(p.values, vec![Value::Bytes(vec![7]), Value::Unset]);
        assert_eq!(p.page_size, Some(10));
        assert_eq!(p.paging_state, Some(vec![9, 9]));
        assert_eq!(p.default_timestamp, Some(42));
    }

    #[test]
    fn bad_consistency_and_truncated_bodies_are_protocol_errors() {
        assert!(decode(opcode::EXECUTE, &[0, 1, 7, 0, 99, 0]).is_err());
        assert!(decode(opcode::EXECUTE, &[0, 1, 7]).is_err());
        assert!(decode(opcode::BATCH, &[0, 0, 1, 5]).is_err());
        assert!(decode(0x42, &[]).is_err());
    }

    #[test]
    fn supported_has_no_scylla_keys() {
        let s = supported();
        let mut r = Reader::new(&s.body);
        let n = r.short().unwrap();
        for _ in 0..n {
            let k = r.string().unwrap();
            assert!(!k.starts_with("SCYLLA"));
            r.string_list().unwrap();
        }
    }
}
