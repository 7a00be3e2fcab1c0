//! Unit tests of the queue lock on the embedded store and paused clock; the
//! contention and fault tests shared by all algorithms live in `tests/`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockshift_decide::cells::RESERVED_VALUE;
use lockshift_lock::{
    AcquireError, AcquireOptions, Binding, LeaseSettings, LockContext, LockId, Locker, NodeId,
};
use lockshift_store::{
    CellWrite, FaultyStore, MemoryStore, OpKind, RowQuery, SharedClock, SharedStore, Store,
    Timestamp, TokioClock, Ttl, WriteOptions, schema,
};

use super::*;
use lockshift_decide::queue::{mark, queue_value};

struct Fixture {
    clock: SharedClock,
    store: Arc<FaultyStore<MemoryStore>>,
    time: TimeService,
}

impl Fixture {
    fn new() -> Self {
        let clock: SharedClock = Arc::new(TokioClock::new());
        let store = Arc::new(FaultyStore::new(MemoryStore::with_clock(clock.clone()), 9));
        let time = TimeService::start(
            &TimeSettings {
                source: TimeSourceKind::Local,
                ..TimeSettings::default()
            },
            store.clone(),
            clock.clone(),
        );
        Fixture { clock, store, time }
    }

    fn locker(&self, node: &str) -> QueueLocker {
        let ctx = LockContext::new(
            self.store.clone(),
            self.clock.clone(),
            NodeId::new(node).unwrap(),
            LeaseSettings::default(),
            Some(node.len() as u64),
        )
        .unwrap();
        QueueLocker::new(Arc::new(ctx), self.time.source(), QueueSettings::default())
    }

    async fn cells(&self, table: lockshift_store::Table) -> Vec<lockshift_store::Cell> {
        self.store
            .inner()
            .read(table, "L", &RowQuery::all())
            .await
            .unwrap()
    }

    async fn columns(&self, table: lockshift_store::Table) -> Vec<String> {
        self.cells(table)
            .await
            .into_iter()
            .map(|c| c.column)
            .collect()
    }
}

fn lock() -> LockId {
    LockId::new("L").unwrap()
}

/// Lemma 1's minimum: one round of writes (queue and `main` cells
/// together), one round of reads (place and `main` together). The store
/// answers every operation after 10 ms of (virtual) latency, so the time
/// the acquisition took counts its sequential round trips.
#[tokio::test(start_paused = true)]
async fn uncontended_acquire_costs_two_round_trips_and_release_one() {
    let f = Fixture::new();
    let latency = Duration::from_millis(10);
    f.store
        .set_plan(lockshift_store::FaultPlan::latency(latency, Duration::ZERO));
    let locker = f.locker("n1");
    let started = tokio::time::Instant::now();
    let guard = locker.acquire(&lock()).await.unwrap();
    let took = started.elapsed();
    assert!(
        took >= latency * 2 && took < latency * 3,
        "two sequential round trips, took {took:?}"
    );
    let c = f.store.op_counts();
    assert_eq!(c.get(schema::QUEUE, OpKind::Write), 1, "{c}");
    assert_eq!(c.get(schema::QUEUE, OpKind::Read), 1, "{c}");
    assert_eq!(c.get(schema::MAIN, OpKind::Write), 1, "{c}");
    assert_eq!(c.get(schema::MAIN, OpKind::Read), 1, "{c}");
    assert_eq!(c.total(), 4, "{c}");
    assert_eq!(f.columns(schema::MAIN).await, [guard.owner().as_str()]);
    // The holder leaves the queue in the background (Q2): one delete, off
    // the acquire path.
    tokio::time::sleep(latency * 2).await;
    assert_eq!(f.store.op_counts().of_kind(OpKind::Delete), 1);
    assert!(f.columns(schema::QUEUE).await.is_empty());
    f.store.reset_counts();
    guard.release().await.unwrap();
    let c = f.store.op_counts();
    assert_eq!((c.total(), c.of_kind(OpKind::Delete)), (1, 1), "{c}");
    assert!(f.columns(schema::MAIN).await.is_empty());
}

/// A holder keeps one cell (`main`): renewing costs a read and a write per
/// renewal period, whatever the lock's history (the target: a node holding
/// 10 000 locks pays ≤ 2 operations per lock per period).
#[tokio::test(start_paused = true)]
async fn a_holder_renews_one_cell_two_operations_per_period() {
    let f = Fixture::new();
    let holder = f.locker("h").acquire(&lock()).await.unwrap();
    // A contended hand-off too: the next holder took over a reservation.
    let waiter = {
        let locker = f.locker("w");
        tokio::spawn(async move { locker.acquire(&lock()).await })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    holder.release().await.unwrap();
    let g = waiter.await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    f.store.reset_counts();
    let periods = 5;
    let every = LeaseSettings::default().renew_every;
    tokio::time::sleep(every * periods).await;
    let c = f.store.op_counts();
    assert_eq!(c.total(), 2 * u64::from(periods), "{c}");
    assert_eq!(c.get(schema::MAIN, OpKind::Read), u64::from(periods), "{c}");
    assert_eq!(f.columns(schema::MAIN).await, [g.owner().as_str()]);
    g.release().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn waiters_acquire_in_arrival_order() {
    let f = Fixture::new();
    let holder = f.locker("h").acquire(&lock()).await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..6 {
        let locker = f.locker(&format!("w{i}"));
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let g = locker.acquire(&lock()).await.unwrap();
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(50)).await;
            g.release().await.unwrap();
        }));
        // Arrive one after another.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    holder.release().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3, 4, 5]);
}

#[tokio::test(start_paused = true)]
async fn a_dead_head_does_not_block_past_the_stale_threshold() {
    let f = Fixture::new();
    // A waiter that enqueued and crashed: its cell is never renewed.
    f.store
        .inner()
        .write(
            schema::QUEUE,
            "L",
            &[CellWrite::new(
                "dead/0000000000000001",
                queue_value(f.clock.now(), lockshift_lock::Algorithm::Queue),
            )],
            WriteOptions::at(f.clock.now()).with_ttl(Ttl::from_secs(60).unwrap()),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = tokio::time::Instant::now();
    let guard = f.locker("live").acquire(&lock()).await.unwrap();
    let waited = started.elapsed();
    // Dead once watched standing still for `stale_after` (from the
    // waiter's first sight of it), noticed on the next poll.
    let settings = QueueSettings::default();
    let stale_after = settings.stale_after(&LeaseSettings::default());
    assert!(
        waited <= stale_after + settings.waiter_poll,
        "waited {waited:?}"
    );
    assert!(
        waited >= stale_after,
        "the dead head was respected until stale: {waited:?}"
    );
    guard.release().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_waiter_whose_queue_cell_vanishes_re_enqueues_and_still_acquires() {
    let f = Fixture::new();
    let holder = f.locker("h").acquire(&lock()).await.unwrap();
    let waiter = {
        let locker = f.locker("w");
        tokio::spawn(async move { locker.acquire(&lock()).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let queue = f
        .store
        .inner()
        .read(schema::QUEUE, "L", &RowQuery::all())
        .await
        .unwrap();
    assert_eq!(queue.len(), 1, "the holder left the queue: {queue:?}");
    let theirs = &queue[0];
    f.store
        .inner()
        .delete(
            schema::QUEUE,
            "L",
            std::slice::from_ref(&theirs.column),
            theirs.writetime,
        )
        .await
        .unwrap();
    // A waiter polling its queue position sees the loss at its next poll; a
    // waiter that has prepared the hand-off polls main instead and hears of
    // it from its lease, at the next renewal (Q3).
    tokio::time::sleep(LeaseSettings::default().renew_every + Duration::from_secs(1)).await;
    let queue = f.columns(schema::QUEUE).await;
    assert_eq!(queue.len(), 1, "re-enqueued under a new name: {queue:?}");
    assert_ne!(queue[0], theirs.column);
    holder.release().await.unwrap();
    let g = waiter.await.unwrap().unwrap();
    g.release().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn try_acquire_on_a_held_lock_returns_at_once_and_leaves_nothing() {
    let f = Fixture::new();
    let holder = f.locker("h").acquire(&lock()).await.unwrap();
    f.store.reset_counts();
    let err = f
        .locker("t")
        .try_acquire(&lock(), &Binding::unbound())
        .await
        .unwrap_err();
    assert!(err.is_held());
    assert_eq!(
        err.to_string(),
        format!("lock L is held by {}", holder.owner())
    );
    assert_eq!(
        f.store.op_counts().total(),
        1,
        "one read of main, nothing written"
    );
    // Different ids are independent.
    let other = f
        .locker("t")
        .try_acquire(&LockId::new("M").unwrap(), &Binding::unbound())
        .await
        .unwrap();
    other.release().await.unwrap();
    holder.release().await.unwrap();
    let g = f
        .locker("t")
        .try_acquire(&lock(), &Binding::unbound())
        .await
        .unwrap();
    g.release().await.unwrap();
    assert!(f.columns(schema::QUEUE).await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn try_acquire_with_a_waiter_ahead_dequeues() {
    let f = Fixture::new();
    // Someone is first in line but not yet in main.
    let ahead = "x/0000000000000001".to_string();
    f.store
        .inner()
        .write(
            schema::QUEUE,
            "L",
            &[CellWrite::new(
                ahead.clone(),
                queue_value(Timestamp::from_micros(1), lockshift_lock::Algorithm::Queue),
            )],
            WriteOptions::at(f.clock.now()),
        )
        .await
        .unwrap();
    let err = f
        .locker("t")
        .try_acquire(&lock(), &Binding::unbound())
        .await
        .unwrap_err();
    assert!(err.is_held());
    assert_eq!(
        f.columns(schema::QUEUE).await,
        [ahead],
        "own queue cell removed"
    );
}

#[tokio::test(start_paused = true)]
async fn timeout_and_cancellation_leave_the_line() {
    let f = Fixture::new();
    let holder = f.locker("h").acquire(&lock()).await.unwrap();
    let err = f
        .locker("w")
        .acquire_with(
            &lock(),
            AcquireOptions::with_timeout(Duration::from_secs(2)),
            &Binding::unbound(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, AcquireError::Timeout { .. }), "{err}");
    let token = tokio_util::sync::CancellationToken::new();
    let cancel = token.clone();
    let waiter = {
        let locker = f.locker("c");
        tokio::spawn(async move {
            locker
                .acquire_with(
                    &lock(),
                    AcquireOptions::default().cancelled_by(token),
                    &Binding::unbound(),
                )
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    cancel.cancel();
    let err = waiter.await.unwrap().unwrap_err();
    assert!(matches!(err, AcquireError::Cancelled { .. }), "{err}");
    assert!(
        f.columns(schema::QUEUE).await.is_empty(),
        "nobody is left in line (the holder left it when it took the lock)"
    );
    holder.release().await.unwrap();
}

/// R3: an invalidated waiter ends as `Cancelled` by its binder — the
/// caller's token has not fired, the binding is invalidated — and leaves
/// the line as a cancelled one does.
#[tokio::test(start_paused = true)]
async fn an_invalidated_waiter_leaves_the_line_cancelled_by_its_binder() {
    let f = Fixture::new();
    let holder = f.locker("h").acquire(&lock()).await.unwrap();
    let (_pace, pacing) = tokio::sync::watch::channel(lockshift_decide::binding::Pacing::default());
    let invalidate = tokio_util::sync::CancellationToken::new();
    let caller = tokio_util::sync::CancellationToken::new();
    let binding = Binding::bound(
        pacing,
        invalidate.clone(),
        Arc::new(lockshift_lock::LegacySightings::default()),
    );
    let waiter = {
        let locker = f.locker("i");
        let caller = caller.clone();
        let binding = binding.clone();
        tokio::spawn(async move {
            locker
                .acquire_with(
                    &lock(),
                    AcquireOptions::default().cancelled_by(caller),
                    &binding,
                )
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    invalidate.cancel();
    let err = waiter.await.unwrap().unwrap_err();
    assert!(matches!(err, AcquireError::Cancelled { .. }), "{err}");
    assert!(binding.is_invalidated(), "cancelled by its binder");
    assert!(!caller.is_cancelled(), "the caller's token is its own");
    assert!(f.columns(schema::QUEUE).await.is_empty(), "left the line");
    holder.release().await.unwrap();
}

/// A waiter watching `main` records the legacy holder in its way (a
/// binary that never registers) in its runner's sightings, through its
/// binding — and an unbound waiter records nothing anywhere.
#[tokio::test(start_paused = true)]
async fn a_bound_waiter_records_the_legacy_holder_it_sees() {
    let f = Fixture::new();
    f.store
        .inner()
        .write(
            schema::MAIN,
            "L",
            &[CellWrite::new("old-binary", b"".to_vec())],
            WriteOptions::at(f.clock.now()),
        )
        .await
        .unwrap();
    let sightings = Arc::new(lockshift_lock::LegacySightings::default());
    let (_pace, pacing) = tokio::sync::watch::channel(lockshift_decide::binding::Pacing::default());
    let binding = Binding::bound(
        pacing,
        tokio_util::sync::CancellationToken::new(),
        sightings.clone(),
    );
    let err = f
        .locker("w")
        .acquire_with(
            &lock(),
            AcquireOptions::with_timeout(Duration::from_secs(2)),
            &binding,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, AcquireError::Timeout { .. }), "{err}");
    let seen = sightings.last_seen().expect("the legacy holder was seen");
    assert!(seen <= f.clock.now());
}

#[tokio::test(start_paused = true)]
async fn fencing_tokens_grow_across_holders() {
    let f = Fixture::new();
    let store: SharedStore = f.store.clone();
    let mut last = 0;
    for i in 0..5 {
        let g = f.locker(&format!("n{i}")).acquire(&lock()).await.unwrap();
        let token = g.fencing_token().await.unwrap();
        assert!(token > last, "token {token} after {last}");
        last = token;
        g.release().await.unwrap();
    }
    assert!(
        store
            .read(schema::MAIN, "L", &RowQuery::all())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(start_paused = true)]
async fn the_next_waiter_reserves_main_and_takes_over_without_writing() {
    let f = Fixture::new();
    let holder = f.locker("h").acquire(&lock()).await.unwrap();
    let waiter = {
        let locker = f.locker("w");
        tokio::spawn(async move { locker.acquire(&lock()).await })
    };
    // Half-way between two rewrites of the waiter's cells (every second,
    // lease L6): the hand-off below meets none of them.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let main = f.cells(schema::MAIN).await;
    assert_eq!(
        main.len(),
        2,
        "the next waiter reserved its main cell: {main:?}"
    );
    let reservation = main
        .iter()
        .find(|c| c.column != holder.owner().as_str())
        .unwrap();
    assert_eq!(
        reservation.value, RESERVED_VALUE,
        "a reservation is marked as one"
    );
    f.store.reset_counts();
    holder.release().await.unwrap();
    let g = waiter.await.unwrap().unwrap();
    // The holder's two deletes; the waiter only read main to take over (Q1:
    // that read, after its earlier write, shows its cell alone) and then
    // re-marks its cell a holding in the background: one write, not on the
    // acquire path.
    tokio::time::sleep(Duration::from_millis(10)).await;
    let c = f.store.op_counts();
    assert_eq!(c.get(schema::QUEUE, OpKind::Write), 0, "{c}");
    assert_eq!(c.get(schema::MAIN, OpKind::Write), 1, "{c}");
    let main = f.cells(schema::MAIN).await;
    assert_eq!(main.len(), 1);
    assert_eq!(main[0].column, g.owner().as_str());
    assert_eq!(
        main[0].value, b"queue",
        "the claim re-marked the cell a holding"
    );
    g.release().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_waiter_after_a_lone_reservation_does_not_wait_for_ever() {
    // A reservation left alone in main (its holder gone) looks like a
    // holder; a waiter that reserved behind it withdraws when it sees a
    // stranger, so one of them always gets through.
    let f = Fixture::new();
    let holder = f.locker("h").acquire(&lock()).await.unwrap();
    let mut waiters = Vec::new();
    for i in 0..3 {
        let locker = f.locker(&format!("w{i}"));
        waiters.push(tokio::spawn(async move {
            let g = locker.acquire(&lock()).await.unwrap();
            tokio::time::sleep(Duration::from_millis(30)).await;
            g.release().await.unwrap();
        }));
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    holder.release().await.unwrap();
    for w in waiters {
        tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .expect("every waiter gets the lock")
            .unwrap();
    }
    assert!(f.columns(schema::MAIN).await.is_empty());
    assert!(f.columns(schema::QUEUE).await.is_empty());
}

/// Holds the `main` writes of `RESERVED_VALUE` by owners of one node until
/// opened: a reservation that takes its time to land. Records every `main`
/// write (column, value) in order.
#[derive(Debug)]
struct GatedStore {
    inner: MemoryStore,
    node: String,
    open: tokio::sync::watch::Sender<bool>,
    held: std::sync::atomic::AtomicUsize,
    main_writes: Mutex<Vec<(String, Vec<u8>)>>,
}

impl GatedStore {
    fn new(clock: SharedClock, gated_node: &str) -> Self {
        GatedStore {
            inner: MemoryStore::with_clock(clock),
            node: gated_node.into(),
            open: tokio::sync::watch::channel(false).0,
            held: Default::default(),
            main_writes: Mutex::default(),
        }
    }

    /// A queue locker of `node` over this store, on `clock`, and the time
    /// service it names queue cells with (keep it alive).
    fn locker(self: &Arc<Self>, node: &str, clock: SharedClock) -> (QueueLocker, TimeService) {
        self.locker_with(node, clock, QueueSettings::default())
    }

    fn locker_with(
        self: &Arc<Self>,
        node: &str,
        clock: SharedClock,
        settings: QueueSettings,
    ) -> (QueueLocker, TimeService) {
        let shared: SharedStore = self.clone();
        let time = TimeService::start(
            &TimeSettings {
                source: TimeSourceKind::Local,
                ..TimeSettings::default()
            },
            shared.clone(),
            clock.clone(),
        );
        let ctx = LockContext::new(
            shared,
            clock,
            NodeId::new(node).unwrap(),
            LeaseSettings::default(),
            Some(node.len() as u64),
        )
        .unwrap();
        (
            QueueLocker::new(Arc::new(ctx), time.source(), settings),
            time,
        )
    }

    fn main_values_written_by(&self, node: &str) -> Vec<Vec<u8>> {
        self.main_writes
            .lock()
            .unwrap()
            .iter()
            .filter(|(column, _)| column.starts_with(node))
            .map(|(_, value)| value.clone())
            .collect()
    }
}

#[async_trait::async_trait]
impl Store for GatedStore {
    async fn call(
        &self,
        request: lockshift_store::Request<'_>,
    ) -> Result<lockshift_store::Response, lockshift_store::StoreError> {
        if let (schema::MAIN, lockshift_store::Op::Write(lockshift_store::WriteOp { cells, .. })) =
            (request.table, request.op)
        {
            self.main_writes
                .lock()
                .unwrap()
                .extend(cells.iter().map(|c| (c.column.clone(), c.value.clone())));
            let gated = cells
                .iter()
                .any(|c| c.value == RESERVED_VALUE && c.column.starts_with(&self.node));
            if gated {
                self.held.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut open = self.open.subscribe();
                let _ = open.wait_for(|o| *o).await;
            }
        }
        self.inner.call(request).await
    }
    fn describe(&self) -> String {
        "gated".into()
    }
}

/// Targeted: reserving is check-then-act, so two waiters
/// can reserve at once. H holds; B is next and reserves, but its write takes
/// its time; C arrives with a clock half a second slow, so its queue cell
/// sorts between H's and B's — C is now next, sees H alone in `main` and
/// reserves too. When H leaves, `main` holds two reservations. Before Q5's
/// rule each waited for the other for ever; now the one not first in line
/// (B) withdraws, C takes the lock, then B.
#[tokio::test(start_paused = true)]
async fn two_reservations_made_at_once_resolve_by_queue_order() {
    let clock: SharedClock = Arc::new(TokioClock::new());
    let store = Arc::new(GatedStore::new(clock.clone(), "b/"));
    let locker = |node: &str, clock: SharedClock| store.locker(node, clock);
    let slow: SharedClock = Arc::new(lockshift_store::SkewedClock::new(clock.clone(), -500_000));
    let ((h, _th), (b, _tb), (c, _tc)) = (
        locker("h", clock.clone()),
        locker("b", clock.clone()),
        locker("c", slow),
    );
    let held = h.acquire(&lock()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let within = AcquireOptions::with_timeout(Duration::from_secs(30));
    let b_task = tokio::spawn({
        let opts = within.clone();
        async move { b.acquire_with(&lock(), opts, &Binding::unbound()).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        store.held.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "B is writing its reservation"
    );
    let c_task =
        tokio::spawn(async move { c.acquire_with(&lock(), within, &Binding::unbound()).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    store.open.send_replace(true);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let main = store
        .inner
        .read(schema::MAIN, "L", &RowQuery::all())
        .await
        .unwrap();
    assert_eq!(main.len(), 3, "H holds, B and C both reserved: {main:?}");
    assert_eq!(
        main.iter().filter(|c| c.value == RESERVED_VALUE).count(),
        2,
        "{main:?}"
    );
    held.release().await.unwrap();
    let first = c_task
        .await
        .unwrap()
        .expect("C, first in line, takes the lock");
    assert!(!b_task.is_finished(), "B waits after C");
    first.release().await.unwrap();
    let second = b_task.await.unwrap().expect("then B");
    second.release().await.unwrap();
}

/// Q6: the waiter second in line writes its `main` cell early, reserved
/// behind the first; the first takes the lock beside it (a cell naming it
/// is not in its way); the second takes over on a read of the queue and a
/// read of `main` — no write on its way in. Holds are short, as where the
/// reservation pays off (a store round trip of 10 ms, holds of 1 ms).
#[tokio::test(start_paused = true)]
async fn the_second_in_line_reserves_behind_the_first_and_takes_over_reading() {
    let f = Fixture::new();
    let latency = Duration::from_millis(10);
    f.store
        .set_plan(lockshift_store::FaultPlan::latency(latency, Duration::ZERO));
    let holder = f.locker("h").acquire(&lock()).await.unwrap();
    let spawn = |node: &str| {
        let locker = f.locker(node);
        tokio::spawn(async move { locker.acquire(&lock()).await })
    };
    let w1 = spawn("w1");
    tokio::time::sleep(latency * 3).await;
    let w2 = spawn("w2");
    tokio::time::sleep(latency * 5).await;
    let main = f.cells(schema::MAIN).await;
    assert_eq!(main.len(), 3, "holder, w1 and w2: {main:?}");
    let first = main
        .iter()
        .find(|c| c.column.starts_with("w1/"))
        .expect("w1 reserved");
    let second = main
        .iter()
        .find(|c| c.column.starts_with("w2/"))
        .expect("w2 reserved");
    assert_eq!(
        first.value, RESERVED_VALUE,
        "the first in line: a plain reservation"
    );
    let (algorithm, named) =
        lockshift_decide::cells::reserved_behind_of(&second.value).expect("a reservation behind");
    assert_eq!(algorithm, lockshift_lock::Algorithm::Queue);
    assert!(
        named.starts_with(&format!("{}@", first.column)),
        "the second names the first (its mark: owner id and arrival): {named}"
    );
    holder.release().await.unwrap();
    let g1 = tokio::time::timeout(latency * 10, w1)
        .await
        .expect("w1 takes the lock beside w2's reservation")
        .unwrap()
        .unwrap();
    // A hold shorter than a round trip: w2 learns it is first only after
    // g1's release has landed.
    tokio::time::sleep(Duration::from_millis(1)).await;
    f.store.reset_counts();
    g1.release().await.unwrap();
    let g2 = tokio::time::timeout(latency * 10, w2)
        .await
        .expect("w2 takes over")
        .unwrap()
        .unwrap();
    tokio::time::sleep(latency * 2).await;
    let c = f.store.op_counts();
    // g1's release deletes its `main` cell; w2 wrote nothing to come in —
    // one `main` write, its re-marking, off the acquire path.
    assert_eq!(c.get(schema::QUEUE, OpKind::Write), 0, "{c}");
    assert_eq!(c.get(schema::MAIN, OpKind::Write), 1, "{c}");
    let main = f.cells(schema::MAIN).await;
    assert_eq!(main.len(), 1, "{main:?}");
    assert_eq!(main[0].value, b"queue", "re-marked a holding");
    g2.release().await.unwrap();
}

/// Q6's other half: a cell that only *looks* dead (not renewed for
/// `stale_after`) may be a paused waiter's, which would take the lock
/// beside a cell naming it once it resumes. So a waiter reserved behind it
/// never claims on that reservation: it enters plainly — a `RESERVED_VALUE`
/// write, then a read — and only then takes the lock.
#[tokio::test(start_paused = true)]
async fn a_reservation_behind_a_dead_looking_waiter_is_not_claimed() {
    let clock: SharedClock = Arc::new(TokioClock::new());
    let store = Arc::new(GatedStore::new(clock.clone(), "nobody/"));
    let paused = lockshift_lock::OwnerId::from_stored("x/0000000000000001");
    let paused_at = clock.now();
    store
        .inner
        .write(
            schema::QUEUE,
            "L",
            &[CellWrite::new(
                paused.as_str(),
                queue_value(paused_at, lockshift_lock::Algorithm::Queue),
            )],
            WriteOptions::at(clock.now()).with_ttl(Ttl::from_secs(120).unwrap()),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1)).await;
    // x's cell looks dead 5 ms after it was written — sooner than the
    // reservation's own bound (`head_poll`, 10 ms, on an instant store), so
    // the waiter still holds its reservation behind x when it finds itself
    // first past x's dead-looking cell.
    let settings = QueueSettings {
        stale_after: Some(Duration::from_millis(5)),
        ..QueueSettings::default()
    };
    let (w, _time) = store.locker_with("w", clock.clone(), settings);
    let task = tokio::spawn(async move { w.acquire(&lock()).await });
    let arrival = u64::try_from(paused_at.as_micros()).unwrap();
    let behind_x = lockshift_decide::cells::reserved_behind(
        lockshift_lock::Algorithm::Queue,
        &mark(paused.as_str(), arrival),
    );
    let guard = tokio::time::timeout(Duration::from_secs(120), task)
        .await
        .expect("x's cell is skipped once stale")
        .unwrap()
        .unwrap();
    let written = store.main_values_written_by("w/");
    assert!(
        written.contains(&behind_x),
        "second in line after x: reserved behind it"
    );
    let reserved_at = written.iter().rposition(|v| *v == behind_x);
    assert_eq!(
        reserved_at
            .and_then(|i| written.get(i + 1))
            .map(Vec::as_slice),
        Some(RESERVED_VALUE),
        "entered plainly before holding: {:?}",
        written
            .iter()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect::<Vec<_>>()
    );
    guard.release().await.unwrap();
}

/// One node's view of a shared store: it counts what the node sends (a
/// point read — one cell from a column on, a renewal's read — apart from a
/// row read, a poll's), and once frozen answers nothing ever again, as if
/// the process had been killed: its cells stay as last written, nothing
/// of its reaches the store.
#[derive(Debug)]
struct NodeTap {
    inner: Arc<MemoryStore>,
    frozen: std::sync::atomic::AtomicBool,
    /// (table, kind, a point read).
    ops: Mutex<Vec<(lockshift_store::Table, OpKind, bool)>>,
}

impl NodeTap {
    fn new(inner: Arc<MemoryStore>) -> Arc<Self> {
        Arc::new(NodeTap {
            inner,
            frozen: Default::default(),
            ops: Mutex::default(),
        })
    }

    fn freeze(&self) {
        self.frozen.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    async fn gate(&self, table: lockshift_store::Table, kind: OpKind, point: bool) {
        if self.frozen.load(std::sync::atomic::Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        self.ops.lock().unwrap().push((table, kind, point));
    }

    fn count(&self, table: lockshift_store::Table, kind: OpKind, point: Option<bool>) -> usize {
        self.ops
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, k, p)| *t == table && *k == kind && point.is_none_or(|want| *p == want))
            .count()
    }

    fn reset(&self) {
        self.ops.lock().unwrap().clear();
    }

    fn locker(self: &Arc<Self>, node: &str, clock: SharedClock) -> (QueueLocker, TimeService) {
        let shared: SharedStore = self.clone();
        let time = TimeService::start(
            &TimeSettings {
                source: TimeSourceKind::Local,
                ..TimeSettings::default()
            },
            shared.clone(),
            clock.clone(),
        );
        let ctx = LockContext::new(
            shared,
            clock,
            NodeId::new(node).unwrap(),
            LeaseSettings::default(),
            Some(node.len() as u64),
        )
        .unwrap();
        (
            QueueLocker::new(Arc::new(ctx), time.source(), QueueSettings::default()),
            time,
        )
    }
}

#[async_trait::async_trait]
impl Store for NodeTap {
    async fn call(
        &self,
        request: lockshift_store::Request<'_>,
    ) -> Result<lockshift_store::Response, lockshift_store::StoreError> {
        let point = match request.op {
            lockshift_store::Op::Read(lockshift_store::ReadOp { query, .. }) => {
                query.start_column.is_some() && query.limit.is_some_and(|n| n.get() == 1)
            }
            _ => false,
        };
        if request.kind() != OpKind::Scan {
            self.gate(request.table, request.kind(), point).await;
        }
        self.inner.call(request).await
    }
    fn describe(&self) -> String {
        "tap".into()
    }
}

/// Issue 19 (A): a waiter killed while it waits — here the first in line,
/// its reservation in `main` beside the holder's cell, and its queue cell —
/// holds the next waiter up for at most the waiting TTL after the holder
/// leaves, not for a lease TTL: its cells carry the waiting TTL (4 s) and
/// expire once nobody rewrites them.
#[tokio::test(start_paused = true)]
async fn a_killed_waiter_holds_the_next_up_for_the_waiting_ttl_at_most() {
    let clock: SharedClock = Arc::new(TokioClock::new());
    let store = Arc::new(MemoryStore::with_clock(clock.clone()));
    let (h, d, w) = (
        NodeTap::new(store.clone()),
        NodeTap::new(store.clone()),
        NodeTap::new(store.clone()),
    );
    let ((h, _th), (dl, _td), (wl, _tw)) = (
        h.locker("h", clock.clone()),
        d.locker("d", clock.clone()),
        w.locker("w", clock.clone()),
    );
    let held = h.acquire(&lock()).await.unwrap();
    let _doomed = tokio::spawn(async move { dl.acquire(&lock()).await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let next = tokio::spawn(async move { wl.acquire(&lock()).await });
    // A long hold: both settle into their slowest polling.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let mut d_cells = store
        .read(schema::MAIN, "L", &RowQuery::all())
        .await
        .unwrap();
    d_cells.extend(
        store
            .read(schema::QUEUE, "L", &RowQuery::all())
            .await
            .unwrap(),
    );
    d_cells.retain(|c| c.column.starts_with("d/"));
    assert_eq!(
        d_cells.len(),
        2,
        "d's reservation and queue cell: {d_cells:?}"
    );
    let waiting_ttl = QueueSettings::default().waiting_ttl;
    for c in &d_cells {
        assert!(
            c.ttl.is_some_and(|t| t <= waiting_ttl),
            "a waiting cell carries the waiting TTL: {c:?}"
        );
    }
    d.freeze();
    let left = tokio::time::Instant::now();
    held.release().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(60), next)
        .await
        .expect("the next waiter gets the lock within the lease TTL")
        .unwrap()
        .unwrap();
    let delay = left.elapsed();
    println!("the next waiter took the lock {delay:?} after the holder left (virtual time)");
    assert!(
        delay <= waiting_ttl + QueueSettings::default().waiter_poll * 2,
        "held up {delay:?} by a dead waiter's cells"
    );
    assert!(
        store
            .read(schema::MAIN, "L", &RowQuery::all())
            .await
            .unwrap()
            .iter()
            .all(|c| !c.column.starts_with("d/")),
        "the dead waiter's reservation expired"
    );
    guard.release().await.unwrap();
}

/// Issue 19 (A): the cost of short-lived waiting cells during a long hold.
/// A waiter's polls of its own rows refresh its cells — one write per
/// waiting period, no read of their own; only the cell a waiter does not
/// read (the first waiter's queue cell: it watches `main`) is renewed
/// with a read and a write.
#[tokio::test(start_paused = true)]
async fn waiting_cells_are_refreshed_on_the_back_of_the_waiters_own_reads() {
    let clock: SharedClock = Arc::new(TokioClock::new());
    let store = Arc::new(MemoryStore::with_clock(clock.clone()));
    let (h, taps) = (
        NodeTap::new(store.clone()),
        [
            NodeTap::new(store.clone()),
            NodeTap::new(store.clone()),
            NodeTap::new(store.clone()),
        ],
    );
    let (h, _th) = h.locker("h", clock.clone());
    let held = h.acquire(&lock()).await.unwrap();
    let mut waiting = Vec::new();
    let mut times = Vec::new();
    for (i, tap) in taps.iter().enumerate() {
        let (locker, time) = tap.locker(&format!("w{i}"), clock.clone());
        times.push(time);
        waiting.push(tokio::spawn(async move { locker.acquire(&lock()).await }));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(20)).await;
    taps.iter().for_each(|t| t.reset());
    let window = Duration::from_secs(10);
    tokio::time::sleep(window).await;
    let periods = (window.as_secs_f64()
        / QueueSettings::default().waiting_renew_every.as_secs_f64()) as usize;
    for (i, tap) in taps.iter().enumerate() {
        let (queue, main) = (schema::QUEUE, schema::MAIN);
        let polls = tap.count(queue, OpKind::Read, Some(false))
            + tap.count(main, OpKind::Read, Some(false));
        let renewal_reads =
            tap.count(queue, OpKind::Read, Some(true)) + tap.count(main, OpKind::Read, Some(true));
        let writes = tap.count(queue, OpKind::Write, None) + tap.count(main, OpKind::Write, None);
        println!(
            "waiter {i} over {window:?}: {polls} polls, {renewal_reads} renewal reads, {writes} writes"
        );
        // Each waiting cell: about one write per period (refreshed once
        // three quarters of a period old, on the next poll).
        let cells = if i == 0 { 2 } else { 1 };
        assert!(
            writes >= cells * periods * 3 / 4 && writes <= cells * periods * 3 / 2,
            "waiter {i}: {writes} writes for {cells} cell(s) over {periods} periods"
        );
        // No read of their own for cells the waiter polls: only the first
        // waiter's queue cell (it polls `main`) costs a renewal read.
        let expected_renewal_reads = if i == 0 { periods } else { 0 };
        assert!(
            renewal_reads <= expected_renewal_reads + 1
                && renewal_reads + 1 >= expected_renewal_reads,
            "waiter {i}: {renewal_reads} renewal reads"
        );
        // Polls stay what they were: at most one per `waiter_poll`.
        assert!(
            polls <= 4 * window.as_secs() as usize + 2,
            "waiter {i}: {polls} polls"
        );
    }
    held.release().await.unwrap();
    for task in waiting {
        let g = task.await.unwrap().unwrap();
        g.release().await.unwrap();
    }
}

/// A waiter tells its watcher whom it waits for and how long the holder's
/// cell has left, both from its own reads of `main` — no read is made for
/// them.
#[tokio::test(start_paused = true)]
async fn a_waiter_reports_how_long_the_holders_cell_has_left() {
    let f = Fixture::new();
    let holder = f.locker("h").acquire(&lock()).await.unwrap();
    let (watch, seen) = tokio::sync::watch::channel(lockshift_lock::WaitingFor::default());
    let waiter = {
        let locker = f.locker("w");
        let options = AcquireOptions {
            watch: Some(Arc::new(watch)),
            ..AcquireOptions::default()
        };
        tokio::spawn(async move {
            locker
                .acquire_with(&lock(), options, &Binding::unbound())
                .await
        })
    };
    tokio::time::sleep(Duration::from_secs(5)).await;
    let now = seen.borrow().clone();
    assert_eq!(now.holder.as_deref(), Some(holder.owner().as_str()));
    let ttl = now
        .holder_ttl
        .expect("a read of main showed the holder's TTL");
    let full = LeaseSettings::default().lease_ttl;
    // Renewed every `renew_every` (10 s): 5 s after the hold began, the
    // cell has 55–60 s left.
    assert!(
        ttl <= full && ttl + Duration::from_secs(6) >= full,
        "{ttl:?} of {full:?}"
    );
    holder.release().await.unwrap();
    waiter.await.unwrap().unwrap().release().await.unwrap();
}
