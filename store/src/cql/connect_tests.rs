use std::time::Duration;

use super::{StopWaiting, node_connect_limit};

/// The connect rule as a table (issue 19 (C) #12: the README said a
/// session needs a majority; it starts with one answer at half the
/// timeout, as an operator cut off from some nodes needs).
#[test]
fn connecting_stops_waiting_by_the_documented_rule() {
    let at = |answered, settled, total, halfway, timed_out| StopWaiting {
        answered,
        settled,
        total,
        halfway,
        timed_out,
    };
    #[rustfmt::skip]
    let cases = [
        // (state, stop?)
        (at(0, 0, 3, false, false), false),
        (at(1, 1, 3, false, false), false), // one of three, early: wait
        (at(2, 2, 3, false, false), true),  // a majority: go
        (at(1, 1, 3, true, false), true),   // one, at half the timeout: go
        (at(0, 2, 3, true, false), false),  // none yet at half: wait on
        (at(1, 3, 3, false, false), true),  // all settled
        (at(0, 3, 3, false, false), true),  // all failed: fail now
        (at(0, 0, 3, true, true), true),    // the timeout
        (at(1, 1, 1, false, false), true),  // one of one
        (at(1, 1, 2, false, false), false), // one of two is no majority
        (at(2, 2, 4, false, false), false),
        (at(3, 3, 4, false, false), true),
    ];
    for (i, (state, stop)) in cases.into_iter().enumerate() {
        assert_eq!(state.now(), stop, "case #{i}: {state:?}");
    }
}

/// A node's connect gets a second, or the whole connect timeout if that
/// is shorter (issue 31 (4c)).
#[test]
fn a_node_connect_is_limited_to_a_second_within_the_connect_timeout() {
    let ms = Duration::from_millis;
    for (connect_timeout, limit) in [
        (ms(5_000), ms(1_000)),
        (ms(60_000), ms(1_000)),
        (ms(1_000), ms(1_000)),
        (ms(300), ms(300)),
    ] {
        assert_eq!(
            node_connect_limit(connect_timeout),
            limit,
            "{connect_timeout:?}"
        );
    }
}
