//! Clocks: where "now" comes from, injectable so tests move time without sleeping.
//!
//! The store uses a clock to expire TTLs; lock code uses one to stamp writes
//! and name queue cells. Production uses [`SystemClock`]. Tests use
//! [`TokioClock`], which follows tokio's (pausable) clock, so a test running
//! with `start_paused = true` sees a 60-second lease expire in milliseconds
//! with TTLs, sleeps and timestamps all agreeing; or [`ManualClock`], moved
//! only by hand. [`SkewedClock`] models a node whose clock is off,
//! [`JitteryClock`] one whose every reading is off by another amount.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, PoisonError};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::cell::{Timestamp, duration_micros};

/// A source of the current time.
pub trait Clock: Send + Sync + Debug {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// A shared clock.
pub type SharedClock = Arc<dyn Clock>;

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Timestamp {
        (**self).now()
    }
}

/// The operating system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        system_now()
    }
}

fn system_now() -> Timestamp {
    // A wall clock before 1970 is a broken machine; treat it as the epoch
    // rather than panic, the lease arithmetic stays monotone from there.
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(duration_micros)
        .unwrap_or(0);
    Timestamp::from_micros(micros)
}

/// A clock that follows tokio's clock from a fixed starting wall time.
///
/// Under `tokio::time::pause()` it advances exactly as tokio's timers do, so
/// sleeps, TTL expiry and timestamps stay consistent in a paused test.
#[derive(Clone, Debug)]
pub struct TokioClock {
    base: Timestamp,
    started: tokio::time::Instant,
}

impl TokioClock {
    /// A clock reading the system time now and advancing with tokio's clock.
    ///
    /// # Panics
    /// Outside a tokio runtime when time is paused (tokio's own rule).
    pub fn new() -> Self {
        Self::starting_at(system_now())
    }

    /// A clock reading `base` now and advancing with tokio's clock.
    pub fn starting_at(base: Timestamp) -> Self {
        TokioClock {
            base,
            started: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        self.base.saturating_add(self.started.elapsed())
    }
}

/// A clock that moves only when told to.
#[derive(Debug)]
pub struct ManualClock {
    micros: AtomicI64,
}

impl ManualClock {
    /// A clock stopped at `start`.
    pub fn new(start: Timestamp) -> Self {
        ManualClock {
            micros: AtomicI64::new(start.as_micros()),
        }
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.micros.fetch_add(duration_micros(d), Ordering::SeqCst);
    }

    /// Sets the clock to `t` (it may go backwards: that is what tests of clock
    /// trouble need).
    pub fn set(&self, t: Timestamp) {
        self.micros.store(t.as_micros(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_micros(self.micros.load(Ordering::SeqCst))
    }
}

/// Another clock shifted by a fixed offset: a node whose clock runs ahead
/// (positive) or behind (negative).
#[derive(Debug)]
pub struct SkewedClock<C> {
    inner: C,
    offset_micros: i64,
}

impl<C: Clock> SkewedClock<C> {
    /// `inner` shifted by `offset_micros`.
    pub fn new(inner: C, offset_micros: i64) -> Self {
        SkewedClock {
            inner,
            offset_micros,
        }
    }
}

impl<C: Clock> Clock for SkewedClock<C> {
    fn now(&self) -> Timestamp {
        self.inner.now().offset_micros(self.offset_micros)
    }
}

/// Another clock whose every reading is off by its own amount, uniform in
/// `±max` and drawn from a seed: a clock that NTP steps back and forth
/// between any two readings, the worst a node's clock does. Stamps read
/// from it still never go back within one lock context (L1,
/// docs/design.md §5); queue names, staleness and lease arithmetic see
/// every jump.
#[derive(Debug)]
pub struct JitteryClock<C> {
    inner: C,
    max_micros: i64,
    rng: Mutex<StdRng>,
}

impl<C: Clock> JitteryClock<C> {
    /// `inner`, each reading moved by up to `max` either way, drawn from
    /// `seed`.
    pub fn new(inner: C, max: Duration, seed: u64) -> Self {
        JitteryClock {
            inner,
            max_micros: duration_micros(max),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        }
    }
}

impl<C: Clock> Clock for JitteryClock<C> {
    fn now(&self) -> Timestamp {
        let jump = if self.max_micros > 0 {
            self.rng
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .random_range(-self.max_micros..=self.max_micros)
        } else {
            0
        };
        self.inner.now().offset_micros(jump)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_follows_paused_time() {
        let clock = TokioClock::starting_at(Timestamp::from_micros(1_000_000));
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(clock.now().as_micros(), 61_000_000);
    }

    #[test]
    fn manual_and_skewed_clocks() {
        let clock = Arc::new(ManualClock::new(Timestamp::from_micros(10)));
        clock.advance(Duration::from_micros(5));
        assert_eq!(clock.now().as_micros(), 15);
        let skewed = SkewedClock::new(clock.clone(), -20);
        assert_eq!(skewed.now().as_micros(), -5);
        clock.set(Timestamp::from_micros(3));
        assert_eq!(clock.now().as_micros(), 3);
    }

    #[test]
    fn a_jittery_clock_stays_within_its_bound_and_replays() {
        let readings = |seed| {
            let base = ManualClock::new(Timestamp::from_micros(1_000));
            let clock = JitteryClock::new(base, Duration::from_micros(100), seed);
            (0..50).map(|_| clock.now().as_micros()).collect::<Vec<_>>()
        };
        let a = readings(3);
        assert!(a.iter().all(|t| (900..=1_100).contains(t)), "{a:?}");
        assert!(a.windows(2).any(|w| w[1] < w[0]), "it jumps back too");
        assert_eq!(a, readings(3));
    }
}
