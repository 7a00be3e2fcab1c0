//! One client connection: a reader loop, a writer task, and one task per
//! QUERY / PREPARE / EXECUTE / BATCH so pipelined requests run concurrently
//! and answer in whatever order they finish, each with its stream id.
//!
//! # Invariants
//!
//! 1. Nothing a client sends can panic the server: decoding never
//!    indexes past a length it has not checked, and all engine work runs
//!    under [`guarded`], which turns a bug's panic into a `ServerError`
//!    answer for that one request.
//! 2. A frame's body is only buffered once its header passed the
//!    version and size checks (see [`crate::frame`]).
//! 3. STARTUP, OPTIONS and REGISTER are answered inline, in order, so
//!    a request after STARTUP always sees the connection started.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, trace};

use crate::engine::{Engine, Prepared};
use crate::error::CqlError;
use crate::faults::FaultController;
use crate::frame::{self, HEADER_LEN, HeaderCheck, opcode};
use crate::messages::{self, Request, Response};

mod requests;

use requests::handle;

/// At most this many prepared statements are kept; beyond it the cache is
/// emptied and drivers re-prepare on `Unprepared`, as they do after a
/// Cassandra restart.
const MAX_PREPARED: usize = 50_000;

/// State shared by every connection of an endpoint.
#[derive(Debug)]
pub(crate) struct EndpointState {
    pub(crate) engine: Mutex<Engine>,
    pub(crate) prepared: Mutex<std::collections::HashMap<Vec<u8>, Arc<Prepared>>>,
    pub(crate) faults: FaultController,
    pub(crate) max_frame_bytes: usize,
}

impl EndpointState {
    fn engine(&self) -> MutexGuard<'_, Engine> {
        // Invariant 1: a panic under the lock is caught by `guarded`; the engine's
        // maps stay structurally valid, so keep serving.
        self.engine.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn prepared(&self) -> MutexGuard<'_, std::collections::HashMap<Vec<u8>, Arc<Prepared>>> {
        self.prepared.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Runs `f`, turning a panic into a `ServerError` (invariant 1).
fn guarded<T>(f: impl FnOnce() -> Result<T, CqlError>) -> Result<T, CqlError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(CqlError::server(
            "internal error in the lockshift CQL emulator (a bug: see its log)",
        ))
    })
}

/// Per-connection session state.
#[derive(Debug, Default)]
struct Session {
    keyspace: Mutex<Option<String>>,
    started: AtomicBool,
}

impl Session {
    fn keyspace(&self) -> Option<String> {
        self.keyspace
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_keyspace(&self, ks: String) {
        *self.keyspace.lock().unwrap_or_else(PoisonError::into_inner) = Some(ks);
    }
}

/// What a request task produced.
enum Reply {
    Send(Response),
    /// The DropConnection fault: close without answering.
    Drop,
}

/// Serves one accepted connection until the client leaves, a fault drops
/// it, or `shutdown` fires.
pub(crate) async fn serve(
    stream: TcpStream,
    shared: Arc<EndpointState>,
    shutdown: CancellationToken,
) {
    let peer = stream.peer_addr().ok();
    debug!(?peer, "CQL connection opened");
    let _ = stream.set_nodelay(true);
    let (rd, wr) = stream.into_split();
    let conn = shutdown.child_token();
    let (tx, rx) = mpsc::channel::<Vec<u8>>(4096);
    let writer = tokio::spawn(write_loop(wr, rx, conn.clone()));
    let session = Arc::new(Session::default());
    // Buffered: a header and its body usually arrive together, and many
    // pipelined requests per read keep syscalls well below one per request.
    let mut rd = BufReader::with_capacity(64 * 1024, rd);
    let fatal = read_loop(&mut rd, &shared, &session, &tx, &conn).await;
    drop(tx);
    // The writer drains what is queued, then shuts our side down; it stops
    // at once if the connection was dropped by a fault or shutdown.
    let _ = writer.await;
    if fatal {
        linger(&mut rd, &conn).await;
    }
    debug!(?peer, "CQL connection closed");
}

async fn write_loop(wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Vec<u8>>, conn: CancellationToken) {
    let mut out = BufWriter::with_capacity(64 * 1024, wr);
    loop {
        let frame = tokio::select! {
            f = rx.recv() => f,
            _ = conn.cancelled() => break,
        };
        let Some(frame) = frame else { break };
        if out.write_all(&frame).await.is_err() {
            conn.cancel();
            break;
        }
        // Batch whatever else is ready into the same flush.
        while let Ok(more) = rx.try_recv() {
            if out.write_all(&more).await.is_err() {
                conn.cancel();
                return;
            }
        }
        if out.flush().await.is_err() {
            conn.cancel();
            break;
        }
    }
    let _ = out.flush().await;
    let _ = out.shutdown().await;
}

/// Reads and dispatches requests; true if it stopped on a fatal protocol
/// error (after queueing the answer).
async fn read_loop(
    rd: &mut BufReader<OwnedReadHalf>,
    shared: &Arc<EndpointState>,
    session: &Arc<Session>,
    tx: &mpsc::Sender<Vec<u8>>,
    conn: &CancellationToken,
) -> bool {
    loop {
        let (h, mut body) = match read_frame(rd, shared, tx, conn).await {
            Frame::Request(h, body) => (h, body),
            Frame::End(fatal) => return fatal,
        };
        let stream = h.stream;
        // Drop the custom payload (if flagged) so the body is the message;
        // a body without one is answered with the error, inline.
        let inline = match frame::request_body(&h, &body) {
            Ok(message) => {
                let skip = body.len() - message.len();
                body.drain(..skip);
                inline_answer(h.opcode, &body, session)
            }
            Err(e) => Some(messages::error(&e)),
        };
        if let Some(r) = inline {
            if !deliver(Reply::Send(r), stream, tx, conn).await {
                return false;
            }
            continue;
        }
        // Without fault rules nothing can make a request wait, so run it
        // here: no task spawn, no cross-thread wake-up per request. With
        // rules, a latency fault must not hold up the requests behind it,
        // so each request gets its own task and answers when it finishes.
        if !shared.faults.is_armed() {
            let reply = handle(shared, session, h.opcode, &body).await;
            if !deliver(reply, stream, tx, conn).await {
                return false;
            }
            continue;
        }
        let (shared, session, tx, conn) =
            (shared.clone(), session.clone(), tx.clone(), conn.clone());
        tokio::spawn(async move {
            let reply = handle(&shared, &session, h.opcode, &body).await;
            deliver(reply, stream, &tx, &conn).await;
        });
    }
}

/// The answer to a request the reader answers itself, in order, or `None`
/// for a statement. Invariant 3: connection-level requests are answered
/// inline; statements run in their own task, which decodes the body (once).
fn inline_answer(op: u8, body: &[u8], session: &Session) -> Option<Response> {
    match op {
        opcode::OPTIONS | opcode::STARTUP | opcode::REGISTER | opcode::AUTH_RESPONSE => {
            Some(match messages::decode(op, body) {
                Ok(Request::Startup(opts)) => startup(&opts, session),
                Ok(Request::Options) => messages::supported(),
                Ok(_) => messages::ready(),
                Err(e) => messages::error(&e),
            })
        }
        _ if !session.started.load(Ordering::Acquire) => Some(messages::error(
            &CqlError::protocol("the connection has not been started: send STARTUP first"),
        )),
        _ => None,
    }
}

/// What reading the next frame gave.
enum Frame {
    /// A request: its header and its body.
    Request(frame::Header, Vec<u8>),
    /// The connection ends: `true` after a fatal protocol error, answered.
    End(bool),
}

/// Reads the next frame's header and body; a frame of another protocol
/// version, or one the connection cannot continue after, is answered here.
async fn read_frame(
    rd: &mut BufReader<OwnedReadHalf>,
    shared: &Arc<EndpointState>,
    tx: &mpsc::Sender<Vec<u8>>,
    conn: &CancellationToken,
) -> Frame {
    // Versions 1 and 2 have an 8-byte header: read that much first, so
    // an old client is answered rather than left waiting for a 9th byte.
    let mut header = [0u8; HEADER_LEN];
    let read = tokio::select! {
        r = rd.read_exact(&mut header[..frame::OLD_HEADER_LEN]) => r,
        _ = conn.cancelled() => return Frame::End(false),
    };
    if read.is_err() {
        return Frame::End(false);
    }
    if let Some((version, stream)) = frame::old_version(&header) {
        trace!(version, "refusing protocol version");
        let e = messages::error(&frame::unsupported_version(version));
        let _ = tx
            .send(frame::old_response(version, stream, e.opcode, &e.body))
            .await;
        return Frame::End(true);
    }
    let read = tokio::select! {
        r = rd.read_exact(&mut header[frame::OLD_HEADER_LEN..]) => r,
        _ = conn.cancelled() => return Frame::End(false),
    };
    if read.is_err() {
        return Frame::End(false);
    }
    let h = match frame::check_header(&header, shared.max_frame_bytes) {
        HeaderCheck::Request(h) => h,
        HeaderCheck::WrongVersion { version, stream } => {
            trace!(version, "refusing protocol version");
            let e = messages::error(&frame::unsupported_version(version));
            let _ = tx.send(frame::response(stream, e.opcode, &e.body)).await;
            return Frame::End(true);
        }
        HeaderCheck::Fatal {
            stream,
            error_message,
        } => {
            let e = messages::error(&CqlError::protocol(error_message));
            let _ = tx.send(frame::response(stream, e.opcode, &e.body)).await;
            return Frame::End(true);
        }
    };
    let mut body = vec![0u8; h.length];
    let read = tokio::select! {
        r = rd.read_exact(&mut body) => r,
        _ = conn.cancelled() => return Frame::End(false),
    };
    if read.is_err() {
        return Frame::End(false);
    }
    Frame::Request(h, body)
}

/// Queues a reply (or drops the connection); false if the connection is gone.
async fn deliver(
    reply: Reply,
    stream: i16,
    tx: &mpsc::Sender<Vec<u8>>,
    conn: &CancellationToken,
) -> bool {
    match reply {
        Reply::Send(r) => tx.send(frame::response_of(stream, &r)).await.is_ok(),
        Reply::Drop => {
            debug!("dropping a connection (injected fault)");
            conn.cancel();
            false
        }
    }
}

/// After a fatal error (the answer sent, our side shut down): read what the
/// client still sends, briefly, so the kernel does not reset the connection
/// over unread input and discard the answer before the client reads it.
async fn linger(rd: &mut BufReader<OwnedReadHalf>, conn: &CancellationToken) {
    let mut sink = [0u8; 4096];
    let drain = async {
        while let Ok(n) = rd.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    };
    tokio::select! {
        _ = drain => {}
        _ = tokio::time::sleep(Duration::from_secs(2)) => {}
        _ = conn.cancelled() => {}
    }
}

fn startup(opts: &[(&str, &str)], session: &Session) -> Response {
    for (k, v) in opts {
        if k.eq_ignore_ascii_case("COMPRESSION") {
            return messages::error(&CqlError::protocol(format!(
                "Unknown compression algorithm: {v} (the lockshift CQL emulator supports none)"
            )));
        }
    }
    // CQL_VERSION is not checked strictly: the scylla driver sends "4.0.0".
    session.started.store(true, Ordering::Release);
    messages::ready()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guarded_turns_a_panic_into_a_server_error() {
        let r: Result<(), CqlError> = guarded(|| panic!("boom"));
        assert_eq!(r.unwrap_err().kind, crate::error::ErrorKind::Server);
    }
}
