//! What a census of every lock costs (`migrate bench --census N,…`;
//! docs/design.md §6a, "The census as a scan").
//!
//! For each size N, on each target — a fresh embedded store, a fresh local
//! endpoint (the CQL emulator in this process, with an injected latency
//! per round trip, as [`crate::fenced`] and [`crate::observe`] start it),
//! and with a cluster configured a fresh keyspace of it
//! (`lockshift_bench_census_N`, created as `migrate schema --apply` creates
//! one, dropped after) — N held lock cells are planted in `main` (a live
//! cell with a TTL, written by a lockshift-shaped owner, as a fleet with a
//! lock per entity holds them; planting is not timed), then
//!
//! - **the census** is taken as `migrate status` takes it
//!   ([`Rollout::evidence_with_progress`]: the stage, the registry, the
//!   activity record, the taker's clock, then
//!   [`take_census`](lockshift_rollout::census::take_census)), timed, and
//!   its count of held locks checked against N;
//! - **a raw scan** of the same tables (`main`, `shadow`, `queue`) reads
//!   them through the same store, one paged scan of cells with their
//!   writetime and TTL per table, counting rows and folding nothing: what
//!   any client pays to read the cells once.
//!
//! Beside each: the requests by table and by datacenter (the route each
//! was coordinated by), counted by one metering layer ([`Meter`]), and the
//! census's peak resident memory (Linux: `VmHWM`, reset before the census
//! through `/proc/self/clear_refs`).
//!
//! The cluster's runs are taken first, every size, then size by size the
//! embedded store's and the local endpoint's: those two keep their cells
//! in this process, and memory freed is not always given back to the
//! system, so a cluster's peak measured after them would count theirs.
//! The report lists the runs size by size.

mod meter;
mod render;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use lockshift_lock::LeaseSettings;
use lockshift_queue_lock::QueueSettings;
use lockshift_rollout::{Rollout, RolloutSettings};
use lockshift_store::{
    CellWrite, CqlSettings, MemoryStore, PageCursor, Route, SharedClock, SharedStore, Store,
    SystemClock, Table, Timestamp, TokenRange, Ttl, WriteOptions, schema,
};
use serde::Serialize;

pub use meter::{Meter, Requests};
pub use render::render_census;

use crate::error::BenchError;
use crate::targets::{EMBEDDED, LocalEndpoint, drop_after, own_keyspace};

/// The largest size `--census` takes.
pub const MAX_SIZE: u64 = 10_000_000;

/// Writes planted at once (bounded, so a node is loaded, not flooded).
pub const PLANT_IN_FLIGHT: usize = 128;

/// The planted cells' TTL: they stay live while the census is timed.
const PLANT_TTL_SECS: u32 = 3600;

/// Cells per page of the raw scan: the census's page size.
const RAW_PAGE_CELLS: u32 = 5000;

/// A size as `--census` takes it: a plain integer (`20000`) or a power
/// of ten's multiple (`1e4`, `2.5e5`), between 1 and [`MAX_SIZE`].
///
/// # Errors
/// What is wrong with it, naming the value.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad =
        || format!("{s:?} is not a number of locks (e.g. 2000, 1e4, 1e6; at most {MAX_SIZE})");
    let t = s.trim();
    let n = if let Some((mantissa, exponent)) = t.split_once(['e', 'E']) {
        let mantissa: f64 = mantissa.parse().map_err(|_| bad())?;
        let exponent: i32 = exponent.parse().map_err(|_| bad())?;
        let value = mantissa * 10f64.powi(exponent);
        if !value.is_finite() || value.fract() != 0.0 || !(1.0..=MAX_SIZE as f64).contains(&value) {
            return Err(bad());
        }
        // A whole number within 1..=MAX_SIZE: the cast is exact.
        value as u64
    } else {
        t.parse::<u64>().map_err(|_| bad())?
    };
    if (1..=MAX_SIZE).contains(&n) {
        Ok(n)
    } else {
        Err(bad())
    }
}

/// What to run.
#[derive(Clone, Debug, Serialize)]
pub struct CensusBenchConfig {
    /// Held locks to plant, one census per size and target, in order.
    pub sizes: Vec<u64>,
    /// The local endpoint's injected latency per round trip.
    #[serde(with = "humantime_serde")]
    pub latency: Duration,
    /// A real cluster to measure too: each size in a keyspace of its own
    /// (`lockshift_bench_census_N`), created as `migrate schema --apply`
    /// creates one and dropped after.
    #[serde(skip)]
    pub cluster: Option<CqlSettings>,
    /// The fleet's rollout settings (the census's clock margin).
    #[serde(skip)]
    pub rollout: RolloutSettings,
    /// The fleet's lease settings (what counts as stale).
    #[serde(skip)]
    pub lease: LeaseSettings,
    /// The fleet's queue settings (what counts as stale).
    #[serde(skip)]
    pub queue: QueueSettings,
}

/// One size's numbers on one target.
#[derive(Clone, Debug, Serialize)]
pub struct CensusRun {
    /// Where it ran: `embedded store (in-process)`, `local endpoint (2ms
    /// per round trip)`, `cluster cql HOST:PORT/KEYSPACE (CONSISTENCY)`.
    pub target: String,
    /// Held locks planted.
    pub locks: u64,
    /// Held locks the census counted (must be `locks`).
    pub counted: u64,
    /// Seconds the planting took (not part of anything timed).
    pub plant_s: f64,
    /// Seconds the census took, as `migrate status` takes it.
    pub census_s: f64,
    /// Rows the census scanned (all three tables).
    pub census_rows: u64,
    /// `census_rows / census_s`.
    pub census_rows_per_s: f64,
    /// Seconds the raw paged scan of the three tables took.
    pub raw_scan_s: f64,
    /// Rows the raw scan counted.
    pub raw_rows: u64,
    /// Cells the raw scan counted.
    pub raw_cells: u64,
    /// `raw_rows / raw_scan_s`.
    pub raw_rows_per_s: f64,
    /// Resident memory when the census began (MiB; `null` where
    /// `/proc/self/status` is not there).
    pub rss_before_mib: Option<f64>,
    /// Peak resident memory during the census (MiB, `VmHWM`).
    pub peak_rss_mib: Option<f64>,
    /// Whether the peak was reset before the census: when it was not, it
    /// is the process's peak so far, planting included.
    pub peak_reset: bool,
    /// The census's requests.
    pub census_requests: Requests,
    /// The raw scan's requests.
    pub raw_requests: Requests,
}

/// The report of [`run_census`].
#[derive(Clone, Debug, Serialize)]
pub struct CensusBenchReport {
    /// The configuration.
    pub config: CensusBenchConfig,
    /// One run per size and target: size by size, in the order of
    /// `config.sizes`, each on the embedded store, the local endpoint and
    /// (when configured) the cluster.
    pub runs: Vec<CensusRun>,
}

/// Runs the census benchmark for every size of `config` on each target:
/// a fresh embedded store, a fresh local endpoint, and with
/// `config.cluster` a fresh keyspace of the cluster. `progress` hears what
/// is being done.
///
/// # Errors
/// The endpoint or the cluster cannot be reached or a keyspace made, a
/// store request fails, or a census does not count every planted lock.
pub async fn run_census(
    config: &CensusBenchConfig,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<CensusBenchReport, BenchError> {
    // (position of the size, target: 0 embedded, 1 endpoint, 2 cluster)
    let mut runs: Vec<(usize, u8, CensusRun)> = Vec::new();
    if let Some(cluster) = &config.cluster {
        for (i, &n) in config.sizes.iter().enumerate() {
            let keyspace = format!("lockshift_bench_census_{n}");
            let store = own_keyspace(cluster, &keyspace, progress).await?;
            let target = format!("cluster {}", store.describe());
            let run = measure(config, &target, store.clone(), n, progress).await;
            progress(&format!("census {n}: dropping keyspace {keyspace}"));
            runs.push((i, 2, drop_after(&store, run).await?));
        }
    }
    for (i, &n) in config.sizes.iter().enumerate() {
        let store: SharedStore = Arc::new(MemoryStore::new());
        runs.push((i, 0, measure(config, EMBEDDED, store, n, progress).await?));
        let endpoint = LocalEndpoint::start(config.latency).await?;
        let target = endpoint.target().to_string();
        let run = measure(config, &target, endpoint.store(), n, progress).await;
        endpoint.shutdown().await;
        runs.push((i, 1, run?));
    }
    runs.sort_by_key(|(size, target, _)| (*size, *target));
    Ok(CensusBenchReport {
        config: config.clone(),
        runs: runs.into_iter().map(|(_, _, run)| run).collect(),
    })
}

/// Plants `n` held locks in `store`, then times the census and the raw
/// scan.
async fn measure(
    config: &CensusBenchConfig,
    target: &str,
    store: SharedStore,
    n: u64,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<CensusRun, BenchError> {
    let meter = Arc::new(Meter::new(store));
    let metered: SharedStore = meter.clone();
    progress(&format!("census {n} on {target}: planting {n} held locks"));
    let started = Instant::now();
    plant(metered.as_ref(), n).await?;
    let plant_s = started.elapsed().as_secs_f64();
    meter.take();

    progress(&format!("census {n} on {target}: taking the census"));
    let clock: SharedClock = Arc::new(SystemClock);
    let rollout = Rollout::new(
        metered.clone(),
        clock,
        config.rollout.clone(),
        config.lease.clone(),
        config.queue.clone(),
    );
    let peak_reset = reset_peak();
    let rss_before_mib = memory("VmRSS");
    let mut rows_by_table: BTreeMap<Table, usize> = BTreeMap::new();
    let started = Instant::now();
    let evidence = rollout
        .evidence_with_progress(|table, rows| {
            rows_by_table.insert(table, rows);
        })
        .await
        .map_err(|e| BenchError::Store(e.error))?;
    let census_s = started.elapsed().as_secs_f64();
    let peak_rss_mib = memory("VmHWM");
    let census_requests = meter.take();
    let counted = evidence.census.tally.held as u64;
    drop(evidence);
    if counted != n {
        return Err(BenchError::Setting(format!(
            "the census counted {counted} held locks of the {n} planted"
        )));
    }
    let census_rows = rows_by_table.values().sum::<usize>() as u64;

    progress(&format!(
        "census {n} on {target}: raw scan of main, shadow and queue"
    ));
    let started = Instant::now();
    let (raw_rows, raw_cells) = raw_scan(metered.as_ref()).await?;
    let raw_scan_s = started.elapsed().as_secs_f64();
    let raw_requests = meter.take();
    let per_s = |rows: u64, s: f64| if s > 0.0 { rows as f64 / s } else { 0.0 };
    Ok(CensusRun {
        target: target.to_string(),
        locks: n,
        counted,
        plant_s,
        census_s,
        census_rows,
        census_rows_per_s: per_s(census_rows, census_s),
        raw_scan_s,
        raw_rows,
        raw_cells,
        raw_rows_per_s: per_s(raw_rows, raw_scan_s),
        rss_before_mib,
        peak_rss_mib,
        peak_reset,
        census_requests,
        raw_requests,
    })
}

/// `n` held cells in `main`, [`PLANT_IN_FLIGHT`] writes at a time: lock
/// `entity-i`, owner `census/<i as 16 hex digits>` (a lockshift-shaped
/// owner id), value `queue`, a TTL of an hour.
async fn plant(store: &dyn Store, n: u64) -> Result<(), BenchError> {
    let ttl = Ttl::from_secs_clamped(u64::from(PLANT_TTL_SECS));
    let writes = stream::iter(0..n)
        .map(|i| async move {
            let at =
                WriteOptions::at(Timestamp::from_micros(crate::worker::now_micros())).with_ttl(ttl);
            let cell = CellWrite::new(format!("census/{i:016x}"), b"queue".to_vec());
            store
                .write(schema::MAIN, &format!("entity-{i}"), &[cell], at)
                .await
        })
        .buffer_unordered(PLANT_IN_FLIGHT);
    futures::pin_mut!(writes);
    while let Some(written) = writes.next().await {
        written?;
    }
    Ok(())
}

/// One paged scan of cells per table, the whole ring in one range: rows
/// and cells counted, nothing folded or kept.
async fn raw_scan(store: &dyn Store) -> Result<(u64, u64), BenchError> {
    let page_size = std::num::NonZeroU32::new(RAW_PAGE_CELLS).unwrap_or(std::num::NonZeroU32::MIN);
    let (mut rows, mut cells) = (0, 0);
    for table in [schema::MAIN, schema::SHADOW, schema::QUEUE] {
        let mut cursor: Option<PageCursor> = None;
        // The last row's key: a row cut between two pages counts once.
        let mut last: Option<String> = None;
        loop {
            let page = store
                .scan_cells_via(
                    &Route::Default,
                    table,
                    TokenRange::FULL,
                    cursor.as_ref(),
                    page_size,
                )
                .await?;
            for row in page.rows {
                cells += row.cells.len() as u64;
                if last.as_deref() != Some(row.key.as_str()) {
                    rows += 1;
                    last = Some(row.key);
                }
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
    }
    Ok((rows, cells))
}

/// Resets this process's peak resident memory (`VmHWM`) to what it holds
/// now; `false` where it cannot (not Linux, or not allowed).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", b"5").is_ok()
}

/// A memory figure of `/proc/self/status` (`VmRSS`, `VmHWM`), in MiB.
fn memory(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status
        .lines()
        .find(|l| l.split(':').next() == Some(field))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_integers_or_powers_of_ten() {
        assert_eq!(parse_size("1e4"), Ok(10_000));
        assert_eq!(parse_size("1E6"), Ok(1_000_000));
        assert_eq!(parse_size("2.5e3"), Ok(2_500));
        assert_eq!(parse_size("2000"), Ok(2_000));
        for bad in ["", "0", "1e8", "1.5", "1e-1", "ten", "1e4x", "-5", "2.55e1"] {
            let err = parse_size(bad).unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
    }

    /// Two sizes, each on the embedded store and the local endpoint:
    /// every lock counted on each, the runs size by size with their
    /// targets, and the same requests on both stores (the endpoint serves
    /// the pages a node serves, as the embedded store does).
    #[tokio::test]
    async fn a_small_census_counts_every_lock_and_its_requests_on_each_target() {
        let config = CensusBenchConfig {
            sizes: vec![300, 40],
            latency: Duration::ZERO,
            cluster: None,
            rollout: RolloutSettings::default(),
            lease: LeaseSettings::default(),
            queue: QueueSettings::default(),
        };
        let report = run_census(&config, &mut |_| {}).await.unwrap();
        let runs: Vec<(u64, &str)> = report
            .runs
            .iter()
            .map(|r| (r.locks, r.target.as_str()))
            .collect();
        let endpoint = "local endpoint (0s per round trip)";
        assert_eq!(
            runs,
            [
                (300, EMBEDDED),
                (300, endpoint),
                (40, EMBEDDED),
                (40, endpoint)
            ]
        );
        for run in &report.runs {
            let n = run.locks;
            assert_eq!((run.counted, run.census_rows, run.raw_rows), (n, n, n));
            assert_eq!(run.raw_cells, n);
            assert!(run.census_requests.by_table["main"] > 0, "{run:?}");
            assert_eq!(run.raw_requests.by_table["main"], 1, "{run:?}");
            assert_eq!(
                run.raw_requests.by_datacenter["datacenter1"],
                run.raw_requests.total
            );
        }
        let [embedded, local, ..] = &report.runs[..] else {
            panic!("{report:?}")
        };
        assert_eq!(
            embedded.census_requests.by_table, local.census_requests.by_table,
            "{report:?}"
        );
        let text = render_census(&report);
        assert!(text.contains("datacenter1"), "{text}");
        assert!(text.contains(endpoint), "{text}");
    }
}
