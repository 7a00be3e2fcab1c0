//! `migrate home` and `home move` on an embedded two-datacenter cluster.

use std::sync::Arc;
use std::time::Duration;

use lockshift::Settings;
use lockshift_store::{Datacenter, MemoryStore, SharedClock, SharedStore, TokioClock};

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
        rules: vec![RuleReport {
            rule: "default".into(),
            record: record.clone(),
            serves_from: String::new(),
            serving: true,
            shown: Default::default(),
        }],
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
    let infos = [
        node(Some("dc1"), Some(true)),
        node(Some("dc2"), Some(false)),
        node(Some("dc2"), Some(true)),
        node(None, None),
    ];
    let columns: Vec<String> = (0..infos.len()).map(|i| format!("n{i}")).collect();
    let view = by_datacenter(&infos, &columns, homes);
    let site = |name: &str| view.sites.iter().find(|s| s.datacenter == name).unwrap();
    assert_eq!(
        site("dc1").reaches["default"],
        Reach {
            confirmed: 1,
            of: 1
        }
    );
    assert_eq!(
        site("dc2").reaches["default"],
        Reach {
            confirmed: 1,
            of: 2
        }
    );
    assert_eq!(site("not named").unaware, 1);
    assert_eq!(site("not named").answered, None);
}
