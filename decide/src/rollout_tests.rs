use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::algorithm::Mode;
use crate::census::{CellOwner, Census, CensusCell};
use crate::registry::NodeInfo;
use crate::schema;

const NOW: i64 = 1_700_000_000_000_000;

fn node(
    name: &str,
    effective: Algorithm,
    seen: Option<(Stage, u64)>,
    heartbeat_secs_ago: u64,
) -> LiveNode {
    LiveNode {
        column: name.to_string(),
        info: NodeInfo {
            node: name.to_string(),
            version: "0.1.0".to_string(),
            configured_mode: Mode::Auto,
            effective,
            degraded: false,
            seen_stage: seen.map(|s| s.0),
            seen_version: seen.map(|s| s.1),
            started_at: 0,
            incarnation: None,
            last_used: BTreeMap::new(),
            lease: None,
            acting_version: seen.map(|s| s.1),
            bound: BTreeMap::new(),
            view_expired: false,
            datacenter: None,
            homes: None,
            stage_valid_for_ms: None,
            registry_ttl_ms: None,
            left: false,
            clock: None,
            host_clock: None,
        },
        heartbeat_at: Timestamp::from_micros(NOW)
            .saturating_sub(Duration::from_secs(heartbeat_secs_ago)),
        ttl_left: Some(Duration::from_secs(25)),
    }
}

fn held(lock: &str, owner: &str, algorithm: Option<Algorithm>) -> CensusCell {
    CensusCell {
        table: schema::MAIN,
        lock: lock.to_string(),
        column: owner.to_string(),
        owner: CellOwner {
            owner: owner.to_string(),
            node: algorithm.map(|_| owner.split('/').next().unwrap_or_default().to_string()),
            registered: algorithm.is_some(),
            process_live: algorithm.is_some(),
            promise: None,
            clock: None,
            algorithm,
            reserved: false,
            sharing: crate::sharing::Sharing::Exclusive,
        },
        writetime: Timestamp::from_micros(NOW),
        age: Duration::ZERO,
        least_age: Duration::ZERO,
        ttl_left: Some(Duration::from_secs(60)),
        queue_position: None,
        queued_at: None,
        stale: false,
        lease_over: false,
    }
}

fn evidence(stage: Stage, version: u64) -> Evidence {
    Evidence {
        current: StageRecord {
            stage,
            version,
            changed_at: 0,
            by: "t".into(),
            reason: "t".into(),
        },
        nodes: Vec::new(),
        unreadable_nodes: Vec::new(),
        census: Census::default(),
        activity: BTreeMap::new(),
        now: Timestamp::from_micros(NOW),
    }
}

/// The times of the default rollout settings: `rollout.quiet_period = "2m"`,
/// `rollout.heartbeat_ttl = "30s"`.
fn settings() -> GuardTimes {
    GuardTimes {
        quiet_period: Duration::from_secs(120),
        heartbeat_ttl: Duration::from_secs(30),
        clock_skew_margin: Duration::from_secs(5),
    }
}

#[test]
fn legacy_to_dual_is_refused_while_a_legacy_node_lives_or_legacy_was_active_recently() {
    let mut e = evidence(Stage::Legacy, 0);
    assert!(
        evaluate(&e, Stage::Dual, settings()).is_safe(),
        "a quiet fleet may advance"
    );

    e.nodes.push(node(
        "web-3",
        Algorithm::Legacy,
        Some((Stage::Legacy, 0)),
        2,
    ));
    e.nodes.push(node(
        "web-4",
        Algorithm::Combined,
        Some((Stage::Legacy, 0)),
        1,
    ));
    e.activity
        .insert(Algorithm::Legacy, Timestamp::from_micros(NOW - 10_000_000));
    let v = evaluate(&e, Stage::Dual, settings());
    assert!(!v.is_safe());
    assert_eq!(
        v.failures(),
        [
            "node web-3 runs legacy (heartbeat 2s ago)",
            "legacy activity seen 10s ago (quiet period 2m)"
        ]
    );
    assert_eq!(
        v.to_string(),
        "safe to move from legacy to dual: no, because node web-3 runs legacy (heartbeat 2s ago); legacy activity seen 10s ago (quiet period 2m)"
    );

    // Activity long ago, and the legacy node gone: safe.
    e.nodes.remove(0);
    e.activity.insert(
        Algorithm::Legacy,
        Timestamp::from_micros(NOW - 3_600_000_000),
    );
    assert!(evaluate(&e, Stage::Dual, settings()).is_safe());
    // An old binary holding a lock right now (not registered, foreign cell).
    e.census.add_row(
        schema::MAIN,
        vec![held(
            "accounts",
            "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
            None,
        )],
        &|_| true,
    );
    let v = evaluate(&e, Stage::Dual, settings());
    assert_eq!(
        v.failures(),
        ["legacy activity seen 0s ago (quiet period 2m)"]
    );
}

/// Issue 22: two processes under one node id are two rows, each counted;
/// the guards name the process when the id alone is ambiguous.
#[test]
fn every_process_under_one_node_id_counts() {
    let mut e = evidence(Stage::Dual, 1);
    for (incarnation, effective, seen) in [
        ("0000000a", Algorithm::Legacy, (Stage::Legacy, 0)),
        ("0000000b", Algorithm::Combined, (Stage::Dual, 1)),
    ] {
        let mut n = node("web-1", effective, Some(seen), 1);
        n.info.incarnation = Some(incarnation.to_string());
        n.column = n.info.column();
        e.nodes.push(n);
    }
    let v = evaluate(&e, Stage::Queue, settings());
    assert_eq!(
        v.failures(),
        [
            "node web-1 (process 0000000a) runs legacy (heartbeat 1s ago)",
            "node web-1 (process 0000000a) still acts on stage legacy (heartbeat 1s ago)"
        ]
    );
    e.nodes.remove(0);
    assert!(evaluate(&e, Stage::Queue, settings()).is_safe());
}

/// R8: a node's promise lies ahead of now: the quiet period has not even
/// begun.
#[test]
fn a_promised_use_keeps_the_quiet_guard_shut() {
    let mut e = evidence(Stage::Legacy, 0);
    e.activity
        .insert(Algorithm::Legacy, Timestamp::from_micros(NOW + 25_000_000));
    let v = evaluate(&e, Stage::Dual, settings());
    assert_eq!(
        v.failures(),
        [
            "legacy may be in use for another 25s (a node's heartbeat allows it), then the quiet period 2m"
        ]
    );
}

#[test]
fn dual_to_queue_waits_until_every_node_has_seen_dual() {
    let mut e = evidence(Stage::Dual, 1);
    e.nodes
        .push(node("a", Algorithm::Combined, Some((Stage::Dual, 1)), 1));
    e.nodes
        .push(node("b", Algorithm::Combined, Some((Stage::Legacy, 0)), 1));
    let v = evaluate(&e, Stage::Queue, settings());
    assert_eq!(
        v.failures(),
        ["node b still acts on stage legacy (heartbeat 1s ago)"]
    );
    e.nodes[1] = node("b", Algorithm::Combined, Some((Stage::Dual, 1)), 1);
    assert!(evaluate(&e, Stage::Queue, settings()).is_safe());
}

#[test]
fn queue_to_complete_needs_no_combined_node_and_no_combined_holder() {
    let mut e = evidence(Stage::Queue, 2);
    e.nodes
        .push(node("a", Algorithm::Combined, Some((Stage::Queue, 2)), 1));
    e.census.add_row(
        schema::MAIN,
        vec![held(
            "accounts",
            "a/0000000000000001",
            Some(Algorithm::Combined),
        )],
        &|_| true,
    );
    let v = evaluate(&e, Stage::Complete, settings());
    assert_eq!(
        v.failures(),
        [
            "node a runs combined (heartbeat 1s ago)",
            "1 lock(s) held by combined holders: accounts (by a/0000000000000001)"
        ]
    );
}

#[test]
fn rollback_to_legacy_needs_the_queue_to_be_quiet_while_other_rollbacks_are_free() {
    let mut e = evidence(Stage::Dual, 3);
    e.nodes
        .push(node("q", Algorithm::Queue, Some((Stage::Dual, 3)), 1));
    e.activity
        .insert(Algorithm::Queue, Timestamp::from_micros(NOW - 5_000_000));
    let v = evaluate(&e, Stage::Legacy, settings());
    assert_eq!(
        v.failures(),
        [
            "node q runs queue (heartbeat 1s ago)",
            "queue activity seen 5s ago (quiet period 2m)"
        ]
    );
    // complete → queue and queue → dual never mix legacy with queue.
    for (from, to) in [(Stage::Complete, Stage::Queue), (Stage::Queue, Stage::Dual)] {
        let mut e = evidence(from, 4);
        e.nodes
            .push(node("q", Algorithm::Queue, Some((Stage::Legacy, 0)), 1));
        let v = evaluate(&e, to, settings());
        assert!(v.guards.is_empty() && v.is_safe(), "{from} -> {to}");
    }
}

/// Issue 18 item 4: while the database refuses to read a lock's row, every
/// guard that reads the census refuses with that row, the reason and the
/// remedy; guards on the registry alone still judge.
#[test]
fn guards_on_the_census_refuse_while_a_lock_cannot_be_read() {
    use crate::census::UnreadableRow;
    use crate::remedy::UNREADABLE_ACTION;
    let row = UnreadableRow {
        table: schema::QUEUE,
        lock: Some("jammed".to_string()),
        reason: "read on table queue failed: too many tombstones: …".to_string(),
    };
    // (from, to, the guards refused for the row)
    let table = [
        (
            Stage::Legacy,
            Stage::Dual,
            vec!["no legacy activity within the quiet period"],
        ),
        (
            Stage::Dual,
            Stage::Queue,
            vec!["no legacy activity within the quiet period"],
        ),
        (
            Stage::Queue,
            Stage::Complete,
            vec![
                "no lock held by a combined holder",
                "no legacy activity within the quiet period",
            ],
        ),
        (
            Stage::Dual,
            Stage::Legacy,
            vec![
                "no lock held by a queue holder",
                "no queue activity within the quiet period",
            ],
        ),
        (Stage::Complete, Stage::Queue, vec![]),
        (Stage::Queue, Stage::Dual, vec![]),
    ];
    for (from, to, refused) in table {
        let mut e = evidence(from, 3);
        assert!(evaluate(&e, to, settings()).is_safe(), "{from} → {to}");
        e.census.unreadable.push(row.clone());
        let v = evaluate(&e, to, settings());
        let failed: Vec<&str> = v
            .guards
            .iter()
            .filter(|g| !g.passed)
            .map(|g| g.name.as_str())
            .collect();
        assert_eq!(failed, refused, "{from} → {to}");
        for g in v.guards.iter().filter(|g| !g.passed) {
            assert_eq!(
                g.detail,
                "cannot be evaluated: the database refuses to read 1 lock row(s): lock \
                 \"jammed\" (table queue): read on table queue failed: too many tombstones: …"
            );
            assert_eq!(g.actions, [UNREADABLE_ACTION]);
        }
    }
}

/// Issue 41 item 2: a process minutes off the database's clock that
/// heartbeats is not silent. Its heartbeat is stamped on its own clock
/// (2 min 5 s before the reader's now, for a process 2 min behind that
/// heartbeat 5 s ago); its reading puts it 5 s back on the database's
/// clock. The same row without a reading (today's arithmetic) is silent,
/// and so is a process whose reading says its heartbeat is old.
#[test]
fn a_heartbeating_process_minutes_behind_is_not_silent() {
    use crate::offset::ClockReading;
    let behind = |heartbeat_secs_ago: u64, reading: Option<i64>| {
        let mut n = node("far", Algorithm::Legacy, None, heartbeat_secs_ago);
        n.info.clock = reading.map(|offset_s| ClockReading {
            offset_us: offset_s * 1_000_000,
            error_us: 2_000,
            at_us: NOW - 130_000_000,
        });
        n
    };
    let silent_action = Remedy::Silent.action().to_string();
    // (node, silent, heartbeat shown)
    let cases = [
        (behind(125, Some(120)), false, "heartbeat 5s ago"),
        (behind(125, None), true, "heartbeat 2m 5s ago"),
        (behind(160, Some(120)), true, "heartbeat 40s ago"),
        // Ahead by two minutes: stamped in the future on the reader's clock.
        (behind(0, Some(-120)), true, "heartbeat 2m ago"),
    ];
    for (i, (n, silent, heard)) in cases.into_iter().enumerate() {
        let mut e = evidence(Stage::Legacy, 0);
        e.nodes.push(n);
        let v = evaluate(&e, Stage::Dual, settings());
        let g = &v.guards[0];
        assert!(!g.passed, "case #{i}: {g:?}");
        assert_eq!(
            g.actions.contains(&silent_action),
            silent,
            "case #{i}: {g:?}"
        );
        assert!(g.detail.contains(heard), "case #{i}: {g:?}");
    }
}
