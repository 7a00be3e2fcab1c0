//! Judging a move of a home (H3, H4, docs/design.md §4a): what the
//! operator asks, what the datacenters show, and why the move may not be
//! made now.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{HomeRecord, Rule, covering_rule};
use crate::cell::Timestamp;
use crate::datacenter::Datacenter;

/// What the operator asks of a move.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveAsk {
    /// The rule to move (a prefix rule not recorded yet is created).
    pub rule: Rule,
    /// The new home.
    pub to: Datacenter,
    /// Move without the current home's consent (H4).
    pub force: bool,
}

/// What a move is judged on: the homes row as read from each datacenter.
#[derive(Clone, Debug, Default)]
pub struct MoveScene {
    /// Every datacenter of the cluster.
    pub datacenters: Vec<Datacenter>,
    /// The records each datacenter answered with; a datacenter that did
    /// not answer is absent.
    pub read: BTreeMap<Datacenter, Vec<(Rule, HomeRecord)>>,
    /// Now, by the operator's clock.
    pub now: Timestamp,
}

impl MoveScene {
    /// The newest record of `rule` any datacenter showed (by
    /// [`HomeRecord::rank`]).
    pub fn newest(&self, rule: &Rule) -> Option<&HomeRecord> {
        self.read
            .values()
            .flatten()
            .filter(|(r, _)| r == rule)
            .map(|(_, rec)| rec)
            .max_by_key(|rec| rec.rank())
    }

    /// Every rule any datacenter showed.
    pub fn rules(&self) -> Vec<Rule> {
        let mut rules: Vec<Rule> = self
            .read
            .values()
            .flatten()
            .map(|(r, _)| r.clone())
            .collect();
        rules.sort();
        rules.dedup();
        rules
    }
}

/// A move's place in the homes: the record it replaces (for a new prefix
/// rule, the record of the rule it takes its locks from) and the version
/// it writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MovePlan {
    /// The rule whose record the move replaces or takes locks from.
    pub from_rule: Rule,
    /// That rule's newest record.
    pub from: HomeRecord,
    /// The version the move writes.
    pub version: u64,
    /// The move completes `from`, a pending record of the same rule and
    /// version (H6): it writes `from` again, waits for that write's
    /// acknowledgement, then writes it serving.
    pub completes: bool,
    /// The move is made already — `from` names the new home and is not
    /// pending — but these datacenters answered without it (a write of
    /// the move that failed, a hint lost): the move copies `from` to them
    /// as it is, at its own stamp, which is what replication would have
    /// done. Empty for every other move.
    pub spreads_to: Vec<Datacenter>,
}

impl MovePlan {
    /// The home the move takes the rule from, whose consent a planned
    /// move needs: for a move that completes a pending one, the home that
    /// one moves from.
    pub fn old_home(&self) -> &Datacenter {
        match (&self.from.moved_from, self.completes) {
            (Some(old), true) => old,
            _ => &self.from.datacenter,
        }
    }
}

/// The datacenters that answered `scene` showing a record of `rule` below
/// `newest` in rank, or none.
fn lacking(scene: &MoveScene, rule: &Rule, newest: &HomeRecord) -> Vec<Datacenter> {
    scene
        .read
        .iter()
        .filter(|(_, records)| {
            !records
                .iter()
                .any(|(r, rec)| r == rule && rec.rank() >= newest.rank())
        })
        .map(|(dc, _)| dc.clone())
        .collect()
}

/// Why a move may not be made now; each names what to do instead.
pub fn move_refusals(ask: &MoveAsk, scene: &MoveScene) -> (Option<MovePlan>, Vec<String>) {
    let mut refusals = Vec::new();
    // The one check of a prefix (`Rule::prefix`): a record no build can
    // decode would stop the whole fleet.
    if let Rule::Prefix(p) = &ask.rule
        && let Err(e) = Rule::prefix(p.as_str())
    {
        refusals.push(e.to_string());
        return (None, refusals);
    }
    if !scene.datacenters.contains(&ask.to) {
        refusals.push(format!(
            "{} is not a datacenter of this cluster (it has {})",
            ask.to,
            scene
                .datacenters
                .iter()
                .map(Datacenter::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let (from_rule, from) = source(ask, scene);
    let Some(from) = from else {
        refusals.push(
            "no home is recorded for these locks yet: a fleet takes its first homes from \
             lock.home_datacenter / lock.homes in its settings (docs/operating.md, \
             \"Several datacenters\")"
                .to_string(),
        );
        return (None, refusals);
    };
    // A pending record of this rule (H6) is completed by asking for the
    // same move again; nothing else moves the rule until it is.
    let completes = from.pending && from_rule == ask.rule;
    if completes && (from.datacenter != ask.to || from.moved_from.is_none()) {
        refusals.push(unfinished(&from_rule, &from));
    }
    // The move is made (its record names the new home and serves, or
    // waits to): asked again, it copies the record to every datacenter
    // that answered without it — no new decision, so no consent needed.
    let made = from_rule == ask.rule && from.datacenter == ask.to && !from.pending;
    let spreads_to = if made {
        lacking(scene, &ask.rule, &from)
    } else {
        Vec::new()
    };
    if !spreads_to.is_empty() {
        let plan = MovePlan {
            from_rule,
            version: from.version,
            from,
            completes: false,
            spreads_to,
        };
        return (Some(plan), refusals);
    }
    let version = if completes {
        from.version
    } else if from_rule == ask.rule {
        from.version + 1
    } else {
        1
    };
    if made {
        refusals.push(format!("{} is homed in {} already", ask.rule, ask.to));
    }
    if !completes && !from.serves_at(scene.now) {
        refusals.push(format!(
            "the last move of {from_rule} (to {}, version {}) has not finished: its home \
             serves from {}; move again after that",
            from.datacenter,
            from.version,
            fmt_micros(from.serves_from)
        ));
    }
    let plan = MovePlan {
        from_rule: from_rule.clone(),
        from: from.clone(),
        version,
        completes,
        spreads_to: Vec::new(),
    };
    refusals.extend(consent(ask, scene, &plan));
    (Some(plan), refusals)
}

/// The rule a move of `ask.rule` moves from, and its newest record: the
/// rule itself, or for a prefix with no record yet the rule covering it.
fn source(ask: &MoveAsk, scene: &MoveScene) -> (Rule, Option<HomeRecord>) {
    match scene.newest(&ask.rule).cloned() {
        Some(rec) => (ask.rule.clone(), Some(rec)),
        None => match &ask.rule {
            Rule::Default => (Rule::Default, None),
            Rule::Prefix(p) => {
                let covering = covering_rule(scene.rules().iter(), p);
                let rec = scene.newest(&covering).cloned();
                (covering, rec)
            }
        },
    }
}

/// Why `from`, a pending record of `from_rule`, must be completed before
/// its rule moves anywhere else.
fn unfinished(from_rule: &Rule, from: &HomeRecord) -> String {
    match &from.moved_from {
        Some(old) => format!(
            "a move of {from_rule} from {old} to {} (version {}) is pending: its first \
                 write was never acknowledged, so it serves nowhere yet; complete it first \
                 (the same move again, to {}), then move it elsewhere",
            from.datacenter, from.version, from.datacenter
        ),
        None => format!(
            "the home of {from_rule} in {} (version {}) was seeded and not confirmed: the \
                 fleet's processes complete it when they start; move it once it serves",
            from.datacenter, from.version
        ),
    }
}

/// Whether the homes `plan` moves between consent: the current home
/// reached and current (or, with `--force`, not answering), the new home
/// reached.
fn consent(ask: &MoveAsk, scene: &MoveScene, plan: &MovePlan) -> Vec<String> {
    let mut refusals = Vec::new();
    let (from_rule, from, completes) = (&plan.from_rule, &plan.from, plan.completes);
    let old_home = plan.old_home().clone();
    let home_read = scene.read.get(&old_home);
    // A move that completes a pending one writes that one again first.
    let home_current = completes
        || home_read.is_some_and(|records| {
            records
                .iter()
                .any(|(r, rec)| r == from_rule && rec.version == from.version)
        });
    match (ask.force, home_read) {
        (false, None) => refusals.push(format!(
            "the current home {} cannot be reached: a planned move lands only through it. \
             If {} is gone — not merely cut off from here — `--force` moves the home \
             without it; a home that is only cut off keeps serving its own side until it \
             can read the move, so both sides would hold locks",
            old_home, old_home
        )),
        (false, Some(_)) if !home_current => refusals.push(format!(
            "the current home {} does not show version {} of {from_rule} yet (another \
             datacenter does): try again once it has caught up",
            old_home, from.version
        )),
        (true, Some(_)) => refusals.push(format!(
            "--force is for a home that cannot consent, and {} answers: move it without \
             --force",
            old_home
        )),
        _ => {}
    }
    if scene.datacenters.contains(&ask.to) && !scene.read.contains_key(&ask.to) {
        refusals.push(format!(
            "the new home {} cannot be reached from here: the move is written there",
            ask.to
        ));
    }
    refusals
}

/// A time in µs since the epoch as an operator reads it (RFC 3339, UTC).
///
/// A record is data another process (or a hand) wrote: a time before the
/// epoch reads as the epoch, and one RFC 3339 cannot write (after the year
/// 9999) as its µs, never a panic.
pub fn fmt_micros(us: i64) -> String {
    use std::fmt::Write as _;
    let since_epoch = Duration::from_micros(u64::try_from(us).unwrap_or(0));
    let mut text = String::new();
    match std::time::UNIX_EPOCH.checked_add(since_epoch) {
        Some(at) if write!(text, "{}", humantime::format_rfc3339_seconds(at)).is_ok() => text,
        _ => format!("{us} µs after 1970-01-01T00:00:00Z"),
    }
}
