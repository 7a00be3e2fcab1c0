use super::*;

fn t<'a>(ks: &'a str, table: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![(ks, table)]
}

#[test]
fn latency_jitter_is_uniform_within_bounds_and_replays() {
    let draw = |seed| {
        let c = FaultController::new();
        c.add(
            FaultRule::new(Fault::Latency(Duration::from_millis(2)))
                .with_jitter(Duration::from_millis(4), seed),
        )
        .unwrap();
        (0..200)
            .map(|_| c.decide(RequestOp::Read, &t("ks", "t")).delay)
            .collect::<Vec<_>>()
    };
    let a = draw(1);
    assert!(
        a.iter()
            .all(|d| *d >= Duration::from_millis(2) && *d < Duration::from_millis(6))
    );
    let mean = a.iter().sum::<Duration>() / 200;
    assert!(
        mean > Duration::from_millis(3) && mean < Duration::from_millis(5),
        "{mean:?}"
    );
    assert_eq!(a, draw(1));
    assert_ne!(a, draw(2));
}

#[test]
fn counted_rule_fires_n_times_then_stops() {
    let c = FaultController::new();
    let id = c.add(FaultRule::new(Fault::Overloaded).times(2)).unwrap();
    let main = t("lockshift", "main");
    assert_eq!(
        c.decide(RequestOp::Write, &main).before,
        Some(Fault::Overloaded)
    );
    assert_eq!(
        c.decide(RequestOp::Read, &main).before,
        Some(Fault::Overloaded)
    );
    assert_eq!(c.decide(RequestOp::Read, &main).before, None);
    assert_eq!(c.fired(&id), Some(2));
    assert_eq!(c.rules()[0].remaining, Some(0));
}

#[test]
fn tables_ops_and_internal_keyspaces() {
    let c = FaultController::new();
    c.add(FaultRule::new(Fault::Unavailable).on_table("ks.a").writes())
        .unwrap();
    assert_eq!(
        c.decide(RequestOp::Write, &t("ks", "a")).before,
        Some(Fault::Unavailable)
    );
    assert_eq!(c.decide(RequestOp::Read, &t("ks", "a")).before, None);
    assert_eq!(c.decide(RequestOp::Write, &t("ks", "b")).before, None);
    assert_eq!(c.decide(RequestOp::Write, &t("other", "a")).before, None);
    c.clear();
    c.add(FaultRule::new(Fault::Unavailable)).unwrap();
    assert_eq!(
        c.decide(RequestOp::Read, &t("system", "local")).before,
        None,
        "faults invariant 2"
    );
    assert_eq!(
        c.decide(RequestOp::Schema, &t("ks", "a")).before,
        None,
        "faults invariant 3"
    );
    assert_eq!(
        c.decide(RequestOp::Read, &t("ks", "a")).before,
        Some(Fault::Unavailable)
    );
}

#[test]
fn latency_adds_up_and_first_error_wins_without_consuming_later_ones() {
    let c = FaultController::new();
    let ms = Duration::from_millis;
    c.add(FaultRule::new(Fault::Latency(ms(5)))).unwrap();
    c.add(FaultRule::new(Fault::ReadTimeout).times(1)).unwrap();
    let later = c.add(FaultRule::new(Fault::Overloaded).times(1)).unwrap();
    c.add(FaultRule::new(Fault::Latency(ms(7)))).unwrap();
    let d = c.decide(RequestOp::Read, &t("ks", "a"));
    assert_eq!(d.delay, ms(12));
    assert_eq!(d.before, Some(Fault::ReadTimeout));
    assert_eq!(c.fired(&later), Some(0));
    assert_eq!(
        c.decide(RequestOp::Read, &t("ks", "a")).before,
        Some(Fault::Overloaded)
    );
}

#[test]
fn probability_is_seeded_and_replayable() {
    let run = || {
        let c = FaultController::new();
        c.add(FaultRule::new(Fault::Overloaded).with_probability(0.3, 42))
            .unwrap();
        (0..200)
            .map(|_| c.decide(RequestOp::Read, &t("ks", "a")).before.is_some())
            .collect::<Vec<_>>()
    };
    let a = run();
    assert_eq!(a, run());
    let fired = a.iter().filter(|f| **f).count();
    assert!((30..90).contains(&fired), "{fired} of 200 at p = 0.3");
    assert!(
        FaultController::new()
            .add(FaultRule::new(Fault::Overloaded).with_probability(1.5, 0))
            .is_err()
    );
}

#[test]
fn upsert_keeps_counts_of_an_unchanged_rule() {
    let c = FaultController::new();
    let rule = FaultRule::new(Fault::Overloaded).times(3);
    let id = c.upsert("x", rule.clone()).unwrap();
    c.decide(RequestOp::Read, &t("ks", "a"));
    c.upsert("x", rule).unwrap();
    assert_eq!(c.fired(&id), Some(1));
    c.upsert("x", FaultRule::new(Fault::Overloaded).times(5))
        .unwrap();
    assert_eq!(c.fired(&id), Some(0));
    assert!(c.remove(&id));
    assert!(!c.remove(&id));
}
