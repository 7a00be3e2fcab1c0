//! Leases at the lock level (issue 4, thesis §5.3): a crashed holder frees
//! the lock after the TTL, a renewing holder keeps it far past it, and a
//! holder cut off from the store is told before its TTL can run out.

use std::time::Duration;

use lockshift_lock::{AcquireOptions, Binding, LeaseSettings, LockId};
use lockshift_store::{FaultPlan, RowQuery, Store, schema};
use lockshift_tests::fleet::{self, SimLocker};
use lockshift_tests::sim::{Cluster, NodeEnv, paused};
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(60);

fn lock() -> LockId {
    LockId::new("L").unwrap()
}

fn node(cluster: &Cluster, i: usize) -> NodeEnv {
    cluster.node(
        i,
        7,
        FaultPlan::latency(Duration::from_millis(1), Duration::from_millis(2)),
        0,
        LeaseSettings::default(),
    )
}

fn crashed_holder_frees_the_lock_after_the_ttl(make: fn(&NodeEnv) -> SimLocker) {
    paused(async {
        let cluster = Cluster::for_seed(0);
        let (a, b) = (node(&cluster, 0), node(&cluster, 1));
        let (la, lb) = (make(&a), make(&b));
        let guard = la.locker.acquire(&lock()).await.unwrap();
        // The holder's process dies: nothing it sends reaches the store again.
        a.store.set_partitioned(true);
        let started = Instant::now();
        let early = lb
            .locker
            .acquire_with(
                &lock(),
                AcquireOptions::with_timeout(TTL - Duration::from_secs(5)),
                &Binding::unbound(),
            )
            .await;
        assert!(early.is_err(), "the lock stays held until the TTL");
        let g = lb.locker.acquire(&lock()).await.unwrap();
        let waited = started.elapsed();
        // TTLs count in whole seconds: the cell is only sure to live
        // `ttl − 1 s − skew allowance` (LeaseSettings::guaranteed_life).
        let life = LeaseSettings::default().guaranteed_life().unwrap();
        assert!(
            waited >= life,
            "freed after {waited:?}, before the cell's guaranteed life ({life:?})"
        );
        assert!(
            waited <= TTL + Duration::from_secs(2),
            "freed after {waited:?}, long after the TTL"
        );
        assert!(guard.is_lost(), "the crashed holder's lease counts as lost");
        g.release().await.unwrap();
        drop(guard);
    });
}

fn renewing_holder_keeps_the_lock_far_past_the_ttl(make: fn(&NodeEnv) -> SimLocker) {
    paused(async {
        let cluster = Cluster::for_seed(0);
        let (a, b) = (node(&cluster, 0), node(&cluster, 1));
        let (la, lb) = (make(&a), make(&b));
        let guard = la.locker.acquire(&lock()).await.unwrap();
        let err = lb
            .locker
            .acquire_with(
                &lock(),
                AcquireOptions::with_timeout(TTL * 10),
                &Binding::unbound(),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, lockshift_lock::AcquireError::Timeout { .. }),
            "{err}"
        );
        assert!(!guard.is_lost());
        let main = cluster
            .store
            .read(schema::MAIN, "L", &RowQuery::all())
            .await
            .unwrap();
        assert_eq!(main.len(), 1);
        assert_eq!(main[0].column, guard.owner().as_str());
        guard.release().await.unwrap();
        lb.locker
            .acquire(&lock())
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    });
}

fn lost_signal_fires_before_the_ttl(make: fn(&NodeEnv) -> SimLocker) {
    paused(async {
        let cluster = Cluster::for_seed(0);
        let a = node(&cluster, 0);
        let la = make(&a);
        let guard = la.locker.acquire(&lock()).await.unwrap();
        let acquired = Instant::now();
        // Renewals start failing; reads and writes both, as in a partition.
        a.store.set_plan(FaultPlan {
            fail_before: 1.0,
            ..FaultPlan::default()
        });
        tokio::time::timeout(TTL, guard.lost().cancelled())
            .await
            .expect("the lost signal fires before the TTL runs out");
        let told_after = acquired.elapsed();
        let margin = TTL.saturating_sub(told_after);
        // Default lost_after_fraction ½: told at most 30 s after the last
        // proven renewal, which was at most 10 s before the failures began.
        assert!(
            told_after <= Duration::from_secs(31),
            "told after {told_after:?}"
        );
        assert!(
            margin >= Duration::from_secs(29),
            "only {margin:?} before the TTL"
        );
        let main = cluster
            .store
            .read(schema::MAIN, "L", &RowQuery::all())
            .await
            .unwrap();
        assert_eq!(
            main.len(),
            1,
            "told while the cell still exists, not after it expired"
        );
        assert!(guard.lost_reason().is_some());
    });
}

#[test]
fn legacy_crashed_holder_frees_the_lock_after_the_ttl() {
    crashed_holder_frees_the_lock_after_the_ttl(fleet::legacy);
}

#[test]
fn queue_crashed_holder_frees_the_lock_after_the_ttl() {
    crashed_holder_frees_the_lock_after_the_ttl(fleet::queue);
}

#[test]
fn legacy_renewing_holder_keeps_the_lock_far_past_the_ttl() {
    renewing_holder_keeps_the_lock_far_past_the_ttl(fleet::legacy);
}

#[test]
fn queue_renewing_holder_keeps_the_lock_far_past_the_ttl() {
    renewing_holder_keeps_the_lock_far_past_the_ttl(fleet::queue);
}

#[test]
fn legacy_lost_signal_fires_before_the_ttl() {
    lost_signal_fires_before_the_ttl(fleet::legacy);
}

#[test]
fn queue_lost_signal_fires_before_the_ttl() {
    lost_signal_fires_before_the_ttl(fleet::queue);
}

/// Issue 10 item 8: a holder whose whole runtime is blocked (a GC pause, a
/// blocked executor, SIGSTOP) past its TTL must learn it lost the lock the
/// moment it looks — not when its background task next gets to run. The
/// pause is real (a blocked thread cannot be simulated on a paused clock),
/// so this runs in real time: TTL 3 s, the holder blocked 4 s, another node
/// on its own runtime acquiring as soon as the TTL frees the lock.
#[test]
fn a_paused_holder_is_told_on_resuming() {
    use std::sync::Arc;
    use std::sync::mpsc;

    use lockshift_store::{MemoryStore, SharedClock, SharedStore, SystemClock};
    use lockshift_tests::sim::node_env;

    let lease = LeaseSettings {
        lease_ttl: Duration::from_secs(3),
        renew_every: Duration::from_millis(300),
        lost_after_fraction: 0.3,
    };
    let store: SharedStore = Arc::new(MemoryStore::new());
    let clock: SharedClock = Arc::new(SystemClock);
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    let (acquired_tx, acquired_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let (took_tx, took_rx) = mpsc::channel::<()>();
    let other = {
        let (store, clock, lease) = (store.clone(), clock.clone(), lease.clone());
        std::thread::spawn(move || {
            runtime().block_on(async move {
                // Start only once the holder holds.
                acquired_rx.recv().unwrap();
                let env = node_env(1, 7, store, clock, FaultPlan::default(), lease);
                let guard = fleet::queue(&env).locker.acquire(&lock()).await.unwrap();
                took_tx.send(()).unwrap();
                // Hold until the paused holder has looked.
                tokio::task::spawn_blocking(move || done_rx.recv().ok())
                    .await
                    .unwrap();
                guard.release().await.unwrap();
            })
        })
    };
    runtime().block_on(async move {
        let env = node_env(0, 7, store.clone(), clock, FaultPlan::default(), lease);
        let holder = fleet::queue(&env);
        let guard = holder.locker.acquire(&lock()).await.unwrap();
        acquired_tx.send(()).unwrap();
        // The whole runtime stops: no timer, no renewal task runs.
        std::thread::sleep(Duration::from_secs(4));
        took_rx
            .try_recv()
            .expect("another node took the lock while the holder was paused");
        let main = store
            .read(schema::MAIN, "L", &RowQuery::all())
            .await
            .unwrap();
        assert!(
            main.iter().all(|c| c.column != guard.owner().as_str()),
            "the holder's cell expired during the pause"
        );
        assert!(
            guard.is_lost(),
            "a holder paused past its TTL is told on its first look"
        );
        assert!(guard.lost().is_cancelled(), "the signal fired too");
        done_tx.send(()).unwrap();
    });
    other.join().unwrap();
}
