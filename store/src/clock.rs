//! Clocks: where "now" comes from, injectable so tests move time without sleeping.
//!
//! The store uses a clock to expire TTLs; lock code uses one to stamp writes
//! and name queue cells. Production uses [`SystemClock`]. Tests use
//! [`TokioClock`], which follows tokio's (pausable) clock, so a test running
//! with `start_paused = true` sees a 60-second lease expire in milliseconds
//! with TTLs, sleeps and timestamps all agreeing; or [`ManualClock`], moved
//! only by hand. [`SkewedClock`] models a node whose clock is off.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
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
}
