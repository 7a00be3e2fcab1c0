//! A simulated rolling deployment (issue 5): a fleet of nodes hammers a set
//! of locks while the nodes are restarted one by one into new modes and the
//! stage is advanced legacy → dual → queue → complete, then rolled back to
//! legacy. Zero exclusion violations, no lost increment, and no lock ever
//! unavailable (waiters but no holder) for longer than the lease TTL plus
//! the stage re-read period.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockshift_combined::config::RolloutSettings;
use lockshift_combined::rollout::HistoryAction;
use lockshift_combined::{Mode, Node, NodeOptions, Rollout, Settings, Stage, TransitionRequest};
use lockshift_lock::{AcquireOptions, LockId, Locker};
use lockshift_store::{FaultPlan, SharedStore};
use lockshift_tests::sim::{Cluster, Oracle, critical_section, for_each_seed, paused};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const NODES: usize = 4;
const WORKERS_PER_NODE: usize = 2;
const LOCKS: [&str; 3] = ["account-1", "account-2", "account-3"];

fn settings(i: usize, mode: Mode) -> Settings {
    let mut s = Settings::default();
    s.node.id = Some(format!("node{i}"));
    s.node.mode = mode;
    s.lock.lease_ttl = Duration::from_secs(10);
    s.lock.renew_every = Duration::from_secs(2);
    s.rollout = RolloutSettings {
        stage_reread_every: Duration::from_secs(2),
        quiet_period: Duration::from_secs(16),
        clock_skew_margin: Duration::from_secs(1),
        heartbeat_every: Duration::from_secs(1),
        heartbeat_ttl: Duration::from_secs(4),
    };
    s.validated().expect("valid simulation settings")
}

/// Per lock: how long it had waiters but no holder, at worst.
#[derive(Debug, Default)]
struct Availability {
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
        let mut locks = self.locks.lock().unwrap();
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

    fn worst(&self) -> (String, Duration) {
        let locks = self.locks.lock().unwrap();
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

struct Running {
    node: Node,
    stop: CancellationToken,
    workers: Vec<JoinHandle<()>>,
}

struct Fleet {
    cluster: Cluster,
    seed: u64,
    oracle: Arc<Oracle>,
    counters: Arc<Mutex<HashMap<String, u64>>>,
    acquisitions: Arc<Mutex<HashMap<String, u64>>>,
    availability: Arc<Availability>,
    failures: Arc<Mutex<Vec<String>>>,
    nodes: Vec<Option<Running>>,
    generation: u64,
}

impl Fleet {
    fn plan() -> FaultPlan {
        FaultPlan {
            fail_before: 0.01,
            fail_after: 0.01,
            ..FaultPlan::latency(Duration::from_millis(2), Duration::from_millis(3))
        }
    }

    async fn start(&mut self, i: usize, mode: Mode) {
        self.generation += 1;
        let env = self.cluster.node(
            i,
            self.seed ^ self.generation,
            Self::plan(),
            0,
            settings(i, mode).lock.lease(),
        );
        let node_store: SharedStore = env.store.clone();
        let mut options = NodeOptions::new(settings(i, mode));
        options.seed = Some(self.seed ^ (self.generation << 8));
        let node = Node::start(node_store, env.clock.clone(), options)
            .await
            .expect("node starts");
        let stop = CancellationToken::new();
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
                        let id = LockId::new(lock).unwrap();
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
                                if !matches!(e, lockshift_lock::AcquireError::Cancelled { .. }) {
                                    failures.lock().unwrap().push(e.to_string());
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
                                .unwrap()
                                .entry(guard.algorithm().to_string())
                                .or_default() += 1;
                        }
                        availability.change(lock, |t| t.held = false);
                        let _ = guard.release().await;
                        tokio::time::sleep(Duration::from_millis(rng.random_range(20..200))).await;
                    }
                })
            })
            .collect();
        self.nodes[i] = Some(Running {
            node,
            stop,
            workers,
        });
    }

    async fn stop(&mut self, i: usize) {
        if let Some(r) = self.nodes[i].take() {
            r.stop.cancel();
            for w in r.workers {
                w.await.unwrap();
            }
            r.node.shutdown().await;
        }
    }

    async fn restart_all_one_by_one(&mut self, mode: Mode) {
        for i in 0..NODES {
            self.stop(i).await;
            self.start(i, mode).await;
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
    }
}

/// Asks for `to` until the guards allow it; returns how many refusals came first.
async fn move_to(rollout: &Rollout, to: Stage) -> usize {
    let mut last = String::new();
    for refusals in 0..60 {
        let report = rollout
            .transition(TransitionRequest {
                to,
                by: "operator".into(),
                reason: format!("rolling to {to}"),
                dry_run: false,
            })
            .await
            .expect("transition evaluates");
        if report.applied {
            return refusals;
        }
        last = report.verdict.to_string();
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    panic!("the guards never allowed {to}: {last}");
}

#[test]
fn rolling_deployment_forward_and_back_keeps_exclusion_and_availability() {
    for_each_seed(
        "rolling_deployment_forward_and_back_keeps_exclusion_and_availability",
        0,
        2,
        |seed| {
            paused(async {
                let cluster = Cluster::new();
                let store: SharedStore = cluster.store.clone();
                let s = settings(99, Mode::Auto);
                let rollout = Rollout::new(
                    store,
                    cluster.clock.clone(),
                    s.rollout.clone(),
                    s.lock.lease(),
                    s.lock.queue.clone(),
                );
                let mut fleet = Fleet {
                    cluster,
                    seed,
                    oracle: Arc::new(Oracle::default()),
                    counters: Arc::default(),
                    acquisitions: Arc::default(),
                    availability: Arc::default(),
                    failures: Arc::default(),
                    nodes: (0..NODES).map(|_| None).collect(),
                    generation: 0,
                };
                // The old fleet: everyone on the legacy lock.
                for i in 0..NODES {
                    fleet.start(i, Mode::Legacy).await;
                }
                tokio::time::sleep(Duration::from_secs(5)).await;
                // New binaries, one by one, on auto: combined at stage legacy.
                fleet.restart_all_one_by_one(Mode::Auto).await;
                let refused = move_to(&rollout, Stage::Dual).await;
                assert!(refused > 0, "dual must wait for the legacy quiet period");
                move_to(&rollout, Stage::Queue).await;
                // Restarts into queue (auto would switch by itself as well).
                fleet.restart_all_one_by_one(Mode::Queue).await;
                move_to(&rollout, Stage::Complete).await;
                tokio::time::sleep(Duration::from_secs(5)).await;
                // And back.
                move_to(&rollout, Stage::Queue).await;
                move_to(&rollout, Stage::Dual).await;
                let refused = move_to(&rollout, Stage::Legacy).await;
                assert!(refused > 0, "legacy must wait for the queue quiet period");
                for i in 0..2 {
                    fleet.stop(i).await;
                    fleet.start(i, Mode::Legacy).await;
                }
                tokio::time::sleep(Duration::from_secs(5)).await;
                for i in 0..NODES {
                    fleet.stop(i).await;
                }

                let violations = fleet.oracle.violations();
                assert!(violations.is_empty(), "exclusion violated: {violations:?}");
                let failures = fleet.failures.lock().unwrap().clone();
                assert!(failures.is_empty(), "acquisitions failed: {failures:?}");
                let by_algorithm = fleet.acquisitions.lock().unwrap().clone();
                let total: u64 = by_algorithm.values().sum();
                let counted: u64 = fleet.counters.lock().unwrap().values().sum();
                assert_eq!(counted, total, "lost increments");
                for algorithm in ["legacy", "combined", "queue"] {
                    assert!(
                        by_algorithm.get(algorithm).copied().unwrap_or(0) > 50,
                        "{by_algorithm:?}"
                    );
                }
                let (lock, worst) = fleet.availability.worst();
                let bound = s.lock.lease_ttl + s.rollout.stage_reread_every;
                assert!(
                    worst <= bound,
                    "lock {lock} had waiters and no holder for {worst:?} (bound {bound:?})"
                );
                let history = rollout.history().await.unwrap();
                let transitions: Vec<Stage> = history
                    .iter()
                    .filter(|h| h.action == HistoryAction::Transition)
                    .map(|h| h.to)
                    .collect();
                assert_eq!(
                    transitions,
                    [
                        Stage::Dual,
                        Stage::Queue,
                        Stage::Complete,
                        Stage::Queue,
                        Stage::Dual,
                        Stage::Legacy
                    ]
                );
                println!(
                    "seed {seed}: {total} acquisitions {by_algorithm:?}, worst unavailability {worst:?} on {lock}"
                );
            });
        },
    );
}
