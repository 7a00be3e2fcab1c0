//! [`Node`]: what a service embeds — one [`Locker`] whose algorithm follows
//! the configured mode and the rollout stage, plus the background work that
//! keeps it honest: registry heartbeats, stage re-reads, config reloads.
//!
//! # Invariants
//!
//! - **N1.** New acquisitions use the algorithm resolved from the configured
//!   mode and the last stage read ([`resolve`]): a mode the stage forbids
//!   degrades to combined, never to anything else; an unknown stage means
//!   combined.
//! - **N2.** A held lock is released by the algorithm that took it: the
//!   guard's lease deletes exactly the cells that acquisition wrote.
//! - **N3.** The node re-reads the stage (and its config file) every
//!   `rollout.stage_reread_every`, and reports the stage version it acts on
//!   in its heartbeat, so guards can wait until every node has seen a stage.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use lockshift_legacy::LegacyLocker;
use lockshift_lock::{
    AcquireError, AcquireOptions, ActivityObserver, Algorithm, LockContext, LockGuard, LockId,
    Locker, NodeId, TryAcquireError,
};
use lockshift_queue_lock::{QueueLocker, TimeService};
use lockshift_store::{SharedClock, SharedStore, StoreError, Timestamp, Ttl};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::config::{RolloutSettings, Settings};
use crate::error::StartError;
use crate::locker::CombinedLocker;
use crate::mode::Mode;
use crate::registry::{LeasePromise, NodeInfo, deregister, heartbeat, record_activity};
use crate::rollout::{StageRecord, read_stage};
use crate::stage::{Resolution, Stage, resolve};

/// How to start a node.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// The settings (already loaded and validated).
    pub settings: Settings,
    /// The file the settings came from, re-read every stage re-read so an
    /// edited `node.mode` takes effect without a restart.
    pub config_path: Option<PathBuf>,
    /// The environment overrides to apply on reload; `None`: the process's.
    pub env: Option<HashMap<String, String>>,
    /// The version reported in the registry.
    pub version: String,
    /// Seed for owner ids and backoff (simulations); `None`: from the OS.
    pub seed: Option<u64>,
}

impl NodeOptions {
    /// Options for `settings` with no config file to watch.
    pub fn new(settings: Settings) -> Self {
        NodeOptions {
            settings,
            config_path: None,
            env: None,
            version: env!("CARGO_PKG_VERSION").to_string(),
            seed: None,
        }
    }
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
}

#[derive(Debug)]
struct State {
    configured: Mode,
    stage: Option<StageRecord>,
    resolution: Resolution,
    last_used: BTreeMap<Algorithm, Timestamp>,
    reported: BTreeMap<Algorithm, Timestamp>,
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
    version: String,
    started_at: Timestamp,
    store: SharedStore,
    clock: SharedClock,
    config_path: Option<PathBuf>,
    env: Option<HashMap<String, String>>,
    rollout: RolloutSettings,
    heartbeat_ttl: Ttl,
    lease_promise: LeasePromise,
    legacy: LegacyLocker,
    combined: CombinedLocker,
    queue: QueueLocker,
    _time: TimeService,
    state: Mutex<State>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.id)
            .field("state", &self.state)
            .finish()
    }
}

/// A lockshift node: see the module docs.
#[derive(Debug)]
pub struct Node {
    shared: Arc<Shared>,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop.cancel();
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Node {
    /// Starts a node on `store`: reads the stage (a failure leaves it unknown,
    /// hence combined), registers, and starts the background loops.
    ///
    /// # Errors
    /// [`StartError::Settings`] when the settings break a rule.
    pub async fn start(
        store: SharedStore,
        clock: SharedClock,
        options: NodeOptions,
    ) -> Result<Node, StartError> {
        let settings = &options.settings;
        if let Some(problem) = settings.problems().into_iter().next() {
            return Err(problem.into());
        }
        let id = settings.node.node_id()?;
        let lease = settings.lock.lease();
        let heartbeat_ttl = Ttl::from_duration(settings.rollout.heartbeat_ttl).map_err(|e| {
            lockshift_store::settings::InvalidSetting::new(
                "rollout.heartbeat_ttl",
                format!("rollout.heartbeat_ttl: {e}"),
            )
        })?;
        let sightings = Arc::new(Sightings::default());
        let ctx = Arc::new(
            LockContext::new(
                store.clone(),
                clock.clone(),
                id.clone(),
                lease,
                options.seed,
            )?
            .with_observer(sightings.clone()),
        );
        let time = TimeService::start(&settings.time, store.clone(), clock.clone());
        let queue_settings = settings.lock.queue.clone();
        let configured = settings.node.mode;
        let shared = Arc::new(Shared {
            sightings,
            version: options.version.clone(),
            started_at: clock.now(),
            legacy: LegacyLocker::new(ctx.clone(), settings.lock.legacy.clone()),
            combined: CombinedLocker::new(ctx.clone(), time.source(), queue_settings.clone()),
            queue: QueueLocker::new(ctx, time.source(), queue_settings),
            _time: time,
            id,
            store,
            clock,
            config_path: options.config_path.clone(),
            env: options.env.clone(),
            rollout: settings.rollout.clone(),
            heartbeat_ttl,
            lease_promise: LeasePromise::of(&settings.lock.lease()),
            state: Mutex::new(State {
                configured,
                stage: None,
                resolution: resolve(configured, None),
                last_used: BTreeMap::new(),
                reported: BTreeMap::new(),
            }),
        });
        if let Err(e) = shared.refresh().await {
            warn!(node = %shared.id, error = %e, "could not read the rollout stage at start; running combined until it can");
        }
        if let Err(e) = shared.heartbeat().await {
            warn!(node = %shared.id, error = %e, "first heartbeat failed; retrying in the background");
        }
        let stop = CancellationToken::new();
        let tasks = vec![
            tokio::spawn(every(shared.rollout.stage_reread_every, stop.clone(), {
                let shared = shared.clone();
                move || {
                    let shared = shared.clone();
                    async move {
                        if let Err(e) = shared.refresh().await {
                            warn!(node = %shared.id, error = %e, "stage re-read failed; keeping the last stage");
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
        ];
        Ok(Node {
            shared,
            stop,
            tasks,
        })
    }

    /// This node's id.
    pub fn id(&self) -> &NodeId {
        &self.shared.id
    }

    /// The locker services use: its algorithm follows mode and stage.
    pub fn locker(&self) -> NodeLocker {
        NodeLocker {
            shared: self.shared.clone(),
        }
    }

    /// What the node runs now.
    pub fn status(&self) -> NodeStatus {
        self.shared.status()
    }

    /// Re-reads the stage and the config file now, instead of waiting for
    /// the next period.
    ///
    /// # Errors
    /// The store error reading the stage (the last stage is kept).
    pub async fn refresh(&self) -> Result<(), StoreError> {
        self.shared.refresh().await
    }

    /// Writes the registry heartbeat now.
    ///
    /// # Errors
    /// The store error.
    pub async fn heartbeat(&self) -> Result<(), StoreError> {
        self.shared.heartbeat().await
    }

    /// Stops the background loops and removes the node from the registry.
    /// Held guards stay valid until released (their leases are their own).
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        for t in self.tasks.drain(..) {
            t.abort();
        }
        if let Err(e) = self.shared.report_activity().await {
            debug!(error = %e, "final activity report failed");
        }
        if let Err(e) = deregister(
            self.shared.store.as_ref(),
            self.shared.clock.as_ref(),
            self.shared.id.as_str(),
        )
        .await
        {
            warn!(node = %self.shared.id, error = %e, "could not deregister; the entry expires with its TTL");
        }
    }
}

async fn every<F, Fut>(period: std::time::Duration, stop: CancellationToken, mut tick: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => tick().await,
        }
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn status(&self) -> NodeStatus {
        let st = self.state();
        NodeStatus {
            node: self.id.clone(),
            configured: st.configured,
            stage: st.stage.clone(),
            effective: st.resolution.algorithm,
            degraded_from: st.resolution.degraded_from,
        }
    }

    async fn refresh(&self) -> Result<(), StoreError> {
        let stage = read_stage(self.store.as_ref()).await;
        let configured = self.reload_mode();
        let mut st = self.state();
        if let Some(mode) = configured
            && mode != st.configured
        {
            info!(node = %self.id, from = %st.configured, to = %mode, "configured mode changed");
            st.configured = mode;
        }
        let result = match stage {
            Ok((record, _)) => {
                if st.stage.as_ref().map(|s| s.version) != Some(record.version) {
                    info!(node = %self.id, stage = %record.stage, version = record.version, "stage read");
                }
                st.stage = Some(record);
                Ok(())
            }
            Err(e) => Err(e),
        };
        let resolution = resolve(st.configured, st.stage.as_ref().map(|s| s.stage));
        if resolution != st.resolution {
            let stage = st.stage.as_ref().map_or("unknown", |s| s.stage.as_str());
            match resolution.degraded_from {
                Some(mode) => warn!(node = %self.id, configured = %mode, %stage,
                    "mode {mode} is not allowed at stage {stage}; running combined"),
                None => info!(node = %self.id, algorithm = %resolution.algorithm, %stage,
                    "new acquisitions now use {}", resolution.algorithm),
            }
            st.resolution = resolution;
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

    fn info(&self) -> NodeInfo {
        let st = self.state();
        NodeInfo {
            node: self.id.to_string(),
            version: self.version.clone(),
            configured_mode: st.configured,
            effective: st.resolution.algorithm,
            degraded: st.resolution.degraded_from.is_some(),
            seen_stage: st.stage.as_ref().map(|s| s.stage),
            seen_version: st.stage.as_ref().map(|s| s.version),
            started_at: self.started_at.as_micros(),
            last_used: st
                .last_used
                .iter()
                .map(|(a, t)| (*a, t.as_micros()))
                .collect(),
            lease: Some(self.lease_promise),
        }
    }

    async fn heartbeat(&self) -> Result<(), StoreError> {
        heartbeat(
            self.store.as_ref(),
            self.clock.as_ref(),
            &self.info(),
            self.heartbeat_ttl,
        )
        .await?;
        self.report_activity().await
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

    fn locker_for(&self) -> (Algorithm, &dyn Locker) {
        let algorithm = self.state().resolution.algorithm;
        let locker: &dyn Locker = match algorithm {
            Algorithm::Legacy => &self.legacy,
            Algorithm::Combined => &self.combined,
            Algorithm::Queue => &self.queue,
        };
        (algorithm, locker)
    }

    fn used(&self, algorithm: Algorithm) {
        let now = self.clock.now();
        self.state().last_used.insert(algorithm, now);
    }
}

/// The [`Locker`] of a [`Node`]: each acquisition uses the algorithm the
/// node resolves at that moment.
#[derive(Clone)]
pub struct NodeLocker {
    shared: Arc<Shared>,
}

impl fmt::Debug for NodeLocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeLocker")
            .field("node", &self.shared.id)
            .finish()
    }
}

impl NodeLocker {
    /// What the node runs now.
    pub fn status(&self) -> NodeStatus {
        self.shared.status()
    }

    /// The stage the node acts on.
    pub fn stage(&self) -> Option<Stage> {
        self.shared.state().stage.as_ref().map(|s| s.stage)
    }
}

#[async_trait]
impl Locker for NodeLocker {
    fn algorithm(&self) -> Algorithm {
        self.shared.state().resolution.algorithm
    }

    async fn acquire_with(
        &self,
        lock: &LockId,
        options: AcquireOptions,
    ) -> Result<LockGuard, AcquireError> {
        let (algorithm, locker) = self.shared.locker_for();
        let guard = locker.acquire_with(lock, options).await?;
        self.shared.used(algorithm);
        Ok(guard)
    }

    async fn try_acquire(&self, lock: &LockId) -> Result<LockGuard, TryAcquireError> {
        let (algorithm, locker) = self.shared.locker_for();
        let guard = locker.try_acquire(lock).await?;
        self.shared.used(algorithm);
        Ok(guard)
    }
}

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;
