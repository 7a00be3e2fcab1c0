//! Runs the benchmark with default sizes using the `lockshift-bench-worker`
//! binary next to this example (build both in the same profile).

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let exe = std::env::current_exe()?;
    let worker_bin = exe
        .parent()
        .and_then(|p| p.parent())
        .map(|p| p.join("lockshift-bench-worker"))
        .ok_or("no target dir")?;
    let mut config = lockshift_bench::BenchConfig {
        plots: Some(std::path::PathBuf::from("/tmp/bench-plots")),
        ..Default::default()
    };
    if let Ok(ms) = std::env::var("HEAD_POLL_MS") {
        config.queue.head_poll = std::time::Duration::from_millis(ms.parse()?);
    }
    if let Ok(ms) = std::env::var("HOLD_MS") {
        config.hold = std::time::Duration::from_millis(ms.parse()?);
    }
    if let Ok(a) = std::env::var("ALGOS") {
        config.algorithms = a.split(',').map(|x| x.parse()).collect::<Result<_, _>>()?;
    }
    if let Ok(p) = std::env::var("PROCS") {
        config.processes = p.split(',').map(|x| x.parse()).collect::<Result<_, _>>()?;
    }
    let worker = |spec: &lockshift_bench::WorkerSpec| -> Result<tokio::process::Command, lockshift_bench::BenchError> {
        let mut c = tokio::process::Command::new(&worker_bin);
        c.arg(serde_json::to_string(spec)?);
        Ok(c)
    };
    let report = lockshift_bench::run(&config, &worker, &mut |l: &str| eprintln!("{l}")).await?;
    println!("{}", lockshift_bench::render(&report));
    Ok(())
}
