//! Other standard CQL clients: the DataStax Python driver and cqlsh run
//! `tests/python/check_clients.py` against an endpoint. Runs when
//! `python3 -c 'import cassandra'` succeeds; otherwise it says so and passes
//! — unless `LOCKSHIFT_REQUIRE_PYTHON_CLIENTS=1`, which `.ci/run` sets after
//! installing the clients from PyPI, so in CI it can never be skipped.

use std::process::Stdio;

use lockshift_cql_emulator::Emulator;
use tokio::process::Command;

async fn python_driver_installed() -> bool {
    Command::new("python3")
        .args(["-c", "import cassandra"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_driver_and_cqlsh_run_lockshift_statements() {
    if !python_driver_installed().await {
        assert!(
            std::env::var("LOCKSHIFT_REQUIRE_PYTHON_CLIENTS").is_err(),
            "LOCKSHIFT_REQUIRE_PYTHON_CLIENTS is set but python3 cannot import the cassandra driver"
        );
        eprintln!(
            "SKIPPED: python3 with the cassandra driver is not installed (pip install cassandra-driver cqlsh)"
        );
        return;
    }
    let endpoint = Emulator::builder()
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = endpoint.local_addr();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/check_clients.py");
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(180),
        Command::new("python3")
            .arg(script)
            .arg(addr.ip().to_string())
            .arg(addr.port().to_string())
            .output(),
    )
    .await
    .expect("the client checks finish within 3 minutes")
    .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "client checks failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("all client checks passed"));
    endpoint.shutdown().await;
}
