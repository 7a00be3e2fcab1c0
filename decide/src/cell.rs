//! The vocabulary of the cell model: timestamps, TTLs, tables, cells and the
//! shapes of reads and scans, and [`InvalidArgument`] for a value the model
//! cannot represent.
//!
//! Every backend of the store speaks these types; the decisions of the
//! other modules of this crate read them.

use std::fmt;
use std::num::NonZeroU32;
use std::time::Duration;

use serde::{Deserialize, Serialize};

// ===== Timestamp =====

/// A write timestamp or a point in time: microseconds since the Unix epoch.
///
/// Cassandra reconciles versions of a cell by this number alone (higher wins),
/// so lockshift always chooses it itself (`USING TIMESTAMP`) rather than leaving
/// it to a driver or a coordinator whose clock it cannot see.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// A timestamp from microseconds since the epoch.
    pub const fn from_micros(micros: i64) -> Self {
        Timestamp(micros)
    }

    /// Microseconds since the epoch.
    pub const fn as_micros(self) -> i64 {
        self.0
    }

    /// This timestamp moved forward by `d`, saturating at the largest value.
    pub fn saturating_add(self, d: Duration) -> Self {
        Timestamp(self.0.saturating_add(duration_micros(d)))
    }

    /// This timestamp moved back by `d`, saturating at the smallest value.
    pub fn saturating_sub(self, d: Duration) -> Self {
        Timestamp(self.0.saturating_sub(duration_micros(d)))
    }

    /// This timestamp shifted by a signed number of microseconds.
    pub fn offset_micros(self, delta: i64) -> Self {
        Timestamp(self.0.saturating_add(delta))
    }

    /// How long after `earlier` this is; zero if it is not later.
    pub fn duration_since(self, earlier: Timestamp) -> Duration {
        let micros = self.0.saturating_sub(earlier.0);
        Duration::from_micros(u64::try_from(micros).unwrap_or(0))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}µs", self.0)
    }
}

/// Microseconds in `d`, saturating at `i64::MAX`: the one conversion from a
/// [`Duration`] to the microseconds of a [`Timestamp`], shared by the
/// timestamp arithmetic here and the store's clocks and fault injection.
pub fn duration_micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

// ===== Ttl =====

/// A cell's time to live, in whole seconds as Cassandra stores it.
///
/// Cassandra accepts 1 s to 20 years; a TTL of zero means "no TTL" in CQL,
/// which this type cannot express — use `None` for that.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ttl(NonZeroU32);

impl Ttl {
    /// The longest TTL Cassandra accepts: 20 years.
    pub const MAX_SECS: u32 = 630_720_000;

    /// A TTL of `secs` seconds.
    ///
    /// # Errors
    /// [`InvalidArgument`] if `secs` is zero or above [`Ttl::MAX_SECS`].
    pub fn from_secs(secs: u32) -> Result<Self, InvalidArgument> {
        match NonZeroU32::new(secs) {
            Some(n) if secs <= Self::MAX_SECS => Ok(Ttl(n)),
            _ => Err(InvalidArgument::new(format!(
                "a TTL must be between 1 and {} seconds, got {secs}",
                Self::MAX_SECS
            ))),
        }
    }

    /// A TTL of `secs` seconds, brought within 1 s and [`Ttl::MAX_SECS`].
    pub fn from_secs_clamped(secs: u64) -> Self {
        let secs = secs.clamp(1, u64::from(Self::MAX_SECS));
        // Within 1..=MAX_SECS, so the conversion cannot fail and the sum
        // is `secs`.
        Ttl(NonZeroU32::MIN.saturating_add(u32::try_from(secs - 1).unwrap_or(0)))
    }

    /// The TTL covering `d`, rounded up to whole seconds (a lease must never be
    /// shorter than asked).
    ///
    /// # Errors
    /// [`InvalidArgument`] if `d` is zero or longer than 20 years.
    pub fn from_duration(d: Duration) -> Result<Self, InvalidArgument> {
        let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        let secs = u32::try_from(secs)
            .map_err(|_| InvalidArgument::new(format!("a TTL of {d:?} exceeds 20 years")))?;
        Self::from_secs(secs)
    }

    /// Whole seconds.
    pub fn as_secs(self) -> u32 {
        self.0.get()
    }

    /// As a [`Duration`].
    pub fn as_duration(self) -> Duration {
        Duration::from_secs(u64::from(self.0.get()))
    }
}

impl fmt::Display for Ttl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", self.0)
    }
}

// ===== Table =====

/// One of lockshift's tables (a column family of `row_key`, `column_name`, `value`).
///
/// The set is closed: the constants in [`crate::schema`] are every table a
/// backend creates, so a typo is a compile error rather than a runtime
/// "unconfigured table".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Table(&'static str);

impl Table {
    /// A table named `name`: lowercase ASCII letters, digits and `_`, starting
    /// with a letter, at most 48 characters (Cassandra's limit).
    ///
    /// # Panics
    /// On an invalid name — table names are compile-time constants, so this
    /// is a programming error, and in a `const` it fails the build.
    pub const fn new(name: &'static str) -> Self {
        let bytes = name.as_bytes();
        assert!(
            !bytes.is_empty() && bytes.len() <= 48,
            "table name length must be 1..=48"
        );
        assert!(
            bytes[0].is_ascii_lowercase(),
            "table name must start with a lowercase letter"
        );
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            assert!(
                b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_',
                "table name may hold only a-z, 0-9 and _"
            );
            i += 1;
        }
        Table(name)
    }

    /// The table's CQL name.
    pub const fn name(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

// ===== Keys =====

/// The longest row key or column name Cassandra stores (an unsigned 16-bit length).
pub const MAX_KEY_BYTES: usize = 65_535;

/// Checks a row key or column name against the contract: non-empty, at most
/// [`MAX_KEY_BYTES`]. `what` names it in the message ("row key", "column").
pub fn check_key(what: &str, key: &str) -> Result<(), InvalidArgument> {
    if key.is_empty() {
        return Err(InvalidArgument::new(format!("{what} must not be empty")));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(InvalidArgument::new(format!(
            "{what} is {} bytes, the limit is {MAX_KEY_BYTES}",
            key.len()
        )));
    }
    Ok(())
}

// ===== Cells =====

/// One cell to write: a column of the row and its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CellWrite {
    /// The column name (clustering key); rows order cells by its UTF-8 bytes.
    pub column: String,
    /// The value bytes.
    pub value: Vec<u8>,
}

impl CellWrite {
    /// A cell for `column` holding `value`.
    pub fn new(column: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        CellWrite {
            column: column.into(),
            value: value.into(),
        }
    }
}

/// How a write is stamped: every cell of one write shares both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteOptions {
    /// The write timestamp (`USING TIMESTAMP`).
    pub timestamp: Timestamp,
    /// The time to live; `None` for a cell that never expires.
    pub ttl: Option<Ttl>,
}

impl WriteOptions {
    /// A write at `timestamp` that never expires.
    pub fn at(timestamp: Timestamp) -> Self {
        WriteOptions {
            timestamp,
            ttl: None,
        }
    }

    /// This write with a TTL.
    pub fn with_ttl(mut self, ttl: Ttl) -> Self {
        self.ttl = Some(ttl);
        self
    }
}

/// A live cell as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    /// The column name.
    pub column: String,
    /// The value bytes.
    pub value: Vec<u8>,
    /// `writetime()`: the timestamp of the version that won reconciliation.
    pub writetime: Timestamp,
    /// `ttl()`: whole seconds left before the cell expires, `None` if it never does.
    pub ttl: Option<Duration>,
}

/// Which cells of a row to read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowQuery {
    /// Read at most this many live cells; `None` reads the whole row.
    pub limit: Option<NonZeroU32>,
    /// Start at this column (inclusive); `None` starts at the first.
    pub start_column: Option<String>,
}

impl RowQuery {
    /// The whole row.
    pub fn all() -> Self {
        RowQuery::default()
    }

    /// The first `n` live cells; `n = 0` is treated as 1 (Cassandra rejects `LIMIT 0`).
    pub fn first(n: u32) -> Self {
        RowQuery {
            limit: Some(NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)),
            start_column: None,
        }
    }

    /// This query starting at `column` (inclusive).
    pub fn starting_at(mut self, column: impl Into<String>) -> Self {
        self.start_column = Some(column.into());
        self
    }
}

/// An opaque position in a scan of row keys, handed back to continue it.
///
/// Each backend encodes its own position in it (the embedded backend the last
/// key; the CQL backend the driver's paging state) through
/// [`PageCursor::from_bytes`], so a cursor is only valid with the backend that
/// made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageCursor(Vec<u8>);

impl PageCursor {
    /// The cursor's bytes, to persist a scan position.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// A cursor from bytes previously returned by [`PageCursor::as_bytes`].
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        PageCursor(bytes)
    }
}

/// One page of a row-key scan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyPage {
    /// Row keys that held at least one live cell when scanned.
    pub keys: Vec<String>,
    /// Where to continue; `None` when the scan is complete.
    pub next: Option<PageCursor>,
}

// ===== Token ranges and cell scans =====

/// A range of partition tokens, `(start, end]`, as Cassandra's
/// `Murmur3Partitioner` orders partitions: a scan of cells walks its rows
/// in token order. [`TokenRange::FULL`] is the whole ring; a census splits
/// it ([`TokenRange::split`]) to read the parts at once, as bulk readers
/// of Cassandra tables do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenRange {
    /// Tokens above this one (exclusive).
    pub start: i64,
    /// Up to this one (inclusive).
    pub end: i64,
}

impl TokenRange {
    /// The whole ring: every token, `(i64::MIN, i64::MAX]` (`i64::MIN` is no
    /// token of Murmur3's).
    pub const FULL: TokenRange = TokenRange {
        start: i64::MIN,
        end: i64::MAX,
    };

    /// Whether `token` falls in the range.
    pub fn contains(&self, token: i64) -> bool {
        token > self.start && token <= self.end
    }

    /// The range cut into `parts` consecutive ranges of about equal width
    /// (at least one; a range narrower than `parts` tokens is cut into as
    /// many as it has).
    pub fn split(&self, parts: u32) -> Vec<TokenRange> {
        let width = i128::from(self.end) - i128::from(self.start);
        if width <= 0 {
            return Vec::new();
        }
        let parts = i128::from(parts.max(1)).min(width);
        let mut out = Vec::new();
        let mut start = self.start;
        for i in 1..=parts {
            let end = if i == parts {
                self.end
            } else {
                // Within (start, self.end]: the conversion cannot fail.
                i64::try_from(i128::from(self.start) + width * i / parts).unwrap_or(self.end)
            };
            out.push(TokenRange { start, end });
            start = end;
        }
        out
    }
}

impl fmt::Display for TokenRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {}]", self.start, self.end)
    }
}

/// The live cells of one row as a scan of cells found them, in column
/// order. A row may span two pages: the second page's first row then has
/// the same key as the first page's last.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowCells {
    /// The row key.
    pub key: String,
    /// Its partition token.
    pub token: i64,
    /// Its live cells (this page's part of them).
    pub cells: Vec<Cell>,
}

/// One page of a scan of cells: rows in token order, each with its live
/// cells, and what the page cost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CellPage {
    /// The rows, in token order.
    pub rows: Vec<RowCells>,
    /// Where to continue; `None` when the range is done.
    pub next: Option<PageCursor>,
    /// How many tombstones the page passed, when the backend knows (as a
    /// read's, `ReadOutcome::tombstones`).
    pub tombstones: Option<u64>,
    /// The warnings the server added to its answer, verbatim.
    pub warnings: Vec<String>,
}

impl CellPage {
    /// How many cells the page holds.
    pub fn cells(&self) -> usize {
        self.rows.iter().map(|r| r.cells.len()).sum()
    }
}

/// The kinds of store operation, for errors, fault injection and counting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// Writing cells.
    Write,
    /// Deleting cells.
    Delete,
    /// Reading a row.
    Read,
    /// Scanning row keys.
    Scan,
    /// A conditional write of one cell, refused under a smaller fencing
    /// token than the one recorded (`Store::write_fenced_via`): one Paxos
    /// round or two, not one plain write.
    FencedWrite,
}

impl OpKind {
    /// The four unconditional kinds, in a fixed order: what every lock
    /// algorithm sends, and what a node's metrics keep one counter each for.
    /// [`OpKind::FencedWrite`] is not among them: only a service's own
    /// fenced writes send it ([`OpKind::EVERY`] lists all five).
    pub const ALL: [OpKind; 4] = [OpKind::Write, OpKind::Delete, OpKind::Read, OpKind::Scan];

    /// Every kind, the unconditional ones first ([`OpKind::ALL`]) and then
    /// [`OpKind::FencedWrite`].
    pub const EVERY: [OpKind; 5] = [
        OpKind::Write,
        OpKind::Delete,
        OpKind::Read,
        OpKind::Scan,
        OpKind::FencedWrite,
    ];

    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Write => "write",
            OpKind::Delete => "delete",
            OpKind::Read => "read",
            OpKind::Scan => "scan",
            OpKind::FencedWrite => "fenced_write",
        }
    }

    /// Whether the operation changes data.
    pub fn is_mutation(self) -> bool {
        matches!(self, OpKind::Write | OpKind::Delete | OpKind::FencedWrite)
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// ===== InvalidArgument =====

/// A caller passed a value the store cannot represent (a TTL out of range, an
/// empty row key).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid argument: {0}")]
pub struct InvalidArgument(String);

impl InvalidArgument {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        InvalidArgument(message.into())
    }

    /// What is wrong with the argument, without the `invalid argument: `
    /// prefix of its `Display` (the store puts it in the message of a
    /// `StoreError` of kind `Invalid`).
    pub fn message(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn token_ranges_split_into_consecutive_parts_covering_the_range() {
        use super::TokenRange;
        // (range, parts, how many)
        let cases = [
            (TokenRange::FULL, 1, 1),
            (TokenRange::FULL, 4, 4),
            (TokenRange::FULL, 1000, 1000),
            (TokenRange { start: 0, end: 3 }, 8, 3),
            (TokenRange { start: 5, end: 5 }, 2, 0),
        ];
        for (i, (range, parts, want)) in cases.into_iter().enumerate() {
            let split = range.split(parts);
            assert_eq!(split.len(), want, "case #{i}");
            if want == 0 {
                continue;
            }
            assert_eq!(split[0].start, range.start, "case #{i}");
            assert_eq!(split[split.len() - 1].end, range.end, "case #{i}");
            assert!(
                split
                    .windows(2)
                    .all(|w| w[0].end == w[1].start && w[0].start < w[0].end),
                "case #{i}: {split:?}"
            );
        }
        assert!(TokenRange::FULL.contains(i64::MAX) && !TokenRange::FULL.contains(i64::MIN));
    }

    use super::*;

    #[test]
    fn ttl_rounds_up_and_rejects_out_of_range() {
        assert_eq!(
            Ttl::from_duration(Duration::from_millis(1500))
                .unwrap()
                .as_secs(),
            2
        );
        assert_eq!(
            Ttl::from_duration(Duration::from_secs(60))
                .unwrap()
                .as_secs(),
            60
        );
        assert!(Ttl::from_secs(0).is_err());
        assert!(Ttl::from_duration(Duration::ZERO).is_err());
        assert!(Ttl::from_secs(Ttl::MAX_SECS + 1).is_err());
        assert!(Ttl::from_secs(Ttl::MAX_SECS).is_ok());
    }

    #[test]
    fn timestamp_arithmetic_saturates() {
        let t = Timestamp::from_micros(i64::MAX - 1);
        assert_eq!(
            t.saturating_add(Duration::from_secs(1)).as_micros(),
            i64::MAX
        );
        assert_eq!(
            Timestamp::from_micros(5).duration_since(Timestamp::from_micros(7)),
            Duration::ZERO
        );
        assert_eq!(
            Timestamp::from_micros(7).duration_since(Timestamp::from_micros(5)),
            Duration::from_micros(2)
        );
    }
}
