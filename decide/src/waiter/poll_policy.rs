//! How often a waiter looks (Q4): about once per measured store round
//! trip while the line moves and it is next, less often the further back it
//! stands, and less and less often while a hold lasts.
//!
//! Everything here is arithmetic on durations the driver measured; nothing
//! sleeps or touches the store, so the policy is tested as a table.
//!
//! # Why these three terms
//!
//! - **Distance.** A waiter `d` hand-offs from its turn polls every `d`
//!   round trips: it cannot move up faster than the line moves, and the
//!   total polling of a line of `n` grows like `ln n`, not like `n`. The
//!   round trip is the store's, measured by this waiter (a moving average of
//!   its single reads), so the same settings give the same hand-off *in
//!   round trips* on a 0.25 ms cluster and a 3 ms endpoint — a fixed
//!   interval would be far too slow on the first and too busy on the second.
//! - **Pace.** Further back (`d ≥ 2`) the line's own pace bounds how soon
//!   anything can change: the waiter looks about twice per expected move.
//!   (Once per move was measured: a waiter two places back then noticed its
//!   move to next too late, and the mean wait at P = 5 went up by half.)
//!   The line remembers its pace, so each new waiter starts from it.
//! - **Stillness.** While nothing changes (a long hold), the interval grows
//!   to an eighth of the time the line has stood still: a hold of `T` costs
//!   `O(log T)` polls up to the ceiling, then `T / ceiling`, and the
//!   hand-off after it is late by at most an eighth of `T` (never more than
//!   the ceiling). Rejected: a fixed growth per poll (the old rule, 3 % per
//!   poll) — its delay after a hold depends on the poll rate, so on a fast
//!   store it backs off in milliseconds and on a slow one it never does.
//!
//! The floor keeps an in-process store (round trips of microseconds) from
//! being polled in a hot loop; the ceiling bounds every interval.

use std::time::Duration;

/// The interval after a long stillness is this fraction of how long the line
/// stood still (see the module docs).
const STILLNESS_DIVISOR: u32 = 8;

/// The newest sample counts for one part in this many of a moving average.
const SMOOTHING_PARTS: u32 = 4;

/// The settings the policy works within.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// No interval is shorter (`lock.queue.min_poll`).
    pub floor: Duration,
    /// The next waiter's interval before a round trip was measured, and the
    /// most a round trip is taken to be (`lock.queue.head_poll`).
    pub head: Duration,
    /// No interval is longer (`lock.queue.waiter_poll`).
    pub ceiling: Duration,
}

/// A moving average of durations: the store's round trip as this waiter
/// sees it, or the line's pace.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Average(Option<Duration>);

impl Average {
    /// Adds a sample.
    pub fn note(&mut self, sample: Duration) {
        self.0 = Some(match self.0 {
            None => sample,
            Some(old) => {
                (old.saturating_mul(SMOOTHING_PARTS - 1)).saturating_add(sample) / SMOOTHING_PARTS
            }
        });
    }

    /// The average, once there is a sample.
    pub fn get(self) -> Option<Duration> {
        self.0
    }
}

/// What the interval depends on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Inputs {
    /// Hand-offs until this waiter's turn: 1 for the next waiter (first in
    /// line, prepared, or next after a head that is taking the lock).
    pub distance: u32,
    /// The measured round trip.
    pub round_trip: Average,
    /// The measured time per place the line moves.
    pub pace: Average,
    /// How long what this waiter sees has not changed.
    pub still: Duration,
}

/// The period between the starts of two polls (see the module docs).
pub fn interval(bounds: Bounds, inputs: Inputs) -> Duration {
    let ceiling = bounds.ceiling.max(bounds.floor);
    let base = inputs
        .round_trip
        .get()
        .unwrap_or(bounds.head)
        .clamp(bounds.floor, bounds.head.max(bounds.floor));
    let distance = inputs.distance.max(1);
    let by_distance = base.saturating_mul(distance);
    let by_pace = match inputs.pace.get() {
        Some(pace) if distance >= 2 => pace.saturating_mul(distance - 1) / 2,
        _ => Duration::ZERO,
    };
    let by_stillness = inputs.still / STILLNESS_DIVISOR;
    by_distance
        .max(by_pace)
        .max(by_stillness)
        .clamp(bounds.floor, ceiling)
}

/// The async runtime's timer tick. Pauses below it are timed by the lock
/// crate's fine timer (its `pause` module), to within the system's timer
/// slack.
pub const TIMER_TICK: Duration = Duration::from_millis(1);

/// How long to sleep before the next poll: the interval counts from the
/// start of the last one, so a poll that took a round trip is followed at
/// once when the interval is one round trip.
///
/// A remainder shorter than a timer tick, and shorter than the poll that
/// just took `last_took`, is dropped: starting at once is early by less
/// than one round trip, and saves a wake-up whose own slack is a fifth of
/// a round trip on a 0.25 ms cluster. Not when the last poll was quicker
/// than the floor (an in-process store): the floor keeps that from
/// becoming a hot loop. A longer remainder is slept in full — on a fast
/// store a waiter further back keeps its distance, and its pause ends on
/// time, not on the next millisecond.
pub fn sleep_before_next(interval: Duration, last_took: Duration, floor: Duration) -> Duration {
    let rest = interval.saturating_sub(last_took);
    if rest < TIMER_TICK && rest < last_took && last_took >= floor {
        Duration::ZERO
    } else {
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const US: Duration = Duration::from_micros(1);

    fn bounds() -> Bounds {
        Bounds {
            floor: US * 200,
            head: MS * 10,
            ceiling: MS * 250,
        }
    }

    fn avg(d: Option<Duration>) -> Average {
        let mut a = Average::default();
        if let Some(d) = d {
            a.note(d);
        }
        a
    }

    /// (distance, round trip, pace, still) → interval.
    type Case = (u32, Option<Duration>, Option<Duration>, Duration, Duration);

    /// Cases print their index; every row is (distance, round trip, pace,
    /// still) → interval.
    #[test]
    fn intervals_follow_round_trip_distance_pace_and_stillness() {
        #[rustfmt::skip]
        let cases: &[Case] = &[
            // Next waiter: one round trip, on a 3.4 ms endpoint and on a 0.25 ms cluster.
            (1, Some(US * 3400), None, Duration::ZERO, US * 3400),
            (1, Some(US * 250), None, Duration::ZERO, US * 250),
            // Before any measurement: head_poll.
            (1, None, None, Duration::ZERO, MS * 10),
            // An in-process store: the floor.
            (1, Some(US * 3), None, Duration::ZERO, US * 200),
            // A very slow store: a round trip counts as head_poll at most.
            (1, Some(MS * 40), None, Duration::ZERO, MS * 10),
            // Further back: in proportion to the distance...
            (3, Some(MS * 2), None, Duration::ZERO, MS * 6),
            // ...or half the expected time to move up to next, if longer.
            (3, Some(MS * 2), Some(MS * 20), Duration::ZERO, MS * 20),
            (3, Some(MS * 2), Some(MS * 2), Duration::ZERO, MS * 6),
            // The pace does not slow the next waiter down.
            (1, Some(MS * 2), Some(MS * 20), Duration::ZERO, MS * 2),
            // A long hold: an eighth of the stillness...
            (1, Some(MS * 2), None, MS * 400, MS * 50),
            // ...at most the ceiling.
            (1, Some(MS * 2), None, Duration::from_secs(60), MS * 250),
            (40, Some(MS * 10), None, Duration::ZERO, MS * 250),
        ];
        for (i, &(distance, rt, pace, still, want)) in cases.iter().enumerate() {
            let got = interval(
                bounds(),
                Inputs {
                    distance,
                    round_trip: avg(rt),
                    pace: avg(pace),
                    still,
                },
            );
            assert_eq!(got, want, "case #{i}");
        }
    }

    #[test]
    fn a_hold_costs_logarithmically_many_polls_then_one_per_ceiling() {
        // Simulate a waiter polling through a 10 s hold on a 1 ms store.
        let b = bounds();
        let mut t = Duration::ZERO;
        let mut polls = 0;
        while t < Duration::from_secs(10) {
            t += interval(
                b,
                Inputs {
                    distance: 1,
                    round_trip: avg(Some(MS)),
                    pace: Average::default(),
                    still: t,
                },
            );
            polls += 1;
        }
        // ln(10 s / 8 ms) × 8 ≈ 57 while growing, then 10 s / 250 ms = 40.
        assert!((60..=110).contains(&polls), "{polls} polls");
    }

    #[test]
    fn the_sleep_counts_from_the_start_of_the_last_poll() {
        let floor = US * 200;
        // (interval, last poll took) → sleep
        let cases = [
            (MS * 3, MS * 3, Duration::ZERO),
            (MS * 3, MS * 5, Duration::ZERO),
            (MS * 10, MS * 3, MS * 7),
            // Less than a timer tick left: start at once rather than
            // sleep to the next tick.
            (US * 3400, US * 3100, Duration::ZERO),
            (US * 450, US * 250, Duration::ZERO),
            // A tick or more left: sleep it.
            (US * 4500, US * 3400, US * 1100),
            // Less than a tick, but more than the poll took: sleep (a
            // waiter further back on a fast store keeps its distance).
            (US * 750, US * 250, US * 500),
            // An in-process store, quicker than the floor: never a hot loop.
            (US * 200, US * 3, US * 197),
        ];
        for (i, (interval, took, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                sleep_before_next(interval, took, floor),
                expected,
                "case {i}"
            );
        }
    }

    #[test]
    fn averages_move_a_quarter_of_the_way() {
        let mut a = Average::default();
        assert_eq!(a.get(), None);
        a.note(MS * 4);
        assert_eq!(a.get(), Some(MS * 4));
        a.note(MS * 8);
        assert_eq!(a.get(), Some(MS * 5));
    }
}
