//! Several datacenters (issue 29, docs/design.md §4a): a fleet split
//! between two datacenters of one cluster, the link between them cut, a
//! datacenter lost, homes moved — planned and forced — while the nodes
//! keep taking locks. Each scenario runs for many seeds on the paused
//! clock; one oracle watches every critical section.
//!
//! The first two are the "before": without homes, `local_quorum` lets both
//! sides of a split hold one lock, and `quorum` stops every lock of the
//! fleet. The others are the fix: with homes, the home side keeps going,
//! the far side is refused at once naming the home, and moves never make
//! two homes.
//!
//! A run spans a minute or more of simulated time with a fleet of four
//! nodes, so the default seed counts are small (the suite runs in debug
//! builds); `LOCKSHIFT_SEEDS=300` with `--release` searches deeper (all six
//! ran so for issue 29, 300 seeds each, clean).

use std::time::Duration;

use lockshift_decide::algorithm::Mode;
use lockshift_decide::home::{MoveAsk, Rule};
use lockshift_rollout::homes::{MoveRequest, move_home};
use std::sync::Arc;

use lockshift_lock::{LeaseSettings, LockId};
use lockshift_store::{Consistency, HintDelivery, SharedClock};
use lockshift_tests::datacenters::{Outcome, Routing, Sites, SitesFleet, dc, plan};
use lockshift_tests::fleet::queue;
use lockshift_tests::sim::{Oracle, contend, for_each_seed, node_env, paused};

const LOCKS: [&str; 3] = ["account-1", "account-2", "account-3"];

/// Two nodes in dc1, two in dc2.
const PLACEMENT: [&str; 4] = ["dc1", "dc1", "dc2", "dc2"];

fn homed_in_dc1() -> Routing {
    Routing::Homes {
        default: dc("dc1"),
        prefixes: Vec::new(),
    }
}

async fn run_for(outcome: &Outcome, phase: &str, how_long: Duration) {
    outcome.phase(phase);
    tokio::time::sleep(how_long).await;
}

/// Records the homes (serving at once), starts the fleet, runs `before`,
/// cuts dc1 from dc2 for `split`, heals, runs `after`, stops.
async fn split_run(sites: Sites, before: Duration, split: Duration, after: Duration) -> SitesFleet {
    sites.record_homes().await;
    first_start_split_run(sites, before, split, after).await
}

/// As [`split_run`], but the fleet's first start records the homes.
async fn first_start_split_run(
    sites: Sites,
    before: Duration,
    split: Duration,
    after: Duration,
) -> SitesFleet {
    let cluster = sites.cluster.clone();
    let outcome = sites.outcome.clone();
    let mut fleet = SitesFleet::new(sites, PLACEMENT.len());
    let Ok(()) = fleet.start_all(Mode::Auto).await;
    run_for(&outcome, "before", before).await;
    cluster.cut_link(&dc("dc1"), &dc("dc2"));
    // Critical sections entered before the cut end in this phase.
    run_for(&outcome, "cut", Duration::from_secs(2)).await;
    run_for(&outcome, "split", split).await;
    cluster.restore_link(&dc("dc1"), &dc("dc2"));
    run_for(&outcome, "after", after).await;
    outcome.phase("stopping");
    fleet.stop_all().await;
    fleet
}

fn assert_exclusive(outcome: &Outcome, what: &str) {
    let violations = outcome.violations();
    assert!(
        violations.is_empty(),
        "{what}: two holders at once: {violations:?}\n{}",
        outcome.describe()
    );
    let (counted, completed) = outcome.counters_add_up();
    assert_eq!(
        counted,
        completed,
        "{what}: lost increments\n{}",
        outcome.describe()
    );
}

/// Before the fix, negative control: processes that reach their cells at
/// LOCAL_QUORUM in their own datacenter, with no homes — the raw lockers,
/// as every process did before homes — on both sides of a split: each
/// side's "local quorum" is its own, and both hold one lock (what 3 rounds
/// of 3 showed on a real two-datacenter cluster). The oracle must see it,
/// or it could not see the fix's absence either.
#[test]
fn local_quorum_across_a_split_gives_two_holders() {
    for_each_seed(
        "local_quorum_across_a_split_gives_two_holders",
        0,
        2,
        |seed| {
            paused(async {
                let sites = Sites::new(
                    &["dc1", "dc2"],
                    &PLACEMENT,
                    Routing::LocalQuorum,
                    LOCKS.to_vec(),
                    seed,
                );
                sites.cluster.cut_link(&dc("dc1"), &dc("dc2"));
                let clock: SharedClock = sites.clock.clone();
                let lockers = PLACEMENT
                    .iter()
                    .enumerate()
                    .map(|(i, place)| {
                        let local = sites
                            .cluster
                            .client_in(&dc(place))
                            .expect("a datacenter of the cluster")
                            .with_consistency(Consistency::LocalQuorum);
                        let env = node_env(
                            i,
                            seed,
                            Arc::new(local),
                            clock.clone(),
                            plan(),
                            LeaseSettings::default(),
                        );
                        queue(&env).locker
                    })
                    .collect();
                let locks: Vec<LockId> = LOCKS.iter().map(|l| LockId::new(*l).unwrap()).collect();
                let report = contend(
                    lockers,
                    &locks,
                    30,
                    Duration::from_millis(20),
                    seed,
                    Arc::new(Oracle::default()),
                )
                .await;
                assert!(
                    !report.violations.is_empty(),
                    "seed {seed}: both sides held locks in the split without overlapping? {report:?}"
                );
            });
        },
    );
}

/// Before the fix: at the default QUORUM no side of a split has a quorum —
/// every lock of the fleet stops, on both sides — and nothing says the
/// database is at fault but the store error.
#[test]
fn quorum_across_a_split_stops_every_lock() {
    for_each_seed("quorum_across_a_split_stops_every_lock", 0, 2, |seed| {
        paused(async {
            let sites = Sites::new(
                &["dc1", "dc2"],
                &PLACEMENT,
                Routing::Quorum,
                LOCKS.to_vec(),
                seed,
            );
            let outcome = sites.outcome.clone();
            split_run(
                sites,
                Duration::from_secs(5),
                Duration::from_secs(30),
                Duration::from_secs(20),
            )
            .await;
            assert_exclusive(&outcome, "quorum");
            for (side, far) in [("dc1", "dc2"), ("dc2", "dc1")] {
                let split = outcome.tally("split", side);
                assert_eq!(
                    split.held, 0,
                    "seed {seed}: {side} held a lock in the split"
                );
                assert!(split.failures() > 0, "seed {seed}: {side} tried");
                // Once its view of the far homes lapses, a process says why
                // (H5) instead of waiting out an unreachable quorum.
                assert!(
                    split.failed_naming(&format!("has not read the homes of datacenter {far}")) > 0,
                    "seed {seed}: {side} names {far}\n{}",
                    outcome.describe()
                );
                assert!(
                    outcome.tally("after", side).held > 0,
                    "seed {seed}: {side} after"
                );
            }
        });
    });
}

/// The fix (H1, H2): every lock homed in dc1. Through the split the dc1
/// side keeps taking the locks, the dc2 side is refused, naming dc1, and
/// after it heals both sides take them again — never two holders.
#[test]
fn homes_keep_the_home_side_going_through_a_split() {
    for_each_seed(
        "homes_keep_the_home_side_going_through_a_split",
        0,
        6,
        |seed| {
            paused(async {
                let sites = Sites::new(
                    &["dc1", "dc2"],
                    &PLACEMENT,
                    homed_in_dc1(),
                    LOCKS.to_vec(),
                    seed,
                );
                let outcome = sites.outcome.clone();
                split_run(
                    sites,
                    Duration::from_secs(10),
                    Duration::from_secs(40),
                    Duration::from_secs(20),
                )
                .await;
                assert_exclusive(&outcome, "homes");
                let ctx = outcome.describe();
                assert!(
                    outcome.tally("before", "dc2").held > 0,
                    "seed {seed}: far side before\n{ctx}"
                );
                assert!(
                    outcome.tally("split", "dc1").held > 20,
                    "seed {seed}: home side in the split\n{ctx}"
                );
                let far = outcome.tally("split", "dc2");
                assert_eq!(far.held, 0, "seed {seed}: far side in the split\n{ctx}");
                assert!(
                    far.failed_naming("homed in datacenter dc1") > 0,
                    "seed {seed}: the far side's refusals name the home\n{ctx}"
                );
                for side in ["dc1", "dc2"] {
                    assert!(
                        outcome.tally("after", side).held > 0,
                        "seed {seed}: {side} after\n{ctx}"
                    );
                }
            });
        },
    );
}

/// H1: with a prefix rule, each datacenter is the home of its own locks,
/// and each side of a split keeps taking its own.
#[test]
fn each_side_of_a_split_keeps_the_locks_it_is_home_to() {
    for_each_seed(
        "each_side_of_a_split_keeps_the_locks_it_is_home_to",
        0,
        3,
        |seed| {
            paused(async {
                let sites = Sites::new(
                    &["dc1", "dc2"],
                    &PLACEMENT,
                    Routing::Homes {
                        default: dc("dc1"),
                        prefixes: vec![("eu/".into(), dc("dc2"))],
                    },
                    vec!["us/1", "us/2", "eu/1", "eu/2"],
                    seed,
                );
                let outcome = sites.outcome.clone();
                // The fleet's first start records both rules: they serve
                // after the move wait (H5), within the first phase.
                first_start_split_run(
                    sites,
                    Duration::from_secs(35),
                    Duration::from_secs(40),
                    Duration::from_secs(10),
                )
                .await;
                assert_exclusive(&outcome, "prefix homes");
                let before = outcome.tally("before", "dc1");
                assert!(
                    before.held > 0 && before.failed_naming("takes over in") > 0,
                    "seed {seed}: refused as moving, then served\n{}",
                    outcome.describe()
                );
                for side in ["dc1", "dc2"] {
                    let split = outcome.tally("split", side);
                    assert!(
                        split.held > 10,
                        "seed {seed}: {side} kept its own locks\n{}",
                        outcome.describe()
                    );
                }
                let ctx = outcome.describe();
                assert!(
                    outcome
                        .tally("split", "dc1")
                        .failed_naming("homed in datacenter dc2")
                        > 0,
                    "{ctx}"
                );
                assert!(
                    outcome
                        .tally("split", "dc2")
                        .failed_naming("homed in datacenter dc1")
                        > 0,
                    "{ctx}"
                );
            });
        },
    );
}

/// H3: a planned move of the home from dc1 to dc2 while both sides take
/// the locks: the new home serves only after every view and lease under
/// the old one has run out, and never two holders.
#[test]
fn a_planned_move_under_load_never_makes_two_homes() {
    for_each_seed(
        "a_planned_move_under_load_never_makes_two_homes",
        0,
        4,
        |seed| {
            paused(async {
                let sites = Sites::new(
                    &["dc1", "dc2"],
                    &PLACEMENT,
                    homed_in_dc1(),
                    LOCKS.to_vec(),
                    seed,
                );
                let outcome = sites.outcome.clone();
                sites.record_homes().await;
                let (operator, _fresh) = sites.operator(&dc("dc1")).await;
                let clock: SharedClock = sites.clock.clone();
                let settings = sites.settings(99, Mode::Auto);
                let mut fleet = SitesFleet::new(sites, PLACEMENT.len());
                let Ok(()) = fleet.start_all(Mode::Auto).await;
                run_for(&outcome, "before", Duration::from_secs(10)).await;
                outcome.phase("moving");
                let report = move_home(
                    &operator,
                    &clock,
                    &settings.rollout,
                    &settings.lock.lease(),
                    MoveRequest {
                        ask: MoveAsk {
                            rule: Rule::Default,
                            to: dc("dc2"),
                            force: false,
                        },
                        dry_run: false,
                        by: "operator".into(),
                    },
                )
                .await
                .expect("the move runs");
                assert!(report.applied, "seed {seed}: {:?}", report.refusals);
                tokio::time::sleep(report.wait + Duration::from_secs(5)).await;
                run_for(&outcome, "after", Duration::from_secs(20)).await;
                outcome.phase("stopping");
                fleet.stop_all().await;
                assert_exclusive(&outcome, "planned move");
                for side in ["dc1", "dc2"] {
                    assert!(
                        outcome.tally("after", side).held > 0,
                        "seed {seed}: {side} takes the locks at the new home\n{}",
                        outcome.describe()
                    );
                }
            });
        },
    );
}

/// H4: the home datacenter is lost; the operator forces the home to dc2;
/// later dc1 comes back with only the data it had (its hints held) and a
/// process of dc1 starts again — it learns of the move before it takes a
/// lock there, and never two holders.
#[test]
fn a_forced_move_after_the_home_is_lost_never_makes_two_homes() {
    for_each_seed(
        "a_forced_move_after_the_home_is_lost_never_makes_two_homes",
        0,
        4,
        |seed| {
            paused(async {
                let sites = Sites::new(
                    &["dc1", "dc2"],
                    &PLACEMENT,
                    homed_in_dc1(),
                    LOCKS.to_vec(),
                    seed,
                );
                let outcome = sites.outcome.clone();
                let cluster = sites.cluster.clone();
                sites.record_homes().await;
                let (operator, _fresh) = sites.operator(&dc("dc2")).await;
                let clock: SharedClock = sites.clock.clone();
                let settings = sites.settings(99, Mode::Auto);
                let mut fleet = SitesFleet::new(sites, PLACEMENT.len());
                let Ok(()) = fleet.start_all(Mode::Auto).await;
                run_for(&outcome, "before", Duration::from_secs(10)).await;
                cluster.stop_datacenter(&dc("dc1"));
                run_for(&outcome, "stopping dc1", Duration::from_secs(2)).await;
                run_for(&outcome, "lost", Duration::from_secs(10)).await;
                let ask = |force| MoveRequest {
                    ask: MoveAsk {
                        rule: Rule::Default,
                        to: dc("dc2"),
                        force,
                    },
                    dry_run: false,
                    by: "operator".into(),
                };
                let refused = move_home(
                    &operator,
                    &clock,
                    &settings.rollout,
                    &settings.lock.lease(),
                    ask(false),
                )
                .await
                .expect("the move is judged");
                assert!(
                    !refused.applied,
                    "seed {seed}: a planned move needs the old home"
                );
                let report = move_home(
                    &operator,
                    &clock,
                    &settings.rollout,
                    &settings.lock.lease(),
                    ask(true),
                )
                .await
                .expect("the forced move runs");
                assert!(report.applied, "seed {seed}: {:?}", report.refusals);
                outcome.phase("forced");
                tokio::time::sleep(report.wait + Duration::from_secs(5)).await;
                run_for(&outcome, "served", Duration::from_secs(10)).await;
                cluster.start_datacenter(&dc("dc1"), HintDelivery::Held);
                let Ok(()) = fleet.restart(0, Mode::Auto).await;
                run_for(&outcome, "back", Duration::from_secs(15)).await;
                cluster.deliver_hints();
                run_for(&outcome, "repaired", Duration::from_secs(10)).await;
                outcome.phase("stopping");
                fleet.stop_all().await;
                assert_exclusive(&outcome, "forced move");
                let ctx = outcome.describe();
                for side in ["dc1", "dc2"] {
                    assert_eq!(
                        outcome.tally("lost", side).held,
                        0,
                        "seed {seed}: {side} while the home was lost\n{ctx}"
                    );
                    assert!(
                        outcome.tally("served", side).held > 0,
                        "seed {seed}: {side} at the new home\n{ctx}"
                    );
                    assert!(
                        outcome.tally("back", side).held > 0,
                        "seed {seed}: {side} once dc1 is back\n{ctx}"
                    );
                }
            });
        },
    );
}
