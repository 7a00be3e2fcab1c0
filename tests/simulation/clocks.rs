//! Processes whose clocks are minutes off the database's (issue 41,
//! docs/design.md §4b, C1). Each measures its offset against the
//! simulated cluster's clock and stamps on its clock corrected by it, so
//! it runs its mode and the rollout guards see it as they see a process
//! in step. The negative control runs the same schedule with a far process
//! that takes its own clock for the database's: its registry rows land ten
//! minutes in the past, where no guard reads, and it takes locks as legacy
//! beside queue holders.

use std::time::Duration;

use lockshift_decide::algorithm::{Mode, Stage};
use lockshift_store::schema;
use lockshift_tests::attacks::{Started, World, cut_off, must_move, plan, try_move};
use lockshift_tests::clocks::{Offsets, skewed};
use lockshift_tests::sim::{for_each_seed, paused, skews};

const LOCKS: [&str; 3] = ["x1", "x2", "x3"];
const S: i64 = 1_000_000;
const MINUTE: i64 = 60 * S;

/// Node `id` in `mode`, its clock `offset` µs off the cluster's, knowing
/// it or not; with a config file (for `edit_mode`).
async fn start(w: &mut World, id: &str, mode: Mode, offset: i64, offsets: Offsets) -> Started {
    let (store, clock) = skewed(&w.cluster, offset, offsets);
    w.start_on(id, mode, plan(mode == Mode::Legacy), true, store, clock)
        .await
}

/// Offsets for `n` far processes: within ±10 minutes, at least 2 s off
/// (beyond the 1 s margin of the simulated timings).
fn far_offsets(seed: u64, n: usize) -> Vec<i64> {
    skews(seed, n, Duration::from_secs(600))
        .into_iter()
        .map(|o| match o {
            o if o.abs() >= 2 * S => o,
            o if o >= 0 => o + 2 * S,
            o => o - 2 * S,
        })
        .collect()
}

/// Every process's reading is within its error of the truth (the database's
/// clock minus its host's: minus its offset), and each runs as its mode and
/// the stage say, however far its host's clock is (C1).
fn assert_measured(started: &[(String, i64, &Started)], seed: u64) {
    for (id, offset, s) in started {
        let status = s.node.status();
        let reading = status
            .clock
            .unwrap_or_else(|| panic!("seed {seed}: {id} has no reading"));
        let miss = (reading.offset_us + offset).unsigned_abs();
        assert!(
            miss <= reading.error_us,
            "seed {seed}: {id} at {offset} µs read {reading:?}"
        );
        assert!(reading.error_us < 20_000, "seed {seed}: {id}: {reading:?}");
        assert_eq!(
            status.unconfirmed_because, None,
            "seed {seed}: {id} at {offset} µs"
        );
    }
}

/// Issue 41 item 5: processes up to ten minutes apart — every mode, most
/// far beyond the margin, two in step — hammer three locks while the
/// operator moves legacy → dual → queue and back to legacy. Each measures
/// its offset and stamps on its clock corrected by it: no two holders
/// ever, every process uses legacy, combined and queue as its mode and the
/// stages say, and the stages move as in a fleet in step.
#[test]
fn processes_ten_minutes_apart_measure_their_offsets_and_keep_exclusion() {
    let test = "processes_ten_minutes_apart_measure_their_offsets_and_keep_exclusion";
    for_each_seed(test, 0, 4, |seed| {
        paused(async {
            let mut w = World::new(seed);
            let rollout = w.rollout();
            let near = skews(seed ^ 0xc10c, 2, Duration::from_millis(400));
            let far = far_offsets(seed, 4);
            let l = start(
                &mut w,
                "near-legacy",
                Mode::Legacy,
                near[0],
                Offsets::Measured,
            )
            .await;
            let a = start(&mut w, "near-auto", Mode::Auto, near[1], Offsets::Measured).await;
            // A far legacy process switches to auto with the near one; a
            // far queue process would hold the rollback back, as a near one.
            let modes = [Mode::Legacy, Mode::Auto, Mode::Auto, Mode::Combined];
            let mut fars = Vec::new();
            for (i, (mode, offset)) in modes.into_iter().zip(&far).enumerate() {
                let id = format!("far-{i}");
                fars.push((
                    id.clone(),
                    *offset,
                    start(&mut w, &id, mode, *offset, Offsets::Measured).await,
                ));
            }
            for s in [&l, &a].into_iter().chain(fars.iter().map(|(_, _, s)| s)) {
                w.hammer(s.node.clone(), &LOCKS, 2, Duration::from_millis(5));
            }
            tokio::time::sleep(Duration::from_secs(8)).await;
            let mut everyone: Vec<(String, i64, &Started)> = vec![
                ("near-legacy".into(), near[0], &l),
                ("near-auto".into(), near[1], &a),
            ];
            everyone.extend(fars.iter().map(|(id, o, s)| (id.clone(), *o, s)));
            assert_measured(&everyone, seed);

            // The legacy processes switch to auto; then forward and back.
            w.edit_mode(&l, "near-legacy", Mode::Auto);
            w.edit_mode(&fars[0].2, "far-0", Mode::Auto);
            must_move(&rollout, Stage::Dual, Duration::from_secs(90)).await;
            must_move(&rollout, Stage::Queue, Duration::from_secs(90)).await;
            tokio::time::sleep(Duration::from_secs(10)).await;
            assert_measured(&everyone, seed);
            must_move(&rollout, Stage::Dual, Duration::from_secs(90)).await;
            must_move(&rollout, Stage::Legacy, Duration::from_secs(90)).await;
            tokio::time::sleep(Duration::from_secs(5)).await;
            let outcome = w.finish().await;
            outcome.assert_exclusive(&format!("seed {seed}"));
            let taken = |key: &str| outcome.taken.get(key).copied().unwrap_or(0);
            for (who, ids) in [
                ("near", vec!["near-legacy", "near-auto"]),
                ("far", vec!["far-0", "far-1", "far-2"]),
            ] {
                for algorithm in ["legacy", "combined", "queue"] {
                    let n: u64 = ids.iter().map(|n| taken(&format!("{n}:{algorithm}"))).sum();
                    assert!(
                        n > 0,
                        "seed {seed}: no {who} {algorithm} acquisition: {:?}",
                        outcome.taken
                    );
                }
            }
            for algorithm in ["legacy", "queue"] {
                assert_eq!(
                    taken(&format!("far-3:{algorithm}")),
                    0,
                    "seed {seed}: far-3 (combined) took {algorithm}: {:?}",
                    outcome.taken
                );
            }
        })
    });
}

/// The schedule of the negative control, with a process whose clock is
/// `offset` µs off the database's, knowing it (`offsets`) or not. "old" (legacy, idle) is cut off from the
/// `rollout` and `nodes` partitions, so it acts on its last view of stage
/// `legacy` for `stage_valid_for`; the operator advances to `queue` as fast
/// as the guards allow; then a queue node and "old" take the same locks.
/// Returns whether the stage reached `queue`, and the violations seen.
async fn old_process_meets_queue(seed: u64, offset: i64, offsets: Offsets) -> (bool, Vec<String>) {
    let mut w = World::new(seed);
    w.timings.reread = Duration::from_secs(4);
    w.timings.valid_for = Duration::from_secs(8);
    w.timings.quiet = Duration::from_secs(25);
    let rollout = w.rollout();
    let old = start(&mut w, "old", Mode::Legacy, offset, offsets).await;
    let new = w.start("new", Mode::Auto, plan(false), false).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    old.env
        .store
        .set_plan(cut_off(plan(true), vec![schema::ROLLOUT, schema::NODES]));
    let mut moved = true;
    for to in [Stage::Dual, Stage::Queue] {
        // The in-step process re-reads and heartbeats before each attempt,
        // so only the guards' view of "old" can hold the operator back.
        let _ = new.node.refresh().await;
        let _ = new.node.heartbeat().await;
        moved = moved
            && try_move(
                &rollout,
                to,
                Duration::from_millis(50),
                Duration::from_secs(3),
            )
            .await;
    }
    let q = w.start("q", Mode::Queue, plan(false), false).await;
    w.hammer(q.node.clone(), &LOCKS, 3, Duration::from_millis(3));
    w.hammer(old.node.clone(), &LOCKS, 12, Duration::from_millis(3));
    tokio::time::sleep(Duration::from_secs(10)).await;
    (moved, w.finish().await.violations)
}

/// The negative control (issue 41 item 5): a process ten minutes behind
/// that takes its own clock for the database's writes its registry rows and
/// activity promises ten minutes in the past — the guards read neither —
/// and takes locks as legacy beside queue holders. Measuring its offset and
/// stamping on its clock corrected by it (C1) it is seen as a process
/// in step is: its row says it acts on `legacy` until it expires (R5), the
/// guards hold the stage back, and the same schedule, the same seeds, keep
/// exclusion.
#[test]
fn a_far_process_that_ignores_its_offset_breaks_exclusion_and_one_that_measures_it_does_not() {
    for seed in 0..2 {
        let (moved, violations) = paused(old_process_meets_queue(seed, 0, Offsets::Measured));
        assert!(
            !moved,
            "seed {seed}: in step, the guards wait for the old process"
        );
        assert!(violations.is_empty(), "seed {seed}: {violations:?}");
    }
    let mut broken = Vec::new();
    for seed in 0..6 {
        let (moved, violations) = paused(old_process_meets_queue(
            seed,
            -10 * MINUTE,
            Offsets::Ignored,
        ));
        assert!(
            moved,
            "seed {seed}: the guards see nothing of the far process"
        );
        if !violations.is_empty() {
            broken.push((seed, violations[0].clone()));
        }
    }
    assert!(
        !broken.is_empty(),
        "ignoring the offset never broke exclusion in 6 seeds: is the control blind?"
    );
    println!(
        "ignoring the offset: {} of 6 seeds broke exclusion, e.g. {:?}",
        broken.len(),
        broken[0]
    );
    let test =
        "a_far_process_that_ignores_its_offset_breaks_exclusion_and_one_that_measures_it_does_not";
    for_each_seed(test, 0, 6, |seed| {
        let (moved, violations) = paused(old_process_meets_queue(
            seed,
            -10 * MINUTE,
            Offsets::Measured,
        ));
        assert!(
            !moved,
            "seed {seed}: measured, the guards wait for the far process as for one in step"
        );
        assert!(violations.is_empty(), "seed {seed}: {violations:?}");
    });
}
