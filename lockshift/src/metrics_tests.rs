use std::sync::Arc;
use std::time::Duration;

use lockshift_store::{
    CellWrite, ManualClock, MemoryStore, RowQuery, StoreErrorKind, Timestamp, TombstoneThresholds,
    schema,
};

use super::*;

#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The database's warnings reach the operator: logged at `warn` with
/// table and lock, once a minute per lock, the rest counted.
#[test]
fn warnings_are_logged_per_lock_at_most_once_a_minute() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    let clock = Arc::new(ManualClock::new(Timestamp::from_micros(1_000_000_000)));
    let memory = MemoryStore::with_clock(clock)
        .with_tombstone_thresholds(TombstoneThresholds { warn: 1, fail: 3 });
    let store = MeteredStore::new(Arc::new(memory), "n1");
    let long_lock = "L".repeat(200);
    tracing::subscriber::with_default(subscriber, || {
        runtime.block_on(async {
            let at = Timestamp::from_micros(5);
            for lock in ["busy", long_lock.as_str()] {
                store
                    .delete(schema::QUEUE, lock, &["a".into(), "b".into()], at)
                    .await
                    .expect("delete");
            }
            for _ in 0..3 {
                let read = store
                    .read_observed(schema::QUEUE, "busy", &RowQuery::all())
                    .await
                    .expect("read");
                assert_eq!(read.warnings.len(), 1);
            }
            store
                .read(schema::QUEUE, &long_lock, &RowQuery::all())
                .await
                .expect("read");
            tokio::time::sleep(WARNING_LOG_EVERY).await;
            store
                .read(schema::QUEUE, "busy", &RowQuery::all())
                .await
                .expect("read");
            store
                .delete(schema::QUEUE, "busy", &["c".into(), "d".into()], at)
                .await
                .expect("delete");
            let err = store
                .read(schema::QUEUE, "busy", &RowQuery::all())
                .await
                .expect_err("4 > 3");
            assert_eq!(err.kind(), StoreErrorKind::TooManyTombstones);
            tokio::time::sleep(WARNING_LOG_EVERY + Duration::from_secs(1)).await;
            store
                .read(schema::QUEUE, "busy", &RowQuery::all())
                .await
                .expect_err("still too many");
        });
    });
    let logged = String::from_utf8(
        captured
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone(),
    )
    .expect("utf-8");
    let lines: Vec<&str> = logged.lines().collect();
    assert_eq!(lines.len(), 4, "{logged}");
    assert!(lines.iter().all(|l| l.contains("WARN")), "{logged}");
    assert!(lines[0].contains("table=queue"), "{logged}");
    assert!(lines[0].contains("lock=busy"), "{logged}");
    assert!(lines[0].contains("suppressed=0"), "{logged}");
    assert!(lines[0].contains("tombstones=Some(2)"), "{logged}");
    assert!(
        lines[0].contains("Read 0 live rows and 2 tombstone cells for query"),
        "{logged}"
    );
    // The long lock id is cut short (the warning's own query is cut by
    // the database at 512 characters).
    assert!(
        lines[1].contains(&format!("lock={}…", "L".repeat(64))),
        "{logged}"
    );
    // A minute later: logged again, with the two held back.
    assert!(lines[2].contains("lock=busy"), "{logged}");
    assert!(lines[2].contains("suppressed=2"), "{logged}");
    // The failure held back (within the minute), then logged.
    assert!(lines[3].contains("too many tombstones"), "{logged}");
    assert!(lines[3].contains("suppressed=1"), "{logged}");
}

/// A fenced write passes through the node's counting wrapper to the store
/// (the trait's default would refuse it, naming the wrapper), applied and
/// refused as the store decides.
#[tokio::test]
async fn fenced_writes_pass_through() {
    let store = MeteredStore::new(Arc::new(MemoryStore::new()), "n1");
    let cell = CellWrite::new("balance", "90");
    let later = store
        .write_fenced(schema::SCRATCH, "acct", &cell, 42)
        .await
        .expect("the later holder's write");
    assert!(matches!(
        later,
        lockshift_store::FencedOutcome::Applied { .. }
    ));
    let late = store
        .write_fenced(schema::SCRATCH, "acct", &cell, 41)
        .await
        .expect("the paused holder's write");
    assert_eq!(
        late,
        lockshift_store::FencedOutcome::Refused {
            recorded: 42,
            rounds: 1
        }
    );
}
