//! What a lock's home costs clients in and out of it (docs/design.md §4a):
//! requests per acquisition by the datacenter that coordinated them, and
//! the hand-off to a waiter at home and to one elsewhere, in round trips
//! of each.
//!
//! Two clients take one lock homed in the *home* datacenter: one in it,
//! one in the *far* datacenter. Each client's store is wrapped in a
//! counting [`FaultyStore`], which tallies every request by the datacenter
//! its route pins — what the homes router sent where — and, on the
//! embedded cluster, adds the round trip of the link between the two
//! datacenters to every request that crosses it.
//!
//! - **Uncontended:** each client takes and releases the lock K times by
//!   itself. Requests are counted per acquisition (taking and releasing
//!   it), and the time per acquisition is given in the client's own round
//!   trips: a far client's are the link's.
//! - **Hand-off:** the home client holds the lock while the other waits
//!   (at home: a second home client; far: the far client), and releases
//!   it; the time from the release to the waiter's hold, K times, median,
//!   in the waiter's round trips.
//!
//! On the embedded cluster (the default) the round trips are the
//! configured ones on a paused clock, so the numbers are exact and
//! repeatable. On a real cluster (`--contact-points`, one client per
//! datacenter named), the counts are what matters: a home client's
//! requests must all be coordinated at home.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use lockshift_lock::{Algorithm, LeaseSettings, LockContext, LockId, Locker, NodeId};
use lockshift_queue_lock::{QueueSettings, TimeSettings, TimeSourceKind};
use lockshift_rollout::homes::{
    Configured, HomesRouter, HomesView, Refresher, keep_fresh, refresh, seed,
};
use lockshift_rollout::{LockerSettings, Lockers};
use lockshift_store::{
    CqlSettings, CqlStore, Datacenter, FaultPlan, FaultyStore, MemoryStore, SharedClock,
    SharedStore, Store, SystemClock, TokioClock,
};
use serde::Serialize;
use tokio::time::Instant;

use crate::error::BenchError;
use crate::worker::acquire_at_full_speed;

/// What [`run_datacenters`] measures.
#[derive(Clone, Debug, Serialize)]
pub struct DatacenterBenchConfig {
    /// Acquisitions per measurement.
    pub acquisitions: u32,
    /// Round trip within a datacenter (the embedded cluster).
    #[serde(with = "humantime_serde")]
    pub local_rtt: Duration,
    /// Round trip across the link (the embedded cluster).
    #[serde(with = "humantime_serde")]
    pub remote_rtt: Duration,
    /// Algorithms measured.
    pub algorithms: Vec<Algorithm>,
    /// A real cluster instead of the embedded one: its settings (contact
    /// points, keyspace) and the two datacenters — the lock's home first.
    pub cluster: Option<(CqlSettings, Datacenter, Datacenter)>,
}

impl Default for DatacenterBenchConfig {
    fn default() -> Self {
        DatacenterBenchConfig {
            acquisitions: 200,
            local_rtt: Duration::from_millis(2),
            remote_rtt: Duration::from_millis(40),
            algorithms: vec![Algorithm::Queue, Algorithm::Combined],
            cluster: None,
        }
    }
}

/// One client's measurements for one algorithm.
#[derive(Clone, Debug, Serialize)]
pub struct ClientRun {
    /// `home` or `far`.
    pub client: &'static str,
    /// The client's datacenter.
    pub datacenter: String,
    /// Requests per uncontended acquisition (take and release), by the
    /// datacenter that coordinated them.
    pub requests_per_acquisition: BTreeMap<String, f64>,
    /// Requests per acquisition coordinated outside the client's own
    /// datacenter.
    pub cross_datacenter_per_acquisition: f64,
    /// Mean time of an uncontended take, ms.
    pub uncontended_ms: f64,
    /// The same, in the client's own round trips.
    pub uncontended_rt: f64,
    /// Median time from the holder's release to this client's hold, ms.
    pub handoff_median_ms: f64,
    /// The same, in this client's round trips.
    pub handoff_rt: f64,
}

/// One algorithm: the home client's and the far client's runs.
#[derive(Clone, Debug, Serialize)]
pub struct AlgorithmRun {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Home, then far.
    pub clients: Vec<ClientRun>,
}

/// The report of [`run_datacenters`].
#[derive(Clone, Debug, Serialize)]
pub struct DatacenterBenchReport {
    /// Where it ran: `embedded` or the cluster's contact points.
    pub store: String,
    /// The lock's home.
    pub home: String,
    /// The far datacenter.
    pub far: String,
    /// The configuration.
    pub config: DatacenterBenchConfig,
    /// Per algorithm.
    pub runs: Vec<AlgorithmRun>,
}

/// One client: its counting store and its locker.
struct Client {
    counts: Arc<FaultyStore<SharedStore>>,
    locker: Arc<dyn Locker>,
    rtt: Duration,
    /// Keeps the client's view of the home confirmed.
    _fresh: Refresher,
}

/// Runs the datacenter benchmark: on the embedded cluster, on a paused
/// clock; on a real cluster, in real time.
///
/// # Errors
/// The cluster cannot be reached, or an acquisition fails.
pub async fn run_datacenters(
    config: &DatacenterBenchConfig,
) -> Result<DatacenterBenchReport, BenchError> {
    let (home, far) = match &config.cluster {
        Some((_, home, far)) => (home.clone(), far.clone()),
        None => (dc("dc1"), dc("dc2")),
    };
    let mut runs = Vec::new();
    let nonce = crate::worker::now_micros();
    for &algorithm in &config.algorithms {
        let sites = Sites::open(config).await?;
        let at_home = sites.client(config, &home, &home, algorithm, 1).await?;
        let second = sites.client(config, &home, &home, algorithm, 2).await?;
        let away = sites.client(config, &far, &home, algorithm, 3).await?;
        let lock = LockId::new(format!("bench-dc-{algorithm}-{nonce}"))?;
        let mut clients = Vec::new();
        for (name, client, place) in [("home", &at_home, &home), ("far", &away, &far)] {
            let (requests, took) = uncontended(client, &lock, config.acquisitions).await?;
            let handoffs = handoffs(&second, client, &lock, config.acquisitions).await?;
            let n = f64::from(config.acquisitions.max(1));
            let per: BTreeMap<String, f64> = requests
                .iter()
                .map(|(dc, count)| (dc.clone(), *count as f64 / n))
                .collect();
            let cross = per
                .iter()
                .filter(|(dc, _)| dc.as_str() != place.as_str())
                .fold(0.0, |sum, (_, v)| sum + v);
            let rtt_ms = client.rtt.as_secs_f64() * 1000.0;
            let uncontended_ms = took.as_secs_f64() * 1000.0 / n;
            let median = median_ms(handoffs);
            clients.push(ClientRun {
                client: name,
                datacenter: place.to_string(),
                requests_per_acquisition: per,
                cross_datacenter_per_acquisition: cross,
                uncontended_ms,
                uncontended_rt: uncontended_ms / rtt_ms,
                handoff_median_ms: median,
                handoff_rt: median / rtt_ms,
            });
        }
        runs.push(AlgorithmRun { algorithm, clients });
    }
    Ok(DatacenterBenchReport {
        store: match &config.cluster {
            Some((cql, _, _)) => format!("cql {}", cql.contact_points.join(",")),
            None => "embedded (two datacenters, paused clock)".to_string(),
        },
        home: home.to_string(),
        far: far.to_string(),
        config: config.clone(),
        runs,
    })
}

fn dc(name: &str) -> Datacenter {
    // Constants of this module, valid names.
    Datacenter::new(name).unwrap_or_else(|_| unreachable!())
}

/// Where the clients' stores come from.
enum Sites {
    Embedded(Arc<MemoryStore>, SharedClock),
    Cluster(Box<CqlSettings>),
}

impl Sites {
    async fn open(config: &DatacenterBenchConfig) -> Result<Sites, BenchError> {
        Ok(match &config.cluster {
            Some((cql, _, _)) => Sites::Cluster(Box::new(cql.clone())),
            None => {
                let clock = Arc::new(TokioClock::new());
                let cluster = MemoryStore::with_clock(clock.clone())
                    .with_datacenters(vec![(dc("dc1"), 3), (dc("dc2"), 3)], 1);
                Sites::Embedded(Arc::new(cluster), clock)
            }
        })
    }

    /// A client in `place` whose locks live in `home`.
    async fn client(
        &self,
        config: &DatacenterBenchConfig,
        place: &Datacenter,
        home: &Datacenter,
        algorithm: Algorithm,
        n: u64,
    ) -> Result<Client, BenchError> {
        let (raw, clock, plan): (SharedStore, SharedClock, FaultPlan) = match self {
            Sites::Embedded(cluster, clock) => {
                let handle = cluster
                    .client_in(place)
                    .ok_or_else(|| BenchError::Setting(format!("no datacenter {place}")))?;
                let plan = FaultPlan {
                    remote_latency: config.remote_rtt.saturating_sub(config.local_rtt),
                    ..FaultPlan::latency(config.local_rtt, Duration::ZERO)
                };
                (Arc::new(handle), clock.clone(), plan)
            }
            Sites::Cluster(cql) => {
                let settings = CqlSettings {
                    local_datacenter: Some(place.clone()),
                    ..(**cql).clone()
                };
                let store: SharedStore = Arc::new(CqlStore::connect(&settings).await?);
                (store, Arc::new(SystemClock), FaultPlan::default())
            }
        };
        let counts = Arc::new(FaultyStore::new(raw, n).with_plan(plan));
        // The round trip as this client meets it (on the paused clock a
        // request's two sleeps each round up to the timer's millisecond).
        let rtt = round_trip(counts.as_ref(), home).await?;
        let view = Arc::new(HomesView::new(
            clock.clone(),
            Some(place.clone()),
            Configured::new(Some(home.clone()), []),
            Duration::from_secs(30),
        ));
        let routed: SharedStore = Arc::new(HomesRouter::new(counts.clone(), view.clone()));
        let report = refresh(&routed, &view).await;
        seed(
            &routed,
            &view,
            &report,
            &format!("bench-{n}"),
            Duration::ZERO,
        )
        .await?;
        refresh(&routed, &view).await;
        let fresh = keep_fresh(routed.clone(), view, Duration::from_secs(10));
        let node = NodeId::new(format!("bench-{place}-{n}"))?;
        let ctx = LockContext::new(routed, clock, node, LeaseSettings::default(), Some(n))
            .map_err(|e| BenchError::Setting(e.to_string()))?;
        let locker = Lockers::new(
            Arc::new(ctx),
            LockerSettings {
                queue: QueueSettings::default(),
                // No GlobalTime updates: they are not on the acquire path,
                // and would be counted as if they were.
                time: TimeSettings {
                    source: TimeSourceKind::Local,
                    ..TimeSettings::default()
                },
                ..LockerSettings::default()
            },
        )
        .build(algorithm);
        counts.reset_counts();
        Ok(Client {
            counts,
            locker,
            rtt,
            _fresh: fresh,
        })
    }
}

/// The tables of a lock's own cells: what the acquire path touches (the
/// client's refreshes of its view of the homes read `rollout`, off it).
const LOCK_TABLES: [lockshift_store::Table; 4] = [
    lockshift_store::schema::MAIN,
    lockshift_store::schema::SHADOW,
    lockshift_store::schema::QUEUE,
    lockshift_store::schema::GLOBAL_TIME,
];

/// Takes and releases `lock` `k` times alone: the requests by datacenter,
/// and the time spent taking it.
async fn uncontended(
    client: &Client,
    lock: &LockId,
    k: u32,
) -> Result<(BTreeMap<String, u64>, Duration), BenchError> {
    let mut took = Duration::ZERO;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for _ in 0..k {
        // Counted from the take to the release's end: the refreshes of the
        // client's view of the homes fall between, off the acquire path.
        client.counts.reset_counts();
        let started = Instant::now();
        let won = acquire_at_full_speed(client.locker.as_ref(), lock)
            .await
            .map_err(|e| BenchError::Lock(e.to_string()))?;
        took += started.elapsed();
        won.release()
            .await
            .map_err(|e| BenchError::Lock(e.to_string()))?;
        for (dc, n) in client.counts.counts_by_datacenter_of(Some(&LOCK_TABLES)) {
            *counts.entry(dc).or_default() += n;
        }
    }
    Ok((counts, took))
}

/// `holder` takes `lock`, `waiter` waits for it, `holder` releases: the
/// time from the release to the waiter's hold, `k` times.
async fn handoffs(
    holder: &Client,
    waiter: &Client,
    lock: &LockId,
    k: u32,
) -> Result<Vec<Duration>, BenchError> {
    let mut out = Vec::new();
    let hold = waiter.rtt.saturating_mul(20).max(Duration::from_millis(20));
    for _ in 0..k {
        let held = acquire_at_full_speed(holder.locker.as_ref(), lock)
            .await
            .map_err(|e| BenchError::Lock(e.to_string()))?;
        let waiting = {
            let locker = waiter.locker.clone();
            let lock = lock.clone();
            tokio::spawn(async move {
                let won = acquire_at_full_speed(locker.as_ref(), &lock).await;
                (Instant::now(), won)
            })
        };
        // Long enough for the waiter to be in line (and, where it does,
        // prepared) before the release.
        tokio::time::sleep(hold).await;
        let released = Instant::now();
        held.release()
            .await
            .map_err(|e| BenchError::Lock(e.to_string()))?;
        let (at, won) = waiting.await.map_err(|e| BenchError::Lock(e.to_string()))?;
        let won = won.map_err(|e| BenchError::Lock(e.to_string()))?;
        out.push(at.saturating_duration_since(released));
        won.release()
            .await
            .map_err(|e| BenchError::Lock(e.to_string()))?;
    }
    Ok(out)
}

/// The mean of ten reads pinned to `home`: a client's round trip to the
/// lock's home, on a real cluster.
async fn round_trip(store: &dyn Store, home: &Datacenter) -> Result<Duration, BenchError> {
    let route = lockshift_store::Route::Datacenter(home.clone());
    let mut total = Duration::ZERO;
    for _ in 0..10 {
        let started = Instant::now();
        store
            .read_via(
                &route,
                lockshift_store::schema::SCRATCH,
                "round-trip",
                &lockshift_store::RowQuery::first(1),
            )
            .await?;
        total += started.elapsed();
    }
    Ok(total / 10)
}

fn median_ms(mut samples: Vec<Duration>) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1000.0
}

/// Runs [`run_datacenters`] on the embedded cluster, on a paused clock of
/// its own runtime (the numbers are exact round trips).
///
/// # Errors
/// As [`run_datacenters`].
pub fn run_datacenters_embedded(
    config: &DatacenterBenchConfig,
) -> Result<DatacenterBenchReport, BenchError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .map_err(BenchError::Io)?
        .block_on(run_datacenters(config))
}

/// The report as a table.
pub fn render_datacenters(report: &DatacenterBenchReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "datacenters: one lock homed in {}, a client there and one in {} ({})",
        report.home, report.far, report.store
    );
    let _ = writeln!(
        s,
        "{:<9} {:<5} {:<6} {:<28} {:>7} {:>12} {:>12}",
        "algorithm",
        "client",
        "dc",
        "requests/acquisition by dc",
        "cross",
        "uncontended",
        "hand-off"
    );
    for run in &report.runs {
        for c in &run.clients {
            let by: Vec<String> = c
                .requests_per_acquisition
                .iter()
                .map(|(dc, v)| format!("{dc} {v:.2}"))
                .collect();
            let _ = writeln!(
                s,
                "{:<9} {:<5} {:<6} {:<28} {:>7.2} {:>9.2} RT {:>9.2} RT",
                run.algorithm.as_str(),
                c.client,
                c.datacenter,
                by.join(", "),
                c.cross_datacenter_per_acquisition,
                c.uncontended_rt,
                c.handoff_rt
            );
        }
    }
    s.push_str("(RT: the client's own round trip — within its datacenter for the home client, across the link for the far one)\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 29's "no cross-datacenter request at home": every request of
    /// a home client's acquisitions is coordinated at home, and every one
    /// of a far client's goes to the home too (none at its own datacenter,
    /// none on the store's default route).
    #[test]
    fn a_home_client_stays_home_and_a_far_client_goes_home() {
        let report = run_datacenters_embedded(&DatacenterBenchConfig {
            acquisitions: 10,
            ..DatacenterBenchConfig::default()
        })
        .unwrap();
        let table = render_datacenters(&report);
        eprintln!("{table}");
        for run in &report.runs {
            let [home, far] = run.clients.as_slice() else {
                panic!("two clients: {table}");
            };
            assert_eq!(home.cross_datacenter_per_acquisition, 0.0, "{table}");
            assert_eq!(
                home.requests_per_acquisition.keys().collect::<Vec<_>>(),
                ["dc1"],
                "{table}"
            );
            assert_eq!(
                far.requests_per_acquisition.keys().collect::<Vec<_>>(),
                ["dc1"],
                "{table}"
            );
            assert!(far.cross_datacenter_per_acquisition > 0.0, "{table}");
            // A far client's acquisition takes the same requests as a home
            // client's: the same line, each request one link away.
            assert_eq!(
                home.requests_per_acquisition["dc1"], far.requests_per_acquisition["dc1"],
                "{table}"
            );
        }
    }
}
