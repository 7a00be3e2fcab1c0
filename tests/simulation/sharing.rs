//! Shared acquisitions under contention (issue 43, docs/design.md §3a): a
//! semaphore of 3 permits and a read/write lock, taken by six nodes under
//! the exclusion tests' fault mixes (latency, store failures, clock skew),
//! with the queue lock and the combined lock. An observer counts who is
//! inside: never more than 3 permits, never a reader beside a writer,
//! never a writer beside anyone; every acquisition ends with the lock.
//!
//! The negative controls take the same schedules with one side ignoring
//! its kind — a permit taken as a reader's share (no count), a writer
//! taken as a reader — and the observer must catch the overcommit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lockshift_lock::{AcquireOptions, Binding, LeaseSettings, LockId, Sharing};
use lockshift_store::FaultPlan;
use lockshift_tests::fleet::{self, SimLocker};
use lockshift_tests::sim::{Clocks, Cluster, NodeEnv, for_each_seed, paused};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;

use crate::exclusion::{large_skew, plans};

/// Who is inside the lock now: each holder's kind and its lost signal.
#[derive(Default)]
struct Inside {
    holders: HashMap<String, (Sharing, CancellationToken)>,
    /// Every time an entry found more inside than the kind allows.
    overcommits: Vec<String>,
    /// The most holders inside at once.
    most: usize,
}

impl Inside {
    /// `who` enters as `kind` (counted as `counted_as`); holders whose
    /// lease is known lost do not count (they leave at once).
    fn enter(&mut self, who: &str, counted_as: Sharing, lost: CancellationToken) {
        let live: Vec<Sharing> = self
            .holders
            .values()
            .filter(|(_, lost)| !lost.is_cancelled())
            .map(|(kind, _)| *kind)
            .collect();
        let allowed = match counted_as {
            Sharing::Exclusive => live.is_empty(),
            Sharing::Shared => !live.contains(&Sharing::Exclusive),
            Sharing::Permit { permits } => live.len() < permits.get() as usize,
        };
        if !allowed {
            self.overcommits
                .push(format!("{who} entered as {counted_as} beside {live:?}"));
        }
        self.holders.insert(who.to_string(), (counted_as, lost));
        self.most = self.most.max(self.holders.len());
    }

    fn exit(&mut self, who: &str) {
        self.holders.remove(who);
    }
}

/// What one run saw.
#[derive(Debug, Default)]
struct Report {
    overcommits: Vec<String>,
    acquisitions: u32,
    failures: Vec<String>,
    most: usize,
}

/// Node `i`'s kinds: how it asks (`taken_as`) and what the observer counts
/// it as (`counted_as`) — the same but in a control.
type Kinds = fn(usize) -> (Sharing, Sharing);

fn permits3(_: usize) -> (Sharing, Sharing) {
    let three = Sharing::permit(3).unwrap();
    (three, three)
}

fn readers_and_writers(i: usize) -> (Sharing, Sharing) {
    if i < 2 {
        (Sharing::Exclusive, Sharing::Exclusive)
    } else {
        (Sharing::Shared, Sharing::Shared)
    }
}

/// Control: a permit that ignores the count (taken as a reader's share).
fn permits_uncounted(_: usize) -> (Sharing, Sharing) {
    (Sharing::Shared, Sharing::permit(3).unwrap())
}

/// Control: writers taken as readers.
fn writers_as_readers(i: usize) -> (Sharing, Sharing) {
    let (_, counted) = readers_and_writers(i);
    (Sharing::Shared, counted)
}

fn run(seed: u64, plan: &FaultPlan, clocks: Clocks, make: fleet_make, kinds: Kinds) -> Report {
    paused(async {
        let cluster = Cluster::for_seed(seed);
        let nodes = 6;
        let node_clocks = clocks.of_nodes(seed, nodes);
        let lockers: Vec<SimLocker> = (0..nodes)
            .map(|i| {
                make(&cluster.node(
                    i,
                    seed,
                    plan.clone(),
                    node_clocks[i],
                    LeaseSettings::default(),
                ))
            })
            .collect();
        let lock = LockId::new("pool").unwrap();
        let inside = Arc::new(Mutex::new(Inside::default()));
        let report = Arc::new(Mutex::new(Report::default()));
        let mut tasks = Vec::new();
        for (i, sim) in lockers.iter().enumerate() {
            let locker = sim.locker.clone();
            let (lock, inside, report) = (lock.clone(), inside.clone(), report.clone());
            let (taken_as, counted_as) = kinds(i);
            let mut rng = StdRng::seed_from_u64(seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9));
            tasks.push(tokio::spawn(async move {
                // Permits enter one at a time (P3): holds long enough for
                // the next to come in while the last still holds.
                let longest = match counted_as {
                    Sharing::Permit { .. } => Duration::from_millis(80),
                    _ => Duration::from_millis(15),
                };
                for _ in 0..8 {
                    let hold = rng.random_range(Duration::ZERO..longest);
                    let options =
                        AcquireOptions::with_timeout(Duration::from_secs(3600)).shared_as(taken_as);
                    let guard = match locker
                        .acquire_with(&lock, options, &Binding::unbound())
                        .await
                    {
                        Ok(guard) => guard,
                        Err(e) => {
                            lock_of(&report).failures.push(e.to_string());
                            continue;
                        }
                    };
                    let who = guard.owner().as_str().to_string();
                    lock_of(&inside).enter(&who, counted_as, guard.lost());
                    tokio::select! {
                        biased;
                        _ = guard.until_lost() => {}
                        () = tokio::time::sleep(hold) => {}
                    }
                    lock_of(&inside).exit(&who);
                    lock_of(&report).acquisitions += 1;
                    let _ = guard.release().await;
                    tokio::task::yield_now().await;
                }
            }));
        }
        for task in tasks {
            task.await.expect("a node's task panicked");
        }
        drop(lockers);
        let inside = std::mem::take(&mut *lock_of(&inside));
        let mut report = std::mem::take(&mut *lock_of(&report));
        report.overcommits = inside.overcommits;
        report.most = inside.most;
        report
    })
}

#[allow(non_camel_case_types)]
type fleet_make = fn(&NodeEnv) -> SimLocker;

fn lock_of<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `kinds` under every fault mix with both algorithms; some run must
/// have had `reaches` holders inside at once (the sharing is real).
fn holds(test: &str, kinds: Kinds, reaches: usize) {
    let most = Mutex::new(0);
    for (algorithm, make) in [
        ("queue", fleet::queue as fleet_make),
        ("combined", fleet::combined),
    ] {
        let (skew, skewed) = large_skew();
        let mut mixes = plans().to_vec();
        // Every clock reading off by up to ±5 s on top of ±5 s offsets.
        mixes.push(("large skew", skew, skewed));
        for (name, plan, clocks) in mixes {
            for_each_seed(&format!("{test}/{algorithm}/{name}"), 0, 4, |seed| {
                let report = run(seed, &plan, clocks, make, kinds);
                let what = format!("{test}/{algorithm}/{name} seed {seed}");
                assert!(
                    report.overcommits.is_empty(),
                    "{what}: {:?}",
                    report.overcommits
                );
                assert!(report.failures.is_empty(), "{what}: {:?}", report.failures);
                assert_eq!(
                    report.acquisitions, 48,
                    "{what}: every acquisition ends held"
                );
                let mut most = lock_of(&most);
                *most = (*most).max(report.most);
            });
        }
    }
    let most = *lock_of(&most);
    assert!(
        most >= reaches,
        "{test}: at most {most} inside at once, never {reaches}"
    );
}

#[test]
fn a_semaphore_of_three_never_admits_a_fourth() {
    holds("a_semaphore_of_three_never_admits_a_fourth", permits3, 3);
}

#[test]
fn readers_share_and_writers_hold_alone() {
    holds(
        "readers_share_and_writers_hold_alone",
        readers_and_writers,
        3,
    );
}

/// The negative controls: the observer catches a permit that is not
/// counted and a writer that shares.
#[test]
fn the_observer_catches_an_uncounted_permit_and_a_sharing_writer() {
    let (_, plan, clocks) = plans().into_iter().next().unwrap();
    for (name, kinds) in [
        ("uncounted permits", permits_uncounted as Kinds),
        ("writers as readers", writers_as_readers),
    ] {
        let caught = (0..4).any(|seed| {
            !run(seed, &plan, clocks, fleet::queue, kinds)
                .overcommits
                .is_empty()
        });
        assert!(
            caught,
            "{name}: never caught in 4 seeds: is the observer blind?"
        );
    }
}

/// A semaphore's name taken with another number of permits, or as a
/// plain lock, is refused with the conflict named (P2), never counted past.
#[test]
fn one_name_is_one_kind() {
    paused(async {
        let cluster = Cluster::for_seed(1);
        let env = |i| cluster.node(i, 1, FaultPlan::default(), 0_i64, LeaseSettings::default());
        let (a, b) = (fleet::queue(&env(0)), fleet::queue(&env(1)));
        let lock = LockId::new("pool").unwrap();
        let three = AcquireOptions::default().shared_as(Sharing::permit(3).unwrap());
        let held = a
            .locker
            .acquire_with(&lock, three, &Binding::unbound())
            .await
            .unwrap();
        for other in [
            Sharing::permit(4).unwrap(),
            Sharing::Shared,
            Sharing::Exclusive,
        ] {
            let options = AcquireOptions::with_timeout(Duration::from_secs(30)).shared_as(other);
            let err = b
                .locker
                .acquire_with(&lock, options, &Binding::unbound())
                .await
                .unwrap_err();
            assert!(
                matches!(err, lockshift_lock::AcquireError::KindConflict { .. }),
                "{other}: {err}"
            );
            assert!(err.to_string().contains("one name is one kind"), "{err}");
        }
        held.release().await.unwrap();
    });
}
