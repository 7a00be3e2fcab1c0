use std::sync::Arc;
use std::time::Duration;

use lockshift::Settings;
use lockshift_decide::algorithm::{Mode, Stage};
use lockshift_decide::registry::NodeInfo;
use lockshift_rollout::registry::heartbeat;
use lockshift_store::{
    CellWrite, Clock, ManualClock, MemoryStore, SharedStore, Ttl, WriteOptions, schema,
};

use super::*;

fn env() -> (Env, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(Timestamp::from_micros(
        1_700_000_000_000_000,
    )));
    let store: SharedStore = Arc::new(MemoryStore::with_clock(clock.clone()));
    (Env::new(Settings::default(), store, clock.clone()), clock)
}

/// Issue 18 item 4: one lock the database refuses to read does not
/// fail `status` for the fleet: it is named, with the reason and the
/// remedy, the other locks are counted, and the verdict is given.
#[tokio::test]
async fn an_unreadable_lock_is_named_and_the_fleet_still_reported() {
    use crate::render::Human;
    let clock = Arc::new(ManualClock::new(Timestamp::from_micros(
        1_700_000_000_000_000,
    )));
    let store: SharedStore = Arc::new(crate::ops::jammed::store(clock.clone()));
    let env = Env::new(Settings::default(), store.clone(), clock.clone());
    // `main`: a holding of "fine", then a row of tombstones its key
    // scan cannot pass; `queue`: fine's row, all tombstones.
    store
        .write(
            schema::MAIN,
            "fine",
            &[CellWrite::new("n1/0000000000000001", b"queue".to_vec())],
            WriteOptions::at(clock.now()).with_ttl(Ttl::from_secs(60).unwrap()),
        )
        .await
        .unwrap();
    // A jammed row after "fine" in the scan's (token) order: the scan
    // gets past "fine" before it is refused.
    let fine = lockshift_store::tombstones::token("fine");
    let jammed = (0..)
        .map(|i| format!("jammed-{i}"))
        .find(|k| lockshift_store::tombstones::token(k) > fine)
        .unwrap();
    crate::ops::jammed::jam(store.as_ref(), clock.as_ref(), schema::MAIN, &jammed).await;
    crate::ops::jammed::jam(store.as_ref(), clock.as_ref(), schema::QUEUE, "fine").await;
    let r = status(&env, |_| {}).await.unwrap();
    assert_eq!(r.locks.held, 1, "the readable lock is counted");
    let named: Vec<Option<&str>> = r
        .unreadable_locks
        .iter()
        .map(|u| u.lock.as_deref())
        .collect();
    // Both key scans are refused — `main`'s at the jammed row after
    // "fine", `queue`'s at once — and `queue`'s row of "fine", read on its
    // own, is named.
    assert_eq!(
        named,
        [None, None, Some("fine")],
        "{:?}",
        r.unreadable_locks
    );
    assert!(
        r.unreadable_action
            .as_deref()
            .is_some_and(|a| a.contains("migrate schema --apply")),
        "{:?}",
        r.unreadable_action
    );
    let next = r.next.as_ref().unwrap();
    assert!(!next.safe, "the quiet-period guard cannot be evaluated");
    let text = r.human();
    assert!(
        text.contains(
            "lock \"fine\" (table queue): read on table queue failed: too many tombstones"
        ),
        "{text}"
    );
    assert!(text.contains("do: run `migrate schema --apply`"), "{text}");
    let json = serde_json::to_value(&r).unwrap();
    assert!(
        json["unreadable_locks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["lock"] == "fine" && u["table"] == "queue"),
        "{json}"
    );
}

/// A status that fails says the store's error once — printed by
/// anyhow (`{:#}`, each cause of the chain) as by `migrate` itself
/// ([`crate::error_text`]): the census's error used to be shown by the
/// evidence error and chained by it as well. (The scan is retried for the
/// operation's minute first: paused time.)
#[tokio::test(start_paused = true)]
async fn a_failed_status_says_the_store_error_once() {
    use lockshift_store::{FaultPlan, FaultScope, FaultyStore, OpKind};
    let faulty = Arc::new(FaultyStore::new(MemoryStore::new(), 1));
    faulty.set_plan(FaultPlan {
        scope: FaultScope {
            tables: Some(vec![schema::MAIN]),
            ops: Some(vec![OpKind::Scan]),
        },
        ..FaultPlan::default()
    });
    faulty.set_partitioned(true);
    let store: SharedStore = faulty;
    let env = Env::new(
        Settings::default(),
        store,
        Arc::new(lockshift_store::SystemClock),
    );
    let err = status(&env, |_| {}).await.unwrap_err();
    let cause =
        "scan on table main failed: not enough replicas available: injected failure before apply";
    for (how, text) in [
        ("{:#}", format!("{err:#}")),
        ("error_text", crate::error_text(&err)),
        ("to_string", err.to_string()),
    ] {
        assert_eq!(
            text,
            format!("taking a census of lock cells: {cause}"),
            "{how}"
        );
        assert_eq!(text.matches(cause).count(), 1, "{how}: {text}");
    }
}

/// Issue 31 item 4e: a lock whose reads pass many tombstones — one per
/// short-lived process that took it within gc grace — is flagged by
/// `status` (JSON and a warning) while it is still readable; a lock below
/// Cassandra's warning threshold is not.
#[tokio::test]
async fn a_lock_whose_reads_pass_many_tombstones_is_flagged() {
    use crate::render::Human;
    let (env, clock) = env();
    // 1 200 processes, each took "busy" once: a queue cell and a `main`
    // cell each, gone (every process names its cells anew). "quiet" had
    // 10. Each now has a holder in `main` and a waiter in `queue`.
    let ttl = Ttl::from_secs(60).unwrap();
    for (lock, processes) in [("busy", 1_200), ("quiet", 10)] {
        let names: Vec<String> = (0..processes)
            .map(|i| format!("run-{i}/{i:08x}00000000"))
            .collect();
        for (table, value) in [
            (schema::QUEUE, &b"00000000000000000001:queue"[..]),
            (schema::MAIN, &b"queue"[..]),
        ] {
            let cells: Vec<CellWrite> = names
                .iter()
                .map(|n| CellWrite::new(n.clone(), value.to_vec()))
                .collect();
            let t0 = clock.now();
            env.store
                .write(table, lock, &cells, WriteOptions::at(t0))
                .await
                .unwrap();
            env.store
                .delete(table, lock, &names, t0.offset_micros(1))
                .await
                .unwrap();
        }
        for (table, owner, value) in [
            (schema::MAIN, "zz-holder/0000000100000000", &b"queue"[..]),
            (
                schema::QUEUE,
                "zz-waiter/0000000100000000",
                &b"00000000000000000002:queue"[..],
            ),
        ] {
            env.store
                .write(
                    table,
                    lock,
                    &[CellWrite::new(owner, value.to_vec())],
                    WriteOptions::at(clock.now()).with_ttl(ttl),
                )
                .await
                .unwrap();
        }
    }
    let r = status(&env, |_| {}).await.unwrap();
    let mut flagged: Vec<(&str, String, u64)> = r
        .tombstone_heavy_locks
        .iter()
        .map(|t| (t.lock.as_str(), t.table.to_string(), t.tombstones))
        .collect();
    flagged.sort();
    assert_eq!(
        flagged,
        [
            ("busy", "main".to_string(), 1_200),
            ("busy", "queue".to_string(), 1_200)
        ]
    );
    assert_eq!(r.locks.held, 2, "both locks are read and counted");
    let warning = r
        .warnings
        .iter()
        .find(|w| w.starts_with("lock \"busy\" (table queue): a read passes 1200 tombstones"))
        .unwrap_or_else(|| panic!("{:?}", r.warnings));
    assert!(warning.contains("one tombstone per process"), "{warning}");
    assert!(!r.unsafe_state);
    assert!(r.human().contains("a read passes 1200 tombstones"));
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["tombstone_heavy_locks"][0]["tombstones"], 1_200);
}

/// Issue 31 item 4f: `status` says how far apart the Cassandra nodes'
/// clocks may be with the fleet's lease settings — the smaller of the
/// holders' and the waiters' tolerance.
#[tokio::test]
async fn status_says_how_far_apart_node_clocks_may_be() {
    use crate::render::Human;
    let (mut env, _) = env();
    let r = status(&env, |_| {}).await.unwrap();
    assert_eq!(
        r.clocks,
        ClockTolerance {
            node_skew_tolerance_ms: 1_000,
            holders_ms: 29_000,
            waiters_ms: 1_000,
        }
    );
    assert!(
        r.human().contains(
            "clocks     Cassandra nodes must agree within 1.0s (waiters' cells 1.0s, holders' 29.0s"
        ),
        "{}",
        r.human()
    );
    env.settings.lock.lease_ttl = Duration::from_secs(5);
    env.settings.lock.renew_every = Duration::from_secs(1);
    env.settings.lock.queue.waiting_ttl = Duration::from_secs(10);
    let r = status(&env, |_| {}).await.unwrap();
    assert_eq!(r.clocks.node_skew_tolerance_ms, 1_500, "a 5 s lease");
}

/// Issue 21 S3: the node row reuses [`NodeInfo`] and keeps the JSON it
/// had when it copied its fields. The expected rows are the ones the
/// copying row wrote (before the change), key for key: the displayed
/// `acting_version` is [`NodeInfo::acting`] (the seen version for a
/// node that does not report one), and the registry's own
/// `started_at`, `last_used` and `lease` are not shown.
#[test]
fn a_node_row_keeps_every_key_and_value_of_the_copied_row() {
    use lockshift_decide::registry::{LeasePromise, LiveNode};
    use lockshift_decide::rollout::StageRecord;
    let (env, clock) = env();
    let now = clock.now();
    let ago = |d: Duration| Timestamp::from_micros(now.as_micros() - d.as_micros() as i64);
    let info = |node: &str, incarnation: Option<&str>| NodeInfo {
        node: node.into(),
        version: "0.1.0".into(),
        configured_mode: Mode::Auto,
        effective: Algorithm::Combined,
        degraded: true,
        seen_stage: Some(Stage::Dual),
        seen_version: Some(7),
        started_at: 1_699_999_000_000_000,
        incarnation: incarnation.map(Into::into),
        last_used: BTreeMap::from([(Algorithm::Combined, 1_699_999_999_000_000)]),
        lease: Some(LeasePromise {
            ttl_ms: 30_000,
            renew_every_ms: 10_000,
        }),
        acting_version: None,
        bound: BTreeMap::from([(Algorithm::Legacy, 1), (Algorithm::Queue, 2)]),
        view_expired: true,
        datacenter: None,
        homes: None,
        stage_valid_for_ms: None,
        registry_ttl_ms: None,
        left: false,
        clock: None,
        host_clock: None,
    };
    // A node that predates `acting_version`: the row shows its seen
    // version.
    let first = info("web-1", Some("0f3a"));
    // Acquisitions bound to an older stage: the row shows that one.
    let second = NodeInfo {
        acting_version: Some(5),
        view_expired: false,
        bound: BTreeMap::new(),
        ..info("web-1", Some("77c2"))
    };
    // A build that predates incarnations and never read a stage.
    let third = NodeInfo {
        configured_mode: Mode::Legacy,
        effective: Algorithm::Legacy,
        degraded: false,
        seen_stage: None,
        seen_version: None,
        lease: None,
        last_used: BTreeMap::new(),
        view_expired: false,
        bound: BTreeMap::new(),
        ..info("batch-2", None)
    };
    let live = |info: NodeInfo, age: Duration, ttl_left: Option<Duration>| LiveNode {
        column: info.column(),
        info,
        heartbeat_at: ago(age),
        ttl_left,
    };
    let evidence = Evidence {
        current: StageRecord::initial(),
        nodes: vec![
            live(
                first,
                Duration::from_millis(2_500),
                Some(Duration::from_millis(27_500)),
            ),
            // Silent: surely older than the 30 s heartbeat TTL, the 5 s
            // margin allowed for a process without a clock reading.
            live(second, Duration::from_secs(36), None),
            live(third, Duration::ZERO, Some(Duration::from_secs(30))),
        ],
        unreadable_nodes: Vec::new(),
        census: lockshift_decide::census::Census::default(),
        activity: BTreeMap::new(),
        now,
    };
    let report = build(&env, evidence, Vec::new());

    // Written by the row that copied `NodeInfo`'s fields, in its order.
    let before = serde_json::json!([
        {
            "node": "web-1", "incarnation": "0f3a", "processes_under_id": 2,
            "version": "0.1.0", "configured_mode": "auto", "effective": "combined",
            "degraded": true, "seen_stage": "dual", "seen_version": 7,
            "heartbeat_age_ms": 2500, "ttl_left_ms": 27500, "acting_version": 7,
            "bound": {"legacy": 1, "queue": 2}, "view_expired": true, "silent": false
        },
        {
            "node": "web-1", "incarnation": "77c2", "processes_under_id": 2,
            "version": "0.1.0", "configured_mode": "auto", "effective": "combined",
            "degraded": true, "seen_stage": "dual", "seen_version": 7,
            "heartbeat_age_ms": 36000, "ttl_left_ms": null, "acting_version": 5,
            "bound": {}, "view_expired": false, "silent": true
        },
        {
            "node": "batch-2", "incarnation": null, "processes_under_id": 1,
            "version": "0.1.0", "configured_mode": "legacy", "effective": "legacy",
            "degraded": false, "seen_stage": null, "seen_version": null,
            "heartbeat_age_ms": 0, "ttl_left_ms": 30000, "acting_version": null,
            "bound": {}, "view_expired": false, "silent": false
        }
    ]);
    let json = serde_json::to_value(&report).unwrap();
    let (rows, before) = (
        json["nodes"].as_array().unwrap(),
        before.as_array().unwrap(),
    );
    assert_eq!(rows.len(), before.len(), "{json:#}");
    for (i, (row, old)) in rows.iter().zip(before).enumerate() {
        let (row, old) = (row.as_object().unwrap(), old.as_object().unwrap());
        assert_eq!(old.len(), 15, "#{i}: the old row had 15 keys");
        for (key, value) in old {
            assert_eq!(row.get(key), Some(value), "#{i}: key {key}: {row:#?}");
        }
        // Keys are only ever added (invariant 3 of `lib.rs`): issue 29's
        // datacenter fields, issue 40's registry TTL and issue 41's clock
        // reading, null for a row that says nothing of them.
        let added: Vec<&String> = row.keys().filter(|k| !old.contains_key(*k)).collect();
        assert_eq!(
            added,
            [
                "clock",
                "datacenter",
                "homes",
                "registry_ttl_ms",
                "stage_valid_for_ms"
            ],
            "#{i}: keys added"
        );
        assert!(
            added.iter().all(|k| row[k.as_str()].is_null()),
            "#{i}: {row:#?}"
        );
    }

    // The human table, as the copying row printed it.
    use crate::render::Human;
    let text = report.human();
    let table = [
        "  node                  configured  effective                            seen stage                          heartbeat           clock − database's  version",
        "  web-1 (process 0f3a)  auto        combined (cannot confirm the stage)  dual v7                             2.5s ago            not reported        0.1.0",
        "  web-1 (process 77c2)  auto        combined (degraded)                  dual v7 (acquisitions bound to v5)  36.0s ago (silent)  not reported        0.1.0",
        "  batch-2               legacy      legacy                               -                                   0ms ago             not reported        0.1.0",
    ]
    .join("\n");
    assert!(text.contains(&format!("\n{table}\n")), "{text}");
    assert!(
        text.contains(
            "\nnodes      3 live; configured: 2 auto, 1 legacy; effective: 2 combined, 1 legacy\n"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn empty_store_is_legacy_and_safe_to_advance() {
    let (env, _) = env();
    let r = status(&env, |_| {}).await.unwrap();
    assert_eq!(r.stage.as_ref().map(|s| s.stage), Some(Stage::Legacy));
    assert!(r.fleet_rows.read);
    assert!(r.nodes.is_empty());
    assert_eq!(r.locks.held, 0);
    let next = r.next.unwrap();
    assert_eq!(next.to, Stage::Dual);
    assert!(next.safe, "{:?}", next.because);
}

#[tokio::test]
async fn a_legacy_node_and_holder_block_dual() {
    let (env, clock) = env();
    let info = NodeInfo {
        node: "web-1".into(),
        version: "0.1.0".into(),
        configured_mode: Mode::Legacy,
        effective: Algorithm::Legacy,
        degraded: false,
        seen_stage: Some(Stage::Legacy),
        seen_version: Some(0),
        started_at: 0,
        incarnation: None,
        last_used: BTreeMap::new(),
        lease: None,
        acting_version: Some(0),
        bound: BTreeMap::new(),
        view_expired: false,
        datacenter: None,
        homes: None,
        stage_valid_for_ms: None,
        registry_ttl_ms: None,
        left: false,
        clock: None,
        host_clock: None,
    };
    heartbeat(
        env.store.as_ref(),
        clock.as_ref(),
        &info,
        Ttl::from_secs(30).unwrap(),
    )
    .await
    .unwrap();
    env.store
        .write(
            schema::MAIN,
            "acct",
            &[CellWrite::new("web-1/0000000000000001", b"legacy".to_vec())],
            WriteOptions::at(clock.now()),
        )
        .await
        .unwrap();
    clock.advance(Duration::from_secs(2));
    let r = status(&env, |_| {}).await.unwrap();
    assert_eq!(r.nodes.len(), 1);
    assert_eq!(r.nodes[0].heartbeat_age_ms, 2000);
    assert_eq!(r.locks.held_by["legacy"], 1);
    assert_eq!(r.legacy_activity.cells_now, 1);
    let next = r.next.unwrap();
    assert!(!next.safe);
    assert!(
        next.because
            .iter()
            .any(|b| b.contains("node web-1 runs legacy"))
    );
}

/// Issue 19 (B): a `main` cell that is not lockshift's own — a binary
/// that predates lockshift, any column and value — beside a queue
/// holder is the unsafe pair: exit 5, as for a lockshift legacy holder.
#[tokio::test]
async fn a_foreign_main_cell_beside_a_queue_holder_is_unsafe() {
    let (env, clock) = env();
    let put = |column: &'static str, value: &'static [u8]| {
        let store = env.store.clone();
        let at = clock.now();
        async move {
            store
                .write(
                    schema::MAIN,
                    "acct",
                    &[CellWrite::new(column, value.to_vec())],
                    WriteOptions::at(at),
                )
                .await
                .unwrap();
        }
    };
    put("q1/0000000000000001", b"queue").await;
    let quiet = status(&env, |_| {}).await.unwrap();
    assert!(!quiet.unsafe_state, "{:?}", quiet.warnings);
    // Old-style cells: not lockshift's shape, whatever the value.
    put("3f2504e0-4f89-11d3-9a0c-0305e82c3301", b"anything").await;
    put("worker-7", b"").await;
    let r = status(&env, |_| {}).await.unwrap();
    assert_eq!(r.locks.held_by["foreign"], 2);
    assert_eq!(r.locks.held_by["queue"], 1);
    assert!(r.unsafe_state, "{:?}", r.warnings);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.starts_with("UNSAFE") && w.contains("predate lockshift")),
        "{:?}",
        r.warnings
    );
}
