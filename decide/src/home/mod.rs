//! Homes: which datacenter decides each lock, and what a process believes
//! about it (docs/design.md §4a, H1–H4).
//!
//! A lock's cells — `main`, `shadow`, `queue`, its fencing cell — are read
//! and written at `LOCAL_QUORUM` through coordinators of one datacenter,
//! the lock's *home*, from every client wherever it runs, so Lemma 1 holds
//! fleet-wide (H1). The fleet's own rows (the rollout stage, the registry,
//! the activity record, the rollout lock, `GlobalTime`) live at the home of
//! the default rule, the *fleet home*.
//!
//! Homes are *rules*: the default rule covers every lock, a prefix rule the
//! locks whose names start with its prefix (the longest matching prefix
//! wins). Each rule's home is a [`HomeRecord`] in the `rollout` table's row
//! [`HOMES_ROW`], one cell per rule ([`Rule::key`]); records are
//! authoritative, and a process's settings only seed a rule that has no
//! record yet.
//!
//! A process's [`Homes`] is its view of every rule: the newest record it
//! read, and when a read *from that record's own datacenter* last showed it
//! (H2). [`Homes::route`] answers where a row's requests go, or why none
//! may be sent now: the view is not confirmed (H2), a moved home does not
//! serve yet (H3), no rule is known to cover the row while some
//! datacenter's homes were not read lately (H5), or a record that could
//! decide it does not decode. This module decides; the rollout crate reads the
//! row and routes the requests.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::cell::{Table, Timestamp};
use crate::datacenter::Datacenter;
use crate::rollout::ROLLOUT_LOCK;
use crate::schema;

mod moves;
mod refusal;
mod rule;

pub use moves::{MoveAsk, MovePlan, MoveScene, fmt_micros, move_refusals};
pub use refusal::{Refusal, Unreadable};
pub use rule::{InvalidPrefix, Rule, covering_rule, rule_for};

/// The row of the `rollout` table holding the homes, one cell per rule.
pub const HOMES_ROW: &str = "homes";

/// The row of the `global_time` table holding the time service's
/// `GlobalTime` cell (a fleet row; every other row of that table is a
/// lock's fencing cell).
pub const GLOBAL_TIME_ROW: &str = "global";

/// The base of the write timestamps of records seeded from settings
/// ([`seed_stamp`]): far below every record a move writes (those are
/// stamped with the time in µs), so a move always wins over a seed.
pub const SEED_STAMP: Timestamp = Timestamp::from_micros(1);

/// The write timestamp of a seed written at `now`, stamped for the
/// `round`-th time (0..16): whole seconds since the epoch × 16 + the round,
/// above [`SEED_STAMP`] — so a later seed (one written again after an
/// earlier attempt was cut short, or stamped again) wins over an earlier
/// one on every replica it reaches, two seeds of one second reconcile the
/// same way everywhere (the greater value, S2), and every seed stays some
/// 10⁵ times below any move's stamp.
pub fn seed_stamp(now: Timestamp, round: u8) -> Timestamp {
    let seconds = now.as_micros().max(0) / 1_000_000;
    SEED_STAMP.offset_micros(
        seconds
            .saturating_mul(16)
            .saturating_add(i64::from(round.min(15))),
    )
}

/// What a row of the store belongs to, for routing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subject<'a> {
    /// A lock's row, by the lock's name.
    Lock(&'a str),
    /// One of the fleet's rows: the rollout's, the registry's, `GlobalTime`,
    /// the rollout lock's.
    Fleet,
    /// A row of no home (the scratch table): the store's default route.
    Unhomed,
}

/// What `row` of `table` belongs to.
///
/// A lock named like a fleet row (`lockshift.rollout`, or `global` for its
/// fencing cell) is routed as the fleet's: every client routes it alike,
/// so exclusion and fencing hold; only where it is available differs.
pub fn subject(table: Table, row: &str) -> Subject<'_> {
    match table {
        schema::MAIN | schema::SHADOW | schema::QUEUE if row == ROLLOUT_LOCK => Subject::Fleet,
        schema::MAIN | schema::SHADOW | schema::QUEUE => Subject::Lock(row),
        schema::GLOBAL_TIME if row == GLOBAL_TIME_ROW => Subject::Fleet,
        schema::GLOBAL_TIME => Subject::Lock(row),
        schema::ROLLOUT | schema::NODES => Subject::Fleet,
        _ => Subject::Unhomed,
    }
}

/// One rule's recorded home: a cell of [`HOMES_ROW`], JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HomeRecord {
    /// Increases by one with every move of this rule; a seed is version 1.
    pub version: u64,
    /// The home.
    pub datacenter: Datacenter,
    /// The home serves the rule's locks from this moment on (µs since the
    /// epoch, the writer's clock plus the skew margin): after every lease
    /// and view under the previous home has run out (H3). 0 for a seed of
    /// a fleet that had no other home.
    pub serves_from: i64,
    /// The previous home, for a move.
    #[serde(default)]
    pub moved_from: Option<Datacenter>,
    /// A forced move: made without the consent of the previous home (H4).
    #[serde(default)]
    pub forced: bool,
    /// When it was written (µs, the writer's clock).
    pub at: i64,
    /// Who wrote it: a node id (a seed) or the operator's name.
    pub by: String,
    /// Written, but not yet known to have landed where the wait counts
    /// from (H6): it serves nowhere (`serves_from` is `i64::MAX`, so a
    /// build that predates the field never serves it either) until the
    /// writer, having seen that write acknowledged, writes the same
    /// version again serving.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pending: bool,
}

impl HomeRecord {
    /// A seed: the first record of a rule, version 1, homed at
    /// `datacenter` and serving at once (the fleet had no other home),
    /// written at `at` by `by`.
    pub fn seed(datacenter: Datacenter, by: &str, at: Timestamp) -> HomeRecord {
        HomeRecord {
            version: 1,
            datacenter,
            serves_from: 0,
            moved_from: None,
            forced: false,
            at: at.as_micros(),
            by: by.to_string(),
            pending: false,
        }
    }

    /// Whether the home serves at `now` (the reader's clock): never while
    /// the record is pending (H6).
    pub fn serves_at(&self, now: Timestamp) -> bool {
        !self.pending && now.as_micros() >= self.serves_from
    }

    /// How records of one rule are ordered (H6): by version, and within a
    /// version the serving record above the pending one it completes. Two
    /// records of one rank that differ are two moves that raced.
    pub fn rank(&self) -> (u64, bool) {
        (self.version, !self.pending)
    }

    /// This record as first written, before its landing is known: pending,
    /// serving nowhere (H6).
    pub fn as_pending(&self) -> HomeRecord {
        HomeRecord {
            pending: true,
            serves_from: i64::MAX,
            ..self.clone()
        }
    }
}

/// A process's view of one rule.
#[derive(Clone, Debug)]
struct RuleView {
    /// The newest record read (versions never go back).
    record: HomeRecord,
    /// When the last read from `record.datacenter` that showed exactly
    /// `record` was sent.
    confirmed: Option<Instant>,
    /// What each datacenter showed of this rule in its last read.
    seen: BTreeMap<Datacenter, HomeRecord>,
}

impl RuleView {
    /// Two datacenters show different records of the newest rank: two
    /// operators' moves raced and the store has not reconciled them yet.
    /// (A pending record and the serving one that completes it are of two
    /// ranks: a datacenter that shows the first has not caught up yet.)
    fn conflicted(&self) -> bool {
        self.seen
            .values()
            .any(|r| r.rank() == self.record.rank() && *r != self.record)
    }
}

/// A process's view of every home rule (H2): the newest record of each it
/// has read, and when its home last confirmed it.
#[derive(Clone, Debug)]
pub struct Homes {
    valid_for: Duration,
    views: BTreeMap<Rule, RuleView>,
    /// The last failure reading the homes row from each datacenter.
    failures: BTreeMap<Datacenter, String>,
    /// When the last read of the homes row that answered was sent, by
    /// datacenter (H5).
    surveyed: BTreeMap<Datacenter, Instant>,
    /// The cells each datacenter's last read showed that do not decode.
    unreadable: BTreeMap<Datacenter, Vec<Unreadable>>,
    /// The cluster's datacenters; with more than one, no rule is known
    /// to cover a row only while every one was read lately (H5).
    datacenters: Vec<Datacenter>,
    started: Instant,
}

/// What one rule's view says, for reports (`migrate status`, the
/// heartbeat).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleState {
    /// The rule's key ([`Rule::key`]).
    pub rule: String,
    /// The newest record read.
    pub record: HomeRecord,
    /// Whether the view is confirmed now.
    pub confirmed: bool,
}

impl Homes {
    /// A view that knows no home yet, confirmed for `valid_for` after each
    /// read from a home (`rollout.stage_valid_for`, as a stage view).
    pub fn new(valid_for: Duration, now: Instant) -> Self {
        Homes {
            valid_for,
            views: BTreeMap::new(),
            failures: BTreeMap::new(),
            surveyed: BTreeMap::new(),
            unreadable: BTreeMap::new(),
            datacenters: Vec::new(),
            started: now,
        }
    }

    /// Whether any home is known: without one, every row takes the store's
    /// default route.
    pub fn any(&self) -> bool {
        !self.views.is_empty()
    }

    /// The rules known.
    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.views.keys()
    }

    /// The newest record known of `rule`.
    pub fn record(&self, rule: &Rule) -> Option<&HomeRecord> {
        self.views.get(rule).map(|v| &v.record)
    }

    /// The record of `rule` the last read from `dc` showed, if it showed
    /// one.
    pub fn shown_by(&self, rule: &Rule, dc: &Datacenter) -> Option<&HomeRecord> {
        self.views.get(rule).and_then(|v| v.seen.get(dc))
    }

    /// A read of the homes row from datacenter `from`, sent at `sent`,
    /// returned `records`. A record of a higher rank ([`HomeRecord::rank`]:
    /// a newer version, or the serving record that completes a pending
    /// one) replaces the view (unconfirmed until its own home shows it);
    /// the same record read from its own home confirms it; an older one (a
    /// replica that has not caught up) changes nothing.
    pub fn observe(&mut self, from: &Datacenter, sent: Instant, records: Vec<(Rule, HomeRecord)>) {
        self.failures.remove(from);
        let last = self.surveyed.entry(from.clone()).or_insert(sent);
        *last = (*last).max(sent);
        // A datacenter that no longer shows a rule (it never had it yet)
        // shows nothing of it.
        for (rule, view) in &mut self.views {
            if !records.iter().any(|(r, _)| r == rule) {
                view.seen.remove(from);
            }
        }
        for (rule, record) in records {
            let view = self.views.entry(rule).or_insert_with(|| RuleView {
                record: record.clone(),
                confirmed: None,
                seen: BTreeMap::new(),
            });
            view.seen.insert(from.clone(), record.clone());
            // A higher rank replaces the view. So does the same rank with
            // other contents — two operators' moves that raced, before the
            // store has reconciled them: unconfirmed until a home shows one
            // of them, and refused while datacenters disagree.
            if record.rank() > view.record.rank()
                || (record.rank() == view.record.rank() && record != view.record)
            {
                view.record = record.clone();
                view.confirmed = None;
            }
            if record == view.record && &record.datacenter == from {
                view.confirmed = Some(view.confirmed.map_or(sent, |t| t.max(sent)));
            }
        }
    }

    /// The cells of the homes row the last read from `from` showed that
    /// do not decode (each replaces what `from` showed before).
    pub fn observe_unreadable(&mut self, from: &Datacenter, cells: Vec<Unreadable>) {
        if cells.is_empty() {
            self.unreadable.remove(from);
        } else {
            self.unreadable.insert(from.clone(), cells);
        }
    }

    /// A read of the homes row from `from` failed with `error`.
    pub fn failed(&mut self, from: &Datacenter, error: String) {
        self.failures.insert(from.clone(), error);
    }

    /// The cluster's datacenters, as the store knows them now (an empty
    /// list leaves the last one known).
    pub fn set_datacenters(&mut self, mut datacenters: Vec<Datacenter>) {
        if !datacenters.is_empty() {
            datacenters.sort();
            datacenters.dedup();
            self.datacenters = datacenters;
        }
    }

    /// The datacenters whose homes row has not been read within
    /// `valid_for` of `now`, each with how long since it was: while any
    /// is, a row no known rule covers is refused (H5). None in a cluster
    /// of one datacenter, where the store's default route and a home's
    /// local quorum are one quorum.
    pub fn unsurveyed(&self, now: Instant) -> Vec<(Datacenter, Option<Duration>)> {
        if self.datacenters.len() < 2 {
            return Vec::new();
        }
        self.datacenters
            .iter()
            .filter_map(|dc| {
                let since = self
                    .surveyed
                    .get(dc)
                    .map(|t| now.saturating_duration_since(*t));
                (since.is_none_or(|d| d >= self.valid_for)).then(|| (dc.clone(), since))
            })
            .collect()
    }

    /// The rule that decides `subject`'s rows (`None`: no home applies).
    pub fn rule_of(&self, subject: Subject<'_>) -> Option<Rule> {
        let rule = match subject {
            Subject::Unhomed => return None,
            Subject::Fleet => Rule::Default,
            Subject::Lock(name) => rule_for(self.views.keys(), name),
        };
        self.views.contains_key(&rule).then_some(rule)
    }

    /// Where the requests of `subject`'s rows go at `now` (monotonic) and
    /// `wall` (this process's clock): `Ok(None)` for the store's default
    /// route (no home applies), `Ok(Some(home))`, or why none may be sent.
    ///
    /// # Errors
    /// [`Refusal`]: the home is not confirmed (H2) — out of reach, or
    /// answering without the newest record yet — or does not serve yet
    /// (H3); no rule is known to cover the row while a datacenter's homes
    /// were not read lately (H5); a record that could decide it does not
    /// decode.
    pub fn route(
        &self,
        subject: Subject<'_>,
        now: Instant,
        wall: Timestamp,
    ) -> Result<Option<Datacenter>, Refusal> {
        let decided = self.rule_of(subject);
        if let Some(cell) = self
            .unreadable
            .values()
            .flatten()
            .find(|cell| cell.could_decide(subject, decided.as_ref()))
        {
            return Err(Refusal::Unreadable(cell.clone()));
        }
        let Some(rule) = decided else {
            if matches!(subject, Subject::Unhomed) {
                return Ok(None);
            }
            let datacenters = self.unsurveyed(now);
            if datacenters.is_empty() {
                return Ok(None);
            }
            let last_error = datacenters
                .iter()
                .find_map(|(dc, _)| self.failures.get(dc).cloned());
            return Err(Refusal::Unsurveyed {
                datacenters,
                last_error,
            });
        };
        let view = &self.views[&rule];
        let home = &view.record.datacenter;
        let fresh = view
            .confirmed
            .is_some_and(|t| now.saturating_duration_since(t) < self.valid_for);
        if view.conflicted() {
            return Err(Refusal::Unconfirmed {
                since: view.confirmed.map(|t| now.saturating_duration_since(t)),
                last_error: Some(format!(
                    "datacenters show different records of version {} (two moves raced; \
                     the store reconciles them)",
                    view.record.version
                )),
                home: home.clone(),
                rule,
            });
        }
        // The home answered lately, with an older record of the rule (or
        // none): the move has not reached it yet — not a lost link.
        let home_read = self
            .surveyed
            .get(home)
            .is_some_and(|t| now.saturating_duration_since(*t) < self.valid_for);
        let shown = view.seen.get(home);
        if !fresh && home_read && shown.is_none_or(|r| r.rank() < view.record.rank()) {
            return Err(Refusal::Behind {
                home: home.clone(),
                version: view.record.version,
                shows: shown.map(|r| (r.version, r.pending)),
                rule,
            });
        }
        if !fresh {
            return Err(Refusal::Unconfirmed {
                since: view.confirmed.map(|t| now.saturating_duration_since(t)),
                last_error: self.failures.get(home).cloned(),
                home: home.clone(),
                rule,
            });
        }
        if view.record.pending {
            return Err(Refusal::Pending {
                home: home.clone(),
                from: view.record.moved_from.clone(),
                version: view.record.version,
                rule,
            });
        }
        if !view.record.serves_at(wall) {
            let left = view.record.serves_from.saturating_sub(wall.as_micros());
            return Err(Refusal::Moving {
                home: home.clone(),
                from: view.record.moved_from.clone(),
                in_: Duration::from_micros(u64::try_from(left).unwrap_or(0)),
                rule,
            });
        }
        Ok(Some(home.clone()))
    }

    /// Every rule's state at `now`, for reports.
    pub fn states(&self, now: Instant) -> Vec<RuleState> {
        self.views
            .iter()
            .map(|(rule, view)| RuleState {
                rule: rule.key(),
                record: view.record.clone(),
                confirmed: !view.conflicted()
                    && view
                        .confirmed
                        .is_some_and(|t| now.saturating_duration_since(t) < self.valid_for),
            })
            .collect()
    }

    /// The last failure reading the homes row from `dc`, if one is on
    /// record (a later read that succeeded clears it).
    pub fn failure_of(&self, dc: &Datacenter) -> Option<String> {
        self.failures.get(dc).cloned()
    }

    /// When this view was made (the process start).
    pub fn started(&self) -> Instant {
        self.started
    }
}

#[cfg(test)]
mod tests;
