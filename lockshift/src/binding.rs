//! What a node knows about the stage and which acquisitions act on it: the
//! pure core of the node runtime (no I/O, no clock of its own — every
//! function takes `now`), so every decision can be tested table by table.
//!
//! # Invariants
//!
//! - **B1. A stage view expires.** The node's view of the stage is
//!   *confirmed* only while both its last successful stage read and its last
//!   successful heartbeat were sent less than `stage_valid_for` ago. An
//!   unconfirmed view resolves every mode to combined (safe beside every
//!   algorithm, [`resolve`]`(mode, None)`).
//! - **B2. Every acquisition is bound.** Each acquisition in flight or held
//!   is bound to the algorithm it resolved and a stage version. A waiting
//!   acquisition whose algorithm differs from the node's current resolution
//!   is *invalidated* (for good: it leaves the line and re-enters); one whose
//!   algorithm still matches is re-bound to the confirmed version — for
//!   legacy and queue only if that is the next version, never across a
//!   jump (the node missed stages). A held guard is re-bound only to a
//!   stage that allows its algorithm.
//! - **B3. Hand-out.** A guard taken by an invalidated acquisition, or by a
//!   non-combined one while the view is unconfirmed or has moved past its
//!   binding, is not handed out (the caller releases it and re-enters).
//!   Combined guards are always handed out: combined is safe beside every
//!   algorithm.
//! - **B4. The oldest binding is reported.** The heartbeat carries the
//!   oldest version among the node's view and all its bindings
//!   ([`Bindings::acting_version`]); guards that need "every node acts on
//!   stage ≥ N" read that, not only the node's view.
//! - **B5. Only a declared algorithm is used.** New acquisitions use legacy
//!   or queue only if the last heartbeat that landed declared it (as the
//!   node's algorithm, or one it had acquisitions of); until then they run
//!   combined ([`View::resolve`]). A mode switched while the registry cannot
//!   be written therefore never acts unseen (docs/design.md §4, R8).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use lockshift_lock::Algorithm;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

#[cfg(test)]
use lockshift_combined::Stage;
use lockshift_combined::{Mode, Resolution, StageRecord, resolve};

/// The node's view of the stage (B1).
#[derive(Clone, Debug)]
pub(crate) struct View {
    /// The last stage read.
    pub(crate) record: Option<StageRecord>,
    /// When the last successful stage read was sent.
    read_sent: Option<Instant>,
    /// When the last successful heartbeat was sent.
    heartbeat_sent: Option<Instant>,
    /// What that heartbeat declared the node may run (B5).
    declared: BTreeSet<Algorithm>,
    valid_for: Duration,
}

impl View {
    pub(crate) fn new(valid_for: Duration) -> Self {
        View {
            record: None,
            read_sent: None,
            heartbeat_sent: None,
            declared: BTreeSet::new(),
            valid_for,
        }
    }

    /// A stage read sent at `sent` returned `record`.
    pub(crate) fn read(&mut self, record: StageRecord, sent: Instant) {
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
    pub(crate) fn heartbeat(&mut self, sent: Instant, declared: BTreeSet<Algorithm>) {
        // A slow heartbeat that lands after a newer one changes nothing.
        if self.heartbeat_sent.is_none_or(|t| sent >= t) {
            self.heartbeat_sent = Some(sent);
            self.declared = declared;
        }
    }

    /// Until when the view is confirmed (B1); `None` if it never was.
    pub(crate) fn valid_until(&self) -> Option<Instant> {
        let since = self.read_sent?.min(self.heartbeat_sent?);
        self.record.as_ref()?;
        Some(since + self.valid_for)
    }

    /// The stage record, if the view is confirmed at `now`.
    pub(crate) fn confirmed(&self, now: Instant) -> Option<&StageRecord> {
        match self.valid_until() {
            Some(until) if now < until => self.record.as_ref(),
            _ => None,
        }
    }

    /// Whether a heartbeat has landed since the node started.
    pub(crate) fn has_heartbeat(&self) -> bool {
        self.heartbeat_sent.is_some()
    }

    /// Whether the view was confirmed once and is not any more. A node that
    /// has not yet confirmed a view since it started (its first heartbeat
    /// is still on its way) is unconfirmed, not expired.
    pub(crate) fn expired(&self, now: Instant) -> bool {
        self.valid_until().is_some_and(|until| now >= until)
    }

    /// What new acquisitions use at `now`: `configured` resolved against the
    /// confirmed stage (B1) — combined while the result is an algorithm the
    /// last landed heartbeat did not declare (B5).
    pub(crate) fn resolve(&self, configured: Mode, now: Instant) -> Resolution {
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
    /// what the next heartbeat declares (B5).
    pub(crate) fn declaring(&self, configured: Mode, now: Instant) -> Resolution {
        resolve(configured, self.confirmed(now).map(|r| r.stage))
    }
}

/// One acquisition in flight or held (B2).
#[derive(Debug)]
struct Binding {
    algorithm: Algorithm,
    /// The stage version it acts consistently with; `None`: no stage was
    /// ever read (only combined resolves then).
    version: Option<u64>,
    held: bool,
    /// Fires when the acquisition must leave the line and re-enter.
    invalidated: CancellationToken,
}

/// Why a guard was not handed out (B3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The acquisition was invalidated while it waited.
    Invalidated,
    /// The view is no longer confirmed.
    Unconfirmed,
    /// The stage moved past the acquisition's binding.
    Moved,
    /// The last landed heartbeat did not declare the algorithm (B5).
    Undeclared,
}

/// Every acquisition of a node, by id.
#[derive(Debug, Default)]
pub(crate) struct Bindings {
    next: u64,
    map: BTreeMap<u64, Binding>,
}

impl Bindings {
    /// Binds a new acquisition resolved to `algorithm` under `view`'s last
    /// record; `cancel` is the caller's token (the returned token is its
    /// child, also fired on invalidation).
    pub(crate) fn bind(
        &mut self,
        algorithm: Algorithm,
        view: &View,
        cancel: Option<&CancellationToken>,
    ) -> (u64, CancellationToken) {
        let id = self.next;
        self.next += 1;
        let token = cancel.map_or_else(CancellationToken::new, CancellationToken::child_token);
        self.map.insert(
            id,
            Binding {
                algorithm,
                version: view.record.as_ref().map(|r| r.version),
                held: false,
                invalidated: token.clone(),
            },
        );
        (id, token)
    }

    /// Forgets an acquisition (it ended without a guard, or its guard was
    /// released).
    pub(crate) fn unbind(&mut self, id: u64) {
        self.map.remove(&id);
    }

    /// Whether acquisition `id` was invalidated.
    #[cfg(test)]
    pub(crate) fn is_invalidated(&self, id: u64) -> bool {
        self.map
            .get(&id)
            .is_some_and(|b| !b.held && b.invalidated.is_cancelled())
    }

    /// Applies the node's current resolution and confirmed stage (B2).
    /// Idempotent: call it whenever either may have changed.
    pub(crate) fn follow(&mut self, algorithm: Algorithm, confirmed: Option<&StageRecord>) {
        for b in self.map.values_mut() {
            if b.held {
                if let Some(r) = confirmed
                    && r.stage.allows(b.algorithm)
                {
                    b.version = Some(r.version);
                }
            } else if b.invalidated.is_cancelled() {
                // Leaving the line: keeps its old binding until it is gone.
            } else if b.algorithm != algorithm {
                b.invalidated.cancel();
            } else if let Some(r) = confirmed {
                // A non-combined acquisition follows the stage one version
                // at a time: adjacent stages never allow legacy and queue
                // together, so one step keeps its algorithm's guarantees. A
                // jump means the node missed stages (it was paused or cut
                // off), and the acquisition's store steps may date from
                // before them: it leaves.
                let missed = b.version.is_some_and(|v| r.version > v.saturating_add(1));
                if missed && b.algorithm != Algorithm::Combined {
                    b.invalidated.cancel();
                } else {
                    b.version = Some(r.version);
                }
            }
        }
    }

    /// Invalidates every waiting acquisition (the node is shutting down).
    pub(crate) fn invalidate_waiting(&mut self) {
        for b in self.map.values_mut().filter(|b| !b.held) {
            b.invalidated.cancel();
        }
    }

    /// Decides whether acquisition `id`, which just took its lock, may hand
    /// the guard out (B3); if so it counts as held from now on.
    pub(crate) fn hand_out(&mut self, id: u64, view: &View, now: Instant) -> Result<(), Refusal> {
        let Some(b) = self.map.get_mut(&id) else {
            return Err(Refusal::Invalidated);
        };
        if b.invalidated.is_cancelled() {
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

    /// The oldest stage version the node may still act on (B4): its view's
    /// version and every binding's. `None` when any of them is unknown.
    pub(crate) fn acting_version(&self, view: &View) -> Option<u64> {
        let seen = view.record.as_ref().map(|r| r.version)?;
        self.map
            .values()
            .try_fold(seen, |oldest, b| b.version.map(|v| oldest.min(v)))
    }

    /// Acquisitions waiting or held, by algorithm.
    pub(crate) fn counts(&self) -> BTreeMap<Algorithm, u32> {
        let mut out = BTreeMap::new();
        for b in self.map.values() {
            *out.entry(b.algorithm).or_insert(0) += 1;
        }
        out
    }

    /// Whether any guard is held.
    #[cfg(test)]
    pub(crate) fn any_held(&self) -> bool {
        self.map.values().any(|b| b.held)
    }

    /// Whether any acquisition is waiting.
    pub(crate) fn any_waiting(&self) -> bool {
        self.map.values().any(|b| !b.held)
    }
}

#[cfg(test)]
#[path = "binding_tests.rs"]
mod tests;
