//! A short smoke scenario on the embedded store, in real time: five queue-lock
//! workers and then five legacy workers take one lock 20 times each with 1–3 ms
//! of injected store latency, each incrementing a shared counter by
//! read-sleep-write inside the lock. Prints waits and store operations per
//! acquisition; exits non-zero if the counter lost an increment.
//!
//! This stands in for `migrate demo` until the operator tool exists.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use lockshift_lock::{LeaseSettings, LockContext, LockId, Locker, NodeId};
use lockshift_store::{FaultPlan, FaultyStore, MemoryStore, SharedClock, SharedStore, SystemClock};
use lockshift_tests::sim::Oracle;

const WORKERS: usize = 5;
const PER_WORKER: u32 = 20;

struct Outcome {
    acquisitions: u64,
    counter: u64,
    mean: Duration,
    max: Duration,
    ops_per_acquisition: f64,
    violations: usize,
}

async fn run(algorithm: &str) -> Outcome {
    let clock: SharedClock = Arc::new(SystemClock);
    let memory = Arc::new(MemoryStore::with_clock(clock.clone()));
    let store = Arc::new(FaultyStore::new(memory, 1).with_plan(FaultPlan::latency(
        Duration::from_millis(1),
        Duration::from_millis(2),
    )));
    let shared: SharedStore = store.clone();
    let time = lockshift_queue_lock::TimeService::start(
        &Default::default(),
        shared.clone(),
        clock.clone(),
    );
    let oracle = Arc::new(Oracle::default());
    let counter = Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
    let lock = LockId::new("smoke").expect("valid lock id");
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let ctx = Arc::new(
            LockContext::new(
                shared.clone(),
                clock.clone(),
                NodeId::new(format!("smoke-{w}")).expect("valid node id"),
                LeaseSettings::default(),
                None,
            )
            .expect("default lease settings are valid"),
        );
        let locker: Arc<dyn Locker> = match algorithm {
            "queue" => Arc::new(lockshift_queue_lock::QueueLocker::new(
                ctx,
                time.source(),
                Default::default(),
            )),
            _ => Arc::new(lockshift_legacy::LegacyLocker::new(ctx, Default::default())),
        };
        let (oracle, counter, lock) = (oracle.clone(), counter.clone(), lock.clone());
        tasks.push(tokio::spawn(async move {
            let mut waits = Vec::new();
            for _ in 0..PER_WORKER {
                let started = std::time::Instant::now();
                let guard = locker.acquire(&lock).await.expect("acquire");
                waits.push(started.elapsed());
                lockshift_tests::sim::critical_section(
                    &oracle,
                    &counter,
                    &guard,
                    Duration::from_millis(1),
                )
                .await;
                guard.release().await.expect("release");
            }
            waits
        }));
    }
    let mut waits = Vec::new();
    for t in tasks {
        waits.extend(t.await.expect("worker"));
    }
    let acquisitions = waits.len() as u64;
    let counter = counter.lock().map(|c| c.values().sum()).unwrap_or(0);
    Outcome {
        acquisitions,
        counter,
        mean: waits.iter().sum::<Duration>() / u32::try_from(waits.len()).unwrap_or(1).max(1),
        max: waits.iter().copied().max().unwrap_or_default(),
        ops_per_acquisition: store.op_counts().total() as f64 / acquisitions.max(1) as f64,
        violations: oracle.violations().len(),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    println!(
        "lockshift smoke: {WORKERS} workers × {PER_WORKER} acquisitions of one lock, embedded store, 1–3 ms latency\n"
    );
    println!(
        "{:<8} {:>6} {:>8} {:>10} {:>10} {:>8}",
        "algo", "acq", "counter", "mean wait", "max wait", "ops/acq"
    );
    let mut ok = true;
    for algorithm in ["queue", "legacy"] {
        let o = run(algorithm).await;
        println!(
            "{:<8} {:>6} {:>8} {:>10.1?} {:>10.1?} {:>8.1}",
            algorithm, o.acquisitions, o.counter, o.mean, o.max, o.ops_per_acquisition
        );
        ok &= o.counter == o.acquisitions && o.violations == 0;
    }
    if ok {
        println!("\nverdict: OK — every increment kept, no two holders at once");
        ExitCode::SUCCESS
    } else {
        println!("\nverdict: FAILED — exclusion was violated");
        ExitCode::FAILURE
    }
}
