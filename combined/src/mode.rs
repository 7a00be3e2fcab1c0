//! The algorithm a node runs for new acquisitions, as configured.

use std::fmt;
use std::str::FromStr;

use lockshift_lock::Algorithm;
use serde::{Deserialize, Serialize};

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
                    lockshift_lock::cut_short(s)
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
