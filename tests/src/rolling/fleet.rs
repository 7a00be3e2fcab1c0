//! The fleet: nodes started, edited, cut off, stopped and replaced, each
//! with workers taking the locks. The node life cycle and the worker loop's
//! spawning are the shared harness's ([`lockshift_harness::fleet`]); what
//! is the rolling scenario's own is here: the nodes' config files and fault
//! plans, the counters workload, the cut-off and the report.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lockshift::{CampaignError, Node, NodeBuilder, StartError};
use lockshift_decide::algorithm::Mode;
use lockshift_decide::rollout::HistoryAction;
use lockshift_harness::fleet::{self as harness, Restart, Workload};
use lockshift_lock::{AcquireError, AcquireOptions, LockId};
use lockshift_rollout::Rollout;
use lockshift_store::{FaultPlan, SharedStore, schema};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinError;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Backend, RollingReport, Timings};
use crate::sim::{NodeEnv, Oracle, critical_section, node_env};

const LOCKS: [&str; 3] = ["account-1", "account-2", "account-3"];

/// The election some workers campaign in (docs/design.md §5b).
const ELECTION: &str = "scheduler";

const WORKERS_PER_NODE: usize = 2;

/// The fleet's workload: nodes built from a config file on the backend,
/// workers incrementing counters in critical sections.
pub(super) struct Counters {
    backend: Backend,
    timings: Timings,
    seed: u64,
    oracle: Arc<Oracle>,
    counters: Arc<Mutex<HashMap<String, u64>>>,
    acquisitions: Arc<Mutex<HashMap<String, u64>>>,
    availability: Arc<Availability>,
    failures: Arc<Mutex<Vec<String>>>,
    /// Every node's config file lives here, re-read while it runs.
    dir: tempfile::TempDir,
}

/// The scenario's fleet: the shared harness's, running [`Counters`], plus
/// what only this scenario does with it (config edits, cut-offs,
/// replacements beside a predecessor).
pub(super) struct Fleet {
    fleet: harness::Fleet<Counters>,
    /// Replacements started beside their predecessor under its node id.
    replacements: usize,
}

fn plan() -> FaultPlan {
    FaultPlan {
        fail_before: 0.01,
        fail_after: 0.01,
        ..FaultPlan::latency(Duration::from_millis(2), Duration::from_millis(3))
    }
}

impl Counters {
    fn config_path(&self, i: usize) -> std::path::PathBuf {
        self.dir.path().join(format!("node{i}.toml"))
    }
}

impl Workload for Counters {
    type Env = NodeEnv;
    type Error = Infallible;

    /// Node `i` (id `node{i}`) in `mode`, its config file written.
    async fn build(
        &self,
        i: usize,
        mode: Mode,
        generation: u64,
    ) -> Result<(NodeBuilder, NodeEnv), Infallible> {
        let settings = self.timings.settings(i, mode);
        let config = self.config_path(i);
        std::fs::write(&config, self.timings.toml(&format!("node{i}"), mode))
            .expect("the config file is written");
        let (store, clock) = self.backend.store_for_node().await;
        let env = node_env(
            i,
            self.seed ^ generation,
            store,
            clock,
            plan(),
            settings.lock.lease(),
        );
        let node_store: SharedStore = env.store.clone();
        let builder = Node::builder()
            .settings(settings)
            .seed(self.seed ^ (generation << 8))
            .config_file(config)
            .env(HashMap::new())
            .store(node_store)
            .clock(env.clock.clone());
        Ok((builder, env))
    }

    fn start_failed(&self, _: usize, error: StartError) -> Infallible {
        panic!("node starts: {error}")
    }

    fn workers(&self) -> usize {
        WORKERS_PER_NODE
    }

    fn worker(
        &self,
        node: Node,
        _: &NodeEnv,
        stop: CancellationToken,
        generation: u64,
        w: usize,
    ) -> impl Future<Output = ()> + Send + 'static {
        let think = self.timings.think;
        let (oracle, counters, acquisitions, availability, failures) = (
            self.oracle.clone(),
            self.counters.clone(),
            self.acquisitions.clone(),
            self.availability.clone(),
            self.failures.clone(),
        );
        let mut rng = StdRng::seed_from_u64(self.seed ^ (generation * 131 + w as u64));
        async move {
            while !stop.is_cancelled() {
                // Now and then the second worker campaigns in an election
                // instead: leadership through every stage change, one
                // leader at a time by the same oracle.
                if w == 1 && rng.random_bool(0.3) {
                    let options = AcquireOptions::with_timeout(Duration::from_secs(60))
                        .cancelled_by(stop.clone());
                    let election = node.election(ELECTION).expect("a valid election name");
                    match election.campaign("", options).await {
                        Ok(leading) => {
                            let hold = Duration::from_millis(rng.random_range(1..15));
                            if critical_section(&oracle, &counters, leading.guard(), hold).await {
                                *acquisitions
                                    .lock()
                                    .unwrap_or_else(PoisonError::into_inner)
                                    .entry(leading.guard().algorithm().to_string())
                                    .or_default() += 1;
                            }
                            let _ = leading.resign().await;
                        }
                        Err(CampaignError::Acquire(AcquireError::Cancelled { .. })) => {}
                        Err(e) => failures
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(e.to_string()),
                    }
                    tokio::time::sleep(think.mul_f64(rng.random_range(0.1..1.0))).await;
                    continue;
                }
                let lock = LOCKS[rng.random_range(0..LOCKS.len())];
                let Ok(id) = LockId::new(lock) else { return };
                availability.change(lock, |t| t.waiting += 1);
                let got = node
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
        }
    }

    fn worker_panicked(&self, error: JoinError) {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(format!("worker panicked: {error}"));
    }
}

impl Fleet {
    /// Starts every node in `mode`.
    pub(super) async fn start_all(&mut self, mode: Mode) {
        let Ok(()) = self.fleet.start_all(mode).await;
    }

    /// Stops node `i`, then starts it in `mode`.
    pub(super) async fn restart(&mut self, i: usize, mode: Mode) {
        let Ok(()) = self.fleet.restart(i, mode).await;
    }

    /// Edits node `i`'s config file to `mode`; the node picks it up at its
    /// next re-read, without a restart.
    pub(super) fn edit(&self, i: usize, mode: Mode) {
        let counters = self.fleet.workload();
        std::fs::write(
            counters.config_path(i),
            counters.timings.toml(&format!("node{i}"), mode),
        )
        .expect("the config file is written");
    }

    /// Cuts node `i` off from the `rollout` and `nodes` partitions (its lock
    /// operations still work), or heals it.
    pub(super) fn cut_off(&self, i: usize, cut: bool) {
        if let Some((_, env)) = self.fleet.node(i) {
            env.store.set_plan(if cut {
                crate::attacks::cut_off(plan(), vec![schema::ROLLOUT, schema::NODES])
            } else {
                plan()
            });
        }
    }

    /// Stops every node.
    pub(super) async fn stop_all(&mut self) {
        self.fleet.stop_all().await;
    }

    /// Restarts every node into `mode`, one at a time, every other one (by
    /// the seed) stopped then started, the others — as a container platform
    /// does —
    /// start the replacement under the same node id first and stop the old
    /// process a moment later, both running in between (issue 22).
    pub(super) async fn restart_all_one_by_one(&mut self, mode: Mode) {
        let seed = self.fleet.workload().seed;
        let pause = self.fleet.workload().timings.pause;
        let mut rng = StdRng::seed_from_u64(seed ^ (self.fleet.generation() << 20) ^ 0x5eed);
        let replacements = &mut self.replacements;
        let how = |i: usize| {
            if (i as u64 + seed).is_multiple_of(2) {
                *replacements += 1;
                Restart::Beside(pause.mul_f64(rng.random_range(0.1..1.0)))
            } else {
                Restart::StopThenStart
            }
        };
        let Ok(()) = self
            .fleet
            .restart_one_by_one(mode, pause, how, |_, _| {})
            .await;
    }
}

impl Fleet {
    /// A fleet of `nodes` (none started yet) and the operator's rollout.
    pub(super) async fn new(
        backend: Backend,
        timings: Timings,
        nodes: usize,
        seed: u64,
    ) -> (Rollout, Fleet) {
        let (store, clock) = backend.store_for_node().await;
        let s = timings.settings(99, Mode::Auto);
        let rollout = Rollout::new(
            store,
            clock,
            s.rollout.clone(),
            s.lock.lease(),
            s.lock.queue.clone(),
        );
        let counters = Counters {
            backend,
            timings,
            seed,
            oracle: Arc::new(Oracle::default()),
            counters: Arc::default(),
            acquisitions: Arc::default(),
            availability: Arc::default(),
            failures: Arc::default(),
            dir: tempfile::tempdir().expect("a temporary directory"),
        };
        let fleet = Fleet {
            fleet: harness::Fleet::new(counters, nodes),
            replacements: 0,
        };
        (rollout, fleet)
    }

    /// What the run observed.
    pub(super) async fn report(self, rollout: &Rollout, refusals: (usize, usize)) -> RollingReport {
        let history = rollout.history().await.expect("history reads");
        let w = self.fleet.workload();
        let by_algorithm = w
            .acquisitions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let counted = w
            .counters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .sum();
        RollingReport {
            violations: w.oracle.violations(),
            failures: w
                .failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            by_algorithm,
            counted,
            worst_unavailability: w.availability.worst(),
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
