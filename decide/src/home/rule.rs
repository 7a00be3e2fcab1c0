//! Home rules: the default rule and prefix rules, which locks each covers,
//! and the one check every way of writing a prefix rule goes through.

use std::fmt;

use crate::id::{MAX_LOCK_ID_LEN, cut_short};

/// A home rule: which locks it covers.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// Every lock no prefix rule covers, and the fleet's rows.
    Default,
    /// Locks whose names start with this (non-empty) prefix.
    Prefix(String),
}

const DEFAULT_KEY: &str = "default";
const PREFIX_KEY: &str = "prefix:";

/// A prefix no homes record may be written for, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid home prefix {shown}: {why}")]
pub struct InvalidPrefix {
    shown: String,
    why: &'static str,
}

impl Rule {
    /// The prefix rule of `prefix`, if a record of it may be written: the
    /// one check the command line (`migrate home move --prefix`), the
    /// settings (`lock.homes`), a move and a seed all go through, so that
    /// no homes record is written that a build cannot decode or that
    /// homes no lock.
    ///
    /// Refused: an empty prefix — its column `prefix:` decodes as no rule
    /// in any build ([`Rule::from_key`]), so every process would refuse
    /// every lock and the fleet's rows until the cell is removed; and a
    /// prefix no lock id can start with (longer than a lock id may be,
    /// holding a control character, or starting with whitespace), which
    /// is a typo: its rule would home nothing.
    ///
    /// # Errors
    /// [`InvalidPrefix`] naming the rule broken, with the prefix cut short.
    pub fn prefix(prefix: impl Into<String>) -> Result<Rule, InvalidPrefix> {
        let prefix = prefix.into();
        let invalid = |why| InvalidPrefix {
            shown: format!("{:?}", cut_short(&prefix)),
            why,
        };
        if prefix.is_empty() {
            return Err(invalid(
                "it is empty (the default rule has no prefix: leave the prefix out to \
                 move it)",
            ));
        }
        if prefix.len() > MAX_LOCK_ID_LEN {
            return Err(invalid(
                "it is longer than a lock id may be (256 bytes), so it homes no lock",
            ));
        }
        if prefix.chars().any(char::is_control) {
            return Err(invalid(
                "it holds a control character, which no lock id does, so it homes no lock",
            ));
        }
        if prefix.starts_with(char::is_whitespace) {
            return Err(invalid(
                "it starts with whitespace, which no lock id does, so it homes no lock",
            ));
        }
        Ok(Rule::Prefix(prefix))
    }

    /// The column of this rule's record in [`HOMES_ROW`](super::HOMES_ROW): `default`, or
    /// `prefix:` and the prefix.
    pub fn key(&self) -> String {
        match self {
            Rule::Default => DEFAULT_KEY.to_string(),
            Rule::Prefix(p) => format!("{PREFIX_KEY}{p}"),
        }
    }

    /// The rule a column names; `None` for a column that names none.
    ///
    /// Looser than [`Rule::prefix`] on purpose: it decodes what earlier
    /// builds wrote (any non-empty prefix), and a record it stopped
    /// decoding would refuse every lock.
    pub fn from_key(key: &str) -> Option<Rule> {
        if key == DEFAULT_KEY {
            return Some(Rule::Default);
        }
        key.strip_prefix(PREFIX_KEY)
            .filter(|p| !p.is_empty())
            .map(|p| Rule::Prefix(p.to_string()))
    }

    /// Whether the rule covers the lock `name` (not whether it is the rule
    /// that decides it: see [`rule_for`]).
    pub fn covers(&self, name: &str) -> bool {
        match self {
            Rule::Default => true,
            Rule::Prefix(p) => name.starts_with(p.as_str()),
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Rule::Default => 0,
            Rule::Prefix(p) => p.len(),
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Default => f.write_str("the default rule"),
            Rule::Prefix(p) => write!(f, "prefix {:?}", cut_short(p)),
        }
    }
}

/// The rule of `rules` that decides the lock `name`: the longest prefix
/// rule that covers it, else the default rule (whether or not `rules`
/// holds it).
pub fn rule_for<'r>(rules: impl IntoIterator<Item = &'r Rule>, name: &str) -> Rule {
    rules
        .into_iter()
        .filter(|r| r.covers(name))
        .max_by_key(|r| r.len())
        .cloned()
        .unwrap_or(Rule::Default)
}

/// The rule a new prefix rule takes its locks from: the longest existing
/// rule that covers every lock the prefix covers (H3: a new rule is a move
/// away from it, written through its home).
pub fn covering_rule<'r>(rules: impl IntoIterator<Item = &'r Rule>, prefix: &str) -> Rule {
    rules
        .into_iter()
        .filter(|r| match r {
            Rule::Default => true,
            Rule::Prefix(p) => prefix.starts_with(p.as_str()) && p.len() < prefix.len(),
        })
        .max_by_key(|r| r.len())
        .cloned()
        .unwrap_or(Rule::Default)
}
