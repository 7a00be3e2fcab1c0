//! What a census of every lock costs (`migrate bench --census N,…`;
//! docs/design.md §6a, "The census as a scan").
//!
//! For each size N, on a store of its own (a fresh embedded store, or a
//! fresh keyspace of the cluster, dropped after): N held lock cells are
//! planted in `main` (a live cell with a TTL, written by a
//! lockshift-shaped owner, as a fleet with a lock per entity holds them;
//! planting is not timed), then
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

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use async_trait::async_trait;
use futures::stream::{self, StreamExt};
use lockshift_lock::LeaseSettings;
use lockshift_queue_lock::QueueSettings;
use lockshift_rollout::{Rollout, RolloutSettings};
use lockshift_store::homes::HomesView;
use lockshift_store::{
    CellWrite, CqlSettings, CqlStore, MemoryStore, OpKind, PageCursor, Request, Response, Route,
    SharedClock, SharedStore, Store, StoreError, SystemClock, Table, Timestamp, TokenRange,
    Topology, Ttl, WriteOptions, schema,
};
use serde::Serialize;

use crate::error::BenchError;

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
    /// Held locks to plant, one census per size, in order.
    pub sizes: Vec<u64>,
    /// A real cluster instead of the embedded store: each size in a
    /// keyspace of its own (`lockshift_bench_census_N`), created as
    /// `migrate schema --apply` creates one and dropped after.
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

/// Requests counted by table and by datacenter.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Requests {
    /// All of them.
    pub total: u64,
    /// By table.
    pub by_table: BTreeMap<String, u64>,
    /// By the datacenter that coordinated them (their route; `default`
    /// where the store's own load balancing chose and the store knows no
    /// single datacenter).
    pub by_datacenter: BTreeMap<String, u64>,
}

/// One size's numbers.
#[derive(Clone, Debug, Serialize)]
pub struct CensusRun {
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
    /// Where it ran.
    pub target: String,
    /// The configuration.
    pub config: CensusBenchConfig,
    /// One run per size.
    pub runs: Vec<CensusRun>,
}

/// A store layer that counts every request by table, route and kind, and
/// hands it on unchanged: the census's requests by table and datacenter
/// ([`take`](Meter::take)), an idle process's by table and by reads and
/// writes ([`take_by_kind`](Meter::take_by_kind)).
#[derive(Debug)]
pub struct Meter<S> {
    inner: S,
    counts: Mutex<HashMap<(Table, Route, OpKind), u64>>,
}

impl<S: Store> Meter<S> {
    /// Counts the requests to `inner`.
    pub fn new(inner: S) -> Self {
        Meter {
            inner,
            counts: Mutex::default(),
        }
    }

    /// The requests counted since the last call, by table and by
    /// datacenter; the count starts again from zero.
    pub fn take(&self) -> Requests {
        let counts = self.take_counts();
        let topology = self.inner.topology();
        let mut out = Requests::default();
        for ((table, route, _), n) in counts {
            out.total += n;
            *out.by_table.entry(table.to_string()).or_default() += n;
            *out.by_datacenter
                .entry(datacenter_of(&route, &topology))
                .or_default() += n;
        }
        out
    }

    /// The requests counted since the last call, by table and by whether
    /// they write (writes, deletes, fenced writes) or read; the count
    /// starts again from zero.
    pub fn take_by_kind(&self) -> BTreeMap<(Table, bool), u64> {
        let mut out = BTreeMap::new();
        for ((table, _, kind), n) in self.take_counts() {
            let writes = match kind {
                OpKind::Write | OpKind::Delete | OpKind::FencedWrite => true,
                OpKind::Read | OpKind::Scan => false,
            };
            *out.entry((table, writes)).or_default() += n;
        }
        out
    }

    fn take_counts(&self) -> HashMap<(Table, Route, OpKind), u64> {
        std::mem::take(&mut *self.counts.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[async_trait]
impl<S: Store> Store for Meter<S> {
    async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
        *self
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((request.table, request.route.clone(), request.op.kind()))
            .or_default() += 1;
        self.inner.call(request).await
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn topology(&self) -> Topology {
        self.inner.topology()
    }

    // Over a homes router the census plans its scans by the homes.
    fn homes(&self) -> Option<Arc<HomesView>> {
        self.inner.homes()
    }
}

/// The datacenter a request on `route` is coordinated in: a pinned one's
/// own; for the default route the client's named datacenter, or the
/// cluster's only one.
fn datacenter_of(route: &Route, topology: &Topology) -> String {
    match route {
        Route::Datacenter(dc) => dc.to_string(),
        Route::Host(address) => topology
            .hosts
            .iter()
            .find(|h| h.address == *address)
            .and_then(|h| h.datacenter.as_ref())
            .map_or_else(|| format!("host {address}"), ToString::to_string),
        // A store without homes takes a home's route as its default.
        _ => match (&topology.local, topology.datacenters.as_slice()) {
            (Some(dc), _) => dc.to_string(),
            (None, [only]) => only.to_string(),
            _ => "default".to_string(),
        },
    }
}

/// Runs the census benchmark for every size of `config`, on a fresh
/// embedded store per size or, with `config.cluster`, in a fresh keyspace
/// of the cluster per size. `progress` hears what is being done.
///
/// # Errors
/// The cluster cannot be reached or its keyspace made, a store request
/// fails, or a census does not count every planted lock.
pub async fn run_census(
    config: &CensusBenchConfig,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<CensusBenchReport, BenchError> {
    let mut runs = Vec::new();
    let mut target = "embedded store (in-process)".to_string();
    for &n in &config.sizes {
        let run = match &config.cluster {
            None => {
                let store: SharedStore = Arc::new(MemoryStore::new());
                measure(config, store, n, progress).await?
            }
            Some(cluster) => {
                let mut cql = cluster.clone();
                cql.keyspace = format!("lockshift_bench_census_{n}");
                cql.create_schema = false;
                progress(&format!("census {n}: creating keyspace {}", cql.keyspace));
                // As `migrate schema --apply` makes a keyspace.
                for step in CqlStore::apply_schema(&cql).await? {
                    if let Some(refused) = step.refused {
                        progress(&format!("schema: `{}` refused: {refused}", step.statement));
                    }
                }
                let store = Arc::new(CqlStore::connect(&cql).await?);
                target = format!(
                    "cluster {}",
                    store
                        .describe()
                        .replace(&cql.keyspace, "lockshift_bench_census_N")
                );
                let shared: SharedStore = store.clone();
                let run = measure(config, shared, n, progress).await;
                progress(&format!("census {n}: dropping keyspace {}", cql.keyspace));
                let dropped = store.drop_keyspace().await;
                let run = run?;
                dropped?;
                run
            }
        };
        runs.push(run);
    }
    Ok(CensusBenchReport {
        target,
        config: config.clone(),
        runs,
    })
}

/// Plants `n` held locks in `store`, then times the census and the raw
/// scan.
async fn measure(
    config: &CensusBenchConfig,
    store: SharedStore,
    n: u64,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<CensusRun, BenchError> {
    let meter = Arc::new(Meter::new(store));
    let metered: SharedStore = meter.clone();
    progress(&format!("census {n}: planting {n} held locks"));
    let started = Instant::now();
    plant(metered.as_ref(), n).await?;
    let plant_s = started.elapsed().as_secs_f64();
    meter.take();

    progress(&format!("census {n}: taking the census"));
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

    progress(&format!("census {n}: raw scan of main, shadow and queue"));
    let started = Instant::now();
    let (raw_rows, raw_cells) = raw_scan(metered.as_ref()).await?;
    let raw_scan_s = started.elapsed().as_secs_f64();
    let raw_requests = meter.take();
    let per_s = |rows: u64, s: f64| if s > 0.0 { rows as f64 / s } else { 0.0 };
    Ok(CensusRun {
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

/// The report as a table.
pub fn render_census(report: &CensusBenchReport) -> String {
    let mut s = format!(
        "census of N held locks against a raw paged scan of main, shadow and queue, same \
         store, same run: {}\n\n",
        report.target
    );
    s.push_str(&format!(
        "{:>9} {:>9} {:>9} {:>11} {:>9} {:>11} {:>9} {:>10} {:>9}\n",
        "locks",
        "counted",
        "census s",
        "rows/s",
        "raw s",
        "raw rows/s",
        "cens/raw",
        "peak MiB",
        "start MiB"
    ));
    let mib = |m: Option<f64>| m.map_or_else(|| "-".to_string(), |m| format!("{m:.0}"));
    for r in &report.runs {
        let ratio = if r.raw_scan_s > 0.0 {
            format!("{:.2}", r.census_s / r.raw_scan_s)
        } else {
            "-".to_string()
        };
        s.push_str(&format!(
            "{:>9} {:>9} {:>9.2} {:>11.0} {:>9.2} {:>11.0} {:>9} {:>10} {:>9}\n",
            r.locks,
            r.counted,
            r.census_s,
            r.census_rows_per_s,
            r.raw_scan_s,
            r.raw_rows_per_s,
            ratio,
            mib(r.peak_rss_mib),
            mib(r.rss_before_mib),
        ));
    }
    s.push_str("\nrequests (census | raw scan):\n");
    for r in &report.runs {
        let line = |what: &str, census: &BTreeMap<String, u64>, raw: &BTreeMap<String, u64>| {
            let keys: std::collections::BTreeSet<&String> =
                census.keys().chain(raw.keys()).collect();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    let get = |m: &BTreeMap<String, u64>| m.get(k).copied().unwrap_or(0);
                    format!("{k} {} | {}", get(census), get(raw))
                })
                .collect();
            format!("  {:>9}  by {what:<10} {}\n", r.locks, parts.join(", "))
        };
        s.push_str(&format!(
            "  {:>9}  total      {} | {}\n",
            r.locks, r.census_requests.total, r.raw_requests.total
        ));
        s.push_str(&line(
            "table",
            &r.census_requests.by_table,
            &r.raw_requests.by_table,
        ));
        s.push_str(&line(
            "datacenter",
            &r.census_requests.by_datacenter,
            &r.raw_requests.by_datacenter,
        ));
    }
    s.push_str(
        "\ncensus: as `migrate status` takes it (stage, registry, activity, the taker's clock, \
         then one paged scan per table, ranges read a few at once, folded as it goes); raw: one \
         paged scan of cells per table with writetime and TTL, rows counted, nothing folded. \
         rows/s counts rows of all three tables. peak: resident memory at its highest during \
         the census (VmHWM); start: when it began",
    );
    if report.config.cluster.is_none() {
        s.push_str(" (the embedded store's cells are in this process, so both include them)");
    }
    s.push_str(".\n");
    if report.runs.iter().any(|r| !r.peak_reset) {
        s.push_str(
            "the peak could not be reset before the census (/proc/self/clear_refs): it is the \
             process's peak so far, planting included.\n",
        );
    }
    s
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

    #[tokio::test]
    async fn a_small_census_counts_every_lock_and_its_requests() {
        let config = CensusBenchConfig {
            sizes: vec![300],
            cluster: None,
            rollout: RolloutSettings::default(),
            lease: LeaseSettings::default(),
            queue: QueueSettings::default(),
        };
        let report = run_census(&config, &mut |_| {}).await.unwrap();
        let run = &report.runs[0];
        assert_eq!(
            (run.counted, run.census_rows, run.raw_rows),
            (300, 300, 300)
        );
        assert_eq!(run.raw_cells, 300);
        assert!(run.census_requests.by_table["main"] > 0, "{run:?}");
        assert_eq!(run.raw_requests.by_table["main"], 1, "{run:?}");
        assert_eq!(
            run.raw_requests.by_datacenter["datacenter1"],
            run.raw_requests.total
        );
        assert!(render_census(&report).contains("datacenter1"));
    }
}
