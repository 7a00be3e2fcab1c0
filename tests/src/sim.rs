//! Seeded fleet simulations: nodes hammering locks through faulty stores on a
//! paused clock, watched by an exclusion oracle.
//!
//! Each run is one seed on a single-threaded tokio runtime with time paused,
//! so the interleaving is a function of the seed alone: a failure prints its
//! seed, and `LOCKSHIFT_SEED=<seed>` replays exactly that run (see
//! [`for_each_seed`]).
//!
//! The oracle checks exclusion directly (two holders of one lock inside their
//! critical sections at once) and indirectly, with the thesis' "two ATMs"
//! counter: every holder reads the lock's counter, sleeps, writes it plus one.
//! Overlapping holders lose increments, so the final counter equals the
//! number of acquisitions only if exclusion held.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lockshift_lock::{
    AcquireOptions, Binding, LeaseSettings, LockContext, LockGuard, LockId, Locker, NodeId,
};
use lockshift_store::{
    Clock, FaultPlan, FaultyStore, JitteryClock, Journal, MemoryStore, SharedClock, SharedStore,
    SkewedClock, Timestamp, TokioClock,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

/// The environment variable that replays one seed.
pub const SEED_VAR: &str = "LOCKSHIFT_SEED";

/// The environment variable that runs more seeds than a test's default
/// (a deeper search for rare interleavings).
pub const SEEDS_VAR: &str = "LOCKSHIFT_SEEDS";

/// Runs `run(seed)` for `count` seeds starting at `first` (`LOCKSHIFT_SEEDS`
/// overrides the count) — or only for the seed in `LOCKSHIFT_SEED` when it
/// is set. A failing seed is printed with the
/// command to replay it, then the panic continues.
pub fn for_each_seed(test: &str, first: u64, count: u64, run: impl Fn(u64)) {
    for_each_seed_and(test, first, count, &[], run);
}

/// Runs `run(seed)` once: with the seed in `LOCKSHIFT_SEED` when it is set,
/// else with `seed`. For soaks, whose one run already spans a lock's whole
/// history (hundreds of thousands of acquisitions, minutes of CPU):
/// `LOCKSHIFT_SEEDS` widens the search of the schedule tests, and would
/// multiply a soak's minutes by its count without exploring anything a
/// soak checks. A failing seed is printed as by [`for_each_seed`].
pub fn for_one_seed(test: &str, seed: u64, run: impl Fn(u64)) {
    let seed = std::env::var(SEED_VAR)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(seed);
    run_seed(test, seed, &run);
}

fn run_seed(test: &str, seed: u64, run: &impl Fn(u64)) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| run(seed))) {
        let function = test.split('/').next().unwrap_or(test);
        eprintln!(
            "\n{test}: seed {seed} failed; replay with {SEED_VAR}={seed} cargo test -p lockshift-tests {function}\n"
        );
        std::panic::resume_unwind(panic);
    }
}

/// As [`for_each_seed`], plus `regressions`: seeds that once found a bug,
/// run by default whatever the range (unless `LOCKSHIFT_SEED` picks one).
pub fn for_each_seed_and(
    test: &str,
    first: u64,
    count: u64,
    regressions: &[u64],
    run: impl Fn(u64),
) {
    let seeds: Vec<u64> = match std::env::var(SEED_VAR).ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => {
            let count = std::env::var(SEEDS_VAR)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(count);
            let range = first..first + count;
            range
                .clone()
                .chain(regressions.iter().copied().filter(|s| !range.contains(s)))
                .collect()
        }
    };
    for seed in seeds {
        run_seed(test, seed, &run);
    }
}

/// `LOCKSHIFT_TRACE=debug` (any `tracing` filter) prints the locks' tracing
/// to the test's output: for replaying a seed, or a race against a real node.
pub fn trace_from_env() {
    if let Ok(filter) = std::env::var("LOCKSHIFT_TRACE") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
}

/// Runs `future` on a fresh single-threaded runtime with time paused.
///
/// # Panics
/// If the runtime cannot be built (out of file descriptors), which no test
/// can recover from.
pub fn paused<F: std::future::Future>(future: F) -> F::Output {
    trace_from_env();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime")
        .block_on(future)
}

/// The exclusion checker every simulation watches its critical sections
/// with, and what it reports. They live in `lockshift_harness::checker`,
/// shared with `migrate demo`; re-exported here at the path the tests use.
pub use lockshift_harness::checker::{Lapse, Oracle, Violation};

/// One node's view of the world: its store wrapper, its (possibly skewed)
/// clock, its context.
#[derive(Debug, Clone)]
pub struct NodeEnv {
    /// The node's index in the fleet.
    pub index: usize,
    /// The node's store (faults injected per node, operations counted).
    pub store: Arc<FaultyStore<SharedStore>>,
    /// The node's clock.
    pub clock: SharedClock,
    /// The node's lock context.
    pub ctx: Arc<LockContext>,
}

/// How a simulated node's clock is off: by a fixed offset, and by another
/// amount at every reading (up to `jitter` either way, as a clock NTP
/// steps back and forth). Real processes stamp from such a clock through
/// L1 (docs/design.md §5); nothing here moves a timestamp after its writer
/// chose it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeClock {
    /// The fixed offset, µs.
    pub offset_micros: i64,
    /// The most a reading is moved either way besides.
    pub jitter: Duration,
}

impl From<i64> for NodeClock {
    fn from(offset_micros: i64) -> Self {
        NodeClock {
            offset_micros,
            jitter: Duration::ZERO,
        }
    }
}

/// The clocks of a simulated fleet: node offsets drawn within `±offsets`
/// ([`skews`]), every reading off by up to `jitter` besides.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clocks {
    /// The bound of the nodes' fixed offsets.
    pub offsets: Duration,
    /// The bound of each reading's jitter.
    pub jitter: Duration,
}

impl Clocks {
    /// Offsets within `±offsets`, no jitter.
    pub fn offsets(offsets: Duration) -> Self {
        Clocks {
            offsets,
            jitter: Duration::ZERO,
        }
    }

    /// Each of `n` nodes' clock for `seed`.
    pub fn of_nodes(self, seed: u64, n: usize) -> Vec<NodeClock> {
        skews(seed, n, self.offsets)
            .into_iter()
            .map(|offset_micros| NodeClock {
                offset_micros,
                jitter: self.jitter,
            })
            .collect()
    }
}

/// A shared embedded store plus the server clock, for a simulated cluster.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// The server's clock (TTL expiry); follows tokio's paused clock.
    pub clock: Arc<TokioClock>,
    /// The one store every node talks to.
    pub store: Arc<MemoryStore>,
    /// Where every node's store writes its operations, when set
    /// ([`Cluster::journaled`]).
    pub journal: Option<Arc<Journal>>,
}

/// Where a simulated run's clocks start: 2026-01-01 plus a fraction of a
/// second drawn from `seed`. Never the system's time: cells expire at
/// whole seconds (S3), so where a run starts within its second decides
/// which whole second each TTL rounds to, and a replay of the seed must
/// round the same way (issue 46: runs whose clocks started at the system
/// time parted from each other at their first expiry). The fraction varies
/// with the seed, so a search over seeds still meets every rounding.
pub fn sim_epoch(seed: u64) -> Timestamp {
    Timestamp::from_micros(
        1_767_225_600_000_000
            + i64::try_from(seed.wrapping_mul(0x9e37_79b9) % 1_000_000).unwrap_or(0),
    )
}

impl Cluster {
    /// A fresh cluster whose clock starts at [`sim_epoch`] of `seed`.
    /// Call inside the runtime (the clock follows tokio's time).
    pub fn for_seed(seed: u64) -> Self {
        Self::starting_at(sim_epoch(seed))
    }

    /// A fresh cluster whose clock reads `base` now. Call inside the
    /// runtime.
    pub fn starting_at(base: Timestamp) -> Self {
        Self::with_clock(TokioClock::starting_at(base))
    }

    fn with_clock(clock: TokioClock) -> Self {
        let clock = Arc::new(clock);
        Cluster {
            store: Arc::new(MemoryStore::with_clock(clock.clone())),
            clock,
            journal: None,
        }
    }

    /// This cluster, with every node made afterwards by [`Cluster::node`]
    /// writing its store operations into one [`Journal`] (timestamps
    /// relative to the cluster's clock now): what a determinism check
    /// compares between two runs of a seed.
    pub fn journaled(self) -> Self {
        let journal = Journal::new(self.clock.now());
        self.with_journal(journal)
    }

    /// This cluster, with every node made afterwards writing into
    /// `journal` (see [`Cluster::journaled`]).
    pub fn with_journal(mut self, journal: Journal) -> Self {
        self.journal = Some(Arc::new(journal));
        self
    }

    /// Node `index` of a fleet: its own fault wrapper seeded from `seed`,
    /// its clock off as `clock` says (an offset in µs, or a [`NodeClock`]).
    pub fn node(
        &self,
        index: usize,
        seed: u64,
        plan: FaultPlan,
        clock: impl Into<NodeClock>,
        lease: LeaseSettings,
    ) -> NodeEnv {
        let NodeClock {
            offset_micros,
            jitter,
        } = clock.into();
        let skewed = SkewedClock::new(self.clock.clone(), offset_micros);
        let clock: SharedClock = if jitter.is_zero() {
            Arc::new(skewed)
        } else {
            let clock_seed = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ index as u64;
            Arc::new(JitteryClock::new(skewed, jitter, clock_seed))
        };
        let store: SharedStore = self.store.clone();
        journaled_node_env(index, seed, store, clock, plan, lease, self.journal.clone())
    }
}

/// Node `index` over `store` (shared with other nodes, or its own
/// connection), with its own fault wrapper seeded from `seed`.
///
/// # Panics
/// On invalid lease settings (a test bug).
pub fn node_env(
    index: usize,
    seed: u64,
    store: SharedStore,
    clock: SharedClock,
    plan: FaultPlan,
    lease: LeaseSettings,
) -> NodeEnv {
    journaled_node_env(index, seed, store, clock, plan, lease, None)
}

/// As [`node_env`], the node's store writing into `journal` when given.
///
/// # Panics
/// On invalid lease settings (a test bug).
pub fn journaled_node_env(
    index: usize,
    seed: u64,
    store: SharedStore,
    clock: SharedClock,
    plan: FaultPlan,
    lease: LeaseSettings,
    journal: Option<Arc<Journal>>,
) -> NodeEnv {
    let node_seed = seed
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(index as u64);
    let mut store = FaultyStore::new(store, node_seed).with_plan(plan);
    if let Some(journal) = journal {
        store = store.with_journal(journal);
    }
    let store = Arc::new(store);
    let shared: SharedStore = store.clone();
    let ctx = LockContext::new(
        shared,
        clock.clone(),
        NodeId::new(format!("node{index}")).expect("valid node id"),
        lease,
        Some(node_seed),
    )
    .expect("valid lease settings");
    NodeEnv {
        index,
        store,
        clock,
        ctx: Arc::new(ctx),
    }
}

/// What a contention run measured.
#[derive(Debug, Default, Clone)]
pub struct ContentionReport {
    /// Acquisitions that completed their critical section.
    pub acquisitions: u64,
    /// Acquisitions whose lease was lost inside the critical section (they
    /// skipped their write, as a careful holder must).
    pub lost_inside: u64,
    /// Final counter per lock.
    pub counters: HashMap<String, u64>,
    /// Exclusion violations seen.
    pub violations: Vec<Violation>,
    /// Acquisitions that failed, with the error.
    pub failures: Vec<String>,
    /// Longest wait for one acquisition.
    pub max_wait: Duration,
}

impl ContentionReport {
    /// Asserts the run was clean: no violation, no failed acquisition, and
    /// every counter equal to its acquisitions (no lost increment).
    ///
    /// # Panics
    /// When it was not.
    pub fn assert_exclusive(&self, what: &str) {
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
        let total: u64 = self.counters.values().sum();
        assert_eq!(
            total, self.acquisitions,
            "{what}: the counters lost increments (overlapping holders)"
        );
        assert!(self.acquisitions > 0, "{what}: nothing was acquired");
    }
}

/// One critical section of the two-ATMs check: read the counter, hold for a
/// while, write it back plus one — unless the lease was lost meanwhile.
/// A holder whose lease tells it the lock is lost leaves at once, as the
/// lease's contract asks ([`Oracle::exit_lost`]): the oracle then tells a
/// lapse it was warned of from two holders inside together.
/// Returns whether the write happened.
pub async fn critical_section(
    oracle: &Oracle,
    counters: &Mutex<HashMap<String, u64>>,
    guard: &LockGuard,
    hold: Duration,
) -> bool {
    let lock = guard.lock_id().as_str().to_string();
    let who = guard.owner().as_str().to_string();
    oracle.enter(&lock, &who);
    let read = *counters
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(lock.clone())
        .or_default();
    // Biased, as every select of a simulated run: an unbiased select picks
    // among ready branches at random, and a seed would not replay. A loss
    // due together with the end of the hold counts as a loss.
    let lost = tokio::select! {
        biased;
        reason = guard.until_lost() => Some(reason),
        () = tokio::time::sleep(hold) => None,
    };
    if let Some(reason) = lost.or_else(|| guard.check_valid().err()) {
        oracle.exit_lost(&lock, &who, &reason.to_string());
        return false;
    }
    counters
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(lock.clone(), read + 1);
    oracle.exit(&lock, &who);
    true
}

/// A contention run: each locker takes random locks from `locks`,
/// `per_node` times, holding each for up to `max_hold`.
pub async fn contend(
    lockers: Vec<Arc<dyn Locker>>,
    locks: &[LockId],
    per_node: u32,
    max_hold: Duration,
    seed: u64,
    oracle: Arc<Oracle>,
) -> ContentionReport {
    let counters = Arc::new(Mutex::new(HashMap::new()));
    let report = Arc::new(Mutex::new(ContentionReport::default()));
    let mut tasks = Vec::new();
    for (i, locker) in lockers.into_iter().enumerate() {
        let locks = locks.to_vec();
        let counters = counters.clone();
        let report = report.clone();
        let oracle = oracle.clone();
        let mut rng =
            StdRng::seed_from_u64(seed ^ (i as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d));
        tasks.push(tokio::spawn(async move {
            for _ in 0..per_node {
                let lock = &locks[rng.random_range(0..locks.len())];
                let hold = if max_hold.is_zero() {
                    Duration::ZERO
                } else {
                    rng.random_range(Duration::ZERO..max_hold)
                };
                let started = Instant::now();
                let guard = match locker
                    .acquire_with(
                        lock,
                        AcquireOptions::with_timeout(Duration::from_secs(3600)),
                        &Binding::unbound(),
                    )
                    .await
                {
                    Ok(g) => g,
                    Err(e) => {
                        lock_report(&report).failures.push(e.to_string());
                        continue;
                    }
                };
                let waited = started.elapsed();
                let wrote = critical_section(&oracle, &counters, &guard, hold).await;
                {
                    let mut r = lock_report(&report);
                    r.max_wait = r.max_wait.max(waited);
                    if wrote {
                        r.acquisitions += 1;
                    } else {
                        r.lost_inside += 1;
                    }
                }
                // A release that fails leaves cells to their TTL; others wait.
                let _ = guard.release().await;
                tokio::task::yield_now().await;
            }
        }));
    }
    for t in tasks {
        if let Err(e) = t.await {
            lock_report(&report)
                .failures
                .push(format!("worker panicked: {e}"));
        }
    }
    let mut r = lock_report(&report).clone();
    r.counters = counters
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    r.violations = oracle.violations();
    r
}

fn lock_report(report: &Mutex<ContentionReport>) -> std::sync::MutexGuard<'_, ContentionReport> {
    report.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Random clock offsets for `n` nodes, each within `±max`.
pub fn skews(seed: u64, n: usize, max: Duration) -> Vec<i64> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    let max = i64::try_from(max.as_micros()).unwrap_or(i64::MAX);
    (0..n)
        .map(|_| {
            if max == 0 {
                0
            } else {
                rng.random_range(-max..=max)
            }
        })
        .collect()
}
