//! The node's stage bindings, and the handle each acquisition gets from
//! them. What the bindings decide (R2–R5, R8) and the pacing a stage calls
//! for are pure and live in [`lockshift_decide::binding`]; this module
//! gives each acquisition its [`Binding`] — the pacing it reads, the token
//! that invalidates it, the [`LegacySightings`] its reads of `main` write
//! into — fires the tokens of the acquisitions the bindings invalidate,
//! updates the pacing as the confirmed stage changes, and tells the
//! bindings when a caller's cancel ended one.
//!
//! Nothing comes back up from an acquisition but its outcome: an
//! invalidated one ends as `AcquireError::Cancelled` while the caller's
//! token has not fired (the node re-enters), one the caller cancelled as
//! the same `Cancelled` after the caller's token fired, and legacy holders
//! it saw are already in the sightings the node reports.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lockshift_decide::algorithm::Algorithm;
pub(crate) use lockshift_decide::binding::View;
use lockshift_decide::binding::{LEGACY_OWNER_WAIT_MAX, Ledger, Pacing, Refusal};
use lockshift_decide::rollout::StageRecord;
use lockshift_lock::{Binding, LegacySightings};
use lockshift_store::Timestamp;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What ends one acquisition early: its binding's invalidation, fired by
/// the node, and its caller's cancel.
#[derive(Debug)]
struct Signals {
    /// Fires when the acquisition must leave the line and re-enter.
    invalidated: CancellationToken,
    /// The caller's token, if it gave one.
    cancel: Option<CancellationToken>,
}

impl Signals {
    /// Whether the caller called the acquisition off.
    fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(CancellationToken::is_cancelled)
    }
}

/// Every acquisition of a node, by id, with what ends it early; the pacing
/// every one of them reads; and the legacy holders they saw.
#[derive(Debug)]
pub(crate) struct Bindings {
    ledger: Ledger,
    signals: BTreeMap<u64, Signals>,
    /// The pacing the node's confirmed stage calls for ([`Pacing::of`]):
    /// every acquisition reads it at each step, through its own receiver.
    pacing: watch::Sender<Pacing>,
    /// The legacy contenders' pause (`lock.legacy.owner_wait_max`).
    owner_wait_max: Duration,
    /// Written by every acquisition's reads of `main`, read when the node
    /// reports activity.
    sightings: Arc<LegacySightings>,
}

impl Default for Bindings {
    fn default() -> Self {
        Bindings::new(LEGACY_OWNER_WAIT_MAX)
    }
}

impl Bindings {
    /// No acquisitions yet; legacy contenders pause up to `owner_wait_max`,
    /// and until a stage is confirmed the pacing is beside them.
    pub(crate) fn new(owner_wait_max: Duration) -> Self {
        Bindings {
            ledger: Ledger::default(),
            signals: BTreeMap::new(),
            pacing: watch::Sender::new(Pacing::BesideLegacy { owner_wait_max }),
            owner_wait_max,
            sightings: Arc::default(),
        }
    }

    /// When an acquisition last saw a legacy holder in `main`.
    pub(crate) fn legacy_seen(&self) -> Option<Timestamp> {
        self.sightings.last_seen()
    }

    /// Sets the pacing for the node's confirmed stage `confirmed` (`None`:
    /// it cannot confirm one) — beside legacy contenders at stage `legacy`
    /// and wherever the node cannot tell ([`Pacing::of`]). Every waiting
    /// acquisition reads the new value at its next step.
    pub(crate) fn pace(&self, confirmed: Option<&StageRecord>) {
        let pacing = Pacing::of(confirmed, self.owner_wait_max);
        self.pacing.send_if_modified(|now| {
            let changed = *now != pacing;
            *now = pacing;
            changed
        });
    }

    /// Binds a new acquisition resolved to `algorithm` under `view`'s last
    /// record, and gives its id and its [`Binding`]: the node's pacing, a
    /// token of its own that fires on invalidation (and only then), the
    /// node's sightings. `cancel` is the caller's token: the locker watches
    /// it as it is, and the bindings count an acquisition it ended as
    /// leaving.
    pub(crate) fn bind(
        &mut self,
        algorithm: Algorithm,
        view: &View,
        cancel: Option<&CancellationToken>,
    ) -> (u64, Binding) {
        let id = self.ledger.bind(algorithm, view);
        let invalidated = CancellationToken::new();
        self.signals.insert(
            id,
            Signals {
                invalidated: invalidated.clone(),
                cancel: cancel.cloned(),
            },
        );
        let binding = Binding::bound(self.pacing.subscribe(), invalidated, self.sightings.clone());
        (id, binding)
    }

    /// Forgets an acquisition (it ended without a guard, or its guard was
    /// released).
    pub(crate) fn unbind(&mut self, id: u64) {
        self.ledger.unbind(id);
        self.signals.remove(&id);
    }

    /// Whether acquisition `id` was invalidated.
    #[cfg(test)]
    pub(crate) fn is_invalidated(&self, id: u64) -> bool {
        self.ledger.is_invalidated(id)
    }

    /// Tells the bindings of the acquisitions whose callers cancelled them:
    /// those leave the line as invalidated ones do.
    fn note_cancelled(&mut self) {
        for (id, signals) in &self.signals {
            if signals.cancelled() {
                self.ledger.invalidate(*id);
            }
        }
    }

    /// Invalidates the bindings of acquisitions `ids`.
    fn cancel(&self, ids: Vec<u64>) {
        for id in ids {
            if let Some(signals) = self.signals.get(&id) {
                signals.invalidated.cancel();
            }
        }
    }

    /// Applies the node's current resolution and confirmed stage (R3),
    /// firing the tokens of the acquisitions that must leave the line.
    /// Idempotent: call it whenever either may have changed.
    pub(crate) fn follow(&mut self, algorithm: Algorithm, confirmed: Option<&StageRecord>) {
        self.note_cancelled();
        let invalidated = self.ledger.follow(algorithm, confirmed);
        self.cancel(invalidated);
    }

    /// Invalidates every waiting acquisition (the node is shutting down).
    pub(crate) fn invalidate_waiting(&mut self) {
        let invalidated = self.ledger.invalidate_waiting();
        self.cancel(invalidated);
    }

    /// Decides whether acquisition `id`, which just took its lock, may hand
    /// the guard out (R4, R8); if so it counts as held from now on.
    pub(crate) fn hand_out(&mut self, id: u64, view: &View, now: Instant) -> Result<(), Refusal> {
        if self
            .signals
            .get(&id)
            .is_some_and(|s| s.invalidated.is_cancelled() || s.cancelled())
        {
            self.ledger.invalidate(id);
        }
        self.ledger.hand_out(id, view, now)
    }

    /// The oldest stage version the node may still act on (R5).
    pub(crate) fn acting_version(&self, view: &View) -> Option<u64> {
        self.ledger.acting_version(view)
    }

    /// Acquisitions waiting or held, by algorithm.
    pub(crate) fn counts(&self) -> BTreeMap<Algorithm, u32> {
        self.ledger.counts()
    }

    /// Whether any acquisition is waiting.
    pub(crate) fn any_waiting(&self) -> bool {
        self.ledger.any_waiting()
    }
}

#[cfg(test)]
#[path = "binding_tests.rs"]
mod tests;
