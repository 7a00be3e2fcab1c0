//! Semaphores and read/write locks (issue 43) through the real `scylla`
//! driver: each node its own `CqlStore`, on the cluster of
//! `LOCKSHIFT_TEST_CONTACT_POINTS` when it is set, else on a local
//! endpoint with a little latency on the lock tables — and on the embedded
//! store beside them, so the three targets run one test. Real time; the
//! bounds are about who was inside together and in what order their
//! fencing tokens came, never about how long.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use lockshift_cql_emulator::{EmulatorHandle, Fault, FaultRule};
use lockshift_lock::{AcquireOptions, Binding, LeaseSettings, LockId, Sharing};
use lockshift_store::{
    CqlStore, FaultPlan, MemoryStore, RowQuery, SharedStore, Store, SystemClock, schema,
};
use lockshift_tests::fleet;
use lockshift_tests::sim::node_env;
use lockshift_tests::targets::{real_cluster_settings, run_prefix, start_endpoint};

/// Who was inside at once, by kind; and the most.
#[derive(Default)]
struct Inside {
    now: Vec<Sharing>,
    most: usize,
    broken: Vec<String>,
    /// Every holding's fencing token, when it was asked for, and when the
    /// holding's release returned.
    tokens: Vec<Fenced>,
}

/// One holding's fencing token (design §3a, "Fencing").
#[derive(Clone, Copy, Debug)]
struct Fenced {
    kind: Sharing,
    token: u64,
    asked: Instant,
    released: Instant,
}

impl Inside {
    /// The pairs of holdings that break §3a's rule: a token asked for
    /// after another holding's release returned is larger than that
    /// holding's token.
    fn tokens_out_of_order(&self) -> Vec<String> {
        let mut out = Vec::new();
        for earlier in &self.tokens {
            for later in &self.tokens {
                if later.asked > earlier.released && later.token <= earlier.token {
                    out.push(format!(
                        "{} took token {} after a {} with token {} released",
                        later.kind, later.token, earlier.kind, earlier.token
                    ));
                }
            }
        }
        out
    }
}

impl Inside {
    fn enter(&mut self, kind: Sharing) {
        let allowed = match kind {
            Sharing::Exclusive => self.now.is_empty(),
            Sharing::Shared => !self.now.contains(&Sharing::Exclusive),
            Sharing::Permit { permits } => self.now.len() < permits.get() as usize,
        };
        if !allowed {
            self.broken
                .push(format!("{kind} entered beside {:?}", self.now));
        }
        self.now.push(kind);
        self.most = self.most.max(self.now.len());
    }

    fn exit(&mut self, kind: Sharing) {
        if let Some(i) = self.now.iter().position(|k| *k == kind) {
            self.now.remove(i);
        }
    }
}

/// Six nodes on `stores` (one each), node `i` taking `kinds(i)`, four
/// times each, holding 20–60 ms: who was inside together.
async fn contend(stores: Vec<SharedStore>, lock: &LockId, kinds: fn(usize) -> Sharing) -> Inside {
    let lease = LeaseSettings {
        lease_ttl: Duration::from_secs(6),
        renew_every: Duration::from_secs(1),
        lost_after_fraction: 0.5,
    };
    let inside = Arc::new(Mutex::new(Inside::default()));
    let mut tasks = Vec::new();
    let mut lockers = Vec::new();
    let probe = stores[0].clone();
    for (i, store) in stores.into_iter().enumerate() {
        let env = node_env(
            i,
            43,
            store,
            Arc::new(SystemClock),
            FaultPlan::default(),
            lease.clone(),
        );
        let sim = fleet::queue(&env);
        let locker = sim.locker.clone();
        lockers.push(sim);
        let (lock, inside, probe) = (lock.clone(), inside.clone(), probe.clone());
        let kind = kinds(i);
        tasks.push(tokio::spawn(async move {
            for round in 0..4_u64 {
                let options = AcquireOptions::with_timeout(Duration::from_secs(60)).shared_as(kind);
                let guard = match locker
                    .acquire_with(&lock, options, &Binding::unbound())
                    .await
                {
                    Ok(guard) => guard,
                    // What was in the lock's way, for the failure's message.
                    Err(e) => panic!("{kind}: {e}\n{}", rows(probe.as_ref(), &lock).await),
                };
                inside
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .enter(kind);
                let asked = Instant::now();
                let token = guard.fencing_token().await.unwrap();
                let hold = 20 + (i as u64 * 7 + round * 13) % 40;
                tokio::time::sleep(Duration::from_millis(hold)).await;
                assert!(!guard.is_lost(), "{kind}: the lease was lost inside");
                inside
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .exit(kind);
                guard.release().await.unwrap();
                inside
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .tokens
                    .push(Fenced {
                        kind,
                        token,
                        asked,
                        released: Instant::now(),
                    });
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    drop(lockers);
    std::mem::take(&mut *inside.lock().unwrap_or_else(PoisonError::into_inner))
}

/// The lock's `main` and queue rows, one cell a line.
async fn rows(store: &dyn Store, lock: &LockId) -> String {
    let mut out = String::new();
    for table in [schema::MAIN, schema::QUEUE] {
        match store.read(table, lock.as_str(), &RowQuery::all()).await {
            Ok(cells) => {
                for c in cells {
                    let value = String::from_utf8_lossy(&c.value);
                    out.push_str(&format!("{table} {}={value} ttl {:?}\n", c.column, c.ttl));
                }
            }
            Err(e) => out.push_str(&format!("{table}: {e}\n")),
        }
    }
    out
}

fn permits3(_: usize) -> Sharing {
    Sharing::permit(3).unwrap()
}

fn two_writers(i: usize) -> Sharing {
    if i < 2 {
        Sharing::Exclusive
    } else {
        Sharing::Shared
    }
}

/// The stores of one target: the embedded store (one, shared), or a
/// connection per node to the real cluster or a local endpoint.
async fn stores(target: &str) -> (Vec<SharedStore>, Option<EmulatorHandle>) {
    if target == "embedded" {
        let store: SharedStore = Arc::new(MemoryStore::new());
        return ((0..6).map(|_| store.clone()).collect(), None);
    }
    let (settings, handle) = match real_cluster_settings() {
        Some(settings) => (settings, None),
        None => {
            let (handle, settings) = start_endpoint(Arc::new(SystemClock)).await.unwrap();
            handle
                .faults()
                .add(
                    FaultRule::new(Fault::Latency(Duration::from_millis(1)))
                        .on_table("lockshift.*"),
                )
                .unwrap();
            (settings, Some(handle))
        }
    };
    let mut stores: Vec<SharedStore> = Vec::new();
    for _ in 0..6 {
        stores.push(Arc::new(CqlStore::connect(&settings).await.unwrap()));
    }
    (stores, handle)
}

async fn on_every_target(name: &str, kinds: fn(usize) -> Sharing, reaches: usize) {
    for target in ["embedded", "cql"] {
        let (stores, handle) = stores(target).await;
        let lock = LockId::new(format!("{}-{name}-{target}", run_prefix())).unwrap();
        let inside = contend(stores, &lock, kinds).await;
        assert!(
            inside.broken.is_empty(),
            "{name} on {target}: {:?}",
            inside.broken
        );
        assert!(
            inside.most >= reaches,
            "{name} on {target}: at most {} inside at once",
            inside.most
        );
        assert_eq!(
            inside.tokens.len(),
            24,
            "{name} on {target}: a token per holding"
        );
        let out_of_order = inside.tokens_out_of_order();
        assert!(
            out_of_order.is_empty(),
            "{name} on {target}: fencing tokens out of order: {out_of_order:?}"
        );
        if let Some(handle) = handle {
            handle.shutdown().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_of_three_admits_three_and_no_more_on_every_target() {
    on_every_target("semaphore", permits3, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_writers_hold_alone_on_every_target() {
    on_every_target("rwlock", two_writers, 2).await;
}

/// The token check's control: a holding whose token was asked for after
/// another's release, and is no larger, is caught.
#[test]
fn a_token_no_larger_than_an_earlier_holdings_is_caught() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let permit = permits3(0);
    let fenced = |token, asked, released| Fenced {
        kind: permit,
        token,
        asked: at(asked),
        released: at(released),
    };
    // Overlapping holdings may tie; one after the other may not.
    let mut inside = Inside {
        tokens: vec![fenced(7, 0, 10), fenced(7, 5, 20)],
        ..Inside::default()
    };
    assert!(inside.tokens_out_of_order().is_empty());
    inside.tokens.push(fenced(7, 30, 40));
    assert_eq!(inside.tokens_out_of_order().len(), 2);
}
