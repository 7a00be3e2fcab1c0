use std::sync::Arc;

use lockshift_store::{
    Datacenter, FaultPlan, FaultyStore, MemoryStore, SharedClock, SharedStore, SkewedClock,
    Timestamp, TokioClock,
};

use super::*;
use crate::render::Human;

const S: i64 = 1_000_000;

fn dc(name: &str) -> Datacenter {
    Datacenter::new(name).unwrap()
}

/// A cluster of three one-node datacenters on a paused clock, read through
/// 1–3 ms of latency by a client `client_offset` µs off it, with the nodes'
/// clocks off as `skews` says.
fn cluster(skews: [i64; 3], client_offset: i64) -> (Arc<MemoryStore>, SharedStore, SharedClock) {
    let base = Arc::new(TokioClock::starting_at(Timestamp::from_micros(
        1_767_225_600_000_000 + 345_678,
    )));
    let memory = Arc::new(
        MemoryStore::with_clock(base.clone())
            .with_datacenters(vec![(dc("dc1"), 1), (dc("dc2"), 1), (dc("dc3"), 1)], 5),
    );
    for (name, skew) in ["dc1", "dc2", "dc3"].into_iter().zip(skews) {
        memory.skew_node_clock(&dc(name), skew);
    }
    let inner: SharedStore = memory.clone();
    let store: SharedStore = Arc::new(FaultyStore::new(inner, 9).with_plan(FaultPlan::latency(
        Duration::from_millis(1),
        Duration::from_millis(2),
    )));
    let client: SharedClock = Arc::new(SkewedClock::new(base, client_offset));
    (memory, store, client)
}

fn settings() -> lockshift::Settings {
    lockshift::Settings::from_toml("[node]\nid = \"migrate\"\n").unwrap()
}

/// Issue 41 item 3: a node 3 s off is beyond the waiters' 1 s tolerance
/// beside each of the others — exit 5 — while the other two agree; the
/// client's own offset (120 s behind) comes out of every read alike.
#[tokio::test(start_paused = true)]
async fn a_skewed_node_is_beyond_the_tolerance_and_status_exits_5() {
    let (_, store, client) = cluster([0, 2_000, 3 * S], -120 * S);
    let tolerance = tolerance_of(&settings());
    assert_eq!(tolerance, Duration::from_secs(1), "the waiters' cells");
    let r = node_clocks(store.as_ref(), client.as_ref(), tolerance).await;
    assert_eq!(r.tolerance_ms, 1_000);
    let addresses: Vec<&str> = r.nodes.iter().map(|n| n.address.as_str()).collect();
    assert_eq!(addresses, ["dc1", "dc2", "dc3"]);
    for (n, skew) in r.nodes.iter().zip([0, 2_000, 3 * S]) {
        let reading = n.reading.expect("read");
        let truth = 120 * S + skew;
        assert!(
            (reading.offset_us - truth).unsigned_abs() <= reading.error_us,
            "{}: {reading:?} vs {truth}",
            n.address
        );
        assert_eq!(n.answered, NODE_CLOCK_SAMPLES);
        assert!(reading.error_us <= 2_500, "{reading:?}");
    }
    assert!(r.exit_unsafe);
    let beyond: Vec<(&str, &str)> = r
        .beyond
        .iter()
        .map(|p| (p.a.as_str(), p.b.as_str()))
        .collect();
    assert_eq!(beyond, [("dc1", "dc3"), ("dc2", "dc3")]);
    assert!(r.unsure.is_empty());
    let widest = r.widest.as_ref().unwrap();
    assert_eq!((widest.a.as_str(), widest.b.as_str()), ("dc1", "dc3"));
    assert!((widest.spread.difference_us + 3 * S).unsigned_abs() <= widest.spread.error_us);
    let client_reading = r.client.unwrap();
    assert!((client_reading.offset_us - 120 * S).unsigned_abs() < 10_000);
    let text = r.human();
    assert!(
        text.starts_with("node clocks must agree within 1.0s"),
        "{text}"
    );
    assert!(text.contains("BEYOND     dc1 and dc3: 3.000s ± "), "{text}");
    assert!(
        text.contains("dc3   dc3         +122.999s ± 2.0ms"),
        "{text}"
    );
}

/// Nodes in step: nothing beyond, nothing unsure, no exit 5. A node that
/// does not answer is reported and compared with nobody.
#[tokio::test(start_paused = true)]
async fn nodes_in_step_pass_and_a_stopped_node_is_reported_not_judged() {
    let (memory, store, client) = cluster([0, 300, -250], 0);
    let r = node_clocks(store.as_ref(), client.as_ref(), Duration::from_secs(1)).await;
    assert!(
        !r.exit_unsafe && r.beyond.is_empty() && r.unsure.is_empty(),
        "{r:?}"
    );
    assert_eq!(r.nodes.iter().filter(|n| n.reading.is_some()).count(), 3);

    memory.skew_node_clock(&dc("dc3"), 3 * S);
    memory.stop_datacenter(&dc("dc3"));
    let r = node_clocks(store.as_ref(), client.as_ref(), Duration::from_secs(1)).await;
    assert!(!r.exit_unsafe, "{r:?}");
    let stopped = &r.nodes[2];
    assert_eq!((stopped.reading, stopped.answered), (None, 0));
    let why = stopped.error.as_deref().unwrap();
    assert!(why.contains("not reachable"), "{why}");
    assert_eq!(r.widest.as_ref().map(|w| w.b.as_str()), Some("dc2"));
    assert!(
        r.human().contains("dc3   dc3         not read: "),
        "{}",
        r.human()
    );
}

/// The judgement alone: within, unsure, beyond — by the readings' errors.
#[test]
fn pairs_are_judged_by_their_difference_and_both_errors() {
    let view = |address: &str, offset_us: i64, error_us: u64| NodeClockView {
        address: address.into(),
        datacenter: None,
        reading: Some(ClockReading {
            offset_us,
            error_us,
            at_us: 0,
        }),
        round_trip_us: Some(error_us),
        answered: 5,
        error: None,
    };
    let tolerance = Duration::from_secs(1);
    // (b's offset, the errors) → (beyond, unsure)
    let cases = [
        (900_000, 10_000, (0, 0)),
        (995_000, 10_000, (0, 1)),
        (1_015_000, 10_000, (0, 1)),
        (1_021_000, 10_000, (1, 0)),
    ];
    for (i, (b, error, (beyond, unsure))) in cases.into_iter().enumerate() {
        let r = judge(vec![view("b", b, error), view("a", 0, error)], tolerance);
        assert_eq!(r.nodes[0].address, "a", "sorted");
        assert_eq!(
            (r.beyond.len(), r.unsure.len()),
            (beyond, unsure),
            "case #{i}"
        );
        assert_eq!(r.exit_unsafe, beyond > 0, "case #{i}");
    }
    let alone = judge(vec![view("a", 5 * S, 10)], tolerance);
    assert!(alone.widest.is_none() && !alone.exit_unsafe);
    assert_eq!(alone.client.map(|c| c.offset_us), Some(5 * S));
}

/// Issue 41 item 3, through `migrate status`: a node 3 s off is an
/// UNSAFE warning (exit 5) and the report shows every node's clock; with
/// the nodes within the tolerance, the same report is not unsafe.
#[tokio::test(start_paused = true)]
async fn status_shows_node_clocks_and_is_unsafe_beyond_the_tolerance() {
    for (skews, unsafe_) in [([0, 2_000, 3 * S], true), ([0, 2_000, 0], false)] {
        let (_, store, client) = cluster(skews, -120 * S);
        let env = crate::ops::Env::new(settings(), store, client);
        let r = crate::ops::status::status(&env, |_| {}).await.unwrap();
        let clocks = r.node_clocks.as_ref().expect("three nodes listed");
        assert_eq!(clocks.nodes.len(), 3);
        assert_eq!(r.unsafe_state, unsafe_, "{:?}", r.warnings);
        let warned = r
            .warnings
            .iter()
            .filter(|w| w.starts_with("UNSAFE: Cassandra nodes"))
            .count();
        assert_eq!(warned, if unsafe_ { 2 } else { 0 }, "{:?}", r.warnings);
        let human = r.human();
        assert!(
            human.contains("node clocks must agree within 1.0s"),
            "{human}"
        );
        assert!(human.contains("dc3"), "{human}");
    }
}
