//! Moving a home: planned, through the current home, or forced without it
//! (docs/design.md §4a, H3 and H4). The guards are
//! `lockshift_decide::home::move_refusals`; this module reads what they
//! judge and writes the move.

use std::collections::BTreeMap;
use std::time::Duration;

use lockshift_decide::algorithm::Algorithm;
use lockshift_decide::home::{
    HOMES_ROW, HomeRecord, MoveAsk, MovePlan, MoveScene, Rule, move_refusals,
};

use lockshift_lock::LeaseSettings;
use lockshift_store::homes::records;
use lockshift_store::{
    Cell, Clock, Datacenter, Route, SharedClock, SharedStore, Timestamp, WriteOptions, schema,
};
use tracing::{info, warn};

use super::patient::{
    READ_ATTEMPTS, read_patiently, registry_patiently, rollout_lock, write_patiently, write_record,
};
use crate::error::RolloutError;
use crate::registry::record_activity_via;
use crate::settings::RolloutSettings;

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
    /// The record written, or that would be (serving, H6).
    pub record: Option<HomeRecord>,
    /// Whether the serving record was written where the move must land
    /// first: the move is made.
    pub applied: bool,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// Where the serving record was written, in order, with each write's
    /// error.
    pub written: Vec<(Datacenter, Option<String>)>,
    /// How long after the move the new home serves.
    pub wait: Duration,
    /// The datacenters that did not answer, with why.
    pub unreachable: Vec<(Datacenter, String)>,
    /// A move begun and not finished (H6): what was written, what was
    /// not, and what to run next. `None` when nothing was begun or all of
    /// it was written.
    pub incomplete: Option<String>,
}

/// Judges and — unless refused or a dry run — makes a move of a rule's
/// home (H3, H4, H6).
///
/// It reads the homes row and the registry from every datacenter (each at
/// `LOCAL_QUORUM` there), judges with
/// `lockshift_decide::home::move_refusals`, and writes the new record
/// where the move must land first — through the current home for a
/// planned move, the new home for a forced one — *pending* (serving
/// nowhere); once that write is acknowledged it writes the record again,
/// serving the move wait after that acknowledgement, there and then in
/// every other datacenter that answered (H6: a write that was not
/// acknowledged may land at any later time, so no wait counts from it). A
/// planned move holds the rollout lock while it reads and writes, so two
/// operators' moves cannot both land (a forced one cannot: the fleet home
/// may be the one that is gone). A move of the default rule also moves
/// the fleet's rows: it records legacy and queue activity at the new home
/// until the new home serves plus a stage view's life, so no rollout guard
/// counts a quiet period across the move (what the old home recorded last
/// may not have reached the new one).
///
/// A move that could not write all of that says so in
/// [`MoveReport::incomplete`]; asking for the same move again completes it.
///
/// # Errors
/// The rollout lock could not be taken.
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
    let judged = judge(store, clock.as_ref(), settings, lease, &request).await;
    if !judged.report.refusals.is_empty() || request.dry_run {
        return Ok(judged.report);
    }
    // A forced move takes no rollout lock (the fleet home may be the one
    // that is gone), and neither does one that completes a pending move
    // (H6): while the record is pending no datacenter serves the rule —
    // for the default rule, the rollout lock's own rows — and every other
    // move of it is refused, so the only move it can race is the same
    // completion, whose records are as safe as its own.
    let completes = judged.report.plan.as_ref().is_some_and(|p| p.completes);
    if request.ask.force || completes {
        let judged = judge(store, clock.as_ref(), settings, lease, &request).await;
        return write(store, clock.as_ref(), settings, &request, judged).await;
    }
    let guard = rollout_lock(store, clock, lease, &request.by).await?;
    let judged = judge(store, clock.as_ref(), settings, lease, &request).await;
    let result = write(store, clock.as_ref(), settings, &request, judged).await;
    if let Err(e) = guard.release().await {
        warn!(error = %e, "rollout lock release failed; it expires with its TTL");
    }
    result
}

/// What a move read from every datacenter.
#[derive(Debug, Default)]
struct Gathered {
    scene: MoveScene,
    /// The highest stamp the moved rule's cell had anywhere.
    stamp: Timestamp,
    /// What each registered process says of its lease TTL and
    /// `stage_valid_for`.
    others: Vec<(Option<Duration>, Option<Duration>)>,
    /// Why the move will not wait on what some process says.
    beyond: Vec<String>,
    unreadable: Vec<lockshift_decide::home::Unreadable>,
    /// The newest cell of every other rule the move covers, to copy to the
    /// new home before the move lands (H5).
    nested: BTreeMap<Rule, (u64, Cell)>,
    unreachable: Vec<(Datacenter, String)>,
    /// When each datacenter's read of the homes row returned.
    read_at: BTreeMap<Datacenter, Timestamp>,
}

/// Reads the homes row and the registry from every datacenter (the
/// registry by a reader whose clock may be `margin` ahead of a writer's).
async fn gather(
    store: &SharedStore,
    clock: &dyn Clock,
    moved: &Rule,
    margin: Duration,
) -> Gathered {
    let datacenters = store.topology().datacenters;
    let mut g = Gathered {
        scene: MoveScene {
            datacenters: datacenters.clone(),
            read: BTreeMap::new(),
            now: clock.now(),
        },
        ..Gathered::default()
    };
    for dc in &datacenters {
        let route = Route::Datacenter(dc.clone());
        let homes = read_patiently(store, &route, schema::ROLLOUT, HOMES_ROW).await;
        g.read_at.insert(dc.clone(), clock.now());
        let registry = registry_patiently(store, &route, clock.now(), margin).await;
        let (cells, nodes) = match (homes, registry) {
            (Ok(cells), Ok(nodes)) => (cells, nodes),
            (Err(e), _) | (_, Err(e)) => {
                g.unreachable.push((dc.clone(), e.to_string()));
                continue;
            }
        };
        if let Some(cell) = cells.iter().find(|c| c.column == moved.key()) {
            g.stamp = g.stamp.max(cell.writetime);
        }
        let (read, bad) = records(dc, cells.clone());
        g.unreadable.extend(bad);
        for (rule, record) in &read {
            let Some(cell) = cells.iter().find(|c| c.column == rule.key()) else {
                continue;
            };
            let newer = g.nested.get(rule).is_none_or(|(version, kept)| {
                (record.version, cell.writetime) > (*version, kept.writetime)
            });
            if nests_in(rule, moved) && newer {
                g.nested
                    .insert(rule.clone(), (record.version, cell.clone()));
            }
        }
        g.scene.read.insert(dc.clone(), read);
        for (column, info) in nodes.iter().map(|n| (&n.column, &n.info)) {
            let said = (
                info.lease.map(|p| p.ttl()),
                info.stage_valid_for_ms.map(Duration::from_millis),
            );
            if let Some(refusal) = beyond_ceiling(column, said) {
                g.beyond.push(refusal);
            }
            g.others.push(said);
        }
    }
    g
}

/// A move judged: the report so far, and what its writes need.
struct Judged {
    report: MoveReport,
    gathered: Gathered,
}

/// Gathers and judges a move: the refusals, the plan, the record and the
/// wait.
async fn judge(
    store: &SharedStore,
    clock: &dyn Clock,
    settings: &RolloutSettings,
    lease: &LeaseSettings,
    request: &MoveRequest,
) -> Judged {
    let mut gathered = gather(store, clock, &request.ask.rule, settings.clock_skew_margin).await;
    let (plan, mut refusals) = move_refusals(&request.ask, &gathered.scene);
    gathered.beyond.sort();
    gathered.beyond.dedup();
    refusals.extend(gathered.beyond.iter().cloned());
    refusals.extend(gathered.unreadable.iter().map(|cell| {
        format!(
            "the homes record {:?} in {} does not decode ({}): fix or remove that cell first",
            cell.column, cell.datacenter, cell.error
        )
    }));
    let wait = move_wait(settings, lease.lease_ttl, gathered.others.iter().copied());
    let record = plan
        .as_ref()
        .map(|plan| moved(request, plan, clock.now(), wait));
    Judged {
        report: MoveReport {
            rule: request.ask.rule.clone(),
            plan,
            refusals,
            record,
            applied: false,
            dry_run: request.dry_run,
            written: Vec::new(),
            wait,
            unreachable: std::mem::take(&mut gathered.unreachable),
            incomplete: None,
        },
        gathered,
    }
}

/// Writes a judged move (H6): the nested rules to the new home, the record
/// pending where the move must land first, then — its acknowledgement
/// being the moment the wait counts from — serving, there and everywhere
/// else that answered.
async fn write(
    store: &SharedStore,
    clock: &dyn Clock,
    settings: &RolloutSettings,
    request: &MoveRequest,
    judged: Judged,
) -> Result<MoveReport, RolloutError> {
    let Judged {
        mut report,
        gathered,
    } = judged;
    let (Some(plan), Some(record)) = (report.plan.clone(), report.record.clone()) else {
        return Ok(report);
    };
    if !report.refusals.is_empty() {
        return Ok(report);
    }
    // First where the move must land: the current home (planned, H3), or
    // the new one (forced, H4). Then everywhere else that answered.
    let first = if request.ask.force {
        request.ask.to.clone()
    } else {
        plan.old_home().clone()
    };
    let rest: Vec<Datacenter> = gathered
        .scene
        .read
        .keys()
        .filter(|dc| **dc != first)
        .cloned()
        .collect();
    let incomplete = |done: &str, missing: &str| {
        format!(
            "{done}; {missing}. Run the same move again (`migrate home move`{} --to {}) to \
             complete it: until then no datacenter serves {}",
            match &request.ask.rule {
                Rule::Default => String::new(),
                Rule::Prefix(p) => format!(" --prefix {p:?}"),
            },
            request.ask.to,
            request.ask.rule
        )
    };
    // The new home shows every rule the moved one covers before it shows
    // the move: a process that confirms the move there learns of them in
    // the same read (H5). Each cell is copied as it was, at its own
    // stamp, so a copy never overrides a newer record.
    let to = Route::Datacenter(request.ask.to.clone());
    for (_, cell) in gathered.nested.values() {
        let copied = write_patiently(
            store,
            &to,
            &cell.column,
            &cell.value,
            WriteOptions::at(cell.writetime),
        )
        .await;
        if let Err(e) = copied {
            report.incomplete = Some(format!(
                "nothing of the move was written: copying the record {:?} to {} failed ({e}); \
                 try again once {} answers",
                cell.column, request.ask.to, request.ask.to
            ));
            return Ok(report);
        }
    }
    let key = request.ask.rule.key();
    // Above every stamp the rule's cell had, whatever this clock says.
    let stamp = clock.now().max(gathered.stamp.offset_micros(1));
    // A move that completes a pending one whose record `first` already
    // showed has its acknowledgement: that read, at LOCAL_QUORUM there.
    // Writing the pending record again would stamp it above a serving one
    // of an earlier attempt that may still land, and bury it.
    let shown_at = (plan.completes)
        .then(|| {
            let shows = gathered.scene.read.get(&first)?.iter().any(|(rule, r)| {
                *rule == request.ask.rule && r.version == plan.version && r.pending
            });
            shows
                .then(|| gathered.read_at.get(&first).copied())
                .flatten()
        })
        .flatten();
    let acked = match shown_at {
        Some(read) => read,
        None => {
            if let Err(e) = write_record(store, &first, &key, &record.as_pending(), stamp).await {
                report.incomplete = Some(incomplete(
                    &format!(
                        "the move's first write, pending, at {first} was not acknowledged ({e})"
                    ),
                    "it may still land there, and serves nowhere if it does",
                ));
                return Ok(report);
            }
            clock.now()
        }
    };
    // H6: the wait counts from this acknowledgement, a moment the pending
    // record is known to be in `first` at LOCAL_QUORUM.
    let record = moved(request, &plan, acked, report.wait);
    report.record = Some(record.clone());
    let stamp = acked.max(stamp.offset_micros(1));
    if let Err(e) = write_record(store, &first, &key, &record, stamp).await {
        report.incomplete = Some(incomplete(
            &format!("the move is recorded at {first}, pending"),
            &format!("writing it serving there failed ({e})"),
        ));
        return Ok(report);
    }
    report.applied = true;
    report.written.push((first.clone(), None));
    for dc in rest {
        let result = write_record(store, &dc, &key, &record, stamp).await;
        report
            .written
            .push((dc, result.err().map(|e| e.to_string())));
    }
    info!(rule = %request.ask.rule, from = %plan.old_home(), to = %request.ask.to,
        version = record.version, forced = request.ask.force, "home moved");
    if request.ask.rule == Rule::Default {
        record_fleet_activity(store, settings, &request.ask.to, &record).await?;
    }
    Ok(report)
}

/// A move of the default rule moves the fleet's rows: records legacy and
/// queue activity at the new home until it serves plus a stage view's
/// life, so no quiet period counts across the move.
async fn record_fleet_activity(
    store: &SharedStore,
    settings: &RolloutSettings,
    to: &Datacenter,
    record: &HomeRecord,
) -> Result<(), RolloutError> {
    let until = Timestamp::from_micros(record.serves_from).saturating_add(settings.stage_valid_for);
    let route = Route::Datacenter(to.clone());
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
                        "the move is recorded, but recording {algorithm} activity at {to} \
                         failed ({e}): hold every rollout transition for \
                         rollout.quiet_period after the new home serves"
                    )));
                }
                Ok(()) => break,
            }
        }
    }
    Ok(())
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
        moved_from: Some(plan.old_home().clone()),
        forced: request.ask.force,
        at: now.as_micros(),
        by: request.by.clone(),
        pending: false,
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
