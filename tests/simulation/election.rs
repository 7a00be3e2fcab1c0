//! Leader election (issue 32, docs/design.md §5b) through the rollout:
//! candidates of mixed modes campaign again and again in one election
//! while the operator moves the stage forward to `complete` and back to
//! `legacy`, leaders are cut off from the store or paused past their lease,
//! and observers follow who leads. An independent referee (the exclusion
//! oracle of the lock simulations, told by the leaders when they act)
//! checks that no two leaders ever act at once and that tokens grow from
//! leader to leader; at checkpoints where nothing changed for longer than
//! an observer's period, `Election::leader` and every observer must name the
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
/// leader in ten cut off from the store (half of them after sending their
/// record's renewal to land up to 25 s late, and letting go while still
/// cut off), one in ten paused past its lease, one in ten holding past its
/// TTL, some proclaiming new values; one write in two hundred lands late.
/// Proves:
/// never two leaders acting at once, whichever algorithm took the lock and
/// across every stage change; each leader's token greater than every
/// earlier one's; a leader cut off or paused is told before anyone else
/// leads; and at every checkpoint (after every stage, at random, at the
/// end, and once every candidate stopped) `Election::leader` and every observer
/// name exactly the leader the terms say leads — node, value, time, token
/// — or nobody; and no observer ever names a leader older than one it
/// named before (E1, issue 45).
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
/// record lingers past its term until a later leader begins (E1); a
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
        assert!(
            clean.settled_for(Duration::ZERO),
            "b's record lingers below c's token, which E1 hides it behind"
        );
        clean.end(c, Ended::Lost, true);
        assert_eq!(clean.current().unwrap(), None);
        assert!(
            !clean.settled_for(Duration::ZERO),
            "c's record may linger: nobody took a token after it"
        );
        tokio::time::sleep(linger).await;
        assert!(clean.settled_for(Duration::ZERO));
        let d = clean.begin(&leader("d", 4), Algorithm::Queue, Stage::Queue);
        clean.end(d, Ended::Resigned, false);
        clean.let_go(d, true);
        assert!(
            !clean.settled_for(Duration::ZERO),
            "d's release failed: its record lingers"
        );
        clean.begin(&leader("e", 5), Algorithm::Queue, Stage::Queue);
        assert!(
            clean.settled_for(Duration::ZERO),
            "e's token hides every record before it (E1)"
        );
        assert!(clean.overlaps().is_empty() && clean.problems().is_empty());

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
/// and showed the former leader again, to `Election::leader` and every
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
        let mut leading = a
            .election("scheduler")
            .unwrap()
            .campaign("first", AcquireOptions::default())
            .await
            .unwrap();
        let b_campaign = tokio::spawn({
            let election = b.election("scheduler").unwrap();
            async move { election.campaign("", AcquireOptions::default()).await }
        });
        // 9 s after it took the lock, just before its first renewal
        // (`lock.renew_every`: 10 s), a proclaims and is cut off.
        tokio::time::sleep(Duration::from_secs(9)).await;
        leading.proclaim("late").await.unwrap();
        dark.set_plan(FaultPlan {
            fail_before: 1.0,
            ..FaultPlan::default()
        });
        let second = b_campaign.await.unwrap().unwrap();
        let took_over = Instant::now();
        second.resign().await.unwrap();
        tokio::time::sleep(Duration::from_secs(1) + Duration::from_millis(100)).await;
        let seen_by_o = o.election("scheduler").unwrap();
        let shown = seen_by_o.leader().await.unwrap();
        let mut gone = Instant::now();
        while seen_by_o.leader().await.unwrap().is_some() {
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

/// Issue 45, item 3, rebuilt (E1, docs/design.md §5b): leader a is cut off
/// from the store — every request fails before it is applied — except
/// that its record's first renewal is sent, times out and lands 70 s
/// later (L5), 2 s after its successor b resigned; a's release never
/// lands. a's lease ended before b took the lock, and a was told long
/// before. b took the lock's fencing token after a, so from then on the
/// fencing cell is above a's token and a's record names nobody: while b
/// leads, `Election::leader` and an observer name b (the observer within its
/// period), and after b resigned, nobody — never a, though its record
/// lives a TTL after it landed. Before E1 the reader took the greatest
/// token alone and named a for a whole TTL after b resigned.
#[test]
fn a_lost_leaders_late_record_is_not_named_after_its_successor() {
    use std::sync::Arc;

    use lockshift::{AcquireOptions, Node, OBSERVE_EVERY, Settings};
    use lockshift_decide::election::{LeaderRecord, leader_column};
    use lockshift_store::{
        FaultPlan, FaultScope, FaultyStore, MemoryStore, OpKind, RowQuery, SharedClock,
        SharedStore, Store, Timestamp, TokioClock, schema,
    };

    /// How much later than its round trip a's record renewal lands.
    const LATE: Duration = Duration::from_secs(70);
    /// How long before the landing b resigns.
    const BEFORE_LANDING: Duration = Duration::from_secs(2);
    let election = "scheduler";

    paused(async {
        let clock: SharedClock = Arc::new(TokioClock::starting_at(Timestamp::from_micros(
            1_767_225_600_250_000,
        )));
        let store = Arc::new(MemoryStore::with_clock(clock.clone()));
        let start = |id: &str, store: SharedStore| {
            let mut settings = Settings::default();
            settings.node.id = Some(id.to_string());
            // No `GlobalTime` updates: the only writes to `global_time` are
            // the elections' (fencing tokens and leader records).
            settings.time.source = lockshift::settings::TimeSourceKind::Local;
            Node::builder()
                .settings(settings)
                .store(store)
                .clock(clock.clone())
                .seed(11)
                .start()
        };
        // a's store: `cut` fails a's requests; below it, `late` lands the
        // write of the fencing row that `cut` lets through late.
        let late = Arc::new(FaultyStore::new(store.clone(), 3).with_plan(FaultPlan {
            scope: FaultScope {
                tables: Some(vec![schema::GLOBAL_TIME]),
                ops: Some(vec![OpKind::Write]),
            },
            ..FaultPlan::default()
        }));
        let cut = Arc::new(FaultyStore::new(late.clone(), 5));
        let a = start("a", cut.clone()).await.unwrap();
        let b = start("b", store.clone()).await.unwrap();
        let o = start("o", store.clone()).await.unwrap();
        let seen_by_o = o.election(election).unwrap();
        let watch = seen_by_o.observe();
        let leading = a
            .election(election)
            .unwrap()
            .campaign("a", AcquireOptions::default())
            .await
            .unwrap();
        let a_leader = leading.leader().clone();
        let b_campaign = tokio::spawn({
            let election = b.election(election).unwrap();
            async move { election.campaign("b", AcquireOptions::default()).await }
        });
        // 5 s in, before a's first renewal (`lock.renew_every`: 10 s): a is
        // cut off from every table but the fencing row's, and the next
        // write there — the renewal of its record, sent after a read that
        // finds it — lands late.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let others: Vec<_> = schema::ALL
            .into_iter()
            .filter(|t| *t != schema::GLOBAL_TIME)
            .collect();
        cut.set_plan(FaultPlan {
            fail_before: 1.0,
            scope: FaultScope {
                tables: Some(others),
                ops: None,
            },
            ..FaultPlan::default()
        });
        late.land_late_next(1, LATE);
        let written = || late.op_counts().get(schema::GLOBAL_TIME, OpKind::Write);
        let before = written();
        let deadline = Instant::now() + Duration::from_secs(20);
        while written() == before {
            assert!(
                Instant::now() < deadline,
                "a sent no write to the fencing row within 20 s of being cut off: its record was never renewed"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let lands = Instant::now() + LATE;
        // From now on every request of a fails: its release never lands.
        cut.set_plan(FaultPlan {
            fail_before: 1.0,
            ..FaultPlan::default()
        });

        let second = b_campaign.await.unwrap().unwrap();
        let took_over = Instant::now();
        assert!(
            leading.is_lost(),
            "b took the lock {:?} after a was cut off, and a was not told it lost it",
            took_over.duration_since(lands - LATE)
        );
        assert!(
            second.token() > a_leader.token,
            "b's token {} is not above a's {}",
            second.token(),
            a_leader.token
        );
        let b_leader = second.leader().clone();
        let resign_at = lands - BEFORE_LANDING;
        assert!(
            resign_at > took_over + OBSERVE_EVERY * 4,
            "the schedule: b took the lock {:?} before a's record lands, too late to lead before it",
            lands.saturating_duration_since(took_over)
        );
        // Named at each look: by `Election::leader`, by the observer (which may
        // show what it read before, for one period after a change).
        let mut named: Vec<(Duration, &str, String)> = Vec::new();
        let since = |at: Instant| at.saturating_duration_since(took_over);
        let shown = |l: &Option<lockshift::Leader>| {
            l.as_ref().map_or("nobody".to_string(), ToString::to_string)
        };
        while Instant::now() < resign_at {
            let now = Instant::now();
            let read = seen_by_o.leader().await.unwrap();
            if read.as_ref() != Some(&b_leader) {
                named.push((since(now), "Election::leader while b led", shown(&read)));
            }
            let seen = watch.current();
            if now >= took_over + OBSERVE_EVERY * 2 && seen.as_ref() != Some(&b_leader) {
                named.push((since(now), "the observer while b led", shown(&seen)));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        second.resign().await.unwrap();
        let resigned = Instant::now();
        // a's record lands, then lives out what its lease had left (under
        // a TTL): look until well past that.
        let until = lands + Settings::default().lock.lease_ttl + Duration::from_secs(5);
        let mut landed = false;
        while Instant::now() < until {
            let now = Instant::now();
            let read = seen_by_o.leader().await.unwrap();
            if read.is_some() {
                named.push((
                    since(now),
                    "Election::leader after b resigned",
                    shown(&read),
                ));
            }
            let seen = watch.current();
            let stale_b = seen.as_ref() == Some(&b_leader) && now < resigned + OBSERVE_EVERY * 2;
            if seen.is_some() && !stale_b {
                named.push((since(now), "the observer after b resigned", shown(&seen)));
            }
            landed |= record_of(&*store, election, &a_leader.node)
                .await
                .is_some_and(|r| r.token == a_leader.token);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            landed,
            "the schedule: a's record renewal never landed (it was to land {LATE:?} late, {BEFORE_LANDING:?} after b resigned)"
        );
        assert!(
            named.is_empty(),
            "a (token {}) lost its lease before b (token {}) took the lock at 0 s; b resigned at {:?}, a's record landed at {:?}; named otherwise than the terms say at {} looks, from {:?} to {:?} (at, by whom, what): {:?}",
            a_leader.token,
            b_leader.token,
            since(resigned),
            since(lands),
            named.len(),
            named.first().map(|n| n.0),
            named.last().map(|n| n.0),
            &named[..named.len().min(4)]
        );
        drop(leading);
        for n in [a, b, o] {
            n.shutdown().await;
        }

        /// The leader record of node `node` in `election`'s fencing row,
        /// read from the store itself.
        async fn record_of(store: &dyn Store, election: &str, node: &str) -> Option<LeaderRecord> {
            let cells = store
                .read(schema::GLOBAL_TIME, election, &RowQuery::all())
                .await
                .ok()?;
            cells
                .iter()
                .filter(|c| c.column.starts_with(&leader_column("")))
                .filter_map(|c| serde_json::from_slice::<LeaderRecord>(&c.value).ok())
                .find(|r| r.node == node)
        }
    });
}
