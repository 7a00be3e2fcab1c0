//! S4: order and limit within a row, and paging through row keys.

use std::collections::BTreeSet;
use std::num::NonZeroU32;

use super::{Target, at, cell, values};
use crate::Store;
use crate::cell::{CellWrite, RowQuery};
use crate::schema::SCRATCH;

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

/// Scans of cells: every live cell of every row exactly once across the
/// parts of a split ring, rows in token order within their part (each in
/// the part its token falls in), each row's cells in column order with
/// their write times and TTLs, pages no larger than asked (a row may span
/// two), deleted cells left out.
pub async fn scan_cells_pages_through_token_ranges(t: &dyn Target) {
    use std::collections::BTreeMap;

    use crate::cell::{Cell, TokenRange, Ttl};
    use crate::tombstones::token;

    let s = t.store();
    let base = t.now();
    let ours: Vec<String> = (0..6).map(|i| t.unique(&format!("cells-{i}"))).collect();
    for (i, key) in ours.iter().enumerate() {
        let cells: Vec<CellWrite> = (0..=i % 3).map(|c| cell(&format!("c{c}"), "v")).collect();
        s.write(SCRATCH, key, &cells, at(base, 1))
            .await
            .expect("write");
    }
    let ttl = Ttl::from_secs(300).expect("300 s is a TTL");
    s.write(
        SCRATCH,
        &ours[0],
        &[cell("t", "v")],
        at(base, 2).with_ttl(ttl),
    )
    .await
    .expect("write with a ttl");
    s.delete(SCRATCH, &ours[2], &["c1".into()], base.offset_micros(3))
        .await
        .expect("delete");

    let page_size = NonZeroU32::new(2).expect("2 > 0");
    let mut seen: BTreeMap<String, Vec<Cell>> = BTreeMap::new();
    for range in TokenRange::FULL.split(3) {
        let mut cursor = None;
        let mut last_token = None;
        for page_no in 0.. {
            assert!(page_no < 100_000, "the scan of {range} does not terminate");
            let page = s
                .scan_cells(SCRATCH, range, cursor.as_ref(), page_size)
                .await
                .expect("scan cells");
            assert!(page.cells() <= 2, "page {page_no} of {range}: {page:?}");
            for row in page.rows {
                assert_eq!(row.token, token(&row.key), "{row:?}");
                assert!(range.contains(row.token), "{row:?} outside {range}");
                assert!(
                    last_token.is_none_or(|t| t <= row.token),
                    "rows of {range} out of token order"
                );
                last_token = Some(row.token);
                if ours.contains(&row.key) {
                    seen.entry(row.key).or_default().extend(row.cells);
                }
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
    }
    for (i, key) in ours.iter().enumerate() {
        let cells = seen.get(key).cloned().unwrap_or_default();
        let columns: Vec<&str> = cells.iter().map(|c| c.column.as_str()).collect();
        let mut want: Vec<String> = (0..=i % 3).map(|c| format!("c{c}")).collect();
        if i == 0 {
            want.push("t".into());
        }
        if i == 2 {
            want.retain(|c| c != "c1");
        }
        assert_eq!(
            columns, want,
            "row {i}: every live cell once, in column order"
        );
        for c in &cells {
            let (writetime, has_ttl) = if c.column == "t" {
                (base.offset_micros(2), true)
            } else {
                (base.offset_micros(1), false)
            };
            assert_eq!(c.writetime, writetime, "row {i} {}: writetime", c.column);
            assert_eq!(
                c.ttl.is_some(),
                has_ttl,
                "row {i} {}: ttl {:?}",
                c.column,
                c.ttl
            );
        }
    }
}

/// The coordinator's clock, in whole milliseconds: close to the client's
/// (the suite's clock and the store's are one, or both the machines').
pub async fn server_time_reads_the_coordinators_clock(t: &dyn Target) {
    let before = t.now();
    let at = t
        .store()
        .server_time_via(&crate::Route::Default)
        .await
        .expect("the coordinator's time");
    assert_eq!(at.as_micros() % 1000, 0, "whole milliseconds: {at:?}");
    let apart = (at.as_micros() - before.as_micros()).abs();
    assert!(
        apart < 10_000_000,
        "the coordinator's clock {at:?} is {apart} µs from the client's {before:?}"
    );
}

/// Every node the store lists answers its own clock on a route to it
/// alone ([`Route::Host`](crate::Route::Host)), close to the client's; a
/// node that is not there is a connection error, and nothing but a clock
/// reading may go to one node.
pub async fn each_host_answers_its_own_clock(t: &dyn Target) {
    let hosts = t.store().topology().hosts;
    assert!(!hosts.is_empty(), "the store lists no node");
    for host in &hosts {
        let before = t.now();
        let route = crate::Route::Host(host.address.clone());
        let at = t
            .store()
            .server_time_via(&route)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", host.address));
        let apart = (at.as_micros() - before.as_micros()).abs();
        assert!(apart < 10_000_000, "{}: {at:?} vs {before:?}", host.address);
        let e = t
            .store()
            .read_via(&route, crate::schema::SCRATCH, "x", &RowQuery::all())
            .await
            .expect_err("a read on one node's route");
        assert_eq!(e.kind(), crate::StoreErrorKind::Invalid, "{e}");
    }
    let e = t
        .store()
        .server_time_via(&crate::Route::Host("192.0.2.1:9042".into()))
        .await
        .expect_err("no such node");
    assert_eq!(e.kind(), crate::StoreErrorKind::Connection, "{e}");
}
