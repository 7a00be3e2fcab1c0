//! [`Binding`]: the one contract between whoever runs acquisitions (a
//! node) and one acquisition.
//!
//! A node binds every acquisition to the stage it resolved under
//! (docs/design.md §4, R3) and keeps three things flowing between itself
//! and the acquisition while it waits; each flows one way, through this
//! handle, and none climbs back up as a callback or an error:
//!
//! - **pacing**, down: how a combined acquisition paces itself beside
//!   legacy contenders, as the node's confirmed stage calls for it, read at
//!   each step ([`Binding::pacing`]);
//! - **invalidation**, down: the node's resolution moved away from the
//!   acquisition's algorithm (R3) or the node shuts down. A locker that
//!   sees it stops waiting, cleans up and ends as
//!   [`Cancelled`](crate::AcquireError::Cancelled): the binder cancelled
//!   it. The binder tells that from its caller's cancel by the caller's
//!   token, which has not fired, and by [`Binding::is_invalidated`]; no
//!   error variant exists that a service would never see;
//! - **legacy sightings**, into shared state: legacy holders the
//!   acquisition's reads of `main` show are written into the
//!   [`LegacySightings`] the node reads when it reports activity (§4, "The
//!   quiet period").
//!
//! Code that runs a locker alone (tests, the benchmark, the rollout's own
//! lock) passes [`Binding::unbound`]: paced by [`Pacing::default`] (as beside
//! legacy contenders: nothing tells it there are none), never invalidated,
//! recording nothing — or, to play a node's part at a stage it knows,
//! [`Binding::with_default_pacing`]. The binding is the only way pacing
//! reaches an acquisition.

use std::sync::Arc;

use lockshift_decide::binding::Pacing;
use lockshift_store::{Cell, Clock};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::cells::LegacySightings;
use crate::id::LockId;

/// Where an acquisition reads its pacing.
#[derive(Clone, Debug, Default)]
enum Paced {
    /// Nobody set one: [`Pacing::default`].
    #[default]
    Unset,
    /// One pacing for the whole acquisition.
    Fixed(Pacing),
    /// The runner's current value, replaced while the acquisition waits.
    Watched(watch::Receiver<Pacing>),
}

/// One acquisition's handle from whoever runs it: its pacing, its
/// invalidation, and where its legacy sightings go (see the module docs).
///
/// Cloning is cheap; every clone is the same binding.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use lockshift_decide::binding::Pacing;
/// use lockshift_lock::{Binding, LegacySightings};
/// use tokio_util::sync::CancellationToken;
///
/// let (pace, pacing) = tokio::sync::watch::channel(Pacing::default());
/// let invalidate = CancellationToken::new();
/// let binding = Binding::bound(pacing, invalidate.clone(), Arc::new(LegacySightings::default()));
/// pace.send(Pacing::FullSpeed).unwrap();
/// assert_eq!(binding.pacing(), Pacing::FullSpeed, "read at each step");
/// invalidate.cancel();
/// assert!(binding.is_invalidated());
/// assert!(!Binding::unbound().is_invalidated());
/// ```
#[derive(Clone, Debug, Default)]
pub struct Binding {
    pacing: Paced,
    /// Fires when the acquisition must leave the line (R3); never, unbound.
    invalidated: CancellationToken,
    sightings: Option<Arc<LegacySightings>>,
}

impl Binding {
    /// The binding of an acquisition nobody runs: paced as its locker was
    /// built to, never invalidated, its sightings not recorded.
    pub fn unbound() -> Binding {
        Binding::default()
    }

    /// The binding a runner (a node) gives one acquisition: it paces by
    /// `pacing` as it reads at each step, leaves the line when
    /// `invalidated` fires, and records the legacy holders it sees in
    /// `sightings`.
    pub fn bound(
        pacing: watch::Receiver<Pacing>,
        invalidated: CancellationToken,
        sightings: Arc<LegacySightings>,
    ) -> Binding {
        Binding {
            pacing: Paced::Watched(pacing),
            invalidated,
            sightings: Some(sightings),
        }
    }

    /// This binding, pacing by `pacing` if its runner set none: for code
    /// that plays a runner's part (a test fleet or the benchmark running
    /// the combined lock as from stage `dual` on).
    pub fn with_default_pacing(&self, pacing: Pacing) -> Binding {
        let mut binding = self.clone();
        if matches!(binding.pacing, Paced::Unset) {
            binding.pacing = Paced::Fixed(pacing);
        }
        binding
    }

    /// The acquisition's pacing at this step: as its runner's value reads
    /// now, or [`Pacing::default`] when nobody set one.
    pub fn pacing(&self) -> Pacing {
        match &self.pacing {
            Paced::Unset => Pacing::default(),
            Paced::Fixed(pacing) => *pacing,
            Paced::Watched(watch) => *watch.borrow(),
        }
    }

    /// Whether the acquisition was invalidated: it must stop waiting and
    /// end as [`AcquireError::Cancelled`](crate::AcquireError::Cancelled).
    pub fn is_invalidated(&self) -> bool {
        self.invalidated.is_cancelled()
    }

    /// Completes when the acquisition is invalidated (never, unbound).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn invalidated(&self) {
        self.invalidated.cancelled().await;
    }

    /// Records the legacy holders among `cells`, a read of `lock`'s `main`
    /// row made while waiting, as seen now by `clock` — in the runner's
    /// [`LegacySightings`], if it keeps any. Lockers call it with every
    /// such read.
    pub fn saw_main(&self, lock: &LockId, cells: &[Cell], clock: &dyn Clock) {
        if let Some(sightings) = &self.sightings {
            sightings.record(lock, cells, clock.now());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use lockshift_store::{ManualClock, Timestamp};

    use super::*;

    fn cell(column: &str, value: &[u8]) -> Cell {
        Cell {
            column: column.to_string(),
            value: value.to_vec(),
            writetime: Timestamp::from_micros(1),
            ttl: None,
        }
    }

    #[test]
    fn a_default_pacing_paces_only_what_its_runner_left_unset() {
        let slow = Pacing::BesideLegacy {
            owner_wait_max: Duration::from_secs(3),
        };
        assert_eq!(Binding::unbound().pacing(), Pacing::default());
        assert_eq!(Binding::unbound().with_default_pacing(slow).pacing(), slow);
        let (pace, pacing) = watch::channel(Pacing::FullSpeed);
        let bound = Binding::bound(
            pacing,
            CancellationToken::new(),
            Arc::new(LegacySightings::default()),
        )
        .with_default_pacing(slow);
        assert_eq!(bound.pacing(), Pacing::FullSpeed, "the runner's");
        pace.send(slow).unwrap();
        assert_eq!(bound.pacing(), slow, "read at each step");
    }

    #[test]
    fn legacy_holders_a_bound_acquisition_sees_reach_its_runner() {
        let clock = ManualClock::new(Timestamp::from_micros(5_000));
        let sightings = Arc::new(LegacySightings::default());
        let (_pace, pacing) = watch::channel(Pacing::default());
        let lock = LockId::new("L").unwrap();
        let main = [cell("old-binary", b"")];
        Binding::unbound().saw_main(&lock, &main, &clock);
        let bound = Binding::bound(pacing, CancellationToken::new(), sightings.clone());
        bound.saw_main(&lock, &[cell("n/0000000000000000", b"queue")], &clock);
        assert_eq!(
            sightings.last_seen(),
            None,
            "a lockshift cell is no evidence"
        );
        bound.saw_main(&lock, &main, &clock);
        assert_eq!(sightings.last_seen(), Some(Timestamp::from_micros(5_000)));
    }
}
