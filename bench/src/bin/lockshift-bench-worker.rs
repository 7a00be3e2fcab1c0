//! One benchmark worker process: `lockshift-bench-worker '<spec json>'`.
//! `migrate bench` runs the same worker as `migrate bench-worker`; this
//! binary lets the bench crate test its orchestrator on its own.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let Some(json) = std::env::args().nth(1) else {
        eprintln!("usage: lockshift-bench-worker '<worker spec as JSON>'");
        return ExitCode::from(2);
    };
    let spec = match serde_json::from_str(&json) {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("invalid worker spec: {e}");
            return ExitCode::from(2);
        }
    };
    match lockshift_bench::run_worker(spec).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("worker failed: {e}");
            ExitCode::FAILURE
        }
    }
}
