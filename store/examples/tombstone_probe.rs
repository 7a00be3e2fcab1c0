//! Measures how a real Cassandra node counts the tombstones a read passes:
//! the numbers written down in `lockshift_store::tombstones`.
//!
//! ```text
//! cargo run -p lockshift-store --example tombstone_probe -- 127.0.0.1:9042
//! ```
//!
//! It creates (and finally drops) the keyspace `lockshift_tombstone_probe`
//! with one table shaped like lockshift's and one with
//! `gc_grace_seconds = 5`, writes tombstones with the statements the CQL
//! backend uses, and prints every server warning and error verbatim. It
//! takes about a minute (the gc-grace and TTL cases wait in real time).

use std::error::Error;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::errors::{ExecutionError, RequestAttemptError};
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;

const KS: &str = "lockshift_tombstone_probe";

type Res<T> = Result<T, Box<dyn Error>>;

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

struct Probe {
    session: Session,
    insert: [PreparedStatement; 2],
    delete: [PreparedStatement; 2],
}

impl Probe {
    fn t(&self, table: usize) -> &'static str {
        ["t", "t_gc5"][table]
    }

    async fn delete_many(&self, table: usize, row: &str, columns: &[String], ts: i64) -> Res<()> {
        for chunk in columns.chunks(5_000) {
            let mut batch = Batch::new(BatchType::Unlogged);
            for _ in chunk {
                batch.append_statement(self.delete[table].clone());
            }
            let values: Vec<_> = chunk.iter().map(|c| (ts, row, c.as_str())).collect();
            let r = self.session.batch(&batch, values).await?;
            for w in r.warnings() {
                println!("    (delete batch warning: {w})");
            }
        }
        Ok(())
    }

    async fn write(&self, table: usize, row: &str, column: &str, ttl: i32, ts: i64) -> Res<()> {
        self.session
            .execute_unpaged(&self.insert[table], (row, column, &b"v"[..], ttl, ts))
            .await?;
        Ok(())
    }

    async fn write_many(&self, table: usize, row: &str, columns: &[String], ttl: i32) -> Res<()> {
        let ts = now_micros();
        for chunk in columns.chunks(5_000) {
            let mut batch = Batch::new(BatchType::Unlogged);
            for _ in chunk {
                batch.append_statement(self.insert[table].clone());
            }
            let values: Vec<_> = chunk
                .iter()
                .map(|c| (row, c.as_str(), &b"v"[..], ttl, ts))
                .collect();
            self.session.batch(&batch, values).await?;
        }
        Ok(())
    }

    /// Runs a SELECT (unprepared text, so the warning shows it) and prints
    /// the live rows, every warning and any error.
    async fn read(&self, what: &str, table: usize, row: &str, tail: &str) -> Res<()> {
        let text = format!(
            "SELECT column_name FROM {KS}.{} WHERE row_key = '{row}'{tail}",
            self.t(table)
        );
        let started = std::time::Instant::now();
        match self.session.query_unpaged(text.as_str(), ()).await {
            Ok(result) => {
                let warnings: Vec<String> = result.warnings().map(str::to_string).collect();
                let rows = result.into_rows_result()?;
                let live: Vec<String> = rows
                    .rows::<(String,)>()?
                    .map(|r| r.map(|r| r.0))
                    .collect::<Result<_, _>>()?;
                println!(
                    "{what}\n    {text}\n    live rows {} {:?}, {} warning(s), {:?}",
                    live.len(),
                    &live[..live.len().min(3)],
                    warnings.len(),
                    started.elapsed()
                );
                for w in warnings {
                    println!("    WARNING: {w}");
                }
            }
            Err(e) => {
                println!(
                    "{what}\n    {text}\n    ERROR after {:?}: {e}",
                    started.elapsed()
                );
                if let ExecutionError::LastAttemptError(RequestAttemptError::DbError(db, msg)) = &e
                {
                    println!("    DbError: {db:?}\n    message: {msg}");
                } else {
                    println!("    (not a DbError) {e:?}");
                }
            }
        }
        Ok(())
    }
}

fn cols(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i:06}")).collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Res<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9042".into());
    let session = SessionBuilder::new().known_node(&addr).build().await?;
    let version: (String,) = session
        .query_unpaged("SELECT release_version FROM system.local", ())
        .await?
        .into_rows_result()?
        .single_row()?;
    println!("release_version {} at {addr}", version.0);
    session
        .query_unpaged(format!("DROP KEYSPACE IF EXISTS {KS}"), ())
        .await?;
    session
        .query_unpaged(
            format!(
                "CREATE KEYSPACE {KS} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
            ),
            (),
        )
        .await?;
    for (t, grace) in [("t", 864_000), ("t_gc5", 5)] {
        session
            .query_unpaged(
                format!(
                    "CREATE TABLE {KS}.{t} (row_key text, column_name text, value blob, \
                     PRIMARY KEY ((row_key), column_name)) WITH CLUSTERING ORDER BY (column_name ASC) \
                     AND gc_grace_seconds = {grace}"
                ),
                (),
            )
            .await?;
    }
    let prep = |t: &'static str, insert: bool| {
        let text = if insert {
            format!(
                "INSERT INTO {KS}.{t} (row_key, column_name, value) VALUES (?, ?, ?) USING TTL ? AND TIMESTAMP ?"
            )
        } else {
            format!("DELETE FROM {KS}.{t} USING TIMESTAMP ? WHERE row_key = ? AND column_name = ?")
        };
        let session = &session;
        async move { session.prepare(text).await }
    };
    let insert = [prep("t", true).await?, prep("t_gc5", true).await?];
    let delete = [prep("t", false).await?, prep("t_gc5", false).await?];
    let p = Probe {
        session,
        insert,
        delete,
    };
    let ts = now_micros();
    let sections: Vec<String> = std::env::args().skip(2).collect();
    let run = |s: &str| sections.is_empty() || sections.iter().any(|x| x == s);
    if run("scan") {
        scan_section(&p, ts).await?;
    }
    if run("late") {
        late_delete_section(&p).await?;
    }
    if !run("main") {
        p.session
            .query_unpaged(format!("DROP KEYSPACE IF EXISTS {KS}"), ())
            .await?;
        return Ok(());
    }

    println!("\n== (a) thresholds are strict: 1000 tombstones, then 1001");
    p.delete_many(0, "a1", &cols("c", 0..1000), ts).await?;
    p.write(0, "a1", "z", 0, ts).await?;
    p.read(
        "1000 deleted cells then a live one, LIMIT 1",
        0,
        "a1",
        " LIMIT 1",
    )
    .await?;
    p.delete_many(0, "a1", &cols("c", 1000..1001), ts).await?;
    p.read(
        "1001 deleted cells then a live one, LIMIT 1",
        0,
        "a1",
        " LIMIT 1",
    )
    .await?;
    p.read("the same, no LIMIT", 0, "a1", "").await?;

    println!("\n== (a) a LIMIT stops at its last live row; a slice counts from its start");
    p.delete_many(0, "a2", &cols("b", 0..1500), ts).await?;
    p.write(0, "a2", "m", 0, ts).await?;
    p.delete_many(0, "a2", &cols("n", 0..1500), ts).await?;
    p.write(0, "a2", "o", 0, ts).await?;
    p.read(
        "1500 tombstones, live m, 1500 tombstones, live o; LIMIT 1",
        0,
        "a2",
        " LIMIT 1",
    )
    .await?;
    p.read("same row, LIMIT 2", 0, "a2", " LIMIT 2").await?;
    p.read("same row, no LIMIT", 0, "a2", "").await?;
    p.read(
        "slice from m, LIMIT 1",
        0,
        "a2",
        " AND column_name >= 'm' LIMIT 1",
    )
    .await?;
    p.read(
        "slice from m, LIMIT 2",
        0,
        "a2",
        " AND column_name >= 'm' LIMIT 2",
    )
    .await?;
    p.read(
        "slice from n000499 (1001 tombstones), LIMIT 1",
        0,
        "a2",
        " AND column_name >= 'n000499' LIMIT 1",
    )
    .await?;
    p.read(
        "slice from n000500 (1000 tombstones), LIMIT 1",
        0,
        "a2",
        " AND column_name >= 'n000500' LIMIT 1",
    )
    .await?;
    p.read(
        "a point read of a deleted column",
        0,
        "a2",
        " AND column_name = 'b000100'",
    )
    .await?;
    p.read(
        "IN over 1001 deleted columns? (range b000000..b001000 as a slice)",
        0,
        "a2",
        " AND column_name >= 'b000000' AND column_name <= 'b001000'",
    )
    .await?;
    p.read(
        "a row holding only tombstones (LIMIT 1 finds nothing)",
        0,
        "a2",
        " AND column_name < 'm' LIMIT 1",
    )
    .await?;

    println!("\n== (c) re-written tombstones and re-written live cells");
    p.delete_many(0, "c1", &cols("c", 0..1002), ts).await?;
    p.read("1002 deleted", 0, "c1", "").await?;
    p.write(0, "c1", "c000500", 0, ts + 1).await?;
    p.read(
        "1002 deleted, one re-written at a higher timestamp",
        0,
        "c1",
        "",
    )
    .await?;
    for i in 0..5 {
        p.write(0, "c1", "live", 0, ts + 10 + i).await?;
    }
    p.read("plus one live cell written 5 times", 0, "c1", "")
        .await?;
    p.write(0, "c1", "older", 0, ts + 100).await?;
    p.delete_many(0, "c1", &["older".to_string()], ts + 50)
        .await?;
    p.read(
        "plus a cell whose delete came with an older timestamp",
        0,
        "c1",
        "",
    )
    .await?;
    p.write(0, "c1", "c000600", 0, ts - 5).await?;
    p.read(
        "plus a write older than its tombstone (stays deleted)",
        0,
        "c1",
        "",
    )
    .await?;

    println!("\n== (b) expired TTL cells count like deleted ones");
    p.delete_many(0, "b1", &cols("c", 0..1000), ts).await?;
    p.write(0, "b1", "ttl", 1, now_micros()).await?;
    p.write(0, "b1", "zz", 0, now_micros()).await?;
    p.read("1000 deleted + 1 TTL cell still live", 0, "b1", "")
        .await?;
    p.write_many(0, "b2", &cols("e", 0..1001), 1).await?;
    p.write(0, "b2", "zz", 0, now_micros()).await?;
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    p.read("1000 deleted + 1 TTL cell expired", 0, "b1", "")
        .await?;
    p.read("1001 TTL cells expired (never deleted)", 0, "b2", "")
        .await?;

    println!("\n== (d) gc_grace_seconds = 5: are tombstones older than that counted?");
    let d_ts = now_micros();
    p.delete_many(1, "d1", &cols("c", 0..1001), d_ts).await?;
    p.write(1, "d1", "zz", 0, d_ts).await?;
    p.write_many(1, "d2", &cols("e", 0..1001), 3).await?;
    p.write(1, "d2", "zz", 0, d_ts).await?;
    p.write_many(1, "d3", &cols("e", 0..1001), 20).await?;
    p.write(1, "d3", "zz", 0, d_ts).await?;
    p.read("deleted just now", 1, "d1", "").await?;
    tokio::time::sleep(Duration::from_millis(4_200)).await;
    p.read(
        "t=4.2 s: 1001 cells written with TTL 3 (expired 1-2 s ago)",
        1,
        "d2",
        "",
    )
    .await?;
    tokio::time::sleep(Duration::from_millis(2_800)).await;
    p.read("t=7 s: deleted 7 s ago, gc_grace 5", 1, "d1", "")
        .await?;
    p.read(
        "t=7 s: TTL 3 expired at ~3 s: write+5 s passed, expiry+5 s not yet",
        1,
        "d2",
        "",
    )
    .await?;
    tokio::time::sleep(Duration::from_millis(20_000)).await;
    p.read(
        "t=27 s: 1001 cells written with TTL 20 (expired ~7 s ago; write+5 s long passed)",
        1,
        "d3",
        "",
    )
    .await?;

    println!("\n== (e) the failure threshold: 100000, then 100001");
    let started = std::time::Instant::now();
    p.delete_many(0, "f1", &cols("c", 0..100_000), ts).await?;
    println!(
        "    100000 deletes in batches of 5000: {:?}",
        started.elapsed()
    );
    p.write(0, "f1", "zz", 0, ts).await?;
    p.read("100000 tombstones", 0, "f1", " LIMIT 1").await?;
    p.delete_many(0, "f1", &cols("c", 100_000..100_001), ts)
        .await?;
    p.read("100001 tombstones", 0, "f1", " LIMIT 1").await?;
    p.read(
        "100001 tombstones, a slice past them",
        0,
        "f1",
        " AND column_name >= 'zz' LIMIT 1",
    )
    .await?;
    let prepared = p
        .session
        .prepare(format!(
            "SELECT column_name, value, writetime(value), ttl(value) FROM {KS}.t WHERE row_key = ? LIMIT ?"
        ))
        .await?;
    match p.session.execute_unpaged(&prepared, ("f1", 1i32)).await {
        Ok(_) => println!("prepared read of f1: ok?!"),
        Err(e) => println!("prepared read of f1 (lockshift's statement):\n    {e}\n    {e:?}"),
    }
    match p.session.execute_unpaged(&prepared, ("a1", 26i32)).await {
        Ok(r) => {
            for w in r.warnings() {
                println!("prepared read of a1, LIMIT 26 bound: WARNING: {w}");
            }
        }
        Err(e) => println!("prepared read of a1: {e}"),
    }

    p.session
        .query_unpaged(format!("DROP KEYSPACE IF EXISTS {KS}"), ())
        .await?;
    Ok(())
}

/// `SELECT DISTINCT row_key` (the key scan `migrate status` pages through)
/// over partitions holding tombstones: counted per page, across partitions?
async fn scan_section(p: &Probe, ts: i64) -> Res<()> {
    println!("\n== (g) key scans: SELECT DISTINCT row_key over partitions with tombstones");
    for (t, grace) in [("s1", 864_000), ("s2", 864_000)] {
        p.session
            .query_unpaged(
                format!(
                    "CREATE TABLE IF NOT EXISTS {KS}.{t} (row_key text, column_name text, value blob, \
                     PRIMARY KEY ((row_key), column_name)) WITH gc_grace_seconds = {grace}"
                ),
                (),
            )
            .await?;
    }
    let del = |t: &str| {
        format!("DELETE FROM {KS}.{t} USING TIMESTAMP ? WHERE row_key = ? AND column_name = ?")
    };
    let ins = |t: &str| {
        format!(
            "INSERT INTO {KS}.{t} (row_key, column_name, value) VALUES (?, ?, ?) USING TIMESTAMP ?"
        )
    };
    let (d1, d2, i2) = (
        p.session.prepare(del("s1")).await?,
        p.session.prepare(del("s2")).await?,
        p.session.prepare(ins("s2")).await?,
    );
    // s1: 1200 partitions, each two deleted cells and nothing live.
    // s2: 1200 partitions, each one deleted cell "a" before a live one "b".
    for i in 0..1200 {
        let row = format!("k{i:05}");
        for c in ["a", "b"] {
            p.session
                .execute_unpaged(&d1, (ts, row.as_str(), c))
                .await?;
        }
        p.session
            .execute_unpaged(&d2, (ts, row.as_str(), "a"))
            .await?;
        p.session
            .execute_unpaged(&i2, (row.as_str(), "b", &b"v"[..], ts))
            .await?;
    }
    for (t, page) in [("s1", 5000), ("s1", 400), ("s2", 5000), ("s2", 400)] {
        let mut scan = p
            .session
            .prepare(format!("SELECT DISTINCT row_key FROM {KS}.{t}"))
            .await?;
        scan.set_page_size(page);
        let (result, _) = p
            .session
            .execute_single_page(&scan, (), scylla::response::PagingState::start())
            .await?;
        let warnings: Vec<String> = result.warnings().map(str::to_string).collect();
        let keys = result.into_rows_result()?.rows_num();
        println!(
            "    {t}: first page of {page}: {keys} keys, {} warning(s)",
            warnings.len()
        );
        for w in warnings {
            println!("    WARNING: {w}");
        }
    }
    Ok(())
}

/// Sleeps until `secs` whole seconds plus `frac` after the second `base`.
async fn until(base: i64, secs: i64, frac: f64) {
    let target = (base + secs) * 1_000_000 + (frac * 1e6) as i64;
    let left = target - now_micros();
    if left > 0 {
        tokio::time::sleep(Duration::from_micros(left.unsigned_abs())).await;
    }
}

/// A delete with an older timestamp than the cell it meets loses; does
/// its tombstone still cost reads once the newer cell is gone? Aligned to
/// whole seconds so the answer does not depend on when it runs.
async fn late_delete_section(p: &Probe) -> Res<()> {
    println!("\n== (h) a losing delete, after the newer cell expired and was purged (gc_grace 5)");
    let columns = cols("c", 0..1001);
    // Start 0.1 s into a second s0: the cells expire at s0 + 2.
    let s0 = now_micros() / 1_000_000 + 1;
    until(s0, 0, 0.1).await;
    let ts = now_micros();
    p.write_many(1, "h1", &columns, 2).await?;
    p.write(1, "h1", "zz", 0, ts).await?;
    // The control: the same cells, never deleted.
    p.write_many(1, "h0", &columns, 2).await?;
    p.write(1, "h0", "zz", 0, ts).await?;
    until(s0, 3, 0.1).await;
    p.read("s0+3.1: 1001 cells expired at s0+2", 1, "h1", "")
        .await?;
    // Deleted at s0 + 3.1 (local deletion time s0 + 3), with a timestamp
    // older than the (expired) cells'.
    p.delete_many(1, "h1", &columns, ts - 1_000_000).await?;
    p.read("s0+3.1: after deletes older than the cells", 1, "h1", "")
        .await?;
    until(s0, 8, 0.5).await;
    p.read(
        "s0+8.5: the cells purgeable (s0+2 < s0+8-5), the deletes not (s0+3 < s0+3 is false)",
        1,
        "h1",
        "",
    )
    .await?;
    p.read("s0+8.5: the control row, never deleted", 1, "h0", "")
        .await?;
    until(s0, 9, 0.5).await;
    p.read(
        "s0+9.5: the deletes purgeable too (s0+3 < s0+4)",
        1,
        "h1",
        "",
    )
    .await?;
    Ok(())
}
