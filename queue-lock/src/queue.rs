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
//! acquisition of the lock (K1) — and writes the arrival into the value:
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

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use lockshift_lock::{Algorithm, OwnerId};
use lockshift_store::{Cell, RowQuery, Store, StoreError, Timestamp, schema};
use tokio::time::Instant;

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
pub struct QueueEntry {
    /// When it arrived (µs, by the time service).
    pub arrival: u64,
    /// Its owner id.
    pub owner: OwnerId,
    /// The algorithm it waits with, when the cell says (lockshift's).
    pub algorithm: Option<Algorithm>,
}

impl QueueEntry {
    /// Its mark: what a reservation behind it names.
    pub fn mark(&self) -> String {
        mark(self.owner.as_str(), self.arrival)
    }
}

/// Reads a queue cell of either layout: owner-id column with the arrival in
/// the value, or the thesis' time-and-owner column with the algorithm in
/// the value. `None` if it is neither (written by something else).
pub fn parse_queue_cell(column: &str, value: &[u8]) -> Option<QueueEntry> {
    let value = std::str::from_utf8(value).ok();
    if let Some((arrival, algorithm)) = value.and_then(|v| v.split_once(':'))
        && arrival.len() == TIME_DIGITS
        && arrival.bytes().all(|b| b.is_ascii_digit())
    {
        return Some(QueueEntry {
            arrival: arrival.parse().ok()?,
            owner: OwnerId::from_stored(column),
            algorithm: algorithm.parse().ok(),
        });
    }
    let prefix = column.get(..TIME_DIGITS)?;
    if !prefix.bytes().all(|b| b.is_ascii_digit()) || column.len() == TIME_DIGITS {
        return None;
    }
    Some(QueueEntry {
        arrival: prefix.parse().ok()?,
        owner: OwnerId::from_stored(&column[TIME_DIGITS..]),
        algorithm: value.and_then(|v| v.parse().ok()),
    })
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
/// (docs/design.md §2, DW1).
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
    /// Behind `ahead` live cells (1: next after the head, usually the
    /// holder). `ahead` saturates at the window: "far back".
    Behind {
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

/// Finds `me` (my queue column) in the queue of `lock`: one read of the
/// whole row, ordered by arrival. `ahead` saturates at `window` (the
/// waiter polls in proportion to its distance, so beyond the window the
/// exact distance does not matter). Cells `sightings` has watched stand
/// still for its `stale_after` are dead waiters and are skipped; `me`
/// never is. A cell of neither layout counts as arrived at time 0.
///
/// # Errors
/// The store error of the read.
pub async fn position(
    store: &dyn Store,
    lock: &str,
    me: &str,
    sightings: &Mutex<Sightings>,
    window: u32,
) -> Result<Position, StoreError> {
    let cells = store.read(schema::QUEUE, lock, &RowQuery::all()).await?;
    let now = Instant::now();
    let mut sightings = sightings.lock().unwrap_or_else(PoisonError::into_inner);
    sightings.observe(&cells, now);
    Ok(place(&cells, me, |c| sightings.is_dead(c, now), window))
}

/// [`position`] on a read of the whole row (pure): `dead` says which cells
/// are dead waiters'.
pub fn place(cells: &[Cell], me: &str, dead: impl Fn(&Cell) -> bool, window: u32) -> Position {
    let window = window.max(1);
    let mut line: Vec<(QueueEntry, &Cell)> = cells
        .iter()
        .map(|c| {
            let entry = parse_queue_cell(&c.column, &c.value).unwrap_or(QueueEntry {
                arrival: 0,
                owner: OwnerId::from_stored(&c.column),
                algorithm: None,
            });
            (entry, c)
        })
        .collect();
    line.sort_by(|(a, ca), (b, cb)| (a.arrival, &ca.column).cmp(&(b.arrival, &cb.column)));
    let mut ahead: u32 = 0;
    let mut head: Option<&QueueEntry> = None;
    let mut past_dead = false;
    for (entry, cell) in &line {
        if cell.column == me {
            return match head {
                None if past_dead => Position::FirstPastDead,
                None => Position::First,
                Some(head) => Position::Behind {
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

#[cfg(test)]
mod tests {
    use lockshift_lock::NodeId;
    use lockshift_store::{CellWrite, MemoryStore, WriteOptions};

    use super::*;

    #[test]
    fn cells_of_both_layouts_parse_back() {
        let node = NodeId::new("n").unwrap();
        let owner = OwnerId::new(&node, 2);
        let value = queue_value(Timestamp::from_micros(999), Algorithm::Combined);
        assert_eq!(value, b"00000000000000000999:combined");
        assert_eq!(
            parse_queue_cell(owner.as_str(), &value),
            Some(QueueEntry {
                arrival: 999,
                owner: owner.clone(),
                algorithm: Some(Algorithm::Combined),
            })
        );
        // The thesis' shape, as lockshift builds before slots wrote it.
        assert_eq!(
            parse_queue_cell("00000000000000001000n/0000000000000002", b"queue"),
            Some(QueueEntry {
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

    /// A queue of cells `(column, arrival, writetime)`, in the new layout.
    async fn queue(cells: &[(&str, u64, i64)]) -> MemoryStore {
        let store = MemoryStore::new();
        for (column, arrival, writetime) in cells {
            let arrival = Timestamp::from_micros(i64::try_from(*arrival).unwrap());
            store
                .write(
                    schema::QUEUE,
                    "L",
                    &[CellWrite::new(
                        *column,
                        queue_value(arrival, Algorithm::Queue),
                    )],
                    WriteOptions::at(Timestamp::from_micros(*writetime)),
                )
                .await
                .unwrap();
        }
        store
    }

    fn behind(ahead: u32, head: &str, arrival: u64) -> Position {
        Position::Behind {
            ahead,
            head: mark(head, arrival),
            head_algorithm: Some(Algorithm::Queue),
        }
    }

    /// Positions, with the cells written at `dead` standing still long
    /// enough to be dead.
    async fn pos_with(store: &MemoryStore, me: &str, dead: i64, window: u32) -> Position {
        let cells = store
            .read(schema::QUEUE, "L", &RowQuery::all())
            .await
            .unwrap();
        place(&cells, me, |c| c.writetime.as_micros() == dead, window)
    }

    #[tokio::test]
    async fn positions_follow_arrival_skip_dead_waiters_but_never_me() {
        let now = Timestamp::from_micros(100_000_000);
        let fresh = now.as_micros() - 1_000_000;
        let dead = now.as_micros() - 31_000_000;
        let pos = |store: MemoryStore, me: &'static str| async move {
            pos_with(&store, me, dead, 2).await
        };
        // Arrival order, not column order.
        assert_eq!(
            pos(queue(&[("b", 1, fresh), ("a", 2, fresh)]).await, "b").await,
            Position::First
        );
        assert_eq!(
            pos(queue(&[("b", 1, fresh), ("a", 2, fresh)]).await, "a").await,
            behind(1, "b", 1)
        );
        // Equal arrivals: the owner id decides.
        assert_eq!(
            pos(queue(&[("b", 5, fresh), ("a", 5, fresh)]).await, "b").await,
            behind(1, "a", 5)
        );
        let three = [("a", 1, fresh), ("b", 2, fresh), ("c", 3, fresh)];
        assert_eq!(pos(queue(&three).await, "c").await, behind(2, "a", 1));
        let five = [
            ("a", 1, fresh),
            ("b", 2, fresh),
            ("c", 3, fresh),
            ("d", 4, fresh),
            ("e", 5, fresh),
        ];
        assert_eq!(
            pos_with(&queue(&five).await, "e", dead, 8).await,
            behind(4, "a", 1)
        );
        assert_eq!(
            pos_with(&queue(&five).await, "e", dead, 3).await,
            behind(3, "a", 1),
            "saturates at the window"
        );
        assert_eq!(
            pos(queue(&[("a", 1, fresh)]).await, "z").await,
            Position::Missing
        );
        // A dead head is skipped: the next one is first — past the dead.
        assert_eq!(
            pos(queue(&[("a", 1, dead), ("b", 2, fresh)]).await, "b").await,
            Position::FirstPastDead
        );
        assert!(Position::FirstPastDead.is_first() && Position::First.is_first());
        // Many dead waiters in front.
        let mut cells: Vec<(String, u64, i64)> =
            (0..40).map(|i| (format!("d{i:02}"), i, dead)).collect();
        cells.push(("x".into(), 50, fresh));
        cells.push(("y".into(), 51, fresh));
        let refs: Vec<(&str, u64, i64)> =
            cells.iter().map(|(c, a, t)| (c.as_str(), *a, *t)).collect();
        assert_eq!(
            pos(queue(&refs).await, "y").await,
            behind(1, "x", 50),
            "the dead are skipped: the head is the first live cell"
        );
        // My own old cell is not skipped.
        assert_eq!(
            pos(queue(&[("a", 1, dead)]).await, "a").await,
            Position::First
        );
    }

    /// A cell is dead once its write time has stood still for
    /// `stale_after` of the watcher's own time — whatever the write time
    /// says against the watcher's clock (skew between nodes does not
    /// enter); a rewrite restarts its clock, a cell gone is forgotten.
    #[tokio::test(start_paused = true)]
    async fn a_cell_is_dead_once_watched_standing_still() {
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

    /// An older build's waiter (the thesis' column) and a new one share a
    /// line by arrival.
    #[tokio::test]
    async fn both_layouts_share_one_line() {
        let now = Timestamp::from_micros(100_000_000);
        let store = queue(&[("new/0000000000000001", 30, now.as_micros())]).await;
        store
            .write(
                schema::QUEUE,
                "L",
                &[CellWrite::new(
                    "00000000000000000020old/0000000000000009",
                    b"queue".to_vec(),
                )],
                WriteOptions::at(now),
            )
            .await
            .unwrap();
        assert_eq!(
            position(
                &store,
                "L",
                "new/0000000000000001",
                &Mutex::new(Sightings::new(Duration::from_secs(3))),
                4
            )
            .await
            .unwrap(),
            behind(1, "old/0000000000000009", 20)
        );
    }
}
