//! S3: TTLs count from when a write is applied, in whole seconds.

use std::time::Duration;

use super::{Target, at, cell, value_of, values};
use crate::cell::{RowQuery, Ttl, WriteOptions};
use crate::schema::SCRATCH;

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
