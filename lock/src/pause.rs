//! Pauses shorter than tokio's timer can time.
//!
//! Tokio's timer counts whole milliseconds: a sleep ends at the first tick
//! at or after its deadline, so a pause of 0.25 ms lasts up to 2 ms — four
//! to eight round trips of a Cassandra node answering in 0.25 ms. A waiter
//! that polls once per round trip would then poll once per tick, and every
//! hand-off would round up to it.
//!
//! [`sleep_until`] ends a pause at its deadline to within the operating
//! system's timer slack (about 50 µs on Linux) instead: a pause shorter than
//! [`FINE_BELOW`] is also registered with one process-wide thread that
//! sleeps until the earliest deadline it holds and wakes the waiting tasks
//! (`std::sync::mpsc::Receiver::recv_timeout`, a futex wait with a
//! nanosecond timeout). Longer pauses are tokio's alone: a tick late is
//! under half of them.
//!
//! # What it costs
//!
//! One thread for the process, asleep unless a short pause is due; one
//! channel message and one wake-up per short pause. No pause is shorter
//! than the caller asked, so the store sees no more requests than the
//! polling policy intends (`lockshift_decide::waiter::poll_policy`, with its
//! `min_poll` floor).
//!
//! # Paused time
//!
//! Tests run on tokio's paused clock, which only moves when the runtime is
//! idle, and seeded simulations must replay exactly, operation for
//! operation. A ring from a real-time thread wakes its task at a moment
//! that depends on how fast the machine is: the task is polled again, the
//! run queue's order changes, and so does the schedule. So the fine timer
//! is never asked on a paused clock (`clock_is_frozen`): the pause is
//! tokio's alone there, whatever the machine's load. On a real clock the
//! fine ring only wakes a pause early; the pause ends once tokio's clock
//! shows the deadline passed, which on a real clock is the same moment.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::OnceLock;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

/// Pauses shorter than this also get the fine timer: tokio's tick of 1 ms
/// (a sleep lasts up to one tick more than asked) is then more than half
/// of them.
pub const FINE_BELOW: Duration = Duration::from_millis(2);

/// Sleeps until `deadline`, ending within the system's timer slack of it
/// for short pauses (see the module docs).
pub async fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline <= now {
        return;
    }
    if deadline - now >= FINE_BELOW || clock_is_frozen(now) {
        tokio::time::sleep_until(deadline).await;
        return;
    }
    let Some(woken) = fine_wake(deadline.into_std()) else {
        tokio::time::sleep_until(deadline).await;
        return;
    };
    tokio::select! {
        biased;
        () = tokio::time::sleep_until(deadline) => {}
        _ = woken => {
            // The ring may come a little before tokio's clock shows the
            // deadline (the two clocks read apart): tokio's timer decides.
            if Instant::now() < deadline {
                tokio::time::sleep_until(deadline).await;
            }
        }
    }
}

/// Whether tokio's clock (read as `now`) is paused: it stands still while
/// the real clock moves. Decided by reading the real clock until it has
/// moved (tens of nanoseconds) and tokio's again: a running tokio clock
/// has moved with it, a paused one has not (only this thread could move
/// it, and this thread is here). The answer depends on no timing: a loaded
/// machine gives the same answer as an idle one, so a seeded simulation
/// takes the same path in every run (issue 46: the earlier test compared
/// the two clocks' distance to a threshold, and a paused clock read a
/// moment after it was paused passed for a real one).
fn clock_is_frozen(now: Instant) -> bool {
    let real = std::time::Instant::now();
    while std::time::Instant::now() == real {
        std::hint::spin_loop();
    }
    Instant::now() == now
}

/// Sleeps for `d` (see [`sleep_until`]).
pub async fn sleep(d: Duration) {
    sleep_until(Instant::now() + d).await;
}

type PauseRequest = (std::time::Instant, oneshot::Sender<()>);

/// The timer thread drops rings nobody waits for once it holds more (and
/// then once it holds twice what was left, so pruning stays linear).
const PRUNE_ABOVE: usize = 1024;

/// Asks the timer thread to ring at `at`; `None` if the thread could not
/// be started (the caller falls back to tokio's timer).
fn fine_wake(at: std::time::Instant) -> Option<oneshot::Receiver<()>> {
    static TIMER: OnceLock<Option<Sender<PauseRequest>>> = OnceLock::new();
    let sender = TIMER.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("lockshift-fine-timer".into())
            .spawn(move || run(&rx))
            .ok()
            .map(|_| tx)
    });
    let (tx, rx) = oneshot::channel();
    sender.as_ref()?.send((at, tx)).ok()?;
    Some(rx)
}

/// One pending ring, ordered by its instant only.
struct Due(std::time::Instant, oneshot::Sender<()>);

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

/// The timer thread: rings every due request, then sleeps until the next
/// one or a new request. Ends when every sender is gone (never, in
/// practice: the sender is process-wide).
fn run(requests: &Receiver<PauseRequest>) {
    let mut pending: BinaryHeap<Reverse<Due>> = BinaryHeap::new();
    let mut prune_above = PRUNE_ABOVE;
    loop {
        let now = std::time::Instant::now();
        while pending.peek().is_some_and(|Reverse(d)| d.0 <= now) {
            if let Some(Reverse(Due(_, ring))) = pending.pop() {
                // The pause may have ended another way: nobody listens then.
                let _ = ring.send(());
            }
        }
        let next = match pending.peek() {
            Some(Reverse(d)) => requests.recv_timeout(d.0.saturating_duration_since(now)),
            None => requests.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match next {
            Ok((at, ring)) => {
                pending.push(Reverse(Due(at, ring)));
                // Pauses that ended another way (tokio's timer, a deadline,
                // a cancellation) leave their ring in the heap; on a paused clock
                // their instants may lie far ahead of the real one. Drop
                // them before they pile up.
                if pending.len() > prune_above {
                    pending.retain(|Reverse(d)| !d.1.is_closed());
                    prune_above = PRUNE_ABOVE.max(pending.len() * 2);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    /// On a real clock a short pause never ends before its deadline, and
    /// the timer thread serves pauses from several tasks at once. (How
    /// close to the deadline it ends is a timing matter: the benchmark
    /// shows it, in the hand-off on a fast store.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn short_pauses_never_end_early_on_a_real_clock() {
        let mut tasks = Vec::new();
        for i in 0..20u32 {
            tasks.push(tokio::spawn(async move {
                let d = US * (100 + 50 * i);
                let started = std::time::Instant::now();
                sleep(d).await;
                (d, started.elapsed())
            }));
        }
        for t in tasks {
            let (asked, lasted) = t.await.unwrap();
            assert!(lasted >= asked, "asked {asked:?}, lasted {lasted:?}");
        }
    }

    /// The timer thread rings for a short pause, at or after its instant —
    /// the part tokio's timer does not do. (A broken thread would leave
    /// pauses on tokio's timer alone, and every other test here green.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_timer_thread_rings_at_or_after_the_instant_asked() {
        let at = std::time::Instant::now() + US * 300;
        let ring = fine_wake(at).expect("the timer thread starts");
        tokio::time::timeout(Duration::from_secs(10), ring)
            .await
            .expect("the timer thread rang")
            .expect("the ring was sent, not dropped");
        assert!(std::time::Instant::now() >= at);
    }

    /// On a paused clock a pause lasts in tokio's time exactly what a
    /// plain tokio sleep lasts (its tick included), and tasks wake in
    /// deadline order.
    #[tokio::test(start_paused = true)]
    async fn on_a_paused_clock_pauses_keep_tokio_time() {
        for d in [US * 300, US * 1500, US * 1999] {
            let start = Instant::now();
            tokio::time::sleep(d).await;
            let plain = Instant::now() - start;
            let start = Instant::now();
            sleep(d).await;
            assert_eq!(Instant::now() - start, plain, "{d:?}");
        }
        assert_eq!(wake_order(false).await, wake_order(true).await);
    }

    /// The order in which tasks pausing for various lengths wake, with
    /// this module's sleep or tokio's.
    async fn wake_order(fine: bool) -> Vec<usize> {
        let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (i, d) in [US * 1900, US * 300, US * 1200, US * 2500, US * 50]
            .into_iter()
            .enumerate()
        {
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                if fine {
                    sleep(d).await;
                } else {
                    tokio::time::sleep(d).await;
                }
                order.lock().unwrap().push(i);
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        order.lock().unwrap().clone()
    }

    /// A clock paused a moment ago is known for paused at once, however
    /// close the two clocks still read (the check this replaced compared
    /// their distance with 2 ms, and took this one for real: a run's first
    /// short pauses then depended on the machine's speed). A running
    /// clock is known for running.
    #[tokio::test(start_paused = true)]
    async fn a_clock_paused_a_moment_ago_is_known_paused() {
        assert!(clock_is_frozen(Instant::now()));
        tokio::time::advance(Duration::from_micros(10)).await;
        assert!(clock_is_frozen(Instant::now()));
    }

    #[tokio::test]
    async fn a_running_clock_is_not_taken_for_paused() {
        for _ in 0..1000 {
            assert!(!clock_is_frozen(Instant::now()));
        }
    }

    /// Long pauses are tokio's own.
    #[tokio::test(start_paused = true)]
    async fn long_pauses_are_tokios() {
        let start = Instant::now();
        sleep(Duration::from_millis(30)).await;
        assert_eq!(Instant::now() - start, Duration::from_millis(30));
    }
}
