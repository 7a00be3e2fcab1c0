use std::collections::BTreeMap;

use lockshift_store::{CellWrite, ManualClock, MemoryStore, Timestamp, WriteOptions};

use super::*;
use lockshift_lock::{Algorithm, Incarnation, OwnerId};

use lockshift_decide::census::holders_by_algorithm;
use lockshift_decide::registry::LeasePromise;

#[tokio::test]
async fn cells_are_classified_by_owner_shape_value_and_age() {
    let clock = ManualClock::new(Timestamp::from_micros(100_000_000));
    let store = MemoryStore::new();
    let put = |table, lock: &'static str, column: &'static str, value: &'static str, at: i64| {
        let store = &store;
        async move {
            store
                .write(
                    table,
                    lock,
                    &[CellWrite::new(column, value.as_bytes().to_vec())],
                    WriteOptions::at(Timestamp::from_micros(at)),
                )
                .await
                .unwrap();
        }
    };
    let now = 100_000_000;
    put(
        schema::MAIN,
        "a",
        "n1/0000000000000001",
        "queue",
        now - 1_000_000,
    )
    .await;
    put(
        schema::MAIN,
        "b",
        "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
        "whatever",
        now - 2_000_000,
    )
    .await;
    put(
        schema::SHADOW,
        "b",
        "n2/0000000000000002",
        "legacy",
        now - 50_000_000,
    )
    .await;
    put(
        schema::QUEUE,
        "a",
        "00000000000000000001n1/0000000000000001",
        "queue",
        now - 1_000_000,
    )
    .await;
    put(
        schema::QUEUE,
        "a",
        "00000000000000000002n3/0000000000000003",
        "combined",
        now - 1_000_000,
    )
    .await;
    put(
        schema::MAIN,
        "c",
        "n4/0000000000000004",
        "queue:reserved",
        now - 1_000_000,
    )
    .await;
    // A combined waiter second in line, reserved behind n4 in both tables.
    for table in [schema::MAIN, schema::SHADOW] {
        put(
            table,
            "c",
            "n5/0000000000000005",
            "combined:reserved:n4/0000000000000004",
            now - 1_000_000,
        )
        .await;
    }
    // The reserving waiter is first in line: holders leave the queue, so
    // position 0 is a waiter here.
    put(
        schema::QUEUE,
        "c",
        "00000000000000000003n4/0000000000000004",
        "queue",
        now - 2_000_000,
    )
    .await;
    let census = take_census(
        &store,
        &clock,
        &[],
        CensusOptions {
            stale_after: Staleness::uniform(Duration::from_secs(30)),
            clock_skew_margin: Duration::from_secs(5),
            reader: None,
            page_size: NonZeroU32::new(1).unwrap(),
        },
        &|_| true,
        |_, _| {},
    )
    .await
    .unwrap();
    assert_eq!(census.cells.len(), 9);
    let reservation = census
        .kept_in_table(schema::MAIN)
        .find(|c| c.lock == "c" && c.column.starts_with("n4/"))
        .unwrap();
    assert!(reservation.owner.reserved && reservation.owner.algorithm == Some(Algorithm::Queue));
    for behind in census.cells.iter().filter(|c| c.column.starts_with("n5/")) {
        assert!(
            behind.owner.reserved && behind.owner.algorithm == Some(Algorithm::Combined),
            "{behind:?}"
        );
    }
    assert!(
        census.kept_held().all(|c| c.lock != "c"),
        "a reservation is not a holding"
    );
    let legacy: Vec<&str> = census
        .kept_legacy_activity()
        .map(|c| c.column.as_str())
        .collect();
    assert_eq!(
        legacy,
        [
            "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
            "n2/0000000000000002"
        ]
    );
    assert_eq!(census.kept_held_by(Algorithm::Queue).count(), 1);
    let stale: Vec<&str> = census.kept_stale().map(|c| c.column.as_str()).collect();
    assert_eq!(stale, ["n2/0000000000000002"]);
    let waiting = census.kept_waiting();
    assert_eq!(waiting.len(), 2, "{waiting:?}");
    assert_eq!(
        waiting[0].owner.owner, "n4/0000000000000004",
        "the oldest first"
    );
    assert_eq!(waiting[1].owner.owner, "n3/0000000000000003");
    assert_eq!(waiting[1].owner.algorithm, Some(Algorithm::Combined));
    assert!(
        waiting
            .iter()
            .all(|c| c.owner.owner != "n1/0000000000000001"),
        "the holder's queue cell is not a waiter"
    );
    assert_eq!(
        holders_by_algorithm(&census)[&None],
        1,
        "the foreign holder"
    );
}
/// Issue 18 item 4: one lock whose row the database refuses to read
/// does not blind the census to the others.
#[tokio::test]
async fn a_row_the_database_refuses_is_recorded_and_the_census_goes_on() {
    use lockshift_store::TombstoneThresholds;
    let now = 100_000_000;
    let clock = ManualClock::new(Timestamp::from_micros(now));
    let store =
        MemoryStore::new().with_tombstone_thresholds(TombstoneThresholds { warn: 5, fail: 10 });
    let gone: Vec<String> = (0..20).map(|i| format!("gone-{i:02}")).collect();
    let cells: Vec<CellWrite> = gone
        .iter()
        .map(|c| CellWrite::new(c.clone(), b"queue".to_vec()))
        .collect();
    let at = |us| WriteOptions::at(Timestamp::from_micros(us));
    store
        .write(schema::QUEUE, "jammed", &cells, at(now - 2_000_000))
        .await
        .unwrap();
    store
        .delete(
            schema::QUEUE,
            "jammed",
            &gone,
            Timestamp::from_micros(now - 1_000_000),
        )
        .await
        .unwrap();
    // And in `main`, after the holdings (in the scan's token order), a
    // row of tombstones alone.
    let last = ["fine", "jammed"]
        .map(lockshift_store::tombstones::token)
        .into_iter()
        .max()
        .unwrap();
    let trailing = (0..)
        .map(|i| format!("zz-jammed-{i}"))
        .find(|k| lockshift_store::tombstones::token(k) > last)
        .unwrap();
    store
        .write(schema::MAIN, &trailing, &cells, at(now - 2_000_000))
        .await
        .unwrap();
    store
        .delete(
            schema::MAIN,
            &trailing,
            &gone,
            Timestamp::from_micros(now - 1_000_000),
        )
        .await
        .unwrap();
    for lock in ["fine", "jammed"] {
        store
            .write(
                schema::MAIN,
                lock,
                &[CellWrite::new("n1/0000000000000001", b"queue".to_vec())],
                at(now - 1_000_000),
            )
            .await
            .unwrap();
    }
    let census = take_census(
        &store,
        &clock,
        &[],
        CensusOptions {
            stale_after: Staleness::uniform(Duration::from_secs(30)),
            clock_skew_margin: Duration::from_secs(5),
            reader: None,
            page_size: NonZeroU32::new(500).unwrap(),
        },
        &|_| true,
        |_, _| {},
    )
    .await
    .unwrap();
    let mut held: Vec<&str> = census.kept_held().map(|c| c.lock.as_str()).collect();
    held.sort_unstable();
    // The page of 500 keys of `main` is refused at the trailing row;
    // paged by one key, the scan keeps the rows before it, and is refused
    // there.
    assert_eq!(held, ["fine", "jammed"], "both main rows were read");
    // The queue's key scan meets the row of tombstones first and is
    // refused; the queue row of each lock `main` names is then read,
    // and the refusal of jammed's is named.
    let unreadable: Vec<(Table, Option<&str>)> = census
        .unreadable
        .iter()
        .map(|r| (r.table, r.lock.as_deref()))
        .collect();
    assert_eq!(
        unreadable,
        [
            (schema::MAIN, None),
            (schema::QUEUE, None),
            (schema::QUEUE, Some("jammed"))
        ]
    );
    let row = &census.unreadable[2];
    assert!(row.reason.contains("too many tombstones"), "{}", row.reason);
    assert!(
        row.describe()
            .starts_with("lock \"jammed\" (table queue): "),
        "{}",
        row.describe()
    );
}

#[test]
fn only_the_tombstone_refusal_concerns_one_row() {
    use StoreErrorKind::*;
    for (kind, row_only) in [
        (TooManyTombstones, true),
        (NotApplied, false),
        (MaybeApplied, false),
        (Unavailable, false),
        (Invalid, false),
        (SchemaMissing, false),
        (Connection, false),
        (Authentication, false),
    ] {
        assert_eq!(concerns_only_the_row(kind), row_only, "{kind:?}");
    }
}

/// Issue 23: a cell is matched to its own process's registry row (node
/// id and incarnation), never to another process of the same node id;
/// a row that names no process (a build before incarnations) counts
/// for liveness only; by its own process's promise a cell is known to
/// have outlived its lease — allowing for the skew margin.
#[tokio::test]
async fn cells_are_matched_to_their_own_process() {
    use lockshift_decide::registry::NodeInfo;
    use lockshift_lock::NodeId;
    let now = 100_000_000;
    let clock = ManualClock::new(Timestamp::from_micros(now));
    let store = MemoryStore::new();
    let (mine, other) = (Incarnation::from_seed(1), Incarnation::from_seed(2));
    let web = NodeId::new("web").unwrap();
    let owner = |i, slot| OwnerId::for_slot(&web, i, slot).as_str().to_string();
    let promise = |ttl_s: u64, renew_s: u64| LeasePromise {
        ttl_ms: ttl_s * 1000,
        renew_every_ms: renew_s * 1000,
    };
    let row = |node: &str, incarnation: Option<Incarnation>, lease| LiveNode {
        column: node.to_string(),
        info: NodeInfo {
            node: node.to_string(),
            version: "0.1.0".into(),
            configured_mode: lockshift_decide::algorithm::Mode::Combined,
            effective: Algorithm::Combined,
            degraded: false,
            seen_stage: None,
            seen_version: None,
            started_at: 0,
            incarnation: incarnation.map(|i| i.to_string()),
            last_used: BTreeMap::new(),
            lease,
            acting_version: None,
            bound: BTreeMap::new(),
            view_expired: false,
            datacenter: None,
            homes: None,
            stage_valid_for_ms: None,
            registry_ttl_ms: None,
            left: false,
            clock: None,
            host_clock: None,
        },
        heartbeat_at: Timestamp::from_micros(now),
        ttl_left: None,
    };
    // web/other announces TTL 4 s; web/mine has no row; "old" has a row
    // without an incarnation.
    let nodes = [
        row("web", Some(other), Some(promise(4, 1))),
        row("old", None, Some(promise(4, 1))),
    ];
    let cells = [
        ("a", owner(mine, 0), 20),
        ("b", owner(other, 0), 7),
        ("c", owner(other, 1), 11),
        ("d", "old/0000000100000000".to_string(), 20),
    ];
    for (lock, column, age_s) in &cells {
        store
            .write(
                schema::MAIN,
                lock,
                &[CellWrite::new(column.clone(), b"queue".to_vec())],
                WriteOptions::at(Timestamp::from_micros(now - age_s * 1_000_000)),
            )
            .await
            .unwrap();
    }
    let census = take_census(
        &store,
        &clock,
        &nodes,
        CensusOptions {
            stale_after: Staleness::uniform(Duration::from_secs(30)),
            clock_skew_margin: Duration::from_secs(5),
            reader: None,
            page_size: NonZeroU32::new(10).unwrap(),
        },
        &|_| true,
        |_, _| {},
    )
    .await
    .unwrap();
    // By lock: a scan walks rows in token order.
    let mut seen: Vec<(&str, bool, bool, Option<u64>, bool)> = census
        .cells
        .iter()
        .map(|c| {
            (
                c.lock.as_str(),
                c.owner.registered,
                c.owner.process_live,
                c.owner.promise.map(|p| p.ttl_ms),
                c.lease_over,
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            // Another process's row: the node id is registered, the
            // owner's process is not, and the promise is not its own.
            ("a", true, false, None, false),
            // Its own process's promise: life 2.75 s. 7 s − the 5 s
            // margin is within it, 11 s − 5 s is not.
            ("b", true, true, Some(4000), false),
            ("c", true, true, Some(4000), true),
            // A row without an incarnation: live, but no promise.
            ("d", true, true, None, false),
        ]
    );
    // At least 2 s and 2.8 s old (7 s and 7.8 s less the margin).
    assert!(!lease_over(
        Duration::from_secs(2),
        None,
        Some(promise(4, 1))
    ));
    assert!(lease_over(
        Duration::from_millis(2_800),
        None,
        Some(promise(4, 1))
    ));
    assert!(!lease_over(Duration::from_secs(600), None, None));
}

/// Issue 31 item 2: a cell with more TTL left than its process's row
/// promises was written with a longer lease than the row says — the row
/// understates it and cannot say the lease is over; a late write of the
/// promised lease (TTL left within it) still can (table; index printed).
#[test]
fn a_row_that_understates_the_cells_ttl_cannot_call_its_lease_over() {
    let promise = LeasePromise {
        ttl_ms: 10_000,
        renew_every_ms: 4_000,
    };
    // (age, TTL left, lease over)
    let cases = [
        // Renewed 20 s ago with a 60 s TTL: the row's 10 s lease says
        // nothing about it.
        (20.0, Some(39.0), false),
        // A late write of the 10 s lease, stamped long ago: over.
        (20.0, Some(9.0), true),
        (20.0, Some(10.0), true),
        (20.0, None, true),
        (5.0, Some(3.0), false),
    ];
    for (i, (age, left, over)) in cases.into_iter().enumerate() {
        assert_eq!(
            lease_over(
                Duration::from_secs_f64(age),
                left.map(Duration::from_secs_f64),
                Some(promise)
            ),
            over,
            "case #{i}"
        );
    }
}

fn scan_options(page_size: u32) -> CensusOptions {
    CensusOptions {
        stale_after: Staleness::uniform(Duration::from_secs(30)),
        clock_skew_margin: Duration::from_secs(5),
        page_size: NonZeroU32::new(page_size).unwrap(),
        reader: None,
    }
}

/// Issue 40 item 1: the census is a scan. Its round trips grow with the
/// pages, never with the locks: 3 000 held locks cost no read by key,
/// and (with 5 000-cell pages) one page per token range and table.
#[tokio::test]
async fn a_census_costs_pages_not_a_read_per_lock() {
    use lockshift_store::{FaultyStore, OpKind};
    let now = 100_000_000;
    let clock = ManualClock::new(Timestamp::from_micros(now));
    let store = FaultyStore::new(MemoryStore::new(), 1);
    let locks: Vec<String> = (0..3_000).map(|i| format!("entity-{i}")).collect();
    for lock in &locks {
        store
            .write(
                schema::MAIN,
                lock,
                &[CellWrite::new("n1/0000000000000001", b"queue".to_vec())],
                WriteOptions::at(Timestamp::from_micros(now - 1_000_000)),
            )
            .await
            .unwrap();
    }
    store.reset_counts();
    let mut last_progress = 0;
    let census = take_census(
        &store,
        &clock,
        &[],
        scan_options(5_000),
        &|_| true,
        |table, rows| {
            if table == schema::MAIN {
                last_progress = rows;
            }
        },
    )
    .await
    .unwrap();
    let counts = store.op_counts();
    let mut held: Vec<String> = census.kept_held().map(|c| c.lock.clone()).collect();
    held.sort_unstable();
    let mut expected = locks.clone();
    expected.sort_unstable();
    assert_eq!(held, expected, "every lock, once");
    assert_eq!(last_progress, 3_000);
    for table in [schema::MAIN, schema::SHADOW, schema::QUEUE] {
        assert_eq!(counts.get(table, OpKind::Read), 0, "{counts}");
        assert_eq!(
            counts.get(table, OpKind::Scan),
            u64::from(RANGES),
            "one page per range: {counts}"
        );
    }
    // Pages of 10 cells: 300 pages of main, a few more where ranges end
    // part way through a page; still no read by key.
    store.reset_counts();
    let census = take_census(&store, &clock, &[], scan_options(10), &|_| true, |_, _| {})
        .await
        .unwrap();
    let counts = store.op_counts();
    assert_eq!(census.kept_held().count(), 3_000);
    assert_eq!(counts.get(schema::MAIN, OpKind::Read), 0, "{counts}");
    let scans = counts.get(schema::MAIN, OpKind::Scan);
    assert!(
        (300..=300 + 2 * u64::from(RANGES)).contains(&scans),
        "{counts}"
    );
}

/// Issue 40 item 1: a row of tombstones alone in the middle of a table
/// refuses the pages that reach it; the census narrows the refused range
/// by halves down to that row's token, keeps every row on either side of
/// it, and names the token. Narrowing costs about one scan per halving,
/// not one per lock.
#[tokio::test]
async fn a_refused_range_is_narrowed_to_its_row_and_the_rest_is_read() {
    use lockshift_store::{FaultyStore, OpKind, TombstoneThresholds};
    let now = 100_000_000;
    let clock = ManualClock::new(Timestamp::from_micros(now));
    let store = FaultyStore::new(
        MemoryStore::new().with_tombstone_thresholds(TombstoneThresholds {
            warn: 50,
            fail: 100,
        }),
        1,
    );
    let at = |us| WriteOptions::at(Timestamp::from_micros(us));
    let gone: Vec<String> = (0..150).map(|i| format!("gone-{i:03}")).collect();
    let cells: Vec<CellWrite> = gone
        .iter()
        .map(|c| CellWrite::new(c.clone(), b"queue".to_vec()))
        .collect();
    store
        .write(schema::MAIN, "jammed", &cells, at(now - 2_000_000))
        .await
        .unwrap();
    store
        .delete(
            schema::MAIN,
            "jammed",
            &gone,
            Timestamp::from_micros(now - 1_000_000),
        )
        .await
        .unwrap();
    // And a row whose live cell comes before its tombstones: a page of one
    // cell names it.
    let mut ahead = vec![CellWrite::new(
        "a-holder/0000000000000001",
        b"queue".to_vec(),
    )];
    ahead.extend(cells.iter().cloned());
    store
        .write(schema::MAIN, "jammed-held", &ahead, at(now - 2_000_000))
        .await
        .unwrap();
    store
        .delete(
            schema::MAIN,
            "jammed-held",
            &gone,
            Timestamp::from_micros(now - 1_000_000),
        )
        .await
        .unwrap();
    let locks: Vec<String> = (0..2_000).map(|i| format!("entity-{i}")).collect();
    for lock in &locks {
        store
            .write(
                schema::MAIN,
                lock,
                &[CellWrite::new("n1/0000000000000001", b"queue".to_vec())],
                at(now - 1_000_000),
            )
            .await
            .unwrap();
    }
    store.reset_counts();
    let census = take_census(
        &store,
        &clock,
        &[],
        scan_options(5_000),
        &|_| true,
        |_, _| {},
    )
    .await
    .unwrap();
    assert_eq!(
        census.kept_held().count(),
        2_000,
        "every row around the refused one"
    );
    let jammed = lockshift_store::tombstones::token("jammed");
    let unreadable: Vec<(Table, Option<&str>, &str)> = census
        .unreadable
        .iter()
        .map(|r| (r.table, r.lock.as_deref(), r.reason.as_str()))
        .collect();
    assert_eq!(unreadable.len(), 2, "{unreadable:?}");
    let unnamed = unreadable.iter().find(|r| r.1.is_none()).unwrap();
    assert_eq!(unnamed.0, schema::MAIN);
    assert!(
        unnamed.2.starts_with(&format!("token {jammed}: ")),
        "{unreadable:?}"
    );
    let named = unreadable.iter().find(|r| r.1.is_some()).unwrap();
    assert_eq!((named.0, named.1), (schema::MAIN, Some("jammed-held")));
    assert!(named.2.contains("too many tombstones"), "{unreadable:?}");
    let counts = store.op_counts();
    assert_eq!(counts.get(schema::MAIN, OpKind::Read), 0, "{counts}");
    let scans = counts.get(schema::MAIN, OpKind::Scan);
    assert!(scans < u64::from(RANGES) + 6 * 64, "{counts}");
}
