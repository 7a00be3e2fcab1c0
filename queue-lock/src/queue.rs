//! The queue row: cell names (listing 6) and where a waiter stands.

use std::time::Duration;

use lockshift_lock::{Algorithm, OwnerId};
use lockshift_store::{Cell, RowQuery, Store, StoreError, Timestamp, schema};

/// Digits of the time prefix of a queue column (listing 6).
pub const TIME_DIGITS: usize = 20;

/// The queue column for a waiter that arrived at `time`: the time in µs,
/// zero-padded to 20 digits, then the owner id. Byte order of the names is
/// arrival order; equal times fall back to owner-id order.
pub fn queue_column(time: Timestamp, owner: &OwnerId) -> String {
    let micros = u64::try_from(time.as_micros()).unwrap_or(0);
    format!("{micros:0width$}{owner}", width = TIME_DIGITS)
}

/// Splits a queue column into its time prefix and owner; `None` if it does
/// not have listing 6's shape (written by something else).
pub fn parse_queue_column(column: &str) -> Option<(u64, OwnerId)> {
    let prefix = column.get(..TIME_DIGITS)?;
    if !prefix.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let owner = &column[TIME_DIGITS..];
    if owner.is_empty() {
        return None;
    }
    Some((prefix.parse().ok()?, OwnerId::from_stored(owner)))
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
    /// holder). `ahead` saturates at the scan window: "far back".
    Behind {
        /// Live cells ahead, at most the window.
        ahead: u32,
        /// The column of the first live cell (the head of the line).
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

/// The algorithm a queue cell says its waiter uses.
fn algorithm_of(cell: &Cell) -> Option<Algorithm> {
    std::str::from_utf8(&cell.value).ok()?.parse().ok()
}

/// The most cells one position check reads when the front of the queue is
/// full of dead waiters.
const MAX_SCAN: u32 = 512;

/// Finds `me` in the queue of `lock`, reading at most `window` live cells
/// ahead of it (the waiter polls in proportion to its distance, so beyond
/// the window the exact distance does not matter). Cells older than
/// `stale_after` (by write time, against `now`) are dead waiters and are
/// skipped; `me` never is.
///
/// # Errors
/// The store error of a read.
pub async fn position(
    store: &dyn Store,
    lock: &str,
    me: &str,
    now: Timestamp,
    stale_after: Duration,
    window: u32,
) -> Result<Position, StoreError> {
    let window = window.max(1);
    let mut limit = window.saturating_add(1).min(MAX_SCAN);
    loop {
        let cells = store
            .read(schema::QUEUE, lock, &RowQuery::first(limit))
            .await?;
        let mut ahead = 0;
        let mut head: Option<&Cell> = None;
        let mut past_dead = false;
        let behind = |ahead, head: &Cell| Position::Behind {
            ahead,
            head: head.column.clone(),
            head_algorithm: algorithm_of(head),
        };
        for cell in &cells {
            if cell.column == me {
                return Ok(match head {
                    None if past_dead => Position::FirstPastDead,
                    None => Position::First,
                    Some(head) => behind(ahead, head),
                });
            }
            if now.duration_since(cell.writetime) > stale_after {
                past_dead = true;
                continue;
            }
            ahead += 1;
            let head = *head.get_or_insert(cell);
            if ahead >= window {
                return Ok(behind(ahead, head));
            }
        }
        if cells.len() < limit as usize {
            // The whole row was read and I am not in it.
            return Ok(Position::Missing);
        }
        if limit >= MAX_SCAN {
            // A long run of dead waiters: treat as far back and look again
            // later; they expire within one lease TTL.
            return Ok(Position::Behind {
                ahead: window,
                head: String::new(),
                head_algorithm: None,
            });
        }
        limit = limit.saturating_mul(8).min(MAX_SCAN);
    }
}

#[cfg(test)]
mod tests {
    use lockshift_lock::NodeId;
    use lockshift_store::{CellWrite, MemoryStore, WriteOptions};

    use super::*;

    #[test]
    fn columns_sort_by_time_and_parse_back() {
        let node = NodeId::new("n").unwrap();
        let (a, b) = (OwnerId::new(&node, 2), OwnerId::new(&node, 1));
        let early = queue_column(Timestamp::from_micros(999), &a);
        let late = queue_column(Timestamp::from_micros(1_000), &b);
        assert_eq!(early, "00000000000000000999n/0000000000000002");
        assert!(early < late, "time first, owner second");
        assert_eq!(parse_queue_column(&late), Some((1_000, b)));
        assert_eq!(parse_queue_column("garbage"), None);
        assert_eq!(parse_queue_column("0000000000000000000x-owner"), None);
        assert_eq!(parse_queue_column("00000000000000000001"), None);
    }

    async fn queue(cells: &[(&str, i64)]) -> MemoryStore {
        let store = MemoryStore::new();
        for (column, writetime) in cells {
            store
                .write(
                    schema::QUEUE,
                    "L",
                    &[CellWrite::new(*column, b"queue".to_vec())],
                    WriteOptions::at(Timestamp::from_micros(*writetime)),
                )
                .await
                .unwrap();
        }
        store
    }

    #[tokio::test]
    async fn positions_skip_dead_waiters_but_never_me() {
        let now = Timestamp::from_micros(100_000_000);
        let stale = Duration::from_secs(30);
        let fresh = now.as_micros() - 1_000_000;
        let dead = now.as_micros() - 31_000_000;
        let pos = |store: MemoryStore, me: &'static str| async move {
            position(&store, "L", me, now, stale, 2).await.unwrap()
        };
        assert_eq!(
            pos(queue(&[("a", fresh), ("b", fresh)]).await, "a").await,
            Position::First
        );
        assert_eq!(
            pos(queue(&[("a", fresh), ("b", fresh)]).await, "b").await,
            Position::Behind {
                ahead: 1,
                head: "a".into(),
                head_algorithm: Some(Algorithm::Queue),
            }
        );
        assert_eq!(
            pos(
                queue(&[("a", fresh), ("b", fresh), ("c", fresh)]).await,
                "c"
            )
            .await,
            Position::Behind {
                ahead: 2,
                head: "a".into(),
                head_algorithm: Some(Algorithm::Queue),
            }
        );
        let five = [
            ("a", fresh),
            ("b", fresh),
            ("c", fresh),
            ("d", fresh),
            ("e", fresh),
        ];
        let far = || queue(&five);
        assert_eq!(
            position(&far().await, "L", "e", now, stale, 8)
                .await
                .unwrap(),
            Position::Behind {
                ahead: 4,
                head: "a".into(),
                head_algorithm: Some(Algorithm::Queue),
            }
        );
        assert_eq!(
            position(&far().await, "L", "e", now, stale, 3)
                .await
                .unwrap(),
            Position::Behind {
                ahead: 3,
                head: "a".into(),
                head_algorithm: Some(Algorithm::Queue),
            },
            "saturates at the window"
        );
        assert_eq!(
            pos(queue(&[("a", fresh)]).await, "z").await,
            Position::Missing
        );
        // A dead head is skipped: the next one is first — past the dead.
        assert_eq!(
            pos(queue(&[("a", dead), ("b", fresh)]).await, "b").await,
            Position::FirstPastDead
        );
        assert!(Position::FirstPastDead.is_first() && Position::First.is_first());
        // Many dead waiters in front: read further.
        let mut cells: Vec<(String, i64)> = (0..40).map(|i| (format!("d{i:02}"), dead)).collect();
        cells.push(("x".into(), fresh));
        cells.push(("y".into(), fresh));
        let refs: Vec<(&str, i64)> = cells.iter().map(|(c, t)| (c.as_str(), *t)).collect();
        assert_eq!(
            pos(queue(&refs).await, "y").await,
            Position::Behind {
                ahead: 1,
                head: "x".into(),
                head_algorithm: Some(Algorithm::Queue),
            },
            "the dead are skipped: the head is the first live cell"
        );
        // My own old cell is not skipped.
        assert_eq!(pos(queue(&[("a", dead)]).await, "a").await, Position::First);
    }
}
