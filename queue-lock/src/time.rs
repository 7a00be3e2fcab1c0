//! The time service (thesis §5.4): where queue cells get their time prefix.
//!
//! Queue order is time order, so a node whose clock lags would jump the
//! queue. The thesis keeps a `GlobalTime` cell holding the maximum of the
//! updaters' clocks, written with a timestamp equal to its value (listing 9),
//! so it never decreases (theorem 5: last-write-wins can only raise it).
//! Its weakness (§7.1): if the fastest updater dies the value stalls until
//! the others' clocks catch up, and every queue cell in between gets the same
//! prefix. Three sources, chosen by `[time] source`:
//!
//! - [`TimeSourceKind::Global`] — the thesis: the current `GlobalTime` value,
//!   read from the store per request (one extra round trip per acquisition).
//! - [`TimeSourceKind::Hybrid`] (default) — `max(last + 1 µs, local clock,
//!   cached GlobalTime)`: never decreases on a node, never stalls (the local
//!   clock moves), and a lagging node is pulled up to the fleet's maximum as of
//!   the last update. No round trip on the acquire path.
//! - [`TimeSourceKind::Local`] — the node's clock, strictly increasing.
//!
//! Every node running a global or hybrid source is an updater: it runs
//! listing 9 every `update_every`. A hybrid updater runs only while its
//! source is in use: after [`IDLE_TICKS`] updates with no queue time asked
//! of it, it waits for the next ask, which answers at once (from the cache
//! as it stands) and wakes it. An idle process — one that takes no queue
//! lock — then costs the `global_time` row nothing, where a thousand of
//! them read it 2 000 times a second. The cache only pulls a lagging
//! clock up to the fleet's; queue order is fairness, and exclusion never
//! rests on it (docs/design.md §2, "Time").

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use async_trait::async_trait;
use lockshift_store::{
    CellWrite, RowQuery, SharedClock, SharedStore, StoreError, StoreErrorKind, Timestamp,
    WriteOptions, schema,
};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::settings::{TimeSettings, TimeSourceKind};

/// Updates a hybrid updater runs with no queue time asked of its source
/// before it waits for the next ask: 30 s at the default `update_every`.
pub const IDLE_TICKS: u32 = 60;

/// The row and column of the `GlobalTime` cell.
pub const GLOBAL_TIME_ROW: &str = "global";
/// See [`GLOBAL_TIME_ROW`].
pub const GLOBAL_TIME_COLUMN: &str = "time";

/// A source of queue times.
#[async_trait]
pub trait TimeSource: Send + Sync + fmt::Debug {
    /// The time to name a queue cell with. Never less than an earlier answer
    /// of the same source.
    ///
    /// # Errors
    /// A store error, for sources that read the store.
    async fn now(&self) -> Result<Timestamp, StoreError>;
}

/// Raises `cell` to at least `value` and returns the new maximum.
fn raise(cell: &AtomicI64, value: i64) -> i64 {
    cell.fetch_max(value, Ordering::SeqCst).max(value)
}

/// Listing 9, once: read `GlobalTime`; if the local clock is ahead, write it
/// with a timestamp equal to its value. Returns the global time now known.
///
/// # Errors
/// The store error of the read or write.
pub async fn try_update_global_time(
    store: &dyn lockshift_store::Store,
    clock: &dyn lockshift_store::Clock,
) -> Result<Timestamp, StoreError> {
    let local = clock.now();
    let global = read_global_time(store).await?;
    if global.is_none_or(|g| local > g) {
        // Theorem 5: the value equals the write timestamp, so a smaller value
        // can never overwrite a larger one.
        store
            .write(
                schema::GLOBAL_TIME,
                GLOBAL_TIME_ROW,
                &[CellWrite::new(
                    GLOBAL_TIME_COLUMN,
                    local.as_micros().to_string().into_bytes(),
                )],
                WriteOptions::at(local),
            )
            .await?;
        return Ok(local);
    }
    Ok(global.unwrap_or(local))
}

/// The current `GlobalTime` value, `None` before the first update.
///
/// # Errors
/// The store error of the read.
pub async fn read_global_time(
    store: &dyn lockshift_store::Store,
) -> Result<Option<Timestamp>, StoreError> {
    let cells = store
        .read(
            schema::GLOBAL_TIME,
            GLOBAL_TIME_ROW,
            &RowQuery::first(1).starting_at(GLOBAL_TIME_COLUMN),
        )
        .await?;
    // The write timestamp *is* the value (listing 9); reading it rather than
    // parsing the bytes also copes with a value written by another tool.
    Ok(cells
        .into_iter()
        .find(|c| c.column == GLOBAL_TIME_COLUMN)
        .map(|c| c.writetime))
}

/// A running time service: the source plus, for global and hybrid, the
/// background updater that feeds it.
///
/// The updater runs as long as the service or any source it handed out
/// lives: a locker holding a source keeps its queue order fed after the
/// service itself is gone, and the last holder to go stops it.
#[derive(Debug)]
pub struct TimeService {
    source: Arc<dyn TimeSource>,
}

/// The background updater, aborted when the last source holding it goes.
#[derive(Debug)]
struct Updater(JoinHandle<()>);

impl Drop for Updater {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A source together with the updater that feeds it.
#[derive(Debug)]
struct Fed<S> {
    source: S,
    _updater: Updater,
}

#[async_trait]
impl<S: TimeSource> TimeSource for Fed<S> {
    async fn now(&self) -> Result<Timestamp, StoreError> {
        self.source.now().await
    }
}

impl TimeService {
    /// Starts the source `settings` ask for.
    ///
    /// # Panics
    /// Outside a tokio runtime, for sources with an updater.
    pub fn start(settings: &TimeSettings, store: SharedStore, clock: SharedClock) -> Self {
        let cached = Arc::new(AtomicI64::new(i64::MIN));
        let updater = |demand: Option<Arc<Demand>>| {
            Updater(spawn_updater(
                settings.update_every,
                store.clone(),
                clock.clone(),
                cached.clone(),
                demand,
            ))
        };
        let source: Arc<dyn TimeSource> = match settings.source {
            TimeSourceKind::Local => Arc::new(LocalTime::new(clock.clone())),
            TimeSourceKind::Global => Arc::new(Fed {
                source: GlobalTime {
                    store: store.clone(),
                    clock: clock.clone(),
                    last: AtomicI64::new(i64::MIN),
                },
                // The thesis' source reads the cell per ask: kept moving
                // always, as listing 9 does.
                _updater: updater(None),
            }),
            TimeSourceKind::Hybrid => {
                let demand = Arc::new(Demand::default());
                Arc::new(Fed {
                    source: HybridTime {
                        clock: clock.clone(),
                        cached: cached.clone(),
                        last: AtomicI64::new(i64::MIN),
                        demand: demand.clone(),
                    },
                    _updater: updater(Some(demand)),
                })
            }
        };
        TimeService { source }
    }

    /// The source, to hand to lockers; it keeps the updater running for as
    /// long as it lives.
    pub fn source(&self) -> Arc<dyn TimeSource> {
        self.source.clone()
    }
}

/// Whether a hybrid source was asked for a time since its updater last
/// looked, and the updater's wake-up once it waits for an ask.
#[derive(Debug, Default)]
struct Demand {
    asked: AtomicBool,
    wake: Notify,
}

impl Demand {
    /// A queue time was asked for: the updater keeps running, or wakes.
    fn ask(&self) {
        if !self.asked.swap(true, Ordering::SeqCst) {
            self.wake.notify_one();
        }
    }

    /// Whether a time was asked for since the last call.
    fn take(&self) -> bool {
        self.asked.swap(false, Ordering::SeqCst)
    }
}

/// Listing 9 every `every`, raising `cached` to each value it learns;
/// with `demand`, only while times are asked for (see [`IDLE_TICKS`]).
fn spawn_updater(
    every: std::time::Duration,
    store: SharedStore,
    clock: SharedClock,
    cached: Arc<AtomicI64>,
    demand: Option<Arc<Demand>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut idle_ticks: u32 = 0;
        // The kind of the failures since the last update, if any: a run of
        // one kind is said once (an update runs twice a second), and a
        // moving home's refusal — which ends when the new home serves —
        // is no warning.
        let mut failing: Option<StoreErrorKind> = None;
        loop {
            ticker.tick().await;
            if let Some(demand) = &demand {
                if demand.take() {
                    idle_ticks = 0;
                } else if idle_ticks >= IDLE_TICKS {
                    debug!("no queue time asked for a while: GlobalTime updates wait for the next");
                    // A wake-up stored by an ask the updater has seen
                    // already is not an ask: wait for one it has not.
                    loop {
                        demand.wake.notified().await;
                        if demand.take() {
                            break;
                        }
                    }
                    idle_ticks = 0;
                    ticker.reset_immediately();
                    continue;
                } else {
                    idle_ticks += 1;
                }
            }
            match try_update_global_time(store.as_ref(), clock.as_ref()).await {
                Ok(t) => {
                    raise(&cached, t.as_micros());
                    debug!(global_time = %t, "GlobalTime updated");
                    if failing.take().is_some() {
                        info!("GlobalTime updated again");
                    }
                }
                Err(e) if failing == Some(e.kind()) => {
                    debug!(error = %e, "GlobalTime update failed again");
                }
                Err(e) => {
                    if e.kind() == StoreErrorKind::HomeMoving {
                        info!(error = %e, "GlobalTime update refused while the fleet's rows move; trying again quietly");
                    } else {
                        warn!(error = %e, "GlobalTime update failed; trying again, quietly while it fails so");
                    }
                    failing = Some(e.kind());
                }
            }
        }
    })
}

/// The node's clock, strictly increasing.
#[derive(Debug)]
pub struct LocalTime {
    clock: SharedClock,
    last: AtomicI64,
}

impl LocalTime {
    /// Over `clock`.
    pub fn new(clock: SharedClock) -> Self {
        LocalTime {
            clock,
            last: AtomicI64::new(i64::MIN),
        }
    }
}

#[async_trait]
impl TimeSource for LocalTime {
    async fn now(&self) -> Result<Timestamp, StoreError> {
        Ok(Timestamp::from_micros(next_after(
            &self.last,
            self.clock.now().as_micros(),
        )))
    }
}

/// `max(last + 1, candidate)`, stored as the new `last`.
fn next_after(last: &AtomicI64, candidate: i64) -> i64 {
    let mut current = last.load(Ordering::SeqCst);
    loop {
        let next = candidate.max(current.saturating_add(1));
        match last.compare_exchange_weak(current, next, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return next,
            Err(seen) => current = seen,
        }
    }
}

/// The thesis' time service: the current `GlobalTime` value.
#[derive(Debug)]
pub struct GlobalTime {
    store: SharedStore,
    clock: SharedClock,
    last: AtomicI64,
}

#[async_trait]
impl TimeSource for GlobalTime {
    async fn now(&self) -> Result<Timestamp, StoreError> {
        let value = match read_global_time(self.store.as_ref()).await? {
            Some(t) => t,
            // No updater has run yet anywhere: run listing 9 ourselves.
            None => try_update_global_time(self.store.as_ref(), self.clock.as_ref()).await?,
        };
        // Faithful to the thesis: the value may repeat (ties are then broken
        // by owner id); it only never decreases.
        Ok(Timestamp::from_micros(raise(&self.last, value.as_micros())))
    }
}

/// The non-stalling variant: `max(last + 1, local, cached GlobalTime)`.
#[derive(Debug)]
pub struct HybridTime {
    clock: SharedClock,
    cached: Arc<AtomicI64>,
    last: AtomicI64,
    demand: Arc<Demand>,
}

#[async_trait]
impl TimeSource for HybridTime {
    async fn now(&self) -> Result<Timestamp, StoreError> {
        self.demand.ask();
        let candidate = self
            .clock
            .now()
            .as_micros()
            .max(self.cached.load(Ordering::SeqCst));
        Ok(Timestamp::from_micros(next_after(&self.last, candidate)))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use lockshift_store::{ManualClock, MemoryStore, SkewedClock, Store};

    use super::*;

    #[tokio::test]
    async fn global_time_never_decreases_whoever_updates() {
        // Theorem 5: a slow updater cannot pull the value back.
        let store = MemoryStore::new();
        let fast = SkewedClock::new(ManualClock::new(Timestamp::from_micros(1_000)), 500);
        let slow = ManualClock::new(Timestamp::from_micros(1_000));
        assert_eq!(
            try_update_global_time(&store, &fast)
                .await
                .unwrap()
                .as_micros(),
            1_500
        );
        assert_eq!(
            try_update_global_time(&store, &slow)
                .await
                .unwrap()
                .as_micros(),
            1_500
        );
        // Even a write racing past the check cannot lower it: LWW on the timestamp.
        store
            .write(
                schema::GLOBAL_TIME,
                GLOBAL_TIME_ROW,
                &[CellWrite::new(GLOBAL_TIME_COLUMN, b"1200".to_vec())],
                WriteOptions::at(Timestamp::from_micros(1_200)),
            )
            .await
            .unwrap();
        assert_eq!(
            read_global_time(&store).await.unwrap().unwrap().as_micros(),
            1_500
        );
    }

    /// An idle hybrid source stops updating `GlobalTime` after
    /// [`IDLE_TICKS`] ticks with no ask; an ask answers at once and
    /// starts the updates again; the thesis' source never stops.
    #[tokio::test(start_paused = true)]
    async fn a_hybrid_updater_rests_while_no_queue_time_is_asked() {
        use lockshift_store::{FaultyStore, OpKind};
        let clock: SharedClock = Arc::new(lockshift_store::TokioClock::starting_at(
            Timestamp::from_micros(1_000_000_000),
        ));
        let every = Duration::from_millis(500);
        let counted = |source| {
            let inner: SharedStore = Arc::new(MemoryStore::new());
            let store = Arc::new(FaultyStore::new(inner, 1));
            let shared: SharedStore = store.clone();
            let settings = TimeSettings {
                source,
                update_every: every,
            };
            (store, TimeService::start(&settings, shared, clock.clone()))
        };
        let reads = |store: &FaultyStore<SharedStore>| {
            store.op_counts().get(schema::GLOBAL_TIME, OpKind::Read)
        };
        let (hybrid_store, hybrid) = counted(TimeSourceKind::Hybrid);
        let (global_store, _global) = counted(TimeSourceKind::Global);
        // Asked once at the start, then idle for five minutes.
        hybrid.source().now().await.unwrap();
        tokio::time::sleep(Duration::from_secs(300)).await;
        let rested = reads(&hybrid_store);
        assert!(
            (u64::from(IDLE_TICKS)..=u64::from(IDLE_TICKS) + 3).contains(&rested),
            "{rested} updates: the first {IDLE_TICKS} ticks after the ask, then none"
        );
        assert!(
            reads(&global_store) >= 599,
            "the thesis' updater never rests"
        );
        // Resting, an ask answers from the cache and wakes the updater.
        let before = reads(&hybrid_store);
        let asked = tokio::time::timeout(Duration::from_millis(1), hybrid.source().now())
            .await
            .expect("an ask never waits for the updater")
            .unwrap();
        assert!(asked.as_micros() >= 1_000_000_000);
        tokio::time::sleep(Duration::from_secs(10)).await;
        let woken = reads(&hybrid_store) - before;
        assert!(
            (19..=22).contains(&woken),
            "{woken} updates in 10 s after the ask"
        );
        // Asked twice a second, it never rests.
        for _ in 0..240 {
            hybrid.source().now().await.unwrap();
            tokio::time::sleep(every).await;
        }
        let busy = reads(&hybrid_store) - before - woken;
        assert!(
            (238..=242).contains(&busy),
            "{busy} updates in 120 s of asks"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn thesis_service_stalls_when_the_fastest_updater_dies_hybrid_does_not() {
        let store: SharedStore = Arc::new(MemoryStore::new());
        let base = Arc::new(ManualClock::new(Timestamp::from_micros(10_000_000)));
        // The fast node (1 s ahead) updates once, then dies.
        let fast = SkewedClock::new(base.clone(), 1_000_000);
        try_update_global_time(store.as_ref(), &fast).await.unwrap();
        let settings = |source| TimeSettings {
            source,
            update_every: Duration::from_millis(500),
        };
        let global = TimeService::start(
            &settings(TimeSourceKind::Global),
            store.clone(),
            base.clone(),
        );
        let hybrid = TimeService::start(
            &settings(TimeSourceKind::Hybrid),
            store.clone(),
            base.clone(),
        );
        tokio::time::sleep(Duration::from_millis(1)).await; // first update tick
        let (g1, h1) = (
            global.source().now().await.unwrap(),
            hybrid.source().now().await.unwrap(),
        );
        base.advance(Duration::from_millis(300));
        tokio::time::sleep(Duration::from_millis(600)).await;
        let (g2, h2) = (
            global.source().now().await.unwrap(),
            hybrid.source().now().await.unwrap(),
        );
        assert_eq!(g1, g2, "the thesis service repeats the stalled value");
        assert_eq!(g1.as_micros(), 11_000_000);
        assert!(
            h1.as_micros() >= 11_000_000,
            "hybrid is pulled up to the fleet maximum"
        );
        assert!(h2 > h1, "hybrid keeps moving");
    }

    #[tokio::test]
    async fn local_time_is_strictly_increasing_even_on_a_stopped_clock() {
        let local = LocalTime::new(Arc::new(ManualClock::new(Timestamp::from_micros(5))));
        let a = local.now().await.unwrap();
        let b = local.now().await.unwrap();
        assert!(b > a);
    }
}
