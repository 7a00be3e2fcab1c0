//! The lock tests of issues 4 and 5 through the local CQL endpoint: every
//! node its own `CqlStore` (the real `scylla` driver) against one endpoint,
//! in real time with short leases. Assertions are about behaviour (exclusion,
//! order, loss, recovery); time bounds are generous so a busy machine cannot
//! fail them.
//!
//! With `LOCKSHIFT_TEST_CONTACT_POINTS` set, the tests that need no
//! server-side fault injection run against that cluster instead.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockshift_cql_emulator::{EmulatorHandle, Fault, FaultRule};
use lockshift_lock::{AcquireOptions, Binding, LeaseSettings, LockId};
use lockshift_store::{
    CqlSettings, CqlStore, FaultPlan, RowQuery, SharedClock, Store, SystemClock, schema,
};
use lockshift_tests::fleet::{self, SimLocker};
use lockshift_tests::rolling::{Backend, Timings, rolling_deployment};
use lockshift_tests::sim::{NodeEnv, Oracle, contend, node_env};
use lockshift_tests::targets::start_endpoint;
use tokio::time::Instant;

/// A lock id unique to this run: on a shared cluster a re-run (or a
/// concurrent one) never meets the cells a previous run left to their TTL.
///
/// The prefix is the whole binary's, and every test builds its nodes with
/// the same seed, so the same owner ids: two tests that ran at once on one
/// `name` would write, and delete, each other's cells. (Two did: a test
/// that makes legacy and queue overlap on purpose, beside one that checks
/// legacy and combined never do, on the same `race-0` — a violation that
/// was the tests', not the lock's.) So each test names its locks its own
/// way.
fn test_lock(name: &str) -> LockId {
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let prefix = PREFIX.get_or_init(lockshift_tests::targets::run_prefix);
    LockId::new(format!("{prefix}-{name}")).expect("a short test lock id")
}

fn short_lease() -> LeaseSettings {
    LeaseSettings {
        lease_ttl: Duration::from_secs(3),
        renew_every: Duration::from_millis(500),
        lost_after_fraction: 0.5,
    }
}

struct Endpoint {
    handle: Option<EmulatorHandle>,
    settings: CqlSettings,
}

impl Endpoint {
    /// The local endpoint's fault controller (tests that inject server-side
    /// faults always run on a local endpoint).
    fn faults(&self) -> &lockshift_cql_emulator::FaultController {
        self.handle.as_ref().expect("a local endpoint").faults()
    }

    async fn shutdown(self) {
        if let Some(handle) = self.handle {
            handle.shutdown().await;
        }
    }
}

/// A local endpoint with a little latency on every lock table, so requests
/// overlap.
async fn local_endpoint() -> Endpoint {
    let clock: SharedClock = Arc::new(SystemClock);
    let (handle, settings) = start_endpoint(clock).await.unwrap();
    handle
        .faults()
        .add(FaultRule::new(Fault::Latency(Duration::from_millis(1))).on_table("lockshift.*"))
        .unwrap();
    Endpoint {
        handle: Some(handle),
        settings,
    }
}

/// The real cluster of `LOCKSHIFT_TEST_CONTACT_POINTS` if set, else a local
/// endpoint.
async fn endpoint() -> Endpoint {
    match lockshift_tests::targets::real_cluster_settings() {
        Some(settings) => Endpoint {
            handle: None,
            settings,
        },
        None => local_endpoint().await,
    }
}

async fn node(ep: &Endpoint, i: usize, plan: FaultPlan, lease: LeaseSettings) -> NodeEnv {
    let store = CqlStore::connect(&ep.settings).await.unwrap();
    node_env(i, 42, Arc::new(store), Arc::new(SystemClock), plan, lease)
}

async fn exclusion_over_cql(tag: &str, makes: &[fn(&NodeEnv) -> SimLocker], with_faults: bool) {
    let ep = if with_faults {
        local_endpoint().await
    } else {
        endpoint().await
    };
    if with_faults {
        // Errors from the server itself, through the real driver's error
        // path: timeouts after apply and refusals before.
        let faults = ep.faults();
        faults
            .add(
                FaultRule::new(Fault::WriteTimeout)
                    .on_table("lockshift.*")
                    .writes()
                    .after_apply()
                    .with_probability(0.02, 7),
            )
            .unwrap();
        faults
            .add(
                FaultRule::new(Fault::Unavailable)
                    .on_table("lockshift.*")
                    .with_probability(0.02, 8),
            )
            .unwrap();
    }
    let mut lockers = Vec::new();
    for i in 0..4 {
        let env = node(&ep, i, FaultPlan::default(), LeaseSettings::default()).await;
        lockers.push(makes[i % makes.len()](&env));
    }
    let locks = [
        test_lock(&format!("{tag}-account-1")),
        test_lock(&format!("{tag}-account-2")),
    ];
    let report = contend(
        lockers.iter().map(|l| l.locker.clone()).collect(),
        &locks,
        6,
        Duration::from_millis(5),
        7,
        Arc::new(Oracle::default()),
    )
    .await;
    report.assert_exclusive("over CQL");
    drop(lockers);
    ep.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_excludes_over_cql() {
    exclusion_over_cql("legacy", &[fleet::legacy], true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_excludes_over_cql() {
    exclusion_over_cql("queue", &[fleet::queue], true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn combined_excludes_over_cql() {
    exclusion_over_cql("combined", &[fleet::combined], true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_pairs_exclude_over_cql() {
    exclusion_over_cql("legacy-combined", &[fleet::legacy, fleet::combined], false).await;
    exclusion_over_cql("combined-queue", &[fleet::combined, fleet::queue], false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_waiters_acquire_in_arrival_order_over_cql() {
    let ep = endpoint().await;
    let holder_env = node(&ep, 0, FaultPlan::default(), LeaseSettings::default()).await;
    let holder = fleet::queue(&holder_env);
    let lock = test_lock("fifo");
    let held = holder.locker.acquire(&lock).await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    let mut keep = Vec::new();
    for i in 0..4 {
        let env = node(&ep, i + 1, FaultPlan::default(), LeaseSettings::default()).await;
        let waiter = fleet::queue(&env);
        let (locker, order, lock) = (waiter.locker.clone(), order.clone(), lock.clone());
        keep.push(waiter);
        tasks.push(tokio::spawn(async move {
            let g = locker.acquire(&lock).await.unwrap();
            order.lock().unwrap().push(i);
            g.release().await.unwrap();
        }));
        // Each waiter is in the queue before the next arrives.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    held.release().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3]);
}

async fn crash_and_loss(make: fn(&NodeEnv) -> SimLocker) {
    let ep = endpoint().await;
    let lease = short_lease();
    let a = node(&ep, 0, FaultPlan::default(), lease.clone()).await;
    let b = node(&ep, 1, FaultPlan::default(), lease.clone()).await;
    let (la, lb) = (make(&a), make(&b));
    let lock = test_lock("crash");
    let guard = la.locker.acquire(&lock).await.unwrap();
    // The holder is cut off from the database: renewals fail.
    let cut = Instant::now();
    a.store.set_partitioned(true);
    let g = lb.locker.acquire(&lock).await.unwrap();
    let freed_after = cut.elapsed();
    // Told before the cell could expire: `is_lost` reads the clock, so it
    // is true here exactly if the holder had been told by the time the
    // other node got the lock.
    assert!(guard.is_lost(), "the cut-off holder was told");
    // Freed no earlier than the cell's guaranteed life allows: the last
    // renewal was sent up to `renew_every` before the cut, and TTLs count
    // in whole seconds (a 3 s cell may go 1 s − skew early).
    let earliest = lease.guaranteed_life().unwrap() - lease.renew_every;
    assert!(
        freed_after >= earliest,
        "freed after {freed_after:?}, before the cell's guaranteed life ({earliest:?})"
    );
    assert!(
        freed_after < Duration::from_secs(20),
        "freed after {freed_after:?}"
    );
    g.release().await.unwrap();
    drop(guard);
    ep.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_legacy_holder_is_told_and_frees_the_lock_after_the_ttl_over_cql() {
    crash_and_loss(fleet::legacy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_queue_holder_is_told_and_frees_the_lock_after_the_ttl_over_cql() {
    crash_and_loss(fleet::queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_failures_fire_the_lost_signal_before_the_ttl_over_cql() {
    let ep = local_endpoint().await;
    let lease = short_lease();
    let a = node(&ep, 0, FaultPlan::default(), lease.clone()).await;
    let la = fleet::combined(&a);
    let lock = test_lock("lost");
    let guard = la.locker.acquire(&lock).await.unwrap();
    // The endpoint refuses everything on the lock tables from now on.
    let refused = Instant::now();
    ep.faults()
        .add(FaultRule::new(Fault::Unavailable).on_table("lockshift.main"))
        .unwrap();
    ep.faults()
        .add(FaultRule::new(Fault::Unavailable).on_table("lockshift.queue"))
        .unwrap();
    tokio::time::timeout(Duration::from_secs(20), guard.lost().cancelled())
        .await
        .expect("the lost signal fires");
    let told = refused.elapsed();
    assert!(
        told < lease.lease_ttl,
        "told after {told:?}, not before the TTL"
    );
    assert!(guard.lost_reason().is_some());
    ep.faults().clear();
    let main = CqlStore::connect(&ep.settings)
        .await
        .unwrap()
        .read(schema::MAIN, "lost", &RowQuery::all())
        .await
        .unwrap();
    assert!(main.len() <= 1);
}

/// `settings` in a keyspace of their own, created on connect: a test that
/// leaves persistent state (a rollout stage, its history, the registry) in
/// a keyspace of its own can run again and again on one cluster.
fn own_keyspace(settings: &CqlSettings, test: &str) -> CqlSettings {
    CqlSettings {
        keyspace: format!("lockshift_t_{test}_{:08x}", rand::random::<u32>()),
        create_schema: true,
        ..settings.clone()
    }
}

/// The rollout over CQL, run twice on one database as a developer runs the
/// suite twice against one cluster (issue 11 item 8): it persists the
/// stage and its history, so each run uses — and drops — a keyspace of its
/// own. (In one shared keyspace the second run began at stage `complete`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_deployment_over_cql() {
    let ep = endpoint().await;
    let timings = Timings::real_time();
    for run in 0..2 {
        let settings = own_keyspace(&ep.settings, "rolling");
        let report =
            rolling_deployment(Backend::Cql(Box::new(settings.clone())), timings, 3, 5).await;
        report.assert_clean(&timings, &format!("over CQL, run #{run}"));
        println!(
            "over CQL, run #{run}: {} acquisitions {:?}, worst unavailability {:?}",
            report.total(),
            report.by_algorithm,
            report.worst_unavailability
        );
        CqlStore::connect(&settings)
            .await
            .unwrap()
            .drop_keyspace()
            .await
            .unwrap();
    }
    ep.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_acquire_and_independent_ids_over_cql() {
    let ep = endpoint().await;
    for make in [
        fleet::legacy as fn(&NodeEnv) -> SimLocker,
        fleet::queue,
        fleet::combined,
    ] {
        let a = make(&node(&ep, 0, FaultPlan::default(), LeaseSettings::default()).await);
        let b = make(&node(&ep, 1, FaultPlan::default(), LeaseSettings::default()).await);
        let lock = test_lock("try");
        let g = a
            .locker
            .try_acquire(&lock, &Binding::unbound())
            .await
            .unwrap();
        let err = b
            .locker
            .try_acquire(&lock, &Binding::unbound())
            .await
            .unwrap_err();
        assert!(err.is_held(), "{err}");
        let other = b
            .locker
            .try_acquire(&test_lock("try-other"), &Binding::unbound())
            .await
            .unwrap();
        let err = b
            .locker
            .acquire_with(
                &lock,
                AcquireOptions::with_timeout(Duration::from_millis(300)),
                &Binding::unbound(),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, lockshift_lock::AcquireError::Timeout { .. }),
            "{err}"
        );
        other.release().await.unwrap();
        g.release().await.unwrap();
        b.locker
            .try_acquire(&lock, &Binding::unbound())
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    }
}

/// One race of a legacy node against `other` on a fresh lock, the legacy
/// node's `main` writes slowed by 300 ms (applied at a random point of that
/// round trip): its "main is empty" read goes stale while its write is in
/// flight — docs/design.md §3's window. Both hold for a while; the oracle records
/// any overlap.
async fn legacy_race(
    ep: &Endpoint,
    tag: &str,
    round: usize,
    other: fn(&NodeEnv) -> SimLocker,
    oracle: &Oracle,
) {
    let slow_main_writes = FaultPlan {
        slow: Some((
            lockshift_store::FaultScope {
                tables: Some(vec![schema::MAIN]),
                ops: Some(vec![lockshift_store::OpKind::Write]),
            },
            Duration::from_millis(300),
        )),
        ..FaultPlan::default()
    };
    let legacy = fleet::legacy(&node(ep, 0, slow_main_writes, LeaseSettings::default()).await);
    let rival = other(&node(ep, 1, FaultPlan::default(), LeaseSettings::default()).await);
    let lock = test_lock(&format!("{tag}-race-{round}"));
    let counters = Mutex::new(std::collections::HashMap::new());
    let hold = |locker: Arc<dyn lockshift_lock::Locker>| {
        let (lock, oracle, counters) = (lock.clone(), &*oracle, &counters);
        async move {
            let g = locker.acquire(&lock).await.unwrap();
            lockshift_tests::sim::critical_section(
                oracle,
                counters,
                &g,
                Duration::from_millis(600),
            )
            .await;
            g.release().await.unwrap();
        }
    };
    // The rival starts a moment later, so the legacy node's fresh read of
    // main comes first and is empty.
    let rival_late = async {
        tokio::time::sleep(Duration::from_millis(15)).await;
        hold(rival.locker.clone()).await;
    };
    tokio::join!(hold(legacy.locker.clone()), rival_late);
}

/// The negative control through the real driver: legacy beside queue — the
/// one pair the safety table forbids — is caught violating exclusion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_beside_queue_violates_exclusion_over_cql() {
    let ep = endpoint().await;
    let oracle = Oracle::default();
    for round in 0..10 {
        legacy_race(&ep, "beside-queue", round, fleet::queue, &oracle).await;
        if !oracle.violations().is_empty() {
            break;
        }
    }
    let violations = oracle.violations();
    assert!(
        !violations.is_empty(),
        "legacy + queue never overlapped in 10 races: is the checker blind?"
    );
    println!("legacy + queue over CQL: {}", violations[0]);
    ep.shutdown().await;
}

/// The same races against the combined lock: it enters main through the
/// shadow arbitration, so the stale read cannot fool it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_beside_combined_holds_in_the_same_races_over_cql() {
    lockshift_tests::sim::trace_from_env();
    let ep = endpoint().await;
    let oracle = Oracle::default();
    for round in 0..5 {
        legacy_race(&ep, "beside-combined", round, fleet::combined, &oracle).await;
    }
    assert!(
        oracle.violations().is_empty(),
        "{:?} (holders told their lease was lost: {:?})",
        oracle.violations(),
        oracle.lapses()
    );
    assert_eq!(oracle.entries().len(), 10, "every race ran both holders");
    ep.shutdown().await;
}
