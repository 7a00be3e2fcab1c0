//! Seeded leader elections (docs/design.md §5b) on the embedded store
//! under a paused clock: real [`Node`]s campaigning in one election while
//! the operator moves the stage forward and back, leaders cut off from the
//! store or paused past their lease, observers following who leads. The
//! simulations themselves live in `tests/simulation/election.rs`.
//!
//! Nothing here trusts the library's answers. The candidates tell the
//! [`Referee`] when they start and stop acting as leader, and the referee
//! checks, with the exclusion oracle of the lock simulations, that no two
//! ever act at once, and that each leader's token is greater than every
//! earlier one's. At *checkpoints* the fleet holds still (no new campaign,
//! no resignation, no fault; campaigns in flight wait behind a leader)
//! until nothing has changed for longer than an observer's period and no
//! record can outlive its leadership any more — a record of a leader whose
//! successor has begun never counts, its token being below the fencing
//! cell (E1), while the last leader's may live a TTL past a late landing;
//! then [`Election::leader`](lockshift::Election::leader) and every observer must name the leader the terms
//! say leads — node, value, time and token — or nobody. Between
//! checkpoints, an observer must never name a leader older than one it
//! named before (E1).

mod candidate;
mod checkpoint;
mod referee;
mod report;
mod scenarios;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use lockshift::{Algorithm, Leader, LeaderWatch, Mode, Node, OBSERVE_EVERY, Stage};
use lockshift_rollout::Rollout;
use lockshift_store::{FaultPlan, SharedClock, SharedStore, SkewedClock};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use referee::{Ended, Referee, Term};
pub use report::{Report, Stats};
pub use scenarios::{rogue_leaders, through_the_rollout};

use crate::attacks::must_move;
use crate::rolling::Timings;
use crate::sim::{Cluster, NodeEnv, node_env, skews};

/// The election every candidate campaigns in.
pub const ELECTION: &str = "scheduler";

/// How long a campaign waits its turn at most (a line of four candidates
/// behind a leader cut off from the store waits a few leases).
const CAMPAIGN_TIMEOUT: Duration = Duration::from_secs(120);

/// How long past the last change a checkpoint waits beyond an observer's
/// period: one read's latency, with room to spare.
const SLACK: Duration = Duration::from_millis(250);

/// How many times a checkpoint is taken again when the terms change
/// while it compares (a lease lost to a fault, the next leader in).
const CHECKPOINT_ATTEMPTS: usize = 5;

/// How long the fleet may take to hold still at a checkpoint at most (a
/// leader paused past its lease, then its record's TTL, after a late
/// landing).
const SETTLE_WITHIN: Duration = Duration::from_secs(120);

/// How much later than its round trip a write that lands late lands at
/// most: longer than a lease TTL (10 s here) and a term after it, so a
/// renewal sent before its leader was cut off can land after the next
/// leader took the lock, and after it resigned (issue 45).
const LATE_BY: Duration = Duration::from_secs(25);

/// How the leaders of a run behave.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    /// Whether leaders are cut off from the store and paused past their
    /// lease, one in ten each (else they only resign).
    pub faults: bool,
    /// The negative control: candidate 0's every leadership pauses past
    /// its lease and, on resuming, acts for another lease without looking
    /// whether it still leads; the other candidates hold past their TTL.
    pub rogue: bool,
}

/// Where a candidate is, as a checkpoint needs to know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Place {
    /// Between campaigns.
    Idle,
    /// Campaigning: waiting its turn (it changes who leads only once the
    /// lock is free — never while another candidate leads and holds).
    Waiting,
    /// Leading, and acting: holds still while the fleet does.
    Leading,
    /// Anything else: resigning, cut off, paused — who leads may change.
    Busy,
}

/// What the candidates share with the driver.
#[derive(Debug)]
struct Campaigns {
    seed: u64,
    /// When the run began: the zero of its timeline.
    began: Instant,
    ttl: Duration,
    /// How often a leader's cells are renewed.
    renew_every: Duration,
    faults: bool,
    rogue: bool,
    referee: Referee,
    stage: Mutex<Stage>,
    /// Whether the fleet holds still: no campaign starts, no leader steps
    /// down or meets a fault. Campaigns in flight go on (cancelling them
    /// would race their own timers on the paused clock, and a replay
    /// could go either way).
    holding: watch::Sender<bool>,
    /// Per candidate: its [`Place`].
    places: Vec<AtomicU8>,
    stop: CancellationToken,
    stats: Mutex<Stats>,
    failures: Mutex<Vec<String>>,
}

impl Campaigns {
    fn stats(&self) -> MutexGuard<'_, Stats> {
        self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn failure(&self, failure: String) {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(failure);
    }

    fn stage(&self) -> Stage {
        *self.stage.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn holding(&self) -> bool {
        *self.holding.borrow()
    }

    fn place(&self, i: usize, place: Place) {
        self.places[i].store(place as u8, Ordering::SeqCst);
    }

    /// Whether nothing in flight can change who leads: no candidate busy,
    /// and any campaign waiting behind a leader that holds still.
    fn all_settled(&self) -> bool {
        let places: Vec<u8> = self
            .places
            .iter()
            .map(|p| p.load(Ordering::SeqCst))
            .collect();
        let is = |place: Place| places.contains(&(place as u8));
        !is(Place::Busy) && (!is(Place::Waiting) || is(Place::Leading))
    }

    /// The fleet holds still (or carries on).
    fn hold_still(&self, holding: bool) {
        self.holding.send_replace(holding);
    }
}

struct Candidate {
    node: Node,
    config: PathBuf,
    task: JoinHandle<()>,
}

struct Observer {
    what: String,
    watch: LeaderWatch,
}

/// One run: the cluster, the operator, the candidates and observers.
pub struct World {
    cluster: Cluster,
    timings: Timings,
    seed: u64,
    rng: StdRng,
    rollout: Rollout,
    shared: Arc<Campaigns>,
    candidates: Vec<Candidate>,
    observers: Vec<Observer>,
    /// Nodes that only observe.
    watchers: Vec<Node>,
    skews: Vec<i64>,
    started: usize,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("seed", &self.seed)
            .field("candidates", &self.candidates.len())
            .field("observers", &self.observers.len())
            .finish_non_exhaustive()
    }
}

/// Latency for every operation, one in a hundred failing before or after
/// it applies, as in the rolling simulations, and one write or delete in
/// two hundred landing late, up to [`LATE_BY`] after its round trip (L5).
fn plan() -> FaultPlan {
    FaultPlan {
        fail_before: 0.01,
        fail_after: 0.01,
        late: 0.005,
        late_by: LATE_BY,
        ..FaultPlan::latency(Duration::from_millis(2), Duration::from_millis(3))
    }
}

fn write_config(path: &Path, text: &str) {
    std::fs::write(path, text).expect("the config file is written");
}

impl World {
    /// A world of `candidates` candidates (none started yet) and the
    /// operator, at stage `legacy`. Call inside the paused runtime.
    ///
    /// # Panics
    /// If no temporary directory can be made.
    pub fn new(seed: u64, candidates: usize, setup: Setup) -> Self {
        // The clock starts at a time of the seed's, not the system's.
        let cluster = Cluster::for_seed(seed);
        // A legacy contender looks at a held lock every 50 ms at most, so
        // it finds it free between combined leaders now and then.
        let timings = Timings {
            legacy_owner_wait: Duration::from_millis(50),
            ..Timings::simulated()
        };
        let s = timings.settings_for("operator", Mode::Auto);
        let rollout = Rollout::new(
            cluster.store.clone(),
            cluster.clock.clone(),
            s.rollout.clone(),
            s.lock.lease(),
            s.lock.queue.clone(),
        );
        let shared = Arc::new(Campaigns {
            seed,
            began: Instant::now(),
            ttl: timings.lease_ttl,
            renew_every: timings.renew_every,
            faults: setup.faults,
            rogue: setup.rogue,
            // A record outlives its leadership by the rounding of its
            // whole-second TTL at most — the skews are far below a second —
            // or, landing late, by its TTL after it landed (L5).
            referee: Referee::new(
                ELECTION,
                timings.lease_ttl + Duration::from_secs(2) + LATE_BY,
            ),
            stage: Mutex::new(Stage::Legacy),
            holding: watch::Sender::new(false),
            places: (0..candidates)
                .map(|_| AtomicU8::new(Place::Idle as u8))
                .collect(),
            stop: CancellationToken::new(),
            stats: Mutex::default(),
            failures: Mutex::default(),
        });
        World {
            cluster,
            timings,
            seed,
            rng: StdRng::seed_from_u64(seed ^ 0xe1ec),
            rollout,
            shared,
            candidates: Vec::new(),
            observers: Vec::new(),
            watchers: Vec::new(),
            skews: skews(seed, 16, Duration::from_millis(100)),
            started: 0,
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    /// The referee.
    pub fn referee(&self) -> &Referee {
        &self.shared.referee
    }

    async fn start_node(&mut self, id: &str, mode: Mode, config: Option<&Path>) -> (Node, NodeEnv) {
        self.started += 1;
        let settings = self.timings.settings_for(id, mode);
        let clock: SharedClock = Arc::new(SkewedClock::new(
            self.cluster.clock.clone(),
            self.skews[self.started % self.skews.len()],
        ));
        let env = node_env(
            self.started,
            self.seed,
            self.cluster.store.clone(),
            clock,
            plan(),
            settings.lock.lease(),
        );
        let store: SharedStore = env.store.clone();
        let mut builder = Node::builder()
            .settings(settings)
            .seed(self.seed.wrapping_mul(31).wrapping_add(self.started as u64))
            .store(store)
            .clock(env.clock.clone());
        if let Some(path) = config {
            write_config(path, &self.timings.toml(id, mode));
            builder = builder
                .config_file(path)
                .env(std::collections::HashMap::new());
        }
        let node = builder.start().await.expect("the node starts");
        (node, env)
    }

    /// Starts candidate `c{n}` in `mode` (its settings from a config file
    /// it re-reads, so [`edit`](Self::edit) switches it), campaigning.
    ///
    /// # Panics
    /// If the node does not start.
    pub async fn candidate(&mut self, mode: Mode) {
        let i = self.candidates.len();
        let id = format!("c{i}");
        let config = self.dir.path().join(format!("{id}.toml"));
        let (node, env) = self.start_node(&id, mode, Some(&config)).await;
        let task = tokio::spawn(candidate::run(self.shared.clone(), i, node.clone(), env));
        self.candidates.push(Candidate { node, config, task });
    }

    /// Starts node `o{n}`, which only observes the election.
    ///
    /// # Panics
    /// If the node does not start.
    pub async fn observer(&mut self) {
        let id = format!("o{}", self.watchers.len());
        let (node, _) = self.start_node(&id, Mode::Auto, None).await;
        let watch = node
            .election(ELECTION)
            .expect("a valid election name")
            .observe();
        self.follow(format!("observer {id}"), watch);
        self.watchers.push(node);
    }

    /// Follows `watch`'s every change besides checking it at checkpoints.
    fn follow(&mut self, what: String, watch: LeaderWatch) {
        let mut changes = watch.clone();
        let shared = self.shared.clone();
        let who = what.clone();
        tokio::spawn(async move {
            let mut newest: Option<Leader> = None;
            while let Some(now) = changes.changed().await {
                let mut stats = shared.stats();
                stats.observed_changes += 1;
                let Some(now) = now else { continue };
                match &newest {
                    Some(newer) if now.token < newer.token => {
                        // E1: once a token is named the fencing cell is at
                        // least it, so no smaller one is named again.
                        let at = shared.began.elapsed().as_secs_f64();
                        let seen = format!("{who} showed {now} after {newer}, at {at:.3}s");
                        shared.referee.problem(format!(
                            "{seen}: a former leader named again after a newer one"
                        ));
                        stats.resurrections.push(seen);
                    }
                    Some(newer) if now.token == newer.token => {}
                    _ => newest = Some(now),
                }
            }
        });
        self.observers.push(Observer { what, watch });
    }

    /// Stops the node of observer `k` (its watch no longer changes): the
    /// negative control of the convergence checks.
    pub async fn freeze_observer(&self, k: usize) {
        self.watchers[k].shutdown().await;
    }

    /// Candidate `i` observes the election too (through its own store,
    /// cut off with it).
    ///
    /// # Panics
    /// If there is no such candidate.
    pub fn candidate_observes(&mut self, i: usize) {
        let watch = self.candidates[i]
            .node
            .election(ELECTION)
            .expect("a valid election name")
            .observe();
        self.follow(format!("candidate c{i}'s observer"), watch);
    }

    /// Edits candidate `i`'s config file to `mode`: it switches at its
    /// next re-read, campaigns in flight.
    pub fn edit(&self, i: usize, mode: Mode) {
        write_config(
            &self.candidates[i].config,
            &self.timings.toml(&format!("c{i}"), mode),
        );
    }

    /// Moves the stage to `to` while the candidates campaign (asking again
    /// until the guards allow it).
    ///
    /// # Panics
    /// If the guards never allow it within five minutes.
    pub async fn move_to(&self, to: Stage) {
        must_move(&self.rollout, to, Duration::from_secs(300)).await;
        *self
            .shared
            .stage
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = to;
        self.shared.stats().transitions.push(to);
    }

    /// Lets the candidates campaign for a random while of `range`.
    pub async fn campaign_for(&mut self, range: std::ops::Range<Duration>) {
        let d = self.rng.random_range(range);
        tokio::time::sleep(d).await;
    }

    /// Lets the candidates campaign until `n` leaderships were taken by
    /// `algorithm`, or `within` passed.
    pub async fn campaign_until(&self, n: usize, algorithm: Algorithm, within: Duration) {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline
            && self
                .referee()
                .terms()
                .iter()
                .filter(|t| t.algorithm == algorithm)
                .count()
                < n
        {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Ends the run: a last checkpoint, then every candidate stops (a
    /// leader resigns), then nobody must lead — by `Election::leader` and by
    /// every observer. Returns what the run saw.
    pub async fn finish(mut self) -> Report {
        self.checkpoint("at the end").await;
        self.shared.hold_still(true);
        self.shared.stop.cancel();
        for c in &mut self.candidates {
            if let Err(e) = (&mut c.task).await {
                self.shared.failure(format!("a candidate panicked: {e}"));
            }
        }
        // Nothing campaigns any more: the terms cannot change under it.
        if self.settle("after every candidate stopped").await {
            for problem in self.compare("after every candidate stopped").await {
                self.referee().problem(problem);
            }
            self.count_checkpoint();
        }
        for node in self
            .candidates
            .iter()
            .map(|c| &c.node)
            .chain(self.watchers.iter())
        {
            node.shutdown().await;
        }
        let referee = self.referee();
        let terms = referee.terms();
        let mut stats = self.shared.stats().clone();
        stats.simulated = self.shared.began.elapsed();
        for t in &terms {
            *stats
                .by_stage
                .entry(format!("{}/{}", t.stage, t.algorithm))
                .or_default() += 1;
        }
        Report {
            began: self.shared.began,
            overlaps: referee.overlaps(),
            problems: referee.problems(),
            failures: self
                .shared
                .failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            terms,
            stats,
        }
    }
}
