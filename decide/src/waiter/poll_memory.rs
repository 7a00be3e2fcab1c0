//! The waiter's polling memory, and how long it sleeps before it looks
//! again: what it measured (the line's pace) and last saw (the scene),
//! fed to the pure intervals of [`super::poll_policy`].

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

use super::poll_policy::{self, Inputs};
use super::{Context, Waiter};
use crate::cell::{Cell, Timestamp};
use crate::queue::Position;

impl Waiter {
    /// Notes how many wait ahead: the pace of the line, and whether the
    /// scene changed.
    pub(super) fn moved_to(&mut self, ahead: u32, now: Instant) {
        self.note_distance(ahead, now);
        self.scene_is(u64::from(ahead), now);
    }

    /// Notes a distance for the pace of the line: the time since the last
    /// distance was first seen, per place moved.
    pub(super) fn note_distance(&mut self, ahead: u32, now: Instant) {
        let polling = &mut self.polling;
        if let Some((before, at)) = polling.last_ahead
            && ahead < before
        {
            polling
                .pace
                .note(now.saturating_duration_since(at) / (before - ahead));
        }
        if polling.last_ahead.is_none_or(|(before, _)| before != ahead) {
            polling.last_ahead = Some((ahead, now));
        }
    }

    /// The line's pace counts the move to first too: a waiter that polled
    /// late and found itself first would otherwise never lower a pace that
    /// was too slow — and would keep polling too late to reserve behind
    /// the one ahead (Q6).
    pub(super) fn reached_first(&mut self, position: &Position, now: Instant) {
        if position.is_first() {
            self.note_distance(0, now);
        }
    }

    /// Notes who else is in `main`.
    pub(super) fn see(&mut self, cells: &[Cell], now: Instant) {
        let mut h = DefaultHasher::new();
        for c in cells.iter().filter(|c| c.column != self.me) {
            c.column.hash(&mut h);
            c.value.hash(&mut h);
        }
        self.scene_is(h.finish() | 1 << 63, now);
    }

    pub(super) fn scene_is(&mut self, scene: u64, now: Instant) {
        if self.polling.scene != Some(scene) {
            self.polling.scene = Some(scene);
            self.polling.since = now;
        }
    }

    pub(super) fn interval(&self, distance: u32, now: Instant) -> Duration {
        poll_policy::interval(
            self.bounds,
            Inputs {
                distance,
                round_trip: self.polling.round_trip,
                pace: self.polling.pace,
                still: now.saturating_duration_since(self.polling.since),
            },
        )
    }

    /// The next poll of `main` by the next waiter: once per round trip while
    /// the line moves, backing off while a hold lasts; a holder that stopped
    /// renewing is dead and its cell goes only with its TTL.
    pub(super) fn next_main_poll(&self, cells: Option<&[Cell]>, cx: &Context) -> Duration {
        if cells.is_some_and(|c| self.holder_is_stale(c, cx.wall)) {
            return self.bounds.ceiling.max(self.bounds.floor);
        }
        self.sleep_before_poll(1, cx)
    }

    /// The sleep before the next look of a waiter `distance` hand-offs from
    /// its turn, counted from the start of the one that just took `cx.took`.
    pub(super) fn sleep_before_poll(&self, distance: u32, cx: &Context) -> Duration {
        poll_policy::sleep_before_next(self.interval(distance, cx.now), cx.took, self.bounds.floor)
    }

    /// The pause while blocked: the entry's own pacing if it has one, else
    /// the next waiter's polling.
    pub(super) fn blocked_pause(&self, cells: Option<&[Cell]>, cx: &Context) -> Duration {
        self.policy
            .busy_pause(cx.pacing, cx.draw)
            .unwrap_or_else(|| self.next_main_poll(cells, cx))
    }

    pub(super) fn holder_is_stale(&self, cells: &[Cell], wall: Timestamp) -> bool {
        let mut others = cells.iter().filter(|c| c.column != self.me);
        match (others.next(), others.next()) {
            (Some(only), None) => wall.duration_since(only.writetime) > self.holder_stale_after,
            _ => false,
        }
    }
}
