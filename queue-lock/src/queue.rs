//! The queue row: what a waiter's cell says and where a waiter stands.
//!
//! The cell values, their parsing, the placing of a waiter in a read of
//! the row and [`Sightings`], which watches cells stand still, are pure and
//! live in `lockshift_decide::queue` (with the layout explained there);
//! this module keeps the I/O:
//! [`position`], one read of the row, judged by this process's own clock.

use std::sync::{Mutex, PoisonError};

use lockshift_store::{RowQuery, Store, StoreError, schema};
use tokio::time::Instant;

use lockshift_decide::queue::{Position, Sightings, place};

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
    // The sightings keep std instants; under tokio's paused test clock this
    // is its base instant plus the time advanced, as monotonic as ever.
    let now = Instant::now().into_std();
    let mut sightings = sightings.lock().unwrap_or_else(PoisonError::into_inner);
    sightings.observe(&cells, now);
    Ok(place(&cells, me, |c| sightings.is_dead(c, now), window))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use lockshift_decide::queue::{mark, queue_value};
    use lockshift_lock::Algorithm;
    use lockshift_store::{CellWrite, MemoryStore, Timestamp, WriteOptions};

    use super::*;

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

    fn queued(ahead: u32, head: &str, arrival: u64) -> Position {
        Position::Queued {
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
            queued(1, "b", 1)
        );
        // Equal arrivals: the owner id decides.
        assert_eq!(
            pos(queue(&[("b", 5, fresh), ("a", 5, fresh)]).await, "b").await,
            queued(1, "a", 5)
        );
        let three = [("a", 1, fresh), ("b", 2, fresh), ("c", 3, fresh)];
        assert_eq!(pos(queue(&three).await, "c").await, queued(2, "a", 1));
        let five = [
            ("a", 1, fresh),
            ("b", 2, fresh),
            ("c", 3, fresh),
            ("d", 4, fresh),
            ("e", 5, fresh),
        ];
        assert_eq!(
            pos_with(&queue(&five).await, "e", dead, 8).await,
            queued(4, "a", 1)
        );
        assert_eq!(
            pos_with(&queue(&five).await, "e", dead, 3).await,
            queued(3, "a", 1),
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
            queued(1, "x", 50),
            "the dead are skipped: the head is the first live cell"
        );
        // My own old cell is not skipped.
        assert_eq!(
            pos(queue(&[("a", 1, dead)]).await, "a").await,
            Position::First
        );
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
            queued(1, "old/0000000000000009", 20)
        );
    }
}
