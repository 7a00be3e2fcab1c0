//! Opening the session: the slow, once-per-process part of
//! [`CqlStore::connect`](super::CqlStore::connect), before the schema is
//! made sure of (`keyspace.rs`).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::cluster::metadata::Peer;
use scylla::policies::host_filter::HostFilter;
use tokio::time::Instant;

use super::errors;
use super::tls;
use crate::cell::OpKind;
use crate::error::{StoreError, StoreErrorKind};
use crate::settings::CqlSettings;

/// The operation named in errors raised while connecting.
///
/// [`OpKind`] has no "connect"; connecting reads the cluster's metadata (and
/// the schema check reads `system_schema`), so `Read` is the least misleading
/// of the four. DDL and PREPARE failures name the statement's own operation
/// and table instead.
pub(super) const CONNECT_OP: OpKind = OpKind::Read;

/// Builds the driver session within `connect_timeout`, as given.
///
/// # Why probe first
///
/// The driver (scylla 1.9) bounds only the TCP connect with its connection
/// timeout; the CQL handshake that follows has no limit, and `build()`
/// waits for the control connection *and* for every node's pool to open.
/// A node that accepts TCP and never answers — SIGSTOPped, hung, a proxy in
/// front of nothing — stalled every new process, although the other nodes
/// answered (a 3-node cluster, RF 3, one node stopped: "no usable
/// session"). So each contact point is first asked for its `OPTIONS` with a
/// per-node limit, all at once; the session is built on those that
/// answered, and a host filter keeps the driver away from those that did
/// not — until a background probe hears from them again
/// ([`reprobe_until_answered`]), when the next metadata refresh opens their
/// pools.
///
/// Connecting proceeds as soon as a majority of the contact points has
/// answered (then a QUORUM is reachable if the contact points are the
/// cluster's nodes), or all have settled, or half of `connect_timeout` has
/// passed with at least one answer — leaving the other half for the
/// session itself.
///
/// # Why each node's connect is short
///
/// The probe cannot see a node that goes dark after it answered (a cut
/// made while the process starts), nor the nodes the driver learns from
/// `system.peers` that are not contact points; `build()` still waits for a
/// pool to each. Each of those waits is one TCP connect, which the driver
/// bounds by its connection timeout: given all of `connect_timeout` it
/// outlasted the session's deadline, and a fresh process failed with "no
/// usable session" while a quorum answered (issue 31 (4c)). So each node's
/// connect gets [`node_connect_limit`]: a node that has not accepted a
/// connection by then is down for now, its pool is filled again in the
/// background (the driver's refiller, with the same limit), and the session
/// starts on the nodes that answered. A connect that hangs *after* TCP is
/// broken by the keepalive (`keepalive_every` + `keepalive_timeout`),
/// which runs from the moment the connection is open — a control
/// connection opened just before a cut gives up its metadata read that way,
/// and the driver goes on with the contact points.
pub(super) async fn open_session(settings: &CqlSettings) -> Result<Arc<Session>, StoreError> {
    let timeout = settings.connect_timeout;
    let invalid = |problem: crate::settings::InvalidSetting| {
        StoreError::new(
            StoreErrorKind::Invalid,
            CONNECT_OP,
            None,
            format!("invalid settings: {}", problem.message),
        )
    };
    let tls_config = tls::client_config(&settings.tls).map_err(invalid)?;
    let credentials = settings.credentials().map_err(invalid)?;
    let probe = Probe {
        tls: tls_config.clone(),
        settings: settings.tls.clone(),
    };
    let error = |kind, why: String| {
        StoreError::new(
            kind,
            CONNECT_OP,
            None,
            format!(
                "connecting to {} (connect timeout {}): {why}",
                settings.contact_points.join(", "),
                fmt_secs(timeout)
            ),
        )
    };
    let started = Instant::now();
    let deadline = started + timeout;
    let probed = probe_contact_points(&probe, &settings.contact_points, started, deadline).await;
    if probed.answered.is_empty() {
        // Refused by every node for the same kind of reason (TLS): say so,
        // rather than "unreachable".
        let kind = if !probed.failed.is_empty() && probed.failed.iter().all(|f| f.refused) {
            StoreErrorKind::Authentication
        } else {
            StoreErrorKind::Connection
        };
        return Err(error(
            kind,
            format!("no contact point answered: {}", probed.describe_failures()),
        ));
    }
    if !probed.failed.is_empty() {
        tracing::warn!(
            unanswered = %probed.describe_failures(),
            "connecting without the contact points that did not answer; they are probed again in the background"
        );
    }
    let unresponsive = Arc::new(Unresponsive::default());
    unresponsive.extend(probed.failed.iter().filter_map(|f| f.addr));
    // Schema metadata of lockshift's keyspace only: it is all lockshift
    // reads, and a cluster with a large schema should not slow a start.
    let mut builder = SessionBuilder::new()
        .known_nodes(probed.answered.iter().map(|(point, _)| point.as_str()))
        .connection_timeout(node_connect_limit(timeout))
        .keepalive_interval(settings.keepalive_every)
        .keepalive_timeout(settings.keepalive_timeout)
        .metadata_request_clientside_timeout(timeout)
        .keyspaces_to_fetch([settings.keyspace.as_str()])
        .host_filter(Arc::new(SkipUnresponsive(unresponsive.clone())))
        .tls_context(tls_config);
    if let Some((user, password)) = &credentials {
        builder = builder.user(user.as_str(), password.expose());
    }
    let left = deadline.saturating_duration_since(Instant::now());
    let session = match tokio::time::timeout(left, builder.build()).await {
        Ok(Ok(session)) => Arc::new(session),
        Ok(Err(e)) => {
            let (kind, why) = errors::describe_new_session(&e, settings);
            return Err(error(kind, why));
        }
        Err(_) => {
            return Err(error(
                StoreErrorKind::Connection,
                format!(
                    "no usable session within {} (the handshake or the first metadata read \
                     did not finish; answered: {})",
                    fmt_secs(timeout),
                    probed
                        .answered
                        .iter()
                        .map(|(p, _)| p.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    };
    if !unresponsive.is_empty() {
        tokio::spawn(reprobe_until_answered(
            probe,
            Arc::downgrade(&session),
            unresponsive,
            timeout,
        ));
    }
    Ok(session)
}

/// How to ask a node for its `OPTIONS`: in the clear, or through TLS with
/// the configuration the driver gets.
#[derive(Clone)]
struct Probe {
    tls: Option<Arc<rustls::ClientConfig>>,
    settings: crate::settings::TlsSettings,
}

/// The most one node's TCP connect may take before the driver counts it
/// down for now (see [`open_session`]).
///
/// One second: a connect takes one network round trip — well under a
/// millisecond in a datacenter, a few hundred across continents — and
/// Linux sends its first SYN again after one second, so a node that has not
/// answered by then has lost a packet or is gone. Never more than the
/// whole `connect_timeout`.
const NODE_CONNECT_LIMIT: Duration = Duration::from_secs(1);

fn node_connect_limit(connect_timeout: Duration) -> Duration {
    connect_timeout.min(NODE_CONNECT_LIMIT)
}

/// `2s`, `300ms`: a duration as the operator wrote it.
fn fmt_secs(d: Duration) -> String {
    format!("{d:?}")
}

/// What probing the contact points found.
#[derive(Debug, Default)]
struct Probed {
    /// Contact points that answered, with the address that did.
    answered: Vec<(String, SocketAddr)>,
    /// Contact points that did not (yet) answer.
    failed: Vec<ProbeFailure>,
}

#[derive(Debug)]
struct ProbeFailure {
    point: String,
    /// The address that was tried, when the name resolved.
    addr: Option<SocketAddr>,
    why: String,
    /// The node answered, but refused this client (TLS): no use waiting.
    refused: bool,
}

/// Why one probe failed: the words, and whether the node refused us.
#[derive(Debug)]
struct ProbeError {
    why: String,
    refused: bool,
}

impl ProbeError {
    fn unreachable(why: String) -> Self {
        ProbeError {
            why,
            refused: false,
        }
    }
}

impl Probed {
    fn describe_failures(&self) -> String {
        self.failed
            .iter()
            .map(|f| format!("{} ({})", f.point, f.why))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Probes every contact point at once (see [`open_session`] for when it
/// stops waiting).
async fn probe_contact_points(
    probe: &Probe,
    points: &[String],
    started: Instant,
    deadline: Instant,
) -> Probed {
    let per_node = deadline.saturating_duration_since(started);
    let mut pending: FuturesUnordered<_> = points
        .iter()
        .map(|point| async move { (point.clone(), probe_point(probe, point, per_node).await) })
        .collect();
    let halfway = started + per_node / 2;
    let mut probed = Probed::default();
    let mut settled = Vec::new();
    loop {
        let stop = StopWaiting {
            answered: probed.answered.len(),
            settled: settled.len(),
            total: points.len(),
            halfway: Instant::now() >= halfway,
            timed_out: Instant::now() >= deadline,
        };
        if stop.now() {
            break;
        }
        // The next moment the rule may say stop without a new answer.
        let wake = if probed.answered.is_empty() {
            deadline
        } else {
            halfway
        };
        tokio::select! {
            next = pending.next() => match next {
                Some((point, Ok(addr))) => {
                    settled.push(point.clone());
                    probed.answered.push((point, addr));
                }
                Some((point, Err((addr, e)))) => {
                    settled.push(point.clone());
                    probed.failed.push(ProbeFailure { point, addr, why: e.why, refused: e.refused });
                }
                // Every probe settled (and nothing reached its deadline).
                None => break,
            },
            _ = tokio::time::sleep_until(wake) => {}
        }
    }
    drop(pending);
    let why = if Instant::now() >= deadline {
        format!("no CQL answer within {}", fmt_secs(per_node))
    } else {
        "no CQL answer yet; connected without it".to_string()
    };
    for point in points.iter().filter(|p| !settled.contains(p)) {
        probed.failed.push(ProbeFailure {
            point: point.clone(),
            // The address is what the host filter and the background probe
            // need; a name that did not resolve in time is left to the
            // driver's own discovery.
            addr: point.parse().ok(),
            why: why.clone(),
            refused: false,
        });
    }
    probed
}

/// When connecting stops waiting for contact points to answer (the rule of
/// [`open_session`], and of the README's "Connecting"): once a majority has
/// answered; once all have answered or failed; once half the connect
/// timeout has passed with at least one answer — one reachable node
/// coordinates for the whole cluster, as with every driver; or at the
/// timeout, with none (connecting then fails).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StopWaiting {
    answered: usize,
    settled: usize,
    total: usize,
    /// Half the connect timeout has passed.
    halfway: bool,
    /// The whole connect timeout has passed.
    timed_out: bool,
}

impl StopWaiting {
    fn now(self) -> bool {
        self.answered > self.total / 2
            || self.settled >= self.total
            || (self.halfway && self.answered > 0)
            || self.timed_out
    }
}

/// Resolves `point` and asks the first address that answers for its
/// `OPTIONS`, all within `limit`.
async fn probe_point(
    probe: &Probe,
    point: &str,
    limit: Duration,
) -> Result<SocketAddr, (Option<SocketAddr>, ProbeError)> {
    let attempt = async {
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host(point)
            .await
            .map_err(|e| {
                (
                    None,
                    ProbeError::unreachable(format!("cannot resolve: {e}")),
                )
            })?
            .collect();
        let mut last = (
            None,
            ProbeError::unreachable("resolves to no address".to_string()),
        );
        for addr in addrs {
            match probe_addr(probe, addr).await {
                Ok(()) => return Ok(addr),
                Err(e) => last = (Some(addr), e),
            }
        }
        Err(last)
    };
    match tokio::time::timeout(limit, attempt).await {
        Ok(result) => result,
        Err(_) => Err((
            point.parse().ok(),
            ProbeError::unreachable(format!("no CQL answer within {}", fmt_secs(limit))),
        )),
    }
}

/// One CQL v4 `OPTIONS` round trip (through TLS when configured): any
/// response frame means a live node.
///
/// Written out rather than done through the driver: the driver has no way
/// to talk to one node alone without building a whole session, whose
/// handshake is the very thing that hangs. Done through TLS exactly as
/// the driver's connections are (same configuration, same server name: the
/// node's IP address), a handshake failure is reported here, at once and
/// in words, rather than as a session that never comes up.
async fn probe_addr(probe: &Probe, addr: SocketAddr) -> Result<(), ProbeError> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| ProbeError::unreachable(format!("connect: {e}")))?;
    match &probe.tls {
        None => options_round_trip(stream).await.map_err(|e| {
            // A node that requires TLS reads our clear-text frame as a
            // broken TLS record and drops the connection without a word.
            let closed = matches!(
                e.kind(),
                std::io::ErrorKind::UnexpectedEof
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::BrokenPipe
            );
            if closed {
                ProbeError {
                    why: format!(
                        "the node closed the connection without a CQL answer ({e}): it may \
                         require TLS (set store.cql.tls.ca_file to the CA that signed its \
                         certificate)"
                    ),
                    refused: true,
                }
            } else {
                ProbeError::unreachable(e.to_string())
            }
        }),
        Some(config) => {
            let connector = tokio_rustls::TlsConnector::from(config.clone());
            let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
            let stream = connector
                .connect(name, stream)
                .await
                .map_err(|e| ProbeError {
                    why: tls::describe_handshake_error(&e, &probe.settings),
                    refused: true,
                })?;
            options_round_trip(stream).await.map_err(|e| {
                // TLS 1.3 reports a refused client certificate only after
                // the handshake, on the first read.
                if e.get_ref()
                    .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
                {
                    ProbeError {
                        why: tls::describe_handshake_error(&e, &probe.settings),
                        refused: true,
                    }
                } else {
                    ProbeError::unreachable(e.to_string())
                }
            })
        }
    }
}

/// Sends `OPTIONS` on `stream` and reads one response header.
async fn options_round_trip<S>(mut stream: S) -> std::io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // Header: version 4 request, no flags, stream 1, opcode OPTIONS (5),
    // empty body.
    const OPTIONS: [u8; 9] = [0x04, 0x00, 0x00, 0x01, 0x05, 0x00, 0x00, 0x00, 0x00];
    stream.write_all(&OPTIONS).await?;
    stream.flush().await?;
    let mut header = [0u8; 9];
    stream.read_exact(&mut header).await?;
    // A response has the direction bit set on the version byte.
    if header[0] & 0x80 == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not a CQL response (first byte {:#04x})", header[0]),
        ));
    }
    Ok(())
}

/// Addresses the driver must not connect to: contact points that did not
/// answer. Shared by the host filter and the background probe.
#[derive(Debug, Default)]
struct Unresponsive(RwLock<HashSet<SocketAddr>>);

impl Unresponsive {
    fn set(&self) -> std::sync::RwLockReadGuard<'_, HashSet<SocketAddr>> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn extend(&self, addrs: impl IntoIterator<Item = SocketAddr>) {
        self.0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(addrs);
    }

    fn remove(&self, addr: &SocketAddr) {
        self.0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(addr);
    }

    fn is_empty(&self) -> bool {
        self.set().is_empty()
    }
}

/// Accepts every node but the unresponsive ones.
struct SkipUnresponsive(Arc<Unresponsive>);

impl HostFilter for SkipUnresponsive {
    fn accept(&self, peer: &Peer) -> bool {
        let addr = SocketAddr::new(peer.address.ip(), peer.address.port());
        !self.0.set().contains(&addr)
    }
}

/// Asks the unresponsive contact points again every `every` (at least a
/// second); each that answers is let through the host filter, and a
/// metadata refresh opens its pool. Ends when all answered or the session
/// is gone.
async fn reprobe_until_answered(
    probe: Probe,
    session: Weak<Session>,
    unresponsive: Arc<Unresponsive>,
    every: Duration,
) {
    let every = every.max(Duration::from_secs(1));
    loop {
        tokio::time::sleep(every).await;
        let waiting: Vec<SocketAddr> = unresponsive.set().iter().copied().collect();
        let mut recovered = false;
        for addr in waiting {
            if matches!(
                tokio::time::timeout(every, probe_addr(&probe, addr)).await,
                Ok(Ok(()))
            ) {
                tracing::info!(%addr, "a contact point answers again; connecting to it");
                unresponsive.remove(&addr);
                recovered = true;
            }
        }
        let Some(session) = session.upgrade() else {
            return;
        };
        if recovered && let Err(e) = session.refresh_metadata().await {
            tracing::debug!(error = %e, "metadata refresh after a node came back failed; the periodic one follows");
        }
        if unresponsive.is_empty() {
            return;
        }
    }
}

#[cfg(test)]
#[path = "connect_tests.rs"]
mod tests;
