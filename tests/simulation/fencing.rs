//! Fencing tokens (issue 10 item 7): a resource that refuses any token not
//! above the largest it has seen must never refuse a legitimate holder —
//! through slow heads, reservations, re-enqueues and ±5 s clock skew, for
//! every algorithm (each hands out tokens on request).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lockshift_lock::{AcquireOptions, Binding, LeaseSettings, LockId};
use lockshift_store::{FaultPlan, FaultScope, OpKind, schema};
use lockshift_tests::fleet::{self, SimLocker};
use lockshift_tests::sim::{Cluster, NodeEnv, Oracle, for_each_seed, paused, skews};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A resource guarded by fencing tokens: it keeps the largest token seen per
/// lock and refuses anything not above it.
#[derive(Debug, Default)]
struct FencedResource {
    largest: Mutex<HashMap<String, u64>>,
    refused: Mutex<Vec<String>>,
}

impl FencedResource {
    fn write(&self, lock: &str, owner: &str, token: u64) {
        let mut largest = self.largest.lock().unwrap_or_else(PoisonError::into_inner);
        let seen = largest.entry(lock.to_string()).or_default();
        if token <= *seen {
            self.refused
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(format!("{owner} on {lock}: token {token} after {seen}"));
        } else {
            *seen = token;
        }
    }
}

/// `nodes` nodes (node `i` runs `makes[i % len]`, its clock off by up to
/// `clock_skew`) take two locks `per_node` times each; every holder takes
/// its token inside the critical section and writes to the resource.
/// Returns the refusals of holders whose lease was still valid.
fn run(
    seed: u64,
    nodes: usize,
    plan: &FaultPlan,
    slow_reads_on_node_0: bool,
    clock_skew: Duration,
    makes: &[fn(&NodeEnv) -> SimLocker],
) -> (Vec<String>, usize) {
    paused(async {
        let cluster = Cluster::for_seed(seed);
        let offsets = skews(seed, nodes, clock_skew);
        let lockers: Vec<SimLocker> = (0..nodes)
            .map(|i| {
                let mut plan = plan.clone();
                if i == 0 && slow_reads_on_node_0 {
                    // A head whose verifying read of `main` is slow: the next
                    // waiter reserves behind it and overtakes it.
                    plan.slow = Some((
                        FaultScope {
                            tables: Some(vec![schema::MAIN]),
                            ops: Some(vec![OpKind::Read]),
                        },
                        Duration::from_millis(60),
                    ));
                }
                makes[i % makes.len()](&cluster.node(
                    i,
                    seed,
                    plan,
                    offsets[i],
                    LeaseSettings::default(),
                ))
            })
            .collect();
        let resource = Arc::new(FencedResource::default());
        let oracle = Arc::new(Oracle::default());
        let mut tasks = Vec::new();
        for (i, l) in lockers.iter().enumerate() {
            let (locker, resource, oracle) = (l.locker.clone(), resource.clone(), oracle.clone());
            let mut rng = StdRng::seed_from_u64(seed ^ ((i as u64 + 1) << 20));
            tasks.push(tokio::spawn(async move {
                let mut taken = 0;
                for _ in 0..15 {
                    let lock = LockId::new(if rng.random_bool(0.5) { "f1" } else { "f2" })
                        .expect("a valid lock id");
                    let Ok(guard) = locker
                        .acquire_with(
                            &lock,
                            AcquireOptions::with_timeout(Duration::from_secs(3600)),
                            &Binding::unbound(),
                        )
                        .await
                    else {
                        continue;
                    };
                    let owner = guard.owner().to_string();
                    oracle.enter(lock.as_str(), &owner);
                    if let Ok(token) = guard.fencing_token().await {
                        tokio::time::sleep(Duration::from_millis(rng.random_range(0..10))).await;
                        // A careful client: only while the lease holds.
                        if !guard.is_lost() {
                            resource.write(lock.as_str(), &owner, token);
                            taken += 1;
                        }
                    }
                    oracle.exit(lock.as_str(), &owner);
                    let _ = guard.release().await;
                }
                taken
            }));
        }
        let mut taken = 0;
        for t in tasks {
            taken += t.await.expect("a worker finishes");
        }
        drop(lockers);
        assert!(oracle.violations().is_empty(), "{:?}", oracle.violations());
        let refused = resource
            .refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        (refused, taken)
    })
}

fn plan() -> FaultPlan {
    FaultPlan {
        fail_before: 0.02,
        fail_after: 0.02,
        ..FaultPlan::latency(Duration::from_millis(2), Duration::from_millis(4))
    }
}

fn check(test: &str, slow_head: bool, clock_skew: Duration, makes: &[fn(&NodeEnv) -> SimLocker]) {
    for_each_seed(test, 0, 8, |seed| {
        let (refused, taken) = run(seed, 5, &plan(), slow_head, clock_skew, makes);
        assert!(
            refused.is_empty(),
            "seed {seed}: the resource refused legitimate holders ({} of {taken}): {:?}",
            refused.len(),
            refused.iter().take(3).collect::<Vec<_>>()
        );
        assert!(taken > 0, "seed {seed}: no token was used");
    });
}

/// Item 7 (a): a slow head is overtaken by a reserving waiter; the tokens
/// still increase in the order the lock was held.
#[test]
fn fencing_tokens_increase_past_a_slow_head() {
    check(
        "fencing_tokens_increase_past_a_slow_head",
        true,
        Duration::ZERO,
        &[fleet::queue],
    );
}

/// Item 7 (b): clocks ±5 s apart (the default skew margin) with the hybrid
/// time service.
#[test]
fn fencing_tokens_increase_across_skewed_clocks() {
    check(
        "fencing_tokens_increase_across_skewed_clocks",
        false,
        Duration::from_secs(5),
        &[fleet::queue],
    );
}

/// Every algorithm hands out tokens, and they increase across a fleet that
/// mixes legacy and combined holders (stage `legacy`), skewed clocks and a
/// slow node.
#[test]
fn fencing_tokens_increase_across_algorithms() {
    check(
        "fencing_tokens_increase_across_algorithms",
        true,
        Duration::from_secs(5),
        &[fleet::legacy, fleet::combined],
    );
}
