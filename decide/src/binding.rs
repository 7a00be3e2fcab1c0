//! The stage bindings of a node: what it knows about the stage and which
//! acquisitions act on it. This is the pure core of the node runtime (no
//! I/O, no clock of its own — every function takes `now`), so every
//! decision can be tested table by table.
//!
//! # The rules it enforces
//!
//! The rollout rules are defined in docs/design.md §4, and why they keep
//! legacy and queue acquisitions apart is argued there once ("Why no legacy
//! and queue acquisitions overlap"). This module makes the decisions of R2,
//! R3, R4, R5 and R8; the node runtime calls it and does the I/O.
//!
//! - [`View`] is the node's view of the stage. It is confirmed while both
//!   its last stage read and its last heartbeat were sent less than
//!   `stage_valid_for` ago (R2), and while the process's clock is known
//!   within `rollout.clock_skew_margin` of the database's
//!   ([`View::clock`], C1). [`View::resolve`] resolves the configured
//!   mode against the confirmed stage, and gives combined
//!   ([`resolve`]`(mode, None)`) while the view is unconfirmed (R2) or the
//!   result is an algorithm the last landed heartbeat did not declare (R8).
//! - [`Ledger`] holds every acquisition in flight or held, with the
//!   algorithm it resolved and its stage version. [`Ledger::follow`]
//!   invalidates or re-binds them when the resolution or the confirmed stage
//!   changes (R3). [`Ledger::hand_out`] decides whether a guard just taken
//!   may be handed out; a refused one is released by the caller, which
//!   re-enters (R4, R8). [`Ledger::acting_version`] is the oldest version
//!   the heartbeat reports (R5); guards that need "every node acts on stage
//!   ≥ N" read that, not only the node's view (R6).
//!
//! An invalidated acquisition must leave its line, which only the runtime
//! can make it do: [`Ledger::follow`] and [`Ledger::invalidate_waiting`]
//! return the ids they invalidated, and the runtime wakes those waiters.
//! When a waiter leaves for a reason of its own (its caller gave up), the
//! runtime says so with [`Ledger::invalidate`].
//!
//! - [`Pacing`] is how a combined acquisition paces itself: beside legacy
//!   contenders, or at full speed. [`Pacing::of`] derives it from the stage
//!   the node confirmed; the runtime hands each acquisition the current
//!   value, and a new one the moment it changes.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::algorithm::{Algorithm, Mode, Resolution, Stage, resolve};
use crate::rollout::StageRecord;

/// The node's view of the stage (R2).
#[derive(Clone, Debug)]
pub struct View {
    /// The last stage read.
    pub record: Option<StageRecord>,
    /// When the last successful stage read was sent.
    read_sent: Option<Instant>,
    /// When the last successful heartbeat was sent.
    heartbeat_sent: Option<Instant>,
    /// What that heartbeat declared the node may run (R8).
    declared: BTreeSet<Algorithm>,
    valid_for: Duration,
    /// Until when the process's clock is known within the skew margin of
    /// the database's (C1); `None`: not known.
    clock_until: Option<Instant>,
}

impl View {
    /// A view that knows nothing yet, confirmed for `valid_for` after each
    /// stage read and heartbeat.
    pub fn new(valid_for: Duration) -> Self {
        View {
            record: None,
            read_sent: None,
            heartbeat_sent: None,
            declared: BTreeSet::new(),
            valid_for,
            clock_until: None,
        }
    }

    /// The process's clock is known within `rollout.clock_skew_margin` of
    /// the database's until `until` (`None`: it is not — never measured,
    /// or measured beyond it). Until then the view confirms no stage, and
    /// every mode resolves to combined, as with a stage it cannot confirm
    /// (C1, docs/design.md §4b).
    pub fn clock(&mut self, until: Option<Instant>) {
        self.clock_until = until;
    }

    /// Whether the process's clock is known within the margin at `now`.
    pub fn clock_bounded(&self, now: Instant) -> bool {
        self.clock_until.is_some_and(|until| now < until)
    }

    /// A stage read sent at `sent` returned `record`.
    pub fn read(&mut self, record: StageRecord, sent: Instant) {
        // Versions only move forward: a slow read that returns after a newer
        // one must not take the view back.
        if self
            .record
            .as_ref()
            .is_none_or(|old| record.version >= old.version)
        {
            self.record = Some(record);
        }
        self.read_sent = Some(self.read_sent.map_or(sent, |t| t.max(sent)));
    }

    /// A heartbeat sent at `sent`, declaring that the node may run
    /// `declared`, was written (with its activity promise, R8).
    pub fn heartbeat(&mut self, sent: Instant, declared: BTreeSet<Algorithm>) {
        // A slow heartbeat that lands after a newer one changes nothing.
        if self.heartbeat_sent.is_none_or(|t| sent >= t) {
            self.heartbeat_sent = Some(sent);
            self.declared = declared;
        }
    }

    /// Until when the view is confirmed (R2, and C1 for the clock);
    /// `None` if it cannot be.
    pub fn valid_until(&self) -> Option<Instant> {
        Some(self.stage_until()?.min(self.clock_until?))
    }

    /// Until when the stage is confirmed by its reads and heartbeats (R2).
    fn stage_until(&self) -> Option<Instant> {
        let since = self.read_sent?.min(self.heartbeat_sent?);
        self.record.as_ref()?;
        Some(since + self.valid_for)
    }

    /// The stage record, if the view is confirmed at `now`.
    pub fn confirmed(&self, now: Instant) -> Option<&StageRecord> {
        match self.valid_until() {
            Some(until) if now < until => self.record.as_ref(),
            _ => None,
        }
    }

    /// Whether a heartbeat has landed since the node started.
    pub fn has_heartbeat(&self) -> bool {
        self.heartbeat_sent.is_some()
    }

    /// Whether the stage was confirmed once and is not any more (R2; the
    /// clock's part is [`clock_bounded`](Self::clock_bounded)). A node that
    /// has not yet confirmed a view since it started (its first heartbeat
    /// is still on its way) is unconfirmed, not expired.
    pub fn expired(&self, now: Instant) -> bool {
        self.stage_until().is_some_and(|until| now >= until)
    }

    /// What new acquisitions use at `now`: `configured` resolved against the
    /// confirmed stage (R2) — combined while the result is an algorithm the
    /// last landed heartbeat did not declare (R8).
    pub fn resolve(&self, configured: Mode, now: Instant) -> Resolution {
        let wanted = self.declaring(configured, now);
        if wanted.algorithm == Algorithm::Combined || self.declared.contains(&wanted.algorithm) {
            wanted
        } else {
            Resolution {
                algorithm: Algorithm::Combined,
                degraded_from: None,
            }
        }
    }

    /// What `configured` resolves to at `now` once the registry knows it:
    /// what the next heartbeat declares (R8).
    pub fn declaring(&self, configured: Mode, now: Instant) -> Resolution {
        resolve(configured, self.confirmed(now).map(|r| r.stage))
    }
}

/// The legacy lock's default pause after finding the lock owned (its
/// `lock.legacy.owner_wait_max`): what a combined acquisition that is told
/// nothing else assumes legacy contenders pause for.
pub const LEGACY_OWNER_WAIT_MAX: Duration = Duration::from_millis(1000);

/// How a combined acquisition paces itself: whether legacy contenders may
/// be about, and how they pace themselves.
///
/// A legacy contender is invisible while it waits (it only reads `main`)
/// and polls at its own pace — up to `lock.legacy.owner_wait_max` after
/// finding the lock owned. A combined waiter polling at the queue's speed,
/// or holding a prepared `shadow` cell across the current hold, wins every
/// hand-off, and legacy nodes starve. So while legacy contenders may be
/// about — stage `legacy`, or a stage the node cannot confirm — the
/// combined lock takes its turn at their pace: no prepared hand-off, and
/// its first waiter pauses like a legacy contender while `main` is taken.
/// From `dual` on no legacy node runs, and it goes at the queue's speed.
/// The pacing changes when, and only when, legacy may run — never the
/// exclusion argument, which rests on G1 and Q1 alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pacing {
    /// Legacy contenders may be about: take turns at their pace. They pause
    /// up to `owner_wait_max` when they find the lock owned.
    BesideLegacy {
        /// The legacy contenders' `lock.legacy.owner_wait_max`.
        owner_wait_max: Duration,
    },
    /// No legacy contender runs: the queue's speed, hand-offs prepared.
    FullSpeed,
}

impl Pacing {
    /// The pacing while the node's confirmed stage is `confirmed` (`None`:
    /// the node cannot confirm one): beside legacy contenders at stage
    /// `legacy` and wherever the node cannot tell, who pause up to
    /// `owner_wait_max`; else full speed.
    pub fn of(confirmed: Option<&StageRecord>, owner_wait_max: Duration) -> Pacing {
        if confirmed.is_none_or(|r| r.stage == Stage::Legacy) {
            Pacing::BesideLegacy { owner_wait_max }
        } else {
            Pacing::FullSpeed
        }
    }

    /// Whether legacy contenders may be about.
    pub fn beside_legacy(self) -> bool {
        matches!(self, Pacing::BesideLegacy { .. })
    }
}

/// Beside legacy contenders with the legacy lock's default settings
/// ([`LEGACY_OWNER_WAIT_MAX`]): an acquisition told nothing cannot know
/// there are none.
impl Default for Pacing {
    fn default() -> Self {
        Pacing::BesideLegacy {
            owner_wait_max: LEGACY_OWNER_WAIT_MAX,
        }
    }
}

/// One acquisition in flight or held (R3).
#[derive(Debug)]
struct BoundAcquisition {
    algorithm: Algorithm,
    /// The stage version it acts consistently with; `None`: no stage was
    /// ever read (only combined resolves then).
    version: Option<u64>,
    held: bool,
    /// The acquisition must leave the line and re-enter.
    invalidated: bool,
}

/// Why a guard was not handed out (R4, R8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The acquisition was invalidated while it waited.
    Invalidated,
    /// The view is no longer confirmed (R2), or the process's clock is not
    /// known within the margin (C1).
    Unconfirmed,
    /// The stage moved past the acquisition's binding.
    Moved,
    /// The last landed heartbeat did not declare the algorithm (R8).
    Undeclared,
}

/// Every acquisition of a node, by id.
#[derive(Debug, Default)]
pub struct Ledger {
    next: u64,
    map: BTreeMap<u64, BoundAcquisition>,
}

impl Ledger {
    /// Binds a new acquisition resolved to `algorithm` under `view`'s last
    /// record, and gives its id.
    pub fn bind(&mut self, algorithm: Algorithm, view: &View) -> u64 {
        let id = self.next;
        self.next += 1;
        self.map.insert(
            id,
            BoundAcquisition {
                algorithm,
                version: view.record.as_ref().map(|r| r.version),
                held: false,
                invalidated: false,
            },
        );
        id
    }

    /// Forgets an acquisition (it ended without a guard, or its guard was
    /// released).
    pub fn unbind(&mut self, id: u64) {
        self.map.remove(&id);
    }

    /// Whether acquisition `id` was invalidated (and still waits).
    pub fn is_invalidated(&self, id: u64) -> bool {
        self.map.get(&id).is_some_and(|b| !b.held && b.invalidated)
    }

    /// Acquisition `id` leaves the line for a reason of its own (its caller
    /// gave up): from now on it counts as invalidated, keeping its old
    /// binding until it is gone.
    pub fn invalidate(&mut self, id: u64) {
        if let Some(b) = self.map.get_mut(&id) {
            b.invalidated = true;
        }
    }

    /// Applies the node's current resolution and confirmed stage (R3).
    /// Idempotent: call it whenever either may have changed. Gives the
    /// acquisitions it invalidated (none twice).
    pub fn follow(&mut self, algorithm: Algorithm, confirmed: Option<&StageRecord>) -> Vec<u64> {
        let mut invalidated = Vec::new();
        for (id, b) in &mut self.map {
            if b.held {
                if let Some(r) = confirmed
                    && r.stage.allows(b.algorithm)
                {
                    b.version = Some(r.version);
                }
            } else if b.invalidated {
                // Leaving the line: keeps its old binding until it is gone.
            } else if b.algorithm != algorithm {
                b.invalidated = true;
                invalidated.push(*id);
            } else if let Some(r) = confirmed {
                // R3: a non-combined acquisition follows the stage one
                // version at a time: adjacent stages never allow legacy and
                // queue together (R1), so one step keeps its algorithm's
                // guarantees. A
                // jump means the node missed stages (it was paused or cut
                // off), and the acquisition's store steps may date from
                // before them: it leaves.
                let missed = b.version.is_some_and(|v| r.version > v.saturating_add(1));
                if missed && b.algorithm != Algorithm::Combined {
                    b.invalidated = true;
                    invalidated.push(*id);
                } else {
                    b.version = Some(r.version);
                }
            }
        }
        invalidated
    }

    /// Invalidates every waiting acquisition (the node is shutting down),
    /// and gives them all.
    pub fn invalidate_waiting(&mut self) -> Vec<u64> {
        let mut invalidated = Vec::new();
        for (id, b) in self.map.iter_mut().filter(|(_, b)| !b.held) {
            b.invalidated = true;
            invalidated.push(*id);
        }
        invalidated
    }

    /// Decides whether acquisition `id`, which just took its lock, may hand
    /// the guard out (R4, R8); if so it counts as held from now on.
    pub fn hand_out(&mut self, id: u64, view: &View, now: Instant) -> Result<(), Refusal> {
        let Some(b) = self.map.get_mut(&id) else {
            return Err(Refusal::Invalidated);
        };
        if b.invalidated {
            return Err(Refusal::Invalidated);
        }
        if b.algorithm != Algorithm::Combined {
            let Some(confirmed) = view.confirmed(now) else {
                return Err(Refusal::Unconfirmed);
            };
            if b.version != Some(confirmed.version) {
                return Err(Refusal::Moved);
            }
            if !view.declared.contains(&b.algorithm) {
                return Err(Refusal::Undeclared);
            }
        }
        b.held = true;
        Ok(())
    }

    /// The oldest stage version the node may still act on (R5): its view's
    /// version and every binding's. `None` when any of them is unknown.
    pub fn acting_version(&self, view: &View) -> Option<u64> {
        let seen = view.record.as_ref().map(|r| r.version)?;
        self.map
            .values()
            .try_fold(seen, |oldest, b| b.version.map(|v| oldest.min(v)))
    }

    /// Acquisitions waiting or held, by algorithm.
    pub fn counts(&self) -> BTreeMap<Algorithm, u32> {
        let mut out = BTreeMap::new();
        for b in self.map.values() {
            *out.entry(b.algorithm).or_insert(0) += 1;
        }
        out
    }

    /// Whether any guard is held.
    #[cfg(test)]
    pub fn any_held(&self) -> bool {
        self.map.values().any(|b| b.held)
    }

    /// Whether any acquisition is waiting.
    pub fn any_waiting(&self) -> bool {
        self.map.values().any(|b| !b.held)
    }
}

#[cfg(test)]
#[path = "binding_tests.rs"]
mod tests;
