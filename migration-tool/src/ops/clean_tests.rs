use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use lockshift_decide::clean::{Criteria, PromiseSource, promise_of};
use lockshift_store::{
    CellWrite, DeleteOp, ManualClock, MemoryStore, Op, Request, Response, SharedStore, Table,
    Timestamp, WriteOptions,
};

use lockshift::Settings;

use super::*;

const NOW: i64 = 1_700_000_000_000_000;

/// A store that renews `main`/`acct-race` just before forwarding the
/// first delete: the renewal lands between clean's re-read and its delete.
#[derive(Debug)]
struct RacingStore {
    inner: MemoryStore,
    raced: AtomicBool,
}

#[async_trait]
impl Store for RacingStore {
    async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
        if let Op::Delete(DeleteOp { row, columns, .. }) = request.op
            && row == "acct-race"
            && !self.raced.swap(true, Ordering::SeqCst)
        {
            let renewal = WriteOptions::at(Timestamp::from_micros(NOW));
            let cell = CellWrite::new(columns[0].clone(), b"queue".to_vec());
            self.inner
                .write(request.table, row, &[cell], renewal)
                .await?;
        }
        self.inner.call(request).await
    }
    fn describe(&self) -> String {
        "racing".into()
    }
}

async fn put(store: &dyn Store, table: Table, lock: &str, column: &str, at: i64) {
    store
        .write(
            table,
            lock,
            &[CellWrite::new(column, b"queue".to_vec())],
            WriteOptions::at(Timestamp::from_micros(at)),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn dry_run_then_apply_spares_renewed_cells() {
    let clock = Arc::new(ManualClock::new(Timestamp::from_micros(NOW)));
    let racing = Arc::new(RacingStore {
        inner: MemoryStore::with_clock(clock.clone()),
        raced: AtomicBool::new(false),
    });
    let store: SharedStore = racing.clone();
    let env = Env::new(Settings::default(), store.clone(), clock.clone());
    let old = NOW - 600_000_000;
    put(
        store.as_ref(),
        schema::MAIN,
        "acct-stale",
        "n1/0000000000000001",
        old,
    )
    .await;
    put(
        store.as_ref(),
        schema::SHADOW,
        "acct-stale",
        "n1/0000000000000001",
        old,
    )
    .await;
    put(
        store.as_ref(),
        schema::MAIN,
        "acct-race",
        "n2/0000000000000002",
        old,
    )
    .await;
    put(
        store.as_ref(),
        schema::MAIN,
        "acct-renewed",
        "n3/0000000000000003",
        old,
    )
    .await;
    put(
        store.as_ref(),
        schema::MAIN,
        "acct-live",
        "n4/0000000000000004",
        NOW - 1_000_000,
    )
    .await;

    // These cells have no TTL: only --stale-after judges them.
    let options = CleanOptions::new(Some(Duration::from_secs(30)), 3, false, 1).unwrap();
    let dry = clean(&env, &options, false, |_| {}).await.unwrap();
    assert!(!dry.applied);
    assert_eq!(dry.summary.found, 4);
    assert!(dry.cells.iter().all(|c| c.action == Action::WouldDelete));
    assert_eq!(
        store
            .read(schema::MAIN, "acct-stale", &RowQuery::all())
            .await
            .unwrap()
            .len(),
        1,
        "a dry run deletes nothing"
    );

    // Renewed after the scan but before the delete: skipped by the re-read.
    let mut progress = 0;
    let (mut report, candidates, _) = scan(&env, &options, Duration::from_secs(5), &mut |_| {})
        .await
        .unwrap();
    put(
        store.as_ref(),
        schema::MAIN,
        "acct-renewed",
        "n3/0000000000000003",
        NOW,
    )
    .await;
    for (i, cell) in report.cells.iter_mut().enumerate() {
        (cell.action, cell.error) = delete_if_unchanged(store.as_ref(), &candidates[i].0).await;
        progress += 1;
    }
    assert_eq!(progress, 4);
    let s = summarise(&report.cells);
    assert_eq!(
        (s.deleted, s.skipped_renewed, s.failed),
        (3, 1, 0),
        "{report:#?}"
    );
    // acct-race was renewed between the re-read and the delete: the
    // delete at the old writetime left the renewal alone.
    assert!(racing.raced.load(Ordering::SeqCst));
    let race = store
        .read(schema::MAIN, "acct-race", &RowQuery::all())
        .await
        .unwrap();
    assert_eq!(race.len(), 1, "the racing renewal survives");
    assert_eq!(race[0].writetime, Timestamp::from_micros(NOW));
    for lock in ["acct-renewed", "acct-live"] {
        assert_eq!(
            store
                .read(schema::MAIN, lock, &RowQuery::all())
                .await
                .unwrap()
                .len(),
            1
        );
    }
    assert!(
        store
            .read(schema::MAIN, "acct-stale", &RowQuery::all())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .read(schema::SHADOW, "acct-stale", &RowQuery::all())
            .await
            .unwrap()
            .is_empty()
    );
}

#[test]
fn nonsense_thresholds_are_refused() {
    let e = CleanOptions::new(Some(Duration::from_millis(10)), 3, false, 10).unwrap_err();
    assert!(e.to_string().contains("at least 1s"), "{e}");
    assert!(crate::is_usage_error(&e));
    let e = CleanOptions::new(None, 1, false, 10).unwrap_err();
    assert!(e.to_string().contains("at least 2"), "{e}");
}

/// Issue 11 item 2 and issue 23: a cell is judged by its own owner's
/// promise and the registry, never by the operator's settings (here
/// the defaults: renew every 10 s). The owner's process renews every
/// 60 s with a 5 min TTL; --stale-after speaks only for cells without a
/// TTL. The claim the issue found untrue: a cell within its promise
/// survives even --force (schedules with real lockers:
/// `tests/clean_schedules.rs`).
#[tokio::test(start_paused = true)]
async fn live_owners_are_judged_by_their_promise_and_kept() {
    use lockshift_decide::algorithm::{Mode, Stage};
    use lockshift_decide::registry::{LeasePromise, NodeInfo};
    use lockshift_lock::{Incarnation, NodeId, OwnerId};
    use lockshift_rollout::registry::heartbeat;
    let clock = Arc::new(ManualClock::new(Timestamp::from_micros(NOW)));
    let store: SharedStore = Arc::new(MemoryStore::with_clock(clock.clone()));
    let env = Env::new(Settings::default(), store.clone(), clock.clone());
    let incarnation = Incarnation::from_seed(1);
    let info = NodeInfo {
        node: "slow".into(),
        version: "0.1.0".into(),
        configured_mode: Mode::Combined,
        effective: Algorithm::Combined,
        degraded: false,
        seen_stage: Some(Stage::Legacy),
        seen_version: Some(0),
        started_at: 0,
        incarnation: Some(incarnation.to_string()),
        last_used: std::collections::BTreeMap::new(),
        lease: Some(LeasePromise {
            ttl_ms: 300_000,
            renew_every_ms: 60_000,
        }),
        acting_version: Some(0),
        bound: std::collections::BTreeMap::new(),
        view_expired: false,
        datacenter: None,
        homes: None,
        stage_valid_for_ms: None,
        registry_ttl_ms: None,
        left: false,
        clock: None,
        host_clock: None,
    };
    let ttl = lockshift_store::Ttl::from_secs(300).unwrap();
    heartbeat(store.as_ref(), clock.as_ref(), &info, ttl)
        .await
        .unwrap();
    let slot = |node: &str, n| {
        OwnerId::for_slot(&NodeId::new(node).unwrap(), incarnation, n)
            .as_str()
            .to_string()
    };
    let cell = |lock: &'static str, owner: String, age_s: i64| {
        let store = store.clone();
        async move {
            store
                .write(
                    schema::MAIN,
                    lock,
                    &[CellWrite::new(owner, b"combined".to_vec())],
                    WriteOptions::at(Timestamp::from_micros(NOW - age_s * 1_000_000)).with_ttl(ttl),
                )
                .await
                .unwrap();
        }
    };
    // 36 s without renewal: within a 60 s promise (the case).
    cell("acct-36s", slot("slow", 1), 36).await;
    // 200 s: overdue by its promise (3 × 60 s + the 5 s skew margin),
    // but its process is live.
    cell("acct-200s", slot("slow", 2), 200).await;
    // 200 s, no process: its 5 min TTL is its promise (renewal within
    // 2.5 min), and --stale-after 30s does not shorten it.
    cell("acct-gone", slot("gone", 3), 200).await;
    let options = CleanOptions::new(Some(Duration::from_secs(30)), 3, false, 10).unwrap();
    let r = clean(&env, &options, true, |_| {}).await.unwrap();
    let actions: Vec<(&str, Action)> = r
        .cells
        .iter()
        .map(|c| (c.lock.as_str(), c.action))
        .collect();
    assert_eq!(actions, [("acct-200s", Action::KeptOwnerLive)], "{r:#?}");
    assert_eq!(r.summary.deleted, 0);
    for lock in ["acct-36s", "acct-200s", "acct-gone"] {
        let cells = store
            .read(schema::MAIN, lock, &RowQuery::all())
            .await
            .unwrap();
        assert_eq!(cells.len(), 1, "{lock} must survive");
    }
    // --force: what the promise calls overdue goes — after a second look
    // found it not renewed — and nothing else. The look waits one and a
    // half times the longer of the promised period (60 s) and when the
    // cell's TTL left says a renewal is due (its 300 s TTL counts from
    // when the store applied it, now: within 150.5 s).
    let options = CleanOptions::new(Some(Duration::from_secs(30)), 3, true, 10).unwrap();
    let started = tokio::time::Instant::now();
    let r = clean(&env, &options, true, |_| {}).await.unwrap();
    assert_eq!(r.summary.deleted, 1, "{r:#?}");
    assert_eq!(r.cells[0].second_look_after_ms, 225_750);
    assert!(started.elapsed() >= Duration::from_millis(225_750));
    for (lock, left) in [("acct-36s", 1), ("acct-200s", 0), ("acct-gone", 1)] {
        let cells = store
            .read(schema::MAIN, lock, &RowQuery::all())
            .await
            .unwrap();
        assert_eq!(
            cells.len(),
            left,
            "{lock}: within its promise even under --force"
        );
    }
}

/// Issue 31 item 2: a registry row that understates its process's lease
/// (it says a 10 s TTL renewed every 4 s; the process writes 60 s and
/// renews every 29 s) never makes `clean` delete the renewing holder's
/// cell — not by calling its lease over, and not under `--force`: the
/// second look waits for half the TTL the cell was written with.
#[tokio::test(start_paused = true)]
async fn an_understated_row_never_gets_a_renewing_holders_cell_deleted() {
    use lockshift_decide::algorithm::{Mode, Stage};
    use lockshift_decide::registry::{LeasePromise, NodeInfo};
    use lockshift_lock::{Incarnation, NodeId, OwnerId};
    use lockshift_rollout::registry::heartbeat;
    use lockshift_store::{Clock, TokioClock};
    let clock = Arc::new(TokioClock::starting_at(Timestamp::from_micros(NOW)));
    let store: SharedStore = Arc::new(MemoryStore::with_clock(clock.clone()));
    let env = Env::new(Settings::default(), store.clone(), clock.clone());
    let incarnation = Incarnation::from_seed(7);
    let info = NodeInfo {
        node: "web".into(),
        version: "0.1.0".into(),
        configured_mode: Mode::Combined,
        effective: Algorithm::Combined,
        degraded: false,
        seen_stage: Some(Stage::Legacy),
        seen_version: Some(0),
        started_at: 0,
        incarnation: Some(incarnation.to_string()),
        last_used: std::collections::BTreeMap::new(),
        lease: Some(LeasePromise {
            ttl_ms: 10_000,
            renew_every_ms: 4_000,
        }),
        acting_version: Some(0),
        bound: std::collections::BTreeMap::new(),
        view_expired: false,
        datacenter: None,
        homes: None,
        stage_valid_for_ms: None,
        registry_ttl_ms: None,
        left: false,
        clock: None,
        host_clock: None,
    };
    let row_ttl = lockshift_store::Ttl::from_secs(600).unwrap();
    heartbeat(store.as_ref(), clock.as_ref(), &info, row_ttl)
        .await
        .unwrap();
    let owner = OwnerId::for_slot(&NodeId::new("web").unwrap(), incarnation, 1)
        .as_str()
        .to_string();
    // The holder: its cell written now and renewed every 29 s, 60 s TTL.
    let holder = {
        let (store, clock, owner) = (store.clone(), clock.clone(), owner.clone());
        tokio::spawn(async move {
            let ttl = lockshift_store::Ttl::from_secs(60).unwrap();
            loop {
                store
                    .write(
                        schema::MAIN,
                        "acct",
                        &[CellWrite::new(owner.clone(), b"combined".to_vec())],
                        WriteOptions::at(clock.now()).with_ttl(ttl),
                    )
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_secs(29)).await;
            }
        })
    };
    let survives = async |when: &str| {
        let cells = store
            .read(schema::MAIN, "acct", &RowQuery::all())
            .await
            .unwrap();
        assert_eq!(
            cells.len(),
            1,
            "{when}: the renewing holder's cell survives"
        );
    };
    // 14 s after a renewal: older than the row's 8.75 s guaranteed life
    // (less the 5 s margin), with 46 s of its 60 s left.
    tokio::time::sleep(Duration::from_secs(14)).await;
    let options = CleanOptions::new(None, 3, false, 10).unwrap();
    let r = clean(&env, &options, true, |_| {}).await.unwrap();
    assert_eq!(r.summary.deleted, 0, "{r:#?}");
    survives("clean --apply").await;
    // 20 s after it: overdue by the row's 4 s (20 s − 5 s > 3 × 4 s).
    tokio::time::sleep(Duration::from_secs(6)).await;
    let options = CleanOptions::new(None, 3, true, 10).unwrap();
    let r = clean(&env, &options, true, |_| {}).await.unwrap();
    assert_eq!(r.summary.deleted, 0, "{r:#?}");
    assert_eq!(
        r.cells.iter().map(|c| c.action).collect::<Vec<_>>(),
        [Action::SkippedRenewed],
        "{r:#?}"
    );
    assert!(r.cells[0].second_look_after_ms > 29_000, "{r:#?}");
    survives("clean --apply --force").await;
    holder.abort();
}

fn census_cell(age_s: f64, ttl_left_s: Option<f64>) -> CensusCell {
    use lockshift_decide::census::CellOwner;
    CensusCell {
        table: schema::MAIN,
        lock: "L".into(),
        column: "web/0000000100000000".into(),
        owner: CellOwner {
            owner: "web/0000000100000000".into(),
            node: Some("web".into()),
            registered: false,
            process_live: false,
            promise: None,
            clock: None,
            algorithm: Some(Algorithm::Queue),
            reserved: false,
            sharing: lockshift_decide::sharing::Sharing::Exclusive,
        },
        writetime: Timestamp::from_micros(NOW),
        age: Duration::from_secs_f64(age_s),
        // No reading on either side: the 5 s margin (the default).
        least_age: Duration::from_secs_f64(age_s).saturating_sub(Duration::from_secs(5)),
        ttl_left: ttl_left_s.map(Duration::from_secs_f64),
        queue_position: None,
        queued_at: None,
        stale: false,
        lease_over: false,
    }
}

/// The first look, as a table: (case, cell, options) → verdict. The
/// skew margin is 5 s throughout (the default).
#[test]
fn the_first_look_judges_by_the_owners_own_promise() {
    use lockshift_decide::census::lease_over;
    use lockshift_decide::registry::LeasePromise;
    const MARGIN: Duration = Duration::from_secs(5);
    let promise = |ttl_s: u64, renew_s: u64| LeasePromise {
        ttl_ms: ttl_s * 1000,
        renew_every_ms: renew_s * 1000,
    };
    // A cell of a live process that promised `p`, `left_s` TTL left.
    let of_process_with = |age_s: f64, left_s: f64, p: LeasePromise| {
        let mut c = census_cell(age_s, Some(left_s));
        c.owner.process_live = true;
        c.owner.promise = Some(p);
        c.lease_over = lease_over(c.least_age, c.ttl_left, Some(p));
        c
    };
    // … written with the promised TTL.
    let of_process = |age_s: f64, p: LeasePromise| {
        of_process_with(age_s, p.ttl().as_secs_f64() - age_s.min(3.0), p)
    };
    let opts = |stale_after_s: Option<u64>, multiple, force| {
        Criteria::new(stale_after_s.map(Duration::from_secs), multiple, force).unwrap()
    };
    let overdue = |action, second_look_ms| (Some(action), second_look_ms);
    let fine = (None, 0);
    // The expected action (`None`: not overdue) and second look in ms.
    type Expected = (Option<Action>, u64);
    let cases: Vec<(&str, CensusCell, Criteria, Expected)> = vec![
        (
            "schedule 1: renewed 0.5 s ago by a clock 5 s behind, --force",
            of_process(5.5, promise(4, 1)),
            opts(None, 3, true),
            fine,
        ),
        (
            "schedule 1: the same, --stale-multiple 5",
            of_process(5.5, promise(4, 1)),
            opts(None, 5, true),
            fine,
        ),
        // The second look waits 1.5 × the longer of the promised period
        // and when the cell's TTL left says a renewal is due (1 s left:
        // within 1 s).
        (
            "overdue beyond the margin, --force: deleted after a second look",
            of_process(8.5, promise(4, 1)),
            opts(None, 3, true),
            overdue(Action::WouldDelete, 1500),
        ),
        (
            "lease over by its own promise (8.5 s − 5 s > 2.75 s life): deleted, live or not",
            of_process(8.5, promise(4, 1)),
            opts(None, 3, false),
            overdue(Action::WouldDelete, 1500),
        ),
        (
            "lease over, not overdue by a long multiple: still deleted",
            of_process(8.5, promise(4, 1)),
            opts(None, 10, false),
            overdue(Action::WouldDelete, 1500),
        ),
        (
            "issue 11: 36 s into a 60 s promise",
            of_process(36.0, promise(300, 60)),
            opts(Some(30), 3, true),
            fine,
        ),
        // 297 s left: a renewal is due within 149 s, 1.5 × that.
        (
            "overdue by its promise, within its life, process live",
            of_process(200.0, promise(300, 60)),
            opts(Some(30), 3, false),
            overdue(Action::KeptOwnerLive, 223_500),
        ),
        (
            "the same with --force",
            of_process(200.0, promise(300, 60)),
            opts(Some(30), 3, true),
            overdue(Action::WouldDelete, 223_500),
        ),
        // Issue 31 item 2: a row that understates the lease. The cell was
        // renewed 14 s ago with a 60 s TTL (46 s left); the row says 10 s,
        // renewed every 4 s. Its lease is not over by a row that does
        // not describe it (46 s left > 10 s): not even a candidate.
        (
            "an understated row: no lease over where the cell has more TTL left",
            of_process_with(14.0, 46.0, promise(10, 4)),
            opts(None, 3, false),
            fine,
        ),
        // Overdue by the row's 4 s (20 s − 5 s > 12 s), --force: the
        // second look waits for the renewal the cell's 40 s left says is
        // due within 20.5 s, one and a half times.
        (
            "an understated row, --force: the second look waits for the cell's TTL",
            of_process_with(20.0, 40.0, promise(10, 4)),
            opts(None, 3, true),
            overdue(Action::WouldDelete, 30_750),
        ),
        (
            "schedule 2: a cell's TTL promise, --stale-after 1s does not shorten it",
            census_cell(1.25, Some(3.75)),
            opts(Some(1), 3, true),
            fine,
        ),
        (
            "schedule 3: no row of its own process: its 60 s TTL, not another's 4 s",
            census_cell(6.0, Some(54.0)),
            opts(None, 3, true),
            fine,
        ),
        (
            "a promise no lockshift node makes (renewal 0) is no promise",
            {
                let mut c = census_cell(6.0, Some(54.0));
                c.owner.promise = Some(promise(60, 0));
                c
            },
            opts(None, 3, true),
            fine,
        ),
        (
            "a promise past the longest TTL (20 years) is no promise",
            {
                let mut c = census_cell(6.0, Some(54.0));
                c.owner.promise = Some(promise(u64::MAX / 1000, 1));
                c
            },
            opts(None, 3, true),
            fine,
        ),
        (
            "no TTL, --stale-after 30s, 36 s old (31 s less the margin)",
            census_cell(36.0, None),
            opts(Some(30), 3, false),
            overdue(Action::WouldDelete, 0),
        ),
        (
            "no TTL, --stale-after 30s, 34 s old (within, less the margin)",
            census_cell(34.0, None),
            opts(Some(30), 3, false),
            fine,
        ),
        (
            "no TTL, its process live: kept",
            {
                let mut c = census_cell(600.0, None);
                c.owner.process_live = true;
                c
            },
            opts(Some(30), 3, false),
            overdue(Action::KeptOwnerLive, 0),
        ),
    ];
    for (case, cell, criteria, (action, second_look_ms)) in cases {
        let got = judge(&cell, &criteria, MARGIN, MIN_LEASE_TTL);
        match (got, action) {
            (Judged::Fine, None) => {}
            (
                Judged::Overdue {
                    action: got,
                    second_look,
                    ..
                },
                Some(want),
            ) => {
                assert_eq!(got, want, "{case}");
                assert_eq!(ms(second_look), second_look_ms, "{case}");
            }
            (got, want) => panic!("{case}: {got:?}, expected {want:?}"),
        }
    }
    assert_eq!(
        judge(
            &census_cell(600.0, None),
            &opts(None, 3, true),
            MARGIN,
            MIN_LEASE_TTL
        ),
        Judged::Unjudged,
        "no TTL and no --stale-after: counted, never judged"
    );
    // A promise read off a cell: the longest TTL it may have had (what
    // it says, a second, the margin), and renewal within half of it —
    // so it is never overdue before it expires (2 × 63 s > 126 s).
    let cell = census_cell(100.0, Some(20.0));
    assert_eq!(
        promise_of(&cell, MARGIN, MIN_LEASE_TTL),
        Some(Promise {
            source: PromiseSource::Cell,
            ttl_ms: 126_000,
            renew_every_ms: 63_000
        })
    );
    assert_eq!(
        judge(&cell, &opts(None, 2, true), MARGIN, MIN_LEASE_TTL),
        Judged::Fine
    );
}
