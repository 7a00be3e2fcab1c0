//! `migrate bench`: the benchmark of `lockshift_bench`, with this binary as
//! its worker process (`migrate bench-worker <spec>`) — contention (the
//! default), the hold mode (`--hold-locks`) and the soak (`--soak`) — and
//! the modes that run in this process (`--datacenters`, `--fenced-writes`,
//! `--observers`, `--census`, `--idle`).

use lockshift::Settings;
use lockshift_bench::{
    BenchAlgorithm, BenchConfig, BenchError, BenchReport, HoldBenchReport, SoakReport, WorkerSpec,
};
use tokio::process::Command;

use crate::UsageError;
use crate::cli::BenchArgs;

/// The most worker processes the contention and soak modes start.
const MAX_WORKERS: u32 = 64;

/// The benchmark's configuration: the flags, and the lock tuning and
/// connection of the settings (so it measures what the fleet would run).
///
/// # Errors
/// A [`UsageError`] when `--renew-every` makes the lease settings invalid.
pub fn config(args: &BenchArgs, settings: &Settings) -> anyhow::Result<BenchConfig> {
    let mut lease = settings.lock.lease();
    if let Some(every) = args.renew_every {
        lease.renew_every = every;
        if let Some(problem) = lease.problems().first() {
            return Err(UsageError(format!("--renew-every: {problem}")).into());
        }
    }
    let soak = args.soak.is_some();
    let algorithms = if args.algorithms.is_empty() {
        BenchAlgorithm::ALL
            .into_iter()
            .filter(|a| !soak || a.lock().is_some())
            .collect()
    } else {
        args.algorithms.clone()
    };
    if soak && let Some(a) = algorithms.iter().find(|a| a.lock().is_none()) {
        return Err(UsageError(format!(
            "--soak measures lockshift's locks (legacy, queue, combined); --algorithms {a} is not one"
        ))
        .into());
    }
    if let Some(p) = args.processes.iter().find(|p| **p > MAX_WORKERS) {
        return Err(UsageError(format!(
            "--processes {p}: at most {MAX_WORKERS} worker processes (larger fleets with --idle)"
        ))
        .into());
    }
    let processes = match (args.processes.is_empty(), soak) {
        (false, _) => args.processes.clone(),
        (true, true) => vec![1],
        (true, false) => vec![1, 3, 5],
    };
    if let (Some(n), Some(p)) = (args.soak, processes.iter().max())
        && n < *p
    {
        return Err(UsageError(format!(
            "--soak {n}: fewer acquisitions than --processes {p} (each process takes N / P)"
        ))
        .into());
    }
    Ok(BenchConfig {
        algorithms,
        processes,
        acquisitions: args.acquisitions,
        hold: args.hold,
        latency: args.latency,
        jitter: args.jitter,
        cluster: args.cluster.then(|| settings.store.cql.clone()),
        lease,
        queue: settings.lock.queue.clone(),
        legacy: settings.lock.legacy.clone(),
        time: settings.time.clone(),
        // The hold mode and the soak draw nothing.
        plots: (!args.no_plots && args.hold_locks.is_empty() && !soak).then(|| args.plots.clone()),
        seed: args.seed,
        hold_locks: args.hold_locks.clone(),
        hold_periods: args.periods,
        soak: args.soak,
    })
}

/// Checks before anything runs that the plots can be written: the
/// directory exists or can be made, and a file can be created in it.
///
/// # Errors
/// A [`UsageError`] naming the directory and why (exit 2).
pub fn check_plots_dir(config: &BenchConfig) -> anyhow::Result<()> {
    let Some(dir) = &config.plots else {
        return Ok(());
    };
    let refuse = |why: String| -> anyhow::Error {
        UsageError(format!(
            "--plots {}: {why} (nothing was run; pick another directory or pass --no-plots)",
            dir.display()
        ))
        .into()
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| refuse(format!("cannot create the directory: {e}")))?;
    let probe = dir.join(format!(".migrate-bench-probe-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| refuse(format!("cannot write in it: {e}")))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// The variable that hands a worker the store password: the spec on the
/// command line (visible to every user through `ps`) never carries it — the
/// settings never serialise it — and a process's environment is readable
/// by its owner only.
pub const WORKER_PASSWORD_ENV: &str = "LOCKSHIFT_BENCH_WORKER_PASSWORD";

/// A worker process: this executable's `bench-worker`.
fn worker_command() -> anyhow::Result<impl Fn(&WorkerSpec) -> Result<Command, BenchError> + Sync> {
    let exe = std::env::current_exe()?;
    Ok(move |spec: &WorkerSpec| -> Result<Command, BenchError> {
        let mut command = Command::new(&exe);
        command
            .arg("bench-worker")
            .arg(serde_json::to_string(spec)?);
        if let Some(password) = &spec.cql.password {
            command.env(WORKER_PASSWORD_ENV, password.expose());
        }
        Ok(command)
    })
}

/// The worker's side of [`WORKER_PASSWORD_ENV`]: the password its spec
/// could not carry.
pub fn restore_password(spec: &mut WorkerSpec) {
    if spec.cql.username.is_some()
        && spec.cql.password.is_none()
        && spec.cql.password_file.is_none()
        && let Ok(password) = std::env::var(WORKER_PASSWORD_ENV)
    {
        spec.cql.password = Some(lockshift_store::settings::Secret::new(password));
    }
}

/// Runs the benchmark with this executable as the worker.
///
/// # Errors
/// The benchmark's errors (endpoint, store, workers).
pub async fn bench(
    config: &BenchConfig,
    progress: impl FnMut(&str) + Send,
) -> anyhow::Result<BenchReport> {
    let worker = worker_command()?;
    let mut progress = progress;
    Ok(lockshift_bench::run(config, &worker, &mut progress).await?)
}

/// Runs the soak (`--soak N`) with this executable as the worker.
///
/// # Errors
/// The benchmark's errors (endpoint, store, workers).
pub async fn soak(
    config: &BenchConfig,
    progress: impl FnMut(&str) + Send,
) -> anyhow::Result<SoakReport> {
    let worker = worker_command()?;
    let mut progress = progress;
    Ok(lockshift_bench::run_soak(config, &worker, &mut progress).await?)
}

/// Runs the hold mode (`--hold-locks`) with this executable as the worker.
///
/// # Errors
/// The benchmark's errors (endpoint, store, workers).
pub async fn hold(
    config: &BenchConfig,
    progress: impl FnMut(&str) + Send,
) -> anyhow::Result<HoldBenchReport> {
    let worker = worker_command()?;
    let mut progress = progress;
    Ok(lockshift_bench::run_hold(config, &worker, &mut progress).await?)
}

/// The datacenter mode (`--datacenters`): on the embedded two-datacenter
/// cluster, or with `--cluster` on the connection settings' cluster,
/// homed in `--home` with the far client in `--far`.
///
/// # Errors
/// A cluster named without both datacenters, or the benchmark's error.
pub async fn datacenters(
    args: &BenchArgs,
    settings: &Settings,
) -> anyhow::Result<lockshift_bench::datacenters::DatacenterBenchReport> {
    use lockshift_bench::datacenters::{
        DatacenterBenchConfig, run_datacenters, run_datacenters_embedded,
    };
    let mut config = DatacenterBenchConfig {
        acquisitions: args.acquisitions,
        ..DatacenterBenchConfig::default()
    };
    if args.cluster {
        let (Some(home), Some(far)) = (args.home.clone(), args.far.clone()) else {
            return Err(crate::UsageError(
                "--datacenters --cluster needs --home DC and --far DC: the datacenter the \
                 lock lives in and the one the far client runs in"
                    .to_string(),
            )
            .into());
        };
        config.cluster = Some((settings.store.cql.clone(), home, far));
        return Ok(run_datacenters(&config).await?);
    }
    // Its own runtime, on a paused clock: the embedded cluster's round
    // trips are then exact.
    Ok(tokio::task::spawn_blocking(move || run_datacenters_embedded(&config)).await??)
}

/// The observers mode (`--observers N`).
///
/// # Errors
/// A [`UsageError`] when `--leader-every` is under a second (an observer,
/// reading every 500ms, would miss leaders); the benchmark's error.
pub async fn observe(
    args: &BenchArgs,
    settings: &Settings,
    observers: u32,
) -> anyhow::Result<lockshift_bench::observe::ObserveBenchReport> {
    if args.leader_every < lockshift_bench::observe::MIN_LEADER_EVERY {
        return Err(UsageError(format!(
            "--leader-every {}: at least 1s, so every observer (reading every \
             500ms) reads each leader",
            lockshift_decide::duration::fmt_duration(args.leader_every)
        ))
        .into());
    }
    let config = lockshift_bench::observe::ObserveBenchConfig {
        observers,
        window: args.observe_for,
        leader_every: args.leader_every,
        latency: args.latency,
        fenced_writes: args.fenced_writes.unwrap_or(50),
        cluster: args.cluster.then(|| settings.store.cql.clone()),
    };
    Ok(lockshift_bench::observe::run_observe(&config).await?)
}

/// The fenced-writes mode (`--fenced-writes N`).
///
/// # Errors
/// The benchmark's error.
pub async fn fenced(
    args: &BenchArgs,
    settings: &Settings,
    writes: u32,
) -> anyhow::Result<lockshift_bench::fenced::FencedBenchReport> {
    let config = lockshift_bench::fenced::FencedBenchConfig {
        writes,
        latency: args.latency,
        cluster: args.cluster.then(|| settings.store.cql.clone()),
    };
    Ok(lockshift_bench::fenced::run_fenced(&config).await?)
}

/// The idle mode (`--idle`): fleets of the sizes of `--processes`
/// (1,10,100,1000 by default) live idle, with the fleet's settings — on an
/// embedded store on a paused clock (a minute's warm-up, `--idle-window`
/// 5m by default), or with `--cluster` on the connection settings' cluster
/// in real time, each fleet in a keyspace of its own (15 s warm-up,
/// `--idle-window` 30s by default).
///
/// # Errors
/// The benchmark's error.
pub async fn idle(
    args: &BenchArgs,
    settings: &Settings,
    progress: impl FnMut(&str) + Send + 'static,
) -> anyhow::Result<lockshift_bench::idle::IdleBenchReport> {
    use lockshift_bench::idle::{
        CLUSTER_WARMUP, CLUSTER_WINDOW, EMBEDDED_WARMUP, EMBEDDED_WINDOW, IdleBenchConfig,
        run_idle, run_idle_on_cluster,
    };
    let (warmup, window) = if args.cluster {
        (CLUSTER_WARMUP, CLUSTER_WINDOW)
    } else {
        (EMBEDDED_WARMUP, EMBEDDED_WINDOW)
    };
    let config = IdleBenchConfig {
        fleets: if args.processes.is_empty() {
            vec![1, 10, 100, 1000]
        } else {
            args.processes.clone()
        },
        warmup,
        window: args.idle_window.unwrap_or(window),
        settings: settings.clone(),
        cluster: args.cluster.then(|| settings.store.cql.clone()),
    };
    let mut progress = progress;
    if config.cluster.is_some() {
        return Ok(run_idle_on_cluster(&config, &mut progress).await?);
    }
    Ok(tokio::task::spawn_blocking(move || run_idle(&config, &mut progress)).await??)
}

/// The sharing mode (`--sharing`): semaphores and a read/write mix
/// beside the mutex, on an embedded store on a paused clock.
///
/// # Errors
/// The benchmark's error.
pub async fn sharing(
    args: &BenchArgs,
    progress: impl FnMut(&str) + Send + 'static,
) -> anyhow::Result<lockshift_bench::sharing::SharingBenchReport> {
    let config = lockshift_bench::sharing::SharingBenchConfig {
        latency: args.latency,
        acquisitions: args.acquisitions,
        seed: args.seed,
        ..lockshift_bench::sharing::SharingBenchConfig::default()
    };
    let mut progress = progress;
    Ok(tokio::task::spawn_blocking(move || {
        lockshift_bench::sharing::run_sharing(&config, &mut progress)
    })
    .await??)
}

/// The census mode (`--census N,...`): per size on a fresh embedded store,
/// on a fresh local endpoint (`--latency` per round trip), and with
/// `--cluster` in a keyspace of its own on the connection settings'
/// cluster (created as `migrate schema --apply` does, dropped after), with
/// the fleet's rollout, lease and queue settings.
///
/// # Errors
/// The benchmark's error.
pub async fn census(
    args: &BenchArgs,
    settings: &Settings,
    progress: impl FnMut(&str) + Send,
) -> anyhow::Result<lockshift_bench::census::CensusBenchReport> {
    let config = lockshift_bench::census::CensusBenchConfig {
        sizes: args.census.clone(),
        latency: args.latency,
        cluster: args.cluster.then(|| settings.store.cql.clone()),
        rollout: settings.rollout.clone(),
        lease: settings.lock.lease(),
        queue: settings.lock.queue.clone(),
    };
    let mut progress = progress;
    Ok(lockshift_bench::census::run_census(&config, &mut progress).await?)
}
