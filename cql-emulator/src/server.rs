//! Starting and stopping an endpoint: [`Emulator::builder`], the listener
//! task, and [`EmulatorHandle`].

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockshift_store::schema::CASSANDRA_DEFAULT_GC_GRACE_SECONDS;
use lockshift_store::{SharedClock, SystemClock, TombstoneThresholds};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};
use uuid::Uuid;

use crate::connection::{self, EndpointState};
use crate::engine::Engine;
use crate::engine::system::NodeInfo;
use crate::error::EmulatorError;
use crate::faults::FaultController;
use crate::frame::DEFAULT_MAX_FRAME_BYTES;
use crate::read_costs::{ReadCostLog, TableReadCosts};

/// The host id every endpoint reports unless told otherwise. Fixed, so a
/// restarted endpoint is the same node to a driver that stayed connected.
pub const DEFAULT_HOST_ID: Uuid = Uuid::from_u128(0x6c6f_636b_7368_4966_8000_656d_756c_6174);

/// Entry point: `Emulator::builder()…start(addr)`.
#[derive(Debug)]
pub struct Emulator;

impl Emulator {
    /// A builder with the defaults: system clock, [`DEFAULT_HOST_ID`],
    /// 256 MiB frames, Cassandra's gc grace (10 days) for tables that set
    /// none.
    pub fn builder() -> EmulatorBuilder {
        EmulatorBuilder {
            clock: Arc::new(SystemClock),
            host_id: DEFAULT_HOST_ID,
            rpc_address: None,
            cluster_name: "lockshift-emulator".to_string(),
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            gc_grace: Duration::from_secs(CASSANDRA_DEFAULT_GC_GRACE_SECONDS as u64),
            tombstone_thresholds: TombstoneThresholds::default(),
            faults: FaultController::new(),
        }
    }
}

/// Configures an endpoint before it starts.
#[derive(Clone, Debug)]
pub struct EmulatorBuilder {
    clock: SharedClock,
    host_id: Uuid,
    rpc_address: Option<IpAddr>,
    cluster_name: String,
    max_frame_bytes: usize,
    gc_grace: Duration,
    tombstone_thresholds: TombstoneThresholds,
    faults: FaultController,
}

impl EmulatorBuilder {
    /// The clock TTLs expire on and server timestamps come from; a
    /// [`lockshift_store::ManualClock`] makes TTL tests instant.
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// The host id in `system.local`; keep it across restarts.
    pub fn host_id(mut self, id: Uuid) -> Self {
        self.host_id = id;
        self
    }

    /// The address `system.local.rpc_address` advertises; by default the
    /// bound address, or loopback when bound to the unspecified address.
    pub fn rpc_address(mut self, addr: IpAddr) -> Self {
        self.rpc_address = Some(addr);
        self
    }

    /// `system.local.cluster_name`.
    pub fn cluster_name(mut self, name: impl Into<String>) -> Self {
        self.cluster_name = name.into();
        self
    }

    /// The largest request body accepted; larger frames are refused with a
    /// protocol error and the connection is closed.
    pub fn max_frame_bytes(mut self, bytes: usize) -> Self {
        self.max_frame_bytes = bytes;
        self
    }

    /// How long dead cells are kept before being forgotten (a table's
    /// `gc_grace_seconds` unless it sets its own).
    pub fn gc_grace(mut self, grace: Duration) -> Self {
        self.gc_grace = grace;
        self
    }

    /// When a read's tombstones make the response carry Cassandra's
    /// warning, and when they make it fail with `READ_FAILURE`
    /// (`READ_TOO_MANY_TOMBSTONES`): Cassandra's defaults, 1 000 and
    /// 100 000, unless set.
    pub fn tombstone_thresholds(mut self, thresholds: TombstoneThresholds) -> Self {
        self.tombstone_thresholds = thresholds;
        self
    }

    /// Shares an existing fault controller (by default each endpoint has
    /// its own, reachable through [`EmulatorHandle::faults`]).
    pub fn faults(mut self, faults: FaultController) -> Self {
        self.faults = faults;
        self
    }

    /// Binds `addr` (port 0 picks a free port) and starts serving.
    ///
    /// # Errors
    /// [`EmulatorError::Bind`] if the address cannot be bound,
    /// [`EmulatorError::LocalAddr`] if the bound address cannot be read.
    ///
    /// # Cancel safety
    /// Dropping the future before it completes leaves nothing running.
    pub async fn start(self, addr: SocketAddr) -> Result<EmulatorHandle, EmulatorError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|error| EmulatorError::Bind { addr, error })?;
        let local_addr = listener.local_addr().map_err(EmulatorError::LocalAddr)?;
        let rpc_address = self.rpc_address.unwrap_or(match local_addr.ip() {
            IpAddr::V4(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(a) if a.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        });
        let node = NodeInfo {
            host_id: self.host_id,
            rpc_address,
            rpc_port: local_addr.port(),
            cluster_name: self.cluster_name,
            data_center: "datacenter1".to_string(),
            rack: "rack1".to_string(),
        };
        let gc_grace = u32::try_from(self.gc_grace.as_secs()).unwrap_or(u32::MAX);
        let engine = Engine::new(
            self.clock,
            node,
            self.faults.clone(),
            gc_grace,
            self.tombstone_thresholds,
        );
        let read_costs = engine.read_costs().clone();
        let shared = Arc::new(EndpointState {
            engine: Mutex::new(engine),
            prepared: Mutex::new(HashMap::new()),
            faults: self.faults.clone(),
            max_frame_bytes: self.max_frame_bytes,
        });
        let shutdown = CancellationToken::new();
        let tracker = TaskTracker::new();
        tracker.spawn(accept_loop(
            listener,
            shared,
            shutdown.clone(),
            tracker.clone(),
        ));
        info!(%local_addr, host_id = %self.host_id, "lockshift CQL emulator listening");
        Ok(EmulatorHandle {
            local_addr,
            host_id: self.host_id,
            faults: self.faults,
            read_costs,
            shutdown,
            tracker,
        })
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<EndpointState>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.cancelled() => break,
        };
        match accepted {
            Ok((stream, _)) => {
                tracker.spawn(connection::serve(stream, shared.clone(), shutdown.clone()));
            }
            Err(e) => {
                // Out of file descriptors and the like: back off briefly
                // rather than spin.
                warn!(error = %e, "accepting a CQL connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// A running endpoint. Dropping it stops the endpoint too (without waiting);
/// [`shutdown`](EmulatorHandle::shutdown) stops it and waits.
///
/// # Examples
///
/// ```
/// use lockshift_cql_emulator::Emulator;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let endpoint = Emulator::builder().start("127.0.0.1:0".parse()?).await?;
/// assert_ne!(endpoint.local_addr().port(), 0);
/// endpoint.shutdown().await;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct EmulatorHandle {
    local_addr: SocketAddr,
    host_id: Uuid,
    faults: FaultController,
    read_costs: ReadCostLog,
    shutdown: CancellationToken,
    tracker: TaskTracker,
}

impl EmulatorHandle {
    /// The address the endpoint listens on (with the real port when bound
    /// to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The host id `system.local` reports.
    pub fn host_id(&self) -> Uuid {
        self.host_id
    }

    /// What the reads of each table cost in tombstones since the endpoint
    /// started or since the last call — reads served, tombstones passed,
    /// the most one read passed, reads answered with a warning — in
    /// (keyspace, table) order; the tally starts afresh. The system
    /// keyspaces and the fault table are not charged and not listed. A
    /// client sees a read's count only in Cassandra's warning, above 1 000
    /// ([`lockshift_store::tombstones`]); the endpoint counts every read.
    pub fn take_read_costs(&self) -> Vec<TableReadCosts> {
        self.read_costs.take()
    }

    /// The endpoint's fault rules.
    pub fn faults(&self) -> &FaultController {
        &self.faults
    }

    /// Stops accepting, closes every connection, and waits until all
    /// connection tasks have ended. Requests in flight get no answer.
    ///
    /// # Cancel safety
    /// Cancel safe: the endpoint is already told to stop when this is first
    /// polled; dropping the future only skips the waiting.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

impl Drop for EmulatorHandle {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
