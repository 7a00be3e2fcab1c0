//! Fault injection: rules that delay or fail requests touching given tables,
//! so tests can watch a client meet every failure a real cluster produces.
//!
//! A [`FaultRule`] says which requests it matches (tables, reads or
//! writes), what happens ([`Fault`]), and when: every time, the next `n`
//! times, or with a probability drawn from a seeded generator (so a failing
//! run replays exactly, given the same request order). Rules live in a
//! [`FaultController`], shared by the endpoint and its handle; they are added
//! from Rust or, for black-box use, by writing rows of the virtual table
//! `lockshift_emulator.faults` (see the crate docs).
//!
//! # Invariants
//!
//! 1. Rules are evaluated in the order they were added. Every firing
//!    latency rule adds its delay; the first firing error rule of each phase
//!    (before or after the statement is applied) decides the error, and later
//!    error rules of that phase are not evaluated, so their counts are not
//!    consumed by requests they did not fail.
//! 2. A rule naming no table matches only user keyspaces: drivers'
//!    reads of `system` and `system_schema` are never failed by accident.
//! 3. DDL and `USE` are never faulted.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::EmulatorError;

/// What a firing rule does to a request.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Fault {
    /// Answer only after this delay (the request itself succeeds). Other
    /// requests on the connection are not held up.
    Latency(Duration),
    /// `ERROR 0x1000 Unavailable`: not enough replicas alive; nothing applied.
    Unavailable,
    /// `ERROR 0x1100 WriteTimeout` (write type `SIMPLE`, or `UNLOGGED_BATCH`
    /// / `BATCH` for batches).
    WriteTimeout,
    /// `ERROR 0x1200 ReadTimeout` (no data present).
    ReadTimeout,
    /// `ERROR 0x1001 Overloaded`.
    Overloaded,
    /// Close the client's connection without answering.
    DropConnection,
}

impl Fault {
    /// The name used in `lockshift_emulator.faults.fault`.
    pub fn name(&self) -> &'static str {
        match self {
            Fault::Latency(_) => "latency",
            Fault::Unavailable => "unavailable",
            Fault::WriteTimeout => "write_timeout",
            Fault::ReadTimeout => "read_timeout",
            Fault::Overloaded => "overloaded",
            Fault::DropConnection => "drop_connection",
        }
    }
}

/// Which statements a rule matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOps {
    /// SELECT.
    Reads,
    /// INSERT, UPDATE, DELETE, BATCH, TRUNCATE.
    Writes,
    /// Both.
    All,
}

impl FaultOps {
    /// The name used in `lockshift_emulator.faults.ops`.
    pub fn name(self) -> &'static str {
        match self {
            FaultOps::Reads => "read",
            FaultOps::Writes => "write",
            FaultOps::All => "all",
        }
    }
}

impl FromStr for FaultOps {
    type Err = EmulatorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "read" | "reads" => Ok(FaultOps::Reads),
            "write" | "writes" => Ok(FaultOps::Writes),
            "all" | "any" => Ok(FaultOps::All),
            other => Err(EmulatorError::InvalidFault(format!(
                "unknown operation kind '{other}' (expected read, write or all)"
            ))),
        }
    }
}

/// The kind of statement a request runs, for matching rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RequestOp {
    Read,
    Write,
    /// DDL, USE: never faulted (invariant 3).
    Schema,
}

/// A fault and the requests it applies to.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use lockshift_cql_emulator::{Fault, FaultRule};
///
/// // The next two writes to lockshift.main time out, after being applied.
/// let rule = FaultRule::new(Fault::WriteTimeout).on_table("lockshift.main").writes().times(2).after_apply();
/// // Every read of any table named "queue" is slowed down by 20 ms, half the time.
/// let slow = FaultRule::new(Fault::Latency(Duration::from_millis(20))).on_table("queue").reads().with_probability(0.5, 7);
/// # let _ = (rule, slow);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct FaultRule {
    fault: Fault,
    tables: Vec<String>,
    ops: FaultOps,
    times: Option<u64>,
    probability: Option<(f64, u64)>,
    jitter: Option<(Duration, u64)>,
    after_apply: bool,
}

impl FaultRule {
    /// A rule firing `fault` on every statement touching a user table,
    /// before the statement is applied.
    pub fn new(fault: Fault) -> FaultRule {
        FaultRule {
            fault,
            tables: Vec::new(),
            ops: FaultOps::All,
            times: None,
            probability: None,
            jitter: None,
            after_apply: false,
        }
    }

    /// Restricts the rule to `table`: `"ks.table"`, `"table"` (any keyspace)
    /// or `"ks.*"`. Call again to add more tables.
    pub fn on_table(mut self, table: impl Into<String>) -> FaultRule {
        self.tables.push(table.into());
        self
    }

    /// Matches only SELECTs.
    pub fn reads(self) -> FaultRule {
        self.ops(FaultOps::Reads)
    }

    /// Matches only writes (INSERT, UPDATE, DELETE, BATCH, TRUNCATE).
    pub fn writes(self) -> FaultRule {
        self.ops(FaultOps::Writes)
    }

    /// Matches the given kind of statement.
    pub fn ops(mut self, ops: FaultOps) -> FaultRule {
        self.ops = ops;
        self
    }

    /// Fires on the next `n` matching requests only (counted per request,
    /// whatever connection it came on).
    pub fn times(mut self, n: u64) -> FaultRule {
        self.times = Some(n);
        self
    }

    /// Fires on each matching request with probability `p`, drawn from a
    /// generator seeded with `seed`.
    pub fn with_probability(mut self, p: f64, seed: u64) -> FaultRule {
        self.probability = Some((p, seed));
        self
    }

    /// For [`Fault::Latency`]: adds a uniform extra delay in `[0, jitter)`
    /// to each request, drawn from a generator seeded with `seed` — a round
    /// trip of "fixed plus jitter", as a network gives. No effect on other
    /// faults.
    pub fn with_jitter(mut self, jitter: Duration, seed: u64) -> FaultRule {
        self.jitter = Some((jitter, seed));
        self
    }

    /// Applies the statement first, then fails it: a write that "timed out"
    /// but took effect, or a connection dropped after the write landed.
    /// Has no effect on [`Fault::Latency`].
    pub fn after_apply(mut self) -> FaultRule {
        self.after_apply = true;
        self
    }

    /// The fault.
    pub fn fault(&self) -> Fault {
        self.fault
    }

    pub(crate) fn validate(&self) -> Result<(), EmulatorError> {
        if let Some((p, _)) = self.probability
            && !(0.0..=1.0).contains(&p)
        {
            return Err(EmulatorError::InvalidFault(format!(
                "probability must be between 0 and 1, got {p}"
            )));
        }
        Ok(())
    }

    fn matches(&self, op: RequestOp, tables: &[(&str, &str)]) -> bool {
        let op_ok = match (op, self.ops) {
            (RequestOp::Schema, _) => false,
            (_, FaultOps::All) => true,
            (RequestOp::Read, FaultOps::Reads) | (RequestOp::Write, FaultOps::Writes) => true,
            _ => false,
        };
        if !op_ok {
            return false;
        }
        tables.iter().any(|&(ks, t)| {
            if self.tables.is_empty() {
                return !is_internal_keyspace(ks);
            }
            self.tables.iter().any(|pat| match pat.split_once('.') {
                Some((pk, "*")) => pk == ks,
                Some((pk, pt)) => pk == ks && pt == t,
                None => pat == t,
            })
        })
    }
}

/// Keyspaces rules without tables never match (invariant 2).
pub(crate) fn is_internal_keyspace(ks: &str) -> bool {
    matches!(
        ks,
        "system" | "system_schema" | crate::engine::FAULTS_KEYSPACE
    )
}

/// A rule's identity in its controller.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FaultId(String);

impl FaultId {
    pub(crate) fn new(id: &str) -> FaultId {
        FaultId(id.to_string())
    }

    /// The id as text (the `id` column of `lockshift_emulator.faults`).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FaultId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A rule and how often it has fired.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultStatus {
    /// The rule's id.
    pub id: FaultId,
    /// The rule.
    pub rule: FaultRule,
    /// How many requests it has fired on.
    pub fired: u64,
    /// Firings left for a counted rule.
    pub remaining: Option<u64>,
}

#[derive(Debug)]
struct Entry {
    id: FaultId,
    rule: FaultRule,
    fired: u64,
    rng: Option<StdRng>,
    jitter_rng: Option<StdRng>,
}

#[derive(Debug, Default)]
struct State {
    entries: Vec<Entry>,
    next_id: u64,
}

/// What the rules decided for one request.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Decision {
    pub(crate) delay: Duration,
    pub(crate) before: Option<Fault>,
    pub(crate) after: Option<Fault>,
}

/// The fault rules of one endpoint. Cheap to clone; clones share the rules.
#[derive(Clone, Debug, Default)]
pub struct FaultController {
    state: Arc<Mutex<State>>,
    /// Whether any rule exists: the hot path skips the lock when not.
    armed: Arc<AtomicBool>,
}

impl FaultController {
    /// An empty controller.
    pub fn new() -> FaultController {
        FaultController::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every mutation is a single push/replace/remove: a panic elsewhere
        // cannot leave the state half-changed.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether any rule exists.
    pub(crate) fn is_armed(&self) -> bool {
        self.armed.load(Ordering::Acquire)
    }

    /// Adds `rule` after the existing ones and returns its id.
    ///
    /// # Errors
    /// [`EmulatorError::InvalidFault`] for a probability outside `0..=1`.
    pub fn add(&self, rule: FaultRule) -> Result<FaultId, EmulatorError> {
        rule.validate()?;
        let mut st = self.lock();
        st.next_id += 1;
        let id = FaultId(format!("rule-{}", st.next_id));
        push(&mut st, id.clone(), rule);
        self.armed.store(true, Ordering::Release);
        Ok(id)
    }

    /// Adds or replaces the rule with id `id` (the CQL table's upsert). A
    /// rule replaced by an identical one keeps its counts and generator.
    ///
    /// # Errors
    /// [`EmulatorError::InvalidFault`] for a probability outside `0..=1`.
    pub fn upsert(&self, id: &str, rule: FaultRule) -> Result<FaultId, EmulatorError> {
        rule.validate()?;
        let id = FaultId(id.to_string());
        let mut st = self.lock();
        match st.entries.iter_mut().find(|e| e.id == id) {
            Some(e) if e.rule == rule => {}
            Some(e) => {
                e.rng = rule
                    .probability
                    .map(|(_, seed)| StdRng::seed_from_u64(seed));
                e.rule = rule;
                e.fired = 0;
            }
            None => push(&mut st, id.clone(), rule),
        }
        self.armed.store(true, Ordering::Release);
        Ok(id)
    }

    /// Removes a rule; whether it existed.
    pub fn remove(&self, id: &FaultId) -> bool {
        let mut st = self.lock();
        let before = st.entries.len();
        st.entries.retain(|e| &e.id != id);
        self.armed.store(!st.entries.is_empty(), Ordering::Release);
        st.entries.len() != before
    }

    /// Removes every rule.
    pub fn clear(&self) {
        let mut st = self.lock();
        st.entries.clear();
        self.armed.store(false, Ordering::Release);
    }

    /// How many times rule `id` has fired, if it exists.
    pub fn fired(&self, id: &FaultId) -> Option<u64> {
        self.lock()
            .entries
            .iter()
            .find(|e| &e.id == id)
            .map(|e| e.fired)
    }

    /// Every rule with its counts, in evaluation order.
    pub fn rules(&self) -> Vec<FaultStatus> {
        self.lock()
            .entries
            .iter()
            .map(|e| FaultStatus {
                id: e.id.clone(),
                rule: e.rule.clone(),
                fired: e.fired,
                remaining: e.rule.times.map(|n| n.saturating_sub(e.fired)),
            })
            .collect()
    }

    /// Evaluates the rules for one request (invariant 1).
    pub(crate) fn decide(&self, op: RequestOp, tables: &[(&str, &str)]) -> Decision {
        let mut d = Decision::default();
        if !self.armed.load(Ordering::Acquire) || op == RequestOp::Schema {
            return d;
        }
        let mut st = self.lock();
        for e in st.entries.iter_mut() {
            let is_latency = matches!(e.rule.fault, Fault::Latency(_));
            let slot_taken = if e.rule.after_apply {
                d.after.is_some()
            } else {
                d.before.is_some()
            };
            if (!is_latency && slot_taken) || !e.rule.matches(op, tables) {
                continue;
            }
            if e.rule.times.is_some_and(|n| e.fired >= n) {
                continue;
            }
            if let (Some((p, _)), Some(rng)) = (e.rule.probability, e.rng.as_mut())
                && rng.random::<f64>() >= p
            {
                continue;
            }
            e.fired += 1;
            match e.rule.fault {
                Fault::Latency(delay) => {
                    let extra = match (e.rule.jitter, e.jitter_rng.as_mut()) {
                        (Some((jitter, _)), Some(rng)) if !jitter.is_zero() => {
                            jitter.mul_f64(rng.random::<f64>())
                        }
                        _ => Duration::ZERO,
                    };
                    d.delay = d.delay.saturating_add(delay).saturating_add(extra);
                }
                f if e.rule.after_apply => d.after = Some(f),
                f => d.before = Some(f),
            }
        }
        d
    }
}

fn push(st: &mut State, id: FaultId, rule: FaultRule) {
    st.entries.push(Entry {
        id,
        rng: rule
            .probability
            .map(|(_, seed)| StdRng::seed_from_u64(seed)),
        jitter_rng: rule.jitter.map(|(_, seed)| StdRng::seed_from_u64(seed)),
        rule,
        fired: 0,
    });
}

mod table;

pub(crate) use table::RuleRow;

#[cfg(test)]
mod tests;
