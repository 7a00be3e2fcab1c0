//! C1 in the node (issue 41 items 1–3): the process measures its
//! clock against the database's, reports it, stamps on it corrected by
//! the offset, and acts as combined — saying why — while the corrected
//! clock is not known within `rollout.clock_skew_margin`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use lockshift_decide::algorithm::Mode;
use lockshift_lock::{Algorithm, LockId};
use lockshift_rollout::registry::live_nodes;
use lockshift_store::{
    Clock, MemoryStore, Op, OpKind, Request, Response, SharedClock, SharedStore, Store, StoreError,
    StoreErrorKind, Timestamp, TokioClock, schema,
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
    /// How long each answer takes to come back, in ms.
    delay_ms: AtomicU64,
}

#[async_trait]
impl Store for ClockReads {
    async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
        if matches!(request.op, Op::ServerTime) {
            self.asked.fetch_add(1, Ordering::Relaxed);
            let delay = Duration::from_millis(self.delay_ms.load(Ordering::Relaxed));
            if !delay.is_zero() {
                // The answer comes back late: the server read its clock
                // at the start.
                let answer = self.inner.call(request).await;
                tokio::time::sleep(delay).await;
                return answer;
            }
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
    fn wraps(&self) -> Option<&dyn Store> {
        Some(&self.inner)
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
            delay_ms: AtomicU64::new(0),
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
/// reports it, and stamps on its clock corrected by it (C1): it runs its
/// mode like a process in step beside it, its row and its cells carry
/// the database's time, and a reader sees its heartbeat fresh.
#[tokio::test(start_paused = true)]
async fn a_process_far_off_the_database_clock_corrects_it_and_runs_its_mode() {
    let w = world();
    let (behind, _) = start(&w, "behind", Mode::Legacy, -120 * S).await;
    let (in_step, _) = start(&w, "in-step", Mode::Legacy, 0).await;

    let status = behind.status();
    let host = status.clock.expect("measured");
    assert!(
        (host.offset_us - 120 * S).unsigned_abs() <= host.error_us,
        "{host:?}"
    );
    assert!(host.error_us <= 2_000, "{host:?}");
    assert_eq!(status.effective, Algorithm::Legacy, "{status:?}");
    assert_eq!(status.unconfirmed_because, None);
    let guard = behind.acquire(LockId::new("L").unwrap()).await.unwrap();
    assert_eq!(guard.algorithm(), Algorithm::Legacy);
    // Its cell is stamped on the database's clock, within the error.
    let now = w.cluster.now();
    let cells = w
        .store
        .read(schema::MAIN, "L", &lockshift_store::RowQuery::all())
        .await
        .unwrap();
    assert_eq!(cells.len(), 1, "{cells:?}");
    assert!(
        now.as_micros().abs_diff(cells[0].writetime.as_micros()) <= 2_000,
        "{cells:?} at {now:?}"
    );
    guard.release().await.unwrap();

    let status = in_step.status();
    assert_eq!(status.effective, Algorithm::Legacy);
    assert!(status.clock.unwrap().offset_us.unsigned_abs() <= 1_000);

    let (rows, _) = live_nodes(w.store.as_ref(), now, Duration::from_secs(5))
        .await
        .unwrap();
    let row = rows.iter().find(|n| n.info.node == "behind").unwrap();
    assert_eq!(
        row.info.host_clock,
        Some(host),
        "the row carries the host's"
    );
    assert_eq!(row.info.host_reading(), Some(host));
    let stamping = row.info.clock.expect("and the stamping clock's");
    assert!(
        stamping.offset_us.unsigned_abs() <= stamping.error_us,
        "{stamping:?}"
    );
    assert!(!row.info.degraded && row.info.effective == Algorithm::Legacy);
    // Its heartbeat reads fresh whoever judges it: it is on the database's
    // clock.
    let judged = row.heartbeat_age(now, None, Duration::from_secs(5));
    assert!(judged.surely_within(Duration::from_secs(6)), "{judged:?}");
    behind.shutdown().await;
    in_step.shutdown().await;
}

/// A node whose clock cannot be read within the margin — every answer
/// takes 12 s to come back, so each reading is ±6 s — acts as combined and
/// says why, though its offset is corrected all the same.
#[tokio::test(start_paused = true)]
async fn a_process_whose_clock_cannot_be_bounded_within_the_margin_acts_as_combined() {
    let w = world();
    w.store.delay_ms.store(12_000, Ordering::Relaxed);
    let (node, _) = start(&w, "slow", Mode::Legacy, -120 * S).await;
    let status = node.status();
    let host = status.clock.expect("measured");
    assert!(host.error_us >= 5_900_000, "{host:?}");
    assert_eq!(status.effective, Algorithm::Combined);
    let why = status.why_combined().expect("it says why");
    assert!(
        why.contains("beyond rollout.clock_skew_margin (5s)"),
        "{why}"
    );
    node.shutdown().await;
}

/// A clock stepped away is corrected from the next measurement (it runs
/// its mode throughout), and so is one brought back; the host's offset is
/// what the node reports.
#[tokio::test(start_paused = true)]
async fn a_clock_stepped_away_and_back_is_corrected_by_the_measurements() {
    let w = world();
    let (node, clock) = start(&w, "web", Mode::Legacy, 0).await;
    assert_eq!(node.status().effective, Algorithm::Legacy);
    clock.offset.store(30 * S, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(61)).await;
    let status = node.status();
    assert_eq!(status.effective, Algorithm::Legacy, "{status:?}");
    let host = status.clock.unwrap();
    assert!((host.offset_us + 30 * S).unsigned_abs() <= host.error_us);
    let (rows, _) = live_nodes(w.store.as_ref(), w.cluster.now(), Duration::from_secs(5))
        .await
        .unwrap();
    let stamping = rows[0].info.clock.unwrap();
    assert!(
        stamping.offset_us.unsigned_abs() <= stamping.error_us,
        "{stamping:?}"
    );
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
