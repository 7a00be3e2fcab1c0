//! A candidate: campaigns again and again with random values, leads for a
//! random while — proclaiming a new value now and then — and then resigns,
//! or is cut off from the store, or is paused past its lease. It tells the
//! [`Referee`](super::Referee) when it starts and stops acting as leader.

use std::time::Duration;

use lockshift::{AcquireError, AcquireOptions, CampaignError, Leadership, Node};
use lockshift_store::{FaultPlan, FaultScope, OpKind, schema};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

use super::referee::Ended;
use super::{CAMPAIGN_TIMEOUT, Campaigns, ELECTION, LATE_BY, Place, plan};
use crate::sim::NodeEnv;

/// How a leadership ends, drawn when it begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// The leader resigns after its hold.
    Resign,
    /// After its hold, the leader's store is cut off; it keeps acting
    /// until the lost signal fires. One cut-off in two first sends its
    /// record's renewal to land late (up to `LATE_BY` after it is sent:
    /// past the lease, and often past the next leader's term) and lets go
    /// while still cut off, so its release never lands to shadow the late
    /// record (issue 45).
    CutOff,
    /// After its hold, the leader's process pauses (its store cut off: no
    /// renewal lands) past its lease, then resumes and looks.
    Pause,
}

/// One step of a leader's work: it looks ([`Leadership::is_lost`]) before
/// each, as a leader must.
fn step(rng: &mut StdRng) -> Duration {
    Duration::from_millis(rng.random_range(10..200))
}

/// Candidate `i` on `node`: campaigns until the run stops.
pub(super) async fn run(shared: std::sync::Arc<Campaigns>, i: usize, node: Node, env: NodeEnv) {
    let mut rng = StdRng::seed_from_u64(shared.seed ^ ((i as u64 + 1) << 32));
    let id = node.id().as_str().to_string();
    let mut holding = shared.holding.subscribe();
    let mut campaigns = 0u32;
    loop {
        shared.place(i, Place::Idle);
        // Campaign only while the fleet is not holding still for a check.
        let think = Duration::from_millis(rng.random_range(0..400));
        tokio::time::sleep(think).await;
        loop {
            if shared.stop.is_cancelled() {
                return;
            }
            if !*holding.borrow_and_update() {
                break;
            }
            tokio::select! {
                biased;
                () = shared.stop.cancelled() => return,
                _ = holding.changed() => {}
            }
        }
        shared.place(i, Place::Waiting);
        campaigns += 1;
        let value = format!("http://{id}:{}/{campaigns}", rng.random_range(1000..10_000));
        let options =
            AcquireOptions::with_timeout(CAMPAIGN_TIMEOUT).cancelled_by(shared.stop.clone());
        let campaign = node
            .election(ELECTION)
            .expect("a valid election name")
            .campaign(value.clone(), options)
            .await;
        shared.place(i, Place::Busy);
        match campaign {
            Ok(leading) => lead(&shared, i, &node, &env, leading, &value, &mut rng).await,
            Err(CampaignError::Acquire(AcquireError::Cancelled { .. })) => {
                shared.stats().cancelled += 1;
            }
            Err(CampaignError::Record { why, .. }) => {
                // The lock was taken and let go again; a record may have
                // landed all the same, left to its TTL if the release failed.
                shared.stats().unrecorded.push(why);
                shared.referee.touched(true);
            }
            Err(e) => shared.failure(format!(
                "{id}: the campaign failed at {:.3}s: {e}",
                shared.began.elapsed().as_secs_f64()
            )),
        }
    }
}

/// Leads until the hold is over (longer while the fleet holds still), then
/// meets the fate drawn for this leadership.
async fn lead(
    shared: &Campaigns,
    i: usize,
    node: &Node,
    env: &NodeEnv,
    mut leading: Leadership,
    value: &str,
    rng: &mut StdRng,
) {
    let id = node.id().as_str();
    let leader = leading.leader().clone();
    if (leader.node.as_str(), leader.value.as_str(), leader.token) != (id, value, leading.token()) {
        shared.referee.problem(format!(
            "{id} campaigned with {value:?} (token {}) and the leadership says {leader}",
            leading.token()
        ));
    }
    let term = shared
        .referee
        .begin(&leader, leading.guard().algorithm(), shared.stage());
    // The negative control: candidate 0 pauses every time, the others
    // hold long enough to be leading when it resumes.
    let rogue = shared.rogue && i == 0;
    let fate = if rogue {
        Fate::Pause
    } else if !shared.faults || shared.rogue || shared.holding() {
        Fate::Resign
    } else {
        match rng.random_range(0..20) {
            0 | 1 => Fate::CutOff,
            2 | 3 => Fate::Pause,
            _ => Fate::Resign,
        }
    };
    let hold = if rng.random_bool(0.1) || (shared.rogue && !rogue) {
        // Far past the lease's TTL: renewals keep it.
        shared.stats().long_holds += 1;
        shared.ttl.mul_f64(rng.random_range(1.0..2.5))
    } else {
        Duration::from_millis(rng.random_range(20..3_000))
    };
    let began = Instant::now();
    shared.place(i, Place::Leading);
    let mut proclaims = 0u32;
    let how = loop {
        if leading.is_lost() {
            shared.place(i, Place::Busy);
            shared.referee.end(term, Ended::Lost, true);
            let resigned = leading.resign().await;
            shared.referee.note(term, format!("resigned: {resigned:?}"));
            shared.referee.let_go(term, true);
            return;
        }
        if shared.stop.is_cancelled() {
            break Ended::Stopped;
        }
        if began.elapsed() >= hold && !shared.holding() {
            break Ended::Resigned;
        }
        if !shared.holding() && rng.random_bool(0.03) {
            proclaims += 1;
            let value = format!("{value}/proclaimed/{proclaims}");
            // The record changes before the proclaim returns: a checkpoint
            // must wait for it.
            shared.place(i, Place::Busy);
            let proclaimed = leading.proclaim(value.clone()).await.cloned();
            shared.place(i, Place::Leading);
            match proclaimed {
                Ok(now) if now.value == value => {
                    shared.referee.note(term, format!("proclaimed {value:?}"));
                    shared.referee.proclaimed(term, &now);
                    shared.stats().proclaims += 1;
                }
                Ok(now) => shared
                    .referee
                    .problem(format!("{id} proclaimed {value:?} and got back {now}")),
                // A lost lease shows at the next look.
                Err(_) if leading.is_lost() => continue,
                Err(e) => shared.failure(format!("{id}: proclaiming failed: {e}")),
            }
        }
        tokio::time::sleep(step(rng)).await;
    };
    shared.place(i, Place::Busy);
    let fate = if how == Ended::Stopped {
        Fate::Resign
    } else {
        fate
    };
    match fate {
        Fate::Resign => {
            shared.referee.end(term, how, false);
            let resigned = leading.resign().await;
            shared.referee.note(term, format!("resigned: {resigned:?}"));
            shared.referee.let_go(term, resigned.is_err());
        }
        Fate::CutOff => {
            shared.stats().cut_offs += 1;
            let late = rng.random_bool(0.5);
            if late {
                shared.stats().late_records += 1;
                let landing = record_renewal_lands_late(shared, env).await;
                shared.referee.note(term, format!("cut off, {landing}"));
            } else {
                shared.referee.note(term, "cut off".to_string());
            }
            env.store.set_partitioned(true);
            // It keeps acting until the lost signal tells it to stop.
            let told = tokio::time::timeout(shared.ttl, leading.until_lost()).await;
            if told.is_err() || !leading.is_lost() {
                shared.referee.problem(format!(
                    "{id} (token {}): cut off from the store for {:?}: lost signal {}, is_lost {}",
                    leader.token,
                    shared.ttl,
                    if told.is_ok() { "fired" } else { "silent" },
                    leading.is_lost()
                ));
            }
            shared.referee.end(term, Ended::Lost, true);
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..2_000))).await;
            if late {
                // Let go while cut off: the release never lands.
                let resigned = leading.resign().await;
                shared
                    .referee
                    .note(term, format!("resigned while cut off: {resigned:?}"));
                env.store.set_partitioned(false);
                shared.referee.note(term, "healed".to_string());
            } else {
                env.store.set_partitioned(false);
                shared.referee.note(term, "healed".to_string());
                let resigned = leading.resign().await;
                shared.referee.note(term, format!("resigned: {resigned:?}"));
            }
            shared.referee.let_go(term, true);
        }
        Fate::Pause => {
            shared.stats().pauses += 1;
            shared.referee.note(term, "paused".to_string());
            shared.referee.pause(term);
            env.store.set_partitioned(true);
            let pause = shared.ttl + Duration::from_millis(rng.random_range(1_000..4_000));
            tokio::time::sleep(pause).await;
            env.store.set_partitioned(false);
            if rogue {
                // The negative control: a leader that does not look on
                // resuming, and acts for a lease.
                shared.referee.resume(term);
                tokio::time::sleep(shared.ttl).await;
            } else if !leading.is_lost() {
                shared.referee.problem(format!(
                    "{id} (token {}): paused {pause:?} with its store cut off, past its lease, and told on resuming that it still leads",
                    leader.token
                ));
                shared.referee.resume(term);
                tokio::time::sleep(step(rng)).await;
            }
            shared.referee.end(term, Ended::LostInPause, true);
            let resigned = leading.resign().await;
            shared.referee.note(term, format!("resigned: {resigned:?}"));
            shared.referee.let_go(term, true);
        }
    }
}

/// Lands the leader's writes to `global_time` late for one renewal period
/// — its record's renewal among them (L8 renews every holding cell
/// together, within a period of the last proof) — and says how many were
/// sent.
async fn record_renewal_lands_late(shared: &Campaigns, env: &NodeEnv) -> String {
    let written = || {
        env.store
            .op_counts()
            .get(schema::GLOBAL_TIME, OpKind::Write)
    };
    let before = written();
    env.store.set_plan(record_lands_late());
    tokio::time::sleep(shared.renew_every + Duration::from_millis(250)).await;
    env.store.set_plan(plan());
    format!(
        "{} writes to global_time (its record's renewal among them) sent to land late",
        written() - before
    )
}

/// [`plan`](super::plan), with every write to `global_time` (the fencing
/// row's, and the time service's) landing late and nothing else failing:
/// what a cut-off leader's store does for one renewal period before the cut
/// (its record's renewal among the writes it lands late).
fn record_lands_late() -> FaultPlan {
    FaultPlan {
        late: 1.0,
        late_by: LATE_BY,
        scope: FaultScope {
            tables: Some(vec![schema::GLOBAL_TIME]),
            ops: Some(vec![OpKind::Write]),
        },
        ..FaultPlan::latency(Duration::from_millis(2), Duration::from_millis(3))
    }
}
