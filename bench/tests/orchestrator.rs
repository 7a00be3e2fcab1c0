//! The orchestrator end to end: real worker processes against the local
//! endpoint, small sizes. Behaviour only (counts, files, a fair queue),
//! never timing.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use lockshift_bench::{BenchConfig, BenchError, WorkerSpec, render, run};
use lockshift_lock::Algorithm;
use tokio::process::Command;

fn worker(spec: &WorkerSpec) -> Result<Command, BenchError> {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lockshift-bench-worker"));
    c.arg(serde_json::to_string(spec)?);
    Ok(c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_benchmark_runs_every_algorithm_in_processes() {
    let dir = tempfile::tempdir().unwrap();
    let config = BenchConfig {
        processes: vec![1, 3],
        acquisitions: 8,
        latency: Duration::from_millis(1),
        jitter: Duration::from_millis(1),
        plots: Some(dir.path().to_path_buf()),
        ..BenchConfig::default()
    };
    let mut lines = Vec::new();
    let report = run(&config, &worker, &mut |l: &str| lines.push(l.to_string()))
        .await
        .unwrap();
    assert_eq!(report.runs.len(), 6);
    assert_eq!(lines.len(), 6);
    for r in &report.runs {
        assert_eq!(r.acquisitions, u64::from(8 * r.processes), "{r:?}");
        assert_eq!(r.failures, 0);
        assert!(
            r.ops_per_acquisition >= 4.0,
            "at least the algorithm's own round trips: {r:?}"
        );
        assert!(r.round_trip_ms > 0.0);
    }
    let queue3 = report
        .runs
        .iter()
        .find(|r| r.algorithm == "queue" && r.processes == 3)
        .unwrap();
    assert!(queue3.longest_run <= 3, "the queue takes turns: {queue3:?}");
    for algorithm in [Algorithm::Legacy, Algorithm::Queue, Algorithm::Combined] {
        let png = dir.path().join(format!("{algorithm}.png"));
        assert_eq!(&std::fs::read(&png).unwrap()[..4], b"\x89PNG");
    }
    let table = render(&report);
    assert!(table.contains("targets (issue 7):"), "{table}");
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["version"], 1);
    assert_eq!(json["runs"].as_array().unwrap().len(), 6);
}
