use super::*;
use crate::id::MAX_LOCK_ID_LEN;

fn dc(name: &str) -> Datacenter {
    Datacenter::new(name).unwrap()
}

fn record(version: u64, home: &str, serves_from: i64) -> HomeRecord {
    HomeRecord {
        version,
        datacenter: dc(home),
        serves_from,
        moved_from: None,
        forced: false,
        at: 0,
        by: "test".into(),
        pending: false,
    }
}

const VALID: Duration = Duration::from_secs(30);

fn wall(s: i64) -> Timestamp {
    Timestamp::from_micros(s * 1_000_000)
}

#[test]
fn rows_belong_to_locks_to_the_fleet_or_to_no_home() {
    let cases: &[(Table, &str, Subject<'_>)] = &[
        (schema::MAIN, "acct", Subject::Lock("acct")),
        (schema::SHADOW, "acct", Subject::Lock("acct")),
        (schema::QUEUE, "acct", Subject::Lock("acct")),
        (schema::GLOBAL_TIME, "acct", Subject::Lock("acct")),
        (schema::GLOBAL_TIME, GLOBAL_TIME_ROW, Subject::Fleet),
        (schema::MAIN, ROLLOUT_LOCK, Subject::Fleet),
        (schema::QUEUE, ROLLOUT_LOCK, Subject::Fleet),
        (schema::ROLLOUT, "stage", Subject::Fleet),
        (schema::ROLLOUT, HOMES_ROW, Subject::Fleet),
        (schema::NODES, "nodes", Subject::Fleet),
        (schema::SCRATCH, "x", Subject::Unhomed),
    ];
    for (i, (table, row, want)) in cases.iter().enumerate() {
        assert_eq!(subject(*table, row), *want, "case #{i}: {table}/{row}");
    }
}

#[test]
fn rule_keys_round_trip_and_nothing_else_parses() {
    for rule in [Rule::Default, Rule::Prefix("eu/".into())] {
        assert_eq!(Rule::from_key(&rule.key()), Some(rule.clone()), "{rule}");
    }
    for key in ["", "prefix:", "defaults", "eu/"] {
        assert_eq!(Rule::from_key(key), None, "{key:?}");
    }
}

#[test]
fn the_longest_covering_prefix_decides_and_a_new_rule_takes_from_the_longest_shorter_one() {
    let rules = [
        Rule::Default,
        Rule::Prefix("eu".into()),
        Rule::Prefix("eu/de/".into()),
    ];
    let cases: &[(&str, Rule)] = &[
        ("us/1", Rule::Default),
        ("eu/fr/1", Rule::Prefix("eu".into())),
        ("eu/de/1", Rule::Prefix("eu/de/".into())),
        ("e", Rule::Default),
    ];
    for (i, (name, want)) in cases.iter().enumerate() {
        assert_eq!(rule_for(&rules, name), *want, "case #{i}: {name}");
    }
    let cases: &[(&str, Rule)] = &[
        ("eu/", Rule::Prefix("eu".into())),
        ("eu/de/x", Rule::Prefix("eu/de/".into())),
        ("eu", Rule::Default),
        ("us/", Rule::Default),
    ];
    for (i, (prefix, want)) in cases.iter().enumerate() {
        assert_eq!(covering_rule(&rules, prefix), *want, "case #{i}: {prefix}");
    }
    assert_eq!(rule_for(&[], "x"), Rule::Default);
}

#[test]
fn without_a_record_every_row_takes_the_default_route() {
    let t0 = Instant::now();
    let homes = Homes::new(VALID, t0);
    assert!(!homes.any());
    for subject in [Subject::Lock("a"), Subject::Fleet, Subject::Unhomed] {
        assert_eq!(homes.route(subject, t0, wall(0)), Ok(None), "{subject:?}");
    }
}

/// H2: confirmed only by a read from the home itself, for `valid_for`.
#[test]
fn a_home_is_confirmed_by_its_own_datacenter_for_a_while() {
    let t0 = Instant::now();
    let mut homes = Homes::new(VALID, t0);
    // Read from the far datacenter only: known, not confirmed.
    homes.observe(&dc("dc2"), t0, vec![(Rule::Default, record(1, "dc1", 0))]);
    homes.failed(&dc("dc1"), "no node of dc1 reachable".into());
    let refused = homes.route(Subject::Lock("a"), t0, wall(0)).unwrap_err();
    assert_eq!(
        refused,
        Refusal::Unconfirmed {
            rule: Rule::Default,
            home: dc("dc1"),
            since: None,
            last_error: Some("no node of dc1 reachable".into()),
        }
    );
    assert_eq!(refused.serves_in(), None);
    let words = refused.describe(Subject::Lock("a"), Some(&dc("dc2")));
    assert!(words.contains("homed in datacenter dc1"), "{words}");
    assert!(words.contains("(in dc2)"), "{words}");
    assert!(
        words.contains("has not reached since it started"),
        "{words}"
    );
    assert!(words.contains("no node of dc1 reachable"), "{words}");

    // Read from the home: confirmed, for every row of the rule.
    let t1 = t0 + Duration::from_secs(1);
    homes.observe(&dc("dc1"), t1, vec![(Rule::Default, record(1, "dc1", 0))]);
    for subject in [Subject::Lock("a"), Subject::Fleet] {
        assert_eq!(homes.route(subject, t1, wall(0)), Ok(Some(dc("dc1"))));
    }
    assert_eq!(homes.route(Subject::Unhomed, t1, wall(0)), Ok(None));
    // Until `valid_for` after that read was sent.
    let almost = t1 + VALID - Duration::from_millis(1);
    assert_eq!(
        homes.route(Subject::Lock("a"), almost, wall(0)),
        Ok(Some(dc("dc1")))
    );
    let expired = homes.route(Subject::Lock("a"), t1 + VALID, wall(0));
    assert!(
        matches!(expired, Err(Refusal::Unconfirmed { since: Some(d), .. }) if d == VALID),
        "{expired:?}"
    );
}

/// H3: a newer record replaces the view, is confirmed only by the new
/// home, and serves only from its time.
#[test]
fn a_move_is_followed_confirmed_by_the_new_home_and_served_from_its_time() {
    let t0 = Instant::now();
    let mut homes = Homes::new(VALID, t0);
    homes.observe(&dc("dc1"), t0, vec![(Rule::Default, record(1, "dc1", 0))]);
    let mut moved = record(2, "dc2", 100 * 1_000_000);
    moved.moved_from = Some(dc("dc1"));
    // The old home shows the move first (it was written through it).
    homes.observe(&dc("dc1"), t0, vec![(Rule::Default, moved.clone())]);
    assert!(matches!(
        homes.route(Subject::Lock("a"), t0, wall(0)),
        Err(Refusal::Unconfirmed { since: None, .. })
    ));
    // A replica that has not caught up shows the old version: no change,
    // and the refusal says the new home answers without the move yet.
    homes.observe(&dc("dc2"), t0, vec![(Rule::Default, record(1, "dc1", 0))]);
    assert_eq!(homes.record(&Rule::Default).map(|r| r.version), Some(2));
    let behind = homes.route(Subject::Lock("a"), t0, wall(0)).unwrap_err();
    assert_eq!(
        behind,
        Refusal::Behind {
            rule: Rule::Default,
            home: dc("dc2"),
            version: 2,
            shows: Some((1, false)),
        }
    );
    assert_eq!(behind.serves_in(), None, "only a copy ends it");
    let words = behind.describe(Subject::Lock("a"), None);
    assert!(
        words.contains("which dc2 does not show yet (it shows version 1)")
            && words.contains("`migrate home move --to dc2` copies it there"),
        "{words}"
    );
    homes.observe(&dc("dc2"), t0, vec![(Rule::Default, moved)]);
    let refused = homes.route(Subject::Lock("a"), t0, wall(40)).unwrap_err();
    assert_eq!(
        refused,
        Refusal::Moving {
            rule: Rule::Default,
            home: dc("dc2"),
            from: Some(dc("dc1")),
            in_: Duration::from_secs(60),
        }
    );
    assert_eq!(refused.serves_in(), Some(Duration::from_secs(60)));
    let words = refused.describe(Subject::Lock("a"), None);
    assert!(
        words.contains("moving from dc1 to datacenter dc2") && words.contains("1m"),
        "{words}"
    );
    assert_eq!(
        homes.route(Subject::Lock("a"), t0, wall(100)),
        Ok(Some(dc("dc2")))
    );
}

/// H6: a pending record serves nowhere, even where its home confirms
/// it; the serving record of its version completes it — above it in rank,
/// never a conflict with a datacenter that still shows the pending one —
/// and serves from its own time.
#[test]
fn a_pending_move_serves_nowhere_until_its_serving_record_completes_it() {
    let t0 = Instant::now();
    let mut homes = Homes::new(VALID, t0);
    homes.observe(&dc("dc1"), t0, vec![(Rule::Default, record(1, "dc1", 0))]);
    let mut serving = record(2, "dc2", 100 * 1_000_000);
    serving.moved_from = Some(dc("dc1"));
    let pending = serving.as_pending();
    assert!(pending.pending && pending.serves_from == i64::MAX);
    assert!(pending.rank() < serving.rank() && record(1, "dc1", 0).rank() < pending.rank());
    for d in ["dc1", "dc2"] {
        homes.observe(&dc(d), t0, vec![(Rule::Default, pending.clone())]);
    }
    let refused = homes
        .route(Subject::Lock("a"), t0, wall(1_000_000))
        .unwrap_err();
    assert!(
        matches!(&refused, Refusal::Pending { home, version: 2, .. } if *home == dc("dc2")),
        "{refused:?}"
    );
    assert_eq!(refused.serves_in(), None, "an operator completes it");
    let words = refused.describe(Subject::Lock("a"), None);
    assert!(
        words.contains("never confirmed") && words.contains("migrate home move --to dc2"),
        "{words}"
    );
    // The serving record lands at the old home first; the new home still
    // shows the pending one: behind, not a race.
    homes.observe(&dc("dc1"), t0, vec![(Rule::Default, serving.clone())]);
    homes.observe(&dc("dc2"), t0, vec![(Rule::Default, pending.clone())]);
    assert_eq!(homes.record(&Rule::Default), Some(&serving));
    assert_eq!(
        homes.route(Subject::Lock("a"), t0, wall(200)),
        Err(Refusal::Behind {
            rule: Rule::Default,
            home: dc("dc2"),
            version: 2,
            shows: Some((2, true)),
        })
    );
    homes.observe(&dc("dc2"), t0, vec![(Rule::Default, serving)]);
    assert!(matches!(
        homes.route(Subject::Lock("a"), t0, wall(40)),
        Err(Refusal::Moving { .. })
    ));
    assert_eq!(
        homes.route(Subject::Lock("a"), t0, wall(100)),
        Ok(Some(dc("dc2")))
    );
    // A pending record read after its serving one changes nothing.
    homes.observe(&dc("dc1"), t0, vec![(Rule::Default, pending)]);
    assert_eq!(
        homes.route(Subject::Lock("a"), t0, wall(100)),
        Ok(Some(dc("dc2")))
    );
}

/// H6: a pending move is completed by the same move asked again, through
/// the home it moves from; any other move of the rule waits for that.
#[test]
fn a_pending_move_is_completed_by_the_same_move_and_blocks_any_other() {
    let mut moving = record(2, "dc2", 0);
    moving.moved_from = Some(dc("dc1"));
    let pending = || vec![(Rule::Default, moving.as_pending())];
    let all = |now| {
        scene(
            &[("dc1", pending()), ("dc2", pending()), ("dc3", pending())],
            now,
        )
    };
    let (plan, refusals) = move_refusals(&ask(Rule::Default, "dc2", false), &all(100));
    assert!(refusals.is_empty(), "{refusals:?}");
    let plan = plan.unwrap();
    assert!(plan.completes);
    assert_eq!((plan.version, plan.old_home()), (2, &dc("dc1")));
    let (_, refusals) = move_refusals(&ask(Rule::Default, "dc3", false), &all(100));
    assert!(
        refusals.iter().any(|r| r.contains("is pending")),
        "{refusals:?}"
    );
    // The old home must answer: its write is the one the wait counts from.
    let (_, refusals) = move_refusals(
        &ask(Rule::Default, "dc2", false),
        &scene(&[("dc2", pending()), ("dc3", pending())], 100),
    );
    assert!(
        refusals.iter().any(|r| r.contains("dc1 cannot be reached")),
        "{refusals:?}"
    );
    // A pending seed is the fleet's to complete.
    let seed = || vec![(Rule::Default, record(1, "dc1", 0).as_pending())];
    let (_, refusals) = move_refusals(
        &ask(Rule::Default, "dc1", false),
        &scene(&[("dc1", seed()), ("dc2", seed()), ("dc3", seed())], 100),
    );
    assert!(
        refusals
            .iter()
            .any(|r| r.contains("seeded and not confirmed")),
        "{refusals:?}"
    );
}

#[test]
fn prefix_rules_home_their_locks_and_the_rest_follow_the_default() {
    let t0 = Instant::now();
    let mut homes = Homes::new(VALID, t0);
    homes.observe(
        &dc("dc2"),
        t0,
        vec![(Rule::Prefix("eu/".into()), record(1, "dc2", 0))],
    );
    assert_eq!(
        homes.route(Subject::Lock("eu/1"), t0, wall(0)),
        Ok(Some(dc("dc2")))
    );
    // No default record: the other locks and the fleet's rows take the
    // store's default route.
    assert_eq!(homes.route(Subject::Lock("us/1"), t0, wall(0)), Ok(None));
    assert_eq!(homes.route(Subject::Fleet, t0, wall(0)), Ok(None));
    homes.observe(&dc("dc1"), t0, vec![(Rule::Default, record(1, "dc1", 0))]);
    assert_eq!(
        homes.route(Subject::Lock("us/1"), t0, wall(0)),
        Ok(Some(dc("dc1")))
    );
    let states = homes.states(t0);
    assert_eq!(states.len(), 2);
    assert!(states.iter().all(|s| s.confirmed));
}

fn scene(read: &[(&str, Vec<(Rule, HomeRecord)>)], now_s: i64) -> MoveScene {
    MoveScene {
        datacenters: vec![dc("dc1"), dc("dc2"), dc("dc3")],
        read: read
            .iter()
            .map(|(d, records)| (dc(d), records.clone()))
            .collect(),
        now: wall(now_s),
    }
}

fn ask(rule: Rule, to: &str, force: bool) -> MoveAsk {
    MoveAsk {
        rule,
        to: dc(to),
        force,
    }
}

/// The move guards (H3, H4), one case per row: what was read, what was
/// asked, and the refusals expected (by a word each names).
#[test]
fn moves_are_refused_for_each_missing_consent_and_allowed_otherwise() {
    let v1 = || vec![(Rule::Default, record(1, "dc1", 0))];
    let moving = || vec![(Rule::Default, record(2, "dc2", 200 * 1_000_000))];
    let moved = || {
        let mut r = record(2, "dc2", 200 * 1_000_000);
        r.moved_from = Some(dc("dc1"));
        vec![(Rule::Default, r)]
    };
    type Case<'a> = (&'a str, MoveScene, MoveAsk, &'a [&'a str], Option<u64>);
    let cases: Vec<Case<'_>> = vec![
        (
            "planned, both homes answer",
            scene(&[("dc1", v1()), ("dc2", v1())], 100),
            ask(Rule::Default, "dc2", false),
            &[],
            Some(2),
        ),
        (
            "planned, the current home is out of reach",
            scene(&[("dc2", v1())], 100),
            ask(Rule::Default, "dc2", false),
            &["cannot be reached: a planned move lands only through it. If dc1 is gone"],
            Some(2),
        ),
        (
            "forced, the current home is out of reach",
            scene(&[("dc2", v1())], 100),
            ask(Rule::Default, "dc2", true),
            &[],
            Some(2),
        ),
        (
            "forced, but the current home answers",
            scene(&[("dc1", v1()), ("dc2", v1())], 100),
            ask(Rule::Default, "dc2", true),
            &["cannot consent, and dc1 answers"],
            Some(2),
        ),
        (
            "the new home is out of reach",
            scene(&[("dc1", v1())], 100),
            ask(Rule::Default, "dc2", false),
            &["new home dc2 cannot be reached"],
            Some(2),
        ),
        (
            "no such datacenter",
            scene(&[("dc1", v1())], 100),
            ask(Rule::Default, "dc9", false),
            &["dc9 is not a datacenter of this cluster"],
            Some(2),
        ),
        (
            "already there",
            scene(&[("dc1", v1())], 100),
            ask(Rule::Default, "dc1", false),
            &["homed in dc1 already"],
            Some(2),
        ),
        (
            "the last move has not finished",
            scene(
                &[("dc1", moving()), ("dc2", moving()), ("dc3", moving())],
                100,
            ),
            ask(Rule::Default, "dc3", false),
            &["has not finished"],
            Some(3),
        ),
        (
            "the current home is older than another datacenter's",
            scene(&[("dc1", moving()), ("dc2", v1()), ("dc3", v1())], 300),
            ask(Rule::Default, "dc3", false),
            &["does not show version 2"],
            Some(3),
        ),
        (
            "a new prefix rule takes its locks from the default rule's home",
            scene(&[("dc1", v1()), ("dc2", v1())], 100),
            ask(Rule::Prefix("eu/".into()), "dc2", false),
            &[],
            Some(1),
        ),
        (
            "an empty prefix: its record would decode in no build",
            scene(&[("dc1", v1()), ("dc2", v1())], 100),
            ask(Rule::Prefix(String::new()), "dc2", false),
            &["invalid home prefix \"\": it is empty"],
            None,
        ),
        (
            "made, but the new home answers without it: copied there",
            scene(&[("dc1", moved()), ("dc2", v1()), ("dc3", moved())], 100),
            ask(Rule::Default, "dc2", false),
            &[],
            Some(2),
        ),
        (
            "made, and every datacenter that answers shows it",
            scene(&[("dc1", moved()), ("dc2", moved())], 300),
            ask(Rule::Default, "dc2", false),
            &["homed in dc2 already"],
            Some(3),
        ),
        (
            "nothing recorded yet",
            scene(&[("dc1", vec![]), ("dc2", vec![])], 100),
            ask(Rule::Default, "dc2", false),
            &["no home is recorded"],
            None,
        ),
    ];
    for (i, (name, scene, ask, expected, version)) in cases.iter().enumerate() {
        let (plan, refusals) = move_refusals(ask, scene);
        assert_eq!(
            refusals.len(),
            expected.len(),
            "case #{i} ({name}): {refusals:#?}"
        );
        for (want, got) in expected.iter().zip(&refusals) {
            assert!(
                got.contains(want),
                "case #{i} ({name}): {got:?} lacks {want:?}"
            );
        }
        let spreads = plan.as_ref().map(|p| p.spreads_to.clone());
        assert_eq!(plan.map(|p| p.version), *version, "case #{i} ({name})");
        // Only a made move that a datacenter lacks is copied.
        let copied = name.contains("copied there");
        assert_eq!(
            spreads.is_some_and(|to| to == [dc("dc2")]),
            copied,
            "case #{i} ({name})"
        );
    }
}

/// Issue 42 item 1: one check for every way of writing a prefix rule,
/// refusing what no build decodes and what homes no lock; what earlier
/// builds wrote still decodes.
#[test]
fn a_prefix_rule_is_written_only_when_every_build_decodes_it() {
    let long = "x".repeat(MAX_LOCK_ID_LEN + 1);
    // (prefix, refused because …, or accepted)
    let cases: &[(&str, Option<&str>)] = &[
        ("eu/", None),
        ("eu ", None),
        ("é/", None),
        ("", Some("it is empty")),
        (" eu/", Some("starts with whitespace")),
        ("eu/\n", Some("control character")),
        (&long, Some("longer than a lock id")),
    ];
    for (i, (prefix, refused)) in cases.iter().enumerate() {
        let rule = Rule::prefix(*prefix);
        match refused {
            None => {
                let rule = rule.unwrap_or_else(|e| panic!("case #{i}: {e}"));
                assert_eq!(Rule::from_key(&rule.key()), Some(rule), "case #{i}");
            }
            Some(why) => {
                let e = rule.unwrap_err().to_string();
                assert!(e.contains(why), "case #{i}: {e}");
                assert!(e.len() < 300, "case #{i}: the prefix is cut short: {e}");
            }
        }
    }
    // Decoding stays as loose as every build's: a record an earlier build
    // wrote for a prefix `Rule::prefix` refuses still homes its locks.
    assert_eq!(
        Rule::from_key("prefix: eu/"),
        Some(Rule::Prefix(" eu/".into()))
    );
    assert_eq!(Rule::from_key("prefix:"), None);
}

#[test]
fn two_records_of_one_version_are_never_confirmed_while_datacenters_disagree() {
    let t0 = Instant::now();
    let mut homes = Homes::new(VALID, t0);
    let to_dc2 = record(2, "dc2", 0);
    let to_dc3 = record(2, "dc3", 0);
    for _ in 0..3 {
        homes.observe(&dc("dc2"), t0, vec![(Rule::Default, to_dc2.clone())]);
        homes.observe(&dc("dc3"), t0, vec![(Rule::Default, to_dc3.clone())]);
        homes.observe(&dc("dc2"), t0, vec![(Rule::Default, to_dc2.clone())]);
        let refusal = homes.route(Subject::Lock("a"), t0, wall(0)).unwrap_err();
        let Refusal::Unconfirmed {
            last_error: Some(why),
            ..
        } = &refusal
        else {
            panic!("{refusal:?}")
        };
        assert_eq!(
            why,
            "datacenters show different records of version 2 (two moves raced; \
             the store reconciles them)"
        );
        assert_eq!(refusal.serves_in(), None);
    }
    // Reconciled: both show the winner.
    homes.observe(&dc("dc3"), t0, vec![(Rule::Default, to_dc3.clone())]);
    homes.observe(&dc("dc2"), t0, vec![(Rule::Default, to_dc3.clone())]);
    assert_eq!(
        homes.route(Subject::Lock("a"), t0, wall(0)),
        Ok(Some(dc("dc3")))
    );
}

/// A record's times are data: one far past what RFC 3339 writes, or before
/// the epoch, is shown, never a panic (a hand-written `serves_from`).
#[test]
fn any_recorded_time_is_shown_without_a_panic() {
    #[rustfmt::skip]
    let cases = [
        (0, "1970-01-01T00:00:00Z"),
        (1_764_288_000_000_000, "2025-11-28T00:00:00Z"),
        (-5, "1970-01-01T00:00:00Z"),
        (300_000_000_000_000_000, "300000000000000000 µs after 1970-01-01T00:00:00Z"),
        (i64::MAX, "9223372036854775807 µs after 1970-01-01T00:00:00Z"),
    ];
    for (us, shown) in cases {
        let text = std::panic::catch_unwind(|| fmt_micros(us))
            .unwrap_or_else(|_| panic!("fmt_micros({us}) panicked"));
        assert_eq!(text, shown, "{us}");
    }
}

/// H5: in a cluster of several datacenters a row no rule covers takes the
/// store's default route only while every datacenter's homes row was read
/// within `valid_for` — a rule recorded in one not read could home it
/// elsewhere. In a cluster of one, always.
#[test]
fn no_rule_covers_a_row_only_while_every_datacenter_was_read_lately() {
    let t0 = Instant::now();
    let mut homes = Homes::new(VALID, t0);
    homes.set_datacenters(vec![dc("dc1")]);
    assert_eq!(homes.route(Subject::Lock("a"), t0, wall(0)), Ok(None));

    homes.set_datacenters(vec![dc("dc2"), dc("dc1")]);
    // An empty topology (not known for now) keeps the last one.
    homes.set_datacenters(Vec::new());
    // (what, datacenters read at t0, how much later, the refusal's list)
    type Missing = Option<&'static [(&'static str, Option<Duration>)]>;
    let cases: &[(&str, &[&str], Duration, Missing)] = &[
        (
            "nothing read",
            &[],
            Duration::ZERO,
            Some(&[("dc1", None), ("dc2", None)]),
        ),
        ("dc1 read", &["dc1"], Duration::ZERO, Some(&[("dc2", None)])),
        ("both read", &["dc1", "dc2"], Duration::ZERO, None),
        (
            "both read, almost stale",
            &["dc1", "dc2"],
            VALID - Duration::from_millis(1),
            None,
        ),
        (
            "both read, stale",
            &["dc1", "dc2"],
            VALID,
            Some(&[("dc1", Some(VALID)), ("dc2", Some(VALID))]),
        ),
    ];
    for (what, read, later, want) in cases {
        let mut homes = homes.clone();
        for name in *read {
            homes.observe(&dc(name), t0, Vec::new());
        }
        homes.failed(&dc("dc2"), "no node of dc2 reachable".into());
        let now = t0 + *later;
        for subject in [Subject::Lock("a"), Subject::Fleet] {
            let got = homes.route(subject, now, wall(0));
            match want {
                None => assert_eq!(got, Ok(None), "{what}: {subject:?}"),
                Some(missing) => {
                    let missing: Vec<_> = missing.iter().map(|(d, s)| (dc(d), *s)).collect();
                    let Err(Refusal::Unsurveyed {
                        datacenters,
                        last_error,
                    }) = &got
                    else {
                        panic!("{what}: {subject:?}: {got:?}");
                    };
                    assert_eq!(*datacenters, missing, "{what}");
                    let has_dc2 = missing.iter().any(|(d, _)| *d == dc("dc2"));
                    assert_eq!(last_error.is_some(), has_dc2, "{what}");
                }
            }
        }
        assert_eq!(
            homes.route(Subject::Unhomed, now, wall(0)),
            Ok(None),
            "{what}"
        );
    }
    let refusal = Refusal::Unsurveyed {
        datacenters: vec![(dc("dc2"), None)],
        last_error: Some("no node of dc2 reachable".into()),
    };
    assert_eq!(refusal.serves_in(), None);
    let words = refusal.describe(Subject::Lock("a"), Some(&dc("dc1")));
    for part in [
        "lock \"a\" is homed by no rule this process (in dc1) knows",
        "datacenter dc2 (since it started) (no node of dc2 reachable)",
        "so it is refused",
    ] {
        assert!(words.contains(part), "{part:?} in {words}");
    }
    // A rule known covers its rows whatever was read (H2 decides then).
    let mut homes = homes.clone();
    homes.observe(&dc("dc1"), t0, vec![(Rule::Default, record(1, "dc1", 0))]);
    assert_eq!(
        homes.route(Subject::Lock("a"), t0, wall(0)),
        Ok(Some(dc("dc1")))
    );
}

/// A homes cell that does not decode refuses every row it could decide:
/// its rule covers them and is at least as long as the rule that would
/// decide them without it, or it names no rule this build knows.
#[test]
fn an_unreadable_record_refuses_the_rows_it_could_decide() {
    let t0 = Instant::now();
    let mut homes = Homes::new(VALID, t0);
    homes.observe(
        &dc("dc1"),
        t0,
        vec![
            (Rule::Default, record(1, "dc1", 0)),
            (Rule::Prefix("eu/".into()), record(1, "dc1", 0)),
        ],
    );
    let bad = |rule: Option<Rule>| Unreadable {
        rule,
        column: "x".into(),
        datacenter: dc("dc2"),
        error: "expected value".into(),
    };
    let eu_de = Some(Rule::Prefix("eu/de/".into()));
    let eu = Some(Rule::Prefix("eu/".into()));
    // (the cell's rule, subject, refused)
    let cases: &[(Option<Rule>, Subject<'_>, bool)] = &[
        (eu_de.clone(), Subject::Lock("eu/de/1"), true),
        (eu_de.clone(), Subject::Lock("eu/fr/1"), false),
        (eu_de.clone(), Subject::Lock("us/1"), false),
        (eu_de.clone(), Subject::Fleet, false),
        (eu.clone(), Subject::Lock("eu/fr/1"), true),
        (eu.clone(), Subject::Lock("us/1"), false),
        (Some(Rule::Default), Subject::Lock("us/1"), true),
        (Some(Rule::Default), Subject::Fleet, true),
        (Some(Rule::Default), Subject::Lock("eu/1"), false),
        (None, Subject::Lock("eu/1"), true),
        (None, Subject::Fleet, true),
        (None, Subject::Unhomed, false),
    ];
    for (i, (rule, subject, refused)) in cases.iter().enumerate() {
        let mut homes = homes.clone();
        homes.observe_unreadable(&dc("dc2"), vec![bad(rule.clone())]);
        let got = homes.route(*subject, t0, wall(0));
        if *refused {
            assert_eq!(
                got,
                Err(Refusal::Unreadable(bad(rule.clone()))),
                "case #{i}: {rule:?} {subject:?}"
            );
        } else {
            assert!(got.is_ok(), "case #{i}: {rule:?} {subject:?}: {got:?}");
        }
        // The next read of dc2 that decodes clears it.
        homes.observe_unreadable(&dc("dc2"), Vec::new());
        assert!(homes.route(*subject, t0, wall(0)).is_ok(), "case #{i}");
    }
    let words = Refusal::Unreadable(bad(None)).describe(Subject::Lock("a"), None);
    assert!(
        words.contains(
            "the homes record \"x\" that datacenter dc2 shows does not decode (expected value)"
        ),
        "{words}"
    );
}

/// Seeds are stamped by the second they were written and the round:
/// a later seed wins over an earlier one, every seed loses to a move.
#[test]
fn a_later_seed_wins_over_an_earlier_one_and_every_move_over_both() {
    let at = |s: i64| Timestamp::from_micros(1_800_000_000 * 1_000_000 + s * 1_000_000);
    let cases: &[(Timestamp, Timestamp)] = &[
        (seed_stamp(at(0), 0), seed_stamp(at(0), 1)),
        (seed_stamp(at(0), 15), seed_stamp(at(1), 0)),
        (seed_stamp(at(0), 200), seed_stamp(at(1), 0)),
        (
            SEED_STAMP,
            seed_stamp(Timestamp::from_micros(0), 0).offset_micros(1),
        ),
        // A seed of the year 2500 below a move stamped in the year 2000.
        (
            seed_stamp(at(16_000_000_000), 15),
            Timestamp::from_micros(946_684_800 * 1_000_000),
        ),
    ];
    for (i, (earlier, later)) in cases.iter().enumerate() {
        assert!(earlier < later, "case #{i}: {earlier:?} < {later:?}");
    }
    assert_eq!(seed_stamp(Timestamp::from_micros(-5), 0), SEED_STAMP);
}

#[test]
fn a_seed_is_version_one_and_serves_at_once() {
    let seed = HomeRecord::seed(dc("dc1"), "node-a", wall(7));
    let expected = HomeRecord {
        at: wall(7).as_micros(),
        by: "node-a".into(),
        ..record(1, "dc1", 0)
    };
    assert_eq!(seed, expected);
    assert!(seed.serves_at(wall(0)));
    assert_eq!(seed.rank(), (1, true));
    assert!(!seed.as_pending().serves_at(wall(1_000_000)));
}
