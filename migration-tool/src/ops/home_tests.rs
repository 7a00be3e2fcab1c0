//! `migrate home` and `home move` on an embedded two-datacenter cluster.

use std::sync::Arc;
use std::time::Duration;

use lockshift::Settings;
use lockshift_decide::home::HOMES_ROW;
use lockshift_store::{
    Datacenter, MemoryStore, Route, SharedClock, SharedStore, TokioClock, schema,
};

use super::*;
use crate::Outcome;

fn dc(name: &str) -> Datacenter {
    Datacenter::new(name).unwrap()
}

/// A tool in `place` on a cluster of dc1 and dc2, its settings naming dc1
/// as the home (recorded by the first refresh, as a node would).
async fn env_in(cluster: &MemoryStore, clock: SharedClock, place: &str) -> Env {
    let mut settings = Settings::default();
    settings.lock.home_datacenter = Some(dc("dc1"));
    let raw: SharedStore = Arc::new(cluster.client_in(&dc(place)).unwrap());
    let env = Env::routed(settings, raw, clock).await;
    // Record the home the settings name, as the first node does.
    let view = Arc::new(lockshift_rollout::homes::HomesView::new(
        env.clock.clone(),
        Some(dc(place)),
        env.settings.lock.configured_homes(),
        Duration::from_secs(30),
    ));
    let report = lockshift_rollout::homes::refresh(&env.raw, &view).await;
    lockshift_rollout::homes::seed(&env.raw, &view, &report, "seeder", Duration::ZERO)
        .await
        .unwrap();
    env
}

fn cluster() -> (MemoryStore, SharedClock) {
    let clock = Arc::new(TokioClock::new());
    let cluster = MemoryStore::with_clock(clock.clone())
        .with_datacenters(vec![(dc("dc1"), 3), (dc("dc2"), 3)], 1);
    (cluster, clock)
}

#[tokio::test(start_paused = true)]
async fn home_shows_every_rule_as_each_datacenter_shows_it() {
    let (cluster, clock) = cluster();
    let env = env_in(&cluster, clock, "dc2").await;
    let report = show(&env).await.unwrap();
    assert_eq!(report.local_datacenter.as_deref(), Some("dc2"));
    assert!(report.datacenters.iter().all(|d| d.answered));
    assert_eq!(report.rules.len(), 1);
    let rule = &report.rules[0];
    assert_eq!(
        (rule.rule.as_str(), rule.record.datacenter.as_str()),
        ("default", "dc1")
    );
    assert!(rule.serving);
    assert_eq!(rule.shown.len(), 2, "{rule:?}");

    // Cut off from dc1: it says which datacenter does not answer.
    cluster.cut_link(&dc("dc1"), &dc("dc2"));
    let report = show(&env).await.unwrap();
    let dc1 = report
        .datacenters
        .iter()
        .find(|d| d.datacenter == "dc1")
        .unwrap();
    assert!(
        !dc1.answered && dc1.error.as_deref().is_some_and(|e| e.contains("dc1")),
        "{dc1:?}"
    );
}

/// A cell of the homes row this build cannot decode is shown, with the
/// datacenter that holds it — never skipped as if it were not there (the
/// fleet refuses the locks it could home).
#[tokio::test(start_paused = true)]
async fn home_shows_a_cell_it_cannot_decode() {
    use crate::render::Human;
    use lockshift_store::{CellWrite, Timestamp, WriteOptions};
    let (cluster, clock) = cluster();
    let env = env_in(&cluster, clock.clone(), "dc1").await;
    env.raw
        .write_via(
            &Route::Datacenter(dc("dc1")),
            schema::ROLLOUT,
            HOMES_ROW,
            &[CellWrite::new("prefix:eu/", b"{not a record".to_vec())],
            WriteOptions::at(Timestamp::from_micros(clock.now().as_micros() + 1)),
        )
        .await
        .unwrap();
    let report = show(&env).await.unwrap();
    assert_eq!(report.rules.len(), 1, "the default rule still shows");
    // Written in dc1 and replicated: each datacenter shows it.
    let shown: Vec<_> = report
        .unreadable
        .iter()
        .map(|c| (c.datacenter.as_str(), c.column.as_str(), c.rule.as_deref()))
        .collect();
    assert_eq!(
        shown,
        [
            ("dc1", "prefix:eu/", Some("prefix:eu/")),
            ("dc2", "prefix:eu/", Some("prefix:eu/"))
        ]
    );
    assert!(report.unreadable.iter().all(|c| !c.error.is_empty()));
    let text = report.human();
    assert!(
        text.contains("dc1 shows a cell that does not decode: prefix:eu/"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn home_move_is_refused_with_its_reasons_and_made_otherwise() {
    let (cluster, clock) = cluster();
    let env = env_in(&cluster, clock, "dc1").await;
    let args = |to: &str, force, dry_run| MoveArgs {
        prefix: None,
        to: dc(to),
        force,
        dry_run,
        by: "op".into(),
    };
    let (report, outcome) = move_(&env, args("dc2", true, false)).await.unwrap();
    assert_eq!(outcome, Outcome::NotSafe, "{report:?}");
    assert!(!report.applied);
    assert!(report.because[0].contains("cannot consent"), "{report:?}");

    let (report, outcome) = move_(&env, args("dc2", false, true)).await.unwrap();
    assert_eq!(outcome, Outcome::Ok);
    assert!(report.dry_run && !report.applied && report.because.is_empty());

    let (report, outcome) = move_(&env, args("dc2", false, false)).await.unwrap();
    assert_eq!(outcome, Outcome::Ok, "{report:?}");
    assert!(report.applied);
    assert_eq!(report.from.as_deref(), Some("dc1"));
    assert_eq!(report.written[0].0, "dc1", "through the current home first");
    let shown = show(&env).await.unwrap();
    assert!(!shown.rules[0].serving, "dc2 serves only after the wait");
}

#[test]
fn status_counts_who_reaches_which_home_by_datacenter() {
    use lockshift_decide::home::{HomeRecord, RuleState};
    let record = HomeRecord {
        version: 1,
        datacenter: dc("dc1"),
        serves_from: 0,
        moved_from: None,
        forced: false,
        at: 0,
        by: "x".into(),
        pending: false,
    };
    let homes = HomesReport {
        version: 1,
        local_datacenter: Some("dc1".into()),
        datacenters: ["dc1", "dc2"]
            .iter()
            .map(|d| DatacenterAnswer {
                datacenter: (*d).into(),
                answered: true,
                error: None,
            })
            .collect(),
        rules: vec![RuleReport::of(
            &lockshift_decide::home::Rule::Default,
            record.clone(),
            Default::default(),
            lockshift_store::Timestamp::from_micros(1),
        )],
        unreadable: Vec::new(),
    };
    let node = |dc: Option<&str>, confirmed: Option<bool>| {
        let mut info = lockshift_decide::registry::NodeInfo {
            datacenter: dc.map(Into::into),
            homes: confirmed.map(|c| {
                vec![RuleState {
                    rule: "default".into(),
                    record: record.clone(),
                    confirmed: c,
                }]
            }),
            ..serde_json::from_str(
                r#"{"node":"n","version":"0","configured_mode":"auto","effective":"combined",
                "degraded":false,"seen_stage":null,"seen_version":null,"started_at":0}"#,
            )
            .unwrap()
        };
        info.node = format!("n-{}", dc.unwrap_or("x"));
        info
    };
    // (datacenter, confirmed at its last heartbeat, that heartbeat recent)
    let heard = [
        (Some("dc1"), Some(true), true),
        (Some("dc2"), Some(false), true),
        (Some("dc2"), Some(true), true),
        // Issue 42 item 5: a far-side process silent for longer than its
        // view lasts said "confirmed" at its last heartbeat; that says
        // nothing now.
        (Some("dc2"), Some(true), false),
        (None, None, true),
    ];
    let nodes: Vec<Heard> = heard
        .iter()
        .enumerate()
        .map(|(i, (dc, confirmed, fresh))| Heard {
            info: node(*dc, *confirmed),
            column: format!("n{i}"),
            fresh: *fresh,
        })
        .collect();
    let view = by_datacenter(&nodes, homes);
    let site = |name: &str| view.sites.iter().find(|s| s.datacenter == name).unwrap();
    assert_eq!(
        site("dc1").reaches["default"],
        Reach {
            confirmed: 1,
            of: 1,
            silent: 0,
        }
    );
    assert_eq!(
        site("dc2").reaches["default"],
        Reach {
            confirmed: 1,
            of: 3,
            silent: 1,
        }
    );
    let text = crate::render::home::datacenters(&view);
    assert!(
        text.contains("partly reach default (1/3, 1 not heard from lately)"),
        "{text}"
    );
    assert_eq!(site("not named").unaware, 1);
    assert_eq!(site("not named").answered, None);
}

/// Issue 42 item 1: `home move --prefix ""` (an empty shell variable) is a
/// usage error, its dry run too, and nothing is written: a record of the
/// empty prefix decodes in no build and would stop the whole fleet.
#[tokio::test(start_paused = true)]
async fn an_empty_prefix_is_a_usage_error_and_writes_nothing() {
    use clap::Parser;
    for dry_run in [false, true] {
        let mut argv = vec!["migrate", "home", "move", "--prefix", "", "--to", "dc2"];
        if dry_run {
            argv.push("--dry-run");
        }
        let e = crate::cli::Cli::try_parse_from(argv).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(e.to_string().contains("it is empty"), "{e}");
    }
    // The operation checks it too (the one check, `Rule::prefix`).
    let (cluster, clock) = cluster();
    let env = env_in(&cluster, clock, "dc1").await;
    let e = move_(
        &env,
        MoveArgs {
            prefix: Some(String::new()),
            to: dc("dc2"),
            force: false,
            dry_run: false,
            by: "op".into(),
        },
    )
    .await
    .unwrap_err();
    assert!(crate::is_usage_error(&e), "{e:#}");
    let shown = show(&env).await.unwrap();
    let rules: Vec<&str> = shown.rules.iter().map(|r| r.rule.as_str()).collect();
    assert_eq!(rules, ["default"]);
    assert!(shown.unreadable.is_empty());
}

/// A cell no build can decode — the `prefix:` an empty prefix wrote —
/// written in dc1 and replicated.
async fn plant_undecodable(env: &Env, clock: &SharedClock) {
    use lockshift_store::{CellWrite, Timestamp, WriteOptions};
    let record = serde_json::json!({"version": 1, "datacenter": "dc2", "serves_from": 0,
        "at": 0, "by": "typo"});
    env.raw
        .write_via(
            &Route::Datacenter(dc("dc1")),
            schema::ROLLOUT,
            HOMES_ROW,
            &[CellWrite::new("prefix:", record.to_string().into_bytes())],
            WriteOptions::at(Timestamp::from_micros(clock.now().as_micros() + 1)),
        )
        .await
        .unwrap();
}

/// A lock write through `env`'s routed store, after a refresh of its view.
async fn take_lock_cell(env: &Env) -> Result<(), lockshift_store::StoreError> {
    use lockshift_store::{CellWrite, WriteOptions};
    env.store
        .write(
            schema::MAIN,
            "account-1",
            &[CellWrite::new("probe", b"v".to_vec())],
            WriteOptions::at(env.clock.now()),
        )
        .await
}

/// Issue 42 item 1: a planted cell no build can decode stops every lock
/// (and every move); `migrate home forget` — dry run first, then
/// `--apply` — removes it in every datacenter, and the fleet serves
/// again. A cell that decodes is never removed.
#[tokio::test(start_paused = true)]
async fn an_undecodable_cell_is_forgotten_and_the_fleet_serves_again() {
    use super::super::home_forget::forget;
    let (cluster, clock) = cluster();
    let env = env_in(&cluster, clock.clone(), "dc1").await;
    let far = env_in(&cluster, clock.clone(), "dc2").await;
    plant_undecodable(&env, &clock).await;
    tokio::time::sleep(Duration::from_secs(11)).await; // a re-read
    for e in [&env, &far] {
        let refused = take_lock_cell(e).await.unwrap_err();
        assert!(
            refused.to_string().contains("the homes record \"prefix:\""),
            "{refused}"
        );
    }
    let (moved, outcome) = move_(
        &env,
        MoveArgs {
            prefix: None,
            to: dc("dc2"),
            force: false,
            dry_run: true,
            by: "op".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(outcome, Outcome::NotSafe, "{moved:?}");

    // Refused for a cell that decodes.
    let refused = forget(&env, "default", true).await;
    assert_eq!(refused.outcome(), Outcome::NotSafe, "{refused:?}");
    assert!(show(&env).await.unwrap().rules.len() == 1);

    let dry = forget(&env, "prefix:", false).await;
    assert_eq!(dry.outcome(), Outcome::Ok);
    let shows: Vec<_> = dry
        .datacenters
        .iter()
        .map(|d| (d.datacenter.as_str(), d.writetime_us.is_some(), d.removed))
        .collect();
    assert_eq!(shows, [("dc1", true, false), ("dc2", true, false)]);
    assert_eq!(show(&env).await.unwrap().unreadable.len(), 2, "dry run");

    let applied = forget(&env, "prefix:", true).await;
    assert_eq!(applied.outcome(), Outcome::Ok, "{applied:?}");
    assert!(applied.datacenters.iter().all(|d| d.removed), "{applied:?}");
    assert!(show(&env).await.unwrap().unreadable.is_empty());
    tokio::time::sleep(Duration::from_secs(11)).await;
    for e in [&env, &far] {
        take_lock_cell(e).await.unwrap();
    }
    // Nothing left: a second run removes nothing and says so.
    let again = forget(&env, "prefix:", true).await;
    assert_eq!(again.outcome(), Outcome::Ok);
    assert!(again.notes[0].contains("nothing to remove"), "{again:?}");
}

/// A move of the default rule from dc1 to dc2 through `env`.
async fn move_default_to_dc2(env: &Env) -> HomeMoveReport {
    let (report, outcome) = move_(
        env,
        MoveArgs {
            prefix: None,
            to: dc("dc2"),
            force: false,
            dry_run: false,
            by: "op".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(outcome, Outcome::Ok, "{report:?}");
    report
}

/// Issue 42 item 2: during the move wait of the default rule `status`
/// answers at once — from either datacenter — naming the move and the
/// time left, instead of retrying the refused stage read until the 60 s
/// operation deadline; and a split from the far side is answered as fast,
/// naming the fleet home.
#[tokio::test(start_paused = true)]
async fn status_answers_at_once_during_a_move_wait_and_a_split() {
    use crate::render::Human;
    let (cluster, clock) = cluster();
    let env = env_in(&cluster, clock.clone(), "dc1").await;
    let far = env_in(&cluster, clock.clone(), "dc2").await;
    let moved = move_default_to_dc2(&env).await;
    tokio::time::sleep(Duration::from_secs(11)).await; // every view reads it
    for e in [&env, &far] {
        let started = tokio::time::Instant::now();
        let report = super::super::status::status(e, |_| {}).await.unwrap();
        let took = started.elapsed();
        assert!(took < Duration::from_secs(5), "{took:?}");
        assert!(!report.unsafe_state);
        assert!(report.stage.is_none() && !report.fleet_rows.read);
        let why = report.fleet_rows.why.clone().unwrap_or_default();
        assert!(why.contains("moving from dc1 to datacenter dc2"), "{why}");
        let left = report.fleet_rows.serves_in_ms.unwrap();
        let wait = moved.wait_ms;
        assert!(
            left <= wait - 11_000 && left > wait - 13_000,
            "{left} of {wait}"
        );
        let homes = &report.datacenters.as_ref().unwrap().homes;
        let rule = &homes.rules[0];
        assert_eq!(rule.state, RuleStateName::Moving);
        assert_eq!(rule.from.as_deref(), Some("dc1"));
        assert!(rule.serves_in_ms.is_some_and(|ms| ms <= left + 1_000));
        let text = report.human();
        assert!(
            text.contains("stage      not read: the fleet's rows")
                && text.contains("MOVING from dc1: dc2 serves in"),
            "{text}"
        );
    }
    // Served again after the wait.
    tokio::time::sleep(Duration::from_millis(moved.wait_ms)).await;
    let report = super::super::status::status(&far, |_| {}).await.unwrap();
    assert!(
        report.fleet_rows.read && report.stage.is_some(),
        "{report:?}"
    );
    assert_eq!(
        report.datacenters.as_ref().unwrap().homes.rules[0].state,
        RuleStateName::Serving
    );
    // Issue 40 item 2: the census read every lock at its home (dc2, the
    // process's own here): one page a token range and table, by datacenter.
    let pages = u64::from(lockshift_rollout::census::RANGES) * 3;
    assert_eq!(
        report.census.by_datacenter,
        std::collections::BTreeMap::from([("dc2".to_string(), pages)])
    );
    let text = report.human();
    assert!(
        text.contains(&format!("census     {pages} requests — dc2 {pages}")),
        "{text}"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["census"]["by_datacenter"]["dc2"], pages, "{json}");

    // A split: dc1 (now a datacenter without homes) side asks, the fleet
    // home dc2 is out of its reach.
    cluster.cut_link(&dc("dc1"), &dc("dc2"));
    tokio::time::sleep(Duration::from_secs(31)).await; // views lapse
    let started = tokio::time::Instant::now();
    let report = super::super::status::status(&env, |_| {}).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    let why = report.fleet_rows.why.clone().unwrap_or_default();
    assert!(
        !report.fleet_rows.read && why.contains("homed in datacenter dc2"),
        "{why}"
    );
    assert_eq!(report.fleet_rows.serves_in_ms, None);
}

/// Issue 42 item 5: `migrate inspect` from the far side of a split shows
/// what it can: a lock homed on its own side is shown without the
/// registry (a fleet row, homed across the split), and a lock homed
/// across the split is named as missing — never a failure without a
/// report.
#[tokio::test(start_paused = true)]
async fn inspect_from_the_far_side_names_what_is_missing() {
    use super::super::inspect::inspect;
    use lockshift_lock::LockId;
    let (cluster, clock) = cluster();
    let env = env_in(&cluster, clock.clone(), "dc1").await;
    let (_, outcome) = move_(
        &env,
        MoveArgs {
            prefix: Some("eu/".into()),
            to: dc("dc2"),
            force: false,
            dry_run: false,
            by: "op".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(outcome, Outcome::Ok);
    let far = env_in(&cluster, clock.clone(), "dc2").await;
    tokio::time::sleep(Duration::from_secs(200)).await; // eu/ serves at dc2
    cluster.cut_link(&dc("dc1"), &dc("dc2"));
    tokio::time::sleep(Duration::from_secs(31)).await;
    let eu = inspect(&far, &LockId::new("eu/1").unwrap()).await.unwrap();
    assert_eq!(eu.outcome(), Outcome::Ok, "{eu:?}");
    assert!(eu.free, "its cells were read: none");
    let parts: Vec<_> = eu.missing.iter().map(|m| m.part).collect();
    assert_eq!(parts, ["registry"]);
    let us = inspect(&far, &LockId::new("us/1").unwrap()).await.unwrap();
    assert_eq!(us.outcome(), Outcome::Failed);
    assert!(!us.free);
    let parts: Vec<_> = us.missing.iter().map(|m| m.part).collect();
    assert_eq!(parts, ["registry", "cells"]);
    assert!(
        us.missing[1].why.contains("homed in datacenter dc1"),
        "{us:?}"
    );
}
