//! Fenced writes on the embedded store: a linearizable compare-and-set on
//! one cell ([`Store::write_fenced_via`](crate::Store::write_fenced_via)).
//!
//! The store's one mutex makes the read of the fence, the decision and the
//! write one step, as Paxos makes them one for a partition on a cluster.
//! Which replicas decide follows the request's plan: at `SERIAL` (the
//! default route at QUORUM) the reached replicas are repaired first — a
//! Paxos prepare reads a quorum — and the coordinator's copy decides; at
//! `LOCAL_SERIAL` (a route pinned to a datacenter, or a LOCAL_QUORUM
//! client) the coordinator's datacenter alone decides, and other
//! datacenters get the write when their link is up, hinted otherwise — so
//! two datacenters cut apart may each accept a token, exactly as
//! `LOCAL_SERIAL` allows on a cluster. That is why a fenced write goes
//! only to where its lock's home is when it is sent (F1, docs/design.md
//! §5: a homes router resolves [`Route::HomeOf`]; this store, without
//! homes, takes it as the default route).

use super::MemoryStore;
use super::network::Plan;
use super::row::Part;
use crate::cell::{OpKind, Table};
use crate::error::StoreError;
use crate::fenced::{Decision, FencedOutcome, check_token, decide};
use crate::reconcile::CellVersion;
use crate::request::WriteFencedOp;
use crate::route::Route;

impl MemoryStore {
    /// The embedded [`Store::write_fenced_via`](crate::Store::write_fenced_via).
    pub(super) fn fenced_write(
        &self,
        route: &Route,
        table: Table,
        write: WriteFencedOp<'_>,
    ) -> Result<FencedOutcome, StoreError> {
        let WriteFencedOp { row, cell, token } = write;
        check_token(token, table)?;
        let now = self.clock.now();
        let grace = self.gc_grace(table);
        let mut st = self.lock();
        let plan = self.plan(&mut st, route, OpKind::FencedWrite, table, now)?;
        let k = plan.coordinator();
        if let Plan::Quorum { replicas, .. } = &plan {
            for &d in replicas {
                st.replicas[d].sweep_due(now, &|t| self.gc_grace(t));
            }
            Self::repair(&mut st, replicas, table, row, now, grace);
        }
        let (recorded, newest) = st.replicas[k].fence(table, row, &cell.column, now);
        // What a cluster would pay: `IF fence <= ?` fails on a null, so a
        // cell never fenced takes a second round (`IF fence = null`).
        let rounds = if recorded.is_some() { 1 } else { 2 };
        if let Decision::Refuse { recorded } = decide(recorded, token) {
            return Ok(FencedOutcome::Refused {
                recorded,
                rounds: 1,
            });
        }
        // A Paxos ballot is above every earlier one of the partition; the
        // commit carries it as the write timestamp.
        let timestamp = newest.map_or(now, |t| now.max(t.offset_micros(1)));
        let live = |value: Vec<u8>| CellVersion::Live {
            value,
            timestamp,
            expires_at: None,
        };
        let versions = vec![
            (cell.column.clone(), Part::Value, live(cell.value.clone())),
            (
                cell.column.clone(),
                Part::Fence,
                live(token.to_be_bytes().to_vec()),
            ),
        ];
        self.apply_planned(&mut st, plan, table, row, versions, now);
        Ok(FencedOutcome::Applied { rounds })
    }
}
