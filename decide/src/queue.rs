//! The queue row: what a waiter's cell says (listing 6, with names reused)
//! and where a waiter stands.
//!
//! # The layout
//!
//! The thesis names a queue cell by its arrival — a 20-digit time in µs,
//! then the owner id — so that the row's column order is arrival order and
//! a read of the first few cells finds the head. Every acquisition then
//! leaves a tombstone under a name never used again, and every read of the
//! row passes all of them: on Cassandra a lock slows with use and its reads
//! fail past 100 000 tombstones (docs/design.md §1). So lockshift names a
//! queue cell by its owner id alone — a slot, reused by the process's next
//! acquisition of the lock (L7) — and writes the arrival into the value:
//! `"{arrival:020}:{algorithm}"`. The row holds one cell, live or
//! tombstone, per slot; a read takes the whole row and orders it by
//! (arrival, owner id) — the thesis' order, the same names in another
//! place.
//!
//! Cells of the thesis' shape, written by lockshift builds before this
//! layout, are read too: their arrival comes from the column. The two
//! builds place each other's waiters by the same arrival times, but an
//! older build counts only cells of its own shape as ahead: a waiter of
//! each may believe itself first at once. That costs fairness, never
//! exclusion, which rests on `main` (Q1); and a reservation behind a
//! waiter of the other shape is never disregarded by it (the names differ,
//! below), so Q6 never spans the two.
//!
//! A waiter is named, where a reservation behind it must name it (Q6), by
//! its *mark* — owner id and arrival, `owner@arrival` — not by its owner id
//! alone: the owner id passes to the slot's next acquisition, the mark
//! does not.
//!
//! Reading the row is the queue lock's I/O; [`place`] is the judgement on
//! what a read returned, and [`Sightings`] the memory of earlier reads by
//! which a waiter judges which cells are dead waiters' (it takes the
//! waiter's `now`, and keeps no clock of its own).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::algorithm::Algorithm;
use crate::cell::{Cell, Timestamp};
use crate::id::OwnerId;

/// Digits of the arrival time (listing 6's time prefix).
pub const TIME_DIGITS: usize = 20;

/// The value of the queue cell of a waiter that arrived at `arrival`,
/// waiting with `algorithm`.
pub fn queue_value(arrival: Timestamp, algorithm: Algorithm) -> Vec<u8> {
    let micros = u64::try_from(arrival.as_micros()).unwrap_or(0);
    format!("{micros:0width$}:{algorithm}", width = TIME_DIGITS).into_bytes()
}

/// The name a reservation behind the waiter `owner`, arrived at `arrival`,
/// gives it (Q6).
pub fn mark(owner: &str, arrival: u64) -> String {
    format!("{owner}@{arrival:0width$}", width = TIME_DIGITS)
}

/// One waiter's queue cell, read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueCell {
    /// When it arrived (µs, by the time service).
    pub arrival: u64,
    /// Its owner id.
    pub owner: OwnerId,
    /// The algorithm it waits with, when the cell says (lockshift's).
    pub algorithm: Option<Algorithm>,
}

impl QueueCell {
    /// Its mark: what a reservation behind it names.
    pub fn mark(&self) -> String {
        mark(self.owner.as_str(), self.arrival)
    }
}

/// Reads a queue cell of either layout: owner-id column with the arrival in
/// the value, or the thesis' time-and-owner column with the algorithm in
/// the value. `None` if it is neither (written by something else).
pub fn parse_queue_cell(column: &str, value: &[u8]) -> Option<QueueCell> {
    let value = std::str::from_utf8(value).ok();
    if let Some((arrival, algorithm)) = value.and_then(|v| v.split_once(':'))
        && arrival.len() == TIME_DIGITS
        && arrival.bytes().all(|b| b.is_ascii_digit())
    {
        return Some(QueueCell {
            arrival: arrival.parse().ok()?,
            owner: OwnerId::from_stored(column),
            algorithm: algorithm.parse().ok(),
        });
    }
    let prefix = column.get(..TIME_DIGITS)?;
    if !prefix.bytes().all(|b| b.is_ascii_digit()) || column.len() == TIME_DIGITS {
        return None;
    }
    Some(QueueCell {
        arrival: prefix.parse().ok()?,
        owner: OwnerId::from_stored(&column[TIME_DIGITS..]),
        algorithm: value.and_then(|v| v.parse().ok()),
    })
}

/// Where a waiter stands, counting only live (non-stale) cells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Position {
    /// First in line, and no cell at all ahead: may try to enter `main`.
    First,
    /// First among the live cells, past cells of dead waiters (not renewed
    /// for `stale_after`) that are still in the row. As first for entering;
    /// but a dead-looking cell may be a paused waiter's, so it does not show
    /// that waiter gone (Q6).
    FirstPastDead,
    /// In line after `ahead` live cells (1: next after the head, usually
    /// the holder). `ahead` saturates at the window: "far back".
    Queued {
        /// Live cells ahead, at most the window.
        ahead: u32,
        /// The mark of the first live cell (the head of the line).
        head: String,
        /// The algorithm the head waits with (its queue cell's value), when
        /// it is lockshift's.
        head_algorithm: Option<Algorithm>,
    },
    /// The waiter's own cell is not in the row (expired or deleted).
    Missing,
}

impl Position {
    /// First in line, past dead waiters or not.
    pub fn is_first(&self) -> bool {
        matches!(self, Position::First | Position::FirstPastDead)
    }
}

/// Where `me` (my queue column) stands in a read of the whole queue row of
/// a lock, ordered by arrival (the queue lock's `position` reads the row
/// and calls this). `ahead` saturates at `window` (the waiter polls in
/// proportion to its distance, so beyond the window the exact distance
/// does not matter). Cells `dead` says are dead waiters' are skipped; `me`
/// never is. A cell of neither layout counts as arrived at time 0.
pub fn place(cells: &[Cell], me: &str, dead: impl Fn(&Cell) -> bool, window: u32) -> Position {
    let window = window.max(1);
    let mut line: Vec<(QueueCell, &Cell)> = cells
        .iter()
        .map(|c| {
            let entry = parse_queue_cell(&c.column, &c.value).unwrap_or(QueueCell {
                arrival: 0,
                owner: OwnerId::from_stored(&c.column),
                algorithm: None,
            });
            (entry, c)
        })
        .collect();
    line.sort_by(|(a, ca), (b, cb)| (a.arrival, &ca.column).cmp(&(b.arrival, &cb.column)));
    let mut ahead: u32 = 0;
    let mut head: Option<&QueueCell> = None;
    let mut past_dead = false;
    for (entry, cell) in &line {
        if cell.column == me {
            return match head {
                None if past_dead => Position::FirstPastDead,
                None => Position::First,
                Some(head) => Position::Queued {
                    ahead: ahead.min(window),
                    head: head.mark(),
                    head_algorithm: head.algorithm,
                },
            };
        }
        if dead(cell) {
            past_dead = true;
            continue;
        }
        ahead = ahead.saturating_add(1);
        head.get_or_insert(entry);
    }
    Position::Missing
}

/// Which queue cells a waiter has watched stand still: a cell whose write
/// time has not changed for `stale_after` *of this waiter's own time* is a
/// dead waiter's. Judged by watching, not by comparing the write time with
/// this node's clock: waiting cells are rewritten every second and skipped
/// after three, so clock skew of a few seconds between nodes — which the
/// write-time rule turned into live waiters skipped (or dead ones kept) —
/// must not enter. A waiter that just arrived therefore waits up to
/// `stale_after` before it skips a dead cell; the cell's waiting TTL ends
/// it soon after anyway. Skipping is safe at any threshold
/// (Q3; proof in docs/design.md §2).
#[derive(Debug, Clone)]
pub struct Sightings {
    stale_after: Duration,
    /// Column → (the write time last seen, since when it has been seen).
    seen: HashMap<String, (Timestamp, Instant)>,
}

impl Sightings {
    /// Nothing watched yet; cells standing still for `stale_after` are dead.
    pub fn new(stale_after: Duration) -> Sightings {
        Sightings {
            stale_after,
            seen: HashMap::new(),
        }
    }

    /// Notes a read of the whole queue row at `now`: a changed write time
    /// restarts a cell's clock; cells no longer there are forgotten.
    pub fn observe(&mut self, cells: &[Cell], now: Instant) {
        self.seen
            .retain(|column, _| cells.iter().any(|c| c.column == *column));
        for c in cells {
            match self.seen.get_mut(&c.column) {
                Some((writetime, _)) if *writetime == c.writetime => {}
                Some(entry) => *entry = (c.writetime, now),
                None => {
                    self.seen.insert(c.column.clone(), (c.writetime, now));
                }
            }
        }
    }

    /// Whether `cell` has stood still for longer than `stale_after` at `now`.
    pub fn is_dead(&self, cell: &Cell, now: Instant) -> bool {
        self.seen
            .get(&cell.column)
            .is_some_and(|(writetime, since)| {
                *writetime == cell.writetime
                    && now.saturating_duration_since(*since) > self.stale_after
            })
    }
}

#[cfg(test)]
mod tests {
    use crate::id::NodeId;

    use super::*;

    #[test]
    fn cells_of_both_layouts_parse_back() {
        let node = NodeId::new("n").unwrap();
        let owner = OwnerId::new(&node, 2);
        let value = queue_value(Timestamp::from_micros(999), Algorithm::Combined);
        assert_eq!(value, b"00000000000000000999:combined");
        assert_eq!(
            parse_queue_cell(owner.as_str(), &value),
            Some(QueueCell {
                arrival: 999,
                owner: owner.clone(),
                algorithm: Some(Algorithm::Combined),
            })
        );
        // The thesis' shape, as lockshift builds before slots wrote it.
        assert_eq!(
            parse_queue_cell("00000000000000001000n/0000000000000002", b"queue"),
            Some(QueueCell {
                arrival: 1_000,
                owner: owner.clone(),
                algorithm: Some(Algorithm::Queue),
            })
        );
        assert_eq!(parse_queue_cell("garbage", b"queue"), None);
        assert_eq!(parse_queue_cell("0000000000000000000x-owner", b""), None);
        assert_eq!(parse_queue_cell("00000000000000000001", b"queue"), None);
        assert_eq!(parse_queue_cell("o", b"0001:queue"), None, "short time");
        assert_eq!(
            parse_queue_cell(owner.as_str(), &value).unwrap().mark(),
            "n/0000000000000002@00000000000000000999"
        );
    }

    /// A cell is dead once its write time has stood still for
    /// `stale_after` of the watcher's own time — whatever the write time
    /// says against the watcher's clock (skew between nodes does not
    /// enter); a rewrite restarts its clock, a cell gone is forgotten.
    #[test]
    fn a_cell_is_dead_once_watched_standing_still() {
        let stale = Duration::from_secs(3);
        let cell = |at: i64| Cell {
            column: "x".into(),
            value: b"v".to_vec(),
            // Far in the future or past of anyone's clock: it does not matter.
            writetime: Timestamp::from_micros(at),
            ttl: None,
        };
        let mut s = Sightings::new(stale);
        let t0 = Instant::now();
        s.observe(&[cell(9_000_000_000_000_000)], t0);
        assert!(!s.is_dead(&cell(9_000_000_000_000_000), t0 + stale));
        assert!(s.is_dead(
            &cell(9_000_000_000_000_000),
            t0 + stale + Duration::from_millis(1)
        ));
        // Rewritten: watched afresh.
        let t1 = t0 + Duration::from_secs(10);
        s.observe(&[cell(1)], t1);
        assert!(!s.is_dead(&cell(1), t1 + stale));
        assert!(s.is_dead(&cell(1), t1 + stale * 2));
        // Gone, then back with the same write time: watched afresh.
        s.observe(&[], t1);
        s.observe(&[cell(1)], t1 + stale * 3);
        assert!(!s.is_dead(&cell(1), t1 + stale * 3 + Duration::from_millis(1)));
        // Never seen: not dead.
        assert!(!Sightings::new(stale).is_dead(&cell(1), t1 + stale * 10));
    }
}
