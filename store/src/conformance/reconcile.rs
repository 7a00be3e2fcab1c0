//! S1–S2: which version wins, whatever order writes and deletes arrive in.

use super::{Target, at, cell, value_of, values};
use crate::cell::RowQuery;
use crate::schema::SCRATCH;

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
