//! What tombstones cost a read, measured on Cassandra 4.1.1, and the model
//! every backend follows.
//!
//! A delete leaves a tombstone; a TTL cell, once expired, is one too.
//! Cassandra keeps them for the table's `gc_grace_seconds`
//! ([`crate::schema::TableOptions`], 10 days by default) and every read
//! walks past the tombstones in its slice. Above `tombstone_warn_threshold`
//! (1 000) the response carries a warning; above
//! `tombstone_failure_threshold` (100 000) the read fails. A row whose
//! column names never repeat — one per acquisition — therefore gets slower
//! with every use and then unreadable. The embedded store
//! ([`crate::MemoryStore`]) and the local CQL endpoint keep this cost, so
//! tests see it; [`Store::read_observed`](crate::Store::read_observed)
//! reports it ([`ReadOutcome`](crate::ReadOutcome)).
//!
//! # Measured on Cassandra 4.1.1
//!
//! One node, `SimpleStrategy` RF 1, default `cassandra.yaml`
//! (`tombstone_warn_threshold: 1000`, `tombstone_failure_threshold:
//! 100000`), tables of lockshift's shape (`row_key text, column_name text,
//! value blob, PRIMARY KEY ((row_key), column_name)`), written with the CQL
//! backend's statements (a single-partition `UNLOGGED` batch of `DELETE …
//! USING TIMESTAMP ? WHERE row_key = ? AND column_name = ?` per 5 000
//! columns) through the `scylla` 1.9 driver, which speaks **protocol v4
//! only** (its frames carry version 4; Cassandra 4.1 would offer v5).
//! Reproduce with `cargo run -p lockshift-store --example tombstone_probe
//! -- HOST:PORT`.
//!
//! **(a) A read counts the tombstones in its slice until it has its
//! limit of live rows, and stops there.** One tombstone per deleted
//! column (a row deletion), and one per expired TTL row.
//!
//! | row (clustering order) | read | live rows, tombstones counted |
//! |---|---|---|
//! | 1 000 deleted, 1 live | `LIMIT 1` | 1, 1 000 — no warning: the thresholds are strict (`> 1000`) |
//! | 1 001 deleted, 1 live | `LIMIT 1`, and no `LIMIT` | 1, 1 001 — warning |
//! | 1 500 deleted `b…`, live `m`, 1 500 deleted `n…`, live `o` | `LIMIT 1` | 1, 1 500 (stops at `m`) |
//! | the same | `LIMIT 2`, and no `LIMIT` | 2, 3 000 |
//! | the same | `column_name >= 'm' LIMIT 1` | 1, 0 — no warning |
//! | the same | `column_name >= 'm' LIMIT 2` | 2, 1 500 |
//! | the same | `column_name >= 'n000499' LIMIT 1` | 1, 1 001 (only those at or after the start) |
//! | the same | `column_name >= 'n000500' LIMIT 1` | 1, 1 000 — no warning |
//! | the same | `column_name < 'm' LIMIT 1` (nothing live) | 0, 1 500: a slice without enough live rows passes every tombstone in it |
//! | the same | `column_name = 'b000100'` (a point read) | 0, no warning: it touches its one column only |
//!
//! **(b) Expired TTL cells count like deleted ones**: 1 000 deleted + 1
//! cell written with `USING TTL 1`, read 2.2 s later: 1 001; 1 001 cells
//! with TTL 1 and no delete at all: 1 001.
//!
//! **(c) Only the merged result counts.** 1 002 deleted, then one of them
//! re-written with a higher timestamp: 1 001 (and the cell is live). A
//! live cell re-written 5 times: no tombstone. A cell written at T + 100
//! and deleted at T + 50 (the delete loses): live, no tombstone. A write
//! older than the tombstone it meets: still one tombstone. **But a delete
//! that loses is kept**: in a table with `gc_grace_seconds = 5`, 1 001
//! cells written with TTL 2 s at second s0 + 0.1, deleted at s0 + 3.1 with
//! a timestamp 1 s older than theirs: 1 001 counted at s0 + 3.1 (the
//! expired cells), still 1 001 at s0 + 8.5 — when a control row of the
//! same cells, never deleted, counts none (expiry s0 + 2 < s0 + 8 − 5) —
//! and none at s0 + 9.5, when the deletes' own local deletion time
//! (s0 + 3) is past gc grace. Cassandra keeps a row deletion beside the
//! newer data it lost to.
//!
//! **(d) Tombstones older than `gc_grace_seconds` no longer count, compacted
//! or not** — Cassandra drops purgeable tombstones from every read before
//! counting (`ReadCommand` applies its purge function ahead of the
//! tombstone counter). A table `WITH gc_grace_seconds = 5`, nothing flushed
//! or compacted: 1 001 rows deleted → 1 001 counted at once, **none 7 s
//! later**. An expired TTL row counts from its expiry, not its write: 1 001
//! rows with TTL 3 s, read 4.2 s after the write: 1 001; 7 s after (write +
//! 5 s passed, expiry + 5 s not yet): **still 1 001**; rows with TTL 20 s
//! read 27 s after the write (expiry + 5 s passed): none. Cassandra keeps
//! times in whole seconds and purges when `local deletion time <
//! now − gc_grace_seconds`: a delete's local deletion time is the
//! coordinator's second when it was applied, an expiring cell's is its
//! expiry ([`reconcile::ttl_deadline`](crate::reconcile::ttl_deadline)).
//!
//! **(e) The warning.** The response's warning flag is set and its warning
//! list holds, verbatim (the driver hands them back in
//! `QueryResult::warnings()`, and logs each itself at `warn`):
//!
//! ```text
//! Read 1 live rows and 1001 tombstone cells for query SELECT * FROM lockshift_tombstone_probe.t WHERE row_key = 'a1' LIMIT 1 ALLOW FILTERING; token 5693669818594506317 (see tombstone_warn_threshold)
//! Read 2 live rows and 1500 tombstone cells for query SELECT * FROM lockshift_tombstone_probe.t WHERE row_key = 'a2' AND column_name >= 'm' LIMIT 2 ALLOW FILTERING; token 5060052373555595560 (see tombstone_warn_threshold)
//! Read 1 live rows and 1001 tombstone cells for query SELECT value FROM lockshift_tombstone_probe.t WHERE row_key = 'a1' LIMIT 26 ALLOW FILTERING; token 5693669818594506317 (see tombstone_warn_threshold)
//! ```
//!
//! The query is Cassandra's own rendering of the read (`SELECT *` when
//! only key columns are selected, `SELECT value` for lockshift's
//! `SELECT column_name, value, writetime(value), ttl(value)`; no `LIMIT`
//! when none was given — lockshift binds `2147483647`, Cassandra's "no
//! limit", for a whole-row read), cut at 512 characters; the token is the
//! partition's Murmur3 token. [`warning_text`] and [`read_cql`] build it,
//! [`parse_warning`] reads it back.
//!
//! **(f) The failure.** 100 000 tombstones: a warning. 100 001: the read
//! fails, after 0.35 s, with an `ERROR` frame `READ_FAILURE` (0x1300); in
//! protocol v4 its body is consistency, received, block-for, number of
//! failures and data-present — the per-replica reason codes exist only
//! in v5 — so the reason is only in the message. The driver returns
//! `ExecutionError::LastAttemptError(RequestAttemptError::DbError(DbError::ReadFailure
//! { consistency: LocalQuorum, received: 0, required: 1, numfailures: 1,
//! data_present: false }, message))` (the consistency is the request's)
//! with the message
//!
//! ```text
//! Operation failed - received 0 responses and 1 failures: READ_TOO_MANY_TOMBSTONES from /127.0.0.3:7000
//! ```
//!
//! (`/` + the replica's address + its storage port). The CQL backend maps
//! it to [`StoreErrorKind::TooManyTombstones`](crate::StoreErrorKind::TooManyTombstones),
//! the kind the embedded store fails with. A slice starting after the
//! 100 001 tombstones reads fine (0 counted). Writing the 100 000
//! tombstones took 3.0 s (20 batches of 5 000).
//!
//! **(g) Key scans count across partitions, per page.** `SELECT DISTINCT
//! row_key` (the scan behind [`Store::scan_keys`](crate::Store::scan_keys))
//! passes, in each partition, the tombstones before its first live row, and
//! one page counts all partitions it visits: 1 200 partitions each holding
//! 2 deleted cells and nothing live → one page (of 5 000, and of 400)
//! returns no key and warns `Read 0 live rows and 2400 tombstone cells for
//! query SELECT * FROM lockshift_tombstone_probe.s1 LIMIT 5000 PER
//! PARTITION LIMIT 1 ALLOW FILTERING; token 9212770567912642970 (see
//! tombstone_warn_threshold)` (the token of the last partition read);
//! 1 200 partitions each with one deleted cell before a live one: 1 200
//! tombstones for a page of 5 000, 400 (no warning) for a page of 400. So
//! a table full of rows whose cells were all deleted fails *every* key
//! scan once 100 000 of their tombstones are younger than gc grace.
//!
//! # Invariants
//!
//! Every backend that serves cells follows the measurements:
//!
//! 1. A dead version — a tombstone, or a live version past its TTL —
//!    is kept until it is purgeable: the whole second of its local deletion
//!    time (the store clock when the delete was applied; for an expired cell
//!    its expiry) plus the table's gc grace has passed
//!    ([`reconcile::purge_time`](crate::reconcile::purge_time)). Until then
//!    it shadows older writes *and* costs reads; after, it costs nothing and
//!    is forgotten (lazily).
//! 2. A read counts, in column order from its start, every dead
//!    version that is not purgeable, until it has collected its limit of
//!    live cells; the count never includes what lies after the last live
//!    cell returned.
//! 3. A count above the warn threshold adds Cassandra's warning
//!    ([`warning_text`]) to the answer; a count above the failure threshold
//!    aborts the read with
//!    [`StoreErrorKind::TooManyTombstones`](crate::StoreErrorKind::TooManyTombstones)
//!    (not retryable: the same read fails until the tombstones are purged).
//! 4. A key scan page counts like a read of every partition it
//!    visits, each up to its first live cell.

use std::fmt;

use scylla::routing::partitioner::{Murmur3Partitioner, Partitioner};

use crate::cell::{RowQuery, Table};

/// Cassandra's default `tombstone_warn_threshold`.
pub const DEFAULT_WARN_THRESHOLD: u64 = 1_000;

/// Cassandra's default `tombstone_failure_threshold`.
pub const DEFAULT_FAILURE_THRESHOLD: u64 = 100_000;

/// Cassandra renders the query into its warning cut at this many characters
/// (`%1.512s`).
pub const WARNING_QUERY_CHARS: usize = 512;

/// When a read's tombstones make the answer carry a warning, and when they
/// make it fail. Both are strict: a read passing exactly `warn` tombstones
/// gets no warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TombstoneThresholds {
    /// Above this many, the answer carries a warning
    /// (`tombstone_warn_threshold`).
    pub warn: u64,
    /// Above this many, the read fails (`tombstone_failure_threshold`).
    pub fail: u64,
}

impl Default for TombstoneThresholds {
    fn default() -> Self {
        TombstoneThresholds {
            warn: DEFAULT_WARN_THRESHOLD,
            fail: DEFAULT_FAILURE_THRESHOLD,
        }
    }
}

/// The partition token Cassandra's `Murmur3Partitioner` gives `row` (the
/// `token …` of a warning), computed by the driver's own partitioner.
pub fn token(row: &str) -> i64 {
    Murmur3Partitioner.hash_one(row.as_bytes()).value()
}

/// A CQL `text` literal: single-quoted, quotes doubled (how Cassandra
/// renders a text value into a query string).
pub fn cql_text_literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// Cassandra's rendering of lockshift's read of `row` (the query of a
/// tombstone warning): `SELECT value FROM <keyspace>.<table> WHERE row_key =
/// '<row>' [AND column_name >= '<start>'] [LIMIT <n>] ALLOW FILTERING`.
pub fn read_cql(keyspace: &str, table: Table, row: &str, query: &RowQuery) -> String {
    let mut out = format!(
        "SELECT value FROM {keyspace}.{table} WHERE row_key = {}",
        cql_text_literal(row)
    );
    if let Some(start) = &query.start_column {
        out.push_str(" AND column_name >= ");
        out.push_str(&cql_text_literal(start));
    }
    // Cassandra prints no LIMIT for its "no limit", Integer.MAX_VALUE —
    // what the CQL backend binds for a whole-row read.
    if let Some(limit) = query.limit.filter(|n| n.get() < i32::MAX as u32) {
        out.push_str(&format!(" LIMIT {limit}"));
    }
    out.push_str(" ALLOW FILTERING");
    out
}

/// Cassandra's rendering of a key scan page (`SELECT DISTINCT row_key`,
/// `page_size` keys): `SELECT * FROM <keyspace>.<table> LIMIT <page_size>
/// PER PARTITION LIMIT 1 ALLOW FILTERING`.
pub fn scan_cql(keyspace: &str, table: Table, page_size: u32) -> String {
    format!(
        "SELECT * FROM {keyspace}.{table} LIMIT {page_size} PER PARTITION LIMIT 1 ALLOW FILTERING"
    )
}

/// The warning Cassandra 4.1 adds to a response whose read passed more than
/// `tombstone_warn_threshold` tombstones, character for character: `query`
/// is cut at [`WARNING_QUERY_CHARS`] characters, `token` is the partition's.
///
/// ```
/// use lockshift_store::tombstones::warning_text;
///
/// assert_eq!(
///     warning_text(1, 1001, "SELECT * FROM ks.t WHERE row_key = 'a1' LIMIT 1 ALLOW FILTERING", 5693669818594506317),
///     "Read 1 live rows and 1001 tombstone cells for query SELECT * FROM ks.t WHERE row_key = 'a1' \
///      LIMIT 1 ALLOW FILTERING; token 5693669818594506317 (see tombstone_warn_threshold)"
/// );
/// ```
pub fn warning_text(live_rows: u64, tombstones: u64, query: &str, token: i64) -> String {
    format!(
        "Read {live_rows} live rows and {tombstones} tombstone cells for query {}; token {token} \
         (see tombstone_warn_threshold)",
        cut_java_chars(query, WARNING_QUERY_CHARS)
    )
}

/// `s` cut to at most `max` UTF-16 units, as Java's `%1.512s` counts, never
/// inside a character.
fn cut_java_chars(s: &str, max: usize) -> &str {
    let mut units = 0;
    for (i, c) in s.char_indices() {
        units += c.len_utf16();
        if units > max {
            return &s[..i];
        }
    }
    s
}

/// What a tombstone warning says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TombstoneWarning {
    /// Live rows the read returned.
    pub live_rows: u64,
    /// Tombstones it passed.
    pub tombstones: u64,
}

/// Reads Cassandra's tombstone warning ([`warning_text`]); `None` for any
/// other warning.
pub fn parse_warning(text: &str) -> Option<TombstoneWarning> {
    let rest = text.strip_prefix("Read ")?;
    let (live, rest) = rest.split_once(" live rows and ")?;
    let (tombstones, rest) = rest.split_once(" tombstone cells for query ")?;
    if !rest.ends_with("(see tombstone_warn_threshold)") {
        return None;
    }
    Some(TombstoneWarning {
        live_rows: live.parse().ok()?,
        tombstones: tombstones.parse().ok()?,
    })
}

/// The reason Cassandra names in the message of a read failed for too many
/// tombstones (`RequestFailureReason.READ_TOO_MANY_TOMBSTONES`).
pub const READ_TOO_MANY_TOMBSTONES: &str = "READ_TOO_MANY_TOMBSTONES";

/// Cassandra 4.1's message for a single-replica read that failed for too
/// many tombstones; `replica` is the node's address and storage port
/// (`127.0.0.3:7000`).
pub fn failure_message(replica: impl fmt::Display) -> String {
    format!(
        "Operation failed - received 0 responses and 1 failures: {READ_TOO_MANY_TOMBSTONES} from /{replica}"
    )
}

/// A row key or column shortened for a log line or an error message: at
/// most 64 characters, an ellipsis marking the cut.
pub fn shorten(value: &str) -> String {
    const MAX: usize = 64;
    match value.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &value[..i]),
        None => value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema;

    /// The warnings measured on Cassandra 4.1.1 (module docs), rebuilt.
    #[test]
    fn warning_text_is_cassandras() {
        let measured = "Read 1 live rows and 1001 tombstone cells for query SELECT value FROM \
             lockshift_tombstone_probe.t WHERE row_key = 'a1' LIMIT 26 ALLOW FILTERING; token \
             5693669818594506317 (see tombstone_warn_threshold)";
        let query = read_cql(
            "lockshift_tombstone_probe",
            Table::new("t"),
            "a1",
            &RowQuery::first(26),
        );
        assert_eq!(warning_text(1, 1001, &query, token("a1")), measured);
        let measured = "Read 2 live rows and 1500 tombstone cells for query SELECT value FROM \
             lockshift_tombstone_probe.t WHERE row_key = 'a2' AND column_name >= 'm' LIMIT 2 ALLOW \
             FILTERING; token 5060052373555595560 (see tombstone_warn_threshold)";
        let query = read_cql(
            "lockshift_tombstone_probe",
            Table::new("t"),
            "a2",
            &RowQuery::first(2).starting_at("m"),
        );
        assert_eq!(warning_text(2, 1500, &query, token("a2")), measured);
        assert_eq!(token("c1"), -7_265_803_277_487_577_130);
        assert_eq!(
            parse_warning(measured),
            Some(TombstoneWarning {
                live_rows: 2,
                tombstones: 1500
            })
        );
    }

    #[test]
    fn whole_row_reads_print_no_limit_and_quotes_are_doubled() {
        let q = read_cql("ks", schema::MAIN, "it's", &RowQuery::all());
        assert_eq!(
            q,
            "SELECT value FROM ks.main WHERE row_key = 'it''s' ALLOW FILTERING"
        );
        let q = read_cql("ks", schema::MAIN, "r", &RowQuery::first(i32::MAX as u32));
        assert!(!q.contains("LIMIT"), "{q}");
        assert_eq!(
            scan_cql("lockshift_tombstone_probe", Table::new("s1"), 5000),
            "SELECT * FROM lockshift_tombstone_probe.s1 LIMIT 5000 PER PARTITION LIMIT 1 ALLOW FILTERING"
        );
    }

    #[test]
    fn long_queries_are_cut_at_512_java_chars() {
        let row = "é".repeat(600);
        let query = read_cql("ks", schema::MAIN, &row, &RowQuery::first(1));
        let text = warning_text(0, 2000, &query, 1);
        let cut = text
            .strip_prefix("Read 0 live rows and 2000 tombstone cells for query ")
            .and_then(|t| t.strip_suffix("; token 1 (see tombstone_warn_threshold)"))
            .unwrap();
        assert_eq!(cut.encode_utf16().count(), 512);
        assert_eq!(parse_warning(&text).unwrap().tombstones, 2000);
        let astral = "𝄞".repeat(300); // 2 UTF-16 units each: never split
        assert_eq!(cut_java_chars(&astral, 5).chars().count(), 2);
    }

    #[test]
    fn other_warnings_do_not_parse() {
        for w in [
            "Unlogged batch covering 3 partitions detected",
            "Read x live rows and 5 tombstone cells for query q; token 1 (see tombstone_warn_threshold)",
            "Read 1 live rows and 5 tombstone cells for query q",
        ] {
            assert_eq!(parse_warning(w), None, "{w}");
        }
    }

    #[test]
    fn failure_message_and_shortening() {
        assert_eq!(
            failure_message("127.0.0.3:7000"),
            "Operation failed - received 0 responses and 1 failures: READ_TOO_MANY_TOMBSTONES from /127.0.0.3:7000"
        );
        assert_eq!(shorten("short"), "short");
        let long = "x".repeat(100);
        assert_eq!(shorten(&long).chars().count(), 65);
    }
}
