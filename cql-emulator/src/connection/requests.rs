//! The statement requests: QUERY, PREPARE, EXECUTE and BATCH, with the
//! fault rules applied around each and every engine call under [`guarded`].

use std::sync::Arc;

use tracing::trace;

use super::{EndpointState, MAX_PREPARED, Reply, Session, guarded};
use crate::engine::{ExecOptions, Outcome, Prepared};
use crate::error::{CqlError, ErrorKind};
use crate::faults::Fault;
use crate::messages::{self, BatchQuery, QueryParams, Request, Response};
use crate::murmur3;
use crate::wire::Value;

/// Handles one QUERY, PREPARE, EXECUTE or BATCH.
pub(super) async fn handle(
    shared: &EndpointState,
    session: &Session,
    op: u8,
    body: &[u8],
) -> Reply {
    let request = match messages::decode(op, body) {
        Ok(r) => r,
        Err(e) => return Reply::Send(messages::error(&e)),
    };
    let result = match request {
        Request::Query(text, params) => query(shared, session, text, &params).await,
        Request::Prepare(text) => prepare(shared, session, text).map(Reply::Send),
        Request::Execute(id, params) => execute(shared, session, id, &params).await,
        Request::Batch(b) => batch(shared, session, &b).await,
        _ => Err(CqlError::protocol(format!("unexpected opcode 0x{op:02x}"))),
    };
    result.unwrap_or_else(|e| {
        trace!(code = e.code(), message = %e.message, "request failed");
        Reply::Send(messages::error(&e))
    })
}

/// Cassandra's prepared id: a hash of the keyspace and the query text, so
/// every connection (and a restarted endpoint) agrees on it.
fn statement_id(keyspace: Option<&str>, text: &str) -> Vec<u8> {
    let mut input = keyspace.unwrap_or("").as_bytes().to_vec();
    input.push(0);
    input.extend_from_slice(text.as_bytes());
    let (a, b) = murmur3::hash3_x64_128(&input);
    let mut id = a.to_be_bytes().to_vec();
    id.extend_from_slice(&b.to_be_bytes());
    id
}

fn prepare(shared: &EndpointState, session: &Session, text: &str) -> Result<Response, CqlError> {
    let ks = session.keyspace();
    let prepared = guarded(|| {
        let stmt = crate::parse::parse(text)?;
        shared.engine().compile(ks.as_deref(), &stmt)
    })?;
    let id = statement_id(ks.as_deref(), text);
    let response = messages::prepared(&id, &prepared);
    let mut cache = shared.prepared();
    if cache.len() >= MAX_PREPARED {
        cache.clear();
    }
    cache.insert(id, Arc::new(prepared));
    Ok(response)
}

fn fault_error(fault: Fault, consistency: u16, write_type: &'static str) -> CqlError {
    let note = "(injected by the lockshift CQL emulator)";
    match fault {
        Fault::Unavailable => CqlError::new(
            ErrorKind::Unavailable {
                consistency,
                required: 1,
                alive: 0,
            },
            format!("Cannot achieve consistency level: 1 replica required, 0 alive {note}"),
        ),
        Fault::WriteTimeout => CqlError::new(
            ErrorKind::WriteTimeout {
                consistency,
                received: 0,
                block_for: 1,
                write_type,
            },
            format!("Operation timed out - received only 0 responses {note}"),
        ),
        Fault::ReadTimeout => CqlError::new(
            ErrorKind::ReadTimeout {
                consistency,
                received: 0,
                block_for: 1,
                data_present: false,
            },
            format!("Operation timed out - received only 0 responses {note}"),
        ),
        Fault::Overloaded => CqlError::new(
            ErrorKind::Overloaded,
            format!("Server is overloaded {note}"),
        ),
        Fault::Latency(_) | Fault::DropConnection => CqlError::server("not an error fault"),
    }
}

fn fault_reply(fault: Fault, consistency: u16, write_type: &'static str) -> Reply {
    match fault {
        Fault::DropConnection => Reply::Drop,
        f => Reply::Send(messages::error(&fault_error(f, consistency, write_type))),
    }
}

/// Runs a compiled statement with the fault rules around it.
async fn run(
    shared: &EndpointState,
    session: &Session,
    prepared: &Prepared,
    params: &QueryParams,
    values: &[Value],
    recompile: Option<&str>,
) -> Result<Reply, CqlError> {
    // Only build the table list when a rule could use it (the hot path).
    let decision = if shared.faults.is_armed() {
        shared.faults.decide(prepared.op, &prepared.table_names())
    } else {
        Default::default()
    };
    if !decision.delay.is_zero() {
        let delay = if prepared.conditional {
            decision.delay * crate::engine::PAXOS_ROUND_TRIPS
        } else {
            decision.delay
        };
        tokio::time::sleep(delay).await;
    }
    if let Some(f) = decision.before {
        return Ok(fault_reply(f, params.consistency, prepared.write_type));
    }
    let opts = ExecOptions {
        values,
        page_size: params.page_size,
        paging_state: params.paging_state.as_deref(),
        default_timestamp: params.default_timestamp,
        consistency: params.consistency,
    };
    let ks = session.keyspace();
    let outcome = guarded(|| {
        let mut engine = shared.engine();
        if engine.is_current(prepared) {
            return engine.execute(prepared, &opts);
        }
        // The schema changed between compiling and running (a drop and
        // re-create in between): a QUERY compiles again, an EXECUTE asks
        // the driver to re-prepare.
        match recompile {
            Some(text) => {
                let stmt = crate::parse::parse(text)?;
                let fresh = engine.compile(ks.as_deref(), &stmt)?;
                engine.execute(&fresh, &opts)
            }
            None => Err(CqlError::new(
                ErrorKind::Unprepared { id: Vec::new() },
                "stale",
            )),
        }
    })?;
    if let Some(f) = decision.after {
        return Ok(fault_reply(f, params.consistency, prepared.write_type));
    }
    Ok(Reply::Send(match outcome {
        Outcome::Void => messages::void(),
        Outcome::Rows(page) => messages::rows(&prepared.result, &page).with_warnings(page.warnings),
        Outcome::Cas(columns, page) => messages::rows(&columns, &page),
        Outcome::SetKeyspace(ks) => {
            let r = messages::set_keyspace(&ks);
            session.set_keyspace(ks);
            r
        }
        Outcome::SchemaChange(c) => messages::schema_change(&c),
    }))
}

async fn query(
    shared: &EndpointState,
    session: &Session,
    text: &str,
    params: &QueryParams,
) -> Result<Reply, CqlError> {
    let ks = session.keyspace();
    let prepared = guarded(|| {
        let stmt = crate::parse::parse(text)?;
        shared.engine().compile(ks.as_deref(), &stmt)
    })?;
    let values = by_name(&prepared, params)?;
    run(shared, session, &prepared, params, &values, Some(text)).await
}

fn unprepared(id: &[u8]) -> CqlError {
    CqlError::new(
        ErrorKind::Unprepared { id: id.to_vec() },
        format!("Prepared query with ID {} not found", hex(id)),
    )
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Looks up a prepared statement. Whether its tables still exist is
/// checked under the engine lock when it runs.
fn lookup(shared: &EndpointState, id: &[u8]) -> Result<Arc<Prepared>, CqlError> {
    shared
        .prepared()
        .get(id)
        .cloned()
        .ok_or_else(|| unprepared(id))
}

async fn execute(
    shared: &EndpointState,
    session: &Session,
    id: &[u8],
    params: &QueryParams,
) -> Result<Reply, CqlError> {
    let p = lookup(shared, id)?;
    let values = by_name(&p, params)?;
    match run(shared, session, &p, params, &values, None).await {
        Err(e) if matches!(e.kind, ErrorKind::Unprepared { .. }) => {
            shared.prepared().remove(id);
            Err(unprepared(id))
        }
        other => other,
    }
}

/// Values in marker order: as sent, or matched by name.
fn by_name(p: &Prepared, params: &QueryParams) -> Result<Vec<Value>, CqlError> {
    let Some(names) = &params.names else {
        return Ok(params.values.clone());
    };
    p.binds
        .iter()
        .map(|spec| {
            names
                .iter()
                .position(|n| *n == spec.name.to_ascii_lowercase())
                .and_then(|i| params.values.get(i).cloned())
                .ok_or_else(|| {
                    CqlError::invalid(format!("No value was bound for the marker {}", spec.name))
                })
        })
        .collect()
}

async fn batch(
    shared: &EndpointState,
    session: &Session,
    b: &messages::BatchRequest<'_>,
) -> Result<Reply, CqlError> {
    let write_type = match b.kind {
        0 => "BATCH",
        1 => "UNLOGGED_BATCH",
        2 => {
            return Err(CqlError::invalid(
                "counter batches are not supported by the lockshift CQL emulator",
            ));
        }
        k => return Err(CqlError::protocol(format!("invalid batch type {k}"))),
    };
    let ks = session.keyspace();
    let mut statements = Vec::new();
    for (q, values) in &b.items {
        let (p, id) = match q {
            BatchQuery::Prepared(id) => (lookup(shared, id)?, Some(*id)),
            BatchQuery::Text(text) => (
                Arc::new(guarded(|| {
                    let stmt = crate::parse::parse(text)?;
                    shared.engine().compile(ks.as_deref(), &stmt)
                })?),
                None,
            ),
        };
        statements.push((p, values.as_slice(), id));
    }
    let mut tables: Vec<(&str, &str)> = Vec::new();
    for (p, _, _) in &statements {
        for t in p.table_names() {
            if !tables.contains(&t) {
                tables.push(t);
            }
        }
    }
    let decision = shared
        .faults
        .decide(crate::faults::RequestOp::Write, &tables);
    if !decision.delay.is_zero() {
        tokio::time::sleep(decision.delay).await;
    }
    if let Some(f) = decision.before {
        return Ok(fault_reply(f, b.consistency, write_type));
    }
    guarded(|| {
        let mut engine = shared.engine();
        if let Some((_, _, id)) = statements.iter().find(|(p, _, _)| !engine.is_current(p)) {
            // The driver re-prepares on Unprepared, for batches too. A text
            // statement cannot be stale: it was compiled just now.
            let id = id.unwrap_or_default();
            shared.prepared().remove(id);
            return Err(unprepared(id));
        }
        let items: Vec<(&Prepared, &[Value])> = statements
            .iter()
            .map(|(p, v, _)| (p.as_ref(), *v))
            .collect();
        engine.execute_batch(&items, b.default_timestamp)
    })?;
    if let Some(f) = decision.after {
        return Ok(fault_reply(f, b.consistency, write_type));
    }
    Ok(Reply::Send(messages::void()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statement_ids_depend_on_keyspace_and_text_only() {
        let a = statement_id(Some("ks"), "SELECT 1");
        assert_eq!(a, statement_id(Some("ks"), "SELECT 1"));
        assert_eq!(a.len(), 16);
        assert_ne!(a, statement_id(None, "SELECT 1"));
        assert_ne!(a, statement_id(Some("ks"), "SELECT 2"));
    }
}
