//! A harness for adversarial rollout schedules: real [`Node`]s and the real
//! [`Rollout`] on one embedded store under a paused clock, workers that
//! hammer locks inside the exclusion [`Oracle`], and the operator moving the
//! stage with the guards deciding.
//!
//! The schedules themselves live in `tests/simulation/attacks.rs`; each is
//! one way the rollout layer could let a legacy acquisition and a queue
//! acquisition run at the same time. Legacy nodes get slow `main` writes
//! (a wide window between "main is empty" and "my cell is in main"), which
//! is what turns such an overlap into two holders quickly.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lockshift::{LockGuard, Node};
use lockshift_decide::algorithm::{Mode, Stage};
use lockshift_lock::{AcquireError, AcquireOptions, LockId};
use lockshift_rollout::{Rollout, TransitionRequest};
use lockshift_store::{FaultPlan, FaultScope, OpKind, SharedClock, SharedStore, Table, schema};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::rolling::Timings;
use crate::sim::{Cluster, NodeEnv, Oracle, critical_section, node_env};

/// Latency for every node, plus slow `main` writes for nodes that may run
/// legacy: the legacy writer's window between its fresh read of `main` and
/// its `main` cell landing.
pub fn plan(slow_main_writes: bool) -> FaultPlan {
    FaultPlan {
        slow: slow_main_writes.then(|| {
            (
                FaultScope {
                    tables: Some(vec![schema::MAIN]),
                    ops: Some(vec![OpKind::Write]),
                },
                Duration::from_millis(40),
            )
        }),
        ..FaultPlan::latency(Duration::from_millis(2), Duration::from_millis(3))
    }
}

/// A plan under which every operation on `tables` fails before it is
/// applied (the node is cut off from those partitions only).
pub fn cut_off(mut plan: FaultPlan, tables: Vec<Table>) -> FaultPlan {
    plan.fail_before = 1.0;
    plan.scope = FaultScope {
        tables: Some(tables),
        ops: None,
    };
    plan
}

/// The world of one attack: a cluster, the operator, the oracle, workers.
#[derive(Debug)]
pub struct World {
    /// The shared store and its clock.
    pub cluster: Cluster,
    /// The timings: [`Timings::simulated`] with an eager legacy fleet — it
    /// polls an owned lock every 20 ms at most, so it finds `main` empty in
    /// the short gaps between queue holders.
    pub timings: Timings,
    /// The seed.
    pub seed: u64,
    /// The exclusion oracle every worker reports to.
    pub oracle: Arc<Oracle>,
    counters: Arc<Mutex<HashMap<String, u64>>>,
    failures: Arc<Mutex<Vec<String>>>,
    taken: Arc<Mutex<HashMap<String, u64>>>,
    workers: Vec<(CancellationToken, JoinHandle<()>)>,
    dir: tempfile::TempDir,
    started: u64,
}

/// A started node and its fault wrapper.
#[derive(Debug)]
pub struct Started {
    /// The node.
    pub node: Node,
    /// Its view of the store (set faults here).
    pub env: NodeEnv,
    /// Its config file, if it has one.
    pub config: Option<PathBuf>,
}

impl World {
    /// A new world. Call inside the paused runtime.
    ///
    /// # Panics
    /// If no temporary directory can be made.
    pub fn new(seed: u64) -> Self {
        World {
            cluster: Cluster::for_seed(seed),
            timings: Timings {
                legacy_owner_wait: Duration::from_millis(20),
                ..Timings::simulated()
            },
            seed,
            oracle: Arc::new(Oracle::default()),
            counters: Arc::default(),
            failures: Arc::default(),
            taken: Arc::default(),
            workers: Vec::new(),
            dir: tempfile::tempdir().expect("a temporary directory"),
            started: 0,
        }
    }

    /// The operator's view of the rollout.
    pub fn rollout(&self) -> Rollout {
        let s = self.timings.settings_for("operator", Mode::Auto);
        Rollout::new(
            self.cluster.store.clone(),
            self.cluster.clock.clone(),
            s.rollout.clone(),
            s.lock.lease(),
            s.lock.queue.clone(),
        )
    }

    /// Starts node `id` in `mode` with fault plan `plan`; with
    /// `config_file`, its settings come from a file it re-reads.
    ///
    /// # Panics
    /// If the node does not start.
    pub async fn start(
        &mut self,
        id: &str,
        mode: Mode,
        plan: FaultPlan,
        config_file: bool,
    ) -> Started {
        let (store, clock) = (self.cluster.store.clone(), self.cluster.clock.clone());
        self.start_on(id, mode, plan, config_file, store, clock)
            .await
    }

    /// As [`start`](Self::start), the node on `store` (the cluster's,
    /// perhaps behind a layer of the test's) with `clock` (perhaps off the
    /// cluster's).
    ///
    /// # Panics
    /// If the node does not start.
    pub async fn start_on(
        &mut self,
        id: &str,
        mode: Mode,
        plan: FaultPlan,
        config_file: bool,
        store: SharedStore,
        clock: SharedClock,
    ) -> Started {
        self.started += 1;
        let settings = self.timings.settings_for(id, mode);
        let env = node_env(
            usize::try_from(self.started).unwrap_or(0),
            self.seed,
            store,
            clock,
            plan,
            settings.lock.lease(),
        );
        let store: SharedStore = env.store.clone();
        let mut builder = Node::builder()
            .settings(settings)
            .seed(self.seed.wrapping_mul(31).wrapping_add(self.started))
            .store(store)
            .clock(env.clock.clone());
        let config = config_file.then(|| {
            let path = self.dir.path().join(format!("{id}.toml"));
            write_config(&path, &self.timings.toml(id, mode));
            path
        });
        if let Some(path) = &config {
            builder = builder.config_file(path).env(HashMap::new());
        }
        let node = builder.start().await.expect("node starts");
        Started { node, env, config }
    }

    /// Rewrites a started node's config file with `mode`.
    ///
    /// # Panics
    /// If the node has no config file.
    pub fn edit_mode(&self, node: &Started, id: &str, mode: Mode) {
        let path = node.config.as_ref().expect("a node with a config file");
        write_config(path, &self.timings.toml(id, mode));
    }

    /// Spawns `n` workers on `node`, each taking `locks` in turn for ever
    /// (hold and think times drawn from the seed) until the world ends.
    /// Worker `w` starts with lock `w mod locks.len()`, so a schedule knows
    /// who waits where first.
    pub fn hammer(&mut self, node: Node, locks: &[&str], n: usize, think: Duration) {
        self.workers_for(
            node,
            locks,
            n,
            think,
            usize::MAX,
            Duration::from_millis(100),
        );
    }

    /// As [`hammer`](Self::hammer), each holding for less than `hold`.
    pub fn hammer_holding(
        &mut self,
        node: Node,
        locks: &[&str],
        n: usize,
        think: Duration,
        hold: Duration,
    ) {
        self.workers_for(node, locks, n, think, usize::MAX, hold);
    }

    /// Spawns `n` tasks on `node` that each take one lock once (task `w`
    /// lock `w mod locks.len()`) and hold it up to `hold`: acquisitions
    /// that start waiting now.
    pub fn once(&mut self, node: Node, locks: &[&str], n: usize, hold: Duration) {
        self.workers_for(node, locks, n, Duration::ZERO, 1, hold);
    }

    fn workers_for(
        &mut self,
        node: Node,
        locks: &[&str],
        n: usize,
        think: Duration,
        rounds: usize,
        hold: Duration,
    ) {
        for w in 0..n {
            let stop = CancellationToken::new();
            let task = tokio::spawn(worker(
                node.clone(),
                locks.iter().map(|l| l.to_string()).collect(),
                w,
                rounds,
                hold,
                think,
                StdRng::seed_from_u64(self.seed ^ ((self.workers.len() as u64) << 16) ^ w as u64),
                stop.clone(),
                self.oracle.clone(),
                self.counters.clone(),
                self.failures.clone(),
                self.taken.clone(),
            ));
            self.workers.push((stop, task));
        }
    }

    /// Stops every worker and returns the violations and failures seen.
    pub async fn finish(mut self) -> Outcome {
        for (stop, _) in &self.workers {
            stop.cancel();
        }
        for (_, task) in self.workers.drain(..) {
            let _ = task.await;
        }
        Outcome {
            violations: self
                .oracle
                .violations()
                .iter()
                .map(ToString::to_string)
                .collect(),
            failures: self
                .failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            entries: self.oracle.entries().len(),
            taken: self
                .taken
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }
}

/// What an attack observed.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Exclusion violations.
    pub violations: Vec<String>,
    /// Acquisitions that failed for another reason than the world ending.
    pub failures: Vec<String>,
    /// Critical sections entered.
    pub entries: usize,
    /// Acquisitions by `node:algorithm`.
    pub taken: HashMap<String, u64>,
}

impl Outcome {
    /// Asserts exclusion held and work was done.
    ///
    /// # Panics
    /// When it did not.
    pub fn assert_exclusive(&self, what: &str) {
        assert!(
            self.violations.is_empty(),
            "{what}: exclusion violated ({} times; acquisitions {:?}): {:?}",
            self.violations.len(),
            self.taken,
            self.violations.iter().take(3).collect::<Vec<_>>()
        );
        assert!(self.entries > 0, "{what}: nothing was acquired");
    }
}

fn write_config(path: &Path, text: &str) {
    std::fs::write(path, text).expect("the config file is written");
}

#[allow(clippy::too_many_arguments)]
async fn worker(
    node: Node,
    locks: Vec<String>,
    first: usize,
    rounds: usize,
    hold_max: Duration,
    think: Duration,
    mut rng: StdRng,
    stop: CancellationToken,
    oracle: Arc<Oracle>,
    counters: Arc<Mutex<HashMap<String, u64>>>,
    failures: Arc<Mutex<Vec<String>>>,
    taken: Arc<Mutex<HashMap<String, u64>>>,
) {
    for i in (first..).take(rounds) {
        if stop.is_cancelled() {
            return;
        }
        let Ok(lock) = LockId::new(locks[i % locks.len()].clone()) else {
            return;
        };
        let got = node
            .acquire_with(
                &lock,
                AcquireOptions::with_timeout(Duration::from_secs(3600)).cancelled_by(stop.clone()),
            )
            .await;
        match got {
            Ok(guard) => {
                let node = guard.owner().node().unwrap_or("?").to_string();
                *taken
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entry(format!("{node}:{}", guard.algorithm()))
                    .or_default() += 1;
                let hold = rng
                    .random_range(Duration::from_millis(1)..hold_max.max(Duration::from_millis(2)));
                critical_section(&oracle, &counters, &guard, hold).await;
                let _ = guard.release().await;
            }
            Err(AcquireError::Cancelled { .. }) => return,
            Err(e) => failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(e.to_string()),
        }
        if !think.is_zero() {
            tokio::time::sleep(think.mul_f64(rng.random_range(0.1..1.0))).await;
        }
    }
}

/// Holds `lock` with `node` until the returned guard is released.
///
/// # Panics
/// If the lock cannot be taken within an hour.
pub async fn hold(node: &Node, lock: &str) -> LockGuard {
    node.acquire_with(
        LockId::new(lock).expect("a valid lock id"),
        AcquireOptions::with_timeout(Duration::from_secs(3600)),
    )
    .await
    .expect("the lock is taken")
}

/// Asks for `to` every `retry` until the guards allow it or `within` passes;
/// returns whether the stage moved.
///
/// # Panics
/// If a transition cannot even be evaluated.
pub async fn try_move(rollout: &Rollout, to: Stage, retry: Duration, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let report = rollout
            .transition(TransitionRequest {
                to,
                by: "operator".into(),
                reason: format!("attack: to {to}"),
                dry_run: false,
                expected_from: None,
            })
            .await
            .expect("the transition evaluates");
        if report.applied {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(retry).await;
    }
}

/// As [`try_move`], but the stage must move.
///
/// # Panics
/// If the guards never allow it within `within`.
pub async fn must_move(rollout: &Rollout, to: Stage, within: Duration) {
    assert!(
        try_move(rollout, to, Duration::from_secs(1), within).await,
        "the guards never allowed {to} within {within:?}"
    );
}
