//! A clock against the database's: how far off it is, measured as NTP
//! measures (docs/design.md §4b, C1), and what a time one process wrote
//! means on another's clock.
//!
//! # Measuring
//!
//! A process asks a coordinator for its clock (`SELECT
//! toUnixTimestamp(now()) FROM system.local`): sent at `sent`, answered at
//! `received` (both on the process's own clock), the answer `server` (whole
//! milliseconds, truncated) was read somewhere in between. So the
//! coordinator's clock minus the process's lies within
//!
//! ```text
//! server − midpoint ± (round trip / 2 + the server's 1 ms resolution)
//! ```
//!
//! whatever the network did on the way there and back: that is an
//! [`OffsetSample`]'s [`reading`](OffsetSample::reading), and the bound is
//! no estimate — it holds for every sample whose round trip was measured
//! on a clock that did not step during it. Several samples are taken and
//! the one of least round trip is kept ([`filter`]), as NTP's clock filter
//! keeps the sample of least delay: queueing only ever adds delay, so the
//! fastest exchange bounds the offset tightest.
//!
//! A reading ages: between two measurements a clock runs fast or slow by
//! up to [`DRIFT_PPM`] (what NTP itself allows a clock to be slewed by), so
//! its error grows by that much of the time since
//! ([`ClockReading::error_at`]). A process measures again every
//! [`MEASURE_EVERY`] and keeps the better of its readings
//! ([`refine`]).
//!
//! # Judging a writer's time
//!
//! A time a process wrote — a heartbeat's, a cell's write time — is on its
//! clock. On the database's clock it lay within
//! [`to_database_time`] of it, by the writer's own reading (which its
//! registry row carries); and what is measured need not be assumed.
//! [`age`] compares such a time with a reader's now, both turned into the
//! database's time, each by its own reading — or, for a process that
//! reports none (a build that predates the reading), within the skew margin
//! of the database's, the assumption every age was judged by before.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cell::Timestamp;

/// The coordinator answers its clock in whole milliseconds, truncated
/// (`toUnixTimestamp(now())`): the reading lies up to this much below the
/// clock.
pub const SERVER_RESOLUTION: Duration = Duration::from_millis(1);

/// How much faster or slower than the database's a clock may run between
/// two measurements, in parts per million: NTP's own bound on how fast it
/// slews a clock (500 ppm, 30 ms a minute). A clock that *steps* is not
/// bounded by it: a step is caught by the next measurement (docs/design.md
/// §4b, what C1 assumes).
pub const DRIFT_PPM: u64 = 500;

/// How long a process trusts its last reading for its own judgement
/// ([`ClockReading::within`]) when it cannot measure again: five
/// measurement periods.
pub const READING_MAX_AGE: Duration = Duration::from_secs(5 * 60);

/// How often a running process measures its clock again.
pub const MEASURE_EVERY: Duration = Duration::from_secs(60);

/// How many samples a process takes when it starts (one after another:
/// samples taken at once queue behind each other).
pub const SAMPLES_AT_START: usize = 5;

/// How many samples a process takes at every later measurement: three
/// round trips a minute.
pub const SAMPLES_PER_ROUND: usize = 3;

/// One exchange with a coordinator: `sent` and `received` on this
/// process's clock, `server` the coordinator's clock read in between.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetSample {
    /// When the request was sent (this process's clock).
    pub sent: Timestamp,
    /// When the answer arrived (this process's clock).
    pub received: Timestamp,
    /// What the coordinator's clock read (whole milliseconds, truncated).
    pub server: Timestamp,
}

impl OffsetSample {
    /// The round trip; `None` when the answer came "before" the request —
    /// the process's clock stepped back meanwhile, and the sample bounds
    /// nothing.
    pub fn round_trip(&self) -> Option<Duration> {
        let micros = self
            .received
            .as_micros()
            .checked_sub(self.sent.as_micros())?;
        u64::try_from(micros).ok().map(Duration::from_micros)
    }

    /// What this sample says: the offset `server − midpoint`, within half
    /// the round trip plus [`SERVER_RESOLUTION`], measured at the midpoint.
    /// `None` when it bounds nothing ([`round_trip`](Self::round_trip)).
    pub fn reading(&self) -> Option<ClockReading> {
        let rtt = micros_u64(self.round_trip()?);
        let sent = i128::from(self.sent.as_micros());
        let received = i128::from(self.received.as_micros());
        let midpoint = saturate((sent + received).div_euclid(2));
        Some(ClockReading {
            offset_us: saturate(i128::from(self.server.as_micros()) - i128::from(midpoint)),
            // Half the round trip, rounded up, plus the resolution.
            error_us: rtt.div_ceil(2) + micros_u64(SERVER_RESOLUTION),
            at_us: midpoint,
        })
    }
}

/// A process's clock against the database's, as measured: the database's
/// clock minus this process's, within an error bound, at a time on this
/// process's clock. What a registry row carries
/// (`NodeInfo::clock`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClockReading {
    /// The database's clock minus this process's, in µs: positive when
    /// this process's clock is behind.
    pub offset_us: i64,
    /// How far the true offset may be from `offset_us`, in µs, when it was
    /// measured (it grows after: [`error_at`](Self::error_at)).
    pub error_us: u64,
    /// When it was measured, on this process's clock (µs since the epoch).
    pub at_us: i64,
}

impl ClockReading {
    /// When it was measured, on the measuring process's clock.
    pub fn at(&self) -> Timestamp {
        Timestamp::from_micros(self.at_us)
    }

    /// The error bound at `now` (the measuring process's clock): the
    /// measured bound plus [`DRIFT_PPM`] of the time between, either way.
    pub fn error_at(&self, now: Timestamp) -> u64 {
        let apart = now.as_micros().abs_diff(self.at_us);
        self.error_us
            .saturating_add(apart.saturating_mul(DRIFT_PPM).div_ceil(1_000_000))
    }

    /// How far apart the two clocks may be at `now`: `|offset| + error`.
    pub fn bound_at(&self, now: Timestamp) -> u64 {
        self.offset_us
            .unsigned_abs()
            .saturating_add(self.error_at(now))
    }

    /// Whether the measuring process's clock is surely within `margin` of
    /// the database's at `now`: the reading is at most
    /// [`READING_MAX_AGE`] old (either way: a clock stepped back makes it
    /// "young" by as much) and `|offset| + error` is within the margin.
    pub fn within(&self, margin: Duration, now: Timestamp) -> bool {
        self.within_until(margin)
            .is_some_and(|until| now.as_micros().abs_diff(self.at_us) <= until)
    }

    /// For how long after it was measured (and before, on a clock stepped
    /// back) [`within`](Self::within) holds, in µs; `None` when it never
    /// does.
    pub fn within_until(&self, margin: Duration) -> Option<u64> {
        let slack = micros_u64(margin).checked_sub(self.bound_at(self.at()))?;
        // Drift eats the slack at DRIFT_PPM µs per second.
        let by_drift = slack.saturating_mul(1_000_000) / DRIFT_PPM;
        Some(by_drift.min(micros_u64(READING_MAX_AGE)))
    }

    /// The offset as it reads in a log line: `+120.003s ± 1.5ms`.
    pub fn describe(&self) -> String {
        let sign = if self.offset_us < 0 { "-" } else { "+" };
        format!(
            "{sign}{} ± {}",
            fmt_micros(self.offset_us.unsigned_abs()),
            fmt_micros(self.error_us)
        )
    }
}

/// `µs` as people read an offset: `1.5ms` below a second, `120.003s` above.
pub fn fmt_micros(us: u64) -> String {
    if us < 1_000_000 {
        format!("{}.{}ms", us / 1_000, us % 1_000 / 100)
    } else {
        format!("{}.{:03}s", us / 1_000_000, us % 1_000_000 / 1_000)
    }
}

/// The reading of the sample of least round trip among `samples` (the
/// later one on a tie); `None` when none bounds anything (no samples, or
/// only samples across a step back of the clock).
pub fn filter(samples: &[OffsetSample]) -> Option<ClockReading> {
    samples
        .iter()
        .filter_map(|s| Some((s.round_trip()?, s.reading()?)))
        .fold(
            None,
            |best: Option<(Duration, ClockReading)>, (rtt, r)| match best {
                Some((b, _)) if b < rtt => best,
                _ => Some((rtt, r)),
            },
        )
        .map(|(_, r)| r)
}

/// The better of the reading `kept` and a `fresh` one, at `now`: the one
/// whose error is smaller by then — but the fresh one whenever the two
/// disagree (their bounds at `now` do not overlap): then a clock stepped
/// since `kept` was measured, and only the fresh reading knows it.
pub fn refine(kept: Option<ClockReading>, fresh: ClockReading, now: Timestamp) -> ClockReading {
    let Some(kept) = kept else {
        return fresh;
    };
    let (ek, ef) = (
        i128::from(kept.error_at(now)),
        i128::from(fresh.error_at(now)),
    );
    let (ok, of) = (i128::from(kept.offset_us), i128::from(fresh.offset_us));
    let overlap = (ok - of).abs() <= ek + ef;
    if overlap && ek < ef { kept } else { fresh }
}

/// When a time `writer_time` on a writer's clock was on the database's
/// clock, by the writer's `reading`: `(earliest, latest)`.
pub fn to_database_time(writer_time: Timestamp, reading: &ClockReading) -> (Timestamp, Timestamp) {
    let center = writer_time.offset_micros(reading.offset_us);
    let error = reading.error_at(writer_time);
    window(center, error)
}

/// [`to_database_time`] for a writer that may not report a reading: one
/// that does not is taken to be within `margin` of the database's clock
/// (`rollout.clock_skew_margin`, what builds before the reading assumed).
pub fn database_window(
    writer_time: Timestamp,
    reading: Option<&ClockReading>,
    margin: Duration,
) -> (Timestamp, Timestamp) {
    match reading {
        Some(r) => to_database_time(writer_time, r),
        None => window(writer_time, micros_u64(margin)),
    }
}

/// How old something is in the database's time: at least `least`, at
/// most `most`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Age {
    /// The least it can be (zero when it may lie ahead).
    pub least: Duration,
    /// The most it can be (zero when it surely lies ahead).
    pub most: Duration,
    /// How old it is as a view shows it: each clock taken to the
    /// database's at its reading's offset, or at its word without one
    /// (zero when that puts it ahead).
    pub shown: Duration,
}

impl Age {
    /// Whether it is surely older than `limit`: a registration or lease
    /// may be judged over only then.
    pub fn surely_over(&self, limit: Duration) -> bool {
        self.least > limit
    }

    /// Whether it is surely no older than `limit`.
    pub fn surely_within(&self, limit: Duration) -> bool {
        self.most <= limit
    }
}

/// How old, in the database's time, a time `written` on a writer's clock
/// is at `now` on a reader's clock — each turned into the database's time
/// by its own reading ([`database_window`]; a side without one is taken
/// within `margin` of the database's clock, and the reader's own clock for
/// the database's when it has no reading either: exactly the margin
/// between the two, as before readings).
///
/// A heartbeat, a cell: judge it gone only when [`Age::surely_over`] its
/// limit — a writer far off the database's clock no longer looks silent or
/// dead, nor a live one's cell stale (issue 41: a holder at −120 s was
/// shown as `LEASE OVER`).
pub fn age(
    written: Timestamp,
    writer: Option<&ClockReading>,
    now: Timestamp,
    reader: Option<&ClockReading>,
    margin: Duration,
) -> Age {
    let (w_early, w_late) = database_window(written, writer, margin);
    let (r_early, r_late) = match reader {
        Some(r) => to_database_time(now, r),
        None => (now, now),
    };
    let gap = |to: Timestamp, from: Timestamp| {
        Duration::from_micros(
            u64::try_from(i128::from(to.as_micros()) - i128::from(from.as_micros())).unwrap_or(0),
        )
    };
    let at_offset = |t: Timestamp, reading: Option<&ClockReading>| {
        reading.map_or(t, |r| t.offset_micros(r.offset_us))
    };
    Age {
        least: gap(r_early, w_late),
        most: gap(r_late, w_early),
        shown: gap(at_offset(now, reader), at_offset(written, writer)),
    }
}

/// How far apart two clocks are, by two readings the same client took of
/// them (each the clock minus the client's): `a − b`, within `error_us`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Spread {
    /// `a`'s clock minus `b`'s, in µs.
    pub difference_us: i64,
    /// How far the true difference may be from it, in µs: both errors,
    /// plus the drift of the client's clock between the two readings.
    pub error_us: u64,
}

/// Whether two clocks keep within a tolerance, by their [`Spread`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Apart {
    /// Surely within: `|difference| + error ≤ tolerance`.
    Within,
    /// The measurement cannot tell: within its error of the tolerance.
    Unsure,
    /// Surely beyond: `|difference| − error > tolerance`.
    Beyond,
}

impl Spread {
    /// The spread of `a` and `b`.
    pub fn of(a: &ClockReading, b: &ClockReading) -> Spread {
        Spread {
            difference_us: saturate(i128::from(a.offset_us) - i128::from(b.offset_us)),
            error_us: a.error_us.saturating_add(b.error_at(a.at())),
        }
    }

    /// Whether they keep within `tolerance`.
    pub fn judge(&self, tolerance: Duration) -> Apart {
        let distance = self.difference_us.unsigned_abs();
        let tolerance = micros_u64(tolerance);
        if distance.saturating_add(self.error_us) <= tolerance {
            Apart::Within
        } else if distance.saturating_sub(self.error_us) > tolerance {
            Apart::Beyond
        } else {
            Apart::Unsure
        }
    }
}

fn window(center: Timestamp, error_us: u64) -> (Timestamp, Timestamp) {
    let error = i64::try_from(error_us).unwrap_or(i64::MAX);
    (
        center.offset_micros(error.saturating_neg()),
        center.offset_micros(error),
    )
}

fn micros_u64(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn saturate(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
#[path = "offset_tests.rs"]
mod tests;
