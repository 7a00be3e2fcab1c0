//! The rollout as data: the stage as stored ([`StageRecord`]), its
//! history ([`HistoryEntry`]), the evidence the guards look at
//! ([`Evidence`]), a guard's and a transition's verdict ([`Guard`],
//! [`Verdict`]), and which edges the rollout may take
//! ([`edge_refusal`]). Reading and writing the stage and the history,
//! gathering the evidence and moving the stage under the rollout lock is
//! I/O and lives with the rollout; docs/design.md §4 gives the stages and
//! their guards.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::algorithm::{Algorithm, Stage};
use crate::cell::Timestamp;
use crate::census::Census;
use crate::registry::LiveNode;
use crate::remedy::Remedy;
use crate::schema;

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
            Algorithm::Legacy => self.census.legacy_activity().next().is_some(),
            other => self.census.cells.iter().any(|c| {
                c.table != schema::QUEUE
                    && c.lock != ROLLOUT_LOCK
                    && c.owner.algorithm == Some(other)
            }),
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
