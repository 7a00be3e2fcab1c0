//! The counting layer of the census and idle benchmarks: a [`Store`] that
//! counts every request by table, route and kind and hands it on.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use lockshift_store::{OpKind, Request, Response, Route, Store, StoreError, Table, Topology};
use serde::Serialize;

/// Requests counted by table and by datacenter.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Requests {
    /// All of them.
    pub total: u64,
    /// By table.
    pub by_table: BTreeMap<String, u64>,
    /// By the datacenter that coordinated them (their route; `default`
    /// where the store's own load balancing chose and the store knows no
    /// single datacenter).
    pub by_datacenter: BTreeMap<String, u64>,
}

/// A store layer that counts every request by table, route and kind, and
/// hands it on unchanged: the census's requests by table and datacenter
/// ([`take`](Meter::take)), an idle process's by table and by reads and
/// writes ([`take_by_kind`](Meter::take_by_kind)).
#[derive(Debug)]
pub struct Meter<S> {
    inner: S,
    counts: Mutex<HashMap<(Table, Route, OpKind), u64>>,
}

impl<S: Store> Meter<S> {
    /// Counts the requests to `inner`.
    pub fn new(inner: S) -> Self {
        Meter {
            inner,
            counts: Mutex::default(),
        }
    }

    /// The requests counted since the last call, by table and by
    /// datacenter; the count starts again from zero.
    pub fn take(&self) -> Requests {
        let counts = self.take_counts();
        let topology = self.inner.topology();
        let mut out = Requests::default();
        for ((table, route, _), n) in counts {
            out.total += n;
            *out.by_table.entry(table.to_string()).or_default() += n;
            *out.by_datacenter
                .entry(datacenter_of(&route, &topology))
                .or_default() += n;
        }
        out
    }

    /// The requests counted since the last call, by table and by whether
    /// they write (writes, deletes, fenced writes) or read; the count
    /// starts again from zero.
    pub fn take_by_kind(&self) -> BTreeMap<(Table, bool), u64> {
        let mut out = BTreeMap::new();
        for ((table, _, kind), n) in self.take_counts() {
            let writes = match kind {
                OpKind::Write | OpKind::Delete | OpKind::FencedWrite => true,
                OpKind::Read | OpKind::Scan => false,
            };
            *out.entry((table, writes)).or_default() += n;
        }
        out
    }

    fn take_counts(&self) -> HashMap<(Table, Route, OpKind), u64> {
        std::mem::take(&mut *self.counts.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[async_trait]
impl<S: Store> Store for Meter<S> {
    async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
        *self
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((request.table, request.route.clone(), request.op.kind()))
            .or_default() += 1;
        self.inner.call(request).await
    }

    fn wraps(&self) -> Option<&dyn Store> {
        Some(&self.inner)
    }
}

/// The datacenter a request on `route` is coordinated in: a pinned one's
/// own; for the default route the client's named datacenter, or the
/// cluster's only one.
fn datacenter_of(route: &Route, topology: &Topology) -> String {
    match route {
        Route::Datacenter(dc) => dc.to_string(),
        Route::Host(address) => topology
            .hosts
            .iter()
            .find(|h| h.address == *address)
            .and_then(|h| h.datacenter.as_ref())
            .map_or_else(|| format!("host {address}"), ToString::to_string),
        // A store without homes takes a home's route as its default.
        _ => match (&topology.local, topology.datacenters.as_slice()) {
            (Some(dc), _) => dc.to_string(),
            (None, [only]) => only.to_string(),
            _ => "default".to_string(),
        },
    }
}
