//! Every metric `lockshift::metrics` names, recorded by a node and read back
//! through a Prometheus recorder — this test binary's own global recorder.

use std::sync::Arc;
use std::time::Duration;

use lockshift::prelude::*;
use lockshift::{Algorithm, metrics};
use lockshift_store::{
    FaultyStore, MemoryStore, SharedClock, SharedStore, TokioClock, TombstoneThresholds,
};
use metrics_exporter_prometheus::PrometheusBuilder;

/// The value of the sample `name{labels…}` whose labels include every one
/// of `labels`, if the text has it.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.starts_with(name) && matches!(l.as_bytes().get(name.len()), Some(b'{') | Some(b' '))
        })
        .filter(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test(start_paused = true)]
async fn a_node_records_every_metric_named() {
    let prometheus = PrometheusBuilder::new()
        .install_recorder()
        .expect("the only recorder of this test binary");
    metrics::describe();
    let clock: SharedClock = Arc::new(TokioClock::new());
    // Every read that passes a tombstone warns (Cassandra: above 1 000).
    let memory =
        MemoryStore::with_clock(clock.clone()).with_tombstone_thresholds(TombstoneThresholds {
            warn: 0,
            ..TombstoneThresholds::default()
        });
    let faulty = Arc::new(FaultyStore::new(Arc::new(memory) as SharedStore, 7));
    let mut settings = Settings::default();
    settings.node.id = Some("m1".into());
    settings.node.mode = Mode::Queue; // runs combined at stage legacy
    let node = Node::builder()
        .settings(settings)
        .store(faulty.clone())
        .clock(clock)
        .start()
        .await
        .unwrap();

    // An acquisition, held for a while, released.
    let g = node.acquire("a").await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    g.release().await.unwrap();
    // A timeout: the lock is held by this very node.
    let holder = node.acquire("b").await.unwrap();
    let timed_out = node
        .acquire_with("b", AcquireOptions::with_timeout(Duration::from_secs(1)))
        .await;
    assert!(matches!(timed_out, Err(AcquireError::Timeout { .. })));
    // A lease loss: the store goes away until the holder is told.
    faulty.set_partitioned(true);
    let why = holder.until_lost().await;
    drop(holder);
    faulty.set_partitioned(false);
    eprintln!("lost: {why}");

    prometheus.run_upkeep();
    let text = prometheus.render();
    for name in metrics::ALL {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
    let node_label = ("node", "m1");
    let combined = ("algorithm", "combined");
    let at_least = |name: &str, labels: &[(&str, &str)], min: f64| {
        let v = sample(&text, name, labels).unwrap_or_else(|| panic!("no {name} {labels:?}"));
        assert!(
            v >= min,
            "{name} {labels:?} = {v}, expected ≥ {min}\n{text}"
        );
    };
    at_least(metrics::ACQUISITIONS, &[node_label, combined], 2.0);
    at_least(metrics::ACQUIRE_TIMEOUTS, &[node_label, combined], 1.0);
    at_least(metrics::LEASE_LOSSES, &[node_label, combined], 1.0);
    // The holder's renewals failed (and were retried) before it lost.
    at_least(metrics::RENEWAL_FAILURES, &[node_label, combined], 1.0);
    assert_eq!(
        sample(
            &text,
            metrics::LEASE_LOSSES,
            &[node_label, ("algorithm", "queue")]
        ),
        Some(0.0),
        "registered at zero"
    );
    at_least(
        &format!("{}_count", metrics::ACQUIRE_WAIT_SECONDS),
        &[node_label, combined],
        2.0,
    );
    at_least(
        &format!("{}_sum", metrics::HOLD_SECONDS),
        &[node_label, combined],
        2.0,
    );
    at_least(
        metrics::STORE_OPERATIONS,
        &[node_label, ("table", "main"), ("kind", "write")],
        2.0,
    );
    at_least(
        metrics::STORE_ERRORS,
        &[node_label, ("table", "main"), ("kind", "read")],
        1.0,
    );
    assert_eq!(
        sample(&text, metrics::EFFECTIVE_MODE, &[node_label, combined]),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            metrics::EFFECTIVE_MODE,
            &[node_label, ("algorithm", Algorithm::Queue.as_str())]
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(&text, metrics::STAGE_VERSION, &[node_label]),
        Some(0.0)
    );
    // Tombstones: released cells are tombstones the next reads pass.
    let warned: f64 = lockshift_store::schema::ALL
        .iter()
        .filter_map(|t| {
            sample(
                &text,
                metrics::STORE_WARNINGS,
                &[node_label, ("table", t.name())],
            )
        })
        .sum();
    assert!(warned >= 1.0, "no store warning counted:\n{text}");
    assert_eq!(
        sample(
            &text,
            metrics::STORE_WARNINGS,
            &[node_label, ("table", "scratch")]
        ),
        Some(0.0),
        "registered at zero"
    );
    at_least(
        &format!("{}_count", metrics::READ_TOMBSTONES),
        &[node_label, ("table", "main")],
        1.0,
    );
    node.shutdown().await;
}
