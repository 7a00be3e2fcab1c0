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
    let seeded = seed(&home, &home_view, &report, "me", Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(seeded.len(), 1);
    assert_eq!(seeded[0].record.serves_from, 0, "nobody else registered");
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
    };
    router
        .write_via(
            &Route::Datacenter(dc("dc1")),
            schema::NODES,
            lockshift_decide::registry::REGISTRY_ROW,
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
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
    assert!(e.is_retryable(), "a move finishes by itself");
    assert!(e.to_string().contains("which takes over in 2m"), "{e}");
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
