//! Issue 41 item 2: cells are aged on the database's clock, by their
//! owner's reading and the census taker's: a renewing holder minutes off
//! is never called stale or over, a dead one still is.

use std::collections::BTreeMap;

use lockshift_decide::offset::ClockReading;
use lockshift_decide::registry::{LeasePromise, NodeInfo};
use lockshift_lock::{Algorithm, Incarnation, NodeId, OwnerId};
use lockshift_store::{CellWrite, ManualClock, MemoryStore, Timestamp, WriteOptions};

use super::*;

/// The database's clock, and the census taker's (it agrees).
const NOW: i64 = 1_000_000_000_000;
const S: i64 = 1_000_000;

/// A process of node `node` whose clock is `skew_s` off the database's
/// (negative: behind), with the default 60 s / 10 s lease, reporting its
/// reading or not.
fn process(node: &str, skew_s: i64, reports: bool) -> LiveNode {
    LiveNode {
        column: node.to_string(),
        info: NodeInfo {
            node: node.to_string(),
            version: "0.1.0".into(),
            configured_mode: lockshift_decide::algorithm::Mode::Combined,
            effective: Algorithm::Combined,
            degraded: false,
            seen_stage: None,
            seen_version: None,
            started_at: 0,
            incarnation: Some(Incarnation::from_seed(1).to_string()),
            last_used: BTreeMap::new(),
            lease: Some(LeasePromise {
                ttl_ms: 60_000,
                renew_every_ms: 10_000,
            }),
            acting_version: None,
            bound: BTreeMap::new(),
            view_expired: false,
            datacenter: None,
            homes: None,
            stage_valid_for_ms: None,
            registry_ttl_ms: None,
            left: false,
            clock: reports.then_some(ClockReading {
                offset_us: -skew_s * S,
                error_us: 2_000,
                at_us: NOW + skew_s * S - 30 * S,
            }),
            host_clock: None,
        },
        heartbeat_at: Timestamp::from_micros(NOW + skew_s * S - 3 * S),
        ttl_left: None,
    }
}

/// Each case: a holder `skew_s` off that last renewed its cell `renewed_s`
/// ago (stamped on its own clock, 60 s TTL), reporting its reading or not,
/// the taker's own reading or none; what the census says of the cell:
/// (lease over, stale, age in whole seconds).
#[tokio::test]
async fn holders_minutes_off_are_aged_by_their_readings() {
    let taker = ClockReading {
        offset_us: 0,
        error_us: 1_000,
        at_us: NOW - S,
    };
    /// (lease over, stale, age in whole seconds)
    type Said = (bool, bool, u64);
    #[rustfmt::skip]
    let cases: [(i64, i64, bool, Option<ClockReading>, Said); 8] = [
        // A renewing holder two minutes behind: by its reading, 4 s old.
        (-120, 4, true, Some(taker), (false, false, 4)),
        // The same without its reading (today's arithmetic): the margin
        // cannot cover two minutes, and the live holder looks over.
        (-120, 4, false, Some(taker), (true, true, 124)),
        // The taker without a reading of its own allows the margin.
        (-120, 4, true, None, (false, false, 4)),
        // Two minutes ahead: stamped in the future, 4 s old all the same.
        (120, 4, true, Some(taker), (false, false, 4)),
        // A holder behind that stopped renewing 70 s ago: over, by its
        // reading as by anyone's.
        (-120, 70, true, Some(taker), (true, true, 70)),
        // Ahead and dead: its stamps stay in the future on the taker's
        // clock, but its reading says the cell is 70 s old.
        (120, 70, true, Some(taker), (true, true, 70)),
        // An agreeing clock, no readings: as before.
        (0, 4, false, None, (false, false, 4)),
        (0, 70, false, None, (true, true, 70)),
    ];
    let web = NodeId::new("web").unwrap();
    for (i, (skew_s, renewed_s, reports, reader, expected)) in cases.into_iter().enumerate() {
        let store = MemoryStore::new();
        let owner = OwnerId::for_slot(&web, Incarnation::from_seed(1), 0);
        // Written with a 60 s TTL by the database's clock, `renewed_s`
        // ago; stamped on the writer's clock.
        let written = NOW - renewed_s * S;
        store
            .write(
                schema::MAIN,
                "X",
                &[CellWrite::new(owner.as_str(), b"queue".to_vec())],
                WriteOptions::at(Timestamp::from_micros(written + skew_s * S))
                    .with_ttl(lockshift_store::Ttl::from_secs(60).unwrap()),
            )
            .await
            .unwrap();
        let clock = ManualClock::new(Timestamp::from_micros(written));
        clock.advance(std::time::Duration::from_micros(
            u64::try_from(renewed_s * S).unwrap(),
        ));
        let census = take_census(
            &store,
            &clock,
            &[process("web", skew_s, reports)],
            CensusOptions {
                stale_after: Staleness::uniform(Duration::from_secs(30)),
                clock_skew_margin: Duration::from_secs(5),
                page_size: NonZeroU32::new(10).unwrap(),
                reader,
            },
            &|_| true,
            |_, _| {},
        )
        .await
        .unwrap();
        let [c] = census.cells.as_slice() else {
            panic!("case #{i}: {:?}", census.cells);
        };
        assert_eq!(
            (c.lease_over, c.stale, c.age.as_secs()),
            expected,
            "case #{i}: {c:?}"
        );
        assert!(c.least_age <= c.age, "case #{i}: {c:?}");
        assert_eq!(census.tally.held_lease_over, usize::from(expected.0));
    }
}
