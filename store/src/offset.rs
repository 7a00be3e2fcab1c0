//! Measuring a clock against a coordinator's: the I/O of
//! `lockshift_decide::offset`, which says what the samples mean
//! (docs/design.md §4b, C1).
//!
//! One sample is one [`Store::server_time_via`] — a single-row read of
//! `system.local`, no table of lockshift's — between two readings of the
//! process's clock; [`measure_offset`] takes several, one after another
//! (samples sent at once would queue behind each other and inflate each
//! other's round trips), and keeps the reading of least round trip.

use lockshift_decide::offset::{ClockReading, OffsetSample, filter};

use crate::api::Store;
use crate::clock::Clock;
use crate::error::StoreError;
use crate::route::Route;

/// What one measurement found.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// The samples that were answered, in the order taken.
    pub samples: Vec<OffsetSample>,
    /// The reading they give ([`filter`]: the least round trip); `None`
    /// when none was answered, or the clock stepped back during each.
    pub reading: Option<ClockReading>,
    /// How many requests failed.
    pub failures: usize,
    /// The last failure, if any.
    pub last_error: Option<StoreError>,
    /// The deadline came with a request unanswered
    /// ([`measure_offset_until`]).
    pub timed_out: bool,
}

impl Measurement {
    /// Why there is no reading, in words (`None` when there is one).
    pub fn why_none(&self) -> Option<String> {
        if self.reading.is_some() {
            return None;
        }
        Some(match (&self.last_error, self.samples.len()) {
            (Some(e), 0) => format!("no clock reading was answered: {e}"),
            (_, n) => format!(
                "this process's clock stepped back during every one of the {n} clock readings \
                 answered"
            ),
        })
    }
}

/// Takes `samples` readings of the clock of the coordinator `route`
/// reaches, one after another, each between two readings of `clock`, and
/// keeps the one of least round trip. Requests that fail are counted and
/// skipped: a measurement never fails as a whole, it may only come back
/// without a reading.
///
/// # Cancel safety
/// Cancel safe: nothing is written.
pub async fn measure_offset(
    store: &dyn Store,
    clock: &dyn Clock,
    route: &Route,
    samples: usize,
) -> Measurement {
    measure_offset_until(store, clock, route, samples, None).await
}

/// [`measure_offset`], taking no sample after `deadline` and giving the
/// one in flight at it up: what was answered by then gives the reading (a
/// slow coordinator is read from fewer samples, with the error its round
/// trips allow, rather than not at all).
///
/// # Cancel safety
/// Cancel safe: nothing is written.
pub async fn measure_offset_until(
    store: &dyn Store,
    clock: &dyn Clock,
    route: &Route,
    samples: usize,
    deadline: Option<tokio::time::Instant>,
) -> Measurement {
    let mut answered = Vec::with_capacity(samples);
    let mut failures = 0;
    let mut last_error = None;
    let mut timed_out = false;
    for _ in 0..samples {
        let sent = clock.now();
        let read = store.server_time_via(route);
        let result = match deadline {
            Some(at) => match tokio::time::timeout_at(at, read).await {
                Ok(result) => result,
                Err(_) => {
                    failures += 1;
                    timed_out = true;
                    break;
                }
            },
            None => read.await,
        };
        match result {
            Ok(server) => answered.push(OffsetSample {
                sent,
                received: clock.now(),
                server,
            }),
            Err(e) => {
                failures += 1;
                last_error = Some(e);
            }
        }
    }
    Measurement {
        reading: filter(&answered),
        samples: answered,
        failures,
        last_error,
        timed_out,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::{
        Datacenter, FaultPlan, FaultyStore, ManualClock, MemoryStore, SharedStore, SkewedClock,
        StoreErrorKind, Timestamp, TokioClock,
    };

    fn dc(name: &str) -> Datacenter {
        Datacenter::new(name).unwrap()
    }

    /// Against the embedded store with a node whose clock is off, and a
    /// process whose clock is off, through 2–6 ms of latency: each node's
    /// offset from this process is read within its bound, and the error
    /// is about half the least round trip.
    #[tokio::test(start_paused = true)]
    async fn a_skewed_node_and_a_skewed_process_are_read_within_the_bound() {
        let cluster = Arc::new(TokioClock::starting_at(Timestamp::from_micros(
            1_767_225_600_123_456,
        )));
        let memory = MemoryStore::with_clock(cluster.clone())
            .with_datacenters(vec![(dc("dc1"), 1), (dc("dc2"), 1)], 7);
        memory.skew_node_clock(&dc("dc2"), 3_000_000);
        let hosts = crate::Store::topology(&memory).hosts;
        assert_eq!(
            hosts.iter().map(|h| h.address.as_str()).collect::<Vec<_>>(),
            ["dc1", "dc2"]
        );
        let inner: SharedStore = Arc::new(memory);
        let store = FaultyStore::new(inner, 11).with_plan(FaultPlan::latency(
            Duration::from_millis(2),
            Duration::from_millis(4),
        ));
        // This process runs 120 s behind the cluster (faketime -120s).
        let process = SkewedClock::new(cluster.clone(), -120_000_000);
        for (host, node_offset) in [("dc1", 0), ("dc2", 3_000_000)] {
            let route = Route::Host(host.to_string());
            let m = measure_offset(&store, &process, &route, 5).await;
            assert_eq!((m.samples.len(), m.failures), (5, 0));
            let r = m.reading.expect("a reading");
            let truth = 120_000_000 + node_offset;
            let miss = (r.offset_us - truth).unsigned_abs();
            assert!(miss <= r.error_us, "{host}: {r:?} missed {truth} by {miss}");
            let least = m
                .samples
                .iter()
                .filter_map(OffsetSample::round_trip)
                .min()
                .unwrap();
            assert_eq!(
                r.error_us,
                u64::try_from(least.as_micros()).unwrap().div_ceil(2) + 1_000,
                "{host}: the least round trip's"
            );
        }
    }

    /// Failures are counted, not fatal; no answer at all is no reading,
    /// with the reason.
    #[tokio::test]
    async fn failures_are_skipped_and_none_answered_is_no_reading() {
        let clock = Arc::new(ManualClock::new(Timestamp::from_micros(5_000_000)));
        let inner: SharedStore = Arc::new(MemoryStore::with_clock(clock.clone()));
        let store = FaultyStore::new(inner, 3);
        store.set_partitioned(true);
        let m = measure_offset(&store, clock.as_ref(), &Route::Default, 3).await;
        assert_eq!((m.samples.len(), m.failures, m.reading), (0, 3, None));
        assert!(m.why_none().unwrap().contains("no clock reading"), "{m:?}");
        store.set_partitioned(false);
        let m = measure_offset(&store, clock.as_ref(), &Route::Default, 3).await;
        assert_eq!(m.reading.map(|r| r.offset_us), Some(0));
        assert!(m.why_none().is_none());
        // A node that is not there.
        let m = measure_offset(&store, clock.as_ref(), &Route::Host("dc9".into()), 1).await;
        assert_eq!(
            m.last_error.map(|e| e.kind()),
            Some(StoreErrorKind::Connection)
        );
    }

    /// A node alone is asked its clock and nothing else.
    #[tokio::test]
    async fn only_a_clock_reading_may_go_to_one_node() {
        let store = MemoryStore::new();
        let host = Route::Host(crate::DEFAULT_DATACENTER.into());
        assert!(store.server_time_via(&host).await.is_ok());
        let e = store
            .read_via(&host, crate::schema::MAIN, "x", &crate::RowQuery::all())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Invalid);
        assert!(
            e.to_string().contains("only reads that node's clock"),
            "{e}"
        );
    }

    /// A slow coordinator (400–450 ms a read) is read from the samples it
    /// answered by the deadline (1 s: two), not given up on; the read in
    /// flight at the deadline is abandoned and counted.
    #[tokio::test(start_paused = true)]
    async fn a_slow_coordinator_is_read_from_what_it_answered_by_the_deadline() {
        let clock = Arc::new(TokioClock::starting_at(Timestamp::from_micros(
            1_767_225_600_000_000,
        )));
        let inner: SharedStore = Arc::new(MemoryStore::with_clock(clock.clone()));
        let store = FaultyStore::new(inner, 5).with_plan(FaultPlan::latency(
            Duration::from_millis(400),
            Duration::from_millis(450),
        ));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        let m =
            measure_offset_until(&store, clock.as_ref(), &Route::Default, 5, Some(deadline)).await;
        assert_eq!(
            (m.samples.len(), m.failures, m.timed_out),
            (2, 1, true),
            "{m:?}"
        );
        let r = m.reading.expect("a reading from two samples");
        assert!(r.offset_us.unsigned_abs() <= r.error_us, "{r:?}");
        assert!(tokio::time::Instant::now() <= deadline + Duration::from_millis(1));
    }
}
