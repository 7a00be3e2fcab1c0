//! Cassandra's cell model as one async interface, for lockshift's locks.
//!
//! Every lock algorithm in lockshift is written against [`Store`] alone, so the
//! same code runs on the embedded backend ([`MemoryStore`]), on the local CQL
//! endpoint and on a real ScyllaDB or Cassandra cluster (the CQL backend). The
//! exclusion proofs of the thesis rest on a handful of storage facts; the
//! trait states them as its contract and every backend must honour them.
//!
//! # Invariants every backend keeps
//!
//! The store contract S1–S7, stated and argued in docs/design.md §1: last
//! write wins per cell, a tombstone wins a tie, TTLs count from apply time in
//! whole seconds, reads come in column order, read-your-writes, tombstones
//! cost reads, one row one write. The [`Store`] trait lists them as its
//! numbered contract, item *n* being S*n*; code cites them by label.
//!
//! Errors say what they mean for the data: [`StoreErrorKind::NotApplied`],
//! [`StoreErrorKind::Unavailable`] (nothing changed),
//! [`StoreErrorKind::MaybeApplied`] (a timeout: it may have changed) and
//! [`StoreErrorKind::TooManyTombstones`] (a read aborted; retrying fails
//! the same way until the tombstones age out).
//!
//! # Example
//!
//! ```
//! use lockshift_store::{CellWrite, MemoryStore, RowQuery, Store, Timestamp, WriteOptions, schema};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let store = MemoryStore::new();
//! let t = |us| WriteOptions::at(Timestamp::from_micros(us));
//! store.write(schema::QUEUE, "lock-1", &[CellWrite::new("00000000000000000002-b", vec![])], t(2)).await?;
//! store.write(schema::QUEUE, "lock-1", &[CellWrite::new("00000000000000000001-a", vec![])], t(1)).await?;
//! let head = store.read(schema::QUEUE, "lock-1", &RowQuery::first(1)).await?;
//! assert_eq!(head[0].column, "00000000000000000001-a"); // byte order, not arrival order
//! # Ok::<(), lockshift_store::StoreError>(())
//! # }).unwrap();
//! ```
//!
//! # Modules
//!
//! - The cell model: [`Timestamp`], [`Ttl`], [`Table`], [`Cell`],
//!   [`RowQuery`] and the other types of a read or write; [`reconcile`], the
//!   rule by which a cell's versions resolve; [`schema`], every table and its
//!   options. All three live in `lockshift_decide` (the crate of pure
//!   decisions, which the decisions made on cells share without a store
//!   client) and are re-exported here at the paths they have always had.
//! - [`Store`]: the trait and its contract; every operation takes a
//!   [`Route`] — the store's default, or pinned to one [`Datacenter`] at
//!   `LOCAL_QUORUM` — and [`Store::topology`] says what the store knows of
//!   the cluster's datacenters ([`Topology`]).
//! - [`MemoryStore`]: the embedded reference backend, one datacenter or
//!   several ([`MemoryStore::with_datacenters`]: cut links, stopped
//!   datacenters, [`HintDelivery`]).
//! - [`CqlStore`]: the CQL backend (ScyllaDB, Cassandra, the local endpoint)
//!   on the `scylla` driver.
//! - [`FaultyStore`]: seeded latency, failures and skew; operation counts.
//! - [`fenced`]: fenced writes — [`fenced::FencedWriter`], a write the
//!   database refuses under a smaller fencing token than the cell's
//!   ([`Store::write_fenced_via`], docs/design.md §5).
//! - [`homes`]: where each lock's requests go across datacenters — a
//!   process's [`homes::HomesView`] and the [`homes::HomesRouter`] every
//!   node's store goes through (docs/design.md §4a).
//! - [`clock`]: injectable clocks.
//! - [`offset`]: measuring this process's clock against a coordinator's
//!   ([`offset::measure_offset`]; what the samples mean is
//!   `lockshift_decide::offset`'s).
//! - [`tombstones`]: what tombstones cost a read on Cassandra (measured),
//!   the thresholds, Cassandra's warning text.
//! - [`settings`]: how a store is chosen and connected.

mod api;
mod backend;
mod cell;
pub mod clock;
mod cql;
mod error;
mod faults;
pub mod fenced;
pub mod homes;
mod journal;
mod memory;
pub mod offset;
mod request;
mod route;
pub mod settings;
pub mod tombstones;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use api::{ReadOutcome, SharedStore, Store};
pub use request::{
    DeleteOp, Op, OwnedRequest, ReadOp, Request, Response, ScanCellsOp, ScanKeysOp, WriteFencedOp,
    WriteOp,
};
// The cell model, from `lockshift_decide` (see "Modules" above); the same
// names and paths as when it was defined here.
pub use cell::{
    Cell, CellPage, CellWrite, InvalidArgument, KeyPage, MAX_KEY_BYTES, OpKind, PageCursor,
    RowCells, RowQuery, Table, Timestamp, TokenRange, Ttl, WriteOptions, check_key,
};
pub use clock::{
    Clock, JitteryClock, ManualClock, SharedClock, SkewedClock, SystemClock, TokioClock,
};
pub use cql::{CqlStore, SchemaStep};
pub use error::{StoreError, StoreErrorKind};
pub use faults::{FailPoint, FaultPlan, FaultScope, FaultyStore, OpCounts};
pub use fenced::{FencedOutcome, FencedWriteError, FencedWriter};
pub use journal::Journal;
pub use lockshift_decide::{reconcile, schema};
pub use memory::{DEFAULT_DATACENTER, DEFAULT_KEYSPACE, HintDelivery, MemoryStore};
pub use route::{Datacenter, Host, InvalidDatacenter, Route, Topology};
pub use settings::{Consistency, CqlSettings, StoreBackend, StoreSettings};
pub use tombstones::TombstoneThresholds;
