//! The embedded store's datacenters: which exist (with their replication
//! factors), which links between them are cut, which are stopped, the
//! hints kept for replicas a write could not reach, and which datacenter
//! coordinates a request.
//!
//! # The model, and what it leaves out
//!
//! Each datacenter is one [`Replica`](super::replica::Replica) standing for
//! all of its nodes: a `LOCAL_QUORUM` in it always has a quorum (its nodes
//! fail together or not at all). What the model keeps is what decides
//! where a lock lives across datacenters:
//!
//! - **LOCAL is the coordinator's.** A request at `LOCAL_QUORUM` reads and
//!   acknowledges in its coordinator's datacenter only; other datacenters
//!   get a write when their link is up, else a *hint*, replayed once the
//!   link (or the stopped datacenter) is back.
//! - **QUORUM counts every datacenter's replicas** (`dc1:3, dc2:3` needs
//!   4 of 6), so a cut link leaves no quorum on either side: `Unavailable`.
//!   A read at `QUORUM` repairs what its replicas disagree on before it
//!   answers (Cassandra's blocking read repair), so a quorum read after a
//!   quorum write always sees it (S5).
//! - **A client reaches coordinators** in its own datacenter, and in
//!   another only while the link to it is up (client traffic crosses the
//!   same link). A client that named its local datacenter
//!   (`store.cql.local_datacenter`) is coordinated there, and at a LOCAL
//!   consistency never anywhere else; one that did not — the `scylla`
//!   driver's default policy, which prefers no datacenter — is coordinated
//!   by a datacenter drawn at random per request, from the seed. That last
//!   rule is what made `local_quorum` give two holders on a real
//!   two-datacenter cluster: each request's "local" quorum is another
//!   datacenter's.
//!
//! A request either reaches its replicas or fails at once; the fault
//! wrapper (`FaultyStore`) adds latency and timeouts on top.

use std::collections::BTreeSet;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::row::Part;
use crate::cell::{OpKind, Table};
use crate::error::{StoreError, StoreErrorKind};
use crate::reconcile::CellVersion;
use crate::route::{Datacenter, Route};
use crate::settings::Consistency;

/// What a hint holds: a write one datacenter took that another missed.
#[derive(Debug)]
pub(super) struct Hint {
    pub(super) to: usize,
    pub(super) from: usize,
    pub(super) table: Table,
    pub(super) row: String,
    pub(super) versions: Vec<(String, Part, CellVersion)>,
}

/// When the hints for a datacenter that comes back are replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum HintDelivery {
    /// At once, as Cassandra does when a node it kept hints for is seen up
    /// again (and the hints are within `max_hint_window`).
    #[default]
    AtOnce,
    /// Not until [`MemoryStore::deliver_hints`](super::MemoryStore::deliver_hints):
    /// a datacenter that comes back with only what it had (hints lost,
    /// beyond `max_hint_window`, or not replayed yet).
    Held,
}

/// Where a client sits, and how its driver picks coordinators.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Client {
    /// Its datacenter; `None`: the test's own handle, which reaches every
    /// running datacenter whatever links are cut.
    pub(super) datacenter: Option<usize>,
    /// Whether the driver was told its local datacenter.
    pub(super) names_local: bool,
    /// The consistency of its default route.
    pub(super) consistency: Consistency,
}

/// How one request is served.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Plan {
    /// At `LOCAL_QUORUM` in `coordinator`'s datacenter.
    Local { coordinator: usize },
    /// At `QUORUM`, coordinated in `coordinator`, with `replicas` (the
    /// coordinator's included) reachable.
    Quorum {
        coordinator: usize,
        replicas: Vec<usize>,
    },
}

impl Plan {
    /// The coordinating datacenter.
    pub(super) fn coordinator(&self) -> usize {
        match self {
            Plan::Local { coordinator } | Plan::Quorum { coordinator, .. } => *coordinator,
        }
    }
}

/// The datacenters and the links between them.
#[derive(Debug)]
pub(super) struct Network {
    /// Name and replication factor of each datacenter, by index.
    datacenters: Vec<(Datacenter, u32)>,
    /// Cut links, each pair `(low, high)`.
    cut: BTreeSet<(usize, usize)>,
    stopped: BTreeSet<usize>,
    /// Datacenters whose hints wait for `deliver_hints`.
    held: BTreeSet<usize>,
    pub(super) hints: Vec<Hint>,
    rng: StdRng,
}

fn pair(a: usize, b: usize) -> (usize, usize) {
    (a.min(b), a.max(b))
}

impl Network {
    pub(super) fn new(datacenters: Vec<(Datacenter, u32)>, seed: u64) -> Self {
        Network {
            datacenters,
            cut: BTreeSet::new(),
            stopped: BTreeSet::new(),
            held: BTreeSet::new(),
            hints: Vec::new(),
            rng: StdRng::seed_from_u64(seed),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.datacenters.len()
    }

    pub(super) fn index(&self, dc: &Datacenter) -> Option<usize> {
        self.datacenters.iter().position(|(name, _)| name == dc)
    }

    pub(super) fn name(&self, i: usize) -> &Datacenter {
        &self.datacenters[i].0
    }

    pub(super) fn names(&self) -> Vec<Datacenter> {
        let mut names: Vec<_> = self.datacenters.iter().map(|(n, _)| n.clone()).collect();
        names.sort();
        names
    }

    pub(super) fn set_link(&mut self, a: usize, b: usize, up: bool) {
        if a == b {
            return;
        }
        if up {
            self.cut.remove(&pair(a, b));
        } else {
            self.cut.insert(pair(a, b));
        }
    }

    pub(super) fn restore_all_links(&mut self) {
        self.cut.clear();
    }

    pub(super) fn set_running(&mut self, dc: usize, running: bool, hints: HintDelivery) {
        if running {
            self.stopped.remove(&dc);
            if hints == HintDelivery::Held {
                self.held.insert(dc);
            }
        } else {
            self.stopped.insert(dc);
        }
    }

    pub(super) fn release_held(&mut self) {
        self.held.clear();
    }

    fn running(&self, dc: usize) -> bool {
        !self.stopped.contains(&dc)
    }

    /// Whether `from` can send to `to` (a client's datacenter to a
    /// coordinator, or a coordinator to a replica).
    pub(super) fn reaches(&self, from: usize, to: usize) -> bool {
        self.running(to) && (from == to || !self.cut.contains(&pair(from, to)))
    }

    fn client_reaches(&self, client: &Client, dc: usize) -> bool {
        match client.datacenter {
            Some(c) => self.reaches(c, dc),
            None => self.running(dc),
        }
    }

    /// The datacenters reachable from coordinator `k` (itself first).
    pub(super) fn replicas_from(&self, k: usize) -> Vec<usize> {
        std::iter::once(k)
            .chain((0..self.len()).filter(|&d| d != k && self.reaches(k, d)))
            .collect()
    }

    /// Hints whose target is reachable again from where they were taken
    /// (and not held): removed and returned, to be applied.
    pub(super) fn due_hints(&mut self) -> Vec<Hint> {
        if self.hints.is_empty() {
            return Vec::new();
        }
        let (due, kept): (Vec<Hint>, Vec<Hint>) = std::mem::take(&mut self.hints)
            .into_iter()
            .partition(|h| !self.held.contains(&h.to) && self.reaches(h.from, h.to));
        self.hints = kept;
        due
    }

    /// Which datacenter coordinates a request of `client` on `route`, and
    /// which replicas it involves (see the module docs).
    pub(super) fn plan(
        &mut self,
        client: &Client,
        route: &Route,
        op: OpKind,
        table: Table,
    ) -> Result<Plan, StoreError> {
        let unreachable =
            |why: String| StoreError::new(StoreErrorKind::Connection, op, Some(table), why);
        let from = client
            .datacenter
            .map_or_else(|| "this client".to_string(), |c| self.name(c).to_string());
        match route {
            Route::Datacenter(dc) => {
                let Some(k) = self.index(dc) else {
                    return Err(unreachable(format!(
                        "no datacenter named {dc} in this cluster (it has {})",
                        self.list()
                    )));
                };
                if !self.client_reaches(client, k) {
                    return Err(unreachable(format!(
                        "no node of datacenter {dc} is reachable from {from}"
                    )));
                }
                Ok(Plan::Local { coordinator: k })
            }
            // One node: here each datacenter's replica stands for all of
            // its nodes, named by the datacenter (only a clock reading is
            // sent to one, `Request::check`).
            Route::Host(address) => {
                let Some(k) = self
                    .datacenters
                    .iter()
                    .position(|(n, _)| n.as_str() == address)
                else {
                    return Err(unreachable(format!(
                        "no node at {address:?} in this cluster (its nodes are {})",
                        self.list()
                    )));
                };
                if !self.client_reaches(client, k) {
                    return Err(unreachable(format!(
                        "the node at {address:?} is not reachable from {from}"
                    )));
                }
                Ok(Plan::Local { coordinator: k })
            }
            // A store has no homes: a route named by a lock's home is the
            // default one here (a homes router resolves it before).
            Route::Default | Route::HomeOf(_) => {
                let candidates: Vec<usize> = (0..self.len())
                    .filter(|&d| self.client_reaches(client, d))
                    .collect();
                let named = client.datacenter.filter(|_| client.names_local);
                let k = match (named, client.datacenter) {
                    // The driver was told its datacenter: there first, and at
                    // a LOCAL consistency nowhere else.
                    (Some(local), _) if candidates.contains(&local) => local,
                    (Some(local), _) if client.consistency == Consistency::LocalQuorum => {
                        return Err(unreachable(format!(
                            "no node of the local datacenter {} is reachable, and a \
                             LOCAL_QUORUM request never fails over",
                            self.name(local)
                        )));
                    }
                    // No datacenter preferred: any reachable node, drawn.
                    (_, Some(_)) | (None, None) if !candidates.is_empty() => {
                        candidates[self.rng.random_range(0..candidates.len())]
                    }
                    _ => {
                        return Err(unreachable(format!(
                            "no node of any datacenter is reachable from {from}"
                        )));
                    }
                };
                match client.consistency {
                    Consistency::LocalQuorum => Ok(Plan::Local { coordinator: k }),
                    Consistency::Quorum => self.quorum_from(k, op, table),
                }
            }
        }
    }

    /// A `QUORUM` request coordinated in datacenter `k`: the replicas it
    /// reaches, or unavailable when they are too few.
    fn quorum_from(&self, k: usize, op: OpKind, table: Table) -> Result<Plan, StoreError> {
        let replicas = self.replicas_from(k);
        let total: u32 = self.datacenters.iter().map(|(_, rf)| rf).sum();
        let alive: u32 = replicas.iter().map(|&d| self.datacenters[d].1).sum();
        let needed = total / 2 + 1;
        if alive < needed {
            return Err(StoreError::new(
                StoreErrorKind::Unavailable,
                op,
                Some(table),
                format!(
                    "QUORUM needs {needed} of {total} replicas; {alive} are reachable from the \
                     coordinator in {}",
                    self.name(k)
                ),
            ));
        }
        Ok(Plan::Quorum {
            coordinator: k,
            replicas,
        })
    }

    fn list(&self) -> String {
        self.names()
            .iter()
            .map(Datacenter::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    }
}
