//! [`Node`]: what a service embeds — one [`Locker`] whose algorithm follows
//! the configured mode and the rollout stage, plus the background work that
//! keeps it honest: registry heartbeats, stage re-reads, config reloads.
//!
//! # Invariants
//!
//! - **N1.** New acquisitions use the algorithm resolved from the configured
//!   mode and the stage view, if it is confirmed ([`resolve`]): a mode the
//!   stage forbids degrades to combined, never to anything else; an unknown
//!   or unconfirmed stage means combined (`binding` B1).
//! - **N2.** A held lock is released by the algorithm that took it: the
//!   guard's lease deletes exactly the cells that acquisition wrote.
//! - **N3.** The node re-reads the stage (and its config file) every
//!   `rollout.stage_reread_every` and heartbeats every
//!   `rollout.heartbeat_every`, reporting the oldest stage version any of its
//!   acquisitions is bound to (`binding` B4), so guards can wait until every
//!   node acts on a stage.
//! - **N4.** Every acquisition is bound to the stage it resolved under: a
//!   waiting one leaves the line and re-enters when the node's resolution
//!   changes (within one re-read period, or as soon as the view expires),
//!   and a guard is handed out only under the binding's conditions
//!   (`binding` B2, B3).
//! - **N5.** The node lives as long as anything that can act for it: its
//!   [`Node`] handle, any [`NodeLocker`], any guard they handed out. A locker
//!   never acts on a stage its node stopped following.
//! - **N6.** The node is one process in the registry: its row is named by
//!   node id *and* incarnation, drawn at start, so a second process under
//!   the same node id never hides it (docs/design.md §4, R5). A heartbeat
//!   counts (B1) only once the row *and* the activity promise for every
//!   legacy or queue use it declares have landed, and only a declared
//!   algorithm is used (`binding` B5; docs/design.md §4, R8).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use lockshift_combined::registry::{
    LeasePromise, LeaseRules, NodeInfo, deregister, heartbeat, other_incarnations, record_activity,
    registry_column,
};
use lockshift_combined::rollout::read_stage;
use lockshift_combined::{
    LegacyPacing, LockerSettings, Lockers, Mode, Resolution, RolloutSettings, Stage, StageRecord,
};
use lockshift_lock::{
    AcquireError, AcquireOptions, ActivityObserver, Algorithm, Incarnation, LockContext, LockGuard,
    LockId, Locker, NodeId, Revoker, TryAcquireError,
};
use lockshift_store::{SharedClock, SharedStore, StoreError, SystemClock, Timestamp, Ttl};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::binding::{Bindings, View};
use crate::error::StartError;
use crate::metrics::{MeteredStore, NodeMetrics};
use crate::settings::Settings;

/// How to start a [`Node`]: where its settings come from, which store and
/// clock it uses. [`Node::connect`] is the common case in one call.
///
/// Settings: those given with [`settings`](Self::settings), else loaded
/// from the [`config_file`](Self::config_file) (if any) with the
/// `LOCKSHIFT__…` environment on top. With a config file, the node re-reads
/// it every `rollout.stage_reread_every`, so an edited `node.mode` takes
/// effect without a restart (other keys need one).
///
/// # Examples
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let mut settings = lockshift::Settings::default();
/// settings.node.id = Some("web-1".into());
/// // In-memory, this process only: tests and examples.
/// settings.store.backend = Some(lockshift::settings::StoreBackend::Embedded);
/// let node = lockshift::Node::builder().settings(settings).start().await?;
/// let guard = node.acquire("accounts").await?;
/// guard.release().await?;
/// node.shutdown().await;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Default)]
#[must_use = "a builder does nothing until `start().await`"]
pub struct NodeBuilder {
    settings: Option<Settings>,
    config_file: Option<PathBuf>,
    env: Option<HashMap<String, String>>,
    store: Option<SharedStore>,
    clock: Option<SharedClock>,
    version: Option<String>,
    seed: Option<u64>,
}

impl NodeBuilder {
    /// Use these settings (validated at start) instead of loading them.
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = Some(settings);
        self
    }

    /// Load the settings from `path` (it must exist) with the environment
    /// on top — unless [`settings`](Self::settings) were given — and re-read
    /// `node.mode` from it while running.
    pub fn config_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.config_file = Some(path.into());
        self
    }

    /// Take `LOCKSHIFT__…` overrides from `env` instead of the process
    /// environment, at start and on every reload (tests).
    pub fn env(mut self, env: HashMap<String, String>) -> Self {
        self.env = Some(env);
        self
    }

    /// Run on `store` instead of opening the one `[store]` names.
    pub fn store(mut self, store: SharedStore) -> Self {
        self.store = Some(store);
        self
    }

    /// Stamp writes with `clock` instead of the system clock (simulations).
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The version the node reports in the registry (default: lockshift's).
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// Seed owner ids and backoff, so a simulation replays exactly.
    #[doc(hidden)]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Loads the settings, opens the store, reads the stage (a failure
    /// leaves it unknown, hence combined), registers, and starts the
    /// background loops.
    ///
    /// A node runs on the store given with [`store`](Self::store), or on the
    /// one the settings name: `[store.cql]` (a cluster) or
    /// `store.backend = "embedded"` (this process only). Settings that name
    /// none are refused ([`StartError::NoStore`]) — never a silent
    /// in-memory store whose locks exclude nothing across processes.
    ///
    /// # Errors
    /// [`StartError::Settings`] when the settings cannot be read or break a
    /// rule, [`StartError::NoStore`] when they name no store and none was
    /// given, [`StartError::Store`] when the store cannot be opened.
    pub async fn start(self) -> Result<Node, StartError> {
        let settings = match self.settings {
            Some(settings) => settings.validated()?,
            None => Settings::load_with_env(self.config_file.as_deref(), self.env.clone())?,
        };
        let store = match self.store {
            Some(store) => store,
            None if settings.store.backend.is_none() => return Err(StartError::NoStore),
            None => settings.store.open().await?,
        };
        let clock = self.clock.unwrap_or_else(|| Arc::new(SystemClock));
        Node::start_with(
            store,
            clock,
            Options {
                settings,
                config_path: self.config_file,
                env: self.env,
                version: self
                    .version
                    .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string()),
                seed: self.seed,
            },
        )
        .await
    }
}

/// What [`NodeBuilder::start`] resolved.
struct Options {
    settings: Settings,
    config_path: Option<PathBuf>,
    env: Option<HashMap<String, String>>,
    version: String,
    seed: Option<u64>,
}

/// What a node runs now, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStatus {
    /// The node.
    pub node: NodeId,
    /// The configured mode.
    pub configured: Mode,
    /// The last stage read, if any.
    pub stage: Option<StageRecord>,
    /// The algorithm for new acquisitions.
    pub effective: Algorithm,
    /// The configured mode, when the stage refused it.
    pub degraded_from: Option<Mode>,
    /// The node could not confirm the stage within `rollout.stage_valid_for`
    /// and acts as combined until it can.
    pub view_expired: bool,
    /// The oldest stage version the node may still act on (its view's and
    /// every waiting acquisition's or held guard's).
    pub acting_version: Option<u64>,
    /// This process among the node's ([`Incarnation`]).
    pub incarnation: Incarnation,
    /// Other live processes under the same node id, by registry column, as
    /// the last heartbeat found them: each should have its own `node.id`.
    pub other_processes: Vec<String>,
    /// The algorithm the node switches new acquisitions to once a heartbeat
    /// declaring it has landed (`binding` B5); `None` when there is none.
    pub pending: Option<Algorithm>,
}

#[derive(Debug)]
struct State {
    configured: Mode,
    view: View,
    resolution: Resolution,
    bindings: Bindings,
    /// Whether the last evaluation found the view expired (to log changes).
    expired: bool,
    /// `shutdown` was called: no new acquisitions.
    closed: bool,
    /// The node left the registry.
    left: bool,
    last_used: BTreeMap<Algorithm, Timestamp>,
    reported: BTreeMap<Algorithm, Timestamp>,
    /// Other live processes under this node id (registry columns).
    others: Vec<String>,
}

/// Legacy holders the node's lockers saw (binaries that never register).
#[derive(Debug, Default)]
struct Sightings {
    last_legacy: Mutex<Option<Timestamp>>,
}

impl ActivityObserver for Sightings {
    fn legacy_seen(&self, lock: &LockId, owner: &str, at: Timestamp) {
        debug!(%lock, owner, "legacy holder seen");
        let mut last = self
            .last_legacy
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *last = Some(last.map_or(at, |t| t.max(at)));
    }
}

struct Shared {
    sightings: Arc<Sightings>,
    id: NodeId,
    incarnation: Incarnation,
    version: String,
    started_at: Timestamp,
    store: SharedStore,
    clock: SharedClock,
    config_path: Option<PathBuf>,
    env: Option<HashMap<String, String>>,
    rollout: RolloutSettings,
    registry_ttl: Ttl,
    lease_promise: LeasePromise,
    /// One locker per algorithm, from one factory: they share the node's
    /// context and time service, and own what they need.
    legacy: Arc<dyn Locker>,
    combined: Arc<dyn Locker>,
    queue: Arc<dyn Locker>,
    /// Whether combined acquisitions pace themselves for legacy contenders.
    pacing: Arc<LegacyPacing>,
    metrics: NodeMetrics,
    /// Every guard handed out and not yet released, by binding id, so that
    /// a shutdown can release what is still held.
    held: Mutex<HashMap<u64, Revoker>>,
    state: Mutex<State>,
    /// Wakes the expiry watch when the view's deadline moved.
    view_changed: Notify,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.id)
            .field("incarnation", &self.incarnation)
            .field("state", &self.state)
            .finish()
    }
}

/// The running node: shared state plus the background tasks. It lives as
/// long as any [`Node`], [`NodeLocker`] or guard they handed out (N5).
#[derive(Debug)]
struct Core {
    shared: Arc<Shared>,
    stop: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Core {
    fn stop_tasks(&self) {
        self.stop.cancel();
        for t in self
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            t.abort();
        }
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        self.stop_tasks();
        // Nothing can act for this node any more (N5): leave the registry
        // now rather than after the row's TTL, if a runtime is around.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared = self.shared.clone();
        if shared.state().left {
            return;
        }
        runtime.spawn(async move { shared.leave().await });
    }
}

/// A lockshift node: the handle a service keeps. See the module docs.
///
/// Cloning is cheap and every clone is the same node.
/// [`acquire`](Self::acquire) takes a lock by name; a [`NodeLocker`] does the same
/// where a [`Locker`] is wanted. The node runs — heartbeats, stage re-reads,
/// config reloads — for as long as a clone, a locker or a held guard lives
/// (N5); [`shutdown`](Self::shutdown) ends it gracefully.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use lockshift::{Node, Settings};
/// use lockshift_store::MemoryStore;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let node = Node::builder().store(Arc::new(MemoryStore::new())).start().await?;
/// // A locker keeps the node alive: the node handle may go.
/// let locker = node.locker();
/// drop(node);
/// let guard = locker.acquire("accounts").await?;
/// guard.release().await?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
#[must_use = "the node runs only while a handle, a locker or a guard lives; end it with `shutdown().await`"]
pub struct Node {
    core: Arc<Core>,
}

impl Node {
    /// Starts a node the way a service does: settings from `config_file`
    /// with the `LOCKSHIFT__…` environment on top, the store they name
    /// opened, the system clock, and `node.mode` re-read from the file
    /// while running.
    ///
    /// # Errors
    /// [`StartError`]: unreadable or invalid settings (naming the key and
    /// where its value came from), or a store that cannot be opened.
    pub async fn connect(config_file: impl AsRef<Path>) -> Result<Node, StartError> {
        Node::builder()
            .config_file(config_file.as_ref())
            .start()
            .await
    }

    /// Everything [`connect`](Self::connect) decides, one choice at a time.
    pub fn builder() -> NodeBuilder {
        NodeBuilder::default()
    }

    async fn start_with(
        store: SharedStore,
        clock: SharedClock,
        options: Options,
    ) -> Result<Node, StartError> {
        let settings = &options.settings;
        if let Some(problem) = settings.problems().into_iter().next() {
            return Err(problem.into());
        }
        let id = settings.node.node_id()?;
        let lease = settings.lock.lease();
        let registry_ttl = settings.rollout.registry_ttl(&lease);
        // Whole seconds, rounded up, plus one: Cassandra counts a TTL from
        // the whole second of the write, so a cell may die up to a second
        // early, and the row must outlive the bound (N3, `binding` B1).
        let registry_ttl = Ttl::from_duration(registry_ttl.saturating_add(Duration::from_secs(1)))
            .map_err(|e| {
                lockshift_store::settings::InvalidSetting::new(
                    "rollout.heartbeat_ttl",
                    format!(
                        "the registry row's TTL ({}) is invalid: {e}",
                        lockshift_lock::fmt_duration(registry_ttl)
                    ),
                )
            })?;
        if settings.store.backend == Some(lockshift_store::StoreBackend::Embedded) {
            info!(node = %id, "embedded store: locks exclude only within this process");
        }
        // Every operation of this node, counted by table and kind.
        let store: SharedStore = Arc::new(MeteredStore::new(store, id.as_str()));
        let sightings = Arc::new(Sightings::default());
        // Simulations replay: the incarnation comes from the seed there.
        let incarnation = lockshift_lock::new_incarnation(options.seed.map(|s| s ^ 0x1dea_5eed));
        // Lock cells name the same process as the registry row (N6).
        let ctx = Arc::new(
            LockContext::new(
                store.clone(),
                clock.clone(),
                id.clone(),
                lease.clone(),
                options.seed,
            )?
            .with_incarnation(incarnation)
            .with_observer(sightings.clone()),
        );
        let configured = settings.node.mode;
        let view = View::new(settings.rollout.stage_valid_for);
        let pacing = LegacyPacing::new(settings.lock.legacy.owner_wait_max);
        let lockers = Lockers::new(
            ctx,
            LockerSettings {
                legacy: settings.lock.legacy.clone(),
                queue: settings.lock.queue.clone(),
                time: settings.time.clone(),
            },
        )
        .with_pacing(pacing.clone());
        let shared = Arc::new(Shared {
            sightings,
            incarnation,
            version: options.version.clone(),
            started_at: clock.now(),
            legacy: lockers.build(Algorithm::Legacy),
            combined: lockers.build(Algorithm::Combined),
            queue: lockers.build(Algorithm::Queue),
            pacing,
            metrics: NodeMetrics::new(id.as_str()),
            held: Mutex::new(HashMap::new()),
            id,
            store,
            clock,
            config_path: options.config_path.clone(),
            env: options.env.clone(),
            rollout: settings.rollout.clone(),
            registry_ttl,
            lease_promise: LeasePromise::of(&lease),
            state: Mutex::new(State {
                configured,
                resolution: view.resolve(configured, Instant::now()),
                view,
                bindings: Bindings::default(),
                expired: false,
                closed: false,
                left: false,
                last_used: BTreeMap::new(),
                reported: BTreeMap::new(),
                others: Vec::new(),
            }),
            view_changed: Notify::new(),
        });
        if let Err(e) = shared.refresh().await {
            warn!(node = %shared.id, error = %e, "could not read the rollout stage at start; running combined until it can");
        }
        if let Err(e) = shared.heartbeat().await {
            warn!(node = %shared.id, error = %e, "first heartbeat failed; running combined until one succeeds");
        }
        let stop = CancellationToken::new();
        let tasks = vec![
            tokio::spawn(every(shared.rollout.stage_reread_every, stop.clone(), {
                let shared = shared.clone();
                move || {
                    let shared = shared.clone();
                    async move {
                        if let Err(e) = shared.refresh().await {
                            warn!(node = %shared.id, error = %e, "stage re-read failed; keeping the last stage until it expires");
                        }
                    }
                }
            })),
            tokio::spawn(every(shared.rollout.heartbeat_every, stop.clone(), {
                let shared = shared.clone();
                move || {
                    let shared = shared.clone();
                    async move {
                        if let Err(e) = shared.heartbeat().await {
                            warn!(node = %shared.id, error = %e, "heartbeat failed");
                        }
                    }
                }
            })),
            tokio::spawn(watch_expiry(shared.clone(), stop.clone())),
        ];
        Ok(Node {
            core: Arc::new(Core {
                shared,
                stop,
                tasks: Mutex::new(tasks),
            }),
        })
    }

    /// This node's id.
    pub fn id(&self) -> &NodeId {
        &self.core.shared.id
    }

    /// Waits until `lock` is held, then hands out its guard. `lock` is a
    /// name (`"accounts"`, a `String`) or a [`LockId`].
    ///
    /// The algorithm is the one the node resolves from its configured mode
    /// and the rollout stage at that moment; a waiting acquisition follows
    /// the stage (N4). Watch the guard's [`lost`](LockGuard::lost) signal
    /// while using the resource, and hand the resource its
    /// [fencing token](LockGuard::fencing_token).
    ///
    /// # Errors
    /// [`AcquireError::InvalidLockId`] for a name that is not a valid lock
    /// id, [`AcquireError::NodeStopped`] after [`shutdown`](Self::shutdown),
    /// [`AcquireError::Store`] for a store failure that retrying cannot fix.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped acquisition leaves its place in line and
    /// deletes what it wrote in the background.
    pub async fn acquire(
        &self,
        lock: impl TryInto<LockId, Error: Into<AcquireError>>,
    ) -> Result<LockGuard, AcquireError> {
        self.acquire_with(lock, AcquireOptions::default()).await
    }

    /// As [`acquire`](Self::acquire), giving up after `options.timeout`
    /// ([`AcquireError::Timeout`]) or when `options.cancel` fires
    /// ([`AcquireError::Cancelled`]).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), plus the two above.
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn acquire_with(
        &self,
        lock: impl TryInto<LockId, Error: Into<AcquireError>>,
        options: AcquireOptions,
    ) -> Result<LockGuard, AcquireError> {
        self.locker().acquire_with(lock, options).await
    }

    /// Takes `lock` if it is free right now; never waits for a holder.
    ///
    /// # Errors
    /// [`TryAcquireError::Held`] when someone holds it or is entering it;
    /// [`TryAcquireError::Failed`] otherwise (an invalid name included).
    pub async fn try_acquire(
        &self,
        lock: impl TryInto<LockId, Error: Into<AcquireError>>,
    ) -> Result<LockGuard, TryAcquireError> {
        self.locker().try_acquire(lock).await
    }

    /// A [`Locker`] of this node, for code written against the trait: its
    /// algorithm follows mode and stage. It keeps the node running, even
    /// after every node handle is dropped (N5).
    pub fn locker(&self) -> NodeLocker {
        NodeLocker {
            core: self.core.clone(),
        }
    }

    /// What the node runs now.
    pub fn status(&self) -> NodeStatus {
        self.core.shared.status()
    }

    /// Re-reads the stage and the config file now, instead of waiting for
    /// the next period.
    ///
    /// # Errors
    /// The store error reading the stage (the last stage is kept until it
    /// expires).
    pub async fn refresh(&self) -> Result<(), StoreError> {
        self.core.shared.refresh().await
    }

    /// Writes the registry heartbeat now.
    ///
    /// # Errors
    /// The store error.
    pub async fn heartbeat(&self) -> Result<(), StoreError> {
        self.core.shared.heartbeat().await
    }

    /// Shuts the node down gracefully, for every handle and locker of it:
    ///
    /// 1. no new acquisitions start; waiting ones end with
    ///    [`AcquireError::NodeStopped`], leaving their places in line;
    /// 2. every lock still held through a guard of this node is released:
    ///    its holder's [`lost`](LockGuard::lost) signal fires first, its
    ///    checks report
    ///    [`LeaseLostReason::Revoked`](lockshift_lock::LeaseLostReason::Revoked) and its own `release` does
    ///    nothing more;
    /// 3. the background loops stop and the node leaves the registry, after
    ///    a last activity report — so the registry says the truth: nothing
    ///    of this node waits or holds.
    ///
    /// Call it before `main` returns: a guard merely dropped then leaves its
    /// cells to their TTL, since the runtime that would delete them is
    /// going away. Calling it again does nothing.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped half-way, some locks may stay held (their
    /// guards still release them) and the node may stay registered until
    /// its row expires.
    pub async fn shutdown(&self) {
        let shared = self.core.shared.clone();
        {
            let mut st = shared.state();
            if st.left {
                return;
            }
            st.closed = true;
            st.bindings.invalidate_waiting();
        }
        // Waiting acquisitions notice within one poll and give up their
        // places; give them a moment so the registry's last word is true.
        let deadline = Instant::now() + Duration::from_secs(5);
        while shared.state().bindings.any_waiting() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let held: Vec<Revoker> = shared
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        for revoker in held {
            // Each revocation waits for a fencing-token call in flight on
            // that guard, then deletes its cells; the attachment it drops
            // unbinds the acquisition.
            if let Err(e) = revoker.revoke().await {
                warn!(node = %shared.id, error = %e, "releasing a held lock at shutdown left cells to their TTL");
            }
        }
        self.core.stop_tasks();
        shared.leave().await;
    }
}

/// The algorithm new acquisitions will use once the registry knows of it
/// (B5), if it is not the one they use now.
fn pending(
    view: &View,
    configured: Mode,
    now_using: Resolution,
    now: Instant,
) -> Option<Algorithm> {
    let wanted = view.declaring(configured, now).algorithm;
    (wanted != now_using.algorithm).then_some(wanted)
}

async fn every<F, Fut>(period: Duration, stop: CancellationToken, mut tick: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut ticker = tokio::time::interval_at(Instant::now() + period, period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => tick().await,
        }
    }
}

/// Re-evaluates the node the moment its stage view expires (B1), even while
/// a stage read or heartbeat hangs in a slow store: waiting acquisitions of
/// other algorithms leave the line then, not a re-read period later.
async fn watch_expiry(shared: Arc<Shared>, stop: CancellationToken) {
    loop {
        // Past the deadline there is nothing to wake for until the view
        // changes (a spin here would also stop a paused clock for good).
        let until = shared
            .state()
            .view
            .valid_until()
            .filter(|t| *t > Instant::now());
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = shared.view_changed.notified() => {}
            _ = async {
                match until {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            } => {}
        }
        shared.reevaluate(&mut shared.state(), Instant::now());
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn status(&self) -> NodeStatus {
        let now = Instant::now();
        let mut st = self.state();
        self.reevaluate(&mut st, now);
        NodeStatus {
            node: self.id.clone(),
            configured: st.configured,
            stage: st.view.record.clone(),
            effective: st.resolution.algorithm,
            degraded_from: st.resolution.degraded_from,
            view_expired: st.view.expired(now),
            acting_version: st.bindings.acting_version(&st.view),
            incarnation: self.incarnation,
            other_processes: st.others.clone(),
            pending: pending(&st.view, st.configured, st.resolution, now),
        }
    }

    /// Resolves the configured mode against the view at `now` and applies
    /// the result to every acquisition (N1, N4). Idempotent and cheap: every
    /// path that may see a change calls it.
    fn reevaluate(&self, st: &mut State, now: Instant) {
        let resolution = st.view.resolve(st.configured, now);
        let expired = st.view.expired(now);
        if expired != st.expired {
            st.expired = expired;
            if expired {
                warn!(node = %self.id, valid_for = ?self.rollout.stage_valid_for,
                    "cannot confirm the rollout stage; acting as combined until it can");
            } else {
                info!(node = %self.id, "rollout stage confirmed again");
            }
        }
        if resolution != st.resolution {
            let stage = st
                .view
                .confirmed(now)
                .map_or("unconfirmed", |s| s.stage.as_str());
            if let Some(wanted) = pending(&st.view, st.configured, resolution, now) {
                info!(node = %self.id, %wanted, %stage,
                    "running combined until a heartbeat has registered {wanted}");
            }
            match resolution.degraded_from {
                Some(mode) => warn!(node = %self.id, configured = %mode, %stage,
                    "mode {mode} is not allowed at stage {stage}; running combined"),
                None => info!(node = %self.id, algorithm = %resolution.algorithm, %stage,
                    "new acquisitions now use {}", resolution.algorithm),
            }
            st.resolution = resolution;
        }
        let confirmed = st.view.confirmed(now).cloned();
        st.bindings.follow(resolution.algorithm, confirmed.as_ref());
        self.metrics.view(
            resolution.algorithm,
            st.view.record.as_ref().map(|r| r.version),
            confirmed.is_some(),
        );
        // Legacy contenders may be about at stage legacy, and wherever the
        // node cannot tell (`LegacyPacing`).
        self.pacing
            .set_beside_legacy(confirmed.is_none_or(|r| r.stage == Stage::Legacy));
    }

    async fn refresh(&self) -> Result<(), StoreError> {
        let sent = Instant::now();
        let stage = read_stage(self.store.as_ref()).await;
        let configured = self.reload_mode();
        let (result, register) = {
            let mut st = self.state();
            if let Some(mode) = configured
                && mode != st.configured
            {
                info!(node = %self.id, from = %st.configured, to = %mode, "configured mode changed");
                st.configured = mode;
            }
            let result = match stage {
                Ok((record, _)) => {
                    if st.view.record.as_ref().map(|s| s.version) != Some(record.version) {
                        info!(node = %self.id, stage = %record.stage, version = record.version, "stage read");
                    }
                    st.view.read(record, sent);
                    Ok(())
                }
                Err(e) => Err(e),
            };
            let now = Instant::now();
            self.reevaluate(&mut st, now);
            // A switch waits for the registry to know of it (B5): tell it
            // now rather than a heartbeat period later — once a heartbeat
            // has landed at all (at start, one follows anyway).
            let register = st.view.has_heartbeat()
                && pending(&st.view, st.configured, st.resolution, now).is_some();
            (result, register)
        };
        self.view_changed.notify_one();
        if register && let Err(e) = self.heartbeat().await {
            warn!(node = %self.id, error = %e, "heartbeat for a mode switch failed; running combined until one lands");
        }
        result
    }

    /// The configured mode from the config file, if there is one and it
    /// loads; other settings need a restart.
    fn reload_mode(&self) -> Option<Mode> {
        let path = self.config_path.as_deref()?;
        match Settings::load_with_env(Some(path), self.env.clone()) {
            Ok(s) => Some(s.node.mode),
            Err(e) => {
                warn!(node = %self.id, path = %path.display(), error = %e, "config reload failed; keeping the current mode");
                None
            }
        }
    }

    /// What the heartbeat sent at `sent` says: the node as it will act once
    /// that heartbeat lands (its view confirmed by it, B1) — the row is
    /// only written if it does — and the algorithms it declares (B5): the
    /// one new acquisitions will use, and every one it has acquisitions of.
    fn info(&self, sent: Instant) -> (NodeInfo, BTreeSet<Algorithm>) {
        let mut st = self.state();
        self.reevaluate(&mut st, sent);
        let mut view = st.view.clone();
        view.heartbeat(sent, BTreeSet::new());
        let resolution = view.declaring(st.configured, sent);
        let bound = st.bindings.counts();
        let declared = bound
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(a, _)| *a)
            .chain([resolution.algorithm])
            .collect();
        let info = NodeInfo {
            node: self.id.to_string(),
            version: self.version.clone(),
            configured_mode: st.configured,
            effective: resolution.algorithm,
            degraded: resolution.degraded_from.is_some(),
            seen_stage: st.view.record.as_ref().map(|s| s.stage),
            seen_version: st.view.record.as_ref().map(|s| s.version),
            started_at: self.started_at.as_micros(),
            incarnation: Some(self.incarnation.to_string()),
            last_used: st
                .last_used
                .iter()
                .map(|(a, t)| (*a, t.as_micros()))
                .collect(),
            lease: Some(self.lease_promise),
            acting_version: st.bindings.acting_version(&st.view),
            bound,
            view_expired: view.expired(sent),
        };
        (info, declared)
    }

    async fn heartbeat(&self) -> Result<(), StoreError> {
        // B4: what the row says is computed before it is sent; an
        // acquisition bound after this moment binds to this view or a
        // newer one, so the report stays a lower bound.
        let sent = Instant::now();
        let (info, declared) = self.info(sent);
        // R8: first the promise. This heartbeat confirms the view until
        // `sent + stage_valid_for` at most, so every legacy or queue
        // acquisition it lets the node hand out falls before
        // `promised` — recorded even if the node never reports again.
        let promised = self
            .clock
            .now()
            .saturating_add(self.rollout.stage_valid_for);
        for algorithm in declared
            .iter()
            .filter(|a| matches!(a, Algorithm::Legacy | Algorithm::Queue))
        {
            record_activity(self.store.as_ref(), *algorithm, promised).await?;
        }
        heartbeat(
            self.store.as_ref(),
            self.clock.as_ref(),
            &info,
            self.registry_ttl,
        )
        .await?;
        {
            let mut st = self.state();
            st.view.heartbeat(sent, declared);
            self.reevaluate(&mut st, Instant::now());
        }
        self.view_changed.notify_one();
        self.look_for_other_processes().await;
        self.report_activity().await
    }

    /// Warns when another live process runs under this node id (N6): both
    /// count for the guards, but operators should give each its own id.
    async fn look_for_other_processes(&self) {
        let found = match other_incarnations(
            self.store.as_ref(),
            self.id.as_str(),
            self.incarnation,
        )
        .await
        {
            Ok(found) => found,
            Err(e) => {
                debug!(node = %self.id, error = %e, "could not look for other processes under this node id");
                return;
            }
        };
        let columns: Vec<String> = found.iter().map(|n| n.column.clone()).collect();
        let mut st = self.state();
        if columns != st.others {
            for n in found.iter().filter(|n| !st.others.contains(&n.column)) {
                warn!(node = %self.id, incarnation = %self.incarnation, other = %n.column,
                    other_mode = %n.info.configured_mode, other_started_at = n.info.started_at,
                    "another live process runs under this node id; both count for the rollout guards, but give each process its own node.id");
            }
            st.others = columns;
        }
    }

    /// Records, per algorithm, the last use since the last report — this
    /// node's own, and for legacy also holders its lockers saw: one write per
    /// algorithm, at most once per heartbeat.
    async fn report_activity(&self) -> Result<(), StoreError> {
        let seen = *self
            .sightings
            .last_legacy
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let pending: Vec<(Algorithm, Timestamp)> = {
            let st = self.state();
            let mut last = st.last_used.clone();
            if let Some(seen) = seen {
                let legacy = last.entry(Algorithm::Legacy).or_insert(seen);
                *legacy = (*legacy).max(seen);
            }
            last.into_iter()
                .filter(|(a, t)| st.reported.get(a) != Some(t))
                .collect()
        };
        for (algorithm, at) in pending {
            record_activity(self.store.as_ref(), algorithm, at).await?;
            self.state().reported.insert(algorithm, at);
        }
        Ok(())
    }

    /// Reports the last activity and leaves the registry (nothing can act
    /// for the node any more).
    async fn leave(&self) {
        {
            let mut st = self.state();
            st.closed = true;
            st.left = true;
        }
        if let Err(e) = self.report_activity().await {
            // The guards do not depend on it (R8: every use was promised
            // before it happened), but "last seen" in `status` will be older
            // than the truth.
            warn!(node = %self.id, error = %e, "final activity report failed; the rollout guards rely on the promises already recorded");
        }
        let column = registry_column(self.id.as_str(), self.incarnation);
        if let Err(e) = deregister(self.store.as_ref(), self.clock.as_ref(), &column).await {
            warn!(node = %self.id, error = %e, "could not deregister; the entry expires with its TTL");
        }
    }

    fn locker(&self, algorithm: Algorithm) -> &dyn Locker {
        match algorithm {
            Algorithm::Legacy => self.legacy.as_ref(),
            Algorithm::Combined => self.combined.as_ref(),
            Algorithm::Queue => self.queue.as_ref(),
        }
    }

    fn used(&self, algorithm: Algorithm) {
        let now = self.clock.now();
        self.state().last_used.insert(algorithm, now);
    }

    /// Binds a new acquisition of `lock` (N4).
    fn begin(
        self: &Arc<Self>,
        lock: &LockId,
        cancel: Option<&CancellationToken>,
    ) -> Result<Attempt, AcquireError> {
        let mut st = self.state();
        if st.closed {
            return Err(AcquireError::NodeStopped {
                lock: lock.clone(),
                node: self.id.clone(),
            });
        }
        self.reevaluate(&mut st, Instant::now());
        let algorithm = st.resolution.algorithm;
        let st = &mut *st;
        let (id, token) = st.bindings.bind(algorithm, &st.view, cancel);
        Ok(Attempt {
            shared: self.clone(),
            id,
            algorithm,
            token,
            armed: true,
        })
    }
}

/// One bound acquisition (N4): unbound when dropped, unless its guard was
/// handed out — then the guard carries a [`Held`] instead.
struct Attempt {
    shared: Arc<Shared>,
    id: u64,
    algorithm: Algorithm,
    token: CancellationToken,
    /// Cleared when the binding passes to a [`Held`].
    armed: bool,
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if self.armed {
            self.shared.state().bindings.unbind(self.id);
        }
    }
}

/// A handed-out guard's binding: keeps the node running and reported while
/// the lock is held (N5), unbound when the guard goes — released, dropped,
/// or revoked by a shutdown.
struct Held {
    core: Arc<Core>,
    id: u64,
    algorithm: Algorithm,
    since: Instant,
    /// The lease's own lost signal (a revocation does not fire it): a loss
    /// is counted when the guard goes, which a holder that watches `lost()`
    /// makes soon after — no task per held lock to watch it.
    lease_lost: CancellationToken,
}

impl Drop for Held {
    fn drop(&mut self) {
        let shared = &self.core.shared;
        shared
            .metrics
            .released(self.algorithm, self.since.elapsed());
        if self.lease_lost.is_cancelled() {
            shared.metrics.lease_lost(self.algorithm);
        }
        shared
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
        shared.state().bindings.unbind(self.id);
    }
}

/// The [`Locker`] of a [`Node`]: each acquisition uses the algorithm the
/// node resolves at that moment, stays bound to it while it waits, and
/// keeps the node alive (N4, N5).
#[derive(Clone)]
pub struct NodeLocker {
    core: Arc<Core>,
}

impl fmt::Debug for NodeLocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeLocker")
            .field("node", &self.core.shared.id)
            .finish()
    }
}

impl NodeLocker {
    /// As [`Node::acquire`]: waits until `lock` (a name or a [`LockId`]) is
    /// held. No trait import needed; through the [`Locker`] trait the same
    /// call takes a `&LockId`.
    ///
    /// # Errors
    /// As [`Node::acquire`].
    ///
    /// # Cancel safety
    /// As [`Node::acquire`].
    pub async fn acquire(
        &self,
        lock: impl TryInto<LockId, Error: Into<AcquireError>>,
    ) -> Result<LockGuard, AcquireError> {
        self.acquire_with(lock, AcquireOptions::default()).await
    }

    /// As [`Node::acquire_with`].
    ///
    /// # Errors
    /// As [`Node::acquire_with`].
    ///
    /// # Cancel safety
    /// As [`Node::acquire`].
    pub async fn acquire_with(
        &self,
        lock: impl TryInto<LockId, Error: Into<AcquireError>>,
        options: AcquireOptions,
    ) -> Result<LockGuard, AcquireError> {
        let lock = lock.try_into().map_err(Into::into)?;
        Locker::acquire_with(self, &lock, options).await
    }

    /// As [`Node::try_acquire`].
    ///
    /// # Errors
    /// As [`Node::try_acquire`].
    pub async fn try_acquire(
        &self,
        lock: impl TryInto<LockId, Error: Into<AcquireError>>,
    ) -> Result<LockGuard, TryAcquireError> {
        let lock = lock.try_into().map_err(Into::into)?;
        Locker::try_acquire(self, &lock).await
    }

    /// What the node runs now.
    pub fn status(&self) -> NodeStatus {
        self.core.shared.status()
    }

    /// The stage the node acts on (`None`: unknown or unconfirmed).
    pub fn stage(&self) -> Option<Stage> {
        let st = self.core.shared.state();
        st.view.confirmed(Instant::now()).map(|s| s.stage)
    }

    /// Decides whether `attempt`'s guard may be handed out (B3); if so, ties
    /// the binding to the guard. Otherwise the guard is released and the
    /// caller re-enters.
    async fn hand_out(
        &self,
        mut attempt: Attempt,
        mut guard: LockGuard,
        started: Instant,
    ) -> Option<LockGuard> {
        let refused = {
            let mut st = self.core.shared.state();
            let st = &mut *st;
            st.bindings
                .hand_out(attempt.id, &st.view, Instant::now())
                .err()
        };
        match refused {
            None => {
                let shared = &self.core.shared;
                shared.used(attempt.algorithm);
                shared
                    .metrics
                    .acquired(attempt.algorithm, started.elapsed());
                let held = Held {
                    core: self.core.clone(),
                    id: attempt.id,
                    algorithm: attempt.algorithm,
                    since: Instant::now(),
                    lease_lost: guard.lease_lost_token(),
                };
                // The binding lives on in `held`, with the guard; the node
                // keeps a revoker so a shutdown can release it.
                attempt.armed = false;
                shared
                    .held
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(attempt.id, guard.revoker());
                guard.attach(Box::new(held));
                Some(guard)
            }
            Some(why) => {
                info!(node = %self.core.shared.id, lock = %guard.lock_id(), algorithm = %attempt.algorithm, ?why,
                    "the stage moved while this acquisition waited; releasing and re-entering");
                if let Err(e) = guard.release().await {
                    debug!(error = %e, "release of a refused guard left cells to their TTL");
                }
                None
            }
        }
    }
}

#[async_trait]
impl Locker for NodeLocker {
    fn algorithm(&self) -> Algorithm {
        self.core.shared.state().resolution.algorithm
    }

    /// # Cancel safety
    /// As every locker's; a dropped acquisition is unbound at once.
    async fn acquire_with(
        &self,
        lock: &LockId,
        options: AcquireOptions,
    ) -> Result<LockGuard, AcquireError> {
        let shared = &self.core.shared;
        let started = Instant::now();
        let deadline = options.timeout.map(|t| started + t);
        loop {
            let attempt = shared.begin(lock, options.cancel.as_ref())?;
            let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let inner = AcquireOptions {
                timeout: remaining,
                cancel: Some(attempt.token.clone()),
                watch: options.watch.clone(),
            };
            match shared
                .locker(attempt.algorithm)
                .acquire_with(lock, inner)
                .await
            {
                Ok(guard) => {
                    if let Some(guard) = self.hand_out(attempt, guard, started).await {
                        return Ok(guard);
                    }
                }
                Err(AcquireError::Cancelled { lock, owner })
                    if !options
                        .cancel
                        .as_ref()
                        .is_some_and(CancellationToken::is_cancelled) =>
                {
                    // Invalidated (N4): leave the line and re-enter with
                    // whatever the node resolves now.
                    drop(attempt);
                    if shared.state().closed {
                        return Err(AcquireError::NodeStopped {
                            lock,
                            node: shared.id.clone(),
                        });
                    }
                    debug!(%lock, %owner, "re-resolving a waiting acquisition");
                }
                Err(AcquireError::Timeout { lock, owner, .. }) => {
                    shared.metrics.timed_out(attempt.algorithm);
                    return Err(AcquireError::Timeout {
                        lock,
                        owner,
                        waited: started.elapsed(),
                    });
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn try_acquire(&self, lock: &LockId) -> Result<LockGuard, TryAcquireError> {
        let shared = &self.core.shared;
        // A second try covers a stage change between resolving and handing
        // out; a third would only chase a flapping stage.
        let started = Instant::now();
        for _ in 0..2 {
            let attempt = shared.begin(lock, None)?;
            let guard = shared.locker(attempt.algorithm).try_acquire(lock).await?;
            if let Some(guard) = self.hand_out(attempt, guard, started).await {
                return Ok(guard);
            }
        }
        Err(TryAcquireError::Held {
            lock: lock.clone(),
            holder: None,
        })
    }
}

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;
