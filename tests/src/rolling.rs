//! The rolling-deployment scenario (issue 5), on any backend: a fleet of
//! [`Node`]s hammers a set of locks while the nodes are restarted one by one
//! into new modes and the stage is moved legacy → dual → queue → complete and
//! back to legacy. The caller asserts on the [`RollingReport`].
//!
//! The same scenario runs on the embedded store with a paused clock (fast,
//! seeded) and on the local CQL endpoint in real time (each node its own
//! `CqlStore` connection), with timings scaled by [`Timings`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lockshift::{Node, Settings};
use lockshift_combined::rollout::HistoryAction;
use lockshift_combined::{Mode, Rollout, Stage, TransitionRequest};
use lockshift_lock::{AcquireError, AcquireOptions, LockId};
use lockshift_store::{
    CqlSettings, CqlStore, FaultPlan, SharedClock, SharedStore, SystemClock, schema,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::sim::{Cluster, NodeEnv, Oracle, critical_section, node_env};

const LOCKS: [&str; 3] = ["account-1", "account-2", "account-3"];

/// Where the fleet's nodes keep their locks.
#[derive(Debug, Clone)]
pub enum Backend {
    /// One shared embedded store (use under a paused clock).
    Embedded(Cluster),
    /// The local endpoint (or a cluster): each node connects on its own.
    Cql(Box<CqlSettings>),
}

impl Backend {
    async fn store_for_node(&self) -> (SharedStore, SharedClock) {
        match self {
            Backend::Embedded(cluster) => (cluster.store.clone(), cluster.clock.clone()),
            Backend::Cql(settings) => {
                let store = CqlStore::connect(settings).await.expect("a node connects");
                (Arc::new(store), Arc::new(SystemClock))
            }
        }
    }
}

/// The durations of the scenario: lease, periods, pauses between steps.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    /// Lease TTL.
    pub lease_ttl: Duration,
    /// Renewal period.
    pub renew_every: Duration,
    /// Stage re-read period.
    pub reread: Duration,
    /// How long a node trusts an unconfirmed stage view.
    pub valid_for: Duration,
    /// Quiet period (must exceed re-read + TTL + skew margin).
    pub quiet: Duration,
    /// Skew margin.
    pub skew_margin: Duration,
    /// Heartbeat period.
    pub heartbeat: Duration,
    /// Registry TTL.
    pub heartbeat_ttl: Duration,
    /// Pause between restarts and after phases.
    pub pause: Duration,
    /// Workers' think time between acquisitions: uniform below this.
    pub think: Duration,
    /// How long a legacy contender pauses at most when the lock is owned
    /// (`lock.legacy.owner_wait_max`).
    pub legacy_owner_wait: Duration,
}

impl Timings {
    /// Timings for a paused-clock run (simulated seconds are free).
    pub fn simulated() -> Self {
        Timings {
            lease_ttl: Duration::from_secs(10),
            renew_every: Duration::from_secs(2),
            reread: Duration::from_secs(2),
            valid_for: Duration::from_secs(5),
            quiet: Duration::from_secs(20),
            skew_margin: Duration::from_secs(1),
            heartbeat: Duration::from_secs(1),
            heartbeat_ttl: Duration::from_secs(4),
            pause: Duration::from_secs(3),
            think: Duration::from_millis(200),
            legacy_owner_wait: Duration::from_secs(1),
        }
    }

    /// Short timings for a real-time run.
    pub fn real_time() -> Self {
        Timings {
            lease_ttl: Duration::from_secs(3),
            renew_every: Duration::from_millis(500),
            reread: Duration::from_millis(500),
            valid_for: Duration::from_millis(1_200),
            quiet: Duration::from_millis(5_000),
            skew_margin: Duration::from_millis(500),
            heartbeat: Duration::from_millis(300),
            heartbeat_ttl: Duration::from_secs(1),
            pause: Duration::from_millis(700),
            think: Duration::from_millis(60),
            legacy_owner_wait: Duration::from_secs(1),
        }
    }

    /// Settings for node `i` (id `node{i}`) in `mode` with these timings.
    ///
    /// # Panics
    /// If the timings break a settings rule (a test bug).
    pub fn settings(&self, i: usize, mode: Mode) -> Settings {
        self.settings_for(&format!("node{i}"), mode)
    }

    /// Settings for node `id` in `mode` with these timings.
    ///
    /// # Panics
    /// If the timings break a settings rule (a test bug).
    pub fn settings_for(&self, id: &str, mode: Mode) -> Settings {
        Settings::from_toml(&self.toml(id, mode)).expect("valid scenario settings")
    }

    /// The same settings as a config file's text (for nodes whose config is
    /// edited while they run).
    pub fn toml(&self, id: &str, mode: Mode) -> String {
        let d = |d: Duration| format!("\"{}ms\"", d.as_millis());
        format!(
            "[node]\nid = \"{id}\"\nmode = \"{mode}\"\n\n\
             [lock]\nlease_ttl = {}\nrenew_every = {}\n\n\
             [lock.legacy]\nowner_wait_max = {}\n\n\
             [rollout]\nstage_reread_every = {}\nstage_valid_for = {}\nquiet_period = {}\n\
             clock_skew_margin = {}\nheartbeat_every = {}\nheartbeat_ttl = {}\n",
            d(self.lease_ttl),
            d(self.renew_every),
            d(self.legacy_owner_wait),
            d(self.reread),
            d(self.valid_for),
            d(self.quiet),
            d(self.skew_margin),
            d(self.heartbeat),
            d(self.heartbeat_ttl),
        )
    }

    /// The bound on unavailability: a lease TTL plus a re-read period.
    pub fn unavailability_bound(&self) -> Duration {
        self.lease_ttl + self.reread
    }
}

/// Per lock: how long it had waiters but no holder, at worst.
#[derive(Debug, Default)]
pub struct Availability {
    locks: Mutex<HashMap<String, Timeline>>,
}

#[derive(Debug, Default)]
struct Timeline {
    waiting: usize,
    held: bool,
    starved_since: Option<Instant>,
    worst: Duration,
}

impl Availability {
    fn change(&self, lock: &str, f: impl FnOnce(&mut Timeline)) {
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        let t = locks.entry(lock.to_string()).or_default();
        f(t);
        let starved = t.waiting > 0 && !t.held;
        match (starved, t.starved_since) {
            (true, None) => t.starved_since = Some(Instant::now()),
            (false, Some(since)) => {
                t.worst = t.worst.max(since.elapsed());
                t.starved_since = None;
            }
            _ => {}
        }
    }

    /// The lock that was unavailable longest, and for how long.
    pub fn worst(&self) -> (String, Duration) {
        let locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        locks
            .iter()
            .map(|(l, t)| {
                (
                    l.clone(),
                    t.worst
                        .max(t.starved_since.map_or(Duration::ZERO, |s| s.elapsed())),
                )
            })
            .max_by_key(|(_, d)| *d)
            .unwrap_or_default()
    }
}

/// What the scenario observed.
#[derive(Debug, Clone)]
pub struct RollingReport {
    /// Exclusion violations.
    pub violations: Vec<crate::sim::Violation>,
    /// Acquisitions that failed (not counting cancellations by restarts).
    pub failures: Vec<String>,
    /// Acquisitions per algorithm.
    pub by_algorithm: HashMap<String, u64>,
    /// The sum of the lock counters (equals the acquisitions when exclusion held).
    pub counted: u64,
    /// The lock that was unavailable longest, and for how long.
    pub worst_unavailability: (String, Duration),
    /// The stages transitioned to, in order.
    pub transitions: Vec<Stage>,
    /// Refusals before reaching dual and before returning to legacy.
    pub refusals: (usize, usize),
    /// Replacements started beside their predecessor under its node id.
    pub replacements: usize,
}

impl RollingReport {
    /// Acquisitions in all.
    pub fn total(&self) -> u64 {
        self.by_algorithm.values().sum()
    }
}

struct Running {
    node: Node,
    env: NodeEnv,
    stop: CancellationToken,
    workers: Vec<JoinHandle<()>>,
}

struct Fleet {
    backend: Backend,
    timings: Timings,
    seed: u64,
    oracle: Arc<Oracle>,
    counters: Arc<Mutex<HashMap<String, u64>>>,
    acquisitions: Arc<Mutex<HashMap<String, u64>>>,
    availability: Arc<Availability>,
    failures: Arc<Mutex<Vec<String>>>,
    nodes: Vec<Option<Running>>,
    generation: u64,
    /// Replacements started beside their predecessor under its node id.
    replacements: usize,
    /// Every node's config file lives here, re-read while it runs.
    dir: tempfile::TempDir,
}

const WORKERS_PER_NODE: usize = 2;

impl Fleet {
    fn plan() -> FaultPlan {
        FaultPlan {
            fail_before: 0.01,
            fail_after: 0.01,
            ..FaultPlan::latency(Duration::from_millis(2), Duration::from_millis(3))
        }
    }

    async fn start(&mut self, i: usize, mode: Mode) {
        let running = self.launch(i, mode).await;
        self.nodes[i] = Some(running);
    }

    /// Starts a process of node `i` (id `node{i}`) in `mode` without
    /// stopping one that runs: a replacement started beside its
    /// predecessor, under the same node id (issue 22).
    async fn launch(&mut self, i: usize, mode: Mode) -> Running {
        self.generation += 1;
        let settings = self.timings.settings(i, mode);
        let config = self.config_path(i);
        std::fs::write(&config, self.timings.toml(&format!("node{i}"), mode))
            .expect("the config file is written");
        let (store, clock) = self.backend.store_for_node().await;
        let env = node_env(
            i,
            self.seed ^ self.generation,
            store,
            clock,
            Self::plan(),
            settings.lock.lease(),
        );
        let node_store: SharedStore = env.store.clone();
        let node = Node::builder()
            .settings(settings)
            .seed(self.seed ^ (self.generation << 8))
            .config_file(config)
            .env(HashMap::new())
            .store(node_store)
            .clock(env.clock.clone())
            .start()
            .await
            .expect("node starts");
        let stop = CancellationToken::new();
        let think = self.timings.think;
        let workers = (0..WORKERS_PER_NODE)
            .map(|w| {
                let locker = node.locker();
                let stop = stop.clone();
                let (oracle, counters, acquisitions, availability, failures) = (
                    self.oracle.clone(),
                    self.counters.clone(),
                    self.acquisitions.clone(),
                    self.availability.clone(),
                    self.failures.clone(),
                );
                let mut rng = StdRng::seed_from_u64(self.seed ^ (self.generation * 131 + w as u64));
                tokio::spawn(async move {
                    while !stop.is_cancelled() {
                        let lock = LOCKS[rng.random_range(0..LOCKS.len())];
                        let Ok(id) = LockId::new(lock) else { return };
                        availability.change(lock, |t| t.waiting += 1);
                        let got = locker
                            .acquire_with(
                                &id,
                                AcquireOptions::with_timeout(Duration::from_secs(60))
                                    .cancelled_by(stop.clone()),
                            )
                            .await;
                        let guard = match got {
                            Ok(g) => g,
                            Err(e) => {
                                availability.change(lock, |t| t.waiting -= 1);
                                if !matches!(e, AcquireError::Cancelled { .. }) {
                                    failures
                                        .lock()
                                        .unwrap_or_else(PoisonError::into_inner)
                                        .push(e.to_string());
                                }
                                continue;
                            }
                        };
                        availability.change(lock, |t| {
                            t.waiting -= 1;
                            t.held = true;
                        });
                        let hold = Duration::from_millis(rng.random_range(1..15));
                        if critical_section(&oracle, &counters, &guard, hold).await {
                            *acquisitions
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .entry(guard.algorithm().to_string())
                                .or_default() += 1;
                        }
                        availability.change(lock, |t| t.held = false);
                        let _ = guard.release().await;
                        tokio::time::sleep(think.mul_f64(rng.random_range(0.1..1.0))).await;
                    }
                })
            })
            .collect();
        Running {
            node,
            env,
            stop,
            workers,
        }
    }

    fn config_path(&self, i: usize) -> std::path::PathBuf {
        self.dir.path().join(format!("node{i}.toml"))
    }

    /// Edits node `i`'s config file to `mode`; the node picks it up at its
    /// next re-read, without a restart.
    fn edit(&self, i: usize, mode: Mode) {
        std::fs::write(
            self.config_path(i),
            self.timings.toml(&format!("node{i}"), mode),
        )
        .expect("the config file is written");
    }

    /// Cuts node `i` off from the `rollout` and `nodes` partitions (its lock
    /// operations still work), or heals it.
    fn cut_off(&self, i: usize, cut: bool) {
        if let Some(r) = &self.nodes[i] {
            r.env.store.set_plan(if cut {
                crate::attacks::cut_off(Self::plan(), vec![schema::ROLLOUT, schema::NODES])
            } else {
                Self::plan()
            });
        }
    }

    async fn stop(&mut self, i: usize) {
        if let Some(r) = self.nodes[i].take() {
            r.stop.cancel();
            for w in r.workers {
                if let Err(e) = w.await {
                    self.failures
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(format!("worker panicked: {e}"));
                }
            }
            r.node.shutdown().await;
        }
    }

    /// Restarts every node into `mode`, one at a time, every other one (by
    /// the seed) stopped then started, the others — as a container platform
    /// does —
    /// start the replacement under the same node id first and stop the old
    /// process a moment later, both running in between (issue 22).
    async fn restart_all_one_by_one(&mut self, mode: Mode) {
        let mut rng = StdRng::seed_from_u64(self.seed ^ (self.generation << 20) ^ 0x5eed);
        for i in 0..self.nodes.len() {
            if (i as u64 + self.seed).is_multiple_of(2) {
                let replacement = self.launch(i, mode).await;
                tokio::time::sleep(self.timings.pause.mul_f64(rng.random_range(0.1..1.0))).await;
                self.stop(i).await;
                self.nodes[i] = Some(replacement);
                self.replacements += 1;
            } else {
                self.stop(i).await;
                self.start(i, mode).await;
            }
            tokio::time::sleep(self.timings.pause).await;
        }
    }
}

/// Asks for `to` until the guards allow it; returns how many refusals came first.
///
/// # Panics
/// If the guards never allow it (after 60 tries), with the last verdict.
async fn move_to(rollout: &Rollout, to: Stage, retry: Duration) -> usize {
    let mut last = String::new();
    for refusals in 0..60 {
        let report = rollout
            .transition(TransitionRequest {
                to,
                by: "operator".into(),
                reason: format!("rolling to {to}"),
                dry_run: false,
                expected_from: None,
            })
            .await
            .expect("transition evaluates");
        if report.applied {
            return refusals;
        }
        last = report.verdict.to_string();
        tokio::time::sleep(retry).await;
    }
    panic!("the guards never allowed {to}: {last}");
}

/// Runs the scenario with `nodes` nodes and returns what it observed.
///
/// # Panics
/// When a node cannot start or a transition can never be made.
pub async fn rolling_deployment(
    backend: Backend,
    timings: Timings,
    nodes: usize,
    seed: u64,
) -> RollingReport {
    let (rollout, mut fleet) = Fleet::new(backend, timings, nodes, seed).await;
    let retry = timings.reread;
    // The old fleet: everyone on the legacy lock.
    for i in 0..nodes {
        fleet.start(i, Mode::Legacy).await;
    }
    tokio::time::sleep(timings.pause * 2).await;
    // New binaries, one by one, on auto: combined at stage legacy.
    fleet.restart_all_one_by_one(Mode::Auto).await;
    let refused_dual = move_to(&rollout, Stage::Dual, retry).await;
    move_to(&rollout, Stage::Queue, retry).await;
    // Restarts into queue (auto would switch by itself as well).
    fleet.restart_all_one_by_one(Mode::Queue).await;
    move_to(&rollout, Stage::Complete, retry).await;
    tokio::time::sleep(timings.pause * 2).await;
    // And back.
    move_to(&rollout, Stage::Queue, retry).await;
    move_to(&rollout, Stage::Dual, retry).await;
    let refused_legacy = move_to(&rollout, Stage::Legacy, retry).await;
    for i in 0..nodes.min(2) {
        fleet.stop(i).await;
        fleet.start(i, Mode::Legacy).await;
    }
    tokio::time::sleep(timings.pause * 2).await;
    for i in 0..nodes {
        fleet.stop(i).await;
    }
    fleet.report(&rollout, (refused_dual, refused_legacy)).await
}

/// The rolling deployment of issue 10, forward and back under attack:
/// nodes switched by editing their config files while their acquisitions
/// wait, a node cut off from the `rollout` and `nodes` partitions while the
/// stage moves on (it keeps taking locks), queue nodes rolled back to
/// legacy. The caller asserts on the report (no overlap, no lost
/// increment, every transition made).
///
/// # Panics
/// When a node cannot start or a transition can never be made.
pub async fn rolling_deployment_with_rollback(
    backend: Backend,
    timings: Timings,
    seed: u64,
) -> RollingReport {
    let (rollout, mut fleet) = Fleet::new(backend, timings, 4, seed).await;
    let retry = timings.reread;
    for i in 0..4 {
        fleet.start(i, Mode::Legacy).await;
    }
    tokio::time::sleep(timings.pause).await;
    // Half the fleet switches by config edit (its waiting legacy
    // acquisitions must leave the line), half by restart.
    fleet.edit(0, Mode::Auto);
    fleet.edit(1, Mode::Auto);
    for i in 2..4 {
        fleet.stop(i).await;
        fleet.start(i, Mode::Auto).await;
    }
    let refused_dual = move_to(&rollout, Stage::Dual, retry).await;
    // Node 3 loses the stage and the registry while it keeps hammering.
    fleet.cut_off(3, true);
    move_to(&rollout, Stage::Queue, retry).await;
    fleet.edit(0, Mode::Queue);
    fleet.stop(1).await;
    fleet.start(1, Mode::Queue).await;
    tokio::time::sleep(timings.pause).await;
    fleet.cut_off(3, false);
    tokio::time::sleep(timings.pause).await;
    // And back, with queue acquisitions waiting all along.
    move_to(&rollout, Stage::Dual, retry).await;
    fleet.edit(0, Mode::Legacy);
    let refused_legacy = move_to(&rollout, Stage::Legacy, retry).await;
    tokio::time::sleep(timings.pause * 2).await;
    for i in 0..4 {
        fleet.stop(i).await;
    }
    fleet.report(&rollout, (refused_dual, refused_legacy)).await
}

impl Fleet {
    /// A fleet of `nodes` (none started yet) and the operator's rollout.
    async fn new(backend: Backend, timings: Timings, nodes: usize, seed: u64) -> (Rollout, Fleet) {
        let (store, clock) = backend.store_for_node().await;
        let s = timings.settings(99, Mode::Auto);
        let rollout = Rollout::new(
            store,
            clock,
            s.rollout.clone(),
            s.lock.lease(),
            s.lock.queue.clone(),
        );
        let fleet = Fleet {
            backend,
            timings,
            seed,
            oracle: Arc::new(Oracle::default()),
            counters: Arc::default(),
            acquisitions: Arc::default(),
            availability: Arc::default(),
            failures: Arc::default(),
            nodes: (0..nodes).map(|_| None).collect(),
            generation: 0,
            replacements: 0,
            dir: tempfile::tempdir().expect("a temporary directory"),
        };
        (rollout, fleet)
    }

    /// What the run observed.
    async fn report(self, rollout: &Rollout, refusals: (usize, usize)) -> RollingReport {
        let history = rollout.history().await.expect("history reads");
        let by_algorithm = self
            .acquisitions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let counted = self
            .counters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .sum();
        RollingReport {
            violations: self.oracle.violations(),
            failures: self
                .failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            by_algorithm,
            counted,
            worst_unavailability: self.availability.worst(),
            transitions: history
                .iter()
                .filter(|h| h.action == HistoryAction::Transition)
                .map(|h| h.to)
                .collect(),
            refusals,
            replacements: self.replacements,
        }
    }
}

impl RollingReport {
    /// Asserts everything the issue asks of a rolling deployment.
    ///
    /// # Panics
    /// When something broke, saying what.
    pub fn assert_clean(&self, timings: &Timings, what: &str) {
        assert!(
            self.violations.is_empty(),
            "{what}: exclusion violated: {:?}",
            self.violations
        );
        assert!(
            self.failures.is_empty(),
            "{what}: acquisitions failed: {:?}",
            self.failures
        );
        assert_eq!(self.counted, self.total(), "{what}: lost increments");
        for algorithm in ["legacy", "combined", "queue"] {
            assert!(
                self.by_algorithm.get(algorithm).copied().unwrap_or(0) > 10,
                "{what}: too few {algorithm} acquisitions: {:?}",
                self.by_algorithm
            );
        }
        let (lock, worst) = &self.worst_unavailability;
        let bound = timings.unavailability_bound();
        assert!(
            *worst <= bound,
            "{what}: lock {lock} had waiters and no holder for {worst:?} (bound {bound:?})"
        );
        assert_eq!(
            self.transitions,
            [
                Stage::Dual,
                Stage::Queue,
                Stage::Complete,
                Stage::Queue,
                Stage::Dual,
                Stage::Legacy
            ],
            "{what}"
        );
        assert!(
            self.refusals.0 > 0,
            "{what}: dual must wait for the legacy quiet period"
        );
        assert!(
            self.replacements > 0,
            "{what}: no replacement ran beside its predecessor"
        );
        assert!(
            self.refusals.1 > 0,
            "{what}: legacy must wait for the queue quiet period"
        );
    }
}
