//! The running node's shared state and its background work: stage re-reads
//! and re-evaluation (R2, R3), heartbeats and the activity promise (R5, R8),
//! config reloads, activity reports, and leaving the registry.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use lockshift_decide::algorithm::{Mode, Resolution};
use lockshift_decide::registry::{LeasePromise, NodeInfo, registry_column};
use lockshift_lock::{Algorithm, Incarnation, Locker, NodeId, Revoker};
use lockshift_rollout::RolloutSettings;
use lockshift_rollout::homes::{self, HomesView, move_wait};
use lockshift_rollout::registry::{deregister, heartbeat, other_incarnations, record_activity};
use lockshift_rollout::rollout::read_stage;
use lockshift_store::{SharedClock, SharedStore, StoreError, Timestamp, Ttl};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::NodeStatus;
use super::clock::ClockState;
use crate::binding::{Bindings, View};
use crate::metrics::NodeMetrics;
use crate::settings::Settings;

#[derive(Debug)]
pub(super) struct NodeState {
    pub(super) configured: Mode,
    pub(super) view: View,
    pub(super) resolution: Resolution,
    pub(super) bindings: Bindings,
    /// Whether the last evaluation found the view expired (to log changes).
    pub(super) expired: bool,
    /// `shutdown` was called: no new acquisitions.
    pub(super) closed: bool,
    /// The node left the registry.
    pub(super) left: bool,
    pub(super) last_used: BTreeMap<Algorithm, Timestamp>,
    pub(super) reported: BTreeMap<Algorithm, Timestamp>,
    /// Other live processes under this node id (registry columns).
    pub(super) others: Vec<String>,
    /// What was last logged of each home rule (its key → version, home,
    /// confirmed), to log changes only.
    pub(super) homes_logged: BTreeMap<String, (u64, String, bool)>,
    /// Why the last stage read failed, until one succeeds.
    pub(super) stage_error: Option<String>,
    /// Why the last heartbeat failed, until one lands.
    pub(super) heartbeat_error: Option<String>,
    /// The process's clock against the database's (C1).
    pub(super) clock: ClockState,
}

impl NodeState {
    /// Why the view is not confirmed at `now` (`wall` on this process's
    /// clock), in words (`None` when it is): what a degraded mode is told,
    /// instead of a stage that forbids nothing — the stage's reason (R2),
    /// the clock's (C1), or both.
    pub(super) fn unconfirmed_because(
        &self,
        now: std::time::Instant,
        wall: Timestamp,
        rollout: &RolloutSettings,
    ) -> Option<String> {
        if self.view.confirmed(now).is_some() {
            return None;
        }
        let why = |what: &str, error: &Option<String>| match error {
            Some(e) => format!("{what}: {e}"),
            None => what.to_string(),
        };
        let stage = if self.view.record.is_none() {
            Some(why("no stage read has succeeded yet", &self.stage_error))
        } else if !self.view.has_heartbeat() {
            Some(why("no heartbeat has landed yet", &self.heartbeat_error))
        } else if self.view.expired(now) {
            let error = self
                .stage_error
                .clone()
                .or_else(|| self.heartbeat_error.clone());
            Some(why(
                &format!(
                    "the stage has not been confirmed within rollout.stage_valid_for ({})",
                    lockshift_decide::duration::fmt_duration(rollout.stage_valid_for)
                ),
                &error,
            ))
        } else {
            None
        };
        let clock = (!self.view.clock_bounded(now))
            .then(|| self.clock.why_unbounded(rollout.clock_skew_margin, wall));
        let reasons: Vec<String> = stage.into_iter().chain(clock).collect();
        Some(reasons.join("; "))
    }
}

pub(super) struct NodeParts {
    pub(super) id: NodeId,
    pub(super) incarnation: Incarnation,
    pub(super) version: String,
    pub(super) started_at: Timestamp,
    pub(super) store: SharedStore,
    /// The clock stamps and times are on: the host's, corrected by the
    /// offset measured (`corrected`, C1).
    pub(super) clock: SharedClock,
    pub(super) corrected: Arc<super::clock::CorrectedClock>,
    pub(super) config_path: Option<PathBuf>,
    pub(super) env: Option<HashMap<String, String>>,
    pub(super) rollout: RolloutSettings,
    /// The process's view of the homes, which its store routes by.
    pub(super) homes: Arc<HomesView>,
    pub(super) registry_ttl: Ttl,
    pub(super) lease_promise: LeasePromise,
    /// One locker per algorithm, from one factory: they share the node's
    /// context and time service, and own what they need.
    pub(super) legacy: Arc<dyn Locker>,
    pub(super) combined: Arc<dyn Locker>,
    pub(super) queue: Arc<dyn Locker>,
    pub(super) metrics: NodeMetrics,
    /// Every guard handed out and not yet released, by binding id, so that
    /// a shutdown can release what is still held.
    pub(super) held: Mutex<HashMap<u64, Revoker>>,
    pub(super) state: Mutex<NodeState>,
    /// Wakes the expiry watch when the view's deadline moved.
    pub(super) view_changed: Notify,
}

impl fmt::Debug for NodeParts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.id)
            .field("incarnation", &self.incarnation)
            .field("state", &self.state)
            .finish()
    }
}

/// The algorithm new acquisitions will use once the registry knows of it
/// (R8), if it is not the one they use now.
fn pending(
    view: &View,
    configured: Mode,
    now_using: Resolution,
    now: std::time::Instant,
) -> Option<Algorithm> {
    let wanted = view.declaring(configured, now).algorithm;
    (wanted != now_using.algorithm).then_some(wanted)
}

/// Reads the homes row from every datacenter into `homes` and records,
/// through its home, each home the settings name that no record holds yet
/// (as process `me`, serving after the move wait if others run: H3).
/// Failures are the view's business: a home that cannot be confirmed
/// refuses its locks until it can.
pub(super) async fn refresh_homes(
    store: &SharedStore,
    homes: &Arc<HomesView>,
    me: &str,
    rollout: &RolloutSettings,
    lease_ttl: Duration,
) {
    let report = homes::refresh(store, homes).await;
    if homes.configured().is_empty() {
        return;
    }
    let wait = move_wait(rollout, lease_ttl, []);
    match homes::seed(store, homes, &report, me, wait).await {
        Ok(seeded) if !seeded.is_empty() => {
            homes::refresh(store, homes).await;
        }
        Ok(_) => {}
        Err(e) => {
            warn!(process = me, error = %e, "could not record the homes the settings name; trying again at the next re-read");
        }
    }
}

pub(super) async fn every<F, Fut>(period: Duration, stop: CancellationToken, mut tick: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut ticker = tokio::time::interval_at(Instant::now() + period, period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // Biased (a stop due together with a tick wins), so a seeded
        // simulation replays: tokio picks among ready branches at random.
        tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            _ = ticker.tick() => tick().await,
        }
    }
}

/// Re-evaluates the node the moment its stage view expires (R2), even while
/// a stage read or heartbeat hangs in a slow store: waiting acquisitions of
/// other algorithms leave the line then, not a re-read period later.
pub(super) async fn watch_expiry(shared: Arc<NodeParts>, stop: CancellationToken) {
    loop {
        // Past the deadline there is nothing to wake for until the view
        // changes (a spin here would also stop a paused clock for good).
        let until = shared
            .state()
            .view
            .valid_until()
            .map(Instant::from_std)
            .filter(|t| *t > Instant::now());
        tokio::select! {
            biased;
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

impl NodeParts {
    pub(super) fn state(&self) -> MutexGuard<'_, NodeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn status(&self) -> NodeStatus {
        let now = Instant::now();
        let mut st = self.state();
        self.reevaluate(&mut st, now);
        NodeStatus {
            node: self.id.clone(),
            configured: st.configured,
            stage: st.view.record.clone(),
            effective: st.resolution.algorithm,
            degraded_from: st.resolution.degraded_from,
            view_expired: st.view.expired(now.into_std()),
            acting_version: st.bindings.acting_version(&st.view),
            incarnation: self.incarnation,
            other_processes: st.others.clone(),
            pending: pending(&st.view, st.configured, st.resolution, now.into_std()),
            unconfirmed_because: st.unconfirmed_because(
                now.into_std(),
                self.clock.now(),
                &self.rollout,
            ),
            homes: self.homes.states(),
            clock: st.clock.host,
        }
    }

    /// Resolves the configured mode against the view at `now` and applies
    /// the result to every acquisition (R2, R3). Idempotent and cheap: every
    /// path that may see a change calls it.
    pub(super) fn reevaluate(&self, st: &mut NodeState, now: Instant) {
        let now = now.into_std();
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
            match (
                resolution.degraded_from,
                st.unconfirmed_because(now, self.clock.now(), &self.rollout),
            ) {
                (Some(mode), Some(why)) => warn!(node = %self.id, configured = %mode,
                    "mode {mode} waits for a confirmed stage and a clock within the margin ({why}); running combined until then"),
                (Some(mode), None) => warn!(node = %self.id, configured = %mode, %stage,
                    "mode {mode} is not allowed at stage {stage}; running combined"),
                (None, _) => info!(node = %self.id, algorithm = %resolution.algorithm, %stage,
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
        // node cannot tell (`Pacing::of`): every acquisition's pacing.
        st.bindings.pace(confirmed.as_ref());
    }

    /// Reads the homes row from every datacenter, records the homes the
    /// settings name where no record holds them yet ([`refresh_homes`]),
    /// and logs what changed (docs/design.md §4a).
    pub(super) async fn refresh_homes(&self) {
        let me = registry_column(self.id.as_str(), self.incarnation);
        refresh_homes(
            &self.store,
            &self.homes,
            &me,
            &self.rollout,
            self.lease_promise.ttl(),
        )
        .await;
        self.log_homes();
    }

    /// Logs each home rule whose home, version or confirmation changed,
    /// and a configured home the store's record overrides.
    fn log_homes(&self) {
        let states = self.homes.states();
        let configured = self.homes.configured().rules().to_vec();
        let mut st = self.state();
        for state in states {
            let now = (
                state.record.version,
                state.record.datacenter.to_string(),
                state.confirmed,
            );
            let before = st.homes_logged.insert(state.rule.clone(), now.clone());
            if before.as_ref() == Some(&now) {
                continue;
            }
            let home = &state.record.datacenter;
            let rule = &state.rule;
            match (before.map(|b| b.2), state.confirmed) {
                (Some(true), false) | (None, false) => {
                    warn!(node = %self.id, %rule, %home, version = state.record.version,
                        "cannot confirm this home from its own datacenter; its locks are refused here until it can")
                }
                (_, true) => {
                    info!(node = %self.id, %rule, %home, version = state.record.version,
                        moved_from = ?state.record.moved_from, "home confirmed")
                }
                (Some(false), false) => {}
            }
            if let Some((_, wanted)) = configured
                .iter()
                .find(|(r, _)| r.key() == state.rule)
                .filter(|(_, dc)| dc != home)
            {
                warn!(node = %self.id, %rule, configured = %wanted, recorded = %home,
                    version = state.record.version,
                    "the settings name another home than the store records; the record wins (`migrate home move` changes it)");
            }
        }
    }

    pub(super) async fn refresh(&self) -> Result<(), StoreError> {
        self.refresh_homes().await;
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
            st.stage_error = stage.as_ref().err().map(ToString::to_string);
            let result = match stage {
                Ok((record, _)) => {
                    if st.view.record.as_ref().map(|s| s.version) != Some(record.version) {
                        info!(node = %self.id, stage = %record.stage, version = record.version, "stage read");
                    }
                    st.view.read(record, sent.into_std());
                    Ok(())
                }
                Err(e) => Err(e),
            };
            let now = Instant::now();
            self.reevaluate(&mut st, now);
            // A switch waits for the registry to know of it (R8): tell it
            // now rather than a heartbeat period later — once a heartbeat
            // has landed at all (at start, one follows anyway).
            let register = st.view.has_heartbeat()
                && pending(&st.view, st.configured, st.resolution, now.into_std()).is_some();
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
    /// that heartbeat lands (its view confirmed by it, R2) — the row is
    /// only written if it does — and the algorithms it declares (R8): the
    /// one new acquisitions will use, and every one it has acquisitions of.
    fn info(&self, sent: Instant) -> (NodeInfo, BTreeSet<Algorithm>) {
        let mut st = self.state();
        self.reevaluate(&mut st, sent);
        let sent = sent.into_std();
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
            datacenter: self.homes.local().map(ToString::to_string),
            homes: Some(self.homes.states()),
            stage_valid_for_ms: Some(
                u64::try_from(self.rollout.stage_valid_for.as_millis()).unwrap_or(u64::MAX),
            ),
            registry_ttl_ms: Some(
                u64::try_from(self.registry_ttl.as_duration().as_millis()).unwrap_or(u64::MAX),
            ),
            left: false,
            clock: st.clock.reading,
            host_clock: st
                .clock
                .host
                .filter(|_| self.corrected.correction_us() != 0),
        };
        (info, declared)
    }

    pub(super) async fn heartbeat(&self) -> Result<(), StoreError> {
        // R5: what the row says is computed before it is sent; an
        // acquisition bound after this moment binds to this view or a
        // newer one, so the report stays a lower bound.
        let sent = Instant::now();
        let (info, declared) = self.info(sent);
        // R8: first the promise. This heartbeat confirms the view until
        // `sent + stage_valid_for` at most, so every legacy or queue
        // acquisition it lets the node hand out falls before
        // `promised` — recorded even if the node never reports again.
        let promised = self
            .on_database_clock(self.clock.now())
            .saturating_add(self.rollout.stage_valid_for);
        let landed = async {
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
            .await
        }
        .await;
        if let Err(e) = landed {
            self.state().heartbeat_error = Some(e.to_string());
            return Err(e);
        }
        {
            let mut st = self.state();
            st.heartbeat_error = None;
            st.view.heartbeat(sent.into_std(), declared);
            self.reevaluate(&mut st, Instant::now());
        }
        self.view_changed.notify_one();
        self.look_for_other_processes().await;
        self.report_activity().await
    }

    /// Warns when another live process runs under this node id (R5): both
    /// count for the guards, but operators should give each its own id.
    async fn look_for_other_processes(&self) {
        let found = match other_incarnations(
            self.store.as_ref(),
            self.clock.as_ref(),
            self.id.as_str(),
            self.incarnation,
            self.rollout.clock_skew_margin,
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
    /// node's own, and for legacy also holders its acquisitions saw (binaries
    /// that never register; their bindings wrote them into the node's
    /// sightings): one write per algorithm, at most once per heartbeat.
    async fn report_activity(&self) -> Result<(), StoreError> {
        let pending: Vec<(Algorithm, Timestamp)> = {
            let st = self.state();
            let seen = st.bindings.legacy_seen();
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
            record_activity(self.store.as_ref(), algorithm, self.on_database_clock(at)).await?;
            self.state().reported.insert(algorithm, at);
        }
        Ok(())
    }

    /// Reports the last activity and leaves the registry (nothing can act
    /// for the node any more).
    pub(super) async fn leave(&self) {
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
        let (info, _) = self.info(Instant::now());
        if let Err(e) = deregister(self.store.as_ref(), self.clock.as_ref(), &info).await {
            warn!(node = %self.id, error = %e, "could not deregister; the entry expires with its TTL");
        }
    }
}
