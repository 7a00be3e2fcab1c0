//! S6: tombstones cost reads, and too many fail them.

use std::time::Duration;

use super::{Target, at, cell};
use crate::Store;
use crate::cell::{RowQuery, Timestamp, Ttl};
use crate::schema::SCRATCH;

fn columns(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i:06}")).collect()
}

/// Deletes `columns` in calls of 5 000: each one partition, one request.
async fn delete_in_chunks(s: &dyn Store, row: &str, columns: &[String], ts: Timestamp) {
    for chunk in columns.chunks(5_000) {
        s.delete(SCRATCH, row, chunk, ts).await.expect("delete");
    }
}

fn names(cells: &[crate::Cell]) -> Vec<&str> {
    cells.iter().map(|c| c.column.as_str()).collect()
}

/// A live cell sorting before every tombstone these checks write, and the
/// slice start that reads past it: on a shared cluster a key scan of the
/// table (the scan check, `migrate status`) stops at a partition's first
/// live cell, so it never passes the tombstones left here — a scan page
/// counts every partition it visits ([`crate::tombstones`] (g)).
const SCAN_STOPPER: &str = "a";
const AFTER_STOPPER: &str = "b";

/// S6 (Cassandra 4.1.1, measured; [`crate::tombstones`]): a read passes
/// the tombstones in its slice; above 1 000 its answer carries Cassandra's
/// warning, whose count [`Store::read_observed`] reports; an expired cell
/// counts like a deleted one, a re-written one does not, a live cell
/// re-written costs nothing, and a slice starting after the tombstones
/// passes none. A backend that does not know the count below the warning
/// (a cluster) may answer `None` there, never a wrong number.
pub async fn tombstones_cost_reads(t: &dyn Target) {
    let apart = t.apart().await;
    let t = apart.as_deref().unwrap_or(t);
    let s = t.store();
    let row = t.unique("tombstones");
    let base = t.now();
    s.write(SCRATCH, &row, &[cell(SCAN_STOPPER, "v")], at(base, 2))
        .await
        .expect("write");
    let first = RowQuery::first(1).starting_at(AFTER_STOPPER);
    let whole = RowQuery::all().starting_at(AFTER_STOPPER);
    let expected_warning = |live: u64, tombstones: u64, query: &RowQuery| {
        crate::tombstones::warning_text(
            live,
            tombstones,
            &crate::tombstones::read_cql(&t.keyspace(), SCRATCH, &row, query),
            crate::tombstones::token(&row),
        )
    };
    let quiet = |o: &crate::ReadOutcome, count: u64, what: &str| {
        assert!(
            o.warnings.is_empty(),
            "{what}: no warning expected: {:?}",
            o.warnings
        );
        assert!(
            o.tombstones.is_none_or(|n| n == count),
            "{what}: {count} tombstones passed, the store says {:?}",
            o.tombstones
        );
    };

    delete_in_chunks(s, &row, &columns("c", 0..1_000), base.offset_micros(1)).await;
    s.write(SCRATCH, &row, &[cell("z", "v")], at(base, 2))
        .await
        .expect("write");
    let o = s.read_observed(SCRATCH, &row, &first).await.expect("read");
    assert_eq!(names(&o.cells), ["z"]);
    quiet(&o, 1_000, "1000 tombstones: the warn threshold is strict");

    s.delete(
        SCRATCH,
        &row,
        &columns("c", 1_000..1_001),
        base.offset_micros(1),
    )
    .await
    .expect("delete");
    let o = s.read_observed(SCRATCH, &row, &first).await.expect("read");
    assert_eq!(names(&o.cells), ["z"]);
    assert_eq!(
        o.tombstones,
        Some(1_001),
        "1001 tombstones: {:?}",
        o.warnings
    );
    assert_eq!(
        o.warnings,
        [expected_warning(1, 1_001, &first)],
        "Cassandra's warning, character for character"
    );

    // Re-written with a higher timestamp: merged away, no longer counted.
    s.write(SCRATCH, &row, &[cell("c000500", "back")], at(base, 3))
        .await
        .expect("write");
    // A live cell re-written creates no tombstone.
    for i in 0..3 {
        s.write(SCRATCH, &row, &[cell("z", "again")], at(base, 4 + i))
            .await
            .expect("write");
    }
    let o = s.read_observed(SCRATCH, &row, &whole).await.expect("read");
    assert_eq!(names(&o.cells), ["c000500", "z"]);
    quiet(&o, 1_000, "one of 1001 re-written");

    // An expired cell counts like a deleted one.
    s.write(
        SCRATCH,
        &row,
        &[cell("e", "lease")],
        at(base, 10).with_ttl(Ttl::from_secs(1).expect("ttl")),
    )
    .await
    .expect("write");
    let o = s.read_observed(SCRATCH, &row, &whole).await.expect("read");
    assert_eq!(names(&o.cells), ["c000500", "e", "z"]);
    quiet(&o, 1_000, "a live TTL cell");
    t.advance(Duration::from_millis(2_100)).await;
    let o = s.read_observed(SCRATCH, &row, &whole).await.expect("read");
    assert_eq!(names(&o.cells), ["c000500", "z"]);
    assert_eq!(o.tombstones, Some(1_001), "the expired cell counts");
    assert_eq!(o.warnings, [expected_warning(2, 1_001, &whole)]);

    // A slice starting after the tombstones passes none of them.
    let after = RowQuery::first(1).starting_at("z");
    let o = s.read_observed(SCRATCH, &row, &after).await.expect("read");
    assert_eq!(names(&o.cells), ["z"]);
    quiet(&o, 0, "a slice after the tombstones");
    // Before them, as a key scan stops: none either.
    let o = s
        .read_observed(SCRATCH, &row, &RowQuery::first(1))
        .await
        .expect("read");
    assert_eq!(names(&o.cells), [SCAN_STOPPER]);
    quiet(&o, 0, "a read that stops before the tombstones");
}

/// S6: above 100 000 tombstones a read fails with
/// [`StoreErrorKind::TooManyTombstones`](crate::StoreErrorKind::TooManyTombstones)
/// (not retryable), exactly 100 000 only warns, and a slice starting after
/// them still reads. The tombstones are written 5 000 per call.
pub async fn too_many_tombstones_fail_the_read(t: &dyn Target) {
    let apart = t.apart().await;
    let t = apart.as_deref().unwrap_or(t);
    let s = t.store();
    let row = t.unique("tombstones-fail");
    let base = t.now();
    s.write(SCRATCH, &row, &[cell(SCAN_STOPPER, "v")], at(base, 2))
        .await
        .expect("write");
    let first = RowQuery::first(1).starting_at(AFTER_STOPPER);
    delete_in_chunks(s, &row, &columns("c", 0..100_000), base.offset_micros(1)).await;
    s.write(SCRATCH, &row, &[cell("z", "v")], at(base, 2))
        .await
        .expect("write");
    let o = s
        .read_observed(SCRATCH, &row, &first)
        .await
        .expect("100000: a warning only");
    assert_eq!(names(&o.cells), ["z"]);
    assert_eq!(o.tombstones, Some(100_000));
    assert_eq!(o.warnings.len(), 1, "{:?}", o.warnings);

    s.delete(
        SCRATCH,
        &row,
        &columns("c", 100_000..100_001),
        base.offset_micros(1),
    )
    .await
    .expect("delete");
    let err = s
        .read_observed(SCRATCH, &row, &first)
        .await
        .expect_err("100001 tombstones must fail the read");
    assert_eq!(
        err.kind(),
        crate::StoreErrorKind::TooManyTombstones,
        "{err}"
    );
    assert!(!err.is_retryable(), "{err}");
    assert_eq!(err.table(), Some(SCRATCH));
    assert!(
        err.to_string().contains(&row),
        "the error names the row: {err}"
    );

    let o = s
        .read_observed(SCRATCH, &row, &first.starting_at("z"))
        .await
        .expect("a slice past the tombstones reads");
    assert_eq!(names(&o.cells), ["z"]);
    assert!(o.warnings.is_empty(), "{:?}", o.warnings);
}
