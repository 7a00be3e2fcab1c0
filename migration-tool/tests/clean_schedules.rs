//! Issue 23: `migrate clean` attacked with real lockers (legacy, queue and
//! combined) on a store the test controls, under a paused clock.
//!
//! An exclusion oracle watches every critical section: a holder is inside
//! from its acquisition until it releases — or until its lost signal fires,
//! the moment it learns that it lost the lock. A second holder entering
//! while the first is still inside is a violation. The operator runs the
//! real `ops::clean::clean` (with `--apply`) against the shared store, on a
//! clock of its own.
//!
//! Schedules 1–3 are the reported ways `--force` let a second holder in
//! beside an owner renewing exactly on time; each failed before the change
//! (`migrate clean --help`, docs/operating.md §4). The last two are the
//! renewal answered as failed that lands seconds later, after its lease
//! was lost (docs/design.md §5, L5).

// Integration tests: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::fleet::{Fleet, Held, Process, lease, millis, secs};

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use lockshift::Settings;
use lockshift_decide::clean::Action;
use lockshift_decide::registry::LeasePromise;
use lockshift_legacy::LegacySettings;
use lockshift_lock::{
    AcquireOptions, Algorithm, Binding, LeaseSettings, LockGuard, LockId, Locker,
};
use lockshift_migration_tool::ops::Env;
use lockshift_migration_tool::ops::clean::{CleanOptions, CleanReport, clean};
use lockshift_rollout::LockerSettings;
use lockshift_rollout::registry::LeaseRules;
use lockshift_store::{
    Cell, OpKind, Request, Response, RowQuery, SharedStore, Store, StoreError, StoreErrorKind,
    Table, schema,
};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::{sleep, sleep_until};

const LOCK: &str = "acct";
const ALGORITHMS: [Algorithm; 3] = [Algorithm::Legacy, Algorithm::Queue, Algorithm::Combined];

/// Who is inside which lock, and every time two were.
#[derive(Debug, Default)]
struct Oracle {
    inside: Mutex<HashMap<String, Vec<String>>>,
    violations: Mutex<Vec<String>>,
}

impl Oracle {
    fn enter(&self, lock: &str, who: &str, at: Duration) {
        let mut inside = self.inside.lock().unwrap_or_else(PoisonError::into_inner);
        let holders = inside.entry(lock.to_string()).or_default();
        for other in holders.iter() {
            self.violations
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(format!(
                    "{who} entered {lock} at {at:?} while {other} still believed it held it"
                ));
        }
        holders.push(who.to_string());
    }

    fn exit(&self, lock: &str, who: &str) {
        let mut inside = self.inside.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(holders) = inside.get_mut(lock) {
            holders.retain(|h| h != who);
        }
    }

    fn violations(&self) -> Vec<String> {
        self.violations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The fleet (one store and its clock, also the operator's), and the
/// oracle.
struct World {
    fleet: Fleet,
    oracle: Arc<Oracle>,
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
            oracle: Arc::default(),
        }
    }

    /// Process `seed` of `node`, its clock `offset_s` seconds off, writing
    /// through `store` (default: [`Fleet::faulty`]); its legacy contenders
    /// pause 100 ms.
    fn process(
        &self,
        node: &str,
        seed: u64,
        offset_s: i64,
        lease: LeaseSettings,
        store: Option<SharedStore>,
    ) -> Process {
        let settings = LockerSettings {
            legacy: LegacySettings {
                owner_wait_max: millis(100),
                ..LegacySettings::default()
            },
            ..LockerSettings::default()
        };
        self.fleet
            .process((node, seed, offset_s), lease, store, settings)
    }

    /// Takes the lock with `locker` and holds it for `hold` in a task — or
    /// until its lost signal fires — then releases it (after `before_release`
    /// is notified, if given).
    async fn hold(
        &self,
        locker: Arc<dyn Locker>,
        hold: Duration,
        before_release: Option<Arc<Notify>>,
    ) -> (String, JoinHandle<Held>) {
        let guard = acquire(locker.as_ref(), secs(60)).await.unwrap();
        let owner = guard.owner().as_str().to_string();
        self.oracle.enter(LOCK, &owner, self.now());
        let (oracle, started, who) = (self.oracle.clone(), self.started, owner.clone());
        let task = tokio::spawn(async move {
            let learned_lost_at = tokio::select! {
                _ = guard.until_lost() => Some(started.elapsed()),
                () = sleep(hold) => None,
            };
            oracle.exit(LOCK, &who);
            if let Some(go) = before_release {
                go.notified().await;
            }
            let _ = guard.release().await;
            Held { learned_lost_at }
        });
        (owner, task)
    }

    /// A contender that waits for the lock (up to `wait`) and, once in,
    /// holds it for `hold` (or until lost). Its entry time, if it got in.
    fn contend(
        &self,
        locker: Arc<dyn Locker>,
        wait: Duration,
        hold: Duration,
    ) -> JoinHandle<Option<(String, Duration)>> {
        let (oracle, started) = (self.oracle.clone(), self.started);
        tokio::spawn(async move {
            let guard = acquire(locker.as_ref(), wait).await.ok()?;
            let owner = guard.owner().as_str().to_string();
            let entered = started.elapsed();
            oracle.enter(LOCK, &owner, entered);
            tokio::select! {
                _ = guard.until_lost() => {}
                () = sleep(hold) => {}
            }
            oracle.exit(LOCK, &owner);
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

    fn assert_exclusive(&self, what: &str) {
        let violations = self.oracle.violations();
        assert!(violations.is_empty(), "{what}: {violations:#?}");
    }

    async fn main_cells(&self) -> Vec<Cell> {
        self.store
            .read(schema::MAIN, LOCK, &RowQuery::all())
            .await
            .unwrap()
    }
}

async fn acquire(locker: &dyn Locker, wait: Duration) -> Result<LockGuard, String> {
    locker
        .acquire_with(
            &LockId::new(LOCK).unwrap(),
            AcquireOptions::with_timeout(wait),
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

/// Schedule 1: the owner's clock runs behind the operator's — by the
/// default skew margin (`rollout.clock_skew_margin`, 5 s), and by far more
/// than that. Its cell, renewed a moment ago, looks seconds old. Owners
/// renewing every second (TTL 4 s) on time, legacy, queue and combined
/// alike, with `--stale-multiple` 3 and 5: `--force` must delete none of
/// their cells (the age allows for the margin; beyond it, the second look
/// one and a half renewal periods later finds the cell renewed).
///
/// Before the change: the cell was deleted at once and the waiter entered
/// while the holder still believed it held the lock.
#[tokio::test(start_paused = true)]
async fn force_spares_an_owner_whose_clock_is_behind() {
    for algorithm in ALGORITHMS {
        for (behind, multiple) in [(5, 3), (5, 5), (20, 3)] {
            let what =
                format!("{algorithm} holder, clock {behind}s behind, --stale-multiple {multiple}");
            let w = World::new();
            let lease = lease(4, 1);
            let owner = w.process("web-1", 1, -behind, lease.clone(), None);
            let next = w.process("web-2", 2, 0, lease.clone(), None);
            w.register(&owner, Some(LeasePromise::of(&lease))).await;
            w.register(&next, Some(LeasePromise::of(&lease))).await;
            let (_, holder) = w.hold(owner.locker(algorithm), secs(12), None).await;
            let contender = w.contend(next.locker(algorithm), secs(60), millis(100));
            let options = CleanOptions::new(None, multiple, true, 100).unwrap();
            let reports = w
                .clean_every(&options, millis(200), millis(1300), secs(10))
                .await;
            let held = holder.await.unwrap();
            let entered = contender.await.unwrap();
            w.assert_exclusive(&what);
            assert_eq!(
                held.learned_lost_at, None,
                "{what}: the holder lost its lock: {reports:#?}"
            );
            assert_eq!(deleted(&reports), [], "{what}: {reports:#?}");
            if behind > 5 {
                // Past the margin the age misleads; the second look does not.
                assert!(
                    reports
                        .iter()
                        .flat_map(|r| r.cells.iter())
                        .any(|c| c.action == Action::SkippedRenewed),
                    "{what}: {reports:#?}"
                );
            }
            assert!(
                entered.as_ref().is_some_and(|(_, at)| *at >= secs(12)),
                "{what}: the waiter got in after the holder left: {entered:?}"
            );
        }
    }
}

/// Schedule 2: an owner whose registry row has expired (its heartbeats
/// fail) while its renewals still succeed, renewing every 2 s (TTL 5 s);
/// the operator runs `clean --force --stale-after 1s` again and again.
/// `--stale-after` judges only cells without a TTL: it never shortens the
/// promise the cell's TTL implies.
///
/// Before the change: the cell went at age 1.25 s, the waiter entered, and
/// the holder learned it only at its next renewal.
#[tokio::test(start_paused = true)]
async fn stale_after_never_shortens_the_promise_of_a_cell() {
    for algorithm in ALGORITHMS {
        let what = format!("{algorithm} holder without a registry row");
        let w = World::new();
        let lease = lease(5, 2);
        let owner = w.process("batch-1", 1, 0, lease.clone(), None);
        let next = w.process("batch-2", 2, 0, lease.clone(), None);
        w.register(&next, Some(LeasePromise::of(&lease))).await;
        let (_, holder) = w.hold(owner.locker(algorithm), secs(14), None).await;
        let contender = w.contend(next.locker(algorithm), secs(60), millis(100));
        let options = CleanOptions::new(Some(secs(1)), 3, true, 100).unwrap();
        let reports = w
            .clean_every(&options, millis(250), millis(500), secs(12))
            .await;
        let held = holder.await.unwrap();
        let entered = contender.await.unwrap();
        w.assert_exclusive(&what);
        assert_eq!(
            held.learned_lost_at, None,
            "{what}: the holder lost its lock: {reports:#?}"
        );
        assert_eq!(deleted(&reports), [], "{what}");
        assert!(
            entered.as_ref().is_some_and(|(_, at)| *at >= secs(14)),
            "{what}"
        );
    }
}

/// Schedule 3: a promise that is not the owner's. The holder's process
/// renews every 20 s with a 60 s TTL and its registry row has expired;
/// another process of the same node id (a replacement, another
/// incarnation) announces TTL 4 s, renewal every second. That promise
/// says nothing about the holder's cells: each cell is matched to the
/// exact process that wrote it (node id and incarnation), and — with that
/// process's row gone — judged by its own TTL. Then the same with the
/// holder's own row live beside the other one.
///
/// Before the change: deleted after 3 s, and 17 s of two holders.
#[tokio::test(start_paused = true)]
async fn a_promise_of_another_process_says_nothing_about_a_cell() {
    for algorithm in ALGORITHMS {
        for own_row in [false, true] {
            let what = format!("{algorithm} holder, its own registry row live: {own_row}");
            let w = World::new();
            let slow = lease(60, 20);
            let owner = w.process("svc-1", 1, 0, slow.clone(), None);
            let replacement = w.process("svc-1", 2, 0, lease(4, 1), None);
            assert_ne!(owner.ctx.incarnation(), replacement.ctx.incarnation());
            let next = w.process("svc-2", 3, 0, slow.clone(), None);
            w.register(&replacement, Some(LeasePromise::of(&lease(4, 1))))
                .await;
            w.register(&next, Some(LeasePromise::of(&slow))).await;
            if own_row {
                w.register(&owner, Some(LeasePromise::of(&slow))).await;
            }
            let (_, holder) = w.hold(owner.locker(algorithm), secs(45), None).await;
            let contender = w.contend(next.locker(algorithm), secs(120), millis(100));
            let options = CleanOptions::new(None, 3, true, 100).unwrap();
            let reports = w.clean_every(&options, secs(3), secs(3), secs(42)).await;
            let held = holder.await.unwrap();
            let entered = contender.await.unwrap();
            w.assert_exclusive(&what);
            assert_eq!(
                held.learned_lost_at, None,
                "{what}: the holder lost its lock: {reports:#?}"
            );
            assert_eq!(deleted(&reports), [], "{what}");
            assert!(
                entered.as_ref().is_some_and(|(_, at)| *at >= secs(45)),
                "{what}"
            );
        }
    }
}

/// A process's store that can answer one write to `main` at once with a
/// timeout (`MaybeApplied`) and apply it `late` later — and cut the
/// process off from then on until told otherwise.
#[derive(Debug)]
struct LateStore {
    inner: SharedStore,
    /// Where the late write is applied (the cluster itself).
    cluster: SharedStore,
    late: Mutex<Option<Duration>>,
    cut_off: AtomicBool,
    landed: Arc<Notify>,
}

impl LateStore {
    fn cut(&self, op: OpKind, table: Table) -> Result<(), StoreError> {
        if self.cut_off.load(Ordering::SeqCst) {
            return Err(StoreError::new(
                StoreErrorKind::Unavailable,
                op,
                Some(table),
                "cut off",
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl Store for LateStore {
    async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
        self.cut(request.kind(), request.table)?;
        let late = (request.table == schema::MAIN && request.kind() == OpKind::Write)
            .then(|| {
                self.late
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take()
            })
            .flatten();
        if let Some(late) = late {
            self.cut_off.store(true, Ordering::SeqCst);
            let (cluster, landing, landed) = (
                self.cluster.clone(),
                request.to_owned(),
                self.landed.clone(),
            );
            tokio::spawn(async move {
                sleep(late).await;
                cluster.call(landing.as_request()).await.unwrap();
                landed.notify_one();
            });
            return Err(StoreError::new(
                StoreErrorKind::MaybeApplied,
                OpKind::Write,
                Some(request.table),
                "timed out (it lands later)",
            ));
        }
        self.inner.call(request).await
    }
    fn describe(&self) -> String {
        "late".into()
    }
}

/// The late renewal: a holder (TTL 4 s, renewing every second) has a
/// renewal of its `main` cell answered with a timeout, and is cut off from
/// then on; it learns that it lost the lock, its release fails, its cell
/// expires, the next waiter takes the lock — and 8 s after it was sent the
/// renewal lands, bringing the lost owner's cell back beside the new
/// holder's (L5: nothing a client can do prevents that on Cassandra's
/// semantics once the owner cannot reach the store). It never makes a
/// second holder: the owner was told and never renews again. `inspect`
/// names the real holder and marks the cell `lease over`, `status` counts
/// it, and `clean` without `--force` takes it as a candidate (its owner's
/// own promise says its lease is over) and deletes it once the second look
/// finds it unchanged — here, with a 4 s TTL, the cell is gone by itself
/// by then: the second look outwaits the renewal a live owner of a cell
/// with that much TTL left would make (issue 31: the cell's own TTL, not
/// only its row, says how long). A third waiter gets in only after the
/// holder leaves.
#[tokio::test(start_paused = true)]
async fn a_late_renewal_is_labelled_and_cleaned_but_never_a_holder() {
    for algorithm in ALGORITHMS {
        let what = format!("{algorithm}: a late renewal");
        let w = World::new();
        let lease = lease(4, 1);
        let promise = Some(LeasePromise::of(&lease));
        let late = Arc::new(LateStore {
            inner: w.faulty(11),
            cluster: w.store.clone(),
            late: Mutex::new(None),
            cut_off: AtomicBool::new(false),
            landed: Arc::new(Notify::new()),
        });
        let owner = w.process("late-1", 1, 0, lease.clone(), Some(late.clone()));
        let next = w.process("late-2", 2, 0, lease.clone(), None);
        let third = w.process("late-3", 3, 0, lease.clone(), None);
        for p in [&owner, &next, &third] {
            w.register(p, promise).await;
        }
        let (first, holder) = w.hold(owner.locker(algorithm), secs(60), None).await;
        let contender = w.contend(next.locker(algorithm), secs(60), secs(25));
        sleep(millis(1500)).await;
        *late.late.lock().unwrap() = Some(secs(8));
        let held = holder.await.unwrap();
        assert!(held.learned_lost_at.is_some(), "{what}: {held:?}");
        late.landed.notified().await;
        sleep(millis(100)).await;
        let main = w.main_cells().await;
        assert_eq!(main.len(), 2, "{what}: the late write is back: {main:#?}");
        assert!(main.iter().any(|c| c.column == first), "{what}");

        let env = w.operator();
        let inspected =
            lockshift_migration_tool::ops::inspect::inspect(&env, &LockId::new(LOCK).unwrap())
                .await
                .unwrap();
        let second = inspected
            .holder
            .clone()
            .unwrap_or_else(|| panic!("{what}: no holder named: {inspected:#?}"));
        assert_ne!(second, first, "{what}");
        let over: Vec<&str> = inspected
            .cells
            .iter()
            .filter(|c| c.lease_over)
            .map(|c| c.owner.as_str())
            .collect();
        assert_eq!(over, [first.as_str()], "{what}: {inspected:#?}");
        let status = lockshift_migration_tool::ops::status::status(&env, |_| {})
            .await
            .unwrap();
        assert_eq!(status.locks.lease_over, 1, "{what}: {:#?}", status.locks);

        let waiter = w.contend(third.locker(algorithm), secs(60), millis(100));
        let options = CleanOptions::new(None, 3, false, 100).unwrap();
        let report = clean(&env, &options, true, |_| {}).await.unwrap();
        let judged: Vec<(&str, &str, Action)> = report
            .cells
            .iter()
            .map(|c| (c.owner.as_str(), c.table.as_str(), c.action))
            .collect();
        assert!(
            matches!(
                judged.as_slice(),
                [(owner, "main", Action::Deleted | Action::SkippedGone)] if *owner == first
            ),
            "{what}: {report:#?}"
        );
        // The holder's cell stays (and the third waiter's reservation,
        // reserved behind it, for queue and combined).
        let main = w.main_cells().await;
        assert!(main.iter().all(|c| c.column != first), "{what}: {main:#?}");
        assert!(main.iter().any(|c| c.column == second), "{what}: {main:#?}");

        let (_, second_entered) = contender.await.unwrap().expect("the next waiter got in");
        let (_, third_entered) = waiter.await.unwrap().expect("the third waiter got in");
        assert!(third_entered > second_entered + secs(25), "{what}");
        w.assert_exclusive(&what);
    }
}

/// The late renewal again, but the lost owner reaches the store again
/// before it releases: its release deletes the cells stamped above every
/// write it sent (L1), so the renewal still in flight lands shadowed and
/// never shows (L5).
#[tokio::test(start_paused = true)]
async fn a_late_renewal_is_buried_by_its_owners_release() {
    for algorithm in ALGORITHMS {
        let what = format!("{algorithm}: a late renewal, then the release");
        let w = World::new();
        let lease = lease(4, 1);
        let late = Arc::new(LateStore {
            inner: w.faulty(11),
            cluster: w.store.clone(),
            late: Mutex::new(None),
            cut_off: AtomicBool::new(false),
            landed: Arc::new(Notify::new()),
        });
        let owner = w.process("late-1", 1, 0, lease.clone(), Some(late.clone()));
        let next = w.process("late-2", 2, 0, lease.clone(), None);
        let go = Arc::new(Notify::new());
        let (first, holder) = w
            .hold(owner.locker(algorithm), secs(60), Some(go.clone()))
            .await;
        let contender = w.contend(next.locker(algorithm), secs(60), secs(20));
        sleep(millis(1500)).await;
        *late.late.lock().unwrap() = Some(secs(8));
        // Lost (its renewals fail), then back in touch, then released.
        while !holder.is_finished() && w.oracle.inside.lock().unwrap()[LOCK].contains(&first) {
            sleep(millis(50)).await;
        }
        late.cut_off.store(false, Ordering::SeqCst);
        go.notify_one();
        let held = holder.await.unwrap();
        assert!(held.learned_lost_at.is_some(), "{what}: {held:?}");
        late.landed.notified().await;
        sleep(millis(100)).await;
        let main = w.main_cells().await;
        assert!(
            main.iter().all(|c| c.column != first),
            "{what}: the late write shows: {main:#?}"
        );
        contender.await.unwrap().expect("the next waiter got in");
        w.assert_exclusive(&what);
    }
}
