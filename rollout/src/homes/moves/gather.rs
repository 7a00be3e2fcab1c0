//! What a move reads from every datacenter, and how it is judged on it
//! (`lockshift_decide::home::move_refusals`).

use std::collections::BTreeMap;
use std::time::Duration;

use lockshift_decide::home::{HOMES_ROW, HomeRecord, MovePlan, MoveScene, Rule, move_refusals};
use lockshift_lock::LeaseSettings;
use lockshift_store::homes::records;
use lockshift_store::{Cell, Clock, Datacenter, Route, SharedStore, Timestamp, schema};

use super::{DatacenterRecord, Holds, MoveReport, MoveRequest, move_wait};
use crate::homes::patient::{read_patiently, registry_patiently};
use crate::settings::RolloutSettings;

/// What a move read from every datacenter.
#[derive(Debug, Default)]
pub(super) struct Gathered {
    pub(super) scene: MoveScene,
    /// The highest stamp the moved rule's cell had anywhere.
    pub(super) stamp: Timestamp,
    /// The moved rule's cell holding its newest record (by rank, then
    /// stamp): what a move that is made already copies where it lacks.
    pub(super) newest: Option<Cell>,
    /// What each registered process says of its lease TTL and
    /// `stage_valid_for`.
    others: Vec<(Option<Duration>, Option<Duration>)>,
    /// Why the move will not wait on what some process says.
    beyond: Vec<String>,
    unreadable: Vec<lockshift_decide::home::Unreadable>,
    /// The newest cell of every other rule the move covers, to copy to the
    /// new home before the move lands (H5).
    pub(super) nested: BTreeMap<Rule, (u64, Cell)>,
    unreachable: Vec<(Datacenter, String)>,
    /// When each datacenter's read of the homes row returned.
    pub(super) read_at: BTreeMap<Datacenter, Timestamp>,
}

/// Reads the homes row and the registry from every datacenter (the
/// registry by a reader whose clock may be `margin` ahead of a writer's).
pub(super) async fn gather(
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
    let mut newest_rank = None;
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
            if rule == moved {
                let newest = newest_rank
                    .is_none_or(|(rank, stamp)| (record.rank(), cell.writetime) > (rank, stamp));
                if newest {
                    newest_rank = Some((record.rank(), cell.writetime));
                    g.newest = Some(cell.clone());
                }
            }
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
pub(super) struct Judged {
    pub(super) report: MoveReport,
    pub(super) gathered: Gathered,
}

/// Gathers and judges a move: the refusals, the plan, the record and the
/// wait.
pub(super) async fn judge(
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
    // A move made already is copied as it is; any other writes a record.
    let record = plan.as_ref().map(|plan| {
        if plan.spreads_to.is_empty() {
            moved(request, plan, clock.now(), wait)
        } else {
            plan.from.clone()
        }
    });
    let datacenters = holdings(&gathered, &request.ask.rule, record.as_ref());
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
            datacenters,
        },
        gathered,
    }
}

/// What each datacenter of the cluster holds of `record` (a record of
/// `rule`), as the gathering read it.
fn holdings(
    gathered: &Gathered,
    rule: &Rule,
    record: Option<&HomeRecord>,
) -> Vec<DatacenterRecord> {
    gathered
        .scene
        .datacenters
        .iter()
        .map(|dc| {
            let Some(read) = gathered.scene.read.get(dc) else {
                let error = gathered
                    .unreachable
                    .iter()
                    .find(|(d, _)| d == dc)
                    .map(|(_, e)| format!("did not answer: {e}"));
                return DatacenterRecord {
                    datacenter: dc.clone(),
                    holds: Holds::Unknown,
                    error,
                };
            };
            let shown = read.iter().find(|(r, _)| r == rule).map(|(_, rec)| rec);
            let holds = match (shown, record) {
                (Some(shown), Some(record)) if shown.version == record.version => {
                    if shown.pending {
                        Holds::Pending
                    } else {
                        Holds::Serving
                    }
                }
                _ => Holds::Without,
            };
            DatacenterRecord {
                datacenter: dc.clone(),
                holds,
                error: None,
            }
        })
        .collect()
}

/// The longest lease TTL or `stage_valid_for` a registered process may
/// say of itself before a move refuses to wait for it: a move waits for
/// the longest any says (H3), and a value past this — a typo, a corrupt
/// row — would leave the rule "moving" for that long.
pub const REGISTERED_CEILING: Duration = Duration::from_secs(24 * 3600);

/// Why a move will not wait on what the registry row `column` says of its
/// process (its lease TTL, its `stage_valid_for`), if either is past
/// [`REGISTERED_CEILING`].
pub(in crate::homes) fn beyond_ceiling(
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
pub(super) fn moved(
    request: &MoveRequest,
    plan: &MovePlan,
    now: Timestamp,
    wait: Duration,
) -> HomeRecord {
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
