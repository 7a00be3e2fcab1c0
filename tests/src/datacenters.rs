//! Fleets across datacenters: nodes placed in the datacenters of one
//! embedded cluster (`MemoryStore::with_datacenters`), each on a client
//! handle of its own datacenter behind its own fault wrapper, all taking
//! the same locks — watched by one exclusion oracle, with what each
//! datacenter got done counted per phase of the scenario (before a split,
//! during it, after it).
//!
//! The scenarios themselves are in `tests/simulation/datacenters.rs`.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lockshift::{Node, NodeBuilder, Settings, StartError};
use lockshift_decide::algorithm::Mode;
use lockshift_harness::fleet::{self as harness, Workload};
use lockshift_lock::{AcquireError, AcquireOptions, LockId};
use lockshift_store::settings::Consistency;
use lockshift_store::{
    Datacenter, FaultPlan, FaultyStore, MemoryStore, SharedClock, SharedStore, SkewedClock,
    TokioClock,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;

use crate::rolling::Timings;
use crate::sim::{Oracle, Violation, critical_section};

mod fences;

use fences::FencedWorker;
pub use fences::{FENCED_COLUMN, FenceLedger, FencedRoute, FencedWork, copy_in};

/// A datacenter by name (a test's constant).
///
/// # Panics
/// On an invalid name (a test bug).
pub fn dc(name: &str) -> Datacenter {
    Datacenter::new(name).expect("a valid datacenter name")
}

/// How the fleet's nodes reach their locks.
#[derive(Debug, Clone)]
pub enum Routing {
    /// Every request at QUORUM (today's default without homes).
    Quorum,
    /// Every request at LOCAL_QUORUM in the client's own datacenter, no
    /// homes (the setting that gave two holders).
    LocalQuorum,
    /// Homes: the default rule's home, and prefix rules.
    Homes {
        /// `lock.home_datacenter`.
        default: Datacenter,
        /// `lock.homes`.
        prefixes: Vec<(String, Datacenter)>,
    },
}

/// What one datacenter's nodes got done in one phase.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Critical sections completed.
    pub held: u64,
    /// Acquisitions that failed, by the first 400 characters of their
    /// error (cancellations at the end of a phase are not counted).
    pub failed: BTreeMap<String, u64>,
}

impl Tally {
    /// How many failures mention `word`.
    pub fn failed_naming(&self, word: &str) -> u64 {
        self.failed
            .iter()
            .filter(|(e, _)| e.contains(word))
            .map(|(_, n)| n)
            .sum()
    }

    /// Every failure.
    pub fn failures(&self) -> u64 {
        self.failed.values().sum()
    }
}

/// Shared by the workers: the oracle, the counters and the tallies.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The exclusion oracle.
    pub oracle: Oracle,
    counters: Mutex<HashMap<String, u64>>,
    completed: Mutex<u64>,
    phase: Mutex<String>,
    /// Per (phase, datacenter).
    tallies: Mutex<BTreeMap<(String, String), Tally>>,
    /// The fenced writes of the workers, and what the datacenters held.
    pub fences: Mutex<FenceLedger>,
}

impl Outcome {
    /// Starts counting what follows under `phase`.
    pub fn phase(&self, phase: &str) {
        *lock(&self.phase) = phase.to_string();
    }

    /// What `dc`'s nodes got done in `phase`.
    pub fn tally(&self, phase: &str, dc: &str) -> Tally {
        lock(&self.tallies)
            .get(&(phase.to_string(), dc.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    /// Every exclusion violation seen.
    pub fn violations(&self) -> Vec<Violation> {
        self.oracle.violations()
    }

    /// Whether the counters add up to the critical sections completed (no
    /// lost increment: no two holders overlapped).
    pub fn counters_add_up(&self) -> (u64, u64) {
        let counted = lock(&self.counters).values().sum();
        (counted, *lock(&self.completed))
    }

    fn record(&self, dc: &str, what: Result<(), String>) {
        let phase = lock(&self.phase).clone();
        let mut tallies = lock(&self.tallies);
        let tally = tallies.entry((phase, dc.to_string())).or_default();
        match what {
            Ok(()) => tally.held += 1,
            Err(e) => {
                *tally
                    .failed
                    .entry(e.chars().take(400).collect())
                    .or_default() += 1
            }
        }
    }

    /// Every tally, for a failure message.
    pub fn describe(&self) -> String {
        format!("{:#?}", lock(&self.tallies))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The sites workload: node `i` runs in `placement[i]`, its workers take
/// `locks` at random.
pub struct Sites {
    /// The cluster (its own handle reaches every running datacenter).
    pub cluster: Arc<MemoryStore>,
    /// The servers' clock.
    pub clock: Arc<TokioClock>,
    /// Where each node runs.
    pub placement: Vec<Datacenter>,
    /// How they reach their locks.
    pub routing: Routing,
    /// The locks.
    pub locks: Vec<&'static str>,
    /// The durations.
    pub timings: Timings,
    /// The seed.
    pub seed: u64,
    /// What happened.
    pub outcome: Arc<Outcome>,
    /// Node clocks off by up to this much.
    pub skew: Duration,
    /// The faults every client's wrapper injects ([`plan`] unless a
    /// scenario sets its own before making clients).
    pub faults: FaultPlan,
    /// Whether (and how) each critical section ends with a fenced write of
    /// its lock's cell.
    pub fenced: Option<FencedWork>,
}

impl std::fmt::Debug for Sites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sites")
            .field("placement", &self.placement)
            .field("routing", &self.routing)
            .finish_non_exhaustive()
    }
}

/// The faults every node's store wrapper injects: a little latency,
/// twenty times more across datacenters, rare failures.
pub fn plan() -> FaultPlan {
    FaultPlan {
        fail_before: 0.01,
        fail_after: 0.01,
        remote_latency: Duration::from_millis(20),
        ..FaultPlan::latency(Duration::from_millis(1), Duration::from_millis(2))
    }
}

impl Sites {
    /// A cluster of `datacenters` (RF 3 each) on the paused clock, and the
    /// workload over it. Call inside the runtime.
    pub fn new(
        datacenters: &[&str],
        placement: &[&str],
        routing: Routing,
        locks: Vec<&'static str>,
        seed: u64,
    ) -> Self {
        let clock = Arc::new(TokioClock::starting_at(crate::sim::sim_epoch(seed)));
        let cluster = MemoryStore::with_clock(clock.clone())
            .with_datacenters(datacenters.iter().map(|d| (dc(d), 3)).collect(), seed);
        Sites {
            cluster: Arc::new(cluster),
            clock,
            placement: placement.iter().map(|d| dc(d)).collect(),
            routing,
            locks,
            timings: Timings::simulated(),
            seed,
            outcome: Arc::default(),
            skew: Duration::from_millis(300),
            faults: plan(),
            fenced: None,
        }
    }

    /// A client handle in `dc` behind a fault wrapper of its own, as node
    /// `i` (or an operator) would have.
    pub fn client(&self, i: usize, dc: &Datacenter, generation: u64) -> SharedStore {
        let handle = self
            .cluster
            .client_in(dc)
            .expect("the datacenter is the cluster's");
        let handle = match self.routing {
            Routing::LocalQuorum => handle.with_consistency(Consistency::LocalQuorum),
            _ => handle,
        };
        let seed = self.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ((i as u64) << 16) ^ generation;
        Arc::new(FaultyStore::new(handle, seed).with_plan(self.faults.clone()))
    }

    /// An operator's store in `dc`: a client routed by the homes it reads
    /// (now, and again every re-read period while the refresher lives), as
    /// `migrate` opens one.
    pub async fn operator(
        &self,
        dc: &Datacenter,
    ) -> (SharedStore, lockshift_rollout::homes::Refresher) {
        use lockshift_rollout::homes::{Configured, HomesRouter, HomesView, keep_fresh, refresh};
        let client = self.client(99, dc, 0);
        let view = Arc::new(HomesView::new(
            self.clock.clone(),
            Some(dc.clone()),
            Configured::default(),
            self.timings.valid_for,
        ));
        let router: SharedStore = Arc::new(HomesRouter::new(client, view.clone()));
        refresh(&router, &view).await;
        let refresher = keep_fresh(router.clone(), view, self.timings.reread);
        (router, refresher)
    }

    /// Records the homes the routing names, serving at once, before any
    /// node starts — as on a keyspace no process has used, so no view or
    /// lease can predate them (a fleet's own first start across
    /// datacenters makes them serve after the move wait instead, H5).
    /// Nothing for a routing without homes.
    pub async fn record_homes(&self) {
        use lockshift_rollout::homes::{Configured, HomesRouter, HomesView, refresh, seed};
        let Routing::Homes { default, prefixes } = &self.routing else {
            return;
        };
        let client = self.client(98, default, 0);
        let view = Arc::new(HomesView::new(
            self.clock.clone(),
            Some(default.clone()),
            Configured::new(Some(default.clone()), prefixes.iter().cloned()),
            self.timings.valid_for,
        ));
        let router: SharedStore = Arc::new(HomesRouter::new(client, view.clone()));
        // The fault wrapper fails a request now and then: until every
        // rule is recorded.
        for _ in 0..20 {
            let report = refresh(&router, &view).await;
            let _ = seed(&router, &view, &report, "setup", Duration::ZERO).await;
            refresh(&router, &view).await;
            // Confirmed and serving: a pending record (H6) is confirmed by
            // its home too, and serves nowhere.
            let serving = view
                .states()
                .iter()
                .filter(|s| s.confirmed && !s.record.pending)
                .count();
            if serving == 1 + prefixes.len() {
                return;
            }
        }
        panic!("the homes could not be recorded");
    }

    /// The cluster's datacenters.
    pub fn datacenters(&self) -> Vec<Datacenter> {
        lockshift_store::Store::topology(self.cluster.as_ref()).datacenters
    }

    /// Node `i`'s settings.
    pub fn settings(&self, i: usize, mode: Mode) -> Settings {
        let mut settings = self.timings.settings(i, mode);
        if let Routing::Homes { default, prefixes } = &self.routing {
            settings.lock.home_datacenter = Some(default.clone());
            settings.lock.homes = prefixes
                .iter()
                .map(|(prefix, datacenter)| lockshift::settings::PrefixHome {
                    prefix: prefix.clone(),
                    datacenter: datacenter.clone(),
                })
                .collect();
        }
        settings
    }
}

impl Workload for Sites {
    type Env = Datacenter;
    type Error = Infallible;

    async fn build(
        &self,
        i: usize,
        mode: Mode,
        generation: u64,
    ) -> Result<(NodeBuilder, Datacenter), Infallible> {
        let place = self.placement[i].clone();
        let store = self.client(i, &place, generation);
        let mut rng = StdRng::seed_from_u64(self.seed ^ (generation << 12) ^ i as u64);
        let max = i64::try_from(self.skew.as_micros()).unwrap_or(0);
        let skew = if max == 0 {
            0
        } else {
            rng.random_range(-max..=max)
        };
        let clock: SharedClock = Arc::new(SkewedClock::new(self.clock.clone(), skew));
        let builder = Node::builder()
            .settings(self.settings(i, mode))
            .seed(self.seed ^ (generation << 8))
            .env(HashMap::new())
            .store(store)
            .clock(clock);
        Ok((builder, place))
    }

    fn start_failed(&self, i: usize, error: StartError) -> Infallible {
        panic!("node {i} starts: {error}")
    }

    fn workers(&self) -> usize {
        2
    }

    fn worker(
        &self,
        node: Node,
        place: &Datacenter,
        stop: CancellationToken,
        generation: u64,
        w: usize,
    ) -> impl Future<Output = ()> + Send + 'static {
        let outcome = self.outcome.clone();
        let locks = self.locks.clone();
        let think = self.timings.think;
        let fenced = self.fenced.clone().map(|work| FencedWorker {
            work,
            node: node.clone(),
            raw: self
                .cluster
                .client_in(place)
                .expect("the datacenter is the cluster's"),
            cluster: self.cluster.clone(),
            datacenters: self.datacenters(),
            outcome: self.outcome.clone(),
            stop: stop.clone(),
        });
        let place = place.to_string();
        let mut rng = StdRng::seed_from_u64(self.seed ^ (generation * 131 + w as u64));
        async move {
            while !stop.is_cancelled() {
                let name = locks[rng.random_range(0..locks.len())];
                let Ok(id) = LockId::new(name) else { return };
                let got = node
                    .acquire_with(
                        &id,
                        AcquireOptions::with_timeout(Duration::from_secs(5))
                            .cancelled_by(stop.clone()),
                    )
                    .await;
                match got {
                    Ok(guard) => {
                        let hold = Duration::from_millis(rng.random_range(1..20));
                        if critical_section(&outcome.oracle, &outcome.counters, &guard, hold).await
                        {
                            *lock(&outcome.completed) += 1;
                            outcome.record(&place, Ok(()));
                        }
                        if let Some(fenced) = &fenced {
                            fenced.write(&guard, &mut rng).await;
                        }
                        let _ = guard.release().await;
                    }
                    Err(AcquireError::Cancelled { .. }) => {}
                    Err(e) => {
                        outcome.record(&place, Err(e.to_string()));
                        // A refused acquisition returns at once: pace the
                        // retries as a service would.
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
                tokio::time::sleep(think.mul_f64(rng.random_range(0.1..1.0))).await;
            }
        }
    }
}

/// A fleet of [`Sites`].
pub type SitesFleet = harness::Fleet<Sites>;
