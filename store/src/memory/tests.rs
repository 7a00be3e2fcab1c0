use std::sync::Arc;

use std::num::NonZeroU32;

use super::*;
use crate::clock::ManualClock;
use crate::schema::SCRATCH;
use crate::tombstones::TombstoneThresholds;
use crate::{
    CellWrite, OpKind, PageCursor, RowQuery, Store, StoreErrorKind, Timestamp, WriteOptions,
};
use crate::{Ttl, schema};

fn store() -> (Arc<ManualClock>, MemoryStore) {
    let clock = Arc::new(ManualClock::new(Timestamp::from_micros(1_000_000_000)));
    let store = MemoryStore::with_clock(clock.clone()).with_gc_grace(Duration::from_secs(10));
    (clock, store)
}

#[tokio::test]
async fn dead_cells_are_purged_only_after_gc_grace() {
    let (clock, store) = store();
    let ts = Timestamp::from_micros(50);
    store
        .write(
            SCRATCH,
            "r",
            &[CellWrite::new("c", b"v".to_vec())],
            WriteOptions::at(ts),
        )
        .await
        .unwrap();
    store.delete(SCRATCH, "r", &["c".into()], ts).await.unwrap();
    store.read(SCRATCH, "r", &RowQuery::all()).await.unwrap();
    assert_eq!(
        store.raw_row(SCRATCH, "r").len(),
        1,
        "tombstone kept within grace"
    );
    clock.advance(Duration::from_secs(11));
    store.read(SCRATCH, "r", &RowQuery::all()).await.unwrap();
    assert!(
        store.raw_row(SCRATCH, "r").is_empty(),
        "tombstone purged after grace"
    );
}

fn cols(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i:06}")).collect()
}

async fn put(store: &MemoryStore, row: &str, column: &str, ts: i64) {
    store
        .write(
            SCRATCH,
            row,
            &[CellWrite::new(column, b"v".to_vec())],
            WriteOptions::at(Timestamp::from_micros(ts)),
        )
        .await
        .unwrap();
}

async fn count(store: &MemoryStore, row: &str, query: RowQuery) -> (Vec<String>, u64, Vec<String>) {
    let o = store.read_observed(SCRATCH, row, &query).await.unwrap();
    let names = o.cells.into_iter().map(|c| c.column).collect();
    (names, o.tombstones.unwrap(), o.warnings)
}

/// The layout of the Cassandra 4.1.1 measurement (tombstones (a)):
/// the same counts, the same strict thresholds, the same warning.
#[tokio::test]
async fn reads_count_the_tombstones_in_their_slice_until_their_limit() {
    let (_, store) = store();
    let ts = Timestamp::from_micros(10);
    store
        .delete(SCRATCH, "a2", &cols("b", 0..1500), ts)
        .await
        .unwrap();
    put(&store, "a2", "m", 10).await;
    store
        .delete(SCRATCH, "a2", &cols("n", 0..1500), ts)
        .await
        .unwrap();
    put(&store, "a2", "o", 10).await;
    let (live, n, warnings) = count(&store, "a2", RowQuery::first(1)).await;
    assert_eq!((live, n), (vec!["m".to_string()], 1500));
    assert_eq!(
        warnings,
        vec![format!(
            "Read 1 live rows and 1500 tombstone cells for query SELECT value FROM \
             lockshift.scratch WHERE row_key = 'a2' LIMIT 1 ALLOW FILTERING; token \
             5060052373555595560 (see tombstone_warn_threshold)"
        )]
    );
    assert_eq!(count(&store, "a2", RowQuery::first(2)).await.1, 3000);
    assert_eq!(count(&store, "a2", RowQuery::all()).await.1, 3000);
    let (live, n, warnings) = count(&store, "a2", RowQuery::first(1).starting_at("m")).await;
    assert_eq!((live.len(), n, warnings.len()), (1, 0, 0));
    assert_eq!(
        count(&store, "a2", RowQuery::first(2).starting_at("m"))
            .await
            .1,
        1500
    );
    let (_, n, warnings) = count(&store, "a2", RowQuery::first(1).starting_at("n000499")).await;
    assert_eq!((n, warnings.len()), (1001, 1));
    let (_, n, warnings) = count(&store, "a2", RowQuery::first(1).starting_at("n000500")).await;
    assert_eq!(
        (n, warnings.len()),
        (1000, 0),
        "the warn threshold is strict"
    );
    assert_eq!(store.max_tombstones_per_read(SCRATCH), 3000);
    assert_eq!(store.max_tombstones_per_read(schema::MAIN), 0);
    store.reset_tombstone_stats();
    assert_eq!(store.max_tombstones_per_read(SCRATCH), 0);
    let (live, n, _) = count(&store, "missing", RowQuery::all()).await;
    assert_eq!((live.len(), n), (0, 0));
}

/// tombstones (c): only the merged result counts.
#[tokio::test]
async fn rewritten_cells_do_not_count_and_live_rewrites_cost_nothing() {
    let (_, store) = store();
    store
        .delete(
            SCRATCH,
            "c1",
            &cols("c", 0..1002),
            Timestamp::from_micros(10),
        )
        .await
        .unwrap();
    assert_eq!(count(&store, "c1", RowQuery::all()).await.1, 1002);
    put(&store, "c1", "c000500", 11).await;
    for i in 0..5 {
        put(&store, "c1", "live", 20 + i).await;
    }
    put(&store, "c1", "older", 100).await;
    store
        .delete(SCRATCH, "c1", &["older".into()], Timestamp::from_micros(50))
        .await
        .unwrap();
    put(&store, "c1", "c000600", 5).await;
    let (live, n, _) = count(&store, "c1", RowQuery::all()).await;
    assert_eq!(live, ["c000500", "live", "older"]);
    assert_eq!(n, 1001);
}

/// tombstones (b), (d): expired cells count from their expiry, deletes
/// from when they were applied, both until gc grace has passed in
/// whole seconds; then they cost nothing and are gone.
#[tokio::test]
async fn dead_cells_count_until_gc_grace_after_their_death() {
    let clock = Arc::new(ManualClock::new(Timestamp::from_micros(1_000_000_000)));
    let store =
        MemoryStore::with_clock(clock.clone()).with_table_gc_grace(SCRATCH, Duration::from_secs(5));
    assert_eq!(store.gc_grace(SCRATCH), Duration::from_secs(5));
    assert_eq!(
        store.gc_grace(schema::MAIN),
        schema::MAIN_OPTIONS.gc_grace()
    );
    let ts = Timestamp::from_micros(1);
    store
        .delete(SCRATCH, "d1", &cols("c", 0..10), ts)
        .await
        .unwrap();
    let ttl = WriteOptions::at(ts).with_ttl(Ttl::from_secs(3).unwrap());
    let cells: Vec<CellWrite> = cols("e", 0..10)
        .into_iter()
        .map(|c| CellWrite::new(c, b"v".to_vec()))
        .collect();
    store.write(SCRATCH, "d2", &cells, ttl).await.unwrap();
    assert_eq!(count(&store, "d1", RowQuery::all()).await.1, 10);
    assert_eq!(count(&store, "d2", RowQuery::all()).await.1, 0, "live");
    clock.advance(Duration::from_millis(4_200));
    assert_eq!(count(&store, "d2", RowQuery::all()).await.1, 10, "expired");
    clock.advance(Duration::from_millis(1_799));
    assert_eq!(count(&store, "d1", RowQuery::all()).await.1, 10, "5.999 s");
    clock.advance(Duration::from_millis(1));
    assert_eq!(
        count(&store, "d1", RowQuery::all()).await.1,
        0,
        "6 s: 1000 < 1006 − 5"
    );
    assert_eq!(
        count(&store, "d2", RowQuery::all()).await.1,
        10,
        "expiry + 5 s not yet"
    );
    clock.advance(Duration::from_secs(3));
    assert_eq!(
        count(&store, "d2", RowQuery::all()).await.1,
        0,
        "expiry (1003) + 5 < 1009"
    );
    assert_eq!(store.stored_versions(), 0, "purged");
}

#[tokio::test]
async fn above_the_failure_threshold_a_read_fails_and_a_later_slice_does_not() {
    let (_, store) = store();
    let store = store.with_tombstone_thresholds(TombstoneThresholds { warn: 2, fail: 5 });
    let ts = Timestamp::from_micros(10);
    store
        .delete(SCRATCH, "f1", &cols("c", 0..5), ts)
        .await
        .unwrap();
    put(&store, "f1", "zz", 10).await;
    let (_, n, warnings) = count(&store, "f1", RowQuery::first(1)).await;
    assert_eq!((n, warnings.len()), (5, 1));
    store
        .delete(SCRATCH, "f1", &cols("c", 5..6), ts)
        .await
        .unwrap();
    let err = store
        .read(SCRATCH, "f1", &RowQuery::first(1))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::TooManyTombstones);
    assert!(
        err.to_string().contains("\"f1\" passed 6 tombstones"),
        "{err}"
    );
    assert_eq!(store.max_tombstones_per_read(SCRATCH), 6);
    let (live, n, _) = count(&store, "f1", RowQuery::first(1).starting_at("zz")).await;
    assert_eq!((live.len(), n), (1, 0));
}

/// tombstones (g): a key scan page counts every partition it visits,
/// each up to its first live cell.
#[tokio::test]
async fn key_scans_count_across_partitions_and_fail_alike() {
    let (_, store) = store();
    let store = store.with_tombstone_thresholds(TombstoneThresholds { warn: 1, fail: 30 });
    let ts = Timestamp::from_micros(10);
    for i in 0..12 {
        let row = format!("k{i:02}");
        store
            .delete(SCRATCH, &row, &["a".into()], ts)
            .await
            .unwrap();
        if i % 2 == 0 {
            put(&store, &row, "b", 10).await;
        } else {
            store
                .delete(SCRATCH, &row, &["b".into()], ts)
                .await
                .unwrap();
        }
    }
    // Rows come in token order (as a cluster's): the first page holds the
    // first two live rows, having passed 1 tombstone in each of them and
    // 2 in each dead row before them.
    let mut ordered: Vec<usize> = (0..12).collect();
    ordered.sort_by_key(|i| crate::tombstones::token(&format!("k{i:02}")));
    let mut want = Vec::new();
    let mut passed = 0;
    for i in ordered {
        passed += if i % 2 == 0 { 1 } else { 2 };
        if i % 2 == 0 {
            want.push(format!("k{i:02}"));
            if want.len() == 2 {
                break;
            }
        }
    }
    let page = store
        .scan_keys(SCRATCH, None, NonZeroU32::new(2).unwrap())
        .await
        .unwrap();
    assert_eq!(page.keys, want);
    assert!(page.next.is_some());
    assert_eq!(store.max_tombstones_per_scan(SCRATCH), passed);
    assert_eq!(store.max_tombstones_per_read(SCRATCH), 0);
    let page = store
        .scan_keys(SCRATCH, None, NonZeroU32::new(100).unwrap())
        .await
        .unwrap();
    assert_eq!(page.keys.len(), 6);
    assert_eq!(store.max_tombstones_per_scan(SCRATCH), 18);
    for i in 12..20 {
        let row = format!("k{i:02}");
        store
            .delete(SCRATCH, &row, &["a".into(), "b".into()], ts)
            .await
            .unwrap();
    }
    let err = store
        .scan_keys(SCRATCH, None, NonZeroU32::new(100).unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::TooManyTombstones);
    assert_eq!(err.op(), OpKind::Scan);
}

/// Invariant 3 of `memory`: rows nobody reads again are swept too, so
/// memory holds only what is younger than gc grace.
#[tokio::test]
async fn unread_dead_cells_are_swept_after_gc_grace() {
    let (clock, store) = store();
    let ttl = WriteOptions::at(Timestamp::from_micros(1)).with_ttl(Ttl::from_secs(2).unwrap());
    for i in 0..200 {
        let row = format!("r{i}");
        store
            .delete(
                SCRATCH,
                &row,
                &["x".into(), "y".into()],
                Timestamp::from_micros(1),
            )
            .await
            .unwrap();
        store
            .write(SCRATCH, &row, &[CellWrite::new("z", b"v".to_vec())], ttl)
            .await
            .unwrap();
        clock.advance(Duration::from_millis(50));
    }
    put(&store, "keep", "k", 1).await;
    assert_eq!(store.stored_versions(), 601);
    // Grace 10 s, sweep slack 1.25 s: all due well within 20 s.
    clock.advance(Duration::from_secs(20));
    put(&store, "keep", "k2", 1).await;
    assert_eq!(store.stored_versions(), 2, "only the live cells are left");
    assert!(!store.sweeps_pending());
}

/// tombstones (c), measured with a control row: a delete older than
/// the (expired) cell it meets loses, but stays, and costs reads once
/// that cell is purged, until its own purge time.
#[tokio::test]
async fn a_losing_delete_costs_reads_once_the_newer_cell_is_gone() {
    // 0.1 s into second s0 = 1000.
    let clock = Arc::new(ManualClock::new(Timestamp::from_micros(1_000_100_000)));
    let store = MemoryStore::with_clock(clock.clone()).with_gc_grace(Duration::from_secs(5));
    let at = |s: f64| Timestamp::from_micros((s * 1e6) as i64);
    let ttl = WriteOptions::at(at(1000.1)).with_ttl(Ttl::from_secs(2).unwrap());
    for row in ["h0", "h1"] {
        let cells: Vec<CellWrite> = cols("c", 0..10)
            .into_iter()
            .map(|c| CellWrite::new(c, b"v".to_vec()))
            .collect();
        store.write(SCRATCH, row, &cells, ttl).await.unwrap();
    }
    clock.set(at(1003.1));
    assert_eq!(count(&store, "h1", RowQuery::all()).await.1, 10, "expired");
    store
        .delete(
            SCRATCH,
            "h1",
            &cols("c", 0..10),
            at(1000.1).offset_micros(-1_000_000),
        )
        .await
        .unwrap();
    assert_eq!(count(&store, "h1", RowQuery::all()).await.1, 10);
    clock.set(at(1008.5));
    assert_eq!(
        count(&store, "h0", RowQuery::all()).await.1,
        0,
        "control: purged"
    );
    assert_eq!(
        count(&store, "h1", RowQuery::all()).await.1,
        10,
        "the deletes stay"
    );
    clock.set(at(1009.5));
    assert_eq!(
        count(&store, "h1", RowQuery::all()).await.1,
        0,
        "purgeable too"
    );
    assert_eq!(store.stored_versions(), 0);
}

/// Invariant 1 of `tombstones`: past gc grace a tombstone is forgotten
/// before a write meets it, swept or not, so a late older write comes back
/// — exactly when the local endpoint lets it.
#[tokio::test]
async fn past_gc_grace_a_late_older_write_resurrects() {
    let (clock, store) = store();
    store
        .delete(SCRATCH, "r", &["c".into()], Timestamp::from_micros(50))
        .await
        .unwrap();
    clock.advance(Duration::from_millis(10_999));
    put(&store, "r", "c", 10).await;
    assert!(count(&store, "r", RowQuery::all()).await.0.is_empty());
    clock.advance(Duration::from_millis(1));
    put(&store, "r", "c", 10).await;
    assert_eq!(count(&store, "r", RowQuery::all()).await.0, ["c"]);
}

#[tokio::test]
async fn remaining_ttl_is_whole_seconds_rounded_up() {
    let (clock, store) = store();
    let opts = WriteOptions::at(Timestamp::from_micros(1)).with_ttl(Ttl::from_secs(10).unwrap());
    store
        .write(
            schema::MAIN,
            "r",
            &[CellWrite::new("c", b"v".to_vec())],
            opts,
        )
        .await
        .unwrap();
    clock.advance(Duration::from_millis(2_500));
    let cells = store
        .read(schema::MAIN, "r", &RowQuery::all())
        .await
        .unwrap();
    assert_eq!(cells[0].ttl, Some(Duration::from_secs(8)));
}

#[tokio::test]
async fn empty_keys_are_rejected_with_a_clear_error() {
    let (_, store) = store();
    let err = store
        .write(
            SCRATCH,
            "",
            &[CellWrite::new("c", b"v".to_vec())],
            WriteOptions::at(Timestamp::EPOCH),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Invalid);
    assert!(
        err.to_string().contains("row key must not be empty"),
        "{err}"
    );
    let err = store
        .read(SCRATCH, "r", &RowQuery::all().starting_at(""))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("start column must not be empty"),
        "{err}"
    );
}

#[tokio::test]
async fn foreign_cursor_is_rejected() {
    let (_, store) = store();
    let err = store
        .scan_keys(
            SCRATCH,
            Some(&PageCursor::from_bytes(vec![0xff, 0xfe])),
            NonZeroU32::MIN,
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Invalid);
}
