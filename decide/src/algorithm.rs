//! The lock algorithms, the mode a node is configured with, the rollout
//! stages (docs/design.md §4), and how a node's configured mode resolves
//! against the current stage.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::id::cut_short;

/// The lock algorithms lockshift runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// The main/shadow lock (thesis listings 4–5).
    Legacy,
    /// The combined lock (thesis §7.2): queue order, shadow entry, main re-read.
    Combined,
    /// The fair queue lock (thesis listings 6–8).
    Queue,
}

impl Algorithm {
    /// Every algorithm, in rollout order.
    pub const ALL: [Algorithm; 3] = [Algorithm::Legacy, Algorithm::Combined, Algorithm::Queue];

    /// Lowercase name, as in config and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Legacy => "legacy",
            Algorithm::Combined => "combined",
            Algorithm::Queue => "queue",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Algorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown algorithm {:?}; expected legacy, combined or queue",
                    cut_short(s)
                )
            })
    }
}

/// `node.mode`: an algorithm, or `auto` to follow the rollout stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Mode {
    /// The main/shadow lock.
    Legacy,
    /// The combined lock: safe beside both others.
    Combined,
    /// The fair queue lock.
    Queue,
    /// Whatever the current stage prefers.
    #[default]
    Auto,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 4] = [Mode::Legacy, Mode::Combined, Mode::Queue, Mode::Auto];

    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Legacy => "legacy",
            Mode::Combined => "combined",
            Mode::Queue => "queue",
            Mode::Auto => "auto",
        }
    }

    /// The algorithm this mode names, `None` for `auto`.
    pub fn algorithm(self) -> Option<Algorithm> {
        match self {
            Mode::Legacy => Some(Algorithm::Legacy),
            Mode::Combined => Some(Algorithm::Combined),
            Mode::Queue => Some(Algorithm::Queue),
            Mode::Auto => None,
        }
    }
}

impl From<Algorithm> for Mode {
    fn from(a: Algorithm) -> Self {
        match a {
            Algorithm::Legacy => Mode::Legacy,
            Algorithm::Combined => Mode::Combined,
            Algorithm::Queue => Mode::Queue,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown mode {:?}; expected legacy, combined, queue or auto",
                    cut_short(s)
                )
            })
    }
}

impl TryFrom<String> for Mode {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Mode> for String {
    fn from(m: Mode) -> String {
        m.as_str().to_string()
    }
}

/// The cluster-wide rollout stage, stored in the `rollout` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Stage {
    /// Initial: legacy and combined nodes.
    Legacy,
    /// Combined only: no legacy node, no queue node.
    Dual,
    /// Combined and queue nodes.
    Queue,
    /// Queue only; shadow rows may be dropped.
    Complete,
}

impl Stage {
    /// Every stage, in rollout order.
    pub const ALL: [Stage; 4] = [Stage::Legacy, Stage::Dual, Stage::Queue, Stage::Complete];

    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Legacy => "legacy",
            Stage::Dual => "dual",
            Stage::Queue => "queue",
            Stage::Complete => "complete",
        }
    }

    /// The algorithms nodes may run at this stage. Every pair within one
    /// stage, and every pair across two adjacent stages, is a safe pair of
    /// the safety table: legacy and queue never share a stage or a pair of
    /// adjacent stages.
    pub fn allowed(self) -> &'static [Algorithm] {
        match self {
            Stage::Legacy => &[Algorithm::Legacy, Algorithm::Combined],
            Stage::Dual => &[Algorithm::Combined],
            Stage::Queue => &[Algorithm::Combined, Algorithm::Queue],
            Stage::Complete => &[Algorithm::Queue],
        }
    }

    /// Whether nodes may run `algorithm` at this stage.
    pub fn allows(self, algorithm: Algorithm) -> bool {
        self.allowed().contains(&algorithm)
    }

    /// What `auto` runs: the newest algorithm the stage allows. At `legacy`
    /// that is combined, so a fleet on `auto` is ready for `dual` at once.
    pub fn preferred(self) -> Algorithm {
        match self {
            Stage::Legacy | Stage::Dual => Algorithm::Combined,
            Stage::Queue | Stage::Complete => Algorithm::Queue,
        }
    }

    /// The stage after this one.
    pub fn next(self) -> Option<Stage> {
        match self {
            Stage::Legacy => Some(Stage::Dual),
            Stage::Dual => Some(Stage::Queue),
            Stage::Queue => Some(Stage::Complete),
            Stage::Complete => None,
        }
    }

    /// The stage before this one.
    pub fn previous(self) -> Option<Stage> {
        match self {
            Stage::Legacy => None,
            Stage::Dual => Some(Stage::Legacy),
            Stage::Queue => Some(Stage::Dual),
            Stage::Complete => Some(Stage::Queue),
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Stage {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Stage::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown stage {:?}; expected legacy, dual, queue or complete",
                    cut_short(s)
                )
            })
    }
}

impl TryFrom<String> for Stage {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Stage> for String {
    fn from(s: Stage) -> String {
        s.as_str().to_string()
    }
}

/// What a node runs for new acquisitions, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolution {
    /// The algorithm for new acquisitions.
    pub algorithm: Algorithm,
    /// `Some(mode)` when the configured mode was not allowed and the node
    /// fell back to combined.
    pub degraded_from: Option<Mode>,
}

/// Resolves a configured mode against the stage (`None`: the stage is not
/// known, e.g. the store could not be read at start).
///
/// A mode the stage forbids degrades to combined, which is safe beside
/// every other algorithm — never to anything else. So does any explicit
/// mode while the stage is unknown; `auto` then also runs combined.
pub fn resolve(mode: Mode, stage: Option<Stage>) -> Resolution {
    let combined = |degraded_from| Resolution {
        algorithm: Algorithm::Combined,
        degraded_from,
    };
    match (mode.algorithm(), stage) {
        (None, Some(stage)) => Resolution {
            algorithm: stage.preferred(),
            degraded_from: None,
        },
        (None, None) => combined(None),
        (Some(Algorithm::Combined), _) => combined(None),
        (Some(a), Some(stage)) if stage.allows(a) => Resolution {
            algorithm: a,
            degraded_from: None,
        },
        (Some(_), _) => combined(Some(mode)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The safety table (docs/design.md §3): which pairs of algorithms may run at
    /// the same time.
    fn safe_pair(a: Algorithm, b: Algorithm) -> bool {
        !matches!(
            (a, b),
            (Algorithm::Legacy, Algorithm::Queue) | (Algorithm::Queue, Algorithm::Legacy)
        )
    }

    #[test]
    fn no_stage_or_adjacent_pair_of_stages_mixes_legacy_and_queue() {
        for stage in Stage::ALL {
            let mut reachable: Vec<Algorithm> = stage.allowed().to_vec();
            // A node may act on the previous or next stage for one re-read period.
            for neighbour in [stage.previous(), stage.next()].into_iter().flatten() {
                reachable.extend(neighbour.allowed());
            }
            for a in stage.allowed() {
                for b in &reachable {
                    assert!(safe_pair(*a, *b), "{stage}: {a} beside {b}");
                }
            }
        }
    }

    #[test]
    fn forbidden_modes_degrade_to_combined_never_elsewhere() {
        for stage in Stage::ALL {
            for mode in Mode::ALL {
                let r = resolve(mode, Some(stage));
                // Combined is the fallback even where the stage does not list
                // it (complete): it is safe beside queue.
                assert!(
                    stage.allows(r.algorithm) || r.algorithm == Algorithm::Combined,
                    "{mode} at {stage} runs {}",
                    r.algorithm
                );
                match mode.algorithm() {
                    // Combined is never refused: it runs as configured.
                    Some(a) if stage.allows(a) || a == Algorithm::Combined => {
                        assert_eq!((r.algorithm, r.degraded_from), (a, None))
                    }
                    Some(_) => assert_eq!(
                        (r.algorithm, r.degraded_from),
                        (Algorithm::Combined, Some(mode))
                    ),
                    None => assert_eq!(r.algorithm, stage.preferred()),
                }
            }
        }
        // At complete only queue is allowed; a node configured legacy still
        // degrades to combined (safe beside queue), not to queue.
        assert_eq!(
            resolve(Mode::Legacy, Some(Stage::Complete)).algorithm,
            Algorithm::Combined
        );
        assert_eq!(
            resolve(Mode::Queue, Some(Stage::Legacy)).algorithm,
            Algorithm::Combined
        );
        assert_eq!(resolve(Mode::Queue, None).algorithm, Algorithm::Combined);
        assert_eq!(resolve(Mode::Auto, None).algorithm, Algorithm::Combined);
    }

    #[test]
    fn stages_parse_with_a_clear_error() {
        assert_eq!("dual".parse::<Stage>(), Ok(Stage::Dual));
        assert_eq!(
            "qeue".parse::<Stage>(),
            Err("unknown stage \"qeue\"; expected legacy, dual, queue or complete".to_string())
        );
        assert_eq!(Stage::Legacy.next(), Some(Stage::Dual));
        assert_eq!(Stage::Legacy.previous(), None);
        assert_eq!(Stage::Complete.next(), None);
    }
}
