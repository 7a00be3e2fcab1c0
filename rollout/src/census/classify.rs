//! Matching a census's cells to the registry and classifying them: whose
//! process wrote each cell, how old it is, where it stands in line, and
//! whether it outlived its owner's promise.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use lockshift_decide::cells::writer_of;
use lockshift_decide::queue::parse_queue_cell;
use lockshift_decide::shared_waiter::{main_sharing, queue_algorithm, queue_sharing};
use lockshift_decide::sharing::Sharing;
use lockshift_lock::{Incarnation, OwnerId};
use lockshift_store::{Cell, Table, Timestamp, schema};

use super::{CellOwner, CensusCell, CensusOptions, lease_over};
use lockshift_decide::offset::{self, ClockReading};
use lockshift_decide::registry::{LeasePromise, LiveNode};

/// The registry as cells are matched against it.
#[derive(Debug, Default)]
pub(super) struct Registry {
    /// Node ids with any row.
    nodes: BTreeSet<String>,
    /// Each process with a row (node id, incarnation): its promise and its
    /// clock reading.
    processes: BTreeMap<(String, Incarnation), Process>,
    /// Node ids with a row that names no process (a build that predates
    /// incarnations, or an incarnation that does not parse).
    unnamed: BTreeSet<String>,
}

/// What a process's registry row says about its cells.
#[derive(Clone, Copy, Debug)]
struct Process {
    promise: Option<LeasePromise>,
    clock: Option<ClockReading>,
}

impl Registry {
    pub(super) fn of(nodes: &[LiveNode]) -> Self {
        let mut r = Registry::default();
        for n in nodes {
            r.nodes.insert(n.info.node.clone());
            match n.info.incarnation.as_deref().map(str::parse::<Incarnation>) {
                Some(Ok(incarnation)) => {
                    r.processes.insert(
                        (n.info.node.clone(), incarnation),
                        Process {
                            promise: n.info.lease,
                            clock: n.info.clock,
                        },
                    );
                }
                _ => {
                    r.unnamed.insert(n.info.node.clone());
                }
            }
        }
        r
    }
}

/// Who wrote a cell, matched against the registry: only a lockshift-shaped
/// owner id with a lockshift value is lockshift's.
fn classify(column_owner: &str, value: &[u8], registry: &Registry) -> CellOwner {
    // Only a lockshift-shaped owner id with a lockshift value is
    // lockshift's; anything else was written by something older.
    let id = OwnerId::from_stored(column_owner);
    match (writer_of(column_owner, value), id.node()) {
        (Some((algorithm, reserved)), Some(node)) => {
            let process = id
                .incarnation()
                .and_then(|i| registry.processes.get(&(node.to_string(), i)));
            CellOwner {
                owner: column_owner.to_string(),
                registered: registry.nodes.contains(node),
                process_live: process.is_some() || registry.unnamed.contains(node),
                promise: process.and_then(|p| p.promise),
                clock: process.and_then(|p| p.clock),
                node: Some(node.to_string()),
                algorithm: Some(algorithm),
                reserved,
                sharing: main_sharing(value),
            }
        }
        _ => CellOwner {
            owner: column_owner.to_string(),
            node: None,
            registered: false,
            process_live: false,
            promise: None,
            clock: None,
            algorithm: None,
            reserved: false,
            sharing: Sharing::Exclusive,
        },
    }
}

pub(super) fn classify_row(
    table: Table,
    lock: &str,
    cells: Vec<Cell>,
    registry: &Registry,
    now: Timestamp,
    options: &CensusOptions,
) -> Vec<CensusCell> {
    let mut live_position = 0;
    let mut out = Vec::with_capacity(cells.len());
    // Queue cells in line order: by arrival (in the value, or the column of
    // the thesis' layout), then owner id.
    let mut cells: Vec<(Option<u64>, Cell)> = cells
        .into_iter()
        .map(|c| {
            let arrival = (table == schema::QUEUE)
                .then(|| parse_queue_cell(&c.column, &c.value).map(|e| e.arrival))
                .flatten();
            (arrival, c)
        })
        .collect();
    if table == schema::QUEUE {
        cells.sort_by(|(a, ca), (b, cb)| {
            (a.unwrap_or(0), &ca.column).cmp(&(b.unwrap_or(0), &cb.column))
        });
    }
    for (queued_at, cell) in cells {
        // Queue cells are judged by the waiters' threshold whoever wrote
        // them, on this clock against the writer's as the waiters judge
        // them: it is the rule waiters skip them by.
        let stale = now.duration_since(cell.writetime) > options.stale_after.waiting;
        let owner = if table == schema::QUEUE {
            let position = if stale {
                None
            } else {
                live_position += 1;
                Some(live_position - 1)
            };
            let owner = match parse_queue_cell(&cell.column, &cell.value) {
                // A queue cell says its algorithm (and how it shares) in
                // its own way; classify it as the same owner's `main` cell
                // would be.
                Some(entry) => {
                    let algorithm = entry.algorithm.or_else(|| queue_algorithm(&cell.value));
                    let mut owner = classify(
                        entry.owner.as_str(),
                        algorithm.map_or(&b""[..], |a| a.as_str().as_bytes()),
                        registry,
                    );
                    owner.sharing = queue_sharing(&cell.value);
                    owner
                }
                None => classify(&cell.column, &cell.value, registry),
            };
            (owner, position)
        } else {
            (classify(&cell.column, &cell.value, registry), None)
        };
        let (owner, queue_position) = owner;
        let (age, least_age) = ages(cell.writetime, owner.clock.as_ref(), now, options);
        let stale = if table == schema::QUEUE {
            stale
        } else {
            least_age > options.stale_after.for_cell(table, &owner)
        };
        let lease_over = lease_over(least_age, cell.ttl, owner.promise);
        out.push(CensusCell {
            table,
            lock: lock.to_string(),
            owner,
            column: cell.column,
            writetime: cell.writetime,
            age,
            least_age,
            ttl_left: cell.ttl,
            queue_position,
            queued_at,
            stale,
            lease_over,
        });
    }
    out
}

/// A cell written at `written` on its owner's clock, seen at `now` on the
/// census taker's: its age on the database's clock as a view shows it
/// ([`offset::Age::shown`]) and the least it can be
/// ([`CensusCell::least_age`]).
/// Each side is taken to the database's time by its own reading; a side
/// without one is allowed `clock_skew_margin` (an owner that reports none
/// by [`offset::age`] itself, a taker that could not read its clock here:
/// the owner's reading alone says nothing of how the taker's clock stands).
fn ages(
    written: Timestamp,
    writer: Option<&ClockReading>,
    now: Timestamp,
    options: &CensusOptions,
) -> (Duration, Duration) {
    let margin = options.clock_skew_margin;
    let age = offset::age(written, writer, now, options.reader.as_ref(), margin);
    let least = if options.reader.is_none() && writer.is_some() {
        age.least.saturating_sub(margin)
    } else {
        age.least
    };
    (age.shown, least)
}
