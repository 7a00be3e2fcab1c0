//! C1 in the node (issue 41 items 1–2): the process measures its clock
//! against the database's, reports it, and acts as combined — saying why —
//! while it is not known within `rollout.clock_skew_margin`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use lockshift_decide::algorithm::Mode;
use lockshift_lock::{Algorithm, LockId};
use lockshift_rollout::registry::live_nodes;
use lockshift_store::{
    Clock, MemoryStore, Op, OpKind, Request, Response, SharedClock, SharedStore, Store, StoreError,
    StoreErrorKind, Timestamp, TokioClock, Topology, schema,
};

use crate::node::Node;
use crate::settings::Settings;

const S: i64 = 1_000_000;

/// A clock `offset` µs off a base clock, which a test may step.
#[derive(Debug)]
struct Stepped {
    base: SharedClock,
    offset: AtomicI64,
}

impl Clock for Stepped {
    fn now(&self) -> Timestamp {
        self.base
            .now()
            .offset_micros(self.offset.load(Ordering::Relaxed))
    }
}

/// A store that counts the reads of its clock, and refuses them while told.
#[derive(Debug)]
struct ClockReads {
    inner: SharedStore,
    refuse: AtomicBool,
    asked: AtomicU64,
}

#[async_trait]
impl Store for ClockReads {
    async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
        if matches!(request.op, Op::ServerTime) {
            self.asked.fetch_add(1, Ordering::Relaxed);
            if self.refuse.load(Ordering::Relaxed) {
                return Err(StoreError::new(
                    StoreErrorKind::Connection,
                    OpKind::Read,
                    Some(schema::ROLLOUT),
                    "refused by the test",
                ));
            }
        }
        self.inner.call(request).await
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn topology(&self) -> Topology {
        self.inner.topology()
    }
}

struct World {
    cluster: SharedClock,
    store: Arc<ClockReads>,
}

fn world() -> World {
    let cluster: SharedClock = Arc::new(TokioClock::new());
    World {
        store: Arc::new(ClockReads {
            inner: Arc::new(MemoryStore::with_clock(cluster.clone())),
            refuse: AtomicBool::new(false),
            asked: AtomicU64::new(0),
        }),
        cluster,
    }
}

/// A node `id` configured `mode`, whose clock is `offset` µs off the
/// database's.
async fn start(w: &World, id: &str, mode: Mode, offset: i64) -> (Node, Arc<Stepped>) {
    let clock = Arc::new(Stepped {
        base: w.cluster.clone(),
        offset: AtomicI64::new(offset),
    });
    let settings = Settings::from_toml(&format!("[node]\nid = \"{id}\"\nmode = \"{mode}\"\n"))
        .expect("valid settings");
    let node = Node::builder()
        .settings(settings)
        .seed(7)
        .store(w.store.clone())
        .clock(clock.clone())
        .start()
        .await
        .expect("the node starts");
    (node, clock)
}

/// Issue 41: a process 120 s behind (`faketime -f -120s`) measures +120 s,
/// reports it in its row, and — beyond the 5 s margin — acts as combined
/// and says why; a process in step beside it runs its mode. A reader
/// judging the far one's heartbeat by its reading sees it fresh; by its
/// own clock alone (the margin) it would see it silent.
#[tokio::test(start_paused = true)]
async fn a_process_far_off_the_database_clock_acts_as_combined_and_says_why() {
    let w = world();
    let (behind, _) = start(&w, "behind", Mode::Legacy, -120 * S).await;
    let (in_step, _) = start(&w, "in-step", Mode::Legacy, 0).await;

    let status = behind.status();
    let reading = status.clock.expect("measured");
    assert!(
        (reading.offset_us - 120 * S).unsigned_abs() <= reading.error_us,
        "{reading:?}"
    );
    assert!(reading.error_us <= 2_000, "{reading:?}");
    assert_eq!(status.effective, Algorithm::Combined);
    assert_eq!(status.degraded_from, Some(Mode::Legacy));
    let why = status.why_combined().expect("it says why");
    assert!(
        why.contains("+119.999s ± 1.0ms from the database's"),
        "{why}"
    );
    assert!(
        why.contains("beyond rollout.clock_skew_margin (5s)"),
        "{why}"
    );
    let guard = behind.acquire(LockId::new("L").unwrap()).await.unwrap();
    assert_eq!(guard.algorithm(), Algorithm::Combined);
    guard.release().await.unwrap();

    let status = in_step.status();
    assert_eq!(status.effective, Algorithm::Legacy);
    assert_eq!(status.unconfirmed_because, None);
    assert!(status.clock.unwrap().offset_us.unsigned_abs() <= 1_000);

    let now = w.cluster.now();
    let (rows, _) = live_nodes(w.store.as_ref(), now, Duration::from_secs(5))
        .await
        .unwrap();
    let row = rows.iter().find(|n| n.info.node == "behind").unwrap();
    assert_eq!(row.info.clock, Some(reading), "the row carries it");
    assert!(row.info.degraded && row.info.effective == Algorithm::Combined);
    let silent_after = Duration::from_secs(30);
    let reader = in_step.status().clock;
    let judged = row.heartbeat_age(now, reader.as_ref(), Duration::from_secs(5));
    assert!(judged.surely_within(Duration::from_secs(1)), "{judged:?}");
    let mut blind = row.clone();
    blind.info.clock = None;
    let judged = blind.heartbeat_age(now, reader.as_ref(), Duration::from_secs(5));
    assert!(judged.surely_over(silent_after), "{judged:?}");
    behind.shutdown().await;
    in_step.shutdown().await;
}

/// A clock stepped away acts as combined from the next measurement, and
/// one brought back acts on its mode again from the next (and the
/// heartbeat after it that declares the mode, R8).
#[tokio::test(start_paused = true)]
async fn a_clock_stepped_away_and_back_follows_the_measurements() {
    let w = world();
    let (node, clock) = start(&w, "web", Mode::Legacy, 0).await;
    assert_eq!(node.status().effective, Algorithm::Legacy);
    clock.offset.store(30 * S, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(61)).await;
    let status = node.status();
    assert_eq!(status.effective, Algorithm::Combined);
    let reading = status.clock.unwrap();
    assert!((reading.offset_us + 30 * S).unsigned_abs() <= reading.error_us);
    clock.offset.store(0, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(61 + 6)).await;
    let status = node.status();
    assert_eq!(status.effective, Algorithm::Legacy, "{status:?}");
    assert!(status.clock.unwrap().offset_us.unsigned_abs() <= 1_000);
    node.shutdown().await;
}

/// No reading, no mode: a process that cannot read the database's clock
/// acts as combined, saying why, until a measurement is answered; a
/// reading it has ages out after five minutes without another. And the
/// cost: five reads at start, three a minute after.
#[tokio::test(start_paused = true)]
async fn a_process_that_cannot_measure_acts_as_combined_until_it_can() {
    let w = world();
    w.store.refuse.store(true, Ordering::Relaxed);
    let (node, _) = start(&w, "web", Mode::Legacy, 0).await;
    assert_eq!(w.store.asked.load(Ordering::Relaxed), 5);
    let status = node.status();
    assert_eq!(status.clock, None);
    assert_eq!(status.effective, Algorithm::Combined);
    let why = status.why_combined().unwrap();
    assert!(why.contains("has not been measured"), "{why}");
    assert!(why.contains("refused by the test"), "{why}");
    w.store.refuse.store(false, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(61 + 6)).await;
    assert_eq!(node.status().effective, Algorithm::Legacy);
    assert_eq!(w.store.asked.load(Ordering::Relaxed), 5 + 3);
    // Refused again: the last reading counts for five minutes.
    w.store.refuse.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(4 * 60)).await;
    assert_eq!(node.status().effective, Algorithm::Legacy);
    tokio::time::sleep(Duration::from_secs(60)).await;
    let status = node.status();
    assert_eq!(status.effective, Algorithm::Combined);
    let why = status.why_combined().unwrap();
    assert!(why.contains("last measured"), "{why}");
    assert_eq!(w.store.asked.load(Ordering::Relaxed), 5 + 3 * 6);
    node.shutdown().await;
}
