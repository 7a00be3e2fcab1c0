//! The backend conformance suite: the [`Store`] contract as executable checks,
//! written once and run against every backend.
//!
//! Each check takes a [`Target`] (a store plus the means to let time pass on
//! its clock) and panics with a message naming the broken rule. Test crates
//! instantiate the whole suite with [`conformance_tests!`](crate::conformance_tests):
//!
//! ```ignore
//! lockshift_store::conformance_tests!(my_target());
//! ```
//!
//! Rows are named with [`Target::unique`] so the suite can share a keyspace
//! with other runs on a real cluster; everything lives in
//! [`schema::SCRATCH`](crate::schema::SCRATCH).

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::cell::{CellWrite, RowQuery, Timestamp, Ttl, WriteOptions};
use crate::clock::ManualClock;
use crate::schema::SCRATCH;
use crate::{Clock, MemoryStore, Store};

/// A backend under test.
#[async_trait]
pub trait Target: Send + Sync + Debug {
    /// The store under test.
    fn store(&self) -> &dyn Store;
    /// A timestamp base for writes: the client's "now".
    fn now(&self) -> Timestamp;
    /// Lets `d` pass on the store's TTL clock: a manual clock moves, a real
    /// cluster is waited for.
    async fn advance(&self, d: Duration);
    /// A row key unique to this run and `name`.
    fn unique(&self, name: &str) -> String;
    /// The keyspace the store's tables live in, as a cluster names it in
    /// its warnings ([`crate::tombstones::read_cql`]).
    fn keyspace(&self) -> String {
        crate::memory::DEFAULT_KEYSPACE.to_string()
    }
}

/// The embedded store on a manual clock: time passes instantly.
#[derive(Debug)]
pub struct MemoryTarget {
    clock: Arc<ManualClock>,
    store: MemoryStore,
}

impl MemoryTarget {
    /// A fresh embedded store on a manual clock.
    pub fn new() -> Self {
        let clock = Arc::new(ManualClock::new(Timestamp::from_micros(
            1_700_000_000_000_000,
        )));
        MemoryTarget {
            store: MemoryStore::with_clock(clock.clone()),
            clock,
        }
    }
}

impl Default for MemoryTarget {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Target for MemoryTarget {
    fn store(&self) -> &dyn Store {
        &self.store
    }
    fn now(&self) -> Timestamp {
        self.clock.now()
    }
    async fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }
    fn unique(&self, name: &str) -> String {
        name.to_string()
    }
}

fn at(t: Timestamp, offset: i64) -> WriteOptions {
    WriteOptions::at(t.offset_micros(offset))
}

fn cell(column: &str, value: &str) -> CellWrite {
    CellWrite::new(column, value.as_bytes().to_vec())
}

async fn values(t: &dyn Target, row: &str) -> Vec<(String, String)> {
    t.store()
        .read(SCRATCH, row, &RowQuery::all())
        .await
        .expect("read")
        .into_iter()
        .map(|c| (c.column, String::from_utf8_lossy(&c.value).into_owned()))
        .collect()
}

async fn value_of(t: &dyn Target, row: &str, column: &str) -> Option<String> {
    values(t, row)
        .await
        .into_iter()
        .find(|(c, _)| c == column)
        .map(|(_, v)| v)
}

/// S1: the higher timestamp wins whatever order writes arrive in, and
/// `writetime()` reports the winner's timestamp.
pub async fn last_write_wins(t: &dyn Target) {
    let s = t.store();
    let row = t.unique("lww");
    let base = t.now();
    s.write(SCRATCH, &row, &[cell("c", "new")], at(base, 20))
        .await
        .expect("write");
    s.write(SCRATCH, &row, &[cell("c", "old")], at(base, 10))
        .await
        .expect("write");
    let cells = s.read(SCRATCH, &row, &RowQuery::all()).await.expect("read");
    assert_eq!(cells.len(), 1, "one column, one cell");
    assert_eq!(
        cells[0].value, b"new",
        "a write with an older timestamp must lose"
    );
    assert_eq!(
        cells[0].writetime,
        base.offset_micros(20),
        "writetime is the winner's"
    );
    s.write(SCRATCH, &row, &[cell("c", "newer")], at(base, 30))
        .await
        .expect("write");
    assert_eq!(value_of(t, &row, "c").await.as_deref(), Some("newer"));
}

/// S2: on a timestamp tie the tombstone wins, whichever arrives first; between
/// two live values with the same timestamp the greater value wins.
pub async fn tie_goes_to_tombstone(t: &dyn Target) {
    let s = t.store();
    let base = t.now();
    let row = t.unique("tie-write-first");
    s.write(SCRATCH, &row, &[cell("c", "v")], at(base, 10))
        .await
        .expect("write");
    s.delete(SCRATCH, &row, &["c".into()], base.offset_micros(10))
        .await
        .expect("delete");
    assert_eq!(
        values(t, &row).await,
        vec![],
        "delete at T must remove a write at T"
    );

    let row = t.unique("tie-delete-first");
    s.delete(SCRATCH, &row, &["c".into()], base.offset_micros(10))
        .await
        .expect("delete");
    s.write(SCRATCH, &row, &[cell("c", "v")], at(base, 10))
        .await
        .expect("write");
    assert_eq!(
        values(t, &row).await,
        vec![],
        "a write at T must not survive a delete at T"
    );

    let row = t.unique("tie-values");
    s.write(SCRATCH, &row, &[cell("c", "b")], at(base, 10))
        .await
        .expect("write");
    s.write(SCRATCH, &row, &[cell("c", "a")], at(base, 10))
        .await
        .expect("write");
    s.write(SCRATCH, &row, &[cell("d", "a")], at(base, 10))
        .await
        .expect("write");
    s.write(SCRATCH, &row, &[cell("d", "b")], at(base, 10))
        .await
        .expect("write");
    assert_eq!(
        values(t, &row).await,
        vec![("c".into(), "b".into()), ("d".into(), "b".into())],
        "on a live tie the greater value wins in either order"
    );
}

/// S2: a delete at `T` shadows versions at or before `T`, never later ones —
/// a renewal racing `migrate clean` survives.
pub async fn delete_shadows_older_not_newer(t: &dyn Target) {
    let s = t.store();
    let row = t.unique("shadow");
    let base = t.now();
    s.write(SCRATCH, &row, &[cell("c", "v1")], at(base, 10))
        .await
        .expect("write");
    s.delete(SCRATCH, &row, &["c".into()], base.offset_micros(20))
        .await
        .expect("delete");
    assert_eq!(
        value_of(t, &row, "c").await,
        None,
        "delete at 20 hides write at 10"
    );
    s.write(SCRATCH, &row, &[cell("c", "v2")], at(base, 15))
        .await
        .expect("write");
    assert_eq!(
        value_of(t, &row, "c").await,
        None,
        "a late write at 15 stays hidden behind the delete at 20"
    );
    s.write(SCRATCH, &row, &[cell("c", "v3")], at(base, 30))
        .await
        .expect("write");
    assert_eq!(
        value_of(t, &row, "c").await.as_deref(),
        Some("v3"),
        "write at 30 survives delete at 20"
    );
    s.delete(SCRATCH, &row, &["c".into()], base.offset_micros(25))
        .await
        .expect("delete");
    assert_eq!(
        value_of(t, &row, "c").await.as_deref(),
        Some("v3"),
        "an older delete does not remove a newer write"
    );
    s.delete(SCRATCH, &row, &["other".into()], base.offset_micros(99))
        .await
        .expect("delete");
    assert_eq!(
        value_of(t, &row, "c").await.as_deref(),
        Some("v3"),
        "a delete touches only its columns"
    );
}

/// S3: a cell with a TTL is visible until the TTL has passed, then gone; its
/// remaining TTL is reported; the TTL counts from when the write was applied,
/// not from its timestamp; an expired cell shadows older writes.
pub async fn ttl_expiry(t: &dyn Target) {
    let s = t.store();
    let row = t.unique("ttl");
    let base = t.now();
    let ttl = Ttl::from_secs(3).expect("ttl");
    s.write(
        SCRATCH,
        &row,
        &[cell("short", "v")],
        at(base, 0).with_ttl(ttl),
    )
    .await
    .expect("write");
    s.write(SCRATCH, &row, &[cell("forever", "v")], at(base, 0))
        .await
        .expect("write");
    // Stamped an hour in the past: the TTL must still count from now.
    let past = base.saturating_sub(Duration::from_secs(3600));
    s.write(
        SCRATCH,
        &row,
        &[cell("past", "v")],
        WriteOptions::at(past).with_ttl(ttl),
    )
    .await
    .expect("write");
    let cells = s.read(SCRATCH, &row, &RowQuery::all()).await.expect("read");
    let short = cells
        .iter()
        .find(|c| c.column == "short")
        .expect("fresh TTL cell is visible");
    let left = short.ttl.expect("a TTL cell reports its TTL");
    assert!(
        left <= Duration::from_secs(3) && left >= Duration::from_secs(1),
        "ttl left {left:?}"
    );
    assert!(
        cells.iter().any(|c| c.column == "past"),
        "TTL counts from apply time, not the timestamp"
    );
    let forever = cells
        .iter()
        .find(|c| c.column == "forever")
        .expect("forever");
    assert_eq!(forever.ttl, None, "a cell without TTL reports none");

    t.advance(Duration::from_secs(1)).await;
    assert!(
        value_of(t, &row, "short").await.is_some(),
        "still live before the TTL"
    );
    t.advance(Duration::from_secs(3)).await;
    let left: Vec<String> = values(t, &row).await.into_iter().map(|(c, _)| c).collect();
    assert_eq!(
        left,
        vec!["forever".to_string()],
        "TTL cells expire, others stay"
    );

    s.write(SCRATCH, &row, &[cell("short", "older")], at(base, -1))
        .await
        .expect("write");
    assert_eq!(
        value_of(t, &row, "short").await,
        None,
        "an expired cell shadows older writes"
    );
}

/// S3, whole seconds (Cassandra 4.1 measured; docs/design.md §1): the TTL clock
/// counts in whole seconds. A cell written at server second `s + f` with
/// TTL `n` expires at `s + n`, so it lives `n - f`: written late in a second
/// it dies almost a second early, written early it lives almost the full
/// TTL. A lease may therefore only count on `sent + ttl - 1 s` (minus clock
/// skew between coordinators).
///
/// On a real cluster the server's seconds are only known through this
/// machine's clock, so both cases write at the middle of a second and probe
/// a quarter of a second either side of the whole-second expiry: they hold
/// while this machine and the coordinator disagree by less than 0.25 s
/// (write latency included). Written at `.5`, the cell dies 1.5 s later;
/// probed at 1.75 s it is gone (an exact 2 s TTL would still show it), at
/// 1.25 s it is there.
pub async fn ttl_counts_whole_seconds(t: &dyn Target) {
    let s = t.store();
    let ttl = Ttl::from_secs(2).expect("ttl");
    // (fraction of the second to write at, probe after, alive then?)
    let cases = [(0.5, 1.75, false), (0.5, 1.25, true)];
    for (i, (fraction, probe_after, alive)) in cases.into_iter().enumerate() {
        let row = t.unique(&format!("ttl-seconds-{i}"));
        let into_second = t.now().as_micros().rem_euclid(1_000_000);
        let wanted = (fraction * 1e6) as i64;
        let wait = (wanted - into_second).rem_euclid(1_000_000);
        t.advance(Duration::from_micros(wait.unsigned_abs())).await;
        s.write(
            SCRATCH,
            &row,
            &[cell("c", "v")],
            at(t.now(), 0).with_ttl(ttl),
        )
        .await
        .expect("write");
        t.advance(Duration::from_secs_f64(probe_after)).await;
        assert_eq!(
            value_of(t, &row, "c").await.is_some(),
            alive,
            "case #{i}: a 2 s TTL written at {fraction} of a second, read {probe_after} s later: \
             expected {}; the TTL must run out at the end of the write's whole second + 2 s",
            if alive { "alive" } else { "expired" }
        );
    }
}

/// S4: live cells come back in ascending byte order of column names.
pub async fn column_order(t: &dyn Target) {
    let s = t.store();
    let row = t.unique("order");
    let base = t.now();
    let columns = [
        "zeta",
        "Alpha",
        "é",
        "a",
        "00000000000000000010-b",
        "00000000000000000009-z",
        "aa",
        "_",
    ];
    for (i, c) in columns.iter().enumerate() {
        s.write(SCRATCH, &row, &[cell(c, "v")], at(base, i as i64))
            .await
            .expect("write");
    }
    let got: Vec<String> = values(t, &row).await.into_iter().map(|(c, _)| c).collect();
    let mut want: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
    want.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    assert_eq!(
        got, want,
        "cells must come back in byte order of their column names"
    );
}

/// S4: `limit` counts live cells only; `start_column` is inclusive and may
/// name a column that does not exist.
pub async fn limit_and_start_column(t: &dyn Target) {
    let s = t.store();
    let row = t.unique("slice");
    let base = t.now();
    let cells: Vec<CellWrite> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|c| cell(c, c))
        .collect();
    s.write(SCRATCH, &row, &cells, at(base, 1))
        .await
        .expect("write");
    let names = |cells: Vec<crate::Cell>| cells.into_iter().map(|c| c.column).collect::<Vec<_>>();
    let read = |q: RowQuery| {
        let row = row.clone();
        async move { names(s.read(SCRATCH, &row, &q).await.expect("read")) }
    };
    assert_eq!(read(RowQuery::first(2)).await, ["a", "b"], "limit 2");
    assert_eq!(
        read(RowQuery::first(9)).await,
        ["a", "b", "c", "d", "e"],
        "limit past the end"
    );
    assert_eq!(
        read(RowQuery::all().starting_at("c")).await,
        ["c", "d", "e"],
        "start is inclusive"
    );
    assert_eq!(
        read(RowQuery::first(1).starting_at("bb")).await,
        ["c"],
        "start between columns"
    );
    assert_eq!(
        read(RowQuery::all().starting_at("f")).await,
        Vec::<String>::new(),
        "start past the end"
    );
    s.delete(
        SCRATCH,
        &row,
        &["a".into(), "b".into()],
        base.offset_micros(2),
    )
    .await
    .expect("delete");
    assert_eq!(
        read(RowQuery::first(1)).await,
        ["c"],
        "tombstones do not count towards the limit"
    );
    let missing = t.unique("slice-missing");
    assert_eq!(
        read_row_names(s, &missing).await,
        Vec::<String>::new(),
        "a missing row reads empty"
    );
}

async fn read_row_names(s: &dyn Store, row: &str) -> Vec<String> {
    s.read(SCRATCH, row, &RowQuery::all())
        .await
        .expect("read")
        .into_iter()
        .map(|c| c.column)
        .collect()
}

/// Paging through row keys: every row with live cells exactly once, pages no
/// larger than asked, rows whose cells are all deleted left out.
pub async fn scan_pages_through_keys(t: &dyn Target) {
    let s = t.store();
    let base = t.now();
    let ours: BTreeSet<String> = (0..7).map(|i| t.unique(&format!("scan-{i}"))).collect();
    for key in &ours {
        s.write(SCRATCH, key, &[cell("c", "v")], at(base, 1))
            .await
            .expect("write");
    }
    let gone = t.unique("scan-deleted");
    s.write(SCRATCH, &gone, &[cell("c", "v")], at(base, 1))
        .await
        .expect("write");
    s.delete(SCRATCH, &gone, &["c".into()], base.offset_micros(2))
        .await
        .expect("delete");

    let page_size = NonZeroU32::new(3).expect("3 > 0");
    let mut seen = Vec::new();
    let mut cursor = None;
    for page_no in 0.. {
        assert!(page_no < 10_000, "scan does not terminate");
        let page = s
            .scan_keys(SCRATCH, cursor.as_ref(), page_size)
            .await
            .expect("scan");
        assert!(
            page.keys.len() <= 3,
            "page {page_no} holds {} keys, asked for 3",
            page.keys.len()
        );
        seen.extend(page.keys);
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let seen_ours: Vec<&String> = seen.iter().filter(|k| ours.contains(*k)).collect();
    assert_eq!(
        seen_ours.len(),
        ours.len(),
        "each of our rows appears once: {seen:?}"
    );
    let unique: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "no key twice in one scan");
    assert!(
        !seen.contains(&gone),
        "a row with only deleted cells is not listed"
    );
}

/// Concurrent writers: distinct columns all land; on a contested column the
/// highest timestamp wins regardless of arrival.
pub async fn concurrent_writers(t: &dyn Target) {
    let s = t.store();
    let row = t.unique("concurrent");
    let base = t.now();
    let writers = 16i64;
    let tasks = (0..writers).map(|i| {
        let row = row.clone();
        async move {
            let own = cell(&format!("w{i:02}"), "v");
            let contested = cell("contested", &format!("{i:02}"));
            s.write(SCRATCH, &row, &[own], at(base, i))
                .await
                .expect("write own");
            // Reverse the timestamps relative to spawn order.
            s.write(SCRATCH, &row, &[contested], at(base, 1000 - i))
                .await
                .expect("write contested");
        }
    });
    futures::future::join_all(tasks).await;
    let got = values(t, &row).await;
    assert_eq!(
        got.len(),
        writers as usize + 1,
        "every writer's column is present: {got:?}"
    );
    assert_eq!(
        value_of(t, &row, "contested").await.as_deref(),
        Some("00"),
        "the contested column holds the highest-timestamp write"
    );
}

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

/// Instantiates every conformance check as a `#[tokio::test]`. `$make` is an
/// expression evaluating to a future of a [`Target`]; it runs once per test.
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        $crate::conformance_tests!(@each $make;
            last_write_wins, tie_goes_to_tombstone, delete_shadows_older_not_newer,
            ttl_expiry, ttl_counts_whole_seconds, column_order, limit_and_start_column, scan_pages_through_keys,
            concurrent_writers, tombstones_cost_reads, too_many_tombstones_fail_the_read);
    };
    (@each $make:expr; $($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let target = $make.await;
                $crate::conformance::$name(&target).await;
            }
        )*
    };
}
