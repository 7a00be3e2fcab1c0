//! `migrate home` and `migrate home move`: where each lock lives across
//! datacenters, and moving it (docs/design.md §4a, H1–H4; the runbook:
//! docs/operating.md, "Several datacenters").
//!
//! - `migrate home` reads the `homes` row from every datacenter, each at
//!   `LOCAL_QUORUM` there, and shows every rule's newest record and what
//!   each datacenter shows of it — so an operator sees a move that has not
//!   reached a datacenter yet, and which datacenters do not answer.
//! - `migrate home move` judges a move with the guards of
//!   `lockshift_decide::home::move_refusals` and makes it
//!   ([`lockshift_rollout::homes::move_home`]): planned through the current
//!   home, or `--force`d without it. Refused: exit 3, nothing written.
//!   `--dry-run` judges the same way and writes nothing (invariant 1 of
//!   `lib.rs`).

use std::collections::BTreeMap;

use lockshift_decide::home::{HomeRecord, MoveAsk, Rule, fmt_micros};
use lockshift_rollout::homes::{MoveRequest, move_home};
use lockshift_store::Datacenter;
use lockshift_store::homes::{read_row_at, records};
use serde::Serialize;

use super::{Env, ms};
use crate::{JSON_VERSION, Outcome, UsageError};

/// What one datacenter answered.
#[derive(Debug, Clone, Serialize)]
pub struct DatacenterAnswer {
    /// The datacenter.
    pub datacenter: String,
    /// Whether its read succeeded.
    pub answered: bool,
    /// Why not.
    pub error: Option<String>,
}

/// One rule as the datacenters show it.
#[derive(Debug, Clone, Serialize)]
pub struct RuleReport {
    /// `default`, or `prefix:` and the prefix.
    pub rule: String,
    /// The newest record any datacenter shows.
    pub record: HomeRecord,
    /// When its home serves (RFC 3339).
    pub serves_from: String,
    /// Whether it serves now, by this tool's clock.
    pub serving: bool,
    /// The version each datacenter that answered shows (absent: none).
    pub shown: BTreeMap<String, u64>,
    /// `serving`; `moving` — moved, and the new home serves in
    /// `serves_in_ms` (H3); or `pending` — written, never confirmed, so
    /// serving nowhere until the move is asked again (H6).
    pub state: RuleStateName,
    /// While moving: how long until the new home serves.
    pub serves_in_ms: Option<u64>,
    /// The home it moves (or moved) from.
    pub from: Option<String>,
}

/// Where a rule's home stands ([`RuleReport::state`]).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RuleStateName {
    /// Its home serves.
    Serving,
    /// Its new home serves in a known time (H3).
    Moving,
    /// Its record serves nowhere until the move is asked again (H6).
    Pending,
}

impl RuleReport {
    /// The report of `rule`'s newest `record` at `now`, with what each
    /// datacenter showed of it.
    pub fn of(
        rule: &Rule,
        record: HomeRecord,
        shown: BTreeMap<String, u64>,
        now: lockshift_store::Timestamp,
    ) -> RuleReport {
        let serving = record.serves_at(now);
        let (state, serves_in_ms) = if record.pending {
            (RuleStateName::Pending, None)
        } else if serving {
            (RuleStateName::Serving, None)
        } else {
            let left = record.serves_from.saturating_sub(now.as_micros());
            (
                RuleStateName::Moving,
                Some(u64::try_from(left / 1_000).unwrap_or(0)),
            )
        };
        RuleReport {
            rule: rule.key(),
            serves_from: fmt_micros(record.serves_from),
            serving,
            shown,
            state,
            serves_in_ms,
            from: record.moved_from.as_ref().map(ToString::to_string),
            record,
        }
    }
}

/// The report of `migrate home` (JSON schema, `"version": 1`).
#[derive(Debug, Clone, Serialize)]
pub struct HomesReport {
    /// Schema version, 1.
    pub version: u32,
    /// This tool's datacenter (`store.cql.local_datacenter`), if named.
    pub local_datacenter: Option<String>,
    /// Every datacenter of the cluster and whether it answered.
    pub datacenters: Vec<DatacenterAnswer>,
    /// Every rule recorded; empty when the fleet has no homes (every lock
    /// at `store.cql.consistency`).
    pub rules: Vec<RuleReport>,
    /// Cells of the homes row that do not decode (written by a newer build,
    /// or by hand): the fleet refuses the locks each could home.
    pub unreadable: Vec<UnreadableCell>,
}

/// A cell of the homes row that does not decode, as one datacenter shows it.
#[derive(Debug, Clone, Serialize)]
pub struct UnreadableCell {
    /// The datacenter that shows it.
    pub datacenter: String,
    /// Its column, cut short.
    pub column: String,
    /// The rule the column names, if it names one this build knows.
    pub rule: Option<String>,
    /// Why it does not decode, cut short.
    pub error: String,
}

/// Reads the `homes` row from every datacenter.
///
/// # Errors
/// None of the datacenters answered.
pub async fn show(env: &Env) -> anyhow::Result<HomesReport> {
    let topology = env.store.topology();
    let now = env.clock.now();
    let mut datacenters = Vec::new();
    let mut newest: BTreeMap<Rule, HomeRecord> = BTreeMap::new();
    let mut shown: BTreeMap<Rule, BTreeMap<String, u64>> = BTreeMap::new();
    let mut unreadable = Vec::new();
    // Every datacenter at once: one that does not answer costs a request
    // timeout, not one per datacenter after it.
    let reads = futures::future::join_all(
        topology
            .datacenters
            .iter()
            .map(|dc| read_row_at(env.store.as_ref(), dc)),
    )
    .await;
    for (dc, read) in topology.datacenters.iter().zip(reads) {
        match read {
            Ok(cells) => {
                let (found, undecoded) = records(dc, cells);
                unreadable.extend(undecoded.into_iter().map(|u| UnreadableCell {
                    datacenter: u.datacenter.to_string(),
                    column: u.column,
                    rule: u.rule.map(|r| r.key()),
                    error: u.error,
                }));
                for (rule, record) in found {
                    shown
                        .entry(rule.clone())
                        .or_default()
                        .insert(dc.to_string(), record.version);
                    let keep = newest
                        .get(&rule)
                        .is_none_or(|old| record.rank() > old.rank());
                    if keep {
                        newest.insert(rule, record);
                    }
                }
                datacenters.push(DatacenterAnswer {
                    datacenter: dc.to_string(),
                    answered: true,
                    error: None,
                });
            }
            Err(e) => datacenters.push(DatacenterAnswer {
                datacenter: dc.to_string(),
                answered: false,
                error: Some(e.to_string()),
            }),
        }
    }
    if !datacenters.is_empty() && datacenters.iter().all(|d| !d.answered) {
        anyhow::bail!(
            "no datacenter answered: {}",
            datacenters
                .iter()
                .map(|d| format!("{}: {}", d.datacenter, d.error.as_deref().unwrap_or("?")))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    let rules = newest
        .into_iter()
        .map(|(rule, record)| {
            let shown = shown.remove(&rule).unwrap_or_default();
            RuleReport::of(&rule, record, shown, now)
        })
        .collect();
    Ok(HomesReport {
        version: JSON_VERSION,
        local_datacenter: topology.local.map(|d| d.to_string()),
        datacenters,
        rules,
        unreadable,
    })
}

/// The report of `migrate home move` (JSON schema, `"version": 1`).
#[derive(Debug, Clone, Serialize)]
pub struct HomeMoveReport {
    /// Schema version, 1.
    pub version: u32,
    /// The rule moved (`default`, or `prefix:` and the prefix).
    pub rule: String,
    /// The home the locks had (for a new prefix rule: the home of the
    /// rule it takes them from).
    pub from: Option<String>,
    /// The new home.
    pub to: String,
    /// Forced (H4).
    pub forced: bool,
    /// Only judged; nothing written.
    pub dry_run: bool,
    /// Whether the move was written.
    pub applied: bool,
    /// Why it may not be made now (exit 3); empty when it may.
    pub because: Vec<String>,
    /// The record written, or that would be.
    pub record: Option<HomeRecord>,
    /// When the new home serves (RFC 3339).
    pub serves_from: Option<String>,
    /// How long after the move the new home serves.
    pub wait_ms: u64,
    /// Where it was written, in order, with each write's error.
    pub written: Vec<(String, Option<String>)>,
    /// The datacenters that did not answer, with why.
    pub unreachable: Vec<(String, String)>,
    /// A move begun and not finished: what was written, what not, and
    /// what to run next (exit 1).
    pub incomplete: Option<String>,
    /// What each datacenter holds of the move's record: `serving`,
    /// `pending` (serving nowhere), `without` (an older record, or none)
    /// or `unknown` (it did not answer, or a write there may still land),
    /// with the error of a write or read that failed there.
    pub datacenters: Vec<MoveSite>,
    /// The move was made already and was asked again: its record was
    /// copied, as it is, to these datacenters, which answered without it.
    pub copied_to: Vec<String>,
}

/// What one datacenter holds of a move's record ([`HomeMoveReport`]).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct MoveSite {
    /// The datacenter.
    pub datacenter: String,
    /// `serving`, `pending`, `without` or `unknown`.
    pub holds: &'static str,
    /// Why a write there (or its read) failed.
    pub error: Option<String>,
}

/// What `migrate home move` asks.
#[derive(Debug, Clone)]
pub struct MoveArgs {
    /// The rule: `None` for the default rule, else the prefix.
    pub prefix: Option<String>,
    /// The new home.
    pub to: Datacenter,
    /// Without the current home's consent.
    pub force: bool,
    /// Judge only.
    pub dry_run: bool,
    /// Who asks.
    pub by: String,
}

/// Judges and makes a move.
///
/// # Errors
/// A prefix no homes record may be written for (a [`UsageError`], exit 2,
/// nothing read or written); the rollout lock could not be taken.
pub async fn move_(env: &Env, args: MoveArgs) -> anyhow::Result<(HomeMoveReport, Outcome)> {
    let rule = match args.prefix {
        None => Rule::Default,
        // The one check (the command line made it already).
        Some(p) => Rule::prefix(p).map_err(|e| UsageError(e.to_string()))?,
    };
    let report = move_home(
        &env.store,
        &env.clock,
        &env.settings.rollout,
        &env.settings.lock.lease(),
        MoveRequest {
            ask: MoveAsk {
                rule: rule.clone(),
                to: args.to.clone(),
                force: args.force,
            },
            dry_run: args.dry_run,
            by: args.by,
        },
    )
    .await?;
    let outcome = if !report.refusals.is_empty() {
        Outcome::NotSafe
    } else if report.incomplete.is_some() {
        Outcome::Failed
    } else {
        Outcome::Ok
    };
    Ok((
        HomeMoveReport {
            version: JSON_VERSION,
            rule: rule.key(),
            from: report.plan.as_ref().map(|p| p.old_home().to_string()),
            to: args.to.to_string(),
            forced: args.force,
            dry_run: report.dry_run,
            applied: report.applied,
            because: report.refusals,
            serves_from: report.record.as_ref().map(|r| fmt_micros(r.serves_from)),
            record: report.record,
            wait_ms: ms(report.wait),
            written: report
                .written
                .into_iter()
                .map(|(dc, e)| (dc.to_string(), e))
                .collect(),
            unreachable: report
                .unreachable
                .into_iter()
                .map(|(dc, e)| (dc.to_string(), e))
                .collect(),
            incomplete: report.incomplete,
            datacenters: report
                .datacenters
                .iter()
                .map(|d| MoveSite {
                    datacenter: d.datacenter.to_string(),
                    holds: d.holds.as_str(),
                    error: d.error.clone(),
                })
                .collect(),
            copied_to: report
                .plan
                .iter()
                .flat_map(|p| p.spreads_to.iter().map(ToString::to_string))
                .collect(),
        },
        outcome,
    ))
}

/// How many of a datacenter's processes confirm a home now.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Reach {
    /// Processes whose view of the rule's home is confirmed, by a
    /// heartbeat recent enough to tell (younger than the process's
    /// `stage_valid_for`).
    pub confirmed: usize,
    /// Processes that report homes at all.
    pub of: usize,
    /// Of those, processes whose last heartbeat is too old to tell: a
    /// view it said confirmed may have lapsed since (not counted as
    /// confirmed).
    pub silent: usize,
}

/// A registered process as `status` heard it: its last heartbeat, and
/// whether that heartbeat is recent enough for what it says of its homes
/// to hold now.
#[derive(Debug, Clone)]
pub struct Heard {
    /// What it said.
    pub info: lockshift_decide::registry::NodeInfo,
    /// Its registry column (`node` or `node/incarnation`).
    pub column: String,
    /// Its heartbeat is younger than its `stage_valid_for`.
    pub fresh: bool,
}

/// One datacenter as `status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct SiteView {
    /// The datacenter (`not named` for processes that did not say).
    pub datacenter: String,
    /// Its processes (`node` or `node/incarnation`).
    pub nodes: Vec<String>,
    /// Whether this tool read the homes row from it (`None`: not a
    /// datacenter of the cluster the tool knows).
    pub answered: Option<bool>,
    /// Per rule: how many of its processes confirm that rule's home.
    pub reaches: BTreeMap<String, Reach>,
    /// Processes of a build that predates homes.
    pub unaware: usize,
}

/// The datacenters section of `migrate status`.
#[derive(Debug, Clone, Serialize)]
pub struct DatacentersView {
    /// Every rule's home as the datacenters show it.
    pub homes: HomesReport,
    /// The processes by datacenter, and whether each reaches each home.
    pub sites: Vec<SiteView>,
}

/// The processes of `nodes` by datacenter, with whether each reaches each
/// home (from what its heartbeat said, while recent enough to hold),
/// beside `homes`.
pub fn by_datacenter(nodes: &[Heard], homes: HomesReport) -> DatacentersView {
    let mut sites: BTreeMap<String, SiteView> = BTreeMap::new();
    for answer in &homes.datacenters {
        sites.insert(
            answer.datacenter.clone(),
            SiteView {
                datacenter: answer.datacenter.clone(),
                nodes: Vec::new(),
                answered: Some(answer.answered),
                reaches: BTreeMap::new(),
                unaware: 0,
            },
        );
    }
    for Heard {
        info,
        column,
        fresh,
    } in nodes
    {
        let dc = info
            .datacenter
            .clone()
            .unwrap_or_else(|| "not named".to_string());
        let site = sites.entry(dc.clone()).or_insert_with(|| SiteView {
            datacenter: dc,
            nodes: Vec::new(),
            answered: None,
            reaches: BTreeMap::new(),
            unaware: 0,
        });
        site.nodes.push(column.clone());
        match &info.homes {
            None => site.unaware += 1,
            Some(states) => {
                for rule in &homes.rules {
                    let reach = site.reaches.entry(rule.rule.clone()).or_default();
                    reach.of += 1;
                    reach.silent += usize::from(!fresh);
                    let said = states.iter().any(|s| s.rule == rule.rule && s.confirmed);
                    reach.confirmed += usize::from(said && *fresh);
                }
            }
        }
    }
    DatacentersView {
        homes,
        sites: sites.into_values().collect(),
    }
}

#[cfg(test)]
#[path = "home_tests.rs"]
mod tests;
