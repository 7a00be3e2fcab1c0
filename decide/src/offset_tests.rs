use super::*;

const S: i64 = 1_000_000;
const T0: i64 = 1_767_225_600 * S;

fn at(us: i64) -> Timestamp {
    Timestamp::from_micros(us)
}

fn sample(sent: i64, received: i64, server: i64) -> OffsetSample {
    OffsetSample {
        sent: at(sent),
        received: at(received),
        server: at(server),
    }
}

fn reading(offset_us: i64, error_us: u64, at_us: i64) -> ClockReading {
    ClockReading {
        offset_us,
        error_us,
        at_us,
    }
}

/// A sample's reading: `server − midpoint`, within half the round trip
/// (up) plus the server's millisecond.
#[test]
fn a_sample_reads_server_minus_midpoint_within_half_the_round_trip_and_a_millisecond() {
    // (sent, received, server) → (offset, error, at)
    type Case = ((i64, i64, i64), Option<(i64, u64, i64)>);
    let cases: &[Case] = &[
        // In step, 4 ms round trip.
        ((T0, T0 + 4_000, T0 + 2_000), Some((0, 3_000, T0 + 2_000))),
        // This process 120 s behind (faketime -120s): the database reads
        // 120 s more.
        (
            (T0, T0 + 2_000, T0 + 1_000 + 120 * S),
            Some((120 * S, 2_000, T0 + 1_000)),
        ),
        // This process ahead: a negative offset.
        (
            (T0, T0 + 2_000, T0 + 1_000 - 7 * S),
            Some((-7 * S, 2_000, T0 + 1_000)),
        ),
        // An odd round trip: half of it rounded up.
        ((T0, T0 + 3, T0), Some((-1, 1_002, T0 + 1))),
        // No time at all between (a coarse clock): the resolution alone.
        ((T0, T0, T0), Some((0, 1_000, T0))),
        // The clock stepped back during the exchange: nothing bounded.
        ((T0, T0 - 1, T0), None),
    ];
    for (i, ((sent, received, server), want)) in cases.iter().enumerate() {
        let got = sample(*sent, *received, *server).reading();
        let want = want.map(|(o, e, a)| reading(o, e, a));
        assert_eq!(got, want, "case #{i}");
    }
}

/// The bound is no estimate: whatever the delays each way (however
/// lopsided), the true offset, the server's truncation and the moment it
/// read its clock, the truth lies within the reading's error.
#[test]
fn the_true_offset_is_always_within_the_error_bound() {
    let offsets = [-600 * S, -120 * S, -1, 0, 1, 999, 4_999_999, 120 * S];
    let delays = [0, 1, 250, 999, 1_000, 1_001, 7_777, 150_000];
    let mut checked = 0;
    for &truth in &offsets {
        for &out in &delays {
            for &back in &delays {
                for phase in [0, 1, 500, 999] {
                    let sent = T0 + phase;
                    let true_server = sent + out + truth;
                    // Whole milliseconds, truncated (floor, also below 0).
                    let server = true_server.div_euclid(1_000) * 1_000;
                    let r = sample(sent, sent + out + back, server)
                        .reading()
                        .expect("a forward round trip");
                    let miss = (truth - r.offset_us).unsigned_abs();
                    assert!(
                        miss <= r.error_us,
                        "truth {truth} out {out} back {back} phase {phase}: read {r:?}, missed by {miss}"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 8 * 8 * 8 * 4);
}

/// NTP's clock filter: the sample of least round trip; on a tie the later.
#[test]
fn the_filter_keeps_the_sample_of_least_round_trip() {
    let slow = sample(T0, T0 + 40_000, T0 + 30_000); // rtt 40 ms, off +10 ms
    let fast = sample(T0 + S, T0 + S + 2_000, T0 + S + 1_000 + 5); // rtt 2 ms
    let fast_later = sample(T0 + 2 * S, T0 + 2 * S + 2_000, T0 + 2 * S + 1_000);
    let stepped = sample(T0 + 3 * S, T0 + 3 * S - 500, T0);
    let cases: &[(&[OffsetSample], Option<ClockReading>)] = &[
        (&[], None),
        (&[stepped], None),
        (&[slow], slow.reading()),
        (&[slow, fast, stepped], fast.reading()),
        (&[fast, slow], fast.reading()),
        (&[fast, fast_later, slow], fast_later.reading()),
    ];
    for (i, (samples, want)) in cases.iter().enumerate() {
        assert_eq!(filter(samples), *want, "case #{i}");
    }
}

/// A reading's error grows by the drift allowance either way in time; the
/// bound is |offset| + that error.
#[test]
fn a_reading_ages_by_the_drift_allowance() {
    let r = reading(-3 * S, 2_000, T0);
    let cases = [
        (T0, 2_000),
        (T0 + 60 * S, 2_000 + 30_000), // 500 ppm of a minute
        (T0 - 60 * S, 2_000 + 30_000),
        (T0 + 1, 2_001), // rounded up
    ];
    for (i, (now, error)) in cases.into_iter().enumerate() {
        assert_eq!(r.error_at(at(now)), error, "case #{i}");
        assert_eq!(r.bound_at(at(now)), 3 * S as u64 + error, "case #{i}");
    }
}

/// Within the margin: |offset| + error, the drift since, and the reading's
/// age at most READING_MAX_AGE.
#[test]
fn a_process_is_within_the_margin_only_on_a_young_enough_reading_that_says_so() {
    let margin = Duration::from_secs(5);
    let min = 60 * S;
    // (reading, now, within?)
    let cases = [
        (reading(0, 2_000, T0), T0, true),
        (reading(4_990_000, 10_000, T0), T0, true), // exactly the margin
        (reading(4_990_001, 10_000, T0), T0, false),
        (reading(-120 * S, 2_000, T0), T0, false), // faketime +120 s
        (reading(120 * S, 2_000, T0), T0, false),  // faketime -120 s
        // Old: five minutes is the limit, either way.
        (reading(0, 2_000, T0), T0 + 5 * min, true),
        (reading(0, 2_000, T0), T0 + 5 * min + 1, false),
        (reading(0, 2_000, T0), T0 - 5 * min - 1, false),
        // Drift eats a small slack first: 4.99 s + 10 ms leaves nothing.
        (reading(4_980_000, 10_000, T0), T0 + 20 * S, true),
        (reading(4_980_000, 10_000, T0), T0 + 20 * S + 2, false),
    ];
    for (i, (r, now, within)) in cases.into_iter().enumerate() {
        assert_eq!(r.within(margin, at(now)), within, "case #{i}: {r:?}");
    }
    assert_eq!(reading(6 * S, 0, T0).within_until(margin), None);
}

/// A fresh reading replaces a kept one unless the kept one is better by
/// now and agrees with it; disagreement means a step, and the fresh wins.
#[test]
fn refining_keeps_the_better_reading_unless_they_disagree() {
    let now = T0 + 60 * S;
    let kept = reading(1_000, 1_000, T0); // by now ± 31 ms
    let cases = [
        (
            None,
            reading(5_000, 50_000, now),
            reading(5_000, 50_000, now),
        ),
        // The kept one is better by now and agrees: kept.
        (Some(kept), reading(5_000, 50_000, now), kept),
        // The fresh one is better: fresh.
        (
            Some(kept),
            reading(2_000, 3_000, now),
            reading(2_000, 3_000, now),
        ),
        // They disagree (a step of the clock): fresh, though worse.
        (
            Some(kept),
            reading(120 * S, 50_000, now),
            reading(120 * S, 50_000, now),
        ),
    ];
    for (i, (kept, fresh, want)) in cases.into_iter().enumerate() {
        assert_eq!(refine(kept, fresh, at(now)), want, "case #{i}");
    }
}

/// Issue 41: a holder whose clock is 120 s behind heartbeats at its own
/// time; by its reading that is now on the database's clock, not two
/// minutes ago — and without one (the margin alone) it looks silent.
#[test]
fn a_writers_time_is_judged_on_the_database_clock_by_its_own_reading() {
    let margin = Duration::from_secs(5);
    let now = T0; // the reader: in step, ± 1 ms
    let reader = reading(0, 1_000, now);
    let behind = reading(120 * S, 2_000, T0 - 122 * S - 30 * S);
    let written = at(T0 - 120 * S - 2 * S); // 2 s ago on the database's clock
    let (early, late) = to_database_time(written, &behind);
    // 30 s of drift on top of the measured 2 ms: 15 ms.
    assert_eq!(early, at(T0 - 2 * S - 17_000));
    assert_eq!(late, at(T0 - 2 * S + 17_000));
    let a = age(written, Some(&behind), at(now), Some(&reader), margin);
    assert_eq!(
        a,
        Age {
            least: Duration::from_micros(2 * S as u64 - 18_000),
            most: Duration::from_micros(2 * S as u64 + 18_000),
            shown: Duration::from_secs(2),
        }
    );
    let heartbeat_ttl = Duration::from_secs(30);
    assert!(a.surely_within(heartbeat_ttl) && !a.surely_over(heartbeat_ttl));
    // Ignoring the reading (a build that reports none): 122 s ± 5 s.
    let blind = age(written, None, at(now), Some(&reader), margin);
    assert!(blind.surely_over(heartbeat_ttl), "{blind:?}");
    // Neither side measured: the margin between them, as before readings.
    let before = age(at(T0 - 10 * S), None, at(now), None, margin);
    assert_eq!(before.least, Duration::from_secs(5));
    assert_eq!(before.most, Duration::from_secs(15));
    // A time ahead of the reader: an age of zero at least.
    let ahead = age(at(T0 + 10 * S), None, at(now), None, margin);
    assert_eq!((ahead.least, ahead.most), (Duration::ZERO, Duration::ZERO));
}

/// Two Cassandra nodes' clocks, each read against one client: apart by
/// the difference of the readings, within both errors; judged against the
/// lease's tolerance.
#[test]
fn two_nodes_are_within_beyond_or_unsure_against_the_tolerance() {
    let tolerance = Duration::from_secs(1);
    // (a offset, a error, b offset, b error, verdict)
    let cases = [
        (0, 1_000, 2_000, 1_000, Apart::Within),
        (0, 1_000, 998_000, 1_000, Apart::Within), // 998 + 2 ms: exactly
        (0, 1_000, 998_001, 1_000, Apart::Unsure),
        (0, 1_000, 1_002_000, 1_000, Apart::Unsure),
        (0, 1_000, 1_002_001, 1_000, Apart::Beyond),
        (3 * S, 1_000, 0, 1_000, Apart::Beyond),
        (-3 * S, 1_000, 0, 1_000, Apart::Beyond),
    ];
    for (i, (ao, ae, bo, be, want)) in cases.into_iter().enumerate() {
        let spread = Spread::of(&reading(ao, ae, T0), &reading(bo, be, T0));
        assert_eq!(spread.difference_us, ao - bo, "case #{i}");
        assert_eq!(spread.error_us, ae + be, "case #{i}");
        assert_eq!(spread.judge(tolerance), want, "case #{i}");
    }
    // Readings a minute apart: the client's drift between them counts.
    let spread = Spread::of(&reading(0, 1_000, T0), &reading(0, 1_000, T0 + 60 * S));
    assert_eq!(spread.error_us, 1_000 + 31_000);
}

#[test]
fn readings_read_as_people_say_them() {
    assert_eq!(
        reading(120_003_400, 1_500, T0).describe(),
        "+120.003s ± 1.5ms"
    );
    assert_eq!(reading(-2_500, 1_000, T0).describe(), "-2.5ms ± 1.0ms");
}
