use super::*;

const MINUTE: i64 = 60_000_000;

fn info(node: &str) -> NodeInfo {
    NodeInfo {
        node: node.into(),
        version: "test".into(),
        configured_mode: Mode::Auto,
        effective: Algorithm::Queue,
        degraded: false,
        seen_stage: None,
        seen_version: None,
        started_at: 0,
        incarnation: Some("1".into()),
        last_used: BTreeMap::new(),
        lease: None,
        acting_version: None,
        bound: BTreeMap::new(),
        view_expired: false,
        datacenter: None,
        homes: None,
        stage_valid_for_ms: None,
        registry_ttl_ms: Some(30_000),
        left: false,
        clock: None,
        host_clock: None,
    }
}

fn cell(node: &str, at_s: i64, change: impl FnOnce(&mut NodeInfo)) -> RegistryCell {
    let mut i = info(node);
    change(&mut i);
    RegistryCell {
        column: i.column(),
        info: Some(i),
        writetime: Timestamp::from_micros(at_s * 1_000_000),
        ttl: None,
    }
}

#[test]
fn rows_are_minutes_and_a_reader_reads_every_minute_a_registration_can_span() {
    let at = Timestamp::from_micros(100 * MINUTE + 5);
    assert_eq!(registry_row(at), "nodes@100");
    let rows = registry_rows(at);
    assert_eq!(rows.first().map(String::as_str), Some("nodes@100"));
    assert_eq!(rows.len() as i64, REGISTRY_MINUTES + 1);
    assert_eq!(rows.last().map(String::as_str), Some(LEGACY_REGISTRY_ROW));
    // A heartbeat MAX_REGISTRY_TTL ago is in a row read now.
    let oldest = at.saturating_sub(MAX_REGISTRY_TTL);
    assert!(rows.contains(&registry_row(oldest)), "{rows:?}");
}

/// A cell outlives the last minute its row is read in, by the slack,
/// and no more than a minute beyond: its tombstone is never in a row
/// being read (by clocks within the slack).
#[test]
fn a_cell_expires_after_the_last_reader_of_its_row() {
    for (i, offset) in [0, 1, 30 * 1_000_000, MINUTE - 1].into_iter().enumerate() {
        let at = Timestamp::from_micros(200 * MINUTE + offset);
        let expires = at.as_micros() + i64::from(registry_cell_ttl(at).as_secs()) * 1_000_000;
        let last_read_end = (200 + REGISTRY_MINUTES) * MINUTE;
        assert!(
            expires >= last_read_end + 4 * 1_000_000,
            "case #{i}: expires {expires}, read until {last_read_end}"
        );
        assert!(expires <= last_read_end + 6 * 1_000_000, "case #{i}");
        // A reader after that reads rows that do not hold it.
        let later = Timestamp::from_micros(last_read_end + 1);
        assert!(
            !registry_rows(later).contains(&registry_row(at)),
            "case #{i}"
        );
    }
}

#[test]
fn the_live_fleet_is_each_processs_newest_cell_unless_it_left_or_expired() {
    let now = Timestamp::from_micros(1_000 * 1_000_000);
    let margin = Duration::from_secs(5);
    let cells = vec![
        // a: an old cell and a newer one (another minute's row).
        cell("a", 900, |_| {}),
        cell("a", 990, |i| i.effective = Algorithm::Combined),
        // b: heartbeats, then leaves.
        cell("b", 980, |_| {}),
        cell("b", 995, |i| i.left = true),
        // c: silent for 40 s with a 30 s registry TTL: beyond the
        // margin, gone.
        cell("c", 960, |_| {}),
        // d: silent for 33 s: within the margin, still there.
        cell("d", 967, |_| {}),
        // e: a build that declared no registry TTL: its cell's own.
        cell("e", 900, |i| i.registry_ttl_ms = None),
        RegistryCell {
            column: "f/1".into(),
            info: None,
            writetime: now,
            ttl: None,
        },
    ];
    let (live, unreadable) = live_fleet(cells, now, margin);
    let names: Vec<&str> = live.iter().map(|n| n.info.node.as_str()).collect();
    assert_eq!(names, ["a", "d", "e"]);
    assert_eq!(
        live[0].info.effective,
        Algorithm::Combined,
        "the newest cell"
    );
    assert_eq!(live[0].ttl_left, Some(Duration::from_secs(20)));
    assert_eq!(live[1].ttl_left, Some(Duration::ZERO));
    assert_eq!(unreadable, ["f/1"]);
}

/// C1 (issue 41): a process 120 s behind the database's clock writes
/// heartbeats that look two minutes old; by the reading its row
/// carries it is live, and gone only once that reading says so too.
/// Without one, the margin alone decides, as before.
#[test]
fn a_process_far_off_the_clock_is_live_by_its_own_reading() {
    let now = Timestamp::from_micros(1_000 * 1_000_000);
    let margin = Duration::from_secs(5);
    let behind = crate::offset::ClockReading {
        offset_us: 120 * 1_000_000,
        error_us: 2_000,
        at_us: 870 * 1_000_000,
    };
    // Heartbeats at 880 s and 845 s on its clock: 1000 s and 965 s on
    // the database's.
    let fresh = cell("a", 880, |i| i.clock = Some(behind));
    let (live, _) = live_fleet(vec![fresh.clone()], now, margin);
    assert_eq!(live.len(), 1);
    let left = live[0].ttl_left.unwrap();
    assert!(
        left > Duration::from_secs(29) && left <= Duration::from_secs(30),
        "{left:?}"
    );
    let old = cell("a", 845, |i| i.clock = Some(behind));
    assert_eq!(live_fleet(vec![old], now, margin).0.len(), 0);
    let blind = cell("a", 880, |_| {});
    assert_eq!(live_fleet(vec![blind], now, margin).0.len(), 0);
    // Ahead of the database: the margin's rule already keeps it.
    let ahead = crate::offset::ClockReading {
        offset_us: -120 * 1_000_000,
        ..behind
    };
    let (live, _) = live_fleet(
        vec![cell("a", 1_110, |i| i.clock = Some(ahead))],
        now,
        margin,
    );
    assert_eq!(live.len(), 1);
}

/// Issue 41 (seed 120 of `clocks::processes_ten_minutes_apart`): a
/// process 154 s *ahead* of the database's clock stamps its heartbeats
/// 154 s in the future, so by the margin alone every cell it ever
/// wrote looks fresh: the one a reader finds (in the minute row the
/// reader reads, written 154 s ago on the database's clock, when it
/// saw stage legacy) kept the guards waiting for it to act on the
/// current stage. Its reading says it is beyond the margin and that
/// heartbeat long over: it is not live. A process within the margin
/// keeps the margin's rule: never dropped earlier than by it.
#[test]
fn a_process_ahead_beyond_the_margin_is_judged_by_its_reading_alone() {
    let now = Timestamp::from_micros(1_000 * 1_000_000);
    let margin = Duration::from_secs(5);
    let reading = |offset_s: f64, at_s: i64| crate::offset::ClockReading {
        offset_us: (offset_s * 1e6) as i64,
        error_us: 3_000,
        at_us: at_s * 1_000_000,
    };
    // Table: (heartbeat on its clock, its offset, live?).
    let cases = [
        // 154 s ahead, heartbeat 154 s ago on the database's clock
        // (its clock read 1 000 s then): over by its reading.
        (1_000, -154.0, false),
        // The same process's fresh heartbeat (1 154 s on its clock).
        (1_154, -154.0, true),
        // 29 s ago on the database's clock: still within the TTL.
        (1_125, -154.0, true),
        // 31 s ago: over.
        (1_123, -154.0, false),
        // Behind by 120 s (its times look old): live by its reading.
        (880, 120.0, true),
        (845, 120.0, false),
        // Within the margin, 2 s ahead: its reading says over (32 s
        // ago), the margin's rule keeps it (ended 2 s ago, margin 5 s).
        (970, -2.0, true),
        (960, -2.0, false),
    ];
    for (at, offset, live) in cases {
        let c = cell("a", at, |i| i.clock = Some(reading(offset, at)));
        let (found, _) = live_fleet(vec![c], now, margin);
        assert_eq!(
            found.len() == 1,
            live,
            "heartbeat at {at} s, offset {offset} s"
        );
        if let Some(n) = found.first() {
            assert!(n.ttl_left.unwrap() <= Duration::from_secs(30), "{n:?}");
        }
    }
}
