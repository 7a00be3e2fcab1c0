//! Leader election (issue 32, docs/design.md §5b) through the rollout:
//! candidates of mixed modes campaign again and again in one election
//! while the operator moves the stage forward to `complete` and back to
//! `legacy`, leaders are cut off from the store or paused past their lease,
//! and observers follow who leads. An independent referee (the exclusion
//! oracle of the lock simulations, told by the leaders when they act)
//! checks that no two leaders ever act at once and that tokens grow from
//! leader to leader; at checkpoints where nothing changed for longer than
//! an observer's period, `node.leader` and every observer must name the
//! leader the terms say leads. `LOCKSHIFT_SEEDS=300` for the full search.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use lockshift::{Algorithm, Leader, Stage};
use lockshift_tests::election::{Ended, Referee, Setup, Stats, rogue_leaders, through_the_rollout};
use lockshift_tests::sim::{for_each_seed, paused};
use tokio::time::Instant;

/// Per seed: four candidates of mixed modes (two legacy ones, then a
/// combined and an auto one join) and three observers through every stage
/// forward and back, the modes switched by config edits while campaigns
/// wait; one
/// leader in ten cut off from the store, one in ten paused past its lease,
/// one in ten holding past its TTL, some proclaiming new values. Proves:
/// never two leaders acting at once, whichever algorithm took the lock and
/// across every stage change; each leader's token greater than every
/// earlier one's; a leader cut off or paused is told before anyone else
/// leads; and at every checkpoint (after every stage, at random, at the
/// end, and once every candidate stopped) `node.leader` and every observer
/// name exactly the leader the terms say leads — node, value, time, token
/// — or nobody.
#[test]
fn one_leader_at_a_time_through_the_rollout_and_observers_converge() {
    let test = "one_leader_at_a_time_through_the_rollout_and_observers_converge";
    let total = Mutex::new((0u64, Stats::default()));
    for_each_seed(test, 0, 4, |seed| {
        let report = paused(through_the_rollout(
            seed,
            Setup {
                faults: true,
                rogue: false,
            },
        ));
        let what = format!("seed {seed}");
        report.assert_clean(&what);
        let s = &report.stats;
        assert_eq!(
            s.transitions,
            [
                Stage::Dual,
                Stage::Queue,
                Stage::Complete,
                Stage::Queue,
                Stage::Dual,
                Stage::Legacy
            ],
            "{what}"
        );
        for algorithm in ["legacy", "combined", "queue"] {
            assert!(
                s.terms_by(algorithm) > 0,
                "{what}: no leadership taken by {algorithm}: {:?}\nterms: {}",
                s.by_stage,
                report.timeline()
            );
        }
        assert!(
            s.checkpoints >= 4,
            "{what}: only {} checkpoints",
            s.checkpoints
        );
        println!("seed {seed}: {s}");
        if std::env::var_os("LOCKSHIFT_TIMELINE").is_some() {
            println!("seed {seed}: terms: {}", report.timeline());
        }
        if !s.resurrections.is_empty() {
            println!(
                "seed {seed}: {}\nterms: {}",
                s.resurrections.join("\n"),
                report.timeline()
            );
        }
        let mut total = total.lock().unwrap_or_else(PoisonError::into_inner);
        total.0 += 1;
        total.1.add(s);
    });
    let (seeds, total) = total.into_inner().unwrap_or_else(PoisonError::into_inner);
    println!("{seeds} seeds: {total}");
    if !total.resurrections.is_empty() {
        println!(
            "observers showing a former leader after a newer one, e.g.: {:?}",
            &total.resurrections[..total.resurrections.len().min(3)]
        );
    }
    if !total.unrecorded.is_empty() {
        println!(
            "unrecorded campaigns, e.g.: {:?}",
            &total.unrecorded[..total.unrecorded.len().min(3)]
        );
    }
}

/// The negative controls of the run above, so its checks can fail: a
/// candidate whose every leadership pauses past its lease and on resuming
/// acts without looking is seen leading at once with the next leader; an
/// observer whose node stopped is seen showing a leader that no longer
/// leads.
#[test]
fn a_leader_acting_after_a_pause_without_looking_is_caught() {
    let test = "a_leader_acting_after_a_pause_without_looking_is_caught";
    for_each_seed(test, 0, 2, |seed| {
        let report = paused(rogue_leaders(seed));
        assert!(
            !report.overlaps.is_empty(),
            "seed {seed}: leaders acting on a lost lease went unseen: {}",
            report.timeline()
        );
        assert!(report.stats.pauses > 0, "seed {seed}: nobody paused");
        assert!(
            report
                .problems
                .iter()
                .any(|p| p.contains("observer o1 shows")),
            "seed {seed}: the frozen observer went unseen: {:?}",
            report.problems
        );
    });
}

fn leader(node: &str, token: u64) -> Leader {
    Leader {
        node: node.to_string(),
        value: format!("http://{node}"),
        since: std::time::UNIX_EPOCH,
        token,
    }
}

/// The referee on fabricated histories: terms one after the other pass; a
/// term beginning while another leader acts, a paused leader acting again
/// while another leads, and a token not greater than the one before are
/// each caught.
#[test]
fn the_referee_catches_fabricated_overlaps_and_tokens() {
    paused(async {
        let linger = Duration::from_secs(12);
        let step = Duration::from_millis(10);
        let clean = Referee::new("e", linger);
        let a = clean.begin(&leader("a", 1), Algorithm::Legacy, Stage::Legacy);
        tokio::time::sleep(step).await;
        clean.end(a, Ended::Resigned, false);
        let b = clean.begin(&leader("b", 2), Algorithm::Queue, Stage::Queue);
        clean.pause(b);
        let c = clean.begin(&leader("c", 3), Algorithm::Combined, Stage::Queue);
        clean.end(b, Ended::LostInPause, true);
        assert!(clean.overlaps().is_empty() && clean.problems().is_empty());
        assert_eq!(clean.current().unwrap(), Some(leader("c", 3)));
        assert!(!clean.settled_for(Duration::ZERO), "b's record may linger");
        tokio::time::sleep(linger).await;
        assert!(clean.settled_for(Duration::ZERO));
        clean.end(c, Ended::Resigned, false);
        assert_eq!(clean.current().unwrap(), None);

        let overlap = Referee::new("e", linger);
        let a = overlap.begin(&leader("a", 1), Algorithm::Legacy, Stage::Legacy);
        tokio::time::sleep(step).await;
        overlap.begin(&leader("b", 2), Algorithm::Combined, Stage::Legacy);
        let seen = overlap.overlaps();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(
            seen[0].to_string(),
            "b (token 2) entered lock e while a (token 1) held it"
        );
        assert!(overlap.current().is_err(), "two open terms");
        overlap.end(a, Ended::Resigned, false);

        let rogue = Referee::new("e", linger);
        let a = rogue.begin(&leader("a", 1), Algorithm::Queue, Stage::Queue);
        rogue.pause(a);
        rogue.begin(&leader("b", 2), Algorithm::Queue, Stage::Queue);
        assert!(rogue.overlaps().is_empty(), "a paused leader does not act");
        rogue.resume(a);
        assert_eq!(rogue.overlaps().len(), 1, "a resumed leader acts");

        let tokens = Referee::new("e", linger);
        let a = tokens.begin(&leader("a", 5), Algorithm::Queue, Stage::Queue);
        tokens.end(a, Ended::Resigned, false);
        tokens.begin(&leader("b", 5), Algorithm::Queue, Stage::Queue);
        assert_eq!(tokens.problems().len(), 1, "{:?}", tokens.problems());
    });
}

/// A leader's record lives no longer than its lease plus the rounding of
/// whole-second TTLs (docs/design.md §5b, L8 in §5): once the next leader
/// took the lock — the former lease is over — and resigned, nobody leads a
/// second later. The former leader here proclaimed a new value 9 s after
/// it took the lock, just before its first renewal, and was then cut off
/// from the store. Before L8 the record took a whole TTL from that write
/// and showed the former leader again, to `node.leader` and every
/// observer, up to `renew_every` (10 s here) after its successor resigned.
#[test]
fn a_proclaimed_record_does_not_outlive_the_lease() {
    use std::sync::Arc;

    use lockshift::{AcquireOptions, Node, Settings};
    use lockshift_store::{
        FaultPlan, FaultyStore, MemoryStore, SharedClock, SharedStore, Timestamp, TokioClock,
    };

    paused(async {
        let clock: SharedClock = Arc::new(TokioClock::starting_at(Timestamp::from_micros(
            1_767_225_600_250_000,
        )));
        let store = Arc::new(MemoryStore::with_clock(clock.clone()));
        let start = |id: &str, store: SharedStore| {
            let mut settings = Settings::default();
            settings.node.id = Some(id.to_string());
            Node::builder()
                .settings(settings)
                .store(store)
                .clock(clock.clone())
                .seed(7)
                .start()
        };
        let dark = Arc::new(FaultyStore::new(store.clone(), 3));
        let a = start("a", dark.clone()).await.unwrap();
        let b = start("b", store.clone()).await.unwrap();
        let o = start("o", store.clone()).await.unwrap();
        let leading = a
            .campaign("scheduler", "first", AcquireOptions::default())
            .await
            .unwrap();
        let b_campaign = tokio::spawn({
            let b = b.clone();
            async move { b.campaign("scheduler", "", AcquireOptions::default()).await }
        });
        // 9 s after it took the lock, just before its first renewal
        // (`lock.renew_every`: 10 s), a proclaims and is cut off.
        tokio::time::sleep(Duration::from_secs(9)).await;
        a.proclaim(leading.guard(), "late").await.unwrap();
        dark.set_plan(FaultPlan {
            fail_before: 1.0,
            ..FaultPlan::default()
        });
        let second = b_campaign.await.unwrap().unwrap();
        let took_over = Instant::now();
        second.resign().await.unwrap();
        tokio::time::sleep(Duration::from_secs(1) + Duration::from_millis(100)).await;
        let shown = o.leader("scheduler").await.unwrap();
        let mut gone = Instant::now();
        while o.leader("scheduler").await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            gone = Instant::now();
        }
        assert_eq!(
            shown,
            None,
            "a's lease ended before b took the lock; b resigned; a's record still showed {:?} after",
            gone - took_over
        );
        drop(leading);
        for n in [a, b, o] {
            n.shutdown().await;
        }
    });
}
