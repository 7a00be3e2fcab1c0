//! What an idle process costs the cluster, and whether that grows with
//! the fleet (`migrate bench --idle --processes 1,10,100,1000`).
//!
//! For each fleet size N, N nodes start on one embedded store and do
//! nothing but live: they heartbeat into the registry, re-read the stage
//! and the homes, and measure their clocks. After a warm-up, every request
//! is counted for a window, by table and by kind (reads: row reads, scans,
//! clock reads; writes: writes, deletes, fenced writes), by a counting
//! layer around each node's store ([`Meter`]). The report gives one
//! process's requests a second by table and the fleet's divided by N:
//! neither may grow with N, since no process reads everyone's rows on a
//! timer. Then `migrate status`'s evidence is gathered once beside the
//! fleet: the registry it lists (all N) and the requests it took.
//!
//! By default it runs on an embedded store, on a paused clock of its own
//! runtime (the store answers at once, the nodes' timers fire on time), so
//! a thousand nodes and a window of minutes take seconds and the counts
//! are exact. The requests an idle process sends do not depend on the
//! store that answers them. The time service's updater (`global_time`)
//! rests once no queue time has been asked of it for 30 s, so a process
//! that takes no queue lock sends it nothing after the warm-up; while it
//! runs, only an updater whose clock leads the cell writes it (on the
//! embedded store's one shared clock, only the first).
//!
//! With a cluster ([`run_idle_on_cluster`]) the same fleets — the same
//! nodes, in this process — run against a real cluster, each fleet in a
//! keyspace of its own (`lockshift_bench_idle_N`, created as `migrate
//! schema --apply` creates one, dropped after), in real time: a shorter
//! warm-up and window ([`CLUSTER_WARMUP`], [`CLUSTER_WINDOW`] by default),
//! and the counts are rates over the window as measured, not exact.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, StreamExt, TryStreamExt};
use lockshift::{Node, Settings};
use lockshift_rollout::Rollout;
use lockshift_store::{
    CqlSettings, MemoryStore, SharedClock, SharedStore, Store, SystemClock, Table, TokioClock,
};
use serde::Serialize;

use crate::census::Meter;
use crate::error::BenchError;
use crate::targets::{EMBEDDED, drop_after, own_keyspace};

/// The warm-up on the embedded store (paused clock: free).
pub const EMBEDDED_WARMUP: Duration = Duration::from_secs(60);

/// The counting window on the embedded store, by default.
pub const EMBEDDED_WINDOW: Duration = Duration::from_secs(300);

/// The warm-up on a cluster (real time): the nodes' first stage reads and
/// clock measurements are behind them, and the time service's updater,
/// asked for no queue time, has come to rest (30 s at the default
/// `time.update_every`; the queue lock's `time::IDLE_TICKS`): the steady
/// state begun.
pub const CLUSTER_WARMUP: Duration = Duration::from_secs(40);

/// The counting window on a cluster, by default (real time): some 7 reads
/// of the stage per process.
pub const CLUSTER_WINDOW: Duration = Duration::from_secs(30);

/// Nodes started at once (each start is a few round trips: its registry
/// row, the stage, its clock).
const START_IN_FLIGHT: usize = 16;

/// What the idle benchmark runs.
#[derive(Clone, Debug)]
pub struct IdleBenchConfig {
    /// Fleet sizes, in order.
    pub fleets: Vec<u32>,
    /// How long the fleet lives before counting starts (its first stage
    /// reads and clock measurements are not its steady state).
    pub warmup: Duration,
    /// How long requests are counted.
    pub window: Duration,
    /// The fleet's settings (node ids are given per node).
    pub settings: Settings,
    /// A real cluster instead of the embedded store
    /// ([`run_idle_on_cluster`]).
    pub cluster: Option<CqlSettings>,
}

/// Requests a second to one table.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TableLoad {
    /// The table.
    pub table: String,
    /// Reads (row reads, scans, clock reads) a second.
    pub reads_per_s: f64,
    /// Writes (writes, deletes, fenced writes) a second.
    pub writes_per_s: f64,
}

/// One fleet size.
#[derive(Clone, Debug, Serialize)]
pub struct IdleRun {
    /// Live processes.
    pub processes: u32,
    /// The counting window, in seconds (as measured, on a cluster).
    pub window_s: f64,
    /// The first process's requests a second, by table.
    pub one_process: Vec<TableLoad>,
    /// The whole fleet's requests a second by table, divided by the
    /// number of processes.
    pub per_process: Vec<TableLoad>,
    /// Live processes `status`'s evidence listed beside the fleet.
    pub status_listed: usize,
    /// Requests `status`'s evidence took.
    pub status_requests: u64,
}

/// The idle benchmark's report.
#[derive(Clone, Debug, Serialize)]
pub struct IdleBenchReport {
    /// What answered: the embedded store (paused clock) or the cluster.
    pub store: String,
    /// Seconds the fleets lived before counting began.
    pub warmup_s: f64,
    /// One run per fleet size.
    pub runs: Vec<IdleRun>,
}

type Counts = BTreeMap<(Table, bool), u64>;

/// Requests a second by table, from `counts` over `window`, each divided
/// by `per`.
fn rates(counts: &Counts, window: Duration, per: u32) -> Vec<TableLoad> {
    let mut by_table: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for ((table, write), n) in counts {
        let entry = by_table.entry(table.to_string()).or_default();
        if *write {
            entry.1 += n;
        } else {
            entry.0 += n;
        }
    }
    let seconds = window.as_secs_f64() * f64::from(per.max(1));
    by_table
        .into_iter()
        .map(|(table, (reads, writes))| TableLoad {
            table,
            reads_per_s: reads as f64 / seconds,
            writes_per_s: writes as f64 / seconds,
        })
        .collect()
}

fn add(into: &mut Counts, from: Counts) {
    for (key, n) in from {
        *into.entry(key).or_default() += n;
    }
}

/// One fleet of `n` idle nodes on `store`, on `clock`: warm-up, window,
/// then `status`'s evidence beside them.
async fn measure(
    config: &IdleBenchConfig,
    store: SharedStore,
    clock: SharedClock,
    n: u32,
) -> Result<IdleRun, BenchError> {
    let started: Vec<(Node, Arc<Meter<SharedStore>>)> = stream::iter(0..n)
        .map(|i| {
            let (store, clock) = (store.clone(), clock.clone());
            async move {
                let load = Arc::new(Meter::new(store));
                let mut settings = config.settings.clone();
                settings.node.id = Some(format!("idle-{i}"));
                let node = Node::builder()
                    .settings(settings)
                    .store(load.clone())
                    .clock(clock)
                    .start()
                    .await
                    .map_err(|e| BenchError::Lock(format!("node idle-{i}: {e}")))?;
                Ok::<_, BenchError>((node, load))
            }
        })
        .buffered(START_IN_FLIGHT)
        .try_collect()
        .await?;
    let (nodes, loads): (Vec<Node>, Vec<_>) = started.into_iter().unzip();
    tokio::time::sleep(config.warmup).await;
    for load in &loads {
        load.take_by_kind();
    }
    let opened = tokio::time::Instant::now();
    tokio::time::sleep(config.window).await;
    let one = loads.first().map(|l| l.take_by_kind()).unwrap_or_default();
    let mut fleet = one.clone();
    for load in loads.iter().skip(1) {
        add(&mut fleet, load.take_by_kind());
    }
    // On a paused clock exactly the window; in real time a little more.
    let window = opened.elapsed();

    let status = Arc::new(Meter::new(store));
    let lock = &config.settings.lock;
    let rollout = Rollout::new(
        status.clone(),
        clock,
        config.settings.rollout.clone(),
        lock.lease(),
        lock.queue.clone(),
    );
    let evidence = rollout.evidence().await;
    let status_requests = status.take().total;
    for node in &nodes {
        node.shutdown().await;
    }
    let evidence = evidence.map_err(|e| BenchError::Store(e.error))?;
    Ok(IdleRun {
        processes: n,
        window_s: window.as_secs_f64(),
        one_process: rates(&one, window, 1),
        per_process: rates(&fleet, window, n),
        status_listed: evidence.nodes.len(),
        status_requests,
    })
}

/// Runs the idle benchmark on a fresh embedded store per fleet, on a
/// paused clock of its own runtime, calling `progress` before each fleet.
///
/// # Errors
/// A node that does not start, or a store error of the status read.
pub fn run_idle(
    config: &IdleBenchConfig,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<IdleBenchReport, BenchError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .map_err(BenchError::Io)?;
    let mut runs = Vec::with_capacity(config.fleets.len());
    for &n in &config.fleets {
        progress(&format!("idle: {n} processes"));
        let clock: SharedClock = Arc::new(TokioClock::new());
        let store: SharedStore = Arc::new(MemoryStore::with_clock(clock.clone()));
        runs.push(runtime.block_on(measure(config, store, clock, n))?);
    }
    Ok(IdleBenchReport {
        store: format!("{EMBEDDED}, paused clock: exact counts"),
        warmup_s: config.warmup.as_secs_f64(),
        runs,
    })
}

/// Runs the idle benchmark on `config.cluster`, in real time: each fleet
/// in a keyspace of its own (`lockshift_bench_idle_N`), created as
/// `migrate schema --apply` creates one and dropped after. Counts are
/// rates over the measured window.
///
/// # Errors
/// No cluster configured, the cluster cannot be reached or a keyspace
/// made, a node does not start, or a store error of the status read.
pub async fn run_idle_on_cluster(
    config: &IdleBenchConfig,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<IdleBenchReport, BenchError> {
    let Some(cluster) = &config.cluster else {
        return Err(BenchError::Setting(
            "no cluster to run the idle fleets on".into(),
        ));
    };
    let mut runs = Vec::with_capacity(config.fleets.len());
    let mut target = String::new();
    for &n in &config.fleets {
        let keyspace = format!("lockshift_bench_idle_{n}");
        let store = own_keyspace(cluster, &keyspace, progress).await?;
        target = store
            .describe()
            .replace(&keyspace, "lockshift_bench_idle_N");
        progress(&format!(
            "idle: {n} processes on {keyspace} ({}s warm-up, {}s window)",
            config.warmup.as_secs_f64(),
            config.window.as_secs_f64()
        ));
        let clock: SharedClock = Arc::new(SystemClock);
        let run = measure(config, store.clone(), clock, n).await;
        progress(&format!("idle: dropping keyspace {keyspace}"));
        runs.push(drop_after(&store, run).await?);
    }
    Ok(IdleBenchReport {
        store: format!("cluster {target}, real time: rates over the window"),
        warmup_s: config.warmup.as_secs_f64(),
        runs,
    })
}

/// The report as a table: per fleet size, one process's requests a second
/// by table, the fleet's per process, and the status read beside it.
pub fn render_idle(report: &IdleBenchReport) -> String {
    use std::fmt::Write as _;
    let mut s = format!(
        "idle processes — requests a second each puts on the cluster, by table ({})\n",
        report.store
    );
    let _ = writeln!(
        s,
        "{:>9}  {:<12} {:>14} {:>15} {:>17} {:>18}",
        "processes",
        "table",
        "one: reads/s",
        "one: writes/s",
        "fleet/N: reads/s",
        "fleet/N: writes/s"
    );
    for run in &report.runs {
        for (one, per) in run.one_process.iter().zip(&run.per_process) {
            let _ = writeln!(
                s,
                "{:>9}  {:<12} {:>14.4} {:>15.4} {:>17.4} {:>18.4}",
                run.processes,
                one.table,
                one.reads_per_s,
                one.writes_per_s,
                per.reads_per_s,
                per.writes_per_s
            );
        }
        let _ = writeln!(
            s,
            "{:>9}  status beside them: {} live processes listed, {} requests ({:.1}s window \
             after {}s warm-up)",
            run.processes, run.status_listed, run.status_requests, run.window_s, report.warmup_s
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fleet of 1 and one of 40: each process sends what it sends alone,
    /// and status lists every one of them.
    #[test]
    fn an_idle_process_costs_the_same_in_a_fleet_of_forty() {
        let config = IdleBenchConfig {
            fleets: vec![1, 40],
            warmup: Duration::from_secs(60),
            window: Duration::from_secs(120),
            settings: Settings::default(),
            cluster: None,
        };
        let report = run_idle(&config, &mut |_| {}).expect("the bench runs");
        let [alone, fleet] = &report.runs[..] else {
            panic!("two runs: {report:?}")
        };
        assert_eq!(alone.status_listed, 1);
        assert_eq!(fleet.status_listed, 40);
        let total = |loads: &[TableLoad]| {
            loads
                .iter()
                .map(|l| l.reads_per_s + l.writes_per_s)
                .sum::<f64>()
        };
        let alone_rate = total(&alone.one_process);
        assert!(alone_rate > 0.0, "an idle process heartbeats: {alone:?}");
        for rate in [total(&fleet.one_process), total(&fleet.per_process)] {
            assert!(
                rate <= alone_rate * 1.25,
                "an idle process in a fleet of 40 sends {rate}/s, alone {alone_rate}/s"
            );
        }
        assert!(render_idle(&report).contains("40 live processes listed"));
    }
}
