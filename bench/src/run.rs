//! The orchestrator: for each algorithm and process count, start P worker
//! processes on one lock, release them together, collect their reports.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use lockshift_cql_emulator::{Emulator, EmulatorHandle, Fault, FaultRule};
use lockshift_legacy::LegacySettings;
use lockshift_lock::LeaseSettings;
use lockshift_queue_lock::{QueueSettings, TimeSettings};
use lockshift_store::{CqlSettings, CqlStore};
use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use crate::algorithm::BenchAlgorithm;
use crate::error::BenchError;
use crate::hold::{HoldReport, HoldStats, hold_stats};
use crate::plot;
use crate::reads::EndpointReads;
use crate::report::{
    BenchReport, HoldBenchReport, Machine, SoakReport, check_hold_targets, check_targets,
};
use crate::soak::soak_stats;
use crate::stats::{RunStats, Sample, WorkerReport, compute};
use crate::worker::{Job, PROGRESS_PREFIX, WorkerSpec, now_micros};

/// What to measure.
#[derive(Clone, Debug, Serialize)]
pub struct BenchConfig {
    /// Algorithms, run in this order.
    pub algorithms: Vec<BenchAlgorithm>,
    /// Process counts P, run in this order for each algorithm.
    pub processes: Vec<u32>,
    /// Acquisitions per process K.
    pub acquisitions: u32,
    /// Time each acquisition holds the lock.
    #[serde(with = "humantime_serde")]
    pub hold: Duration,
    /// Injected store latency per request at the local endpoint (fixed part).
    #[serde(with = "humantime_serde")]
    pub latency: Duration,
    /// Injected extra latency, uniform in `[0, jitter)`.
    #[serde(with = "humantime_serde")]
    pub jitter: Duration,
    /// A real cluster to measure instead of the local endpoint.
    pub cluster: Option<CqlSettings>,
    /// Leases of every worker.
    pub lease: LeaseSettings,
    /// Queue lock tuning.
    pub queue: QueueSettings,
    /// Legacy lock tuning.
    pub legacy: LegacySettings,
    /// The time service.
    pub time: TimeSettings,
    /// Directory for the PNG plots; `None`: no plots.
    pub plots: Option<PathBuf>,
    /// Seed of the workers' random choices and the injected jitter.
    pub seed: u64,
    /// The hold mode's N values (locks one node holds at once), run in
    /// this order by [`run_hold`].
    pub hold_locks: Vec<u32>,
    /// Renew periods each hold run measures.
    pub hold_periods: u32,
    /// The soak's N: acquisitions of one lock per algorithm and process
    /// count, split between the P processes ([`run_soak`]).
    pub soak: Option<u32>,
}

impl Default for BenchConfig {
    /// Small enough to finish in about a minute on two cores.
    fn default() -> Self {
        BenchConfig {
            algorithms: BenchAlgorithm::ALL.to_vec(),
            processes: vec![1, 3, 5],
            acquisitions: 50,
            hold: Duration::from_millis(1),
            latency: Duration::from_millis(2),
            jitter: Duration::from_millis(1),
            cluster: None,
            lease: LeaseSettings::default(),
            queue: QueueSettings::default(),
            legacy: LegacySettings::default(),
            time: TimeSettings::default(),
            plots: None,
            seed: 1,
            hold_locks: vec![100, 1_000, 10_000],
            hold_periods: 3,
            soak: None,
        }
    }
}

/// Builds the command that runs one worker process (`migrate bench-worker
/// --spec <json>`); the orchestrator sets up its pipes.
pub type WorkerCommand<'a> = &'a (dyn Fn(&WorkerSpec) -> Result<Command, BenchError> + Sync);

/// Runs the whole benchmark. `progress` hears one line per run.
///
/// # Errors
/// When the endpoint cannot start, the store cannot be reached, or a worker
/// fails to run or report.
pub async fn run(
    config: &BenchConfig,
    worker_command: WorkerCommand<'_>,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<BenchReport, BenchError> {
    let (endpoint, worker_cql) = prepare_store(config).await?;

    let started = std::time::Instant::now();
    let mut runs = Vec::new();
    let mut plots = Vec::new();
    let mut plot_errors = Vec::new();
    let nonce = now_micros();
    for &algorithm in &config.algorithms {
        let mut largest: Option<(u32, Vec<Sample>)> = None;
        for &processes in &config.processes {
            let lock = format!("bench-{algorithm}-p{processes}-{nonce}");
            let run_started = std::time::Instant::now();
            let reports = run_once(
                config,
                algorithm,
                processes,
                &lock,
                &worker_cql,
                worker_command,
            )
            .await?;
            let stats = compute(algorithm.as_str(), processes, &reports);
            progress(&format!(
                "{algorithm:<8} P={processes}: {} acquisitions in {:.1}s, mean wait {:.1} ms, max {:.1} ms",
                stats.acquisitions,
                run_started.elapsed().as_secs_f64(),
                stats.wait_mean_ms,
                stats.wait_max_ms
            ));
            if largest.as_ref().is_none_or(|(p, _)| processes >= *p) {
                largest = Some((
                    processes,
                    reports
                        .iter()
                        .flat_map(|r| r.samples.iter().copied())
                        .collect(),
                ));
            }
            runs.push(stats);
        }
        if let (Some(dir), Some((processes, samples))) = (&config.plots, largest) {
            let path = dir.join(format!("{algorithm}.png"));
            let title = format!(
                "{algorithm} lock: P = {processes}, K = {}, store latency {} + U[0, {})",
                config.acquisitions,
                lockshift_decide::duration::fmt_duration(config.latency),
                lockshift_decide::duration::fmt_duration(config.jitter)
            );
            // Minutes of measurements are worth more than a picture: a plot
            // that cannot be written is reported, the report still made.
            match std::fs::create_dir_all(dir)
                .map_err(|e| e.to_string())
                .and_then(|()| plot::draw(&path, &title, &samples).map_err(|e| e.to_string()))
            {
                Ok(()) => plots.push(path.display().to_string()),
                Err(e) => plot_errors.push(format!("{}: {e}", path.display())),
            }
        }
    }
    if let Some(endpoint) = endpoint {
        endpoint.shutdown().await;
    }
    let targets = check_targets(&runs, config.hold);
    Ok(BenchReport {
        version: 2,
        config: config.clone(),
        machine: Machine::this(),
        store: store_description(config),
        duration_s: started.elapsed().as_secs_f64(),
        runs,
        targets,
        plots,
        plot_errors,
    })
}

fn store_description(config: &BenchConfig) -> String {
    match &config.cluster {
        Some(c) => format!("cluster {}", c.contact_points.join(",")),
        None => format!(
            "local endpoint, latency {} + U[0, {})",
            lockshift_decide::duration::fmt_duration(config.latency),
            lockshift_decide::duration::fmt_duration(config.jitter)
        ),
    }
}

/// Starts the local endpoint unless a cluster is measured, and creates the
/// schema once before any worker connects: lockshift's tables, and the LWT
/// baseline's table when it runs. Returns the workers' connection settings.
async fn prepare_store(
    config: &BenchConfig,
) -> Result<(Option<EmulatorHandle>, CqlSettings), BenchError> {
    let (endpoint, cql) = match &config.cluster {
        Some(settings) => (None, settings.clone()),
        None => {
            let (handle, settings) = local_endpoint(config).await?;
            (Some(handle), settings)
        }
    };
    let mut create = cql.clone();
    create.create_schema = true;
    let store = CqlStore::connect(&create).await?;
    if config.algorithms.contains(&BenchAlgorithm::Lwt) {
        let ddl = crate::lwt::create_table_cql(store.keyspace());
        let session = store.session();
        session
            .query_unpaged(ddl.as_str(), ())
            .await
            .map_err(|e| BenchError::Setting(format!("running `{ddl}`: {e}")))?;
        session
            .await_schema_agreement()
            .await
            .map_err(|e| BenchError::Setting(format!("waiting for schema agreement: {e}")))?;
    }
    drop(store);
    let mut worker_cql = cql;
    worker_cql.create_schema = false;
    Ok((endpoint, worker_cql))
}

/// Runs the hold mode: for each algorithm and each N of
/// `config.hold_locks`, one worker process holds N locks for
/// `config.hold_periods` renew periods. `progress` hears one line per run.
///
/// # Errors
/// As [`run`].
pub async fn run_hold(
    config: &BenchConfig,
    worker_command: WorkerCommand<'_>,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<HoldBenchReport, BenchError> {
    let (endpoint, worker_cql) = prepare_store(config).await?;
    let started = std::time::Instant::now();
    let nonce = now_micros();
    let mut runs: Vec<HoldStats> = Vec::new();
    for &algorithm in &config.algorithms {
        for &locks in &config.hold_locks {
            let spec = WorkerSpec {
                job: Job::Hold {
                    locks,
                    periods: config.hold_periods,
                },
                ..worker_spec(
                    config,
                    algorithm,
                    0,
                    &format!("hold-{algorithm}-n{locks}-{nonce}"),
                    &worker_cql,
                )
            };
            let mut lines = run_workers(vec![spec], worker_command, &mut |_| {}).await?;
            let line = lines.pop().unwrap_or_default();
            let report: HoldReport = serde_json::from_str(&line)?;
            let stats = hold_stats(algorithm, &report);
            progress(&format!(
                "{algorithm:<8} N={locks}: {} held, {:.2} store ops per lock per renew period",
                stats.held, stats.ops_per_lock_per_period
            ));
            runs.push(stats);
        }
    }
    if let Some(endpoint) = endpoint {
        endpoint.shutdown().await;
    }
    let targets = check_hold_targets(&runs);
    Ok(HoldBenchReport {
        version: 1,
        renew_every_s: config.lease.renew_every.as_secs_f64(),
        periods: config.hold_periods,
        machine: Machine::this(),
        store: store_description(config),
        duration_s: started.elapsed().as_secs_f64(),
        runs,
        targets,
    })
}

/// Runs the soak: for each algorithm and each P of `config.processes`, P
/// worker processes take one lock `config.soak` times between them, and
/// the report compares the first and last tenth of the waits and says what
/// every read cost in tombstones. `progress` hears one line per run and
/// the first worker's progress every tenth.
///
/// # Errors
/// As [`run`]; a usage error ([`BenchError::Setting`]) when `config.soak`
/// is unset, asks for fewer acquisitions than processes, or an algorithm
/// is not one of lockshift's locks.
pub async fn run_soak(
    config: &BenchConfig,
    worker_command: WorkerCommand<'_>,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<SoakReport, BenchError> {
    let Some(total) = config.soak else {
        return Err(BenchError::Setting("the soak needs its N".to_string()));
    };
    if let Some(a) = config.algorithms.iter().find(|a| a.lock().is_none()) {
        return Err(BenchError::Setting(format!(
            "the soak measures lockshift's locks (legacy, queue, combined); {a} is not one"
        )));
    }
    if let Some(p) = config.processes.iter().find(|p| **p == 0 || **p > total) {
        return Err(BenchError::Setting(format!(
            "the soak's {total} acquisitions cannot be split between {p} processes"
        )));
    }
    let load_start = load_average();
    let (endpoint, worker_cql) = prepare_store(config).await?;
    let started = std::time::Instant::now();
    let nonce = now_micros();
    let mut runs = Vec::new();
    for &algorithm in &config.algorithms {
        for &processes in &config.processes {
            let lock = format!("soak-{algorithm}-p{processes}-{nonce}");
            // The endpoint's tally from here on is this run's.
            if let Some(e) = &endpoint {
                e.take_read_costs();
            }
            let specs = (0..processes)
                .map(|worker| {
                    let share = total / processes + u32::from(worker < total % processes);
                    WorkerSpec {
                        acquisitions: share,
                        progress_every: if worker == 0 { (share / 10).max(1) } else { 0 },
                        ..worker_spec(config, algorithm, worker, &lock, &worker_cql)
                    }
                })
                .collect();
            let run_started = std::time::Instant::now();
            let mut heard = |line: &str| {
                progress(&format!(
                    "{algorithm:<8} P={processes}: {line} acquisitions, {:.0}s",
                    run_started.elapsed().as_secs_f64()
                ));
            };
            let reports: Vec<WorkerReport> = run_workers(specs, worker_command, &mut heard)
                .await?
                .iter()
                .map(|line| serde_json::from_str(line).map_err(BenchError::from))
                .collect::<Result<_, _>>()?;
            let endpoint_reads = endpoint.as_ref().map(|e| {
                e.take_read_costs()
                    .into_iter()
                    .filter(|c| c.keyspace == worker_cql.keyspace)
                    .map(|c| EndpointReads {
                        table: c.table,
                        reads: c.reads,
                        max_tombstones: c.max_tombstones,
                        tombstones: c.tombstones,
                    })
                    .collect::<Vec<_>>()
            });
            let stats = soak_stats(
                algorithm.as_str(),
                processes,
                &reports,
                endpoint_reads.as_deref(),
            );
            progress(&format!(
                "{algorithm:<8} P={processes}: {} acquisitions in {:.1}s, first tenth {:.2} ms, last tenth {:.2} ms ({:.2}x)",
                stats.acquisitions,
                run_started.elapsed().as_secs_f64(),
                stats.first_tenth.mean_ms,
                stats.last_tenth.mean_ms,
                stats.last_over_first
            ));
            runs.push(stats);
        }
    }
    if let Some(endpoint) = endpoint {
        endpoint.shutdown().await;
    }
    Ok(SoakReport {
        version: 1,
        soak: total,
        hold: config.hold,
        machine: Machine::this(),
        load_average_start: load_start,
        load_average_end: load_average(),
        store: store_description(config),
        duration_s: started.elapsed().as_secs_f64(),
        passed: !runs.is_empty() && runs.iter().all(|r| r.verdict.passed),
        runs,
    })
}

/// The 1, 5 and 15 minute load averages, where the OS says (Linux).
fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut fields = text.split_whitespace().map(str::parse::<f64>);
    Some([
        fields.next()?.ok()?,
        fields.next()?.ok()?,
        fields.next()?.ok()?,
    ])
}

fn worker_spec(
    config: &BenchConfig,
    algorithm: BenchAlgorithm,
    worker: u32,
    lock: &str,
    cql: &CqlSettings,
) -> WorkerSpec {
    WorkerSpec {
        worker,
        algorithm,
        job: Job::Contend,
        lock: lock.to_string(),
        acquisitions: config.acquisitions,
        hold_micros: u64::try_from(config.hold.as_micros()).unwrap_or(u64::MAX),
        cql: cql.clone(),
        lease: config.lease.clone(),
        queue: config.queue.clone(),
        legacy: config.legacy.clone(),
        time: config.time.clone(),
        seed: config
            .seed
            .wrapping_mul(1_000)
            .wrapping_add(u64::from(worker)),
        progress_every: 0,
    }
}

async fn local_endpoint(config: &BenchConfig) -> Result<(EmulatorHandle, CqlSettings), BenchError> {
    let handle = Emulator::builder()
        .start(([127, 0, 0, 1], 0).into())
        .await?;
    if !config.latency.is_zero() || !config.jitter.is_zero() {
        handle.faults().add(
            FaultRule::new(Fault::Latency(config.latency))
                .on_table("lockshift.*")
                .with_jitter(config.jitter, config.seed),
        )?;
    }
    let settings = CqlSettings {
        contact_points: vec![handle.local_addr().to_string()],
        create_schema: true,
        ..CqlSettings::default()
    };
    Ok((handle, settings))
}

struct Running {
    worker: u32,
    child: Child,
    stdin: ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    /// The tail of its stderr, read as it comes: a worker that logs much
    /// over a long run must never block on a full pipe.
    stderr: tokio::task::JoinHandle<String>,
}

/// How much of a worker's stderr is kept for an error message.
const STDERR_TAIL: usize = 16 * 1024;

/// Reads `stderr` to its end, keeping the last [`STDERR_TAIL`] bytes.
async fn drain_tail(mut stderr: tokio::process::ChildStderr) -> String {
    let mut tail: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > 2 * STDERR_TAIL {
                    tail.drain(..tail.len() - STDERR_TAIL);
                }
            }
        }
    }
    if tail.len() > STDERR_TAIL {
        tail.drain(..tail.len() - STDERR_TAIL);
    }
    String::from_utf8_lossy(&tail).into_owned()
}

async fn run_once(
    config: &BenchConfig,
    algorithm: BenchAlgorithm,
    processes: u32,
    lock: &str,
    cql: &CqlSettings,
    worker_command: WorkerCommand<'_>,
) -> Result<Vec<WorkerReport>, BenchError> {
    let specs = (0..processes)
        .map(|worker| worker_spec(config, algorithm, worker, lock, cql))
        .collect();
    run_workers(specs, worker_command, &mut |_| {})
        .await?
        .iter()
        .map(|line| serde_json::from_str(line).map_err(BenchError::from))
        .collect()
}

/// Starts one worker process per spec, releases them together once all
/// are ready, and returns each one's report line; `progress` hears each
/// worker's progress lines (`progress <done>`) with its index.
async fn run_workers(
    specs: Vec<WorkerSpec>,
    worker_command: WorkerCommand<'_>,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<Vec<String>, BenchError> {
    let mut running = Vec::new();
    for spec in &specs {
        let worker = spec.worker;
        let mut command = worker_command(spec)?;
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|e| BenchError::Worker {
            worker,
            message: format!("cannot start: {e}"),
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(BenchError::Worker {
                worker,
                message: "no pipes".to_string(),
            });
        };
        running.push(Running {
            worker,
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            stderr: tokio::spawn(drain_tail(stderr)),
        });
    }
    // Barrier: everyone connected and measured before anyone starts.
    for r in &mut running {
        match r.lines.next_line().await? {
            Some(line) if line.trim() == "ready" => {}
            other => return Err(worker_failed(r, format!("expected `ready`, got {other:?}")).await),
        }
    }
    for r in &mut running {
        r.stdin.write_all(b"go\n").await?;
        r.stdin.flush().await?;
    }
    let mut lines = Vec::new();
    for mut r in running {
        let line = loop {
            match r.lines.next_line().await? {
                Some(line) => match line.strip_prefix(PROGRESS_PREFIX) {
                    Some(done) => progress(&format!("worker {}: {}", r.worker, done.trim())),
                    None => break line,
                },
                None => return Err(worker_failed(&mut r, "no report".to_string()).await),
            }
        };
        let status = r.child.wait().await?;
        if !status.success() {
            return Err(worker_failed(&mut r, format!("exited with {status}")).await);
        }
        lines.push(line);
    }
    Ok(lines)
}

async fn worker_failed(r: &mut Running, what: String) -> BenchError {
    // Best effort: the error is about to be reported anyway. Stopped
    // first, so its stderr ends.
    let _ = r.child.start_kill();
    let stderr = match tokio::time::timeout(Duration::from_secs(5), &mut r.stderr).await {
        Ok(Ok(tail)) => tail,
        _ => String::new(),
    };
    BenchError::Worker {
        worker: r.worker,
        message: format!("{what}; stderr: {}", stderr.trim()),
    }
}

/// The stats of `algorithm` at `processes`, if measured.
pub fn find(runs: &[RunStats], algorithm: BenchAlgorithm, processes: u32) -> Option<&RunStats> {
    runs.iter()
        .find(|r| r.algorithm == algorithm.as_str() && r.processes == processes)
}
