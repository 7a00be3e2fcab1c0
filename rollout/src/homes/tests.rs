use std::sync::Arc;
use std::time::Duration;

use lockshift_decide::home::{MoveAsk, Rule};
use lockshift_lock::LeaseSettings;
use lockshift_store::{
    CellWrite, Datacenter, FaultyStore, MemoryStore, Route, RowQuery, SharedClock, SharedStore,
    Store, StoreErrorKind, TokioClock, WriteOptions, schema,
};

use super::*;
use crate::settings::RolloutSettings;

fn dc(name: &str) -> Datacenter {
    Datacenter::new(name).unwrap()
}

/// A dc1/dc2 cluster on the paused clock.
fn cluster() -> (Arc<MemoryStore>, SharedClock) {
    let clock = Arc::new(TokioClock::new());
    let cluster = MemoryStore::with_clock(clock.clone())
        .with_datacenters(vec![(dc("dc1"), 3), (dc("dc2"), 3)], 1);
    (Arc::new(cluster), clock)
}

/// A process in `place` whose settings name `configured`: its counting
/// client, its view, and its router.
fn process(
    cluster: &MemoryStore,
    clock: &SharedClock,
    place: &str,
    configured: Configured,
) -> (Arc<FaultyStore<MemoryStore>>, Arc<HomesView>, SharedStore) {
    let client = Arc::new(FaultyStore::new(cluster.client_in(&dc(place)).unwrap(), 7));
    let view = Arc::new(HomesView::new(
        clock.clone(),
        Some(dc(place)),
        configured,
        Duration::from_secs(30),
    ));
    let router: SharedStore = Arc::new(HomesRouter::new(client.clone(), view.clone()));
    (client, view, router)
}

fn homed_in(place: &str) -> Configured {
    Configured::new(Some(dc(place)), [])
}

async fn write_main(
    store: &SharedStore,
    lock: &str,
    column: &str,
) -> Result<(), lockshift_store::StoreError> {
    store
        .write(
            schema::MAIN,
            lock,
            &[CellWrite::new(column, b"v".to_vec())],
            WriteOptions::at(lockshift_store::Timestamp::from_micros(10)),
        )
        .await
}

#[tokio::test(start_paused = true)]
async fn a_lock_is_reached_at_its_home_from_either_side_and_refused_when_the_home_is_out_of_reach()
{
    let (cluster, clock) = cluster();
    let (_, home_view, home) = process(&cluster, &clock, "dc1", homed_in("dc1"));
    // Nothing recorded, the settings name a home: refused, naming it.
    let e = write_main(&home, "a", "x").await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::HomeUnreachable, "{e}");
    assert!(e.to_string().contains("homed in datacenter dc1"), "{e}");
    // The first refresh seeds the home and confirms it.
    let report = refresh(&home.clone(), &home_view).await;
    let now = clock.now();
    let seeded = seed(&home, &home_view, &report, "me", Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(seeded.len(), 1);
    assert!(
        seeded[0].record.serves_from >= now.saturating_add(Duration::from_secs(60)).as_micros(),
        "in several datacenters a seed serves after the wait, alone or not (H5)"
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    refresh(&home, &home_view).await;
    write_main(&home, "a", "home").await.unwrap();

    // A far process learns the home, and reaches it across the link.
    let (far_client, far_view, far) = process(&cluster, &clock, "dc2", Configured::default());
    refresh(&far, &far_view).await;
    write_main(&far, "a", "far").await.unwrap();
    let counts = far_client.counts_by_datacenter();
    assert_eq!(
        counts.get("dc1"),
        Some(&2),
        "the homes read and the write: {counts:?}"
    );
    let at_home = cluster
        .client_in(&dc("dc1"))
        .unwrap()
        .read_via(
            &Route::Datacenter(dc("dc1")),
            schema::MAIN,
            "a",
            &RowQuery::all(),
        )
        .await
        .unwrap();
    assert_eq!(at_home.len(), 2);

    // Split: the home side goes on; the far side is refused once its view
    // lapses — at once, without a request of the lock's.
    cluster.cut_link(&dc("dc1"), &dc("dc2"));
    tokio::time::sleep(Duration::from_secs(31)).await;
    refresh(&home, &home_view).await;
    refresh(&far, &far_view).await;
    write_main(&home, "a", "home2").await.unwrap();
    // The first refused request reads the home's record on the spot (one
    // read of `rollout`, twice for a transient failure, which fails); none
    // of the lock's own is sent.
    let before = far_client.op_counts();
    let e = write_main(&far, "a", "far2").await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::HomeUnreachable, "{e}");
    assert!(
        e.to_string().contains("(in dc2) has not reached for 31s"),
        "{e}"
    );
    assert!(!e.is_retryable(), "the far side fails fast");
    let sent = far_client.op_counts().since(&before);
    assert_eq!(
        sent.total(),
        sent.get(schema::ROLLOUT, lockshift_store::OpKind::Read),
        "{sent}"
    );
    // Within the next second, nothing at all is sent.
    let before = far_client.op_counts();
    let e = write_main(&far, "a", "far3").await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::HomeUnreachable, "{e}");
    assert_eq!(far_client.op_counts().since(&before).total(), 0);
    // Unhomed rows take the default route (here: QUORUM, unavailable).
    let e = far
        .read(schema::SCRATCH, "x", &RowQuery::all())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
}

/// A registry row of `other/1`, from a build that knows homes or not.
async fn register_other(router: &SharedStore, knows_homes: bool) {
    use lockshift_decide::algorithm::{Algorithm, Mode};
    let info = lockshift_decide::registry::NodeInfo {
        node: "other".to_string(),
        version: "0.1.0".to_string(),
        configured_mode: Mode::Auto,
        effective: Algorithm::Combined,
        degraded: false,
        seen_stage: None,
        seen_version: None,
        started_at: 0,
        incarnation: Some("1".to_string()),
        last_used: Default::default(),
        lease: None,
        acting_version: None,
        bound: Default::default(),
        view_expired: false,
        datacenter: None,
        homes: knows_homes.then(Vec::new),
        stage_valid_for_ms: None,
        registry_ttl_ms: None,
        left: false,
        clock: None,
        host_clock: None,
    };
    router
        .write_via(
            &Route::Datacenter(dc("dc1")),
            schema::NODES,
            lockshift_decide::registry::LEGACY_REGISTRY_ROW,
            &[CellWrite::new(
                "other/1",
                serde_json::to_vec(&info).unwrap(),
            )],
            WriteOptions::at(lockshift_store::Timestamp::from_micros(5)),
        )
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_seed_waits_for_a_registered_build_that_does_not_know_homes() {
    let (cluster, clock) = cluster();
    let (_, view, router) = process(&cluster, &clock, "dc1", homed_in("dc1"));
    register_other(&router, false).await;
    let report = refresh(&router, &view).await;
    let seeded = seed(&router, &view, &report, "me", Duration::from_secs(126))
        .await
        .unwrap();
    assert!(seeded.is_empty(), "{seeded:?}");
    assert!(refresh(&router, &view).await.read.contains(&dc("dc1")));
    assert!(view.homes().record(&Rule::Default).is_none());
}

#[tokio::test(start_paused = true)]
async fn a_seed_beside_running_processes_serves_after_the_wait() {
    let (cluster, clock) = cluster();
    let (_, view, router) = process(&cluster, &clock, "dc1", homed_in("dc1"));
    register_other(&router, true).await;
    let report = refresh(&router, &view).await;
    let wait = Duration::from_secs(126);
    let seeded = seed(&router, &view, &report, "me", wait).await.unwrap();
    assert_eq!(seeded.len(), 1, "{seeded:?}");
    assert!(seeded[0].record.serves_from > 0);
    refresh(&router, &view).await;
    let e = write_main(&router, "a", "x").await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::HomeMoving, "{e}");
    assert!(e.is_retryable(), "a move finishes by itself");
    assert!(!e.was_sent(), "{e}");
    assert!(
        e.retry_after()
            .is_some_and(|d| d <= wait && d > wait - Duration::from_secs(2)),
        "{:?}",
        e.retry_after()
    );
    assert!(
        e.to_string()
            .starts_with("write on table main was not sent: lock \"a\"")
            && e.to_string().contains("which takes over in 2m"),
        "{e}"
    );
    tokio::time::sleep(wait).await;
    refresh(&router, &view).await;
    write_main(&router, "a", "x").await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn moves_go_through_the_current_home_or_are_forced_without_it() {
    let (cluster, clock) = cluster();
    let (_, view, router) = process(&cluster, &clock, "dc1", homed_in("dc1"));
    let report = refresh(&router, &view).await;
    seed(&router, &view, &report, "me", Duration::ZERO)
        .await
        .unwrap();
    refresh(&router, &view).await;
    let rollout = RolloutSettings::default();
    let lease = LeaseSettings::default();
    let request = |to: &str, force, dry_run| MoveRequest {
        ask: MoveAsk {
            rule: Rule::Default,
            to: dc(to),
            force,
        },
        dry_run,
        by: "op".into(),
    };
    let dry = move_home(
        &router,
        &clock,
        &rollout,
        &lease,
        request("dc2", false, true),
    )
    .await
    .unwrap();
    assert!(
        dry.refusals.is_empty() && !dry.applied,
        "{:?}",
        dry.refusals
    );
    assert_eq!(dry.wait, move_wait(&rollout, lease.lease_ttl, []));
    let planned = move_home(
        &router,
        &clock,
        &rollout,
        &lease,
        request("dc2", false, false),
    )
    .await
    .unwrap();
    assert!(planned.applied, "{:?}", planned.refusals);
    assert_eq!(
        planned.written[0],
        (dc("dc1"), None),
        "through the current home first"
    );
    assert_eq!(planned.record.as_ref().map(|r| r.version), Some(2));

    // dc2 is lost now: a planned move back needs it, a forced one does not.
    tokio::time::sleep(planned.wait).await;
    cluster.stop_datacenter(&dc("dc2"));
    let refused = move_home(
        &router,
        &clock,
        &rollout,
        &lease,
        request("dc1", false, false),
    )
    .await
    .unwrap();
    assert!(!refused.applied);
    assert!(
        refused.refusals[0].contains("--force"),
        "{:?}",
        refused.refusals
    );
    let forced = move_home(
        &router,
        &clock,
        &rollout,
        &lease,
        request("dc1", true, false),
    )
    .await
    .unwrap();
    assert!(forced.applied, "{:?}", forced.refusals);
    assert_eq!(
        forced.written[0],
        (dc("dc1"), None),
        "to the new home first"
    );
    assert!(
        forced
            .record
            .as_ref()
            .is_some_and(|r| r.forced && r.version == 3)
    );
    // What each datacenter holds: the lost one is named, not written — a
    // forced move is made exactly when it does not answer, so it is not
    // incomplete for it (issue 42 item 6).
    let holds: Vec<_> = forced
        .datacenters
        .iter()
        .map(|d| (d.datacenter.to_string(), d.holds, d.error.is_some()))
        .collect();
    assert_eq!(
        holds,
        [
            ("dc1".to_string(), Holds::Serving, false),
            ("dc2".to_string(), Holds::Unknown, true)
        ]
    );
    assert_eq!(forced.incomplete, None);
    // The fleet's activity is recorded at the new home until it serves.
    let activity = router
        .read_via(
            &Route::Datacenter(dc("dc1")),
            schema::ROLLOUT,
            lockshift_decide::registry::ACTIVITY_ROW,
            &RowQuery::all(),
        )
        .await
        .unwrap();
    assert_eq!(activity.len(), 2, "{activity:?}");
}

/// H5: with no home recorded, a lock takes the store's default route only
/// while the homes row of every datacenter was read lately — the first
/// request reads them on the spot — and is refused, naming the datacenter
/// not read, once one is out of reach.
#[tokio::test(start_paused = true)]
async fn without_a_home_a_lock_takes_the_default_route_only_while_every_datacenter_is_read() {
    let (cluster, clock) = cluster();
    let (client, _, router) = process(&cluster, &clock, "dc1", Configured::default());
    let before = client.op_counts();
    write_main(&router, "a", "x").await.unwrap();
    let sent = client.op_counts().since(&before);
    assert_eq!(
        sent.get(schema::ROLLOUT, lockshift_store::OpKind::Read),
        2,
        "both datacenters' homes, on the spot: {sent}"
    );
    cluster.cut_link(&dc("dc1"), &dc("dc2"));
    tokio::time::sleep(Duration::from_secs(31)).await;
    let e = write_main(&router, "a", "y").await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::HomeUnreachable, "{e}");
    assert!(!e.is_retryable(), "{e}");
    assert!(
        e.to_string()
            .contains("has not read the homes of datacenter dc2 (for 31s)"),
        "{e}"
    );
    cluster.restore_link(&dc("dc1"), &dc("dc2"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    write_main(&router, "a", "z").await.unwrap();
}

/// H5: a seed reaches every other datacenter before its home; one that
/// cannot reach them all records nothing at its home, so no process
/// routes by it.
#[tokio::test(start_paused = true)]
async fn a_seed_that_cannot_reach_every_datacenter_records_nothing_at_its_home() {
    let (cluster, clock) = cluster();
    let (_, view, router) = process(&cluster, &clock, "dc1", homed_in("dc1"));
    cluster.cut_link(&dc("dc1"), &dc("dc2"));
    let report = refresh(&router, &view).await;
    assert_eq!(report.read, vec![dc("dc1")]);
    let e = seed(&router, &view, &report, "me", Duration::from_secs(60))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("dc2"), "{e}");
    let at_home = router
        .read_via(
            &Route::Datacenter(dc("dc1")),
            schema::ROLLOUT,
            lockshift_decide::home::HOMES_ROW,
            &RowQuery::all(),
        )
        .await
        .unwrap();
    assert!(at_home.is_empty(), "{at_home:?}");
}

/// A homes cell that does not decode refuses the locks its rule could
/// home, and every move, naming the cell; the other locks go on.
#[tokio::test(start_paused = true)]
async fn an_unreadable_homes_cell_refuses_the_locks_it_could_home() {
    let (cluster, clock) = cluster();
    let (_, view, router) = process(&cluster, &clock, "dc1", homed_in("dc1"));
    let report = refresh(&router, &view).await;
    seed(&router, &view, &report, "me", Duration::ZERO)
        .await
        .unwrap();
    router
        .write_via(
            &Route::Datacenter(dc("dc1")),
            schema::ROLLOUT,
            lockshift_decide::home::HOMES_ROW,
            &[CellWrite::new("prefix:eu/", b"{not json".to_vec())],
            WriteOptions::at(lockshift_store::Timestamp::from_micros(5)),
        )
        .await
        .unwrap();
    refresh(&router, &view).await;
    write_main(&router, "us/1", "x").await.unwrap();
    let e = write_main(&router, "eu/1", "x").await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::HomeUnreachable, "{e}");
    assert!(
        e.to_string()
            .contains("the homes record \"prefix:eu/\" that datacenter"),
        "{e}"
    );
    let report = move_home(
        &router,
        &clock,
        &RolloutSettings::default(),
        &LeaseSettings::default(),
        MoveRequest {
            ask: MoveAsk {
                rule: Rule::Default,
                to: dc("dc2"),
                force: false,
            },
            dry_run: true,
            by: "op".into(),
        },
    )
    .await
    .unwrap();
    assert!(
        report
            .refusals
            .iter()
            .any(|r| r.contains("does not decode")),
        "{:?}",
        report.refusals
    );
}

/// H5: a move brings every rule the moved one covers to the new home
/// before the move lands, at the stamp each had — so a process that
/// confirms the move there learns of them in the same read.
#[tokio::test(start_paused = true)]
async fn a_move_brings_the_rules_it_covers_to_the_new_home() {
    let (cluster, clock) = cluster();
    let (_, view, router) = process(&cluster, &clock, "dc1", homed_in("dc1"));
    let report = refresh(&router, &view).await;
    seed(&router, &view, &report, "me", Duration::ZERO)
        .await
        .unwrap();
    // "eu/" is recorded while dc2 is down; dc2 comes back without it.
    cluster.stop_datacenter(&dc("dc2"));
    let eu = lockshift_decide::home::HomeRecord {
        version: 1,
        datacenter: dc("dc1"),
        serves_from: 0,
        moved_from: None,
        forced: false,
        at: 0,
        by: "op".into(),
        pending: false,
    };
    router
        .write_via(
            &Route::Datacenter(dc("dc1")),
            schema::ROLLOUT,
            lockshift_decide::home::HOMES_ROW,
            &[CellWrite::new(
                "prefix:eu/",
                serde_json::to_vec(&eu).unwrap(),
            )],
            WriteOptions::at(lockshift_store::Timestamp::from_micros(7)),
        )
        .await
        .unwrap();
    cluster.start_datacenter(&dc("dc2"), lockshift_store::HintDelivery::Held);
    let read_dc2 = || async {
        router
            .read_via(
                &Route::Datacenter(dc("dc2")),
                schema::ROLLOUT,
                lockshift_decide::home::HOMES_ROW,
                &RowQuery::all(),
            )
            .await
            .unwrap()
    };
    assert!(!read_dc2().await.iter().any(|c| c.column == "prefix:eu/"));
    let moved = move_home(
        &router,
        &clock,
        &RolloutSettings::default(),
        &LeaseSettings::default(),
        MoveRequest {
            ask: MoveAsk {
                rule: Rule::Default,
                to: dc("dc2"),
                force: false,
            },
            dry_run: false,
            by: "op".into(),
        },
    )
    .await
    .unwrap();
    assert!(moved.applied, "{:?}", moved.refusals);
    let cells = read_dc2().await;
    let copied = cells.iter().find(|c| c.column == "prefix:eu/");
    assert!(
        copied.is_some_and(|c| c.writetime == lockshift_store::Timestamp::from_micros(7)),
        "{cells:?}"
    );
}

/// H6: a seed or a move is first written pending, and serves the wait
/// after that write's acknowledgement — however slow it was — never after
/// the time the writer read before sending it.
#[tokio::test(start_paused = true)]
async fn a_seed_or_a_move_serves_the_wait_after_its_pending_write_is_acknowledged() {
    let (cluster, clock) = cluster();
    // Every write of the `rollout` table (the homes row's) takes 1.5 s.
    let slow = |place: &str| {
        let client = FaultyStore::new(cluster.client_in(&dc(place)).unwrap(), 7).with_plan(
            lockshift_store::FaultPlan {
                slow: Some((
                    lockshift_store::FaultScope {
                        tables: Some(vec![schema::ROLLOUT]),
                        ops: Some(vec![lockshift_store::OpKind::Write]),
                    },
                    Duration::from_millis(1_500),
                )),
                ..Default::default()
            },
        );
        let view = Arc::new(HomesView::new(
            clock.clone(),
            Some(dc(place)),
            homed_in("dc1"),
            Duration::from_secs(30),
        ));
        let router: SharedStore = Arc::new(HomesRouter::new(Arc::new(client), view.clone()));
        (view, router)
    };
    let (view, router) = slow("dc1");
    let report = refresh(&router, &view).await;
    let wait = Duration::from_secs(60);
    let started = clock.now();
    let seeded = seed(&router, &view, &report, "me", wait).await.unwrap();
    // dc2 (written first, pending) answered after 1.5 s: the wait counts
    // from then.
    let record = &seeded[0].record;
    assert!(!record.pending);
    assert!(
        record.serves_from
            >= started
                .saturating_add(wait + Duration::from_millis(1_500))
                .as_micros(),
        "{record:?}"
    );
    let cell = |dc_name: &'static str| {
        let router = router.clone();
        async move {
            router
                .read_via(
                    &Route::Datacenter(dc(dc_name)),
                    schema::ROLLOUT,
                    lockshift_decide::home::HOMES_ROW,
                    &RowQuery::all(),
                )
                .await
                .unwrap()
                .into_iter()
                .find(|c| c.column == "default")
                .unwrap()
        }
    };
    for dc_name in ["dc1", "dc2"] {
        let c = cell(dc_name).await;
        assert_eq!(
            c.writetime,
            lockshift_decide::home::seed_stamp(
                lockshift_store::Timestamp::from_micros(record.at),
                1
            ),
            "{dc_name}"
        );
        assert_eq!(
            serde_json::from_slice::<lockshift_decide::home::HomeRecord>(&c.value).unwrap(),
            *record
        );
    }

    // A planned move: its pending write, through the home, is slow too.
    tokio::time::sleep(wait + Duration::from_secs(5)).await;
    refresh(&router, &view).await;
    let moved = move_home(
        &router,
        &clock,
        &RolloutSettings::default(),
        &LeaseSettings::default(),
        move_to("dc2"),
    )
    .await
    .unwrap();
    assert!(moved.applied, "{:?}", moved.refusals);
    let record = moved.record.clone().unwrap();
    let acked = lockshift_store::Timestamp::from_micros(record.at);
    assert_eq!(
        record.serves_from,
        acked.saturating_add(moved.wait).as_micros()
    );
    for dc_name in ["dc1", "dc2"] {
        let c = cell(dc_name).await;
        assert_eq!(
            serde_json::from_slice::<lockshift_decide::home::HomeRecord>(&c.value).unwrap(),
            record,
            "{dc_name}"
        );
    }
}

/// A planned move of the default rule to `to`, by "op".
fn move_to(to: &str) -> MoveRequest {
    MoveRequest {
        ask: MoveAsk {
            rule: Rule::Default,
            to: dc(to),
            force: false,
        },
        dry_run: false,
        by: "op".into(),
    }
}

/// H6 (issue 45, item 1): every attempt of a move's first write times out
/// and lands 70 s later. The move says it is incomplete and names what to
/// run; the record that lands is pending, so neither datacenter serves
/// the rule — before the fix it carried a `serves_from` already past and
/// the new home served at once while the old one's processes had not read
/// it. The same move asked again completes it, serving the wait after
/// that write's acknowledgement.
#[tokio::test(start_paused = true)]
async fn a_move_whose_first_write_lands_late_serves_nowhere_until_asked_again() {
    let (cluster, clock) = cluster();
    let (operator, view, router) = process(&cluster, &clock, "dc1", homed_in("dc1"));
    let report = refresh(&router, &view).await;
    seed(&router, &view, &report, "me", Duration::ZERO)
        .await
        .unwrap();
    refresh(&router, &view).await;
    let (_, far_view, far) = process(&cluster, &clock, "dc2", homed_in("dc1"));
    refresh(&far, &far_view).await;
    operator.set_plan(lockshift_store::FaultPlan {
        scope: lockshift_store::FaultScope {
            tables: Some(vec![schema::ROLLOUT]),
            ops: Some(vec![lockshift_store::OpKind::Write]),
        },
        ..Default::default()
    });
    operator.land_late_next(3, Duration::from_secs(70));
    let settings = RolloutSettings::default();
    let lease = LeaseSettings::default();
    let moved = move_home(&router, &clock, &settings, &lease, move_to("dc2"))
        .await
        .unwrap();
    assert!(!moved.applied);
    let incomplete = moved.incomplete.clone().unwrap_or_default();
    assert!(
        incomplete.contains("it may still land")
            && incomplete.contains("run the same move again (`migrate home move --to dc2`)"),
        "{incomplete}"
    );
    // Per datacenter: dc1's write was not acknowledged, dc2 was not written.
    let holds: Vec<_> = moved
        .datacenters
        .iter()
        .map(|d| (d.datacenter.to_string(), d.holds, d.error.is_some()))
        .collect();
    assert_eq!(
        holds,
        [
            ("dc1".to_string(), Holds::Unknown, true),
            ("dc2".to_string(), Holds::Without, false)
        ],
        "{incomplete}"
    );
    // The write lands; every view reads it; nobody serves the rule.
    tokio::time::sleep(Duration::from_secs(75)).await;
    for (v, r) in [(&view, &router), (&far_view, &far)] {
        refresh(r, v).await;
        let e = write_main(r, "x", "a").await.unwrap_err();
        assert!(
            e.to_string().contains("was never confirmed"),
            "{}: {e}",
            v.local().map_or("?".into(), |d| d.to_string())
        );
    }
    // Asked again, the move completes.
    let started = clock.now();
    let moved = move_home(&router, &clock, &settings, &lease, move_to("dc2"))
        .await
        .unwrap();
    assert!(
        moved.applied && moved.incomplete.is_none(),
        "{:?} {:?}",
        moved.refusals,
        moved.incomplete
    );
    assert!(moved.plan.as_ref().is_some_and(|p| p.completes));
    let record = moved.record.unwrap();
    assert_eq!(record.version, 2);
    assert!(
        record.serves_from >= started.saturating_add(moved.wait).as_micros(),
        "{record:?}"
    );
    tokio::time::sleep(moved.wait + Duration::from_secs(1)).await;
    refresh(&far, &far_view).await;
    write_main(&far, "x", "b").await.unwrap();
}

/// A move waits for the longest lease and view any registered process
/// says it has — but refuses, naming the process and the setting, to
/// wait on a value past a day (a typo or a corrupt row would leave the
/// rule "moving" that long).
#[test]
fn a_move_refuses_to_wait_on_what_no_process_could_need() {
    let day = moves::REGISTERED_CEILING;
    let second = Duration::from_secs(1);
    let cases: &[(Option<Duration>, Option<Duration>, Option<&str>)] = &[
        (None, None, None),
        (Some(day), Some(day), None),
        (Some(day + second), None, Some("lock.lease_ttl is 1day")),
        (
            None,
            Some(day * 400),
            Some("rollout.stage_valid_for is 1year"),
        ),
    ];
    for (i, (ttl, valid_for, want)) in cases.iter().enumerate() {
        let got = moves::beyond_ceiling("svc-1/7", (*ttl, *valid_for));
        match want {
            None => assert_eq!(got, None, "case #{i}"),
            Some(words) => {
                let got = got.unwrap_or_default();
                assert!(
                    got.contains("registered process svc-1/7 says its") && got.contains(words),
                    "case #{i}: {got}"
                );
            }
        }
    }
}
