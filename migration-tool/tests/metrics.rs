//! `--metrics`: `migrate demo` and `migrate serve` answer Prometheus
//! scrapes, and every metric `lockshift::metrics` names is in the demo's.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{command, migrate, small_demo};
use lockshift::metrics;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// One scrape: the body of `GET /metrics`.
async fn scrape(addr: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to the metrics endpoint {addr}: {e}"));
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .expect("the scrape request is sent");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .expect("the scrape response is read");
    assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
    assert!(response.contains("Content-Type: text/plain; version=0.0.4"));
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default()
}

/// The sum of every sample of `name` (any labels) whose labels include all
/// of `labels`.
fn total(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.starts_with(name) && matches!(l.as_bytes().get(name.len()), Some(b'{' | b' '))
        })
        .filter(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Stderr lines of a running child, as they come.
fn lines(stderr: tokio::process::ChildStderr) -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The address announced as `metrics on http://ADDR/metrics`.
async fn metrics_address(stderr: &mut mpsc::UnboundedReceiver<String>) -> String {
    let wait = async {
        while let Some(line) = stderr.recv().await {
            if let Some(rest) = line.split("metrics on http://").nth(1) {
                return rest.trim_end_matches("/metrics").to_string();
            }
        }
        panic!("the process ended without announcing its metrics address");
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .expect("the metrics address is announced")
}

/// A small demo with `--metrics`, scraped while its fleet works: every
/// metric named is there, and the ones a rollout must move have moved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_metrics_scrape_has_every_metric_named() {
    // On the real cluster when one is named (the demo's own keyspace).
    let cluster = common::real_cluster();
    let mut child = command(
        cluster.as_deref(),
        &small_demo("2s", &["--metrics", "127.0.0.1:0"]),
        &[],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .expect("migrate demo starts");
    let mut stderr = lines(child.stderr.take().expect("piped"));
    let addr = metrics_address(&mut stderr).await;

    // Scrape until the fleet has taken locks with the fair lock (the demo
    // ends at stage `complete`, every node acting on queue).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let text = loop {
        let text = scrape(&addr).await;
        let queue = total(&text, metrics::ACQUISITIONS, &[("algorithm", "queue")]);
        if queue > 0.0 || tokio::time::Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    for name in metrics::ALL {
        assert!(
            text.contains(&format!("\n{name}")) || text.starts_with(name),
            "{name} is not in the scrape:\n{text}"
        );
        assert!(
            text.contains(&format!("# HELP {name}")),
            "{name} has no HELP line"
        );
    }
    for algorithm in ["legacy", "combined", "queue"] {
        let took = total(&text, metrics::ACQUISITIONS, &[("algorithm", algorithm)]);
        // Legacy only while a node is configured legacy; combined and
        // queue through the rollout.
        if algorithm != "legacy" {
            assert!(took > 0.0, "no {algorithm} acquisitions:\n{text}");
        }
    }
    assert!(
        total(
            &text,
            &format!("{}_count", metrics::ACQUIRE_WAIT_SECONDS),
            &[]
        ) > 0.0
    );
    assert!(total(&text, &format!("{}_count", metrics::HOLD_SECONDS), &[]) > 0.0);
    assert!(
        total(
            &text,
            metrics::STORE_OPERATIONS,
            &[("table", "main"), ("kind", "write")]
        ) > 0.0
    );
    assert!(
        total(&text, metrics::EFFECTIVE_MODE, &[("algorithm", "queue")]) >= 1.0,
        "some node acquires with queue now:\n{text}"
    );
    assert!(total(&text, metrics::STAGE_VERSION, &[]) >= 1.0);
    assert!(total(&text, metrics::STAGE_CONFIRMED, &[]) >= 1.0);

    let status = tokio::time::timeout(Duration::from_secs(90), child.wait())
        .await
        .expect("the demo ends")
        .unwrap();
    assert!(status.success(), "the demo's verdict");
}

/// `migrate serve --metrics`: the operations the endpoint answered, by
/// table and kind, counted as clients (here `migrate status`) send them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_metrics_count_the_operations_it_answers() {
    let mut child = command(
        None,
        &[
            "serve",
            "--json",
            "--listen",
            "127.0.0.1:0",
            "--metrics",
            "127.0.0.1:0",
        ],
        &[],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("migrate serve starts");
    let mut stderr = lines(child.stderr.take().expect("piped"));
    let metrics_addr = metrics_address(&mut stderr).await;
    // The listening report: a JSON document on stdout.
    let mut stdout = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut json = String::new();
    while let Some(line) = stdout.next_line().await.unwrap() {
        json.push_str(&line);
        if line == "}" {
            break;
        }
    }
    let listening: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let cql = listening["address"].as_str().expect("address").to_string();
    assert_eq!(listening["metrics"].as_str(), Some(metrics_addr.as_str()));

    let before = scrape(&metrics_addr).await;
    let reads = |text: &str| {
        total(
            text,
            metrics::STORE_OPERATIONS,
            &[("node", "serve"), ("table", "rollout"), ("kind", "read")],
        )
    };
    assert!(
        before.contains("lockshift_store_operations_total{node=\"serve\""),
        "registered at start:\n{before}"
    );
    migrate(Some(&cql), &["status"], &[]).await.expect_code(0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = scrape(&metrics_addr).await;
        if reads(&now) > reads(&before) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "`status` read the stage, yet the endpoint counted no rollout reads:\n{now}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    child.kill().await.unwrap();
}
