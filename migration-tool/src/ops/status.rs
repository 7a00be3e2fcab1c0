//! `migrate status`: the rollout at a glance, and whether the next stage is
//! safe — by the very guards `advance` applies ([`evaluate`]), on evidence
//! gathered the same way.

use std::collections::BTreeMap;

use anyhow::Context;
use lockshift_decide::algorithm::Stage;
use lockshift_decide::census::{TombstoneHeavyRow, UnreadableRow};
use lockshift_decide::registry::NodeInfo;
use lockshift_decide::remedy::UNREADABLE_ACTION;
use lockshift_decide::rollout::{Evidence, Guard, HistoryEntry};
use lockshift_lock::Algorithm;
use lockshift_rollout::rollout::evaluate;
use lockshift_store::{Timestamp, schema};
use serde::Serialize;

use super::{At, Env, Progress, ms};
use crate::JSON_VERSION;

/// The report of `migrate status` (its JSON schema, `"version": 1`).
#[derive(Debug, Clone, Serialize)]
pub struct StatusReport {
    /// Schema version, 1.
    pub version: u32,
    /// The store, e.g. `cql 127.0.0.1:9042/lockshift (QUORUM)`.
    pub store: String,
    /// How the connection to the cluster is protected (`null` when the
    /// store is not a CQL connection). Never holds a secret.
    pub connection: Option<ConnectionView>,
    /// When the report was made (µs since the epoch).
    pub now_us: i64,
    /// The current stage.
    pub stage: StageView,
    /// Every transition and refusal, oldest first.
    pub history: Vec<HistoryEntry>,
    /// Live nodes (registry), by node id.
    pub nodes: Vec<NodeRow>,
    /// Registry entries that do not decode (node ids).
    pub unreadable_nodes: Vec<String>,
    /// Lock rows the database refuses to read (too many tombstones): each
    /// with its table, lock (`null` when a key scan was refused and could
    /// not say whose row) and reason. The rest of the report holds without
    /// them; the guards that read lock cells refuse until they can be read.
    pub unreadable_locks: Vec<UnreadableRow>,
    /// What to do about `unreadable_locks` (`null` when there are none).
    pub unreadable_action: Option<String>,
    /// Lock rows whose read passed more tombstones than Cassandra's
    /// warning threshold (1 000): each with its table, lock and count.
    /// Readable now; `warnings` says why they grow and what to do.
    pub tombstone_heavy_locks: Vec<TombstoneHeavyRow>,
    /// Live nodes counted by configured mode and by effective algorithm.
    pub modes: ModeCounts,
    /// Held and waited-for locks.
    pub locks: LockSummary,
    /// Cells not renewed for longer than the stale threshold.
    pub stale: StaleSummary,
    /// Evidence of the legacy lock in use.
    pub legacy_activity: LegacyActivity,
    /// The verdict on the next stage; `null` at `complete`.
    pub next: Option<NextVerdict>,
    /// Conditions an operator must look at now (e.g. legacy and queue
    /// holders at once).
    pub warnings: Vec<String>,
    /// Whether a warning is an UNSAFE one: exclusion is not guaranteed now
    /// (`migrate status` then exits 5).
    pub unsafe_state: bool,
    /// How far apart the Cassandra nodes' clocks may be with the fleet's
    /// lease settings (docs/operating.md §12).
    pub clocks: ClockTolerance,
    /// The datacenters: every home as they show it, the processes by
    /// datacenter and whether each reaches each home (docs/design.md §4a);
    /// `None` on a cluster without homes whose processes name no
    /// datacenter.
    pub datacenters: Option<super::home::DatacentersView>,
}

/// How far apart the clocks of two Cassandra nodes may be before a cell can
/// expire, as a reading coordinator sees it, before its owner is told
/// (lock invariant L3): each cell's TTL − 1 s − the time after which its
/// owner counts it lost. Settings validation refuses less than 250 ms.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct ClockTolerance {
    /// The smaller of the two: what the fleet's node clocks must keep to.
    pub node_skew_tolerance_ms: u64,
    /// Holders' cells (`lock.lease_ttl`).
    pub holders_ms: u64,
    /// Waiters' cells (`lock.queue.waiting_ttl`).
    pub waiters_ms: u64,
}

impl ClockTolerance {
    /// The tolerance of `settings`' leases.
    pub fn of(settings: &lockshift::Settings) -> ClockTolerance {
        let lease = settings.lock.lease();
        let holders = ms(lease.node_skew_tolerance());
        let waiters = ms(settings.lock.queue.waiting_node_skew_tolerance(&lease));
        ClockTolerance {
            node_skew_tolerance_ms: holders.min(waiters),
            holders_ms: holders,
            waiters_ms: waiters,
        }
    }
}

/// How `migrate` is connected: encryption and authentication, never the
/// password.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ConnectionView {
    /// TLS to the nodes (`store.cql.tls.ca_file` given).
    pub encrypted: bool,
    /// The nodes' certificates are checked against their addresses
    /// (`false` with TLS: `store.cql.tls.verify_hostname = false`, unsafe).
    pub hostname_verified: bool,
    /// A client certificate is presented.
    pub client_certificate: bool,
    /// Password authentication is used.
    pub authenticated: bool,
    /// The user name, when authenticated.
    pub user: Option<String>,
}

impl ConnectionView {
    /// The view of `cql`'s settings.
    pub fn of(cql: &lockshift_store::CqlSettings) -> ConnectionView {
        let security = cql.security();
        ConnectionView {
            encrypted: security.encrypted,
            hostname_verified: security.hostname_verified,
            client_certificate: security.client_certificate,
            authenticated: security.authenticated,
            user: cql.username.clone(),
        }
    }
}

/// The stage record.
#[derive(Debug, Clone, Serialize)]
pub struct StageView {
    /// `legacy`, `dual`, `queue` or `complete`.
    pub stage: Stage,
    /// Increases with every transition; 0 before the first.
    pub version: u64,
    /// When it was set (µs; 0 before the first transition).
    pub changed_at_us: i64,
    /// Who set it.
    pub by: String,
    /// Why.
    pub reason: String,
}

/// One live node process: what it says of itself at every heartbeat
/// ([`NodeInfo`]) and what `status` derives from its registry row.
///
/// The row's JSON is [`NodeInfo`]'s keys and the four derived ones side by
/// side (`info` is flattened), with two differences from the registry
/// record: `acting_version` is [`NodeInfo::acting`], what the guards
/// compare ([`build`] sets it), and the registry's own bookkeeping —
/// `started_at`, `last_used` and `lease` — is left out, as it was when the
/// row copied its fields (no key is added to `"version": 1`).
#[derive(Debug, Clone, Serialize)]
pub struct NodeRow {
    /// What the node said at its last heartbeat; `acting_version` is
    /// [`NodeInfo::acting`] (its seen version when it reports none).
    #[serde(flatten, serialize_with = "shown")]
    pub info: NodeInfo,
    /// Live processes under this node id, this one included: more than one
    /// means two processes share a `node.id` (each is counted).
    pub processes_under_id: usize,
    /// Time since its last heartbeat.
    pub heartbeat_age_ms: u64,
    /// Time before it drops out of the registry.
    pub ttl_left_ms: Option<u64>,
    /// No heartbeat for longer than `rollout.heartbeat_ttl`: the guards
    /// still count it, as last reported, until its row expires.
    pub silent: bool,
}

/// The [`NodeInfo`] keys a [`NodeRow`] leaves out of its JSON: when the
/// node started, when it last used each algorithm and its lease promise,
/// which `status` never showed.
const HIDDEN: [&str; 3] = ["started_at", "last_used", "lease"];

/// Serializes `info` as a [`NodeRow`]'s flattened keys: [`NodeInfo`]'s
/// own serialization, without [`HIDDEN`].
///
/// Through a JSON object rather than a view struct, so that the row does
/// not list `NodeInfo`'s fields a second time. The reports are only ever
/// written as JSON, and a JSON number keeps its exact `u64`/`i64` value.
fn shown<S: serde::Serializer>(info: &NodeInfo, serializer: S) -> Result<S::Ok, S::Error> {
    use serde::ser::Error as _;
    match serde_json::to_value(info).map_err(S::Error::custom)? {
        serde_json::Value::Object(mut keys) => {
            for key in HIDDEN {
                keys.remove(key);
            }
            keys.serialize(serializer)
        }
        // Not reached: `NodeInfo` is a struct with named fields, which
        // serde_json always writes as an object.
        other => Err(S::Error::custom(format!(
            "a node's registry record is not a JSON object: {other}"
        ))),
    }
}

/// Nodes per mode.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ModeCounts {
    /// By configured mode.
    pub configured: BTreeMap<String, usize>,
    /// By effective algorithm.
    pub effective: BTreeMap<String, usize>,
}

/// Held and waited-for locks.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LockSummary {
    /// Live cells in `main` (a lock normally has one holder).
    pub held: usize,
    /// Of those, cells whose lease is over by their owner's own promise
    /// (a late write, docs/design.md §5 L5): nobody holds through them,
    /// they keep others waiting until they expire; `migrate inspect` marks
    /// them and `migrate clean` deletes them.
    pub lease_over: usize,
    /// Holders by algorithm (`foreign`: written by a binary that predates
    /// lockshift).
    pub held_by: BTreeMap<String, usize>,
    /// Waiters: live queue cells after the head.
    pub waiting: usize,
    /// Locks with at least one waiter.
    pub locks_with_waiters: usize,
    /// The waiter that has waited longest.
    pub oldest_wait: Option<OldestWait>,
}

/// The longest-waiting waiter.
#[derive(Debug, Clone, Serialize)]
pub struct OldestWait {
    /// The lock.
    pub lock: String,
    /// The waiter.
    pub owner: String,
    /// Since it joined the queue (from its queue cell's time prefix).
    pub waiting_ms: u64,
}

/// Stale cells.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StaleSummary {
    /// The threshold for waiters' cells (queue cells, reservations): not
    /// rewritten for longer than this (`lock.queue.stale_after`).
    pub threshold_ms: u64,
    /// The threshold for holdings: not renewed for longer than this (three
    /// `lock.renew_every` periods).
    pub holding_threshold_ms: u64,
    /// Stale cells in all.
    pub cells: usize,
    /// Distinct locks with a stale cell.
    pub locks: usize,
    /// Per table (`main`, `shadow`, `queue`).
    pub by_table: BTreeMap<String, usize>,
}

/// Evidence of legacy use.
#[derive(Debug, Clone, Serialize)]
pub struct LegacyActivity {
    /// The last sign of it: recorded by a node, or cells present now.
    pub last_seen: Option<At>,
    /// What nodes recorded (their own legacy acquisitions).
    pub recorded: Option<At>,
    /// Cells in main/shadow now that are legacy activity (legacy mode, or
    /// not written by lockshift).
    pub cells_now: usize,
    /// How long it must be quiet before `dual` (and `queue`, `complete`).
    pub quiet_period_ms: u64,
}

/// "Safe to advance to X: yes / no, because …".
#[derive(Debug, Clone, Serialize)]
pub struct NextVerdict {
    /// The current stage.
    pub from: Stage,
    /// The next stage.
    pub to: Stage,
    /// Whether every guard holds.
    pub safe: bool,
    /// Every guard: name, passed, detail, what to do.
    pub guards: Vec<Guard>,
    /// The failing guards' details.
    pub because: Vec<String>,
    /// What to do about the failing guards, each once.
    pub actions: Vec<String>,
    /// What the guards cannot know, said with a "yes" as with a "no"
    /// (e.g. no node is registered).
    pub caveats: Vec<String>,
}

/// Gathers the report; `progress` hears about the census pages.
///
/// # Errors
/// A store error, with what was being read.
pub async fn status(env: &Env, mut progress: impl FnMut(Progress)) -> anyhow::Result<StatusReport> {
    let rollout = env.rollout();
    // The very gatherer `advance` judges on (`Rollout::evidence`), so the
    // verdict printed here is the one a transition would reach.
    let evidence = rollout
        .evidence_with_progress(|table, done| {
            progress(Progress {
                phase: "scanning",
                table: Some(table),
                done,
                total: None,
            })
        })
        .await?;
    let history = rollout
        .history()
        .await
        .context("reading the rollout history")?;
    // Where the homes are, as each datacenter shows them; a tool that
    // reaches none of them says so in the report, not as a failure.
    let homes = super::home::show(env).await;
    let mut report = build(env, evidence, history);
    match homes {
        Ok(homes) => {
            let named = report.nodes.iter().any(|n| n.info.datacenter.is_some());
            if !homes.rules.is_empty() || named {
                let (infos, columns): (Vec<_>, Vec<_>) = report
                    .nodes
                    .iter()
                    .map(|n| (n.info.clone(), n.info.column()))
                    .unzip();
                report.datacenters = Some(super::home::by_datacenter(&infos, &columns, homes));
            }
        }
        Err(e) => report.warnings.push(format!(
            "the homes could not be read from any datacenter: {e:#}"
        )),
    }
    Ok(report)
}

/// The report from gathered evidence (pure).
pub fn build(env: &Env, evidence: Evidence, history: Vec<HistoryEntry>) -> StatusReport {
    let now = evidence.now;
    let current = &evidence.current;
    let nodes: Vec<NodeRow> = evidence
        .nodes
        .iter()
        .map(|n| {
            let mut info = n.info.clone();
            // The row shows the version the guards compare, not the raw
            // field: from a node that predates `acting_version`, the one
            // it has seen.
            info.acting_version = info.acting();
            NodeRow {
                info,
                processes_under_id: evidence
                    .nodes
                    .iter()
                    .filter(|m| m.info.node == n.info.node)
                    .count(),
                heartbeat_age_ms: ms(now.duration_since(n.heartbeat_at)),
                ttl_left_ms: n.ttl_left.map(ms),
                silent: now.duration_since(n.heartbeat_at) > env.settings.rollout.heartbeat_ttl,
            }
        })
        .collect();
    let mut modes = ModeCounts::default();
    for n in &nodes {
        *modes
            .configured
            .entry(n.info.configured_mode.to_string())
            .or_default() += 1;
        *modes
            .effective
            .entry(n.info.effective.to_string())
            .or_default() += 1;
    }

    let census = &evidence.census;
    let mut locks = LockSummary::default();
    for c in census.held() {
        locks.held += 1;
        locks.lease_over += usize::from(c.lease_over);
        let by = c
            .owner
            .algorithm
            .map_or("foreign".to_string(), |a| a.to_string());
        *locks.held_by.entry(by).or_default() += 1;
    }
    let waiting = census.waiting();
    locks.waiting = waiting.len();
    let mut with_waiters: Vec<&str> = waiting.iter().map(|c| c.lock.as_str()).collect();
    with_waiters.sort_unstable();
    with_waiters.dedup();
    locks.locks_with_waiters = with_waiters.len();
    locks.oldest_wait = waiting
        .iter()
        .filter_map(|c| {
            let queued_at = Timestamp::from_micros(i64::try_from(c.queued_at?).ok()?);
            Some(OldestWait {
                lock: c.lock.clone(),
                owner: c.owner.owner.clone(),
                waiting_ms: ms(now.duration_since(queued_at)),
            })
        })
        .max_by_key(|w| w.waiting_ms);

    let mut stale = StaleSummary {
        threshold_ms: ms(env.stale_after().waiting),
        holding_threshold_ms: ms(env.stale_after().holding),
        ..StaleSummary::default()
    };
    let mut stale_locks: Vec<&str> = Vec::new();
    for c in census.stale() {
        stale.cells += 1;
        *stale.by_table.entry(c.table.to_string()).or_default() += 1;
        stale_locks.push(&c.lock);
    }
    stale_locks.sort_unstable();
    stale_locks.dedup();
    stale.locks = stale_locks.len();

    let legacy_activity = LegacyActivity {
        last_seen: evidence
            .last_seen(Algorithm::Legacy)
            .map(|t| At::new(t, now)),
        recorded: evidence
            .activity
            .get(&Algorithm::Legacy)
            .map(|t| At::new(*t, now)),
        cells_now: census.legacy_activity().count(),
        quiet_period_ms: ms(env.settings.rollout.quiet_period),
    };

    let next = current.stage.next().map(|to| {
        let verdict = evaluate(&evidence, to, &env.settings.rollout);
        NextVerdict {
            from: verdict.from,
            to: verdict.to,
            safe: verdict.is_safe(),
            because: verdict.failures(),
            actions: verdict.actions(),
            caveats: verdict.caveats.clone(),
            guards: verdict.guards,
        }
    });

    let warnings = warnings(&evidence);
    let unsafe_state = warnings.iter().any(|w| w.starts_with("UNSAFE"));
    StatusReport {
        version: JSON_VERSION,
        store: env.store.describe(),
        connection: (env.settings.store.backend == Some(lockshift_store::StoreBackend::Cql))
            .then(|| ConnectionView::of(&env.settings.store.cql)),
        now_us: now.as_micros(),
        stage: StageView {
            stage: current.stage,
            version: current.version,
            changed_at_us: current.changed_at,
            by: current.by.clone(),
            reason: current.reason.clone(),
        },
        history,
        nodes,
        unreadable_nodes: evidence.unreadable_nodes.clone(),
        unreadable_locks: evidence.census.unreadable.clone(),
        unreadable_action: (!evidence.census.unreadable.is_empty())
            .then(|| UNREADABLE_ACTION.to_string()),
        tombstone_heavy_locks: evidence.census.tombstone_heavy.clone(),
        modes,
        locks,
        stale,
        legacy_activity,
        next,
        warnings,
        unsafe_state,
        clocks: ClockTolerance::of(&env.settings),
        datacenters: None,
    }
}

/// Conditions the safety table forbids or the stage does not expect.
fn warnings(evidence: &Evidence) -> Vec<String> {
    let mut out = Vec::new();
    let stage = evidence.current.stage;
    let runs = |a: Algorithm| evidence.nodes.iter().any(|n| n.info.effective == a);
    if runs(Algorithm::Legacy) && runs(Algorithm::Queue) {
        out.push(
            "UNSAFE: live nodes run legacy and queue at the same time; exclusion is not \
             guaranteed between them (docs/design.md §3)"
                .to_string(),
        );
    }
    // Every holding that is not lockshift's own counts as legacy: a binary
    // that predates lockshift runs the legacy algorithm, whatever its cell
    // looks like (docs/design.md §4, "The quiet period").
    let held_legacy = evidence.census.held_by(Algorithm::Legacy).count();
    let held_foreign = evidence
        .census
        .held()
        .filter(|c| c.owner.algorithm.is_none())
        .count();
    let held_queue = evidence.census.held_by(Algorithm::Queue).count();
    if held_legacy + held_foreign > 0 && held_queue > 0 {
        let legacy = match (held_legacy, held_foreign) {
            (0, f) => format!("{f} by binaries that predate lockshift (legacy)"),
            (l, 0) => format!("{l} by legacy"),
            (l, f) => format!("{l} by legacy and {f} by binaries that predate lockshift"),
        };
        out.push(format!(
            "UNSAFE: lock cells held {legacy} and {held_queue} by queue holders at once; \
             exclusion between them is not guaranteed (docs/operating.md §5)"
        ));
    }
    for n in &evidence.nodes {
        if !stage.allows(n.info.effective) && n.info.effective != Algorithm::Combined {
            out.push(format!(
                "node {} runs {} which stage {stage} does not allow (it has not re-read the stage yet?)",
                n.info.node, n.info.effective
            ));
        }
    }
    let mut per_id: BTreeMap<&str, usize> = BTreeMap::new();
    for n in &evidence.nodes {
        *per_id.entry(n.info.node.as_str()).or_default() += 1;
    }
    for (node, processes) in per_id.into_iter().filter(|(_, p)| *p > 1) {
        out.push(format!(
            "node id {node} is used by {processes} live processes: the guards count each, but \
             give every process its own node.id (docs/operating.md §0)"
        ));
    }
    let mut per_lock: BTreeMap<&str, usize> = BTreeMap::new();
    for c in evidence.census.held() {
        *per_lock.entry(c.lock.as_str()).or_default() += 1;
    }
    for (lock, holders) in per_lock {
        if holders > 1 {
            out.push(format!(
                "lock {lock} has {holders} cells in main (contenders entering, or stale cells: \
                 `migrate inspect {lock}`)"
            ));
        }
    }
    if evidence.current.stage == Stage::Complete
        && evidence.census.in_table(schema::SHADOW).count() > 0
    {
        out.push("stage is complete but shadow cells exist (legacy or combined activity)".into());
    }
    for row in &evidence.census.tombstone_heavy {
        out.push(format!(
            "{}: Cassandra warns above {} and refuses the read above {}. A lock row keeps \
             about one tombstone per process that took the lock within the table's \
             gc_grace_seconds (10 minutes): take it from fewer, longer-lived processes \
             (docs/operating.md §11)",
            row.describe(),
            lockshift_store::tombstones::DEFAULT_WARN_THRESHOLD,
            lockshift_store::tombstones::DEFAULT_FAILURE_THRESHOLD
        ));
    }
    out
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
