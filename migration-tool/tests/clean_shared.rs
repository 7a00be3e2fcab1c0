//! Issue 43: `migrate clean` knows the cells of shared acquisitions — a
//! semaphore's permits and a read/write lock's readers (docs/design.md
//! §3a) — with real queue and combined lockers on a store the test
//! controls, under a paused clock, as `clean_schedules.rs` does for plain
//! locks.
//!
//! What it proves:
//!
//! - A live semaphore of 3 (three permits held, a fourth waiting with its
//!   queue cell and its *standing* `main` cell) and a live read/write lock
//!   (two readers held, a writer waiting with its reservation) lose no
//!   cell to `clean --apply`, plain or `--force --stale-after 1s`: every
//!   holder keeps its lock (its lost signal never fires), never more hold
//!   than the kind allows, and the waiter gets in after the release it
//!   waits for, not before.
//! - Permit holders that died without releasing (their process cut off
//!   from the store for good, as `clean_schedules.rs` cuts off a late
//!   renewer, then their guards dropped) are kept by a plain `clean` (their
//!   process's registry row is still live) and deleted by `clean --force`
//!   once overdue by their own promise; the report names each as a
//!   `stale_holder` `main` cell of the lock, written by the lock's
//!   algorithm (not foreign). The waiter behind them, and a new permit
//!   asked for afterwards, then get in long before the dead cells' TTL.

// Integration tests: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::fleet::{Fleet, Held, Process, lease, millis, secs};

use std::collections::BTreeSet;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use lockshift::Settings;
use lockshift_decide::clean::{Action, PromiseSource};
use lockshift_decide::registry::LeasePromise;
use lockshift_lock::{
    AcquireOptions, Algorithm, Binding, LeaseSettings, LockGuard, LockId, Locker, Sharing,
};
use lockshift_migration_tool::ops::Env;
use lockshift_migration_tool::ops::clean::{CleanOptions, CleanReport, Reason, clean};
use lockshift_rollout::LockerSettings;
use lockshift_rollout::registry::LeaseRules;
use lockshift_store::{
    Cell, Request, Response, RowQuery, SharedStore, Store, StoreError, StoreErrorKind, Table,
    schema,
};
use tokio::task::JoinHandle;
use tokio::time::{sleep, sleep_until};

const LOCK: &str = "pool";
/// The lockers that take shared acquisitions (P4: legacy refuses them).
const ALGORITHMS: [Algorithm; 2] = [Algorithm::Queue, Algorithm::Combined];

fn three() -> Sharing {
    Sharing::permit(3).unwrap()
}

/// Who is inside the lock, as what, and every entry the kinds forbid.
#[derive(Debug, Default)]
struct Inside {
    holders: Mutex<Vec<(String, Sharing)>>,
    overcommits: Mutex<Vec<String>>,
}

impl Inside {
    fn enter(&self, who: &str, kind: Sharing, at: Duration) {
        let mut holders = self.holders.lock().unwrap_or_else(PoisonError::into_inner);
        let kinds: Vec<Sharing> = holders.iter().map(|(_, k)| *k).collect();
        let allowed = match kind {
            Sharing::Exclusive => kinds.is_empty(),
            Sharing::Shared => !kinds.contains(&Sharing::Exclusive),
            Sharing::Permit { permits } => kinds.len() < permits.get() as usize,
        };
        if !allowed {
            self.overcommits
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(format!(
                    "{who} entered as {kind} at {at:?} beside {holders:?}"
                ));
        }
        holders.push((who.to_string(), kind));
    }

    fn exit(&self, who: &str) {
        self.holders
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(h, _)| h != who);
    }

    fn overcommits(&self) -> Vec<String> {
        self.overcommits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A process's store that can be cut off from the cluster for good: a
/// crashed process (or one that can never reach the store again). Every
/// request after the cut fails, so it neither renews nor releases.
#[derive(Debug)]
struct CutStore {
    inner: SharedStore,
    cut_off: AtomicBool,
}

#[async_trait]
impl Store for CutStore {
    async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
        if self.cut_off.load(Ordering::SeqCst) {
            let table: Table = request.table;
            return Err(StoreError::new(
                StoreErrorKind::Unavailable,
                request.kind(),
                Some(table),
                "the process is gone",
            ));
        }
        self.inner.call(request).await
    }
    fn describe(&self) -> String {
        "cut".into()
    }
}

/// The fleet (one store and its clock, also the operator's), and the
/// observer.
struct World {
    fleet: Fleet,
    inside: Arc<Inside>,
}

impl Deref for World {
    type Target = Fleet;

    fn deref(&self) -> &Fleet {
        &self.fleet
    }
}

impl World {
    fn new() -> World {
        World {
            fleet: Fleet::new(),
            inside: Arc::default(),
        }
    }

    /// Process `seed` of `node`, writing through `store` (default:
    /// [`Fleet::faulty`]), registered with its lease promise.
    async fn process(
        &self,
        node: &str,
        seed: u64,
        lease: LeaseSettings,
        store: Option<SharedStore>,
    ) -> Process {
        let promise = LeasePromise::of(&lease);
        let p = self
            .fleet
            .process((node, seed, 0), lease, store, LockerSettings::default());
        self.register(&p, Some(promise)).await;
        p
    }

    /// Takes the lock as `kind` and holds it for `hold` in a task — or
    /// until its lost signal fires — then releases it.
    async fn hold(
        &self,
        locker: Arc<dyn Locker>,
        kind: Sharing,
        hold: Duration,
    ) -> (String, JoinHandle<Held>) {
        let guard = acquire(locker.as_ref(), kind, secs(60)).await.unwrap();
        let owner = guard.owner().as_str().to_string();
        self.inside.enter(&owner, kind, self.now());
        let (inside, started, who) = (self.inside.clone(), self.started, owner.clone());
        let task = tokio::spawn(async move {
            let learned_lost_at = tokio::select! {
                _ = guard.until_lost() => Some(started.elapsed()),
                () = sleep(hold) => None,
            };
            inside.exit(&who);
            let _ = guard.release().await;
            Held { learned_lost_at }
        });
        (owner, task)
    }

    /// A contender that waits (up to `wait`) to take the lock as `kind`
    /// and, once in, holds it for `hold` (or until lost). Its owner id and
    /// entry time, if it got in.
    fn contend(
        &self,
        locker: Arc<dyn Locker>,
        kind: Sharing,
        wait: Duration,
        hold: Duration,
    ) -> JoinHandle<Option<(String, Duration)>> {
        let (inside, started) = (self.inside.clone(), self.started);
        tokio::spawn(async move {
            let guard = acquire(locker.as_ref(), kind, wait).await.ok()?;
            let owner = guard.owner().as_str().to_string();
            let entered = started.elapsed();
            inside.enter(&owner, kind, entered);
            tokio::select! {
                _ = guard.until_lost() => {}
                () = sleep(hold) => {}
            }
            inside.exit(&owner);
            let _ = guard.release().await;
            Some((owner, entered))
        })
    }

    /// The operator's environment: the default settings (skew margin 5 s),
    /// the shared store, the server's clock.
    fn operator(&self) -> Env {
        Env::new(
            Settings::default(),
            self.store.clone() as SharedStore,
            self.clock.clone(),
        )
    }

    /// Runs `clean --apply` with `options` from `first` on, every `every`,
    /// until `until` (times since the world began).
    async fn clean_every(
        &self,
        options: &CleanOptions,
        first: Duration,
        every: Duration,
        until: Duration,
    ) -> Vec<CleanReport> {
        let env = self.operator();
        let mut reports = Vec::new();
        let mut next = self.started + first;
        while next <= self.started + until {
            sleep_until(next).await;
            reports.push(clean(&env, options, true, |_| {}).await.unwrap());
            next += every;
        }
        reports
    }

    fn assert_within_kind(&self, what: &str) {
        let overcommits = self.inside.overcommits();
        assert!(overcommits.is_empty(), "{what}: {overcommits:#?}");
    }

    async fn cells(&self, table: Table) -> Vec<Cell> {
        self.store
            .read(table, LOCK, &RowQuery::all())
            .await
            .unwrap()
    }
}

async fn acquire(locker: &dyn Locker, kind: Sharing, wait: Duration) -> Result<LockGuard, String> {
    locker
        .acquire_with(
            &LockId::new(LOCK).unwrap(),
            AcquireOptions::with_timeout(wait).shared_as(kind),
            &Binding::unbound(),
        )
        .await
        .map_err(|e| e.to_string())
}

/// Cells `clean` deleted across `reports`, as (owner, table).
fn deleted(reports: &[CleanReport]) -> Vec<(String, String)> {
    reports
        .iter()
        .flat_map(|r| r.cells.iter())
        .filter(|c| c.action == Action::Deleted)
        .map(|c| (c.owner.clone(), c.table.clone()))
        .collect()
}

/// The ways `clean --apply` is run on a live lock: plain, and `--force`
/// with `--stale-after 1s` (which would take any cell written without a
/// TTL), both with the least `--stale-multiple` (2).
fn live_cleans() -> [(&'static str, CleanOptions); 2] {
    [
        ("clean", CleanOptions::new(None, 2, false, 100).unwrap()),
        (
            "clean --force --stale-after 1s",
            CleanOptions::new(Some(secs(1)), 2, true, 100).unwrap(),
        ),
    ]
}

/// A live semaphore of 3: three permits held (TTL 4 s, renewed every
/// second), a fourth waiting — first in line, so it stands in `main` —
/// while `clean --apply` runs every 1.3 s for 10 s. Nothing is deleted,
/// no holder learns it lost its permit, never a fourth inside, and the
/// waiter gets in when the first permit is released (at 12 s), not before
/// and not only when the others are (at 20 s).
#[tokio::test(start_paused = true)]
async fn clean_spares_a_live_semaphore_and_its_waiter() {
    for algorithm in ALGORITHMS {
        for (how, options) in live_cleans() {
            let what = format!("{algorithm} semaphore of 3, {how}");
            let w = World::new();
            let lease = lease(4, 1);
            let mut holders = Vec::new();
            for (i, hold) in [12, 20, 20].into_iter().enumerate() {
                let p = w
                    .process(&format!("permit-{i}"), i as u64 + 1, lease.clone(), None)
                    .await;
                holders.push(w.hold(p.locker(algorithm), three(), secs(hold)).await);
            }
            let next = w.process("permit-next", 9, lease.clone(), None).await;
            let waiter = w.contend(next.locker(algorithm), three(), secs(60), millis(100));
            sleep(millis(500)).await;

            // The premise: three holdings, the waiter standing beside
            // them, its queue cell in line.
            let main = w.cells(schema::MAIN).await;
            let standing = main
                .iter()
                .filter(|c| c.value.ends_with(b":standing"))
                .count();
            assert_eq!((main.len(), standing), (4, 1), "{what}: {main:#?}");
            assert!(
                main.iter()
                    .all(|c| String::from_utf8_lossy(&c.value).contains("permits=3")),
                "{what}: {main:#?}"
            );
            assert!(
                !w.cells(schema::QUEUE).await.is_empty(),
                "{what}: the waiter is in line"
            );

            let reports = w
                .clean_every(&options, millis(200), millis(1300), secs(10))
                .await;
            for (owner, task) in holders {
                let held = task.await.unwrap();
                assert_eq!(
                    held.learned_lost_at, None,
                    "{what}: {owner} lost its permit: {reports:#?}"
                );
            }
            let entered = waiter.await.unwrap();
            w.assert_within_kind(&what);
            assert_eq!(deleted(&reports), [], "{what}: {reports:#?}");
            assert!(
                entered
                    .as_ref()
                    .is_some_and(|(_, at)| *at >= secs(12) && *at < secs(20)),
                "{what}: the waiter got in after the first release: {entered:?}"
            );
        }
    }
}

/// A live read/write lock: two readers held (released at 12 s and 16 s),
/// a writer waiting behind them with its reservation in `main`, while
/// `clean --apply` runs every 1.3 s for 10 s. Nothing is deleted, no
/// reader learns it lost its share, the writer is never inside beside a
/// reader, and it gets in once the last reader leaves.
#[tokio::test(start_paused = true)]
async fn clean_spares_live_readers_and_a_waiting_writer() {
    for algorithm in ALGORITHMS {
        for (how, options) in live_cleans() {
            let what = format!("{algorithm} read/write lock, {how}");
            let w = World::new();
            let lease = lease(4, 1);
            let mut readers = Vec::new();
            for (i, hold) in [12, 16].into_iter().enumerate() {
                let p = w
                    .process(&format!("reader-{i}"), i as u64 + 1, lease.clone(), None)
                    .await;
                readers.push(
                    w.hold(p.locker(algorithm), Sharing::Shared, secs(hold))
                        .await,
                );
            }
            let writer = w.process("writer", 9, lease.clone(), None).await;
            let waiter = w.contend(
                writer.locker(algorithm),
                Sharing::Exclusive,
                secs(60),
                millis(100),
            );
            sleep(millis(500)).await;

            // The premise: both readers hold, the writer is in line.
            let main = w.cells(schema::MAIN).await;
            let shared = main
                .iter()
                .filter(|c| String::from_utf8_lossy(&c.value).ends_with(":shared"))
                .count();
            assert_eq!(shared, 2, "{what}: {main:#?}");
            assert!(
                !w.cells(schema::QUEUE).await.is_empty(),
                "{what}: the writer is in line"
            );

            let reports = w
                .clean_every(&options, millis(200), millis(1300), secs(10))
                .await;
            for (owner, task) in readers {
                let held = task.await.unwrap();
                assert_eq!(
                    held.learned_lost_at, None,
                    "{what}: {owner} lost its share: {reports:#?}"
                );
            }
            let entered = waiter.await.unwrap();
            w.assert_within_kind(&what);
            assert_eq!(deleted(&reports), [], "{what}: {reports:#?}");
            assert!(
                entered.as_ref().is_some_and(|(_, at)| *at >= secs(16)),
                "{what}: the writer got in after the last reader left: {entered:?}"
            );
        }
    }
}

/// Three permit holders (TTL 120 s, renewing every 5 s) die without
/// releasing: their processes are cut off from the store for good and
/// their guards dropped, while their registry rows stay live (a crashed
/// process's row outlives it by its registry TTL). A fourth process waits
/// for a permit. 16 s later a plain `clean` keeps their cells (their
/// processes look live) and deletes nothing; `clean --force
/// --stale-multiple 2` then deletes exactly their three `main` cells
/// after its second look, naming each as a `stale_holder` of the lock
/// written by the lock's algorithm, judged by its owner's registry
/// promise. The waiter gets in at once, and a new permit too — long
/// before the dead cells would have expired.
#[tokio::test(start_paused = true)]
async fn clean_force_removes_permits_of_dead_holders() {
    for algorithm in ALGORITHMS {
        let what = format!("{algorithm} semaphore of 3, its holders dead");
        let w = World::new();
        let lease = lease(120, 5);
        let mut dead = Vec::new();
        for i in 0..3_u64 {
            let cut = Arc::new(CutStore {
                inner: w.faulty(i + 1),
                cut_off: AtomicBool::new(false),
            });
            let node = format!("dead-{i}");
            let p = w
                .process(&node, i + 1, lease.clone(), Some(cut.clone()))
                .await;
            let guard = acquire(p.locker(algorithm).as_ref(), three(), secs(60))
                .await
                .unwrap();
            dead.push((node, guard.owner().as_str().to_string(), cut, guard, p));
        }
        let next = w.process("alive-1", 8, lease.clone(), None).await;
        let waiter = w.contend(next.locker(algorithm), three(), secs(300), millis(100));
        sleep(millis(500)).await;

        // They die: cut off, then their guards go (a release that never
        // reaches the store).
        let died = w.now();
        let dead_owners: BTreeSet<String> = dead.iter().map(|d| d.1.clone()).collect();
        let mut processes = Vec::new();
        for (node, owner, cut, guard, p) in dead {
            cut.cut_off.store(true, Ordering::SeqCst);
            drop(guard);
            processes.push((node, owner, p));
        }
        sleep(secs(16)).await;
        let main = w.cells(schema::MAIN).await;
        assert_eq!(
            main.iter()
                .filter(|c| dead_owners.contains(&c.column))
                .count(),
            3,
            "{what}: the dead holders' cells stand: {main:#?}"
        );

        let env = w.operator();
        let plain = clean(
            &env,
            &CleanOptions::new(None, 2, false, 100).unwrap(),
            true,
            |_| {},
        )
        .await
        .unwrap();
        assert_eq!(
            deleted(std::slice::from_ref(&plain)),
            [],
            "{what}: {plain:#?}"
        );
        let kept: BTreeSet<String> = plain
            .cells
            .iter()
            .filter(|c| c.action == Action::KeptOwnerLive)
            .map(|c| c.owner.clone())
            .collect();
        assert_eq!(
            kept, dead_owners,
            "{what}: kept without --force: {plain:#?}"
        );

        let forced = clean(
            &env,
            &CleanOptions::new(None, 2, true, 100).unwrap(),
            true,
            |_| {},
        )
        .await
        .unwrap();
        let cleaned = w.now();
        let gone: Vec<_> = forced
            .cells
            .iter()
            .filter(|c| c.action == Action::Deleted)
            .collect();
        let gone_main: BTreeSet<String> = gone
            .iter()
            .filter(|c| c.table == "main")
            .map(|c| c.owner.clone())
            .collect();
        assert_eq!(gone_main, dead_owners, "{what}: {forced:#?}");
        for c in &gone {
            assert!(
                dead_owners.contains(&c.owner),
                "{what}: not a dead holder's: {c:#?}"
            );
            assert_eq!(c.lock, LOCK, "{what}: {c:#?}");
            assert_eq!(c.algorithm, Some(algorithm), "{what}: not foreign: {c:#?}");
            assert!(c.owner_live, "{what}: {c:#?}");
            assert_eq!(
                c.promise.map(|p| p.source),
                Some(PromiseSource::Registry),
                "{what}: {c:#?}"
            );
            if c.table == "main" {
                assert_eq!(c.reason, Reason::StaleHolder, "{what}: {c:#?}");
                let node = processes
                    .iter()
                    .find(|(_, owner, _)| *owner == c.owner)
                    .map(|(node, _, _)| node.clone());
                assert_eq!(c.node, node, "{what}: {c:#?}");
            }
        }

        let (_, entered) = waiter
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{what}: the waiter never got in: {forced:#?}"));
        // The dead cells were renewed at most 5 s before the cut and live
        // 120 s: the waiter owes its permit to clean, not to their TTL.
        assert!(
            entered >= cleaned.saturating_sub(secs(1)) && entered < died + secs(110),
            "{what}: entered at {entered:?}, died at {died:?}, cleaned at {cleaned:?}"
        );
        let fresh = w.process("alive-2", 9, lease.clone(), None).await;
        let asked = w.now();
        let got = w
            .contend(fresh.locker(algorithm), three(), secs(5), millis(100))
            .await
            .unwrap();
        assert!(
            got.is_some_and(|(_, at)| at < asked + secs(2)),
            "{what}: a new permit is free at once"
        );
        w.assert_within_kind(&what);
    }
}
