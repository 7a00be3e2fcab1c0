//! `migrate bench` end to end: real worker processes (`migrate
//! bench-worker`) against the in-process endpoint, small sizes. Behaviour
//! only (counts, files, JSON schema, a fair queue), never timing.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::process::Command;

#[test]
fn a_small_benchmark_runs_every_algorithm_in_processes() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_migrate"))
        .args([
            "bench",
            "--processes",
            "1,3",
            "--acquisitions",
            "8",
            "--latency",
            "1ms",
            "--jitter",
            "1ms",
            "--json",
            "--plots",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["version"], 1);
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 6, "three algorithms at P = 1 and 3");
    for r in runs {
        let processes = r["processes"].as_u64().unwrap();
        assert_eq!(r["acquisitions"].as_u64().unwrap(), 8 * processes, "{r}");
        assert_eq!(r["failures"], 0);
        assert!(
            r["ops_per_acquisition"].as_f64().unwrap() >= 4.0,
            "at least the algorithm's own round trips: {r}"
        );
        assert!(r["round_trip_ms"].as_f64().unwrap() > 0.0);
    }
    let queue3 = runs
        .iter()
        .find(|r| r["algorithm"] == "queue" && r["processes"] == 3)
        .unwrap();
    assert!(
        queue3["longest_run"].as_u64().unwrap() <= 3,
        "the queue takes turns: {queue3}"
    );
    for algorithm in ["legacy", "queue", "combined"] {
        let png = std::fs::read(dir.path().join(format!("{algorithm}.png"))).unwrap();
        assert_eq!(&png[..4], b"\x89PNG");
    }
    assert_eq!(report["targets"].as_array().unwrap().len(), 6);
}

#[test]
fn bad_bench_values_are_usage_errors() {
    let out = Command::new(env!("CARGO_BIN_EXE_migrate"))
        .args(["bench", "--algorithms", "fast"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown algorithm \"fast\""));
    let out = Command::new(env!("CARGO_BIN_EXE_migrate"))
        .args(["bench-worker", "{not json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid worker spec"));
}
