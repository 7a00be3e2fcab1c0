//! The rollout as data: the stage as stored ([`StageRecord`]), its
//! history ([`HistoryEntry`]), the evidence the guards look at
//! ([`Evidence`]), a guard's and a transition's verdict ([`Guard`],
//! [`Verdict`]), which edges the rollout may take ([`edge_refusal`]), and
//! the guards' judgement on the evidence ([`evaluate`], by the
//! [`GuardTimes`] the rollout settings set). Reading and writing the stage and the history,
//! gathering the evidence and moving the stage under the rollout lock is
//! I/O and lives with the rollout; docs/design.md §4 gives the stages and
//! their guards.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::algorithm::{Algorithm, Stage};
use crate::cell::Timestamp;
use crate::census::{Census, UnreadableRow};
use crate::duration::fmt_duration;
use crate::id::cut_short;
use crate::offset::Age;
use crate::registry::LiveNode;
use crate::remedy::Remedy;

/// The `rollout` row holding the current stage.
pub const STAGE_ROW: &str = "stage";
/// The column of the current stage.
pub const STAGE_COLUMN: &str = "current";
/// The `rollout` row holding the history.
pub const HISTORY_ROW: &str = "history";
/// The lock serialising transitions.
pub const ROLLOUT_LOCK: &str = "lockshift.rollout";

/// The stage as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageRecord {
    /// The stage.
    pub stage: Stage,
    /// Increases by one with every transition; 0 before the first.
    pub version: u64,
    /// When it was set (µs since the epoch); 0 before the first.
    pub changed_at: i64,
    /// Who set it.
    pub by: String,
    /// Why.
    pub reason: String,
}

impl StageRecord {
    /// The stage of a cluster where no transition was ever made.
    pub fn initial() -> Self {
        StageRecord {
            stage: Stage::Legacy,
            version: 0,
            changed_at: 0,
            by: "initial".to_string(),
            reason: "no stage recorded yet".to_string(),
        }
    }
}

/// What happened, for the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoryAction {
    /// The stage changed.
    Transition,
    /// A transition was refused by its guards.
    Refusal,
}

/// One line of the history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// When (µs since the epoch).
    pub at: i64,
    /// Who asked.
    pub by: String,
    /// Transition or refusal.
    pub action: HistoryAction,
    /// From which stage.
    pub from: Stage,
    /// To which stage.
    pub to: Stage,
    /// The operator's reason.
    pub reason: String,
    /// For refusals, every failing guard.
    #[serde(default)]
    pub failed_guards: Vec<String>,
}

/// One guard's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Guard {
    /// What it checks.
    pub name: String,
    /// Whether it holds.
    pub passed: bool,
    /// The evidence, in words.
    pub detail: String,
    /// When it fails: what to do, one text per kind of failure it found
    /// ([`Remedy::action`], the "do" column of docs/operating.md §2).
    pub actions: Vec<String>,
}

impl Guard {
    /// A guard named `name`, with `detail`, that passed (no `remedies`)
    /// or failed with `remedies` (their actions deduplicated, in order).
    pub fn judged(name: String, detail: String, remedies: &[Remedy]) -> Guard {
        let mut actions: Vec<String> = Vec::new();
        for r in remedies {
            let action = r.action().to_string();
            if !actions.contains(&action) {
                actions.push(action);
            }
        }
        Guard {
            name,
            passed: remedies.is_empty(),
            detail,
            actions,
        }
    }
}

/// Whether a transition is safe now, guard by guard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// The current stage.
    pub from: Stage,
    /// The target stage.
    pub to: Stage,
    /// Every guard of the edge.
    pub guards: Vec<Guard>,
    /// What the guards cannot know and the operator should (e.g. no node
    /// is registered at all): said beside a "yes" as beside a "no".
    pub caveats: Vec<String>,
}

/// The caveat when the registry is empty: every guard about nodes passes
/// vacuously.
pub const NO_NODE_CAVEAT: &str = "no lockshift node is registered: the guards about nodes \
     passed because they saw none — no service has started with lockshift yet, or the services \
     use another cluster or keyspace (store.cql.keyspace) than this command; make sure they \
     report here (`migrate status` lists them) before you move the stage";

impl Verdict {
    /// Whether every guard holds.
    pub fn is_safe(&self) -> bool {
        self.guards.iter().all(|g| g.passed)
    }

    /// What to do about the failing guards, each once, in order.
    pub fn actions(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for a in self
            .guards
            .iter()
            .filter(|g| !g.passed)
            .flat_map(|g| &g.actions)
        {
            if !out.contains(a) {
                out.push(a.clone());
            }
        }
        out
    }

    /// The failing guards' details.
    pub fn failures(&self) -> Vec<String> {
        self.guards
            .iter()
            .filter(|g| !g.passed)
            .map(|g| g.detail.clone())
            .collect()
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_safe() {
            write!(f, "safe to move from {} to {}: yes", self.from, self.to)
        } else {
            write!(
                f,
                "safe to move from {} to {}: no, because {}",
                self.from,
                self.to,
                self.failures().join("; ")
            )
        }
    }
}

/// Everything guards look at.
#[derive(Clone, Debug)]
pub struct Evidence {
    /// The current stage.
    pub current: StageRecord,
    /// The live registry.
    pub nodes: Vec<LiveNode>,
    /// Registry entries that do not decode (node ids), for `status`.
    pub unreadable_nodes: Vec<String>,
    /// Lock cells now.
    pub census: Census,
    /// Recorded last use per algorithm.
    pub activity: BTreeMap<Algorithm, Timestamp>,
    /// When the evidence was gathered.
    pub now: Timestamp,
}

impl Evidence {
    /// The last time `algorithm` was seen in use: recorded activity, or now
    /// if the census sees its cells (for legacy: any foreign cell too).
    pub fn last_seen(&self, algorithm: Algorithm) -> Option<Timestamp> {
        let seen_now = match algorithm {
            Algorithm::Legacy => self.census.tally.legacy_activity > 0,
            other => self.census.tally.seen.contains(&other),
        };
        let recorded = self.activity.get(&algorithm).copied();
        if seen_now { Some(self.now) } else { recorded }
    }
}

/// Why the edge `from → to` is not a step the rollout may take — `None`
/// when it is one: adjacent stages only, never the same stage, never a
/// skipped one.
pub fn edge_refusal(from: Stage, to: Stage) -> Option<String> {
    if from == to {
        return Some(format!("the stage already is {to}"));
    }
    if from.next() == Some(to) || from.previous() == Some(to) {
        return None;
    }
    let step = if to > from {
        from.next()
    } else {
        from.previous()
    };
    Some(match step {
        Some(step) => format!("stages cannot be skipped; move to {step} first"),
        None => "there is no such step".to_string(),
    })
}

/// The times the guards judge by, from the fleet's rollout settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuardTimes {
    /// How long no activity of the algorithm a transition retires must
    /// have been seen (`rollout.quiet_period`).
    pub quiet_period: Duration,
    /// A node not heard from for longer is silent, as `migrate status`
    /// marks it (`rollout.heartbeat_ttl`); its registry row still counts.
    pub heartbeat_ttl: Duration,
    /// How far a process that reports no clock reading may be from the
    /// database's clock (`rollout.clock_skew_margin`): a heartbeat is aged
    /// by its writer's reading, or allowing this much.
    pub clock_skew_margin: Duration,
}

/// The guards of `from → to` evaluated on `evidence` with `times` (pure:
/// no I/O). The table of guards per edge is in docs/design.md §4.
pub fn evaluate(evidence: &Evidence, to: Stage, times: GuardTimes) -> Verdict {
    let from = evidence.current.stage;
    let quiet = times.quiet_period;
    let g = Guards {
        evidence,
        silent_after: times.heartbeat_ttl,
        margin: times.clock_skew_margin,
    };
    let guards = match (from, to) {
        (Stage::Legacy, Stage::Dual) => vec![
            g.no_node_runs(Algorithm::Legacy),
            g.on_census(g.quiet(Algorithm::Legacy, quiet)),
        ],
        (Stage::Dual, Stage::Queue) => vec![
            g.no_node_runs(Algorithm::Legacy),
            g.all_saw_current(),
            g.on_census(g.quiet(Algorithm::Legacy, quiet)),
        ],
        (Stage::Queue, Stage::Complete) => vec![
            g.no_node_runs(Algorithm::Legacy),
            g.no_node_runs(Algorithm::Combined),
            g.all_saw_current(),
            g.on_census(g.none_held_by(Algorithm::Combined)),
            g.on_census(g.quiet(Algorithm::Legacy, quiet)),
        ],
        (Stage::Dual, Stage::Legacy) => vec![
            g.no_node_runs(Algorithm::Queue),
            g.all_saw_current(),
            g.on_census(g.none_held_by(Algorithm::Queue)),
            g.on_census(g.quiet(Algorithm::Queue, quiet)),
        ],
        _ => Vec::new(),
    };
    let caveats = if evidence.nodes.is_empty() {
        vec![NO_NODE_CAVEAT.to_string()]
    } else {
        Vec::new()
    };
    Verdict {
        from,
        to,
        guards,
        caveats,
    }
}

struct Guards<'a> {
    evidence: &'a Evidence,
    /// A node not heard from for longer is silent (`rollout.heartbeat_ttl`,
    /// as `migrate status` marks it).
    silent_after: Duration,
    /// `rollout.clock_skew_margin`, for a heartbeat without a reading.
    margin: Duration,
}

impl Guards<'_> {
    /// How a guard names the process of `node`: its node id, plus the
    /// incarnation when another live process shares that id (R5).
    fn who(&self, node: &LiveNode) -> String {
        let shared = self
            .evidence
            .nodes
            .iter()
            .filter(|n| n.info.node == node.info.node)
            .count()
            > 1;
        match &node.info.incarnation {
            Some(incarnation) if shared => format!("{} (process {incarnation})", node.info.node),
            _ => node.info.node.clone(),
        }
    }

    /// How long ago `node` last heartbeat, for the guard texts: a silent
    /// node still counts until its row expires (it may still act on what
    /// it last reported).
    fn heard(&self, node: &LiveNode) -> String {
        format!(
            "heartbeat {} ago",
            fmt_duration(round_secs(self.heartbeat_age(node).shown))
        )
    }

    /// How long ago `node` last heartbeat, on the database's clock.
    fn heartbeat_age(&self, node: &LiveNode) -> Age {
        node.heartbeat_age(
            self.evidence.now,
            self.evidence.census.reader.as_ref(),
            self.margin,
        )
    }

    /// The remedies a node's naming brings besides the guard's own: a
    /// silent node, a node id two processes share.
    fn node_remedies(&self, node: &LiveNode, out: &mut Vec<Remedy>) {
        if self.silent(node) {
            out.push(Remedy::Silent);
        }
        if self
            .evidence
            .nodes
            .iter()
            .filter(|n| n.info.node == node.info.node)
            .count()
            > 1
        {
            out.push(Remedy::SharedNodeId);
        }
    }

    /// No heartbeat for longer than a heartbeat TTL's worth (the registry
    /// row still counts), on the database's clock by the process's reading
    /// and the census taker's ([`LiveNode::heartbeat_age`]): a process
    /// minutes off the database's clock that heartbeats is not silent.
    fn silent(&self, node: &LiveNode) -> bool {
        self.heartbeat_age(node).surely_over(self.silent_after)
    }

    fn no_node_runs(&self, algorithm: Algorithm) -> Guard {
        let mut remedies = Vec::new();
        let running: Vec<String> = self
            .evidence
            .nodes
            .iter()
            .filter(|n| n.info.runs(algorithm))
            .map(|n| {
                let bound = n.info.bound.get(&algorithm).copied().unwrap_or(0);
                let what = if n.info.effective == algorithm {
                    remedies.push(Remedy::runs(algorithm));
                    format!("runs {algorithm}")
                } else {
                    remedies.push(Remedy::acquisitions(algorithm));
                    format!("has {bound} {algorithm} acquisition(s) waiting or held")
                };
                self.node_remedies(n, &mut remedies);
                format!("node {} {what} ({})", self.who(n), self.heard(n))
            })
            .collect();
        Guard::judged(
            format!("no live node runs {algorithm}"),
            if running.is_empty() {
                format!("no live node runs {algorithm}")
            } else {
                bounded_list(&running, "nodes")
            },
            &remedies,
        )
    }

    /// Every node acts on the current stage: its view, and every
    /// acquisition it has waiting or held, are bound to the current version
    /// (`NodeInfo::acting`).
    fn all_saw_current(&self) -> Guard {
        let current = &self.evidence.current;
        let mut remedies = Vec::new();
        let lagging: Vec<String> = self
            .evidence
            .nodes
            .iter()
            .filter(|n| n.info.acting().is_none_or(|v| v < current.version))
            .map(|n| {
                let why = if n.info.view_expired {
                    remedies.push(Remedy::CannotConfirm);
                    "cannot confirm the stage".to_string()
                } else if n.info.seen_version != Some(current.version) {
                    remedies.push(Remedy::ActsOnOldStage);
                    format!(
                        "still acts on stage {}",
                        n.info.seen_stage.map_or("unknown", Stage::as_str)
                    )
                } else {
                    remedies.push(Remedy::BoundToOldVersion);
                    format!(
                        "has acquisitions bound to stage version {}",
                        n.info
                            .acting()
                            .map_or("unknown".to_string(), |v| v.to_string())
                    )
                };
                self.node_remedies(n, &mut remedies);
                format!("node {} {why} ({})", self.who(n), self.heard(n))
            })
            .collect();
        Guard::judged(
            format!("every live node acts on stage {}", current.stage),
            if lagging.is_empty() {
                format!("every live node acts on stage {}", current.stage)
            } else {
                bounded_list(&lagging, "nodes")
            },
            &remedies,
        )
    }

    /// `guard`, judged on the census — or, while the database refuses to
    /// read some lock's row, refused: what that row holds (a holding, a
    /// legacy cell) is unknown, so the guard cannot be evaluated.
    fn on_census(&self, guard: Guard) -> Guard {
        let rows = &self.evidence.census.unreadable;
        if rows.is_empty() {
            return guard;
        }
        let named: Vec<String> = rows.iter().map(UnreadableRow::describe).collect();
        Guard::judged(
            guard.name,
            format!(
                "cannot be evaluated: the database refuses to read {} lock row(s): {}",
                rows.len(),
                bounded_list(&named, "rows")
            ),
            &[Remedy::UnreadableLock],
        )
    }

    fn none_held_by(&self, algorithm: Algorithm) -> Guard {
        // The transition's own lock is not fleet activity (the tally
        // leaves it out).
        let held = self.evidence.census.tally.fleet_held_by(Some(algorithm));
        let named: Vec<String> = held
            .first
            .iter()
            .map(|c| format!("{} (by {})", cut_short(&c.lock), cut_short(&c.owner.owner)))
            .collect();
        let remedies = if held.count == 0 {
            Vec::new()
        } else {
            vec![Remedy::held_by(algorithm)]
        };
        Guard::judged(
            format!("no lock held by a {algorithm} holder"),
            if held.count == 0 {
                format!("no lock held by a {algorithm} holder")
            } else {
                format!(
                    "{} lock(s) held by {algorithm} holders: {}",
                    held.count,
                    sampled_list(&named, held.count, "locks")
                )
            },
            &remedies,
        )
    }

    fn quiet(&self, algorithm: Algorithm, quiet: Duration) -> Guard {
        let name = format!("no {algorithm} activity within the quiet period");
        match self.evidence.last_seen(algorithm) {
            None => Guard::judged(name, format!("no {algorithm} activity ever seen"), &[]),
            // A node's promise (R8): it may start acquisitions until then.
            Some(at) if at > self.evidence.now => Guard::judged(
                name,
                format!(
                    "{algorithm} may be in use for another {} (a node's heartbeat allows it), then the quiet period {}",
                    fmt_duration(round_secs(at.duration_since(self.evidence.now))),
                    fmt_duration(quiet)
                ),
                &[Remedy::activity(algorithm, true)],
            ),
            Some(at) => {
                let ago = self.evidence.now.duration_since(at);
                let remedies = if ago > quiet {
                    Vec::new()
                } else {
                    vec![Remedy::activity(algorithm, false)]
                };
                Guard::judged(
                    name,
                    format!(
                        "{algorithm} activity seen {} ago (quiet period {})",
                        fmt_duration(round_secs(ago)),
                        fmt_duration(quiet)
                    ),
                    &remedies,
                )
            }
        }
    }
}

/// At most this many items are named in a guard's detail; the rest are
/// counted. A refusal with 5 000 locks held once stored a 225 KB detail in
/// the history, printed by every later `status`.
const NAMED_IN_DETAIL: usize = 10;

/// `items` joined by ", ", the first [`NAMED_IN_DETAIL`] of them, then
/// "…and 4 990 more {noun}".
fn bounded_list(items: &[String], noun: &str) -> String {
    sampled_list(items, items.len(), noun)
}

/// The first of `items` (of `count` in all) named, the rest counted.
fn sampled_list(items: &[String], count: usize, noun: &str) -> String {
    let named = items.len().min(NAMED_IN_DETAIL);
    let mut text = items[..named].join(", ");
    if count > named {
        text.push_str(&format!(
            " …and {} more {noun}",
            group_thousands(count - named)
        ));
    }
    text
}

/// `4990` as `4 990`.
fn group_thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

fn round_secs(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs())
}

#[cfg(test)]
#[path = "rollout_tests.rs"]
mod tests;
