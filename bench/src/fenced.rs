//! What a fenced write costs against a plain one (`migrate bench
//! --fenced-writes N`; docs/design.md §5, "Fenced writes").
//!
//! One client writes one cell at a time, N times each way, on each target:
//!
//! - **plain**: [`Store::write`](lockshift_store::Store::write) — one
//!   mutation at the store's consistency;
//! - **fenced**: [`Store::write_fenced`](lockshift_store::Store::write_fenced)
//!   on a cell that records a token — one lightweight transaction (a
//!   Paxos round: prepare, read, propose, commit);
//! - **first fenced**: the same on a cell that records none yet — two
//!   rounds (`IF fence <= ?` fails on the null, then `IF fence = null`).
//!
//! Each target is warmed up first with a tenth as many writes of each
//! kind, not measured. The targets: the embedded store in-process (what the work itself
//! costs, no network), the local endpoint with an injected latency per
//! round trip (it pays a conditional statement's four Paxos round trips,
//! as a cluster does), and a real cluster with `--cluster`. The ratio
//! fenced / plain is of the means.

use std::time::{Duration, Instant};

use lockshift_store::{
    CellWrite, CqlSettings, FencedOutcome, SharedStore, Timestamp, WriteOptions, schema,
};
use serde::Serialize;

use crate::error::BenchError;
use crate::targets::on_each_store;
use crate::worker::now_micros;

/// What to run.
#[derive(Clone, Debug, Serialize)]
pub struct FencedBenchConfig {
    /// Writes of each kind per target.
    pub writes: u32,
    /// The local endpoint's injected latency per round trip.
    pub latency: Duration,
    /// A real cluster to measure too (its keyspace is created if missing).
    #[serde(skip)]
    pub cluster: Option<CqlSettings>,
}

/// The latencies of one kind of write, in milliseconds.
#[derive(Clone, Debug, Serialize)]
pub struct Timing {
    /// Mean.
    pub mean_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
}

/// One target's numbers.
#[derive(Clone, Debug, Serialize)]
pub struct FencedRun {
    /// Where it ran.
    pub target: String,
    /// Plain writes.
    pub plain: Timing,
    /// Fenced writes on cells that record a token (one Paxos round).
    pub fenced: Timing,
    /// Fenced writes on cells that record none yet (two rounds).
    pub first_fenced: Timing,
    /// `fenced.mean_ms / plain.mean_ms`.
    pub ratio: f64,
    /// `first_fenced.mean_ms / plain.mean_ms`.
    pub first_ratio: f64,
}

/// The report of [`run_fenced`].
#[derive(Clone, Debug, Serialize)]
pub struct FencedBenchReport {
    /// The configuration.
    pub config: FencedBenchConfig,
    /// One run per target.
    pub runs: Vec<FencedRun>,
}

/// Runs the comparison on the embedded store, the local endpoint and, if
/// configured, the cluster.
///
/// # Errors
/// The endpoint or the cluster cannot be reached, a write fails, or a
/// fenced write the benchmark expects to apply is refused.
pub async fn run_fenced(config: &FencedBenchConfig) -> Result<FencedBenchReport, BenchError> {
    let writes = config.writes;
    let runs = on_each_store(
        config.latency,
        config.cluster.as_ref(),
        |target, store| async move { measure(target, &store, writes).await },
    )
    .await?;
    Ok(FencedBenchReport {
        config: config.clone(),
        runs,
    })
}

/// Times `n` writes of each kind on `store`, one at a time.
pub(crate) async fn measure(
    target: String,
    store: &SharedStore,
    n: u32,
) -> Result<FencedRun, BenchError> {
    let run = now_micros();
    let cell = |i: u32| CellWrite::new("v", i.to_string().into_bytes());
    let applied = |outcome: FencedOutcome| match outcome {
        FencedOutcome::Applied { .. } => Ok(()),
        other => Err(BenchError::Setting(format!(
            "a fenced write the benchmark expected to apply answered {other:?}"
        ))),
    };
    // Warm up first (a JVM's JIT, connections, prepared statements): a
    // tenth of the writes of each kind, unmeasured, on rows of their own.
    for i in 0..n.div_ceil(10) {
        let row = format!("bench-warm-{run}-{i}");
        let at = WriteOptions::at(Timestamp::from_micros(now_micros()));
        store.write(schema::SCRATCH, &row, &[cell(i)], at).await?;
        applied(
            store
                .write_fenced(schema::SCRATCH, &row, &cell(i), 1)
                .await?,
        )?;
        applied(
            store
                .write_fenced(schema::SCRATCH, &row, &cell(i), 2)
                .await?,
        )?;
    }
    let mut plain = Vec::new();
    for i in 0..n {
        let row = format!("bench-plain-{run}-{}", i % 16);
        let at = WriteOptions::at(Timestamp::from_micros(now_micros()));
        let started = Instant::now();
        store.write(schema::SCRATCH, &row, &[cell(i)], at).await?;
        plain.push(started.elapsed());
    }
    let mut first = Vec::new();
    for i in 0..n {
        let row = format!("bench-first-{run}-{i}");
        let started = Instant::now();
        applied(
            store
                .write_fenced(schema::SCRATCH, &row, &cell(i), 1)
                .await?,
        )?;
        first.push(started.elapsed());
    }
    // Steady state: cells that already record a token, each write under a
    // larger one (a new holder per write, the worst case for nobody).
    let mut fenced = Vec::new();
    for i in 0..n {
        let row = format!("bench-first-{run}-{}", i % n.max(1));
        let started = Instant::now();
        applied(
            store
                .write_fenced(schema::SCRATCH, &row, &cell(i), 2 + u64::from(i))
                .await?,
        )?;
        fenced.push(started.elapsed());
    }
    let (plain, fenced, first_fenced) = (timing(plain), timing(fenced), timing(first));
    let ratio = |t: &Timing| {
        if plain.mean_ms > 0.0 {
            t.mean_ms / plain.mean_ms
        } else {
            0.0
        }
    };
    Ok(FencedRun {
        target,
        ratio: ratio(&fenced),
        first_ratio: ratio(&first_fenced),
        plain,
        fenced,
        first_fenced,
    })
}

fn timing(mut samples: Vec<Duration>) -> Timing {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let at = |q: usize| {
        samples
            .get((samples.len() * q).div_ceil(100).saturating_sub(1))
            .map_or(0.0, |d| ms(*d))
    };
    let n = samples.len().max(1) as f64;
    Timing {
        mean_ms: samples.iter().map(|d| ms(*d)).sum::<f64>() / n,
        p50_ms: at(50),
        p99_ms: at(99),
    }
}

/// The report as a table.
pub fn render_fenced(report: &FencedBenchReport) -> String {
    let mut s = format!(
        "fenced writes against plain writes: {} of each, one at a time\n\n",
        report.config.writes
    );
    s.push_str(&format!(
        "{:<52} {:>22} {:>22} {:>22} {:>7} {:>7}\n",
        "target", "plain mean/p50/p99", "fenced mean/p50/p99", "first fenced", "ratio", "first"
    ));
    let t = |t: &Timing| format!("{:.3}/{:.3}/{:.3}", t.mean_ms, t.p50_ms, t.p99_ms);
    for r in &report.runs {
        s.push_str(&format!(
            "{:<52} {:>22} {:>22} {:>22} {:>6.1}x {:>6.1}x\n",
            r.target,
            t(&r.plain),
            t(&r.fenced),
            t(&r.first_fenced),
            r.ratio,
            r.first_ratio
        ));
    }
    s.push_str(
        "\nms; ratio = fenced mean / plain mean. fenced: a cell that records a token (one Paxos \
         round); first fenced: a cell that records none yet (two rounds: IF fence <= ? fails on \
         the null, then IF fence = null).\n",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_takes_mean_and_percentiles() {
        let t = timing((1..=100).map(Duration::from_millis).collect());
        assert!((t.mean_ms - 50.5).abs() < 1e-9, "{t:?}");
        assert!((t.p50_ms - 50.0).abs() < 1e-9, "{t:?}");
        assert!((t.p99_ms - 99.0).abs() < 1e-9, "{t:?}");
    }

    #[tokio::test]
    async fn the_endpoint_pays_a_paxos_round_per_fenced_write() {
        let config = FencedBenchConfig {
            writes: 5,
            latency: Duration::from_millis(5),
            cluster: None,
        };
        let report = run_fenced(&config).await.unwrap();
        assert_eq!(report.runs.len(), 2);
        let endpoint = &report.runs[1];
        // The injected latency is a floor every round trip pays, whatever
        // else the machine is doing (load only adds to it): a plain write
        // makes one, a fenced write four (the endpoint's
        // PAXOS_ROUND_TRIPS), a cell's first fenced write twice four. So
        // each kind's fastest write is at least that many latencies
        // (less 5% for timer rounding) — floors, never ceilings, so a
        // loaded machine cannot fail it, and a fenced write charged as a
        // plain one (or a first write as one round) would.
        let latency_ms = 5.0 * 0.95;
        let at_least = |t: &Timing, round_trips: f64, what: &str| {
            assert!(
                t.p50_ms >= round_trips * latency_ms,
                "{what}: p50 {} ms is under {round_trips} round trips of {latency_ms} ms: \
                 {endpoint:?}",
                t.p50_ms
            );
        };
        at_least(&endpoint.plain, 1.0, "plain");
        at_least(&endpoint.fenced, 4.0, "fenced");
        at_least(&endpoint.first_fenced, 8.0, "first fenced");
        assert!(render_fenced(&report).contains("local endpoint (5ms per round trip)"));
    }
}
