//! Legacy nodes beside combined ones (issue 10 item 6): at stage `legacy` a
//! legacy node must wait no worse beside combined nodes than beside other
//! legacy nodes. Legacy waiters are invisible (they only read `main`) and
//! poll at their own pace, so a combined lock that polls at the queue's
//! speed, or keeps a prepared `shadow` cell across every hold, wins every
//! hand-off; the combined lock therefore takes its turn at the legacy pace
//! while legacy may run (`Pacing::BesideLegacy`).
//!
//! The measure: six nodes in tight loops on one lock for ten simulated
//! minutes, all legacy versus three legacy and three combined; the longest
//! legacy wait, counting a wait still unfinished at the end.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lockshift_lock::{AcquireOptions, Algorithm, Binding, LeaseSettings, LockId};
use lockshift_store::FaultPlan;
use lockshift_tests::fleet::{self, SimLocker};
use lockshift_tests::sim::{Cluster, NodeEnv, Oracle, SEED_VAR, critical_section, paused};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

/// Per algorithm: acquisitions and the longest wait.
type Waits = BTreeMap<Algorithm, (u64, Duration)>;

fn fleet_waits(seed: u64, makes: &[fn(&NodeEnv) -> SimLocker], run_for: Duration) -> Waits {
    paused(async {
        let cluster = Cluster::for_seed(seed);
        let plan = FaultPlan::latency(Duration::from_millis(2), Duration::from_millis(4));
        let lockers: Vec<SimLocker> = makes
            .iter()
            .enumerate()
            .map(|(i, make)| {
                make(&cluster.node(i, seed, plan.clone(), 0, LeaseSettings::default()))
            })
            .collect();
        let waits: Arc<Mutex<Waits>> = Arc::default();
        let oracle = Arc::new(Oracle::default());
        let counters = Arc::new(Mutex::new(std::collections::HashMap::new()));
        let end = Instant::now() + run_for;
        let lock = LockId::new("hot").expect("a valid lock id");
        let mut tasks = Vec::new();
        for (i, l) in lockers.iter().enumerate() {
            let (locker, waits, oracle, counters, lock) = (
                l.locker.clone(),
                waits.clone(),
                oracle.clone(),
                counters.clone(),
                lock.clone(),
            );
            let mut rng = StdRng::seed_from_u64(seed ^ ((i as u64 + 1) << 24));
            tasks.push(tokio::spawn(async move {
                let algorithm = locker.algorithm();
                let record = |waited: Duration, acquired: bool| {
                    let mut w = waits.lock().unwrap_or_else(PoisonError::into_inner);
                    let e = w.entry(algorithm).or_default();
                    e.0 += u64::from(acquired);
                    e.1 = e.1.max(waited);
                };
                while Instant::now() < end {
                    let started = Instant::now();
                    let left = end.saturating_duration_since(started);
                    match locker
                        .acquire_with(
                            &lock,
                            AcquireOptions::with_timeout(left),
                            &Binding::unbound(),
                        )
                        .await
                    {
                        Ok(guard) => {
                            record(started.elapsed(), true);
                            let hold = Duration::from_millis(rng.random_range(10..60));
                            critical_section(&oracle, &counters, &guard, hold).await;
                            let _ = guard.release().await;
                        }
                        // Still waiting when the run ends: that wait counts.
                        Err(_) => record(started.elapsed(), false),
                    }
                }
            }));
        }
        for t in tasks {
            t.await.expect("a worker finishes");
        }
        drop(lockers);
        assert!(oracle.violations().is_empty(), "{:?}", oracle.violations());
        waits.lock().unwrap_or_else(PoisonError::into_inner).clone()
    })
}

#[test]
fn legacy_waits_beside_combined_no_worse_than_beside_legacy() {
    let test = "legacy_waits_beside_combined_no_worse_than_beside_legacy";
    let run_for = Duration::from_secs(600);
    // A measurement, not a search for rare interleavings: it compares two
    // maxima of random waits, so it runs on a fixed seed (twenty simulated
    // minutes) and `LOCKSHIFT_SEEDS` does not scale it; `LOCKSHIFT_SEED`
    // replays another. Seeds 0–11 measured: the ratio stays at or below 1.6.
    let seed = std::env::var(SEED_VAR)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    {
        let legacy: fn(&NodeEnv) -> SimLocker = fleet::legacy;
        let all_legacy = fleet_waits(seed, &[legacy; 6], run_for);
        let mixed = fleet_waits(
            seed,
            &[
                legacy,
                fleet::combined,
                legacy,
                fleet::combined,
                legacy,
                fleet::combined,
            ],
            run_for,
        );
        let (n_alone, max_alone) = all_legacy[&Algorithm::Legacy];
        let (n_mixed, max_mixed) = mixed[&Algorithm::Legacy];
        let (n_combined, max_combined) = mixed[&Algorithm::Combined];
        println!(
            "seed {seed}: 6 legacy: {n_alone} acquisitions, longest wait {max_alone:?}; \
             3 legacy + 3 combined: legacy {n_mixed} acquisitions, longest wait {max_mixed:?}; \
             combined {n_combined}, longest wait {max_combined:?}"
        );
        assert!(
            max_mixed <= max_alone * 2,
            "{test} seed {seed}: legacy's longest wait beside combined ({max_mixed:?}) is \
             more than twice its longest wait beside legacy ({max_alone:?})"
        );
    }
}
