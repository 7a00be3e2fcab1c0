//! Moving a home: planned, through the current home, or forced without it
//! (docs/design.md §4a, H3 and H4). The guards are
//! `lockshift_decide::home::move_refusals`; this module reads what they
//! judge and writes the move.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use lockshift_decide::algorithm::Algorithm;
use lockshift_decide::home::{
    HOMES_ROW, HomeRecord, MoveAsk, MovePlan, MoveScene, Rule, move_refusals,
};
use lockshift_decide::registry::{NodeInfo, REGISTRY_ROW};
use lockshift_decide::rollout::ROLLOUT_LOCK;
use lockshift_lock::{
    AcquireOptions, Binding, LeaseSettings, LockContext, LockGuard, LockId, NodeId,
};
use lockshift_queue_lock::{QueueSettings, TimeSettings, TimeSourceKind};
use lockshift_store::homes::records;
use lockshift_store::{
    Cell, CellWrite, Clock, Datacenter, Route, RowQuery, SharedClock, SharedStore, Timestamp,
    WriteOptions, schema,
};
use tracing::{info, warn};

use crate::error::RolloutError;
use crate::registry::record_activity_via;
use crate::settings::RolloutSettings;
use crate::{LockerSettings, Lockers};

/// How long after a move is written its new home starts serving (H3):
/// until every view of the old home has expired — a view confirmed by a
/// read sent just before the move lasts `stage_valid_for`, and a process
/// that lost its view stops renewing, so its holders are told within a
/// lease TTL — and, for the fleet home, until every registry row written
/// under the old home has expired (R5: `stage_valid_for + lease_ttl` after
/// its last heartbeat, which itself was sent before the view expired);
/// plus the clock skew margin and a second for whole-second TTLs. So
/// `2 × stage_valid_for + lease TTL + clock_skew_margin + 1 s`, each the
/// longest of this process's settings and what every registered process
/// says of its own (`others`: each one's lease TTL and `stage_valid_for`,
/// when it said).
pub fn move_wait(
    rollout: &RolloutSettings,
    lease_ttl: Duration,
    others: impl IntoIterator<Item = (Option<Duration>, Option<Duration>)>,
) -> Duration {
    let (ttl, valid_for) = others.into_iter().fold(
        (lease_ttl, rollout.stage_valid_for),
        |(ttl, valid), (t, v)| (ttl.max(t.unwrap_or(ttl)), valid.max(v.unwrap_or(valid))),
    );
    valid_for
        .saturating_mul(2)
        .saturating_add(ttl)
        .saturating_add(rollout.clock_skew_margin)
        .saturating_add(Duration::from_secs(1))
}

/// A move asked of [`move_home`].
#[derive(Clone, Debug)]
pub struct MoveRequest {
    /// Which rule, where to, forced or not.
    pub ask: MoveAsk,
    /// Judge and report, write nothing.
    pub dry_run: bool,
    /// Who asks (recorded in the move).
    pub by: String,
}

/// What [`move_home`] found and did.
#[derive(Clone, Debug)]
pub struct MoveReport {
    /// The rule.
    pub rule: Rule,
    /// The record the move replaces (or takes its locks from), if one.
    pub plan: Option<MovePlan>,
    /// Why the move may not be made now; empty when it may.
    pub refusals: Vec<String>,
    /// The record written, or that would be.
    pub record: Option<HomeRecord>,
    /// Whether it was written.
    pub applied: bool,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// Where it was written, in order, with each write's error.
    pub written: Vec<(Datacenter, Option<String>)>,
    /// How long after the move the new home serves.
    pub wait: Duration,
    /// The datacenters that did not answer, with why.
    pub unreachable: Vec<(Datacenter, String)>,
}

/// Judges and — unless refused or a dry run — makes a move of a rule's
/// home (H3, H4).
///
/// It reads the homes row and the registry from every datacenter (each at
/// `LOCAL_QUORUM` there), judges with
/// `lockshift_decide::home::move_refusals`, and writes the new record:
/// a planned move first through the current home (it must land there) and
/// then to the new home and every other reachable datacenter; a forced
/// move first to the new home. A planned move holds the rollout lock
/// while it reads and writes, so two operators' moves cannot both land
/// (a forced one cannot: the fleet home may be the one that is gone).
/// A move of the default rule also moves the fleet's rows: it records
/// legacy and queue activity at the new home until the new home serves
/// plus a stage view's life, so no rollout guard counts a quiet period
/// across the move (what the old home recorded last may not have reached
/// the new one).
///
/// # Errors
/// The rollout lock, or the first write, failed.
pub async fn move_home(
    store: &SharedStore,
    clock: &SharedClock,
    settings: &RolloutSettings,
    lease: &LeaseSettings,
    request: MoveRequest,
) -> Result<MoveReport, RolloutError> {
    // Judged first without the rollout lock: a move that cannot be made
    // (the current home lost, say, and with it the rollout lock) is
    // refused at once. One that can is judged again under the lock.
    let judged = judge_and_write(store, clock.as_ref(), settings, lease, &request, false).await?;
    if !judged.refusals.is_empty() || request.dry_run {
        return Ok(judged);
    }
    if request.ask.force {
        return judge_and_write(store, clock.as_ref(), settings, lease, &request, true).await;
    }
    let guard = rollout_lock(store, clock, lease, &request.by).await?;
    let result = judge_and_write(store, clock.as_ref(), settings, lease, &request, true).await;
    if let Err(e) = guard.release().await {
        warn!(error = %e, "rollout lock release failed; it expires with its TTL");
    }
    result
}

async fn judge_and_write(
    store: &SharedStore,
    clock: &dyn Clock,
    settings: &RolloutSettings,
    lease: &LeaseSettings,
    request: &MoveRequest,
    write: bool,
) -> Result<MoveReport, RolloutError> {
    let datacenters = store.topology().datacenters;
    let mut scene = MoveScene {
        datacenters: datacenters.clone(),
        read: BTreeMap::new(),
        now: clock.now(),
    };
    let mut unreachable = Vec::new();
    let mut stamp = Timestamp::from_micros(0);
    let mut others = Vec::new();
    let mut unreadable = Vec::new();
    let mut beyond = Vec::new();
    // The newest cell of every other rule the move covers, to copy to the
    // new home before the move lands (H5).
    let mut nested: BTreeMap<Rule, (u64, Cell)> = BTreeMap::new();
    for dc in &datacenters {
        let route = Route::Datacenter(dc.clone());
        let homes = read_patiently(store, &route, schema::ROLLOUT, HOMES_ROW).await;
        let registry = read_patiently(store, &route, schema::NODES, REGISTRY_ROW).await;
        match (homes, registry) {
            (Ok(cells), Ok(nodes)) => {
                if let Some(cell) = cells.iter().find(|c| c.column == request.ask.rule.key()) {
                    stamp = stamp.max(cell.writetime);
                }
                let (read, bad) = records(dc, cells.clone());
                unreadable.extend(bad);
                for (rule, record) in &read {
                    if !nests_in(rule, &request.ask.rule) {
                        continue;
                    }
                    let Some(cell) = cells.iter().find(|c| c.column == rule.key()) else {
                        continue;
                    };
                    let newer = nested.get(rule).is_none_or(|(version, kept)| {
                        (record.version, cell.writetime) > (*version, kept.writetime)
                    });
                    if newer {
                        nested.insert(rule.clone(), (record.version, cell.clone()));
                    }
                }
                scene.read.insert(dc.clone(), read);
                for (column, info) in nodes.iter().filter_map(|c| {
                    serde_json::from_slice::<NodeInfo>(&c.value)
                        .ok()
                        .map(|info| (&c.column, info))
                }) {
                    let said = (
                        info.lease.map(|p| p.ttl()),
                        info.stage_valid_for_ms.map(Duration::from_millis),
                    );
                    if let Some(refusal) = beyond_ceiling(column, said) {
                        beyond.push(refusal);
                    }
                    others.push(said);
                }
            }
            (Err(e), _) | (_, Err(e)) => unreachable.push((dc.clone(), e.to_string())),
        }
    }
    let (plan, mut refusals) = move_refusals(&request.ask, &scene);
    beyond.sort();
    beyond.dedup();
    refusals.extend(beyond);
    refusals.extend(unreadable.iter().map(|cell| {
        format!(
            "the homes record {:?} in {} does not decode ({}): fix or remove that cell first",
            cell.column, cell.datacenter, cell.error
        )
    }));
    let wait = move_wait(settings, lease.lease_ttl, others);
    let now = clock.now();
    let record = plan.as_ref().map(|plan| moved(request, plan, now, wait));
    let mut report = MoveReport {
        rule: request.ask.rule.clone(),
        plan: plan.clone(),
        refusals,
        record: record.clone(),
        applied: false,
        dry_run: request.dry_run,
        written: Vec::new(),
        wait,
        unreachable,
    };
    let (Some(plan), Some(record)) = (plan, record) else {
        return Ok(report);
    };
    if !report.refusals.is_empty() || request.dry_run || !write {
        return Ok(report);
    }
    // First where the move must land: the current home (planned, H3), or
    // the new one (forced, H4). Then everywhere else that answered.
    let first = if request.ask.force {
        request.ask.to.clone()
    } else {
        plan.from.datacenter.clone()
    };
    let mut order = vec![first.clone()];
    order.extend(scene.read.keys().filter(|dc| **dc != first).cloned());
    // The new home shows every rule the moved one covers before it shows
    // the move: a process that confirms the move there learns of them in
    // the same read (H5). Each cell is copied as it was, at its own
    // stamp, so a copy never overrides a newer record.
    let to = Route::Datacenter(request.ask.to.clone());
    for (_, cell) in nested.values() {
        write_patiently(
            store,
            &to,
            &cell.column,
            &cell.value,
            WriteOptions::at(cell.writetime),
        )
        .await
        .map_err(RolloutError::Store)?;
    }
    // Above every stamp the rule's cell had, whatever this clock says.
    let mut stamp = now.max(stamp.offset_micros(1));
    let mut record = record;
    let key = request.ask.rule.key();
    // tokio's clock: paused in simulations, as the decisions take it.
    let sent = tokio::time::Instant::now();
    write_record(store, &first, &key, &record, stamp)
        .await
        .map_err(RolloutError::Store)?;
    let took = sent.elapsed();
    if took > super::upkeep::ACK_SLACK {
        // Acknowledged late: a view confirmed by a read sent just before
        // it landed lasts until `took` after the record's time. Stamped
        // again, later, before any other datacenter shows it.
        warn!(rule = %request.ask.rule, took = ?took, "the move was acknowledged late; stamping it again");
        record = moved(request, &plan, clock.now(), wait.saturating_add(took));
        stamp = clock.now().max(stamp.offset_micros(1));
        write_record(store, &first, &key, &record, stamp)
            .await
            .map_err(RolloutError::Store)?;
        report.record = Some(record.clone());
    }
    report.written.push((first.clone(), None));
    for dc in order.into_iter().skip(1) {
        let result = write_record(store, &dc, &key, &record, stamp).await;
        report
            .written
            .push((dc, result.err().map(|e| e.to_string())));
    }
    report.applied = true;
    info!(rule = %request.ask.rule, from = %plan.from.datacenter, to = %request.ask.to,
        version = record.version, forced = request.ask.force, "home moved");
    if request.ask.rule == Rule::Default {
        // The fleet's rows move too: no quiet period counts across it.
        let until =
            Timestamp::from_micros(record.serves_from).saturating_add(settings.stage_valid_for);
        let route = Route::Datacenter(request.ask.to.clone());
        for algorithm in [Algorithm::Legacy, Algorithm::Queue] {
            let mut attempt = 1;
            loop {
                match record_activity_via(store.as_ref(), &route, algorithm, until).await {
                    Err(e) if e.is_retryable() && attempt < READ_ATTEMPTS => {
                        attempt += 1;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(e) => {
                        return Err(RolloutError::Internal(format!(
                            "the move is recorded, but recording {algorithm} activity at {} \
                             failed ({e}): hold every rollout transition for \
                             rollout.quiet_period after the new home serves",
                            request.ask.to
                        )));
                    }
                    Ok(()) => break,
                }
            }
        }
    }
    Ok(report)
}

/// The longest lease TTL or `stage_valid_for` a registered process may
/// say of itself before a move refuses to wait for it: a move waits for
/// the longest any says (H3), and a value past this — a typo, a corrupt
/// row — would leave the rule "moving" for that long.
pub const REGISTERED_CEILING: Duration = Duration::from_secs(24 * 3600);

/// Why a move will not wait on what the registry row `column` says of its
/// process (its lease TTL, its `stage_valid_for`), if either is past
/// [`REGISTERED_CEILING`].
pub(super) fn beyond_ceiling(
    column: &str,
    (ttl, valid_for): (Option<Duration>, Option<Duration>),
) -> Option<String> {
    let (what, value) = [
        ("lock.lease_ttl", ttl),
        ("rollout.stage_valid_for", valid_for),
    ]
    .into_iter()
    .find_map(|(what, v)| v.filter(|v| *v > REGISTERED_CEILING).map(|v| (what, v)))?;
    Some(format!(
        "registered process {} says its {what} is {}, past the {} a move waits for: \
         fix that process's settings (or stop it and let its row expire), then move",
        lockshift_decide::id::cut_short(column),
        lockshift_decide::duration::fmt_duration_rounded(value),
        lockshift_decide::duration::fmt_duration_rounded(REGISTERED_CEILING),
    ))
}

/// The record a move of `request` after `plan` writes at `now`, serving
/// `wait` later.
fn moved(request: &MoveRequest, plan: &MovePlan, now: Timestamp, wait: Duration) -> HomeRecord {
    HomeRecord {
        version: plan.version,
        datacenter: request.ask.to.clone(),
        serves_from: now.saturating_add(wait).as_micros(),
        moved_from: Some(plan.from.datacenter.clone()),
        forced: request.ask.force,
        at: now.as_micros(),
        by: request.by.clone(),
    }
}

/// Whether `rule` is covered by `moved` and longer: its locks, but decided
/// by it (a rule the move must bring to the new home).
fn nests_in(rule: &Rule, moved: &Rule) -> bool {
    match (rule, moved) {
        (Rule::Default, _) => false,
        (Rule::Prefix(_), Rule::Default) => true,
        (Rule::Prefix(p), Rule::Prefix(m)) => p.len() > m.len() && p.starts_with(m.as_str()),
    }
}

/// Writes `record` to `column` of the homes row in `dc` at `stamp`
/// ([`write_patiently`]).
async fn write_record(
    store: &SharedStore,
    dc: &Datacenter,
    column: &str,
    record: &HomeRecord,
    stamp: Timestamp,
) -> Result<(), lockshift_store::StoreError> {
    let value = serde_json::to_vec(record).map_err(|e| {
        lockshift_store::StoreError::new(
            lockshift_store::StoreErrorKind::Invalid,
            lockshift_store::OpKind::Write,
            Some(schema::ROLLOUT),
            e.to_string(),
        )
    })?;
    write_patiently(
        store,
        &Route::Datacenter(dc.clone()),
        column,
        &value,
        WriteOptions::at(stamp),
    )
    .await
}

/// Writes `value` to `column` of the homes row on `route`, again after a
/// transient failure: the same cell at the same stamp every time, so
/// sending it again (even after a failure that may have landed) is
/// idempotent.
async fn write_patiently(
    store: &SharedStore,
    route: &Route,
    column: &str,
    value: &[u8],
    options: WriteOptions,
) -> Result<(), lockshift_store::StoreError> {
    let mut attempt = 1;
    loop {
        let result = store
            .write_via(
                route,
                schema::ROLLOUT,
                HOMES_ROW,
                &[CellWrite::new(column, value.to_vec())],
                options,
            )
            .await;
        match result {
            Err(e) if e.is_retryable() && attempt < READ_ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            result => return result,
        }
    }
}

/// How many times a move reads a row before it takes a datacenter for
/// out of reach — a transient failure (a timeout, a node restarting) must
/// not make a planned move look impossible, nor a forced one allowed —
/// and sends each write of the record before it gives up on it.
const READ_ATTEMPTS: usize = 3;

/// Reads `row` of `table` on `route`, again after a transient failure, at
/// most [`READ_ATTEMPTS`] times.
async fn read_patiently(
    store: &SharedStore,
    route: &Route,
    table: lockshift_store::Table,
    row: &str,
) -> Result<Vec<lockshift_store::Cell>, lockshift_store::StoreError> {
    let mut attempt = 1;
    loop {
        match store.read_via(route, table, row, &RowQuery::all()).await {
            Err(e) if e.is_retryable() && attempt < READ_ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            result => return result,
        }
    }
}

/// The rollout lock, taken with a combined locker on the local clock (as
/// the rollout's transitions take it).
async fn rollout_lock(
    store: &SharedStore,
    clock: &SharedClock,
    lease: &LeaseSettings,
    by: &str,
) -> Result<LockGuard, RolloutError> {
    let internal = |e: &dyn std::fmt::Display| RolloutError::Internal(e.to_string());
    let node = NodeId::new(crate::rollout::sanitize_node(by)).map_err(|e| internal(&e))?;
    let ctx = LockContext::new(store.clone(), clock.clone(), node, lease.clone(), None)
        .map_err(|e| internal(&e))?;
    let locker = Lockers::new(
        Arc::new(ctx),
        LockerSettings {
            queue: QueueSettings::default(),
            time: TimeSettings {
                source: TimeSourceKind::Local,
                ..TimeSettings::default()
            },
            ..LockerSettings::default()
        },
    )
    .build(Algorithm::Combined);
    let lock = LockId::new(ROLLOUT_LOCK).map_err(|e| internal(&e))?;
    Ok(locker
        .acquire_with(
            &lock,
            AcquireOptions::with_timeout(Duration::from_secs(60)),
            &Binding::unbound(),
        )
        .await?)
}
