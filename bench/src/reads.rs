//! What a worker's reads cost in tombstones, as its store tells it
//! ([`Store::read_observed`]): per table, the reads made, the counts the
//! answers carried, the server's warnings and the reads that failed for
//! too many tombstones.
//!
//! Over CQL an answer carries a count only inside Cassandra's tombstone
//! warning, above its warn threshold (1 000) — on a real cluster and on
//! the local endpoint alike (`lockshift_store::tombstones`). So a worker
//! knows "no read passed more than 1 000" exactly, and the count only of
//! the reads above. The soak adds the local endpoint's own count of every
//! read ([`EndpointReads`]) when it runs one.

use std::sync::Mutex;

use async_trait::async_trait;
use lockshift_store::{
    OpKind, ReadOutcome, Request, Response, SharedStore, Store, StoreError, StoreErrorKind, Table,
    tombstones,
};
use serde::{Deserialize, Serialize};

/// What the reads of one table cost, as the answers said.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableReads {
    /// The table.
    pub table: String,
    /// Reads made (answered or failed).
    pub reads: u64,
    /// Reads whose answer said how many tombstones they passed (over CQL:
    /// only those above the warn threshold).
    pub counted: u64,
    /// The most tombstones a counted read passed.
    pub max_counted: Option<u64>,
    /// Warnings the server added to read answers, of any kind.
    pub warnings: u64,
    /// Of those, Cassandra's tombstone warnings (the read passed more than
    /// `tombstone_warn_threshold`, 1 000 by default).
    pub tombstone_warnings: u64,
    /// Reads that failed for too many tombstones (above 100 000).
    pub failed: u64,
    /// The time those reads took, in all (µs): from the request to the
    /// answer as this process saw it, its own scheduling included.
    #[serde(default)]
    pub micros: u64,
}

impl TableReads {
    fn merge(&mut self, other: &TableReads) {
        self.reads += other.reads;
        self.counted += other.counted;
        self.max_counted = self.max_counted.max(other.max_counted);
        self.warnings += other.warnings;
        self.tombstone_warnings += other.tombstone_warnings;
        self.failed += other.failed;
        self.micros += other.micros;
    }
}

/// What a worker's reads cost, per table (in the order first read).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadCosts {
    /// One entry per table read.
    pub tables: Vec<TableReads>,
    /// The first warning the server sent, verbatim.
    pub first_warning: Option<String>,
}

impl ReadCosts {
    /// Adds `other`'s reads to these, table by table.
    pub fn merge(&mut self, other: &ReadCosts) {
        for t in &other.tables {
            self.table_mut(&t.table).merge(t);
        }
        if self.first_warning.is_none() {
            self.first_warning.clone_from(&other.first_warning);
        }
    }

    /// The entry of `table`, made empty if missing.
    fn table_mut(&mut self, table: &str) -> &mut TableReads {
        let i = match self.tables.iter().position(|t| t.table == table) {
            Some(i) => i,
            None => {
                self.tables.push(TableReads {
                    table: table.to_string(),
                    ..TableReads::default()
                });
                self.tables.len() - 1
            }
        };
        &mut self.tables[i]
    }

    /// The mean time of one read, over every table (µs); `None` before
    /// the first read.
    pub fn mean_read_micros(&self) -> Option<f64> {
        let reads: u64 = self.tables.iter().map(|t| t.reads).sum();
        let micros: u64 = self.tables.iter().map(|t| t.micros).sum();
        (reads > 0).then(|| micros as f64 / reads as f64)
    }

    /// Records one read of `table`, its result and how long it took.
    fn record(
        &mut self,
        table: Table,
        result: Result<&ReadOutcome, &StoreError>,
        took: std::time::Duration,
    ) {
        let entry = self.table_mut(table.name());
        entry.reads += 1;
        entry.micros += u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        match result {
            Ok(outcome) => {
                if let Some(n) = outcome.tombstones {
                    entry.counted += 1;
                    entry.max_counted = entry.max_counted.max(Some(n));
                }
                entry.warnings += outcome.warnings.len() as u64;
                entry.tombstone_warnings += outcome
                    .warnings
                    .iter()
                    .filter(|w| tombstones::parse_warning(w).is_some())
                    .count() as u64;
                if self.first_warning.is_none() {
                    self.first_warning = outcome.warnings.first().cloned();
                }
            }
            Err(e) if e.kind() == StoreErrorKind::TooManyTombstones => {
                entry.failed += 1;
                if self.first_warning.is_none() {
                    self.first_warning = Some(e.to_string());
                }
            }
            Err(_) => {}
        }
    }
}

/// What the local endpoint counted for the reads of one table: every read,
/// not only those it warned about (`EmulatorHandle::take_read_costs`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointReads {
    /// The table.
    pub table: String,
    /// Reads the endpoint answered (every client's).
    pub reads: u64,
    /// The most tombstones one of them passed.
    pub max_tombstones: u64,
    /// Tombstones they passed, in all.
    pub tombstones: u64,
}

/// A store that records what every read cost ([`ReadCosts`]) and forwards
/// everything to the store it wraps.
#[derive(Debug)]
pub struct ObservingStore {
    inner: SharedStore,
    costs: Mutex<ReadCosts>,
}

impl ObservingStore {
    /// Observes the reads sent to `inner`.
    pub fn new(inner: SharedStore) -> Self {
        ObservingStore {
            inner,
            costs: Mutex::new(ReadCosts::default()),
        }
    }

    /// What the reads cost so far.
    pub fn costs(&self) -> ReadCosts {
        self.costs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Forgets the reads so far (after the worker's warm-up).
    pub fn reset(&self) {
        *self
            .costs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = ReadCosts::default();
    }
}

#[async_trait]
impl Store for ObservingStore {
    async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
        let (table, kind) = (request.table, request.kind());
        let started = std::time::Instant::now();
        let result = self.inner.call(request).await;
        if kind == OpKind::Read {
            let took = started.elapsed();
            let read = match &result {
                Ok(Response::Read(outcome)) => Ok(outcome),
                Ok(_) => return result,
                Err(e) => Err(e),
            };
            self.costs
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .record(table, read, took);
        }
        result
    }

    fn wraps(&self) -> Option<&dyn Store> {
        Some(&self.inner)
    }
}

#[cfg(test)]
mod tests {
    // Test code: a failed unwrap is a failed test.
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use lockshift_store::{MemoryStore, RowQuery, Timestamp, TombstoneThresholds, schema};

    use super::*;

    /// The embedded store counts every read and warns like Cassandra: the
    /// wrapper keeps the worst count, the warnings and the failures.
    #[tokio::test]
    async fn counts_warnings_and_failures_per_table() {
        let memory = Arc::new(
            MemoryStore::new().with_tombstone_thresholds(TombstoneThresholds { warn: 2, fail: 4 }),
        );
        let store = ObservingStore::new(memory.clone());
        let at = Timestamp::from_micros(1_000);
        let columns: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        store.delete(schema::MAIN, "r", &columns, at).await.unwrap();
        store
            .read(schema::MAIN, "r", &RowQuery::all())
            .await
            .unwrap();
        store
            .read(schema::QUEUE, "r", &RowQuery::all())
            .await
            .unwrap();
        let costs = store.costs();
        assert_eq!(costs.tables.len(), 2);
        let main = &costs.tables[0];
        assert_eq!(
            (main.table.as_str(), main.reads, main.max_counted),
            ("main", 1, Some(3))
        );
        assert_eq!(
            (main.warnings, main.tombstone_warnings, main.failed),
            (1, 1, 0)
        );
        assert!(
            costs
                .first_warning
                .as_deref()
                .unwrap()
                .contains("3 tombstone cells"),
            "{costs:?}"
        );
        let more: Vec<String> = ["d", "e"].map(String::from).to_vec();
        store.delete(schema::MAIN, "r", &more, at).await.unwrap();
        let failed = store.read(schema::MAIN, "r", &RowQuery::all()).await;
        assert_eq!(
            failed.unwrap_err().kind(),
            StoreErrorKind::TooManyTombstones
        );
        let mut merged = ReadCosts::default();
        merged.merge(&store.costs());
        merged.merge(&store.costs());
        let main = &merged.tables[0];
        assert_eq!((main.reads, main.failed, main.max_counted), (4, 2, Some(3)));
        let one = store.costs();
        assert_eq!(
            merged.tables[0].micros,
            2 * one.tables[0].micros,
            "merging adds the reads' time"
        );
        assert!(one.mean_read_micros().is_some());
        store.reset();
        assert_eq!(store.costs(), ReadCosts::default());
        assert_eq!(store.costs().mean_read_micros(), None);
    }
}
