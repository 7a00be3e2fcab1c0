//! `migrate bench`: the benchmark of `lockshift_bench`, with this binary as
//! its worker process (`migrate bench-worker <spec>`).

use lockshift_bench::{BenchConfig, BenchError, BenchReport, WorkerSpec};
use lockshift_combined::Settings;
use tokio::process::Command;

use crate::cli::BenchArgs;

/// The benchmark's configuration: the flags, and the lock tuning and
/// connection of the settings (so it measures what the fleet would run).
pub fn config(args: &BenchArgs, settings: &Settings) -> BenchConfig {
    BenchConfig {
        algorithms: args.algorithms.clone(),
        processes: args.processes.clone(),
        acquisitions: args.acquisitions,
        hold: args.hold,
        latency: args.latency,
        jitter: args.jitter,
        cluster: args.cluster.then(|| settings.store.cql.clone()),
        lease: settings.lock.lease(),
        queue: settings.lock.queue.clone(),
        legacy: settings.lock.legacy.clone(),
        time: settings.time.clone(),
        plots: (!args.no_plots).then(|| args.plots.clone()),
        seed: args.seed,
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
    let exe = std::env::current_exe()?;
    let worker = move |spec: &WorkerSpec| -> Result<Command, BenchError> {
        let mut command = Command::new(&exe);
        command
            .arg("bench-worker")
            .arg(serde_json::to_string(spec)?);
        Ok(command)
    };
    let mut progress = progress;
    Ok(lockshift_bench::run(config, &worker, &mut progress).await?)
}
