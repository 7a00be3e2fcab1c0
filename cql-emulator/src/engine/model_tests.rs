//! The model test: random lockshift operations — writes with tied
//! timestamps and TTLs, deletes, clock moves, reads with LIMIT and a start
//! column — run against this engine (through the agreed CQL statements) and
//! against `lockshift_store::MemoryStore`; every read must agree (the
//! crate's invariant 1), on its cells and on the tombstones it passed (the
//! engine's warning, at a warn threshold of 0, against the store's count),
//! with a gc grace short enough for tombstones to be purged on both.

use std::num::NonZeroU32;
use std::time::Duration;

use lockshift_store::{
    CellWrite, MemoryStore, RowQuery, Store, Timestamp, TombstoneThresholds, Ttl, WriteOptions,
    schema, tombstones,
};
use proptest::prelude::*;

use super::tests::Db;
use super::*;

#[derive(Clone, Debug)]
enum Op {
    Write {
        row: u8,
        cols: Vec<(u8, u8)>,
        ts: i64,
        ttl: u32,
    },
    Delete {
        row: u8,
        cols: Vec<u8>,
        ts: i64,
    },
    Advance(u32),
    Read {
        row: u8,
        limit: Option<u32>,
        start: Option<u8>,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let row = 0u8..3;
    let col = 0u8..5;
    prop_oneof![
        4 => (row.clone(), proptest::collection::vec((col.clone(), 0u8..3), 1..4), 0i64..6, prop_oneof![Just(0u32), 1u32..4])
            .prop_map(|(row, cols, ts, ttl)| Op::Write { row, cols, ts, ttl }),
        2 => (row.clone(), proptest::collection::vec(col.clone(), 1..3), 0i64..6)
            .prop_map(|(row, cols, ts)| Op::Delete { row, cols, ts }),
        1 => (0u32..2500).prop_map(Op::Advance),
        1 => (2500u32..4000).prop_map(Op::Advance),
        3 => (row, proptest::option::of(1u32..4), proptest::option::of(col))
            .prop_map(|(row, limit, start)| Op::Read { row, limit, start }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// The crate's invariant 1: random writes, deletes (with tied timestamps), TTLs, clock
    /// moves and reads give identical cells on both backends.
    #[test]
    fn engine_matches_the_embedded_store(ops in proptest::collection::vec(op(), 1..40)) {
        let mut db = Db::lockshift();
        // Every tombstone passed shows as a warning; grace 3 s, so the
        // clock moves past it.
        let thresholds = TombstoneThresholds { warn: 0, fail: u64::MAX };
        db.engine.thresholds = thresholds;
        db.ok("CREATE TABLE ks.scratch (row_key text, column_name text, value blob, PRIMARY KEY ((row_key), column_name)) WITH CLUSTERING ORDER BY (column_name ASC) AND gc_grace_seconds = 3");
        let store = MemoryStore::with_clock(db.clock.clone())
            .with_gc_grace(Duration::from_secs(3))
            .with_tombstone_thresholds(thresholds);
        let ins = db.prepare("INSERT INTO ks.scratch (row_key, column_name, value) VALUES (?, ?, ?) USING TTL ? AND TIMESTAMP ?").unwrap();
        let del = db.prepare("BEGIN UNLOGGED BATCH USING TIMESTAMP ? DELETE FROM ks.scratch WHERE row_key = ? AND column_name IN ? APPLY BATCH").unwrap();
        let sel = db.prepare("SELECT column_name, value, writetime(value), ttl(value) FROM ks.scratch WHERE row_key = ? LIMIT ?").unwrap();
        let sel_from = db.prepare("SELECT column_name, value, writetime(value), ttl(value) FROM ks.scratch WHERE row_key = ? AND column_name >= ? LIMIT ?").unwrap();
        let b = |s: &str| Value::Bytes(s.as_bytes().to_vec());
        for op in ops {
            match op {
                Op::Write { row, cols, ts, ttl } => {
                    let row = format!("r{row}");
                    let mut opts = WriteOptions::at(Timestamp::from_micros(ts));
                    if ttl > 0 { opts = opts.with_ttl(Ttl::from_secs(ttl).unwrap()); }
                    let cells: Vec<CellWrite> = cols.iter().map(|(c, v)| CellWrite::new(format!("c{c}"), vec![*v])).collect();
                    futures::executor::block_on(store.write(schema::SCRATCH, &row, &cells, opts)).unwrap();
                    // The CQL backend's way: one statement per cell (a batch in production).
                    for cell in &cells {
                        let values = [b(&row), b(&cell.column), Value::Bytes(cell.value.clone()),
                            Value::Bytes((ttl as i32).to_be_bytes().to_vec()), Value::Bytes(ts.to_be_bytes().to_vec())];
                        db.exec(&ins, &values, None, None).unwrap();
                    }
                }
                Op::Delete { row, cols, ts } => {
                    let row = format!("r{row}");
                    let names: Vec<String> = cols.iter().map(|c| format!("c{c}")).collect();
                    futures::executor::block_on(store.delete(schema::SCRATCH, &row, &names, Timestamp::from_micros(ts))).unwrap();
                    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                    let values = [Value::Bytes(ts.to_be_bytes().to_vec()), b(&row), Value::Bytes(crate::value::text_collection(&refs))];
                    db.exec(&del, &values, None, None).unwrap();
                }
                Op::Advance(ms) => db.clock.advance(Duration::from_millis(u64::from(ms))),
                Op::Read { row, limit, start } => {
                    let row = format!("r{row}");
                    let mut q = RowQuery::all();
                    q.limit = limit.and_then(NonZeroU32::new);
                    q.start_column = start.map(|c| format!("c{c}"));
                    let observed = futures::executor::block_on(store.read_observed(schema::SCRATCH, &row, &q)).unwrap();
                    let want = observed.cells;
                    // The CQL backend binds Cassandra's "no limit" for a whole row.
                    let lim = Value::Bytes(limit.map_or(i32::MAX, |l| l as i32).to_be_bytes().to_vec());
                    let out = match &q.start_column {
                        None => db.exec(&sel, &[b(&row), lim], None, None).unwrap(),
                        Some(s) => db.exec(&sel_from, &[b(&row), b(s), lim], None, None).unwrap(),
                    };
                    let Outcome::Rows(page) = out else { panic!() };
                    // The same count, and the same warning but for the keyspace.
                    let passed = page.warnings.first().and_then(|w| tombstones::parse_warning(w)).map_or(0, |w| w.tombstones);
                    prop_assert_eq!(Some(passed), observed.tombstones);
                    prop_assert_eq!(
                        page.warnings.iter().map(|w| w.replace("ks.scratch", "lockshift.scratch")).collect::<Vec<_>>(),
                        observed.warnings
                    );
                    let got: Vec<(String, Vec<u8>, i64, Option<u64>)> = page.rows.iter().map(|r| (
                        String::from_utf8(r[0].clone().unwrap()).unwrap(),
                        r[1].clone().unwrap(),
                        crate::value::as_i64(r[2].as_ref().unwrap()).unwrap(),
                        r[3].as_ref().map(|t| crate::value::as_i32(t).unwrap() as u64),
                    )).collect();
                    let want: Vec<(String, Vec<u8>, i64, Option<u64>)> = want.into_iter().map(|c| (
                        c.column, c.value, c.writetime.as_micros(), c.ttl.map(|d| d.as_secs()),
                    )).collect();
                    prop_assert_eq!(got, want);
                }
            }
        }
    }
}
