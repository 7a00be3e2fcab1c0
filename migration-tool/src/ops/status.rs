//! `migrate status`: the rollout at a glance, and whether the next stage is
//! safe — by the very guards `advance` applies ([`evaluate`]), on evidence
//! gathered the same way.

use std::collections::BTreeMap;

use lockshift_decide::census::{Tally, TombstoneHeavyRow, UnreadableRow};
use lockshift_decide::registry::LiveNode;
use lockshift_decide::remedy::UNREADABLE_ACTION;
use lockshift_decide::rollout::{Evidence, HistoryEntry};
use lockshift_lock::Algorithm;
use lockshift_rollout::rollout::evaluate;
use lockshift_store::{Timestamp, schema};
use serde::Serialize;

pub use super::status_views::{
    CensusRequestsView, ClockTolerance, ConnectionView, FleetRows, LegacyActivity, LockSummary,
    ModeCounts, NextVerdict, NodeRow, OldestWait, StageView, StaleSummary,
};
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
    /// The current stage; `null` when the fleet's rows could not be read
    /// (`fleet_rows` says why; every part read from them is then empty).
    pub stage: Option<StageView>,
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
    /// Whether the fleet's rows could be read, and why not: while the
    /// fleet home moves, or from the far side of a split, they are refused
    /// at once and the report says so beside the homes.
    pub fleet_rows: FleetRows,
    /// Each Cassandra node's clock against this client's and every pair
    /// judged against `clocks.node_skew_tolerance_ms` (docs/operating.md
    /// §12); `null` when the store lists no node (the embedded store).
    /// Two nodes surely beyond the tolerance are an UNSAFE warning.
    pub node_clocks: Option<super::node_clocks::NodeClocksReport>,
    /// The requests the census of the lock tables sent, by datacenter
    /// (docs/design.md §6a): `census: 312 requests — dc1 156, dc2 156`.
    pub census: CensusRequestsView,
}

/// Gathers the report; `progress` hears about the census pages.
///
/// The homes first, as each datacenter shows them: they say where the
/// fleet's rows live, whether they move and when the new home serves —
/// what the report has to show when those rows cannot be read. A read of
/// the fleet's rows refused without being sent (the fleet home moving,
/// out of reach or unconfirmed) fails at once, and the report says so
/// instead of failing: it never waits out a refusal whose end it knows.
///
/// # Errors
/// A store error, with what was being read.
pub async fn status(env: &Env, mut progress: impl FnMut(Progress)) -> anyhow::Result<StatusReport> {
    // A tool that reaches no datacenter's homes says so in the report.
    let homes = super::home::show(env).await;
    let rollout = env.rollout();
    // The very gatherer `advance` judges on (`Rollout::evidence`), so the
    // verdict printed here is the one a transition would reach.
    // The nodes' clocks are read meanwhile (within a deadline of their own).
    let tolerance = super::node_clocks::tolerance_of(&env.settings);
    let clocks = super::node_clocks::node_clocks(env.store.as_ref(), env.clock.as_ref(), tolerance);
    let evidence = rollout.evidence_with_progress(|table, done| {
        progress(Progress {
            phase: "scanning",
            table: Some(table),
            done,
            total: None,
        })
    });
    let (evidence, clocks) = tokio::join!(evidence, clocks);
    let mut report = match evidence {
        Ok(evidence) => match rollout.history().await {
            Ok(history) => build(env, evidence, history),
            Err(e) if !e.was_sent() => unread(env, &e),
            Err(e) => return Err(anyhow::Error::new(e).context("reading the rollout history")),
        },
        Err(e) if !e.error.was_sent() => unread(env, &e.error),
        Err(e) => return Err(e.into()),
    };
    match homes {
        Ok(homes) => {
            let named = report.nodes.iter().any(|n| n.info.datacenter.is_some());
            if !homes.rules.is_empty() || named {
                let valid_for = ms(env.settings.rollout.stage_valid_for);
                let nodes: Vec<super::home::Heard> = report
                    .nodes
                    .iter()
                    .map(|n| super::home::Heard {
                        column: n.info.column(),
                        // A heartbeat's `confirmed` says nothing once the
                        // view it reported could have lapsed.
                        fresh: n.heartbeat_age_ms < n.info.stage_valid_for_ms.unwrap_or(valid_for),
                        info: n.info.clone(),
                    })
                    .collect();
                report.datacenters = Some(super::home::by_datacenter(&nodes, homes));
            }
        }
        Err(e) => report.warnings.push(format!(
            "the homes could not be read from any datacenter: {e:#}"
        )),
    }
    add_node_clocks(&mut report, clocks);
    Ok(report)
}

/// `clocks` into `report`, when the store listed a node; two nodes surely
/// farther apart than the tolerance are an UNSAFE warning (exit 5): a
/// lease can end for its readers before its owner is told.
fn add_node_clocks(report: &mut StatusReport, clocks: super::node_clocks::NodeClocksReport) {
    if clocks.nodes.is_empty() {
        return;
    }
    for p in &clocks.beyond {
        report.warnings.push(format!(
            "UNSAFE: Cassandra nodes {} and {} are {} ± {} apart, beyond the {} the fleet's \
             leases tolerate: a lease can end for its readers before its owner is told; set the \
             nodes' clocks right (NTP; docs/operating.md §12)",
            p.a,
            p.b,
            lockshift_decide::offset::fmt_micros(p.spread.difference_us.unsigned_abs()),
            lockshift_decide::offset::fmt_micros(p.spread.error_us),
            crate::render::age(clocks.tolerance_ms)
        ));
        report.unsafe_state = true;
    }
    report.node_clocks = Some(clocks);
}

/// The report when the fleet's rows were refused with `error` (never
/// sent): nothing read from them, the refusal said, the homes beside it.
fn unread(env: &Env, error: &lockshift_store::StoreError) -> StatusReport {
    let stale = env.stale_after();
    StatusReport {
        version: JSON_VERSION,
        store: env.store.describe(),
        connection: (env.settings.store.backend == Some(lockshift_store::StoreBackend::Cql))
            .then(|| ConnectionView::of(&env.settings.store.cql)),
        now_us: env.clock.now().as_micros(),
        stage: None,
        history: Vec::new(),
        nodes: Vec::new(),
        unreadable_nodes: Vec::new(),
        unreadable_locks: Vec::new(),
        unreadable_action: None,
        tombstone_heavy_locks: Vec::new(),
        modes: ModeCounts::default(),
        locks: LockSummary::default(),
        stale: StaleSummary {
            threshold_ms: ms(stale.waiting),
            holding_threshold_ms: ms(stale.holding),
            ..StaleSummary::default()
        },
        legacy_activity: LegacyActivity {
            last_seen: None,
            recorded: None,
            cells_now: 0,
            quiet_period_ms: ms(env.settings.rollout.quiet_period),
        },
        next: None,
        warnings: vec![format!(
            "the fleet's rows (stage, history, registry, activity) cannot be read now, so the \
             stage, the processes, the locks and the verdict are not shown: {error}"
        )],
        unsafe_state: false,
        clocks: ClockTolerance::of(&env.settings),
        datacenters: None,
        fleet_rows: FleetRows {
            read: false,
            why: Some(error.message().to_string()),
            serves_in_ms: error.retry_after().map(ms),
        },
        node_clocks: None,
        census: CensusRequestsView::default(),
    }
}

/// The report from gathered evidence (pure).
pub fn build(env: &Env, evidence: Evidence, history: Vec<HistoryEntry>) -> StatusReport {
    let now = evidence.now;
    let current = &evidence.current;
    let (nodes, modes) = node_rows(env, &evidence);
    let tally = &evidence.census.tally;
    let locks = lock_summary(tally, now);
    let stale = stale_summary(env, tally);

    let legacy_activity = LegacyActivity {
        last_seen: evidence
            .last_seen(Algorithm::Legacy)
            .map(|t| At::new(t, now)),
        recorded: evidence
            .activity
            .get(&Algorithm::Legacy)
            .map(|t| At::new(*t, now)),
        cells_now: tally.legacy_activity,
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
        stage: Some(StageView {
            stage: current.stage,
            version: current.version,
            changed_at_us: current.changed_at,
            by: current.by.clone(),
            reason: current.reason.clone(),
        }),
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
        fleet_rows: FleetRows {
            read: true,
            why: None,
            serves_in_ms: None,
        },
        node_clocks: None,
        census: CensusRequestsView::of(&evidence.census),
    }
}

/// Each live process's row, and how many run in each mode.
fn node_rows(env: &Env, evidence: &Evidence) -> (Vec<NodeRow>, ModeCounts) {
    let now = evidence.now;
    // A heartbeat's age on the database's clock, by the process's reading
    // and this one's (a process minutes off that heartbeats is not silent).
    let reader = evidence.census.reader;
    let margin = env.settings.rollout.clock_skew_margin;
    let heartbeat_age = |n: &LiveNode| n.heartbeat_age(now, reader.as_ref(), margin);
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
                heartbeat_age_ms: ms(heartbeat_age(n).shown),
                ttl_left_ms: n.ttl_left.map(ms),
                silent: heartbeat_age(n).surely_over(env.settings.rollout.heartbeat_ttl),
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

    (nodes, modes)
}

/// What the census says of the locks: held, by whom, waited on.
fn lock_summary(tally: &Tally, now: Timestamp) -> LockSummary {
    let mut locks = LockSummary {
        held: tally.held,
        lease_over: tally.held_lease_over,
        waiting: tally.waiting,
        locks_with_waiters: tally.locks_with_waiters,
        ..LockSummary::default()
    };
    for (algorithm, count) in &tally.held_by {
        let by = algorithm.map_or("foreign".to_string(), |a| a.to_string());
        *locks.held_by.entry(by).or_default() += count;
    }
    locks.oldest_wait = tally.oldest_waiter.as_ref().and_then(|c| {
        let queued_at = Timestamp::from_micros(i64::try_from(c.queued_at?).ok()?);
        Some(OldestWait {
            lock: c.lock.clone(),
            owner: c.owner.owner.clone(),
            waiting_ms: ms(now.duration_since(queued_at)),
        })
    });
    locks
}

/// The stale cells the census found, and the thresholds it used.
fn stale_summary(env: &Env, tally: &Tally) -> StaleSummary {
    let mut stale = StaleSummary {
        threshold_ms: ms(env.stale_after().waiting),
        holding_threshold_ms: ms(env.stale_after().holding),
        cells: tally.stale,
        locks: tally.stale_locks,
        ..StaleSummary::default()
    };
    for (table, count) in &tally.stale_by_table {
        *stale.by_table.entry(table.to_string()).or_default() += count;
    }
    stale
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
    let held_by =
        |a: Option<Algorithm>| evidence.census.tally.held_by.get(&a).copied().unwrap_or(0);
    let held_legacy = held_by(Some(Algorithm::Legacy));
    let held_foreign = held_by(None);
    let held_queue = held_by(Some(Algorithm::Queue));
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
    for (lock, holders) in &evidence.census.tally.crowded.first {
        out.push(format!(
            "lock {lock} has {holders} cells in main (contenders entering, or stale cells: \
             `migrate inspect {lock}`)"
        ));
    }
    let crowded = &evidence.census.tally.crowded;
    if crowded.count > crowded.first.len() {
        out.push(format!(
            "…and {} more lock(s) with more holdings in main than their kind allows",
            crowded.count - crowded.first.len()
        ));
    }
    if evidence.current.stage == lockshift_decide::algorithm::Stage::Complete
        && evidence
            .census
            .tally
            .by_table
            .get(&schema::SHADOW)
            .is_some_and(|&n| n > 0)
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
