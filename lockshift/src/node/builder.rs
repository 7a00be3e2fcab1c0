//! [`NodeBuilder`]: how a node starts — its settings, store and clock —
//! and the start itself: registry row, first stage read, background loops.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockshift_decide::registry::{LeasePromise, registry_column};
use lockshift_lock::{Algorithm, LeaseSettings, LockContext, NodeId};
use lockshift_rollout::registry::LeaseRules;
use lockshift_rollout::{LockerSettings, Lockers};
use lockshift_store::homes::{Configured, HomesRouter, HomesView};
use lockshift_store::settings::InvalidSetting;
use lockshift_store::{
    SharedClock, SharedStore, StoreError, StoreErrorKind, SystemClock, Topology, Ttl,
};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::clock::{ClockState, CorrectedClock, measure_at_start};
use super::runtime::{NodeParts, NodeState, every, refresh_homes, watch_expiry};
use super::{Node, NodeInner};
use crate::Mode;
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

    /// Seed owner ids and backoff, so a simulation replays exactly: the
    /// same seed, store and clock give the same owner ids and the same
    /// random pauses. For tests that replay a run (the simulations seed
    /// every node they start); a service leaves it unset, and each process
    /// then draws its own.
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

impl Node {
    async fn start_with(
        store: SharedStore,
        clock: SharedClock,
        options: Options,
    ) -> Result<Node, StartError> {
        let settings = &options.settings;
        if let Some(problem) = settings.problems().into_iter().next() {
            return Err(problem.into());
        }
        // Everything the node stamps and times runs on its host's clock
        // corrected by the offset it measures (C1, docs/design.md §4b).
        let corrected = Arc::new(CorrectedClock::new(clock));
        let first_reading = measure_at_start(store.as_ref(), &corrected).await;
        let clock: SharedClock = corrected.clone();
        let id = settings.node.node_id()?;
        let lease = settings.lock.lease();
        let registry_ttl = registry_ttl(settings, &lease)?;
        announce(&id, settings, &lease);
        let topology = store.topology();
        let configured = settings.lock.configured_homes();
        check_homes(&configured, &topology)?;
        // Every request goes to its row's home, or is refused (H1–H3,
        // docs/design.md §4a); every operation of this node is counted by
        // table and kind.
        let homes = Arc::new(HomesView::new(
            clock.clone(),
            topology.local.clone(),
            configured,
            settings.rollout.stage_valid_for,
        ));
        let routed: SharedStore = Arc::new(HomesRouter::new(store, homes.clone()));
        let store: SharedStore = Arc::new(MeteredStore::new(routed, id.as_str()));
        // Simulations replay: the incarnation comes from the seed there.
        let incarnation = lockshift_lock::new_incarnation(options.seed.map(|s| s ^ 0x1dea_5eed));
        // The homes before anything else reads or writes: the time service
        // the lockers start, the stage and the registry all live at a home.
        refresh_homes(
            &store,
            &homes,
            &registry_column(id.as_str(), incarnation),
            &settings.rollout,
            lease.lease_ttl,
        )
        .await;
        // Lock cells name the same process as the registry row (R5).
        let ctx = LockContext::new(
            store.clone(),
            clock.clone(),
            id.clone(),
            lease.clone(),
            options.seed,
        )?
        .with_incarnation(incarnation);
        let lockers = lockers(ctx, settings);
        let configured = settings.node.mode;
        let view = View::new(settings.rollout.stage_valid_for);
        let shared = Arc::new(NodeParts {
            incarnation,
            version: options.version.clone(),
            started_at: clock.now(),
            legacy: lockers.build(Algorithm::Legacy),
            combined: lockers.build(Algorithm::Combined),
            queue: lockers.build(Algorithm::Queue),
            metrics: NodeMetrics::new(id.as_str()),
            held: Mutex::new(HashMap::new()),
            id,
            store,
            clock,
            corrected,
            config_path: options.config_path.clone(),
            env: options.env.clone(),
            rollout: settings.rollout.clone(),
            homes,
            registry_ttl,
            lease_promise: LeasePromise::of(&lease),
            state: Mutex::new(first_state(configured, view, settings)),
            view_changed: Notify::new(),
        });
        // The clock first (C1): the first heartbeat carries the reading,
        // and the node acts on its mode from its first confirmed view.
        shared.take_measurement(&first_reading);
        // The homes first (a refresh reads them before the stage): the stage
        // and the registry live at the fleet home.
        if let Err(e) = shared.refresh().await {
            warn!(node = %shared.id, error = %e, "could not read the rollout stage at start; running combined until it can");
        }
        if let Err(e) = shared.heartbeat().await {
            warn!(node = %shared.id, error = %e, "first heartbeat failed; running combined until one succeeds");
        }
        let stop = CancellationToken::new();
        let tasks = spawn_tasks(&shared, &stop);
        Ok(Node {
            core: Arc::new(NodeInner {
                shared,
                stop,
                tasks: Mutex::new(tasks),
            }),
        })
    }
}

/// The node's background tasks: the stage re-read and the heartbeat,
/// each every period of its own, the watch on the view's expiry, and the
/// clock's measurements, until `stop`.
fn spawn_tasks(shared: &Arc<NodeParts>, stop: &CancellationToken) -> Vec<JoinHandle<()>> {
    vec![
        Chore::StageReread.spawn(shared, shared.rollout.stage_reread_every, stop),
        Chore::Heartbeat.spawn(shared, shared.rollout.heartbeat_every, stop),
        tokio::spawn(watch_expiry(shared.clone(), stop.clone())),
        tokio::spawn(shared.clone().keep_measuring(stop.clone())),
    ]
}

/// The registry row's TTL: the bound the rollout settings give, in whole
/// seconds rounded up, plus one — Cassandra counts a TTL from the whole
/// second of the write, so a cell may die up to a second early, and the
/// row must outlive the bound (R5).
fn registry_ttl(settings: &Settings, lease: &LeaseSettings) -> Result<Ttl, InvalidSetting> {
    let ttl = settings.rollout.registry_ttl(lease);
    Ttl::from_duration(ttl.saturating_add(Duration::from_secs(1))).map_err(|e| {
        InvalidSetting::new(
            "rollout.heartbeat_ttl",
            format!(
                "the registry row's TTL ({}) is invalid: {e}",
                lockshift_decide::duration::fmt_duration(ttl)
            ),
        )
    })
}

/// What a starting node says of its lease against the tables'
/// `gc_grace_seconds`, of its store and of the clock skew its leases
/// allow (the runbook's clock discipline, docs/operating.md "Clocks").
fn announce(id: &NodeId, settings: &Settings, lease: &LeaseSettings) {
    if let Some(caution) = lease.gc_grace_caution() {
        warn!(node = %id, "{caution}");
    }
    if settings.store.backend == Some(lockshift_store::StoreBackend::Embedded) {
        info!(node = %id, "embedded store: locks exclude only within this process");
    }
    info!(node = %id,
        holders = %lockshift_decide::duration::fmt_duration(lease.node_skew_tolerance()),
        waiters = %lockshift_decide::duration::fmt_duration(
            settings.lock.queue.waiting_node_skew_tolerance(lease)),
        "Cassandra node clocks may differ by less than this before a lease could end unannounced");
}

/// The node's state as it starts: in its configured mode, with no
/// confirmed view of the stage yet, nothing bound, nothing said.
fn first_state(configured: Mode, view: View, settings: &Settings) -> NodeState {
    NodeState {
        configured,
        resolution: view.resolve(configured, Instant::now().into_std()),
        view,
        bindings: Bindings::new(settings.lock.legacy.owner_wait_max),
        expired: false,
        closed: false,
        left: false,
        last_used: BTreeMap::new(),
        reported: BTreeMap::new(),
        others: Vec::new(),
        homes_logged: BTreeMap::new(),
        stage_error: None,
        heartbeat_error: None,
        clock: ClockState::default(),
    }
}

/// The node's lockers, one per algorithm, on `ctx`.
fn lockers(ctx: LockContext, settings: &Settings) -> Lockers {
    Lockers::new(
        Arc::new(ctx),
        LockerSettings {
            legacy: settings.lock.legacy.clone(),
            queue: settings.lock.queue.clone(),
            time: settings.time.clone(),
        },
    )
}

/// A periodic task of the node's that reaches the store.
#[derive(Clone, Copy, Debug)]
enum Chore {
    /// Reads the stage (and the homes before it).
    StageReread,
    /// Writes the node's registry row.
    Heartbeat,
}

impl Chore {
    /// Runs every `period` until `stop`, saying of its failures what
    /// [`Quiet`] says.
    fn spawn(
        self,
        shared: &Arc<NodeParts>,
        period: Duration,
        stop: &CancellationToken,
    ) -> JoinHandle<()> {
        tokio::spawn(every(period, stop.clone(), {
            let (shared, moving) = (shared.clone(), Quiet::default());
            move || {
                let (shared, moving) = (shared.clone(), moving.clone());
                async move {
                    let result = match self {
                        Chore::StageReread => shared.refresh().await,
                        Chore::Heartbeat => shared.heartbeat().await,
                    };
                    let said = moving.after(&result);
                    if let Err(e) = result {
                        self.say(said, &shared, &e);
                    }
                }
            }
        }))
    }

    /// Says `said` of the failure `e`.
    fn say(self, said: Said, shared: &NodeParts, e: &StoreError) {
        match (self, said) {
            (Chore::StageReread, Said::First) => {
                info!(node = %shared.id, error = %e, "stage re-read refused while the fleet's rows move; keeping the last stage until it expires, and reading again quietly until the new home serves")
            }
            (Chore::StageReread, Said::Warn) => {
                warn!(node = %shared.id, error = %e, "stage re-read failed; keeping the last stage until it expires")
            }
            (Chore::Heartbeat, Said::First) => {
                info!(node = %shared.id, error = %e, "heartbeat refused while the fleet's rows move; sending it again quietly until the new home serves")
            }
            (Chore::Heartbeat, Said::Warn) => {
                warn!(node = %shared.id, error = %e, "heartbeat failed")
            }
            (_, Said::Nothing) => {}
        }
    }
}

/// What a periodic task says of a refusal whose end is known — a moving
/// home's ([`StoreErrorKind::HomeMoving`]), which ends when the new home
/// serves: the first of a run of them, at `info`, and nothing of the
/// others (a move waits about two minutes; the task runs every few
/// seconds). Any other failure is a warning, each time, as before.
#[derive(Clone, Debug, Default)]
struct Quiet(Arc<AtomicBool>);

/// What [`Quiet`] says of one run of a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Said {
    /// The first refusal of a run: say it.
    First,
    /// A failure to warn of.
    Warn,
    /// Success, or a refusal after the first.
    Nothing,
}

impl Quiet {
    fn after<T>(&self, result: &Result<T, StoreError>) -> Said {
        match result {
            Err(e) if e.kind() == StoreErrorKind::HomeMoving => {
                if self.0.swap(true, Ordering::Relaxed) {
                    Said::Nothing
                } else {
                    Said::First
                }
            }
            Err(_) => {
                self.0.store(false, Ordering::Relaxed);
                Said::Warn
            }
            Ok(_) => {
                self.0.store(false, Ordering::Relaxed);
                Said::Nothing
            }
        }
    }
}

/// Every configured home must be a datacenter of the cluster the store
/// reaches (when the store knows them): a typo would refuse every lock
/// with a message about an unreachable home.
fn check_homes(configured: &Configured, topology: &Topology) -> Result<(), InvalidSetting> {
    if topology.datacenters.is_empty() {
        return Ok(());
    }
    for (rule, dc) in configured.rules() {
        if !topology.datacenters.contains(dc) {
            let key = match rule {
                lockshift_decide::home::Rule::Default => "lock.home_datacenter",
                lockshift_decide::home::Rule::Prefix(_) => "lock.homes",
            };
            return Err(InvalidSetting::new(
                key,
                format!(
                    "{key} names datacenter {dc} ({rule}), which is not one of this cluster's: {}",
                    topology
                        .datacenters
                        .iter()
                        .map(|d| d.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    Ok(())
}
