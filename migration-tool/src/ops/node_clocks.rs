//! The Cassandra nodes' clocks (issue 41 item 3, docs/design.md §4b): each
//! node's read against this client, alone on a route to it
//! ([`Route::Host`]), a few times, the fastest read kept; every two nodes
//! compared; and the spread judged against what the fleet's leases
//! tolerate (docs/operating.md §12: a cell's TTL counts on the clock of
//! the node that wrote it and is checked on the clock of the node that
//! reads it).
//!
//! What `migrate status` prints of it, and whether it exits 5, is
//! [`NodeClocksReport`]; [`node_clocks`] gathers it, [`judge`] is the pure
//! part.

use std::time::Duration;

use lockshift_decide::offset::{Apart, ClockReading, Spread};
use lockshift_store::offset::measure_offset_until;
use lockshift_store::{Clock, Route, Store};
use serde::Serialize;

use super::ms;

/// How many reads of each node's clock: the fastest is kept.
pub const NODE_CLOCK_SAMPLES: usize = 5;

/// How long a node's reads may take in all: a node out of reach (the far
/// side of a split) is reported as not read, and `status` still answers
/// within seconds.
pub const NODE_CLOCK_DEADLINE: Duration = Duration::from_millis(1500);

/// One node's clock against this client's.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct NodeClockView {
    /// How the store reaches it (`ip:port`).
    pub address: String,
    /// Its datacenter, when known.
    pub datacenter: Option<String>,
    /// The node's clock minus this client's, as read (`None`: not read).
    pub reading: Option<ClockReading>,
    /// The fastest read's round trip, µs.
    pub round_trip_us: Option<u64>,
    /// Reads answered.
    pub answered: usize,
    /// Why it was not read (the last failure), when it was not.
    pub error: Option<String>,
}

/// Two nodes' clocks against each other.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PairView {
    /// One node's address.
    pub a: String,
    /// The other's.
    pub b: String,
    /// `a`'s clock minus `b`'s, within its error.
    pub spread: Spread,
    /// Against the tolerance.
    pub verdict: Apart,
}

/// What `status` shows of the nodes' clocks, and whether it exits 5.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct NodeClocksReport {
    /// How far apart two nodes' clocks may be (the smaller of the holders'
    /// and the waiters' tolerance, `clocks.node_skew_tolerance_ms`).
    pub tolerance_ms: u64,
    /// Every node the store knows, by address.
    pub nodes: Vec<NodeClockView>,
    /// The two nodes read farthest apart, when two were read.
    pub widest: Option<PairView>,
    /// Every pair surely beyond the tolerance: a lease can end for its
    /// readers before its owner is told (docs/operating.md §12).
    pub beyond: Vec<PairView>,
    /// Every pair within the measurement's error of the tolerance: not
    /// known to keep to it.
    pub unsure: Vec<PairView>,
    /// This client's clock against the database's: minus the reading of
    /// the node read most precisely (`None`: no node was read). What a
    /// view judging a writer's time passes as the reader's reading
    /// (`LiveNode::heartbeat_age`).
    pub client: Option<ClockReading>,
    /// Some two nodes are surely beyond the tolerance: `status` exits 5.
    pub exit_unsafe: bool,
}

/// The tolerance between two nodes' clocks that `settings`' leases need:
/// the smaller of the holders' (`lock.lease_ttl`) and the waiters'
/// (`lock.queue.waiting_ttl`), as `status` prints it.
pub fn tolerance_of(settings: &lockshift::Settings) -> Duration {
    let lease = settings.lock.lease();
    lease
        .node_skew_tolerance()
        .min(settings.lock.queue.waiting_node_skew_tolerance(&lease))
}

/// Reads every node's clock [`NODE_CLOCK_SAMPLES`] times against `clock`
/// (the nodes at once, each node's reads one after another) and judges
/// them against `tolerance` ([`tolerance_of`] the fleet's settings).
/// `NODE_CLOCK_SAMPLES` single-row reads of `system.local` per node,
/// within [`NODE_CLOCK_DEADLINE`]: a slow node is read from the reads it
/// answered by then, a node that answered none is reported, not retried.
///
/// # Cancel safety
/// Cancel safe: nothing is written.
pub async fn node_clocks(
    store: &dyn Store,
    clock: &dyn Clock,
    tolerance: Duration,
) -> NodeClocksReport {
    let hosts = store.topology().hosts;
    let reads = hosts.iter().map(|host| async move {
        let route = Route::Host(host.address.clone());
        let m = measure_offset_until(
            store,
            clock,
            &route,
            NODE_CLOCK_SAMPLES,
            Some(tokio::time::Instant::now() + NODE_CLOCK_DEADLINE),
        )
        .await;
        if m.samples.is_empty() && m.timed_out {
            return NodeClockView {
                address: host.address.clone(),
                datacenter: host.datacenter.as_ref().map(ToString::to_string),
                reading: None,
                round_trip_us: None,
                answered: 0,
                error: Some(format!(
                    "no answer within {}",
                    crate::render::age(ms(NODE_CLOCK_DEADLINE))
                )),
            };
        };
        let round_trip_us = m
            .samples
            .iter()
            .filter_map(|s| s.round_trip())
            .min()
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        NodeClockView {
            address: host.address.clone(),
            datacenter: host.datacenter.as_ref().map(ToString::to_string),
            error: m.why_none(),
            reading: m.reading,
            round_trip_us,
            answered: m.samples.len(),
        }
    });
    let nodes = futures::future::join_all(reads).await;
    judge(nodes, tolerance)
}

/// The report on `nodes` as read: every pair of read nodes compared
/// ([`Spread::of`]) and judged against `tolerance`.
pub fn judge(mut nodes: Vec<NodeClockView>, tolerance: Duration) -> NodeClocksReport {
    nodes.sort_by(|a, b| a.address.cmp(&b.address));
    let read: Vec<(&str, ClockReading)> = nodes
        .iter()
        .filter_map(|n| Some((n.address.as_str(), n.reading?)))
        .collect();
    let mut pairs = Vec::new();
    for (i, (a, ra)) in read.iter().enumerate() {
        for (b, rb) in &read[i + 1..] {
            let spread = Spread::of(ra, rb);
            pairs.push(PairView {
                a: (*a).to_string(),
                b: (*b).to_string(),
                verdict: spread.judge(tolerance),
                spread,
            });
        }
    }
    let widest = pairs
        .iter()
        .max_by_key(|p| p.spread.difference_us.unsigned_abs())
        .cloned();
    let of = |verdict: Apart| -> Vec<PairView> {
        pairs
            .iter()
            .filter(|p| p.verdict == verdict)
            .cloned()
            .collect()
    };
    let beyond = of(Apart::Beyond);
    // A node's clock minus this client's is the database's minus it.
    let client = read.iter().min_by_key(|(_, r)| r.error_us).map(|(_, r)| *r);
    NodeClocksReport {
        tolerance_ms: ms(tolerance),
        exit_unsafe: !beyond.is_empty(),
        unsure: of(Apart::Unsure),
        beyond,
        widest,
        client,
        nodes,
    }
}

#[cfg(test)]
#[path = "node_clocks_tests.rs"]
mod tests;
