//! What following a leader costs (`migrate bench --observers N`;
//! docs/design.md §5b, "Observers").
//!
//! N observers — each a node of its own, each following the election with
//! `Election::observe` — watch it for a window while two candidates take turns
//! leading, a new leader every `leader_every` plus a random part of an
//! observer period (one resigns, the other campaigns): without that part a
//! `leader_every` that is a multiple of the period would elect every
//! leader at the same phase of the observers' reads, and every delay would
//! be the same. Per observer the bench reports:
//!
//! - **reads a second**: the reads of the election's row its node sent in
//!   the window, *counted* by a wrapper around the store each observer's
//!   node runs on ([`RowReads`], which counts every read of that one row
//!   and nothing else: the node's own background work — its registry
//!   entry, the stage — reads other rows), divided by the window;
//! - **delay**: for each leader elected in the window, from its election
//!   (its record's `since`, the time its node took just before writing the
//!   record) to the moment the observer's watch changed to it, both by
//!   this process's wall clock; p50 and max over the leaders, and how many
//!   leaders it saw.
//!
//! The targets are those of [`crate::fenced`]: the embedded store
//! in-process, the local endpoint with an injected latency per round trip,
//! and a real cluster with `--cluster`. On each, once the observers are
//! done, the fenced/plain write ratio of [`crate::fenced`] is measured too
//! (`fenced_writes` of each kind).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use lockshift::{AcquireOptions, Node, OBSERVE_EVERY, Settings};
use lockshift_store::{
    CqlSettings, OpKind, Request, Response, SharedStore, Store, StoreError, SystemClock, Table,
    schema,
};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::error::BenchError;
use crate::fenced::FencedRun;
use crate::targets::on_each_store;
use crate::worker::now_micros;

/// The shortest `leader_every`: a leader must outlast two observer
/// periods for every observer to read it.
pub const MIN_LEADER_EVERY: Duration = Duration::from_secs(1);

/// What to run.
#[derive(Clone, Debug, Serialize)]
pub struct ObserveBenchConfig {
    /// Observers per target.
    pub observers: u32,
    /// How long they are measured.
    pub window: Duration,
    /// How long each leader leads (and a random part of an observer
    /// period more).
    pub leader_every: Duration,
    /// The local endpoint's injected latency per round trip.
    pub latency: Duration,
    /// Fenced and plain writes of each kind for the ratio (0: none).
    pub fenced_writes: u32,
    /// A real cluster to measure too (its keyspace is created if missing).
    #[serde(skip)]
    pub cluster: Option<CqlSettings>,
}

/// One observer's numbers.
#[derive(Clone, Debug, Serialize)]
pub struct ObserverStats {
    /// Its node's id.
    pub observer: String,
    /// Reads of the election's row its node sent in the window (counted).
    pub reads: u64,
    /// `reads` per second of the window.
    pub reads_per_s: f64,
    /// Leaders elected in the window that it saw.
    pub seen: u32,
    /// Leaders elected in the window that it never saw.
    pub missed: u32,
    /// Median delay from a leader's election to this observer seeing it.
    pub delay_p50_ms: f64,
    /// The longest such delay.
    pub delay_max_ms: f64,
}

/// One target's numbers.
#[derive(Clone, Debug, Serialize)]
pub struct ObserveRun {
    /// Where it ran.
    pub target: String,
    /// The window, measured.
    pub window_s: f64,
    /// Leaders elected in the window.
    pub leaders: u32,
    /// Per observer.
    pub observers: Vec<ObserverStats>,
    /// Median delay over every observer and leader.
    pub delay_p50_ms: f64,
    /// The longest delay of any observer.
    pub delay_max_ms: f64,
    /// The fenced/plain write comparison on the same store.
    pub fenced: Option<FencedRun>,
}

/// The report of [`run_observe`].
#[derive(Clone, Debug, Serialize)]
pub struct ObserveBenchReport {
    /// The configuration.
    pub config: ObserveBenchConfig,
    /// How often an observer reads (`lockshift::OBSERVE_EVERY`).
    pub observe_every_ms: f64,
    /// One run per target.
    pub runs: Vec<ObserveRun>,
}

/// Runs the observers on the embedded store, the local endpoint and, if
/// configured, the cluster.
///
/// # Errors
/// A setting out of range, the endpoint or the cluster cannot be reached,
/// a node does not start, a campaign fails.
pub async fn run_observe(config: &ObserveBenchConfig) -> Result<ObserveBenchReport, BenchError> {
    if config.observers == 0 {
        return Err(BenchError::Setting("observers: at least one".into()));
    }
    if config.leader_every < MIN_LEADER_EVERY {
        return Err(BenchError::Setting(format!(
            "leader_every: at least {MIN_LEADER_EVERY:?}, two observer periods"
        )));
    }
    let runs = on_each_store(config.latency, config.cluster.as_ref(), |target, store| {
        measure(target, store, config)
    })
    .await?;
    Ok(ObserveBenchReport {
        config: config.clone(),
        observe_every_ms: OBSERVE_EVERY.as_secs_f64() * 1e3,
        runs,
    })
}

/// A leader elected in the window: its token and when.
#[derive(Clone, Copy, Debug)]
struct Term {
    token: u64,
    since: SystemTime,
}

/// Observers and candidates on `store`, for one window.
async fn measure(
    target: String,
    store: SharedStore,
    config: &ObserveBenchConfig,
) -> Result<ObserveRun, BenchError> {
    let election = format!("bench-observe-{}", now_micros());
    let candidates = [
        start_node(store.clone(), "bench-candidate-0").await?,
        start_node(store.clone(), "bench-candidate-1").await?,
    ];
    let mut observers = Vec::new();
    for i in 0..config.observers {
        let counted = Arc::new(RowReads::new(store.clone(), schema::GLOBAL_TIME, &election));
        let node = start_node(counted.clone(), &format!("bench-observer-{i}")).await?;
        observers.push((node, counted));
    }

    // Each observer follows from its first read on; the window opens once
    // all have read.
    let stop = CancellationToken::new();
    let mut following = Vec::new();
    for (node, _) in &observers {
        let mut watch = node
            .election(election.as_str())
            .map_err(|e| BenchError::Lock(e.to_string()))?
            .observe();
        watch.changed().await;
        let stop = stop.clone();
        following.push(tokio::spawn(async move {
            let mut sightings = Vec::new();
            loop {
                tokio::select! {
                    () = stop.cancelled() => return sightings,
                    changed = watch.changed() => match changed {
                        Some(Some(leader)) => sightings.push((leader.token, SystemTime::now())),
                        Some(None) => {}
                        None => return sightings,
                    },
                }
            }
        }));
    }
    let counted = |observers: &[(Node, Arc<RowReads>)]| -> Vec<u64> {
        observers.iter().map(|(_, c)| c.reads()).collect()
    };
    let opened = Instant::now();
    let opened_wall = SystemTime::now();
    let at_open = counted(&observers);
    let no_more = CancellationToken::new();
    let changing = tokio::spawn(take_turns(
        candidates.clone(),
        election.clone(),
        config.leader_every,
        no_more.clone(),
    ));
    tokio::time::sleep(config.window).await;
    let at_close = counted(&observers);
    let window = opened.elapsed();
    let closed_wall = SystemTime::now();
    // No new leader; the last one leads on while every observer reads it.
    no_more.cancel();
    tokio::time::sleep(OBSERVE_EVERY * 2).await;
    stop.cancel();
    let terms = changing
        .await
        .map_err(|e| BenchError::Lock(e.to_string()))??;
    let terms: Vec<Term> = terms
        .into_iter()
        .filter(|t| t.since >= opened_wall && t.since < closed_wall)
        .collect();

    let mut stats = Vec::new();
    let mut all = Vec::new();
    for (i, task) in following.into_iter().enumerate() {
        let sightings = task.await.map_err(|e| BenchError::Lock(e.to_string()))?;
        let (delays, missed) = delays(&terms, &sightings);
        let reads = at_close[i].saturating_sub(at_open[i]);
        stats.push(ObserverStats {
            observer: format!("bench-observer-{i}"),
            reads,
            reads_per_s: reads as f64 / window.as_secs_f64(),
            seen: delays.len() as u32,
            missed,
            delay_p50_ms: quantile_ms(&delays, 50),
            delay_max_ms: quantile_ms(&delays, 100),
        });
        all.extend(delays);
    }
    for (node, _) in &observers {
        node.shutdown().await;
    }
    for node in &candidates {
        node.shutdown().await;
    }
    let fenced = if config.fenced_writes > 0 {
        Some(crate::fenced::measure(target.clone(), &store, config.fenced_writes).await?)
    } else {
        None
    };
    Ok(ObserveRun {
        target,
        window_s: window.as_secs_f64(),
        leaders: terms.len() as u32,
        observers: stats,
        delay_p50_ms: quantile_ms(&all, 50),
        delay_max_ms: quantile_ms(&all, 100),
        fenced,
    })
}

async fn start_node(store: SharedStore, id: &str) -> Result<Node, BenchError> {
    let mut settings = Settings::default();
    settings.node.id = Some(id.to_string());
    Node::builder()
        .settings(settings)
        .store(store)
        .clock(Arc::new(SystemClock))
        .start()
        .await
        .map_err(|e| BenchError::Lock(format!("node {id}: {e}")))
}

/// The candidates lead in turn, each for `leader_every` and a random part
/// of [`OBSERVE_EVERY`], until `no_more`
/// (the one leading then resigns a moment later, when it fires): the
/// leaders, in order.
async fn take_turns(
    candidates: [Node; 2],
    election: String,
    leader_every: Duration,
    no_more: CancellationToken,
) -> Result<Vec<Term>, BenchError> {
    let mut terms = Vec::new();
    for turn in 0.. {
        if no_more.is_cancelled() {
            break;
        }
        let leading = candidates[turn % 2]
            .election(election.as_str())
            .map_err(|e| BenchError::Lock(e.to_string()))?
            .campaign("", AcquireOptions::default())
            .await
            .map_err(|e| BenchError::Lock(e.to_string()))?;
        terms.push(Term {
            token: leading.token(),
            since: leading.leader().since,
        });
        let term = leader_every + OBSERVE_EVERY.mul_f64(rand::random::<f64>());
        tokio::select! {
            () = tokio::time::sleep(term) => {}
            () = no_more.cancelled() => tokio::time::sleep(OBSERVE_EVERY * 2).await,
        }
        leading
            .resign()
            .await
            .map_err(|e| BenchError::Lock(e.to_string()))?;
    }
    Ok(terms)
}

/// For each term, the delay from its election to its first sighting
/// (token, wall time); and how many terms were never seen.
fn delays(terms: &[Term], sightings: &[(u64, SystemTime)]) -> (Vec<Duration>, u32) {
    let mut delays = Vec::new();
    let mut missed = 0;
    for term in terms {
        match sightings.iter().find(|(token, _)| *token == term.token) {
            Some((_, seen)) => {
                delays.push(seen.duration_since(term.since).unwrap_or_default());
            }
            None => missed += 1,
        }
    }
    (delays, missed)
}

/// The `q`th percentile of `samples` in ms (nearest rank; 100: the max).
fn quantile_ms(samples: &[Duration], q: usize) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted
        .get((sorted.len() * q).div_ceil(100).saturating_sub(1))
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

// ===== Counting one row's reads =====

/// A store that counts the reads of one row of one table — an observer's
/// reads of its election — and passes everything through.
#[derive(Debug)]
pub struct RowReads {
    inner: SharedStore,
    table: Table,
    row: String,
    reads: AtomicU64,
}

impl RowReads {
    /// Counts the reads of `row` of `table` through `inner`.
    pub fn new(inner: SharedStore, table: Table, row: &str) -> Self {
        RowReads {
            inner,
            table,
            row: row.to_string(),
            reads: AtomicU64::new(0),
        }
    }

    /// Reads of the row so far (failed ones included).
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
}

#[async_trait]
impl Store for RowReads {
    async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
        if request.kind() == OpKind::Read
            && request.table == self.table
            && request.row() == Some(self.row.as_str())
        {
            self.reads.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.call(request).await
    }

    fn wraps(&self) -> Option<&dyn Store> {
        Some(&self.inner)
    }
}

// ===== The table =====

/// The report as a table per target.
pub fn render_observe(report: &ObserveBenchReport) -> String {
    let c = &report.config;
    let mut s = format!(
        "observing an election: {} observers (each a node of its own) for {}, a new leader every \
         {}; an observer reads every {:.0} ms\n",
        c.observers,
        lockshift_decide::duration::fmt_duration(c.window),
        lockshift_decide::duration::fmt_duration(c.leader_every),
        report.observe_every_ms
    );
    for r in &report.runs {
        s.push_str(&format!(
            "\n{}: {} leaders in {:.1} s\n",
            r.target, r.leaders, r.window_s
        ));
        s.push_str(&format!(
            "  {:<20} {:>7} {:>8} {:>13} {:>11} {:>11}\n",
            "observer", "reads", "reads/s", "leaders seen", "delay p50", "delay max"
        ));
        for o in &r.observers {
            s.push_str(&format!(
                "  {:<20} {:>7} {:>8.2} {:>13} {:>8.1} ms {:>8.1} ms\n",
                o.observer,
                o.reads,
                o.reads_per_s,
                format!("{}/{}", o.seen, o.seen + o.missed),
                o.delay_p50_ms,
                o.delay_max_ms
            ));
        }
        s.push_str(&format!(
            "  {:<20} {:>7} {:>8} {:>13} {:>8.1} ms {:>8.1} ms\n",
            "all", "", "", "", r.delay_p50_ms, r.delay_max_ms
        ));
        if let Some(f) = &r.fenced {
            s.push_str(&format!(
                "  fenced / plain write: {:.1}x (first fenced {:.1}x), means of {} each: {:.3} / \
                 {:.3} ms\n",
                f.ratio, f.first_ratio, c.fenced_writes, f.fenced.mean_ms, f.plain.mean_ms
            ));
        }
    }
    s.push_str(
        "\nreads: of the election's row, counted at each observer's store; delay: from a \
         leader's election (its record's `since`) to the observer's watch changing to it.\n",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delay_runs_from_the_election_to_the_first_sighting() {
        let at = |ms: u64| SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
        let terms = [
            Term {
                token: 7,
                since: at(1_000),
            },
            Term {
                token: 9,
                since: at(3_000),
            },
            Term {
                token: 12,
                since: at(5_000),
            },
        ];
        // 7 seen twice (the first counts), 9 seen, 12 never; 8 is no term.
        let sightings = [
            (7, at(1_300)),
            (7, at(1_800)),
            (8, at(2_000)),
            (9, at(3_450)),
        ];
        let (d, missed) = delays(&terms, &sightings);
        assert_eq!(d, [Duration::from_millis(300), Duration::from_millis(450)]);
        assert_eq!(missed, 1);
        assert!((quantile_ms(&d, 50) - 300.0).abs() < 1e-9);
        assert!((quantile_ms(&d, 100) - 450.0).abs() < 1e-9);
        assert_eq!(quantile_ms(&[], 50), 0.0);
    }
}
