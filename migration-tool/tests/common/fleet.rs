//! A fleet of processes on one embedded store under a paused clock, for
//! the `clean` schedules: each process its own lock context, fault wrapper
//! and (possibly skewed) clock, registered with the lease it promises; and
//! what its holders saw.

// Test harness: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use lockshift_decide::registry::{LeasePromise, NodeInfo};
use lockshift_lock::{Algorithm, LeaseSettings, LockContext, Locker, NodeId};
use lockshift_rollout::registry::heartbeat;
use lockshift_rollout::{LockerSettings, Lockers};
use lockshift_store::{
    FaultPlan, FaultyStore, MemoryStore, SharedClock, SharedStore, SkewedClock, TokioClock, Ttl,
};
use tokio::time::Instant;

/// `s` seconds.
pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// `ms` milliseconds.
pub fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// A lease of `ttl_s` seconds renewed every `renew_s`, lost at half.
pub fn lease(ttl_s: u64, renew_s: u64) -> LeaseSettings {
    LeaseSettings {
        lease_ttl: secs(ttl_s),
        renew_every: secs(renew_s),
        lost_after_fraction: 0.5,
    }
}

/// One store and its clock (also the operator's), and when the test began.
pub struct Fleet {
    pub clock: Arc<TokioClock>,
    pub store: Arc<MemoryStore>,
    pub started: Instant,
}

/// A process of the fleet: its lock context (node id, incarnation, lease
/// settings), over its own fault wrapper and clock.
pub struct Process {
    pub node: String,
    pub ctx: Arc<LockContext>,
    pub lockers: Lockers,
}

impl Process {
    /// Its locker of `algorithm`.
    pub fn locker(&self, algorithm: Algorithm) -> Arc<dyn Locker> {
        self.lockers.build(algorithm)
    }
}

/// What a holder saw.
#[derive(Debug, Clone)]
pub struct Held {
    /// When its lost signal fired (it learned it had lost the lock).
    pub learned_lost_at: Option<Duration>,
}

impl Fleet {
    /// A new store on a new clock (the test's runtime must be paused).
    pub fn new() -> Fleet {
        let clock = Arc::new(TokioClock::new());
        Fleet {
            store: Arc::new(MemoryStore::with_clock(clock.clone())),
            clock,
            started: Instant::now(),
        }
    }

    /// How long the test has run.
    pub fn now(&self) -> Duration {
        self.started.elapsed()
    }

    /// The store as a process sees it: a millisecond or two per operation.
    pub fn faulty(&self, seed: u64) -> SharedStore {
        Arc::new(
            FaultyStore::new(self.store.clone() as SharedStore, seed)
                .with_plan(FaultPlan::latency(millis(1), millis(2))),
        )
    }

    /// Process `seed` of `node`, its clock `offset_s` seconds off, writing
    /// through `store` (default: [`Fleet::faulty`]), its lockers set by
    /// `settings`.
    pub fn process(
        &self,
        (node, seed, offset_s): (&str, u64, i64),
        lease: LeaseSettings,
        store: Option<SharedStore>,
        settings: LockerSettings,
    ) -> Process {
        let clock: SharedClock =
            Arc::new(SkewedClock::new(self.clock.clone(), offset_s * 1_000_000));
        let ctx = Arc::new(
            LockContext::new(
                store.unwrap_or_else(|| self.faulty(seed)),
                clock,
                NodeId::new(node).unwrap(),
                lease,
                Some(seed),
            )
            .unwrap(),
        );
        Process {
            node: node.to_string(),
            lockers: Lockers::new(ctx.clone(), settings),
            ctx,
        }
    }

    /// A registry row for `p`'s process announcing `promise` (live for
    /// the whole test; written by the test, whatever `p`'s store does).
    pub async fn register(&self, p: &Process, promise: Option<LeasePromise>) {
        let info = NodeInfo {
            incarnation: Some(p.ctx.incarnation().to_string()),
            lease: promise,
            ..super::node_info(&p.node, Algorithm::Combined)
        };
        heartbeat(
            self.store.as_ref(),
            self.clock.as_ref(),
            &info,
            Ttl::from_secs(600).unwrap(),
        )
        .await
        .unwrap();
    }
}
