//! The process's clock against the database's (C1, docs/design.md §4b):
//! measured when the node starts and every minute while it runs, reported
//! in its registry row (`NodeInfo::clock`) and its metrics, and kept
//! within `rollout.clock_skew_margin` — or the node acts as combined,
//! saying why, as it does with a stage it cannot confirm.
//!
//! A measurement is a few reads of the coordinator's clock
//! (`lockshift_store::offset::measure_offset`): [`SAMPLES_AT_START`] when the
//! node starts, then [`SAMPLES_PER_ROUND`] every [`MEASURE_EVERY`] — three
//! single-row reads of `system.local` a minute, beside a heartbeat's two
//! writes every `rollout.heartbeat_every`. The better of the last reading
//! and the new one is kept (`lockshift_decide::offset::refine`), so one slow
//! round costs nothing; a round that gets no answer keeps the last
//! reading, which ages by the drift allowance and counts for at most
//! `READING_MAX_AGE`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use lockshift_decide::duration::fmt_duration;
use lockshift_decide::offset::{
    ClockReading, MEASURE_EVERY, SAMPLES_AT_START, SAMPLES_PER_ROUND, refine, to_database_time,
};
use lockshift_store::offset::{Measurement, measure_offset};
use lockshift_store::{Clock, Route, SharedClock, Store, Timestamp};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::runtime::NodeParts;

/// The clock a node stamps with and judges times by: its host's clock
/// plus the correction its readings measured (C1, docs/design.md §4b), so
/// a host minutes off the database's clock stamps on the database's time
/// (within the reading's error) and acts as its mode says. Zero until the
/// first reading. A lease's stamps still only increase when the
/// correction moves back (L1); the correction moves only when a reading
/// puts the stamping clock beyond its error.
#[derive(Debug)]
pub(super) struct CorrectedClock {
    host: SharedClock,
    correction_us: AtomicI64,
}

impl CorrectedClock {
    pub(super) fn new(host: SharedClock) -> Self {
        CorrectedClock {
            host,
            correction_us: AtomicI64::new(0),
        }
    }

    /// The host's clock, uncorrected: what the offset is measured on.
    pub(super) fn host(&self) -> &dyn Clock {
        self.host.as_ref()
    }

    /// What is added to the host's clock, in µs.
    pub(super) fn correction_us(&self) -> i64 {
        self.correction_us.load(Ordering::Relaxed)
    }

    /// Corrects by `host`'s reading of the host's clock, when the clock
    /// stamped with now is not within its error of the database's; returns
    /// the reading of the clock stamped with from now on (the database's
    /// minus it, within the same error).
    fn correct_by(&self, host: &ClockReading) -> ClockReading {
        let kept = self.correction_us();
        let residual = host.offset_us.saturating_sub(kept);
        let correction = if residual.unsigned_abs() > host.error_us {
            self.correction_us.store(host.offset_us, Ordering::Relaxed);
            host.offset_us
        } else {
            kept
        };
        ClockReading {
            offset_us: host.offset_us.saturating_sub(correction),
            error_us: host.error_us,
            at_us: host.at_us.saturating_add(correction),
        }
    }
}

impl Clock for CorrectedClock {
    fn now(&self) -> Timestamp {
        self.host.now().offset_micros(self.correction_us())
    }
}

/// What the node knows of its clock.
#[derive(Debug, Default)]
pub(super) struct ClockState {
    /// The host clock's reading kept (the better of the last ones).
    pub(super) host: Option<ClockReading>,
    /// The reading of the clock the node stamps with (the host's plus the
    /// correction): what its registry row carries, and what C1 judges.
    pub(super) reading: Option<ClockReading>,
    /// Why the last measurement gave no reading, while it gave none.
    why_none: Option<String>,
    /// Whether the clock was within the margin when last logged (`None`:
    /// nothing logged yet).
    logged_within: Option<bool>,
}

impl ClockState {
    /// Why the clock is not known within `margin` of the database's at
    /// `now` (this process's clock), in words: what a node acting as
    /// combined says.
    pub(super) fn why_unbounded(&self, margin: Duration, now: Timestamp) -> String {
        let margin_text = fmt_duration(margin);
        match (&self.reading, &self.why_none) {
            (None, Some(why)) => format!(
                "this process's clock has not been measured against the database's yet ({why})"
            ),
            (None, None) => {
                "this process's clock has not been measured against the database's yet".to_string()
            }
            (Some(r), why) if r.bound_at(now) <= micros(margin) => format!(
                "this process's clock was last measured {} ago ({} from the database's) and not \
                 since{}",
                lockshift_decide::duration::fmt_duration_rounded(Duration::from_micros(
                    now.as_micros().abs_diff(r.at_us)
                )),
                r.describe(),
                why.as_ref().map(|w| format!(": {w}")).unwrap_or_default()
            ),
            (Some(r), _) => format!(
                "this process's clock is {} from the database's, beyond \
                 rollout.clock_skew_margin ({margin_text})",
                r.describe()
            ),
        }
    }
}

impl NodeParts {
    /// Measures the clock with `samples` reads of the coordinator's, keeps
    /// the better reading, tells the view until when the clock is within
    /// the margin (C1) and re-evaluates, logging a change and recording the
    /// gauges.
    pub(super) async fn measure_clock(&self, samples: usize) {
        let measured = measure_offset(
            self.store.as_ref(),
            self.corrected.host(),
            &Route::Default,
            samples,
        )
        .await;
        self.take_measurement(&measured);
    }

    /// [`measure_clock`](Self::measure_clock) after the reads: `measured`
    /// is a measurement of the host's clock.
    pub(super) fn take_measurement(&self, measured: &Measurement) {
        let host_clock = self.corrected.host();
        let (host_wall, now) = (host_clock.now(), Instant::now());
        let margin = self.rollout.clock_skew_margin;
        let mut st = self.state();
        match measured.reading {
            Some(fresh) => {
                let host = refine(st.clock.host, fresh, host_wall);
                st.clock.host = Some(host);
                let reading = self.corrected.correct_by(&host);
                st.clock.reading = Some(reading);
                st.clock.why_none = None;
                let wall = self.clock.now();
                // Until when it stays within, on the monotonic clock: the
                // reading's own time on the wall clock is `wall − since`.
                let since = Duration::from_micros(
                    u64::try_from(wall.as_micros().saturating_sub(reading.at_us)).unwrap_or(0),
                );
                let until = reading.within_until(margin).map(|us| {
                    now + Duration::from_micros(us)
                        .checked_sub(since)
                        .unwrap_or_default()
                });
                st.view.clock(until.map(Instant::into_std));
            }
            None => {
                debug!(node = %self.id, failures = measured.failures,
                    why = ?measured.why_none(), "no clock reading this round; keeping the last");
                st.clock.why_none = measured.why_none();
            }
        }
        let wall = self.clock.now();
        self.metrics.clock(st.clock.host.as_ref(), host_wall);
        let within = st.view.clock_bounded(now.into_std());
        if st.clock.logged_within != Some(within) {
            st.clock.logged_within = Some(within);
            let why = st.clock.why_unbounded(margin, wall);
            match (within, st.clock.host) {
                (true, Some(r)) if r.bound_at(host_wall) > micros(margin) => {
                    warn!(node = %self.id, host = %r.describe(), margin = %fmt_duration(margin),
                    "this host's clock is beyond rollout.clock_skew_margin of the database's; this process stamps and judges times on it corrected by the offset measured (set the host's clock right: docs/operating.md §12)");
                }
                (true, Some(r)) => info!(node = %self.id, offset = %r.describe(),
                    margin = %fmt_duration(margin),
                    "this process's clock is within rollout.clock_skew_margin of the database's"),
                _ => warn!(node = %self.id, offset = ?st.clock.reading.map(|r| r.describe()),
                    margin = %fmt_duration(margin),
                    "{why}; acting as combined until it is known within the margin (docs/operating.md §12)"),
            }
        }
        self.reevaluate(&mut st, now);
        drop(st);
        self.view_changed.notify_one();
    }

    /// `t` on this process's clock as the latest it can be on the
    /// database's, by the reading kept (`t` itself without one): what the
    /// activity record is written in, so a process far off the database's
    /// clock neither hides a use of legacy or queue in the past nor holds
    /// the quiet period up from the future (R8, C1).
    pub(super) fn on_database_clock(&self, t: Timestamp) -> Timestamp {
        match self.state().clock.reading {
            Some(r) => to_database_time(t, &r).1,
            None => t,
        }
    }

    /// Measures the clock every [`MEASURE_EVERY`] until `stop`.
    pub(super) async fn keep_measuring(
        self: std::sync::Arc<Self>,
        stop: tokio_util::sync::CancellationToken,
    ) {
        super::runtime::every(MEASURE_EVERY, stop, || {
            self.measure_clock(SAMPLES_PER_ROUND)
        })
        .await;
    }
}

/// The first measurement of the host's clock ([`SAMPLES_AT_START`] reads),
/// before the node reads or writes anything else: `clock` is corrected by
/// it at once, so the homes, the stage, the first heartbeat and every
/// stamp are on the corrected clock from the start, and the node may act
/// as its mode says from its first confirmed view. The node takes it in
/// (`NodeParts::take_measurement`) once it exists.
pub(super) async fn measure_at_start(store: &dyn Store, clock: &CorrectedClock) -> Measurement {
    let measured = measure_offset(store, clock.host(), &Route::Default, SAMPLES_AT_START).await;
    if let Some(reading) = &measured.reading {
        clock.correct_by(reading);
    }
    measured
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
#[path = "clock_tests.rs"]
mod tests;
