//! A journal of store operations: what each request asked and what it was
//! answered, in the order the store applied them, stamped with tokio's
//! clock.
//!
//! A seeded simulation must replay exactly: the same seed, the same
//! schedule, operation for operation, whatever the machine's load and
//! whatever else runs in the process. Two runs' journals are the proof
//! (`tests/simulation/determinism.rs`): equal line for line, or the first
//! line where they part says where the schedule forked. A
//! [`FaultyStore`](crate::FaultyStore) given a journal writes one line per
//! operation, at the moment the operation takes effect (or fails), with
//! every timestamp relative to the journal's base, so that two runs whose
//! clocks start at the same base print the same lines.

use std::fmt::{self, Write as _};
use std::sync::{Mutex, PoisonError};

use crate::cell::{Cell, Timestamp};
use crate::error::StoreError;
use crate::request::{
    DeleteOp, Op, ReadOp, Request, Response, ScanCellsOp, ScanKeysOp, WriteFencedOp, WriteOp,
};

/// The operations of one simulated run, in the order they took effect.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use lockshift_store::{FaultyStore, Journal, MemoryStore, RowQuery, Store, Timestamp, schema};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
/// let journal = Arc::new(Journal::new(Timestamp::from_micros(0)));
/// let store = FaultyStore::new(MemoryStore::new(), 7).with_journal(journal.clone());
/// store.read(schema::MAIN, "lock-1", &RowQuery::all()).await.unwrap();
/// assert_eq!(journal.lines().len(), 1);
/// # });
/// ```
#[derive(Debug)]
pub struct Journal {
    base: Timestamp,
    started: tokio::time::Instant,
    lines: Mutex<Vec<String>>,
}

impl Journal {
    /// An empty journal whose lines give timestamps relative to `base`
    /// (the run's clock at its start) and times since now on tokio's
    /// clock. Call inside the runtime.
    pub fn new(base: Timestamp) -> Self {
        Journal {
            base,
            started: tokio::time::Instant::now(),
            lines: Mutex::new(Vec::new()),
        }
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// `t` relative to the base, in microseconds.
    pub(crate) fn relative(&self, t: Timestamp) -> i64 {
        t.as_micros().saturating_sub(self.base.as_micros())
    }

    /// Records that the store with `seed` did `request` and answered
    /// `outcome`.
    pub(crate) fn record(&self, seed: u64, request: &str, outcome: &str) {
        let at = self.started.elapsed().as_micros();
        let line = format!("{at:>12} {seed:016x} {request} -> {outcome}");
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(line);
    }

    /// A request as a journal line begins: kind, table, route when pinned,
    /// and its arguments, timestamps relative to the base.
    pub(crate) fn request(&self, request: &Request<'_>) -> String {
        let mut line = format!("{} {}", request.kind(), request.table);
        if let Some(dc) = request.route.datacenter() {
            let _ = write!(line, " via {dc}");
        }
        let _ = match request.op {
            Op::Write(WriteOp {
                row,
                cells,
                options,
            }) => {
                let columns: Vec<&str> = cells.iter().map(|c| c.column.as_str()).collect();
                let at = self.relative(options.timestamp);
                write!(line, " {row} {columns:?} at {at} ttl {:?}", options.ttl)
            }
            Op::Delete(DeleteOp {
                row,
                columns,
                timestamp,
            }) => write!(line, " {row} {columns:?} at {}", self.relative(timestamp)),
            Op::Read(ReadOp { row, query }) => write!(line, " {row} {query:?}"),
            Op::ScanKeys(ScanKeysOp { cursor, page_size }) => {
                write!(line, " after {cursor:?} {page_size}")
            }
            Op::ScanCells(ScanCellsOp {
                range,
                cursor,
                page_size,
            }) => write!(line, " {range} after {cursor:?} {page_size}"),
            Op::WriteFenced(WriteFencedOp { row, cell, token }) => {
                write!(line, " {row} {} token {token}", cell.column)
            }
            Op::ServerTime => Ok(()),
        };
        line
    }

    /// The cells of an answer as `column@writetime+ttl`, timestamps
    /// relative to the base.
    pub(crate) fn cells(&self, cells: &[Cell]) -> String {
        let mut out = String::from("[");
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            let _ = write!(out, "{}@{}", c.column, self.relative(c.writetime));
            if let Some(ttl) = c.ttl {
                let _ = write!(out, "+{}s", ttl.as_secs());
            }
        }
        out.push(']');
        out
    }
}

/// What a store operation answered, in one journal word or line.
pub(crate) trait Answer {
    /// The answer as the journal prints it.
    fn journal(&self, journal: &Journal) -> String;
}

impl Answer for Response {
    fn journal(&self, journal: &Journal) -> String {
        match self {
            Response::Done => "ok".into(),
            Response::Read(outcome) => journal.cells(&outcome.cells),
            Response::Keys(page) => format!("{:?} more={}", page.keys, page.next.is_some()),
            Response::Cells(page) => {
                let rows: Vec<String> = page
                    .rows
                    .iter()
                    .map(|r| format!("{}{}", r.key, journal.cells(&r.cells)))
                    .collect();
                format!("{rows:?} more={}", page.next.is_some())
            }
            Response::Fenced(outcome) => format!("{outcome:?}"),
            Response::Time(at) => format!("at {}", journal.relative(*at)),
        }
    }
}

impl<T: Answer> Answer for Result<T, StoreError> {
    fn journal(&self, journal: &Journal) -> String {
        match self {
            Ok(t) => t.journal(journal),
            Err(e) => format!("error {:?}", e.kind()),
        }
    }
}

impl fmt::Display for Journal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in self.lines() {
            writeln!(f, "{line}")?;
        }
        Ok(())
    }
}
