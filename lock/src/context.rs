//! What every locker is built from: store, clock, node identity, lease
//! settings and a seeded random source; plus the wait helper that enforces
//! deadlines, cancellation and invalidation.

use std::fmt;
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lockshift_store::settings::InvalidSetting;
use lockshift_store::{SharedClock, SharedStore, StoreError, Ttl};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api::{AcquireOptions, Algorithm, WaitWatch, WaitingFor};
use crate::binding::Binding;
use crate::error::AcquireError;
use crate::id::{Incarnation, LockId, NodeId, OwnerId};
use crate::lease::{Lease, WaitingTerms};
use crate::settings::LeaseSettings;
use crate::slots::{Slot, Slots};

/// The parts every locker shares.
pub struct LockContext {
    store: SharedStore,
    clock: SharedClock,
    node: NodeId,
    lease: LeaseSettings,
    ttl: Ttl,
    rng: Mutex<StdRng>,
    slots: Arc<Slots>,
    /// The last stamp any lease of this context used: stamps increase
    /// across leases (L1), so a reused slot's new cells win (L7).
    stamps: Arc<AtomicI64>,
}

impl fmt::Debug for LockContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockContext")
            .field("store", &self.store.describe())
            .field("node", &self.node)
            .field("lease", &self.lease)
            .finish()
    }
}

impl LockContext {
    /// A context over `store`, stamping with `clock`, creating owners for
    /// `node`. `seed` makes the incarnation in owner ids and the backoff
    /// reproducible (tests, simulations); `None` seeds from the OS.
    ///
    /// # Errors
    /// The first rule the lease settings break.
    pub fn new(
        store: SharedStore,
        clock: SharedClock,
        node: NodeId,
        lease: LeaseSettings,
        seed: Option<u64>,
    ) -> Result<Self, InvalidSetting> {
        if let Some(problem) = lease.problems().into_iter().next() {
            return Err(problem);
        }
        let ttl = lease.ttl()?;
        let rng = match seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::from_os_rng(),
        };
        Ok(LockContext {
            store,
            clock,
            slots: Arc::new(Slots::new(node.clone(), crate::id::new_incarnation(seed))),
            node,
            lease,
            ttl,
            rng: Mutex::new(rng),
            stamps: Arc::new(AtomicI64::new(i64::MIN)),
        })
    }

    /// This context, writing owner ids of process `incarnation` (a node
    /// passes its own, so lock cells and its registry row name the same
    /// process).
    pub fn with_incarnation(mut self, incarnation: Incarnation) -> Self {
        self.slots = Arc::new(Slots::new(self.node.clone(), incarnation));
        self
    }

    /// The process whose owner ids this context writes.
    pub fn incarnation(&self) -> Incarnation {
        self.slots.incarnation()
    }

    /// The store.
    pub fn store(&self) -> &SharedStore {
        &self.store
    }

    /// The clock writes are stamped with.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// This node.
    pub fn node(&self) -> &NodeId {
        &self.node
    }

    /// The lease settings.
    pub fn lease_settings(&self) -> &LeaseSettings {
        &self.lease
    }

    /// A slot of `lock` for one acquisition: the owner id it writes under,
    /// reused from earlier acquisitions whose cells are gone (L7).
    pub fn take_slot(&self, lock: &LockId) -> Slot {
        self.slots.take(lock)
    }

    /// Starts the lease of an acquisition writing under `slot`; `mark`
    /// names this acquisition apart from others of the same slot, where a
    /// waiter reserved behind it must (the queue's arrival, Q6).
    pub fn start_lease(&self, slot: Slot, algorithm: Algorithm, mark: Option<String>) -> Lease {
        self.start_lease_with(slot, algorithm, mark, None)
    }

    /// As [`start_lease`](Self::start_lease), for a waiter whose cells live
    /// by `waiting` until it holds (lease invariant L6).
    pub fn start_waiting_lease(
        &self,
        slot: Slot,
        algorithm: Algorithm,
        mark: Option<String>,
        waiting: WaitingTerms,
    ) -> Lease {
        self.start_lease_with(slot, algorithm, mark, Some(waiting))
    }

    fn start_lease_with(
        &self,
        slot: Slot,
        algorithm: Algorithm,
        mark: Option<String>,
        waiting: Option<WaitingTerms>,
    ) -> Lease {
        Lease::start_in_slot(
            self.store.clone(),
            self.clock.clone(),
            self.lease.clone(),
            self.ttl,
            slot,
            algorithm.as_str(),
            mark,
            self.stamps.clone(),
            waiting,
        )
    }

    /// A uniformly random duration in `[0, max)` (zero if `max` is zero).
    pub fn random_below(&self, max: Duration) -> Duration {
        if max.is_zero() {
            return Duration::ZERO;
        }
        self.with_rng(|rng| rng.random_range(Duration::ZERO..max))
    }

    /// A uniformly random fraction in `[0, 1)`.
    pub fn random_fraction(&self) -> f64 {
        self.with_rng(|rng| rng.random::<f64>())
    }

    fn with_rng<T>(&self, f: impl FnOnce(&mut StdRng) -> T) -> T {
        f(&mut self.rng.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Why a wait was cut short.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interrupted {
    /// The deadline passed.
    Timeout,
    /// The caller's cancellation token fired.
    Cancelled,
    /// The acquisition's binding was invalidated (R3).
    Invalidated,
}

/// The deadline, cancellation and invalidation of one acquisition.
#[derive(Debug, Clone)]
pub struct Waiting {
    started: Instant,
    deadline: Option<Instant>,
    cancel: CancellationToken,
    binding: Binding,
    watch: Option<WaitWatch>,
}

impl Waiting {
    /// Starts the clock for an acquisition with `options`, bound by
    /// `binding`.
    pub fn new(options: &AcquireOptions, binding: &Binding) -> Self {
        let started = Instant::now();
        Waiting {
            started,
            deadline: options.timeout.map(|t| started + t),
            cancel: options.cancel.clone().unwrap_or_default(),
            binding: binding.clone(),
            watch: options.watch.clone(),
        }
    }

    /// Tells the watcher, if any, what the acquisition now waits for:
    /// `update` changes the last report and says whether it did.
    pub fn saw(&self, update: impl FnOnce(&mut WaitingFor) -> bool) {
        if let Some(watch) = &self.watch {
            watch.send_if_modified(update);
        }
    }

    /// How long the acquisition has taken so far.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Whether the acquisition must stop now: the caller's cancel first,
    /// then an invalidation, then the deadline.
    pub fn check(&self) -> Result<(), Interrupted> {
        if self.cancel.is_cancelled() {
            return Err(Interrupted::Cancelled);
        }
        if self.binding.is_invalidated() {
            return Err(Interrupted::Invalidated);
        }
        match self.deadline {
            Some(d) if Instant::now() >= d => Err(Interrupted::Timeout),
            _ => Ok(()),
        }
    }

    /// Sleeps for `d`, cut short by the deadline, cancellation or
    /// invalidation; a pause below tokio's millisecond tick ends on time
    /// (`pause.rs`).
    ///
    /// # Errors
    /// The interruption, if one happened.
    pub async fn pause(&self, d: Duration) -> Result<(), Interrupted> {
        self.check()?;
        let wake = Instant::now() + d;
        let until = self.deadline.map_or(wake, |dl| dl.min(wake));
        // Biased: a cancel or an invalidation due together with the
        // deadline is reported as itself, the same in every run.
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(Interrupted::Cancelled),
            () = self.binding.invalidated() => Err(Interrupted::Invalidated),
            () = crate::pause::sleep_until(until) => if until < wake { Err(Interrupted::Timeout) } else { Ok(()) },
        }
    }

    /// The error for an interruption of the acquisition of `lock` by
    /// `owner`. An invalidation ends as [`AcquireError::Cancelled`] too: the
    /// binder cancelled it, and tells it from its caller's cancel by the
    /// caller's token, which has not fired ([`Binding`]).
    pub fn error(&self, why: Interrupted, lock: &LockId, owner: &OwnerId) -> AcquireError {
        match why {
            Interrupted::Timeout => AcquireError::Timeout {
                lock: lock.clone(),
                owner: owner.clone(),
                waited: self.elapsed(),
            },
            Interrupted::Cancelled | Interrupted::Invalidated => AcquireError::Cancelled {
                lock: lock.clone(),
                owner: owner.clone(),
            },
        }
    }
}

/// Why an acquisition loop stopped without the lock.
#[derive(Debug)]
pub enum Stop {
    /// Deadline, cancellation or invalidation.
    Interrupted(Interrupted),
    /// A store error retrying cannot fix.
    Store(StoreError),
}

impl From<Interrupted> for Stop {
    fn from(why: Interrupted) -> Self {
        Stop::Interrupted(why)
    }
}

impl Stop {
    /// The caller-facing error for `lock` and `owner`.
    pub fn into_error(self, waiting: &Waiting, lock: &LockId, owner: &OwnerId) -> AcquireError {
        match self {
            Stop::Interrupted(why) => waiting.error(why, lock, owner),
            Stop::Store(error) => AcquireError::Store {
                lock: lock.clone(),
                owner: owner.clone(),
                error,
            },
        }
    }
}
