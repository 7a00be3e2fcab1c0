//! Processes whose clocks are far off the database's (issue 41,
//! docs/design.md §4b, C1): a node on a clock `offset` off the cluster's,
//! which measures its offset as every node does — or, for the negative
//! control, a build that ignores it: its store answers every reading of
//! the coordinator's clock with the process's own, so it measures zero and
//! believes itself in step.

use std::sync::Arc;

use async_trait::async_trait;
use lockshift_store::{
    Clock, Op, Request, Response, SharedClock, SharedStore, SkewedClock, Store, StoreError,
    Timestamp,
};

use crate::sim::Cluster;

/// Whether a far-off process knows how far off it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offsets {
    /// It measures its offset against the database's clock (C1).
    Measured,
    /// It takes its own clock for the database's (a build without C1).
    Ignored,
}

/// A store that answers a reading of the coordinator's clock with the
/// process's own clock, in whole milliseconds: the process measures an
/// offset of zero whatever its clock says.
#[derive(Debug)]
pub struct OwnClock {
    inner: SharedStore,
    clock: SharedClock,
}

#[async_trait]
impl Store for OwnClock {
    async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
        if matches!(request.op, Op::ServerTime) {
            let now = self.clock.now().as_micros();
            return Ok(Response::Time(Timestamp::from_micros(
                now.div_euclid(1_000) * 1_000,
            )));
        }
        self.inner.call(request).await
    }

    fn wraps(&self) -> Option<&dyn Store> {
        Some(&self.inner)
    }
}

/// The store and clock of a process on `cluster` whose clock is
/// `offset_micros` off the cluster's (negative: behind), knowing it or not.
pub fn skewed(
    cluster: &Cluster,
    offset_micros: i64,
    offsets: Offsets,
) -> (SharedStore, SharedClock) {
    let clock: SharedClock = Arc::new(SkewedClock::new(cluster.clock.clone(), offset_micros));
    let store: SharedStore = match offsets {
        Offsets::Measured => cluster.store.clone(),
        Offsets::Ignored => Arc::new(OwnClock {
            inner: cluster.store.clone(),
            clock: clock.clone(),
        }),
    };
    (store, clock)
}
