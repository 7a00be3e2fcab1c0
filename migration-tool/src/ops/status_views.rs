//! The parts of `migrate status`'s report ([`super::status::StatusReport`]):
//! the stage, the nodes, the locks, the clocks and the connection, and
//! whether the fleet's rows could be read at all.

use std::collections::BTreeMap;

use lockshift_decide::algorithm::Stage;
use lockshift_decide::registry::NodeInfo;
use lockshift_decide::rollout::Guard;
use serde::Serialize;

use super::{At, ms};

/// Whether the fleet's rows (the stage, its history, the registry, the
/// activity record) could be read: they live at the fleet home
/// (docs/design.md §4a), and while it moves, or from the far side of a
/// split, they cannot — `status` still answers, with the homes.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FleetRows {
    /// They were read; the stage, nodes, locks and verdict hold.
    pub read: bool,
    /// Why not: the refusal, naming where they live and, while they move,
    /// when the new home serves.
    pub why: Option<String>,
    /// While they move: how long until the new home serves them.
    pub serves_in_ms: Option<u64>,
}

/// How far apart the clocks of two Cassandra nodes may be before a cell can
/// expire, as a reading coordinator sees it, before its owner is told
/// (lock invariant L3): each cell's TTL − 1 s − the time after which its
/// owner counts it lost. Settings validation refuses less than 250 ms.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct ClockTolerance {
    /// The smaller of the two: what the fleet's node clocks must keep to.
    pub node_skew_tolerance_ms: u64,
    /// Holders' cells (`lock.lease_ttl`).
    pub holders_ms: u64,
    /// Waiters' cells (`lock.queue.waiting_ttl`).
    pub waiters_ms: u64,
}

impl ClockTolerance {
    /// The tolerance of `settings`' leases.
    pub fn of(settings: &lockshift::Settings) -> ClockTolerance {
        let lease = settings.lock.lease();
        let holders = ms(lease.node_skew_tolerance());
        let waiters = ms(settings.lock.queue.waiting_node_skew_tolerance(&lease));
        ClockTolerance {
            node_skew_tolerance_ms: holders.min(waiters),
            holders_ms: holders,
            waiters_ms: waiters,
        }
    }
}

/// How `migrate` is connected: encryption and authentication, never the
/// password.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ConnectionView {
    /// TLS to the nodes (`store.cql.tls.ca_file` given).
    pub encrypted: bool,
    /// The nodes' certificates are checked against their addresses
    /// (`false` with TLS: `store.cql.tls.verify_hostname = false`, unsafe).
    pub hostname_verified: bool,
    /// A client certificate is presented.
    pub client_certificate: bool,
    /// Password authentication is used.
    pub authenticated: bool,
    /// The user name, when authenticated.
    pub user: Option<String>,
}

impl ConnectionView {
    /// The view of `cql`'s settings.
    pub fn of(cql: &lockshift_store::CqlSettings) -> ConnectionView {
        let security = cql.security();
        ConnectionView {
            encrypted: security.encrypted,
            hostname_verified: security.hostname_verified,
            client_certificate: security.client_certificate,
            authenticated: security.authenticated,
            user: cql.username.clone(),
        }
    }
}

/// The stage record.
#[derive(Debug, Clone, Serialize)]
pub struct StageView {
    /// `legacy`, `dual`, `queue` or `complete`.
    pub stage: Stage,
    /// Increases with every transition; 0 before the first.
    pub version: u64,
    /// When it was set (µs; 0 before the first transition).
    pub changed_at_us: i64,
    /// Who set it.
    pub by: String,
    /// Why.
    pub reason: String,
}

/// One live node process: what it says of itself at every heartbeat
/// ([`NodeInfo`]) and what `status` derives from its registry row.
///
/// The row's JSON is [`NodeInfo`]'s keys and the four derived ones side by
/// side (`info` is flattened), with two differences from the registry
/// record: `acting_version` is [`NodeInfo::acting`], what the guards
/// compare ([`build`](super::status::build) sets it), and the registry's own bookkeeping —
/// `started_at`, `last_used` and `lease` — is left out, as it was when the
/// row copied its fields (no key is added to `"version": 1`).
#[derive(Debug, Clone, Serialize)]
pub struct NodeRow {
    /// What the node said at its last heartbeat; `acting_version` is
    /// [`NodeInfo::acting`] (its seen version when it reports none).
    #[serde(flatten, serialize_with = "shown")]
    pub info: NodeInfo,
    /// Live processes under this node id, this one included: more than one
    /// means two processes share a `node.id` (each is counted).
    pub processes_under_id: usize,
    /// Time since its last heartbeat.
    pub heartbeat_age_ms: u64,
    /// Time before it drops out of the registry.
    pub ttl_left_ms: Option<u64>,
    /// No heartbeat for longer than `rollout.heartbeat_ttl`: the guards
    /// still count it, as last reported, until its row expires.
    pub silent: bool,
}

/// The [`NodeInfo`] keys a [`NodeRow`] leaves out of its JSON: when the
/// node started, when it last used each algorithm and its lease promise,
/// which `status` never showed.
const HIDDEN: [&str; 3] = ["started_at", "last_used", "lease"];

/// Serializes `info` as a [`NodeRow`]'s flattened keys: [`NodeInfo`]'s
/// own serialization, without [`HIDDEN`].
///
/// Through a JSON object rather than a view struct, so that the row does
/// not list `NodeInfo`'s fields a second time. The reports are only ever
/// written as JSON, and a JSON number keeps its exact `u64`/`i64` value.
fn shown<S: serde::Serializer>(info: &NodeInfo, serializer: S) -> Result<S::Ok, S::Error> {
    use serde::ser::Error as _;
    match serde_json::to_value(info).map_err(S::Error::custom)? {
        serde_json::Value::Object(mut keys) => {
            for key in HIDDEN {
                keys.remove(key);
            }
            keys.serialize(serializer)
        }
        // Not reached: `NodeInfo` is a struct with named fields, which
        // serde_json always writes as an object.
        other => Err(S::Error::custom(format!(
            "a node's registry record is not a JSON object: {other}"
        ))),
    }
}

/// Nodes per mode.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ModeCounts {
    /// By configured mode.
    pub configured: BTreeMap<String, usize>,
    /// By effective algorithm.
    pub effective: BTreeMap<String, usize>,
}

/// Held and waited-for locks.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LockSummary {
    /// Live cells in `main` (a lock normally has one holder).
    pub held: usize,
    /// Of those, cells whose lease is over by their owner's own promise
    /// (a late write, docs/design.md §5 L5): nobody holds through them,
    /// they keep others waiting until they expire; `migrate inspect` marks
    /// them and `migrate clean` deletes them.
    pub lease_over: usize,
    /// Holders by algorithm (`foreign`: written by a binary that predates
    /// lockshift).
    pub held_by: BTreeMap<String, usize>,
    /// Waiters: live queue cells after the head.
    pub waiting: usize,
    /// Locks with at least one waiter.
    pub locks_with_waiters: usize,
    /// The waiter that has waited longest.
    pub oldest_wait: Option<OldestWait>,
}

/// The longest-waiting waiter.
#[derive(Debug, Clone, Serialize)]
pub struct OldestWait {
    /// The lock.
    pub lock: String,
    /// The waiter.
    pub owner: String,
    /// Since it joined the queue (from its queue cell's time prefix).
    pub waiting_ms: u64,
}

/// Stale cells.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StaleSummary {
    /// The threshold for waiters' cells (queue cells, reservations): not
    /// rewritten for longer than this (`lock.queue.stale_after`).
    pub threshold_ms: u64,
    /// The threshold for holdings: not renewed for longer than this (three
    /// `lock.renew_every` periods).
    pub holding_threshold_ms: u64,
    /// Stale cells in all.
    pub cells: usize,
    /// Distinct locks with a stale cell.
    pub locks: usize,
    /// Per table (`main`, `shadow`, `queue`).
    pub by_table: BTreeMap<String, usize>,
}

/// Evidence of legacy use.
#[derive(Debug, Clone, Serialize)]
pub struct LegacyActivity {
    /// The last sign of it: recorded by a node, or cells present now.
    pub last_seen: Option<At>,
    /// What nodes recorded (their own legacy acquisitions).
    pub recorded: Option<At>,
    /// Cells in main/shadow now that are legacy activity (legacy mode, or
    /// not written by lockshift).
    pub cells_now: usize,
    /// How long it must be quiet before `dual` (and `queue`, `complete`).
    pub quiet_period_ms: u64,
}

/// "Safe to advance to X: yes / no, because …".
#[derive(Debug, Clone, Serialize)]
pub struct NextVerdict {
    /// The current stage.
    pub from: Stage,
    /// The next stage.
    pub to: Stage,
    /// Whether every guard holds.
    pub safe: bool,
    /// Every guard: name, passed, detail, what to do.
    pub guards: Vec<Guard>,
    /// The failing guards' details.
    pub because: Vec<String>,
    /// What to do about the failing guards, each once.
    pub actions: Vec<String>,
    /// What the guards cannot know, said with a "yes" as with a "no"
    /// (e.g. no node is registered).
    pub caveats: Vec<String>,
}

/// What the census sent to read the lock tables (docs/design.md §6a):
/// pages of scans, by the datacenter that coordinated them — they grow
/// with token ranges and home datacenters, never with locks.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct CensusRequestsView {
    /// Every request.
    pub requests: u64,
    /// By datacenter (`default`: the store's default route).
    pub by_datacenter: BTreeMap<String, u64>,
    /// By table and datacenter.
    pub by_table: Vec<lockshift_decide::census::CensusRequests>,
}

impl CensusRequestsView {
    /// The view of `census`'s requests.
    pub fn of(census: &lockshift_decide::census::Census) -> Self {
        CensusRequestsView {
            requests: census.requests_total(),
            by_datacenter: census
                .requests_by_datacenter()
                .into_iter()
                .map(|(dc, n)| (dc.map_or_else(|| "default".to_string(), String::from), n))
                .collect(),
            by_table: census.requests.clone(),
        }
    }

    /// `312 requests — dc1 156, dc2 156`.
    pub fn line(&self) -> String {
        let by: Vec<String> = self
            .by_datacenter
            .iter()
            .map(|(dc, n)| format!("{dc} {n}"))
            .collect();
        if by.is_empty() {
            format!("{} requests", self.requests)
        } else {
            format!("{} requests — {}", self.requests, by.join(", "))
        }
    }
}
