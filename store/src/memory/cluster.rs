//! The embedded store as a cluster of datacenters: making one, placing a
//! client in it, the faults of its network (`network.rs` has the rules),
//! and how one request is planned and applied to the replicas it reaches.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::network::{Client, Hint, HintDelivery, Network, Plan};
use super::replica::Replica;
use super::row::Part;
use super::{MemoryState, MemoryStore, one_datacenter};
use crate::cell::{OpKind, Table, Timestamp};
use crate::error::StoreError;
use crate::reconcile::CellVersion;
use crate::route::{Datacenter, Route};
use crate::settings::Consistency;

impl MemoryStore {
    /// This store made over again as a cluster of `datacenters` (each name
    /// with its replication factor, at least 1), empty, the links up. The
    /// handle returned reaches every running datacenter whatever links are
    /// cut (a test's own view); give each simulated process its own with
    /// [`client_in`](Self::client_in). `seed` draws the coordinators of
    /// clients that did not name their datacenter.
    ///
    /// Call it before anything is written, and before making client
    /// handles: it starts a new, empty cluster.
    pub fn with_datacenters(mut self, datacenters: Vec<(Datacenter, u32)>, seed: u64) -> Self {
        let datacenters = if datacenters.is_empty() {
            one_datacenter()
        } else {
            datacenters
                .into_iter()
                .map(|(name, rf)| (name, rf.max(1)))
                .collect()
        };
        self.state = Arc::new(Mutex::new(MemoryState::new(datacenters, seed)));
        self
    }

    /// A handle on the same data for a client in `datacenter`: its
    /// requests are coordinated there, and reach another datacenter only
    /// while the link to it is up. Its driver knows its datacenter (as
    /// with `store.cql.local_datacenter`) and its default route runs at
    /// QUORUM; see [`without_local_datacenter`](Self::without_local_datacenter)
    /// and [`with_consistency`](Self::with_consistency). `None` for a
    /// datacenter the cluster does not have.
    pub fn client_in(&self, datacenter: &Datacenter) -> Option<MemoryStore> {
        let index = self.lock().network.index(datacenter)?;
        Some(MemoryStore {
            clock: self.clock.clone(),
            gc_grace_all: self.gc_grace_all,
            gc_grace_table: self.gc_grace_table.clone(),
            thresholds: self.thresholds,
            keyspace: self.keyspace.clone(),
            state: self.state.clone(),
            client: Client {
                datacenter: Some(index),
                names_local: true,
                consistency: Consistency::Quorum,
            },
        })
    }

    /// This handle with a driver that was never told its datacenter (the
    /// `scylla` driver's default policy): each request on the default
    /// route is coordinated by a reachable datacenter drawn at random.
    pub fn without_local_datacenter(mut self) -> Self {
        self.client.names_local = false;
        self
    }

    /// This handle with `consistency` on its default route
    /// (`store.cql.consistency`).
    pub fn with_consistency(mut self, consistency: Consistency) -> Self {
        self.client.consistency = consistency;
        self
    }

    /// Cuts the link between datacenters `a` and `b`: no request, no
    /// replication and no client traffic crosses it until it is restored.
    /// Unknown names are ignored.
    pub fn cut_link(&self, a: &Datacenter, b: &Datacenter) {
        self.set_link(a, b, false);
    }

    /// Restores the link between `a` and `b`; hints for either side are
    /// replayed before the next request is served.
    pub fn restore_link(&self, a: &Datacenter, b: &Datacenter) {
        self.set_link(a, b, true);
    }

    /// Restores every cut link.
    pub fn restore_all_links(&self) {
        self.lock().network.restore_all_links();
    }

    /// Stops every node of `datacenter`: it coordinates nothing and
    /// misses every write (hinted for it) until started again. Its data
    /// stays as it was.
    pub fn stop_datacenter(&self, datacenter: &Datacenter) {
        let mut st = self.lock();
        if let Some(i) = st.network.index(datacenter) {
            st.network.set_running(i, false, HintDelivery::AtOnce);
        }
    }

    /// Starts `datacenter` again with the data it had; `hints` says
    /// whether what it missed is replayed at once or held until
    /// [`deliver_hints`](Self::deliver_hints).
    pub fn start_datacenter(&self, datacenter: &Datacenter, hints: HintDelivery) {
        let mut st = self.lock();
        if let Some(i) = st.network.index(datacenter) {
            st.network.set_running(i, true, hints);
        }
    }

    /// Sets the clock of `datacenter`'s nodes `offset_micros` off the
    /// store's (negative: behind), as a node whose NTP failed: what its
    /// coordinator answers for `now()` ([`Store::server_time_via`](crate::Store::server_time_via)),
    /// on any route it coordinates and on [`Route::Host`] (each
    /// datacenter's one replica stands for all of its nodes, named by the
    /// datacenter: [`Topology::hosts`](crate::Topology::hosts)). TTLs
    /// still count on the store's own clock. Unknown names are ignored.
    pub fn skew_node_clock(&self, datacenter: &Datacenter, offset_micros: i64) {
        let mut st = self.lock();
        if let Some(i) = st.network.index(datacenter) {
            st.clock_offsets[i] = offset_micros;
        }
    }

    /// Replays every held hint whose target is reachable.
    pub fn deliver_hints(&self) {
        let mut st = self.lock();
        st.network.release_held();
        let now = self.clock.now();
        self.replay_hints(&mut st, now);
    }

    fn set_link(&self, a: &Datacenter, b: &Datacenter, up: bool) {
        let mut st = self.lock();
        if let (Some(a), Some(b)) = (st.network.index(a), st.network.index(b)) {
            st.network.set_link(a, b, up);
        }
    }

    /// Replays the hints whose targets are reachable again.
    pub(super) fn replay_hints(&self, st: &mut MemoryState, now: Timestamp) {
        for hint in st.network.due_hints() {
            let grace = self.gc_grace(hint.table);
            let replica = &mut st.replicas[hint.to];
            replica.sweep_due(now, &|t| self.gc_grace(t));
            replica.apply(hint.table, &hint.row, hint.versions.into_iter(), now, grace);
        }
    }

    /// Plans a request (hints replayed first): which datacenter
    /// coordinates it and which replicas it reaches.
    pub(super) fn plan(
        &self,
        st: &mut MemoryState,
        route: &Route,
        op: OpKind,
        table: Table,
        now: Timestamp,
    ) -> Result<Plan, StoreError> {
        self.replay_hints(st, now);
        st.network.plan(&self.client, route, op, table)
    }

    /// Applies `versions` to `row` as a mutation planned on `route`:
    /// to every replica the coordinator reaches, hinted for the others.
    pub(super) fn mutate(
        &self,
        route: &Route,
        op: OpKind,
        table: Table,
        row: &str,
        versions: Vec<(String, CellVersion)>,
    ) -> Result<(), StoreError> {
        let now = self.clock.now();
        let mut st = self.lock();
        let plan = self.plan(&mut st, route, op, table, now)?;
        let versions = versions
            .into_iter()
            .map(|(c, v)| (c, Part::Value, v))
            .collect();
        self.apply_planned(&mut st, plan, table, row, versions, now);
        Ok(())
    }

    /// Applies `versions` as `plan` says: to every replica its coordinator
    /// reaches, hinted for the others.
    pub(super) fn apply_planned(
        &self,
        st: &mut MemoryState,
        plan: Plan,
        table: Table,
        row: &str,
        versions: Vec<(String, Part, CellVersion)>,
        now: Timestamp,
    ) {
        let grace = self.gc_grace(table);
        let k = plan.coordinator();
        let reached = match plan {
            Plan::Local { coordinator } => st.network.replicas_from(coordinator),
            Plan::Quorum { replicas, .. } => replicas,
        };
        for d in 0..st.replicas.len() {
            if reached.contains(&d) {
                let replica = &mut st.replicas[d];
                replica.sweep_due(now, &|t| self.gc_grace(t));
                replica.apply(table, row, versions.iter().cloned(), now, grace);
            } else {
                st.network.hints.push(Hint {
                    to: d,
                    from: k,
                    table,
                    row: row.to_string(),
                    versions: versions.clone(),
                });
            }
        }
    }

    /// Read repair among `replicas` for `row`: each gets every version the
    /// others hold, so they agree before a quorum read answers.
    pub(super) fn repair(
        st: &mut MemoryState,
        replicas: &[usize],
        table: Table,
        row: &str,
        now: Timestamp,
        grace: Duration,
    ) {
        if replicas.len() < 2 {
            return;
        }
        let all: Vec<(String, Part, CellVersion)> = replicas
            .iter()
            .flat_map(|&d| st.replicas[d].versions(table, row))
            .collect();
        if all.is_empty() {
            return;
        }
        for &d in replicas {
            st.replicas[d].apply(table, row, all.iter().cloned(), now, grace);
        }
    }

    pub(super) fn record(st: &mut MemoryState, table: Table, op: OpKind, tombstones: u64) {
        let stats = st.stats.entry(table).or_default();
        let slot = match op {
            OpKind::Scan => &mut stats.max_per_scan,
            _ => &mut stats.max_per_read,
        };
        *slot = (*slot).max(tombstones);
    }
}

impl MemoryState {
    pub(super) fn new(datacenters: Vec<(Datacenter, u32)>, seed: u64) -> Self {
        MemoryState {
            replicas: datacenters.iter().map(|_| Replica::default()).collect(),
            clock_offsets: vec![0; datacenters.len()],
            network: Network::new(datacenters, seed),
            stats: HashMap::new(),
        }
    }
}
