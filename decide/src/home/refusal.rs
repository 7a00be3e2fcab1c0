//! Why a request of a row may not be sent now, in words an operator can
//! act on (docs/design.md §4a, H2–H4).

use std::time::Duration;

use super::{Rule, Subject};
use crate::datacenter::Datacenter;
use crate::duration::fmt_duration_rounded;

/// Why no request of a row may be sent now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The rule's home could not be confirmed lately (H2): it is out of
    /// reach, or its record could not be read from it.
    Unconfirmed {
        /// The rule.
        rule: Rule,
        /// Its home, as last read.
        home: Datacenter,
        /// How long since the view was last confirmed; `None`: never since
        /// the process started.
        since: Option<Duration>,
        /// The last failure reading the record from the home, if any.
        last_error: Option<String>,
    },
    /// The rule's home moved, and the new home does not serve yet (H3).
    Moving {
        /// The rule.
        rule: Rule,
        /// The new home.
        home: Datacenter,
        /// The previous one.
        from: Option<Datacenter>,
        /// How long until it serves.
        in_: Duration,
    },
    /// The rule's newest record is pending (H6): a move or a seed whose
    /// first write was never acknowledged, or whose writer stopped before
    /// it wrote the record serving. It serves nowhere until an operator
    /// completes it.
    Pending {
        /// The rule.
        rule: Rule,
        /// The home the pending record names.
        home: Datacenter,
        /// The home it moves from, if it is a move.
        from: Option<Datacenter>,
        /// Its version.
        version: u64,
    },
    /// The rule's newest record names a home that answers but does not
    /// show that record yet (H2): the write of a move reached the old home
    /// and not yet the new one — replication brings it, or, when it never
    /// comes (a hint lost), the same move asked again copies it there.
    Behind {
        /// The rule.
        rule: Rule,
        /// The home the newest record names.
        home: Datacenter,
        /// The newest record's version.
        version: u64,
        /// What the home shows of the rule instead: a version (`true`
        /// when it is that version's pending record), or nothing.
        shows: Option<(u64, bool)>,
    },
    /// No rule covers the row, but in a cluster of several datacenters
    /// that is only known while every datacenter's homes row was read
    /// lately (H5): a rule recorded in one not read could home the row
    /// elsewhere.
    Unsurveyed {
        /// The datacenters not read lately, each with how long since its
        /// last read (`None`: never since the process started).
        datacenters: Vec<(Datacenter, Option<Duration>)>,
        /// The last failure reading the homes row from one of them.
        last_error: Option<String>,
    },
    /// A cell of the homes row that could decide the row does not decode
    /// (written by a newer build, or by hand): where its rule homes the
    /// row is unknown.
    Unreadable(Unreadable),
}

/// A cell of the homes row that does not decode, as one datacenter
/// showed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreadable {
    /// The rule its column names; `None` for a column that names no rule
    /// this build knows (it could cover any lock).
    pub rule: Option<Rule>,
    /// The column, cut short.
    pub column: String,
    /// The datacenter that showed it.
    pub datacenter: Datacenter,
    /// Why it does not decode, cut short.
    pub error: String,
}

impl Unreadable {
    /// Whether the cell could decide `subject`'s rows, where `decided` is
    /// the rule that would decide them without it: its rule covers them
    /// and is longer, or it names no rule known.
    pub fn could_decide(&self, subject: Subject<'_>, decided: Option<&Rule>) -> bool {
        let Some(rule) = &self.rule else {
            return !matches!(subject, Subject::Unhomed);
        };
        let covers = match subject {
            Subject::Unhomed => false,
            Subject::Fleet => *rule == Rule::Default,
            Subject::Lock(name) => rule.covers(name),
        };
        covers && decided.is_none_or(|d| rule.len() >= d.len())
    }
}

impl Refusal {
    /// When trying again here succeeds by itself: in the time a moving
    /// home takes to serve (H3). `None` for every other refusal — an
    /// unreachable home, a pending or unreadable record — whose end no
    /// process knows.
    pub fn serves_in(&self) -> Option<Duration> {
        match self {
            Refusal::Moving { in_, .. } => Some(*in_),
            _ => None,
        }
    }

    /// The refusal in words, for the row of `subject`, from a process in
    /// `local` (when it named its datacenter).
    pub fn describe(&self, subject: Subject<'_>, local: Option<&Datacenter>) -> String {
        let (what, is) = match subject {
            Subject::Lock(name) => (format!("lock {:?}", crate::id::cut_short(name)), "is"),
            Subject::Fleet | Subject::Unhomed => {
                ("the fleet's rows (stage, registry)".to_string(), "are")
            }
        };
        let here = local.map_or_else(String::new, |dc| format!(" (in {dc})"));
        match self {
            Refusal::Unconfirmed {
                rule,
                home,
                since,
                last_error,
            } => {
                let when = match since {
                    Some(d) => format!("for {}", fmt_duration_rounded(*d)),
                    None => "since it started".to_string(),
                };
                let why = last_error.as_deref().map_or_else(String::new, |e| {
                    format!(" (reading the homes record there: {e})")
                });
                format!(
                    "{what} {is} homed in datacenter {home} ({rule}), which this process{here} \
                     has not reached {when}{why}"
                )
            }
            Refusal::Moving {
                rule,
                home,
                from,
                in_,
            } => {
                let from = from
                    .as_ref()
                    .map_or_else(String::new, |f| format!(" from {f}"));
                format!(
                    "{what} ({rule}) {is} moving{from} to datacenter {home}, which takes over \
                     in {}",
                    fmt_duration_rounded(*in_)
                )
            }
            Refusal::Pending {
                rule,
                home,
                from,
                version,
            } => pending_text(
                Wording { what: &what, is },
                rule,
                home,
                from.as_ref(),
                *version,
            ),
            Refusal::Behind {
                rule,
                home,
                version,
                shows,
            } => behind_text(Wording { what: &what, is }, rule, home, *version, *shows),
            Refusal::Unsurveyed {
                datacenters,
                last_error,
            } => {
                let missing = datacenters
                    .iter()
                    .map(|(dc, since)| match since {
                        Some(d) => format!("{dc} (for {})", fmt_duration_rounded(*d)),
                        None => format!("{dc} (since it started)"),
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                let why = last_error
                    .as_deref()
                    .map_or_else(String::new, |e| format!(" ({e})"));
                format!(
                    "{what} {is} homed by no rule this process{here} knows, but it has not read \
                     the homes of datacenter {missing}{why}: a home recorded there could decide \
                     {it}, so {it} {is} refused until it does",
                    it = if is == "is" { "it" } else { "they" },
                )
            }
            Refusal::Unreadable(cell) => format!(
                "{what} {is} refused: the homes record {:?} that datacenter {} shows does not \
                 decode ({}), so where it homes {} is unknown; fix or remove that cell \
                 (`migrate home` lists the records)",
                cell.column,
                cell.datacenter,
                cell.error,
                if is == "is" { "it" } else { "them" },
            ),
        }
    }
}

/// What a refusal is about, as its sentence starts: `lock "a"` and `is`,
/// or `the fleet's rows (…)` and `are`.
#[derive(Clone, Copy)]
struct Wording<'a> {
    what: &'a str,
    is: &'a str,
}

/// The `--prefix` flag that names `rule` to `migrate home move`.
fn prefix_flag(rule: &Rule) -> String {
    match rule {
        Rule::Default => String::new(),
        Rule::Prefix(p) => format!(" --prefix {p:?}"),
    }
}

/// [`Refusal::Pending`] in words.
fn pending_text(
    said: Wording<'_>,
    rule: &Rule,
    home: &Datacenter,
    from: Option<&Datacenter>,
    version: u64,
) -> String {
    let Wording { what, is } = said;
    let it = if is == "is" { "it" } else { "them" };
    let prefix = prefix_flag(rule);
    match from {
        Some(from) => format!(
            "{what} ({rule}) {is} moving from {from} to datacenter {home}, but the \
             move (version {version}) was never confirmed — its first write was not \
             acknowledged, or its writer stopped — so no datacenter serves {it}: \
             complete it with `migrate home move{prefix} --to {home}`"
        ),
        None => format!(
            "{what} ({rule}) {is} being homed in datacenter {home}, but the record \
             (version {version}) was never confirmed — a write of it was not \
             acknowledged, or its writer stopped — so no datacenter serves {it} \
             until a process of the fleet starts and completes it"
        ),
    }
}

/// [`Refusal::Behind`] in words.
fn behind_text(
    said: Wording<'_>,
    rule: &Rule,
    home: &Datacenter,
    version: u64,
    shows: Option<(u64, bool)>,
) -> String {
    let Wording { what, is } = said;
    let it = if is == "is" { "it" } else { "they" };
    let shows = match shows {
        Some((v, true)) => format!("version {v}, pending"),
        Some((v, false)) => format!("version {v}"),
        None => "no record of it".to_string(),
    };
    let prefix = prefix_flag(rule);
    format!(
        "{what} ({rule}) {is} homed in datacenter {home} by version {version} of \
         its record, which {home} does not show yet (it shows {shows}): {it} \
         {is} served once {home} has it. Replication brings it; if it never \
         comes (a hint lost), `migrate home move{prefix} --to {home}` copies it \
         there"
    )
}
