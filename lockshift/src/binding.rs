//! The node's stage bindings with the cancellation tokens their waiters
//! watch, and the pacing they read. What the bindings decide (R2–R5, R8)
//! and the pacing a stage calls for are pure and live in
//! [`lockshift_decide::binding`]; this module gives each acquisition the
//! token its locker waits on and the watch it reads its [`Pacing`] from,
//! fires the tokens of the acquisitions the bindings invalidate, updates
//! the pacing as the confirmed stage changes, and tells the bindings when a
//! caller's cancel fired one.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lockshift_decide::algorithm::Algorithm;
pub(crate) use lockshift_decide::binding::View;
use lockshift_decide::binding::{Bindings as Core, LEGACY_OWNER_WAIT_MAX, Pacing, Refusal};
use lockshift_decide::rollout::StageRecord;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Every acquisition of a node, by id, with its token; and the pacing
/// every one of them reads.
#[derive(Debug)]
pub(crate) struct Bindings {
    core: Core,
    /// Fires when the acquisition must leave the line and re-enter.
    tokens: BTreeMap<u64, CancellationToken>,
    /// The pacing the node's confirmed stage calls for ([`Pacing::of`]):
    /// every acquisition reads it at each step, through its own receiver.
    pacing: watch::Sender<Pacing>,
    /// The legacy contenders' pause (`lock.legacy.owner_wait_max`).
    owner_wait_max: Duration,
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
            core: Core::default(),
            tokens: BTreeMap::new(),
            pacing: watch::Sender::new(Pacing::BesideLegacy { owner_wait_max }),
            owner_wait_max,
        }
    }

    /// What a new acquisition paces itself by: the current pacing, and
    /// every change from now on.
    pub(crate) fn pacing(&self) -> watch::Receiver<Pacing> {
        self.pacing.subscribe()
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
    /// record; `cancel` is the caller's token (the returned token is its
    /// child, also fired on invalidation).
    pub(crate) fn bind(
        &mut self,
        algorithm: Algorithm,
        view: &View,
        cancel: Option<&CancellationToken>,
    ) -> (u64, CancellationToken) {
        let id = self.core.bind(algorithm, view);
        let token = cancel.map_or_else(CancellationToken::new, CancellationToken::child_token);
        self.tokens.insert(id, token.clone());
        (id, token)
    }

    /// Forgets an acquisition (it ended without a guard, or its guard was
    /// released).
    pub(crate) fn unbind(&mut self, id: u64) {
        self.core.unbind(id);
        self.tokens.remove(&id);
    }

    /// Whether acquisition `id` was invalidated.
    #[cfg(test)]
    pub(crate) fn is_invalidated(&self, id: u64) -> bool {
        self.core.is_invalidated(id)
    }

    /// Tells the bindings of the acquisitions whose callers cancelled them:
    /// those leave the line as invalidated ones do.
    fn note_cancelled(&mut self) {
        for (id, token) in &self.tokens {
            if token.is_cancelled() {
                self.core.invalidate(*id);
            }
        }
    }

    /// Fires the tokens of acquisitions `ids`.
    fn cancel(&self, ids: Vec<u64>) {
        for id in ids {
            if let Some(token) = self.tokens.get(&id) {
                token.cancel();
            }
        }
    }

    /// Applies the node's current resolution and confirmed stage (R3),
    /// firing the tokens of the acquisitions that must leave the line.
    /// Idempotent: call it whenever either may have changed.
    pub(crate) fn follow(&mut self, algorithm: Algorithm, confirmed: Option<&StageRecord>) {
        self.note_cancelled();
        let invalidated = self.core.follow(algorithm, confirmed);
        self.cancel(invalidated);
    }

    /// Invalidates every waiting acquisition (the node is shutting down).
    pub(crate) fn invalidate_waiting(&mut self) {
        let invalidated = self.core.invalidate_waiting();
        self.cancel(invalidated);
    }

    /// Decides whether acquisition `id`, which just took its lock, may hand
    /// the guard out (R4, R8); if so it counts as held from now on.
    pub(crate) fn hand_out(&mut self, id: u64, view: &View, now: Instant) -> Result<(), Refusal> {
        if self
            .tokens
            .get(&id)
            .is_some_and(CancellationToken::is_cancelled)
        {
            self.core.invalidate(id);
        }
        self.core.hand_out(id, view, now)
    }

    /// The oldest stage version the node may still act on (R5).
    pub(crate) fn acting_version(&self, view: &View) -> Option<u64> {
        self.core.acting_version(view)
    }

    /// Acquisitions waiting or held, by algorithm.
    pub(crate) fn counts(&self) -> BTreeMap<Algorithm, u32> {
        self.core.counts()
    }

    /// Whether any acquisition is waiting.
    pub(crate) fn any_waiting(&self) -> bool {
        self.core.any_waiting()
    }
}

#[cfg(test)]
#[path = "binding_tests.rs"]
mod tests;
