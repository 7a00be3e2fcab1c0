use super::*;

#[test]
fn two_holders_inside_one_lock_yield_the_demos_line() {
    let oracle = Oracle::default();
    oracle.enter("account-1", "a (legacy)");
    oracle.enter("account-1", "b (queue)");
    let lines: Vec<String> = oracle
        .violations()
        .iter()
        .map(Violation::held_at_once)
        .collect();
    assert_eq!(
        lines,
        ["lock account-1 held by a (legacy) and b (queue) at once"]
    );
}

#[test]
fn holders_one_after_the_other_are_no_violation() {
    let oracle = Oracle::default();
    oracle.enter("account-1", "a (legacy)");
    oracle.exit("account-1", "a (legacy)");
    oracle.enter("account-1", "b (queue)");
    oracle.enter("account-2", "a (legacy)");
    assert!(oracle.violations().is_empty());
    assert_eq!(oracle.entered(), 3);
}

#[test]
fn a_violation_displays_as_the_tests_print_it() {
    let violation = Violation {
        lock: "l".into(),
        inside: "a".into(),
        entered: "b".into(),
    };
    assert_eq!(violation.to_string(), "b entered lock l while a held it");
}

#[test]
fn a_holder_told_of_its_loss_leaves_and_the_lapse_is_kept() {
    let oracle = Oracle::default();
    oracle.enter("account-1", "a (combined)");
    oracle.exit_lost("account-1", "a (combined)", "renewal failed");
    oracle.enter("account-1", "b (legacy)");
    assert!(oracle.violations().is_empty());
    assert_eq!(
        oracle.lapses(),
        [Lapse {
            lock: "account-1".into(),
            who: "a (combined)".into(),
            reason: "renewal failed".into(),
        }]
    );
}
