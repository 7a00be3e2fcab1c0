use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use lockshift_store::{
    Clock, MemoryStore, RowQuery, SharedClock, SharedStore, Store, TokioClock, schema,
};

use lockshift_decide::algorithm::{Mode, Stage};
use lockshift_lock::Algorithm;
use lockshift_rollout::RolloutSettings;
use lockshift_rollout::registry::live_nodes;
use lockshift_rollout::rollout::{Rollout, TransitionRequest};

use super::*;
use crate::settings::Settings;

fn write_config(path: &std::path::Path, mode: &str) {
    let mut f = std::fs::File::create(path).unwrap();
    writeln!(f, "[node]\nid = \"web-1\"\nmode = \"{mode}\"").unwrap();
}

struct World {
    store: Arc<MemoryStore>,
    clock: SharedClock,
}

fn world() -> World {
    let clock: SharedClock = Arc::new(TokioClock::new());
    World {
        store: Arc::new(MemoryStore::with_clock(clock.clone())),
        clock,
    }
}

/// A node started from a config file saying `mode`, and the file (its
/// directory lives as long as the first element).
async fn start(w: &World, mode: &str) -> (tempfile::TempDir, std::path::PathBuf, Node) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lockshift.toml");
    write_config(&path, mode);
    let node = Node::builder()
        .config_file(&path)
        .env(HashMap::new())
        .seed(1)
        .store(w.store.clone())
        .clock(w.clock.clone())
        .start()
        .await
        .unwrap();
    (dir, path, node)
}

/// A node on `store` with `settings` and the world's clock, no config file.
async fn start_on(store: SharedStore, w: &World, settings: Settings) -> Result<Node, StartError> {
    Node::builder()
        .settings(settings)
        .store(store)
        .clock(w.clock.clone())
        .start()
        .await
}

async fn main_value(w: &World, lock: &str) -> String {
    let cells = w
        .store
        .read(schema::MAIN, lock, &RowQuery::all())
        .await
        .unwrap();
    String::from_utf8(cells[0].value.clone()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_node_configured_queue_at_stage_legacy_runs_combined() {
    let w = world();
    let (_dir, _, node) = start(&w, "queue").await;
    let status = node.status();
    assert_eq!(status.stage.as_ref().map(|s| s.stage), Some(Stage::Legacy));
    assert_eq!(status.effective, Algorithm::Combined);
    assert_eq!(status.degraded_from, Some(Mode::Queue));
    let guard = node.acquire(&LockId::new("L").unwrap()).await.unwrap();
    assert_eq!(guard.algorithm(), Algorithm::Combined);
    assert_eq!(main_value(&w, "L").await, "combined");
    // The registry says so too.
    let (nodes, _) = live_nodes(w.store.as_ref(), w.clock.now(), std::time::Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].info.configured_mode, Mode::Queue);
    assert_eq!(nodes[0].info.effective, Algorithm::Combined);
    assert!(nodes[0].info.degraded);
    guard.release().await.unwrap();
    node.shutdown().await;
    assert!(
        live_nodes(w.store.as_ref(), w.clock.now(), std::time::Duration::ZERO)
            .await
            .unwrap()
            .0
            .is_empty(),
        "deregistered"
    );
}

#[tokio::test(start_paused = true)]
async fn editing_the_config_file_switches_new_acquisitions_and_held_locks_release_as_taken() {
    let w = world();
    let (_dir, path, node) = start(&w, "combined").await;
    let locker = node.clone();
    let held = locker.acquire(&LockId::new("A").unwrap()).await.unwrap();
    assert_eq!(held.algorithm(), Algorithm::Combined);

    write_config(&path, "legacy");
    // Picked up by the periodic re-read (10 s by default), no restart.
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert_eq!(node.status().effective, Algorithm::Legacy);
    let new = locker.acquire(&LockId::new("B").unwrap()).await.unwrap();
    assert_eq!(new.algorithm(), Algorithm::Legacy);
    assert_eq!(main_value(&w, "B").await, "legacy");

    // The lock taken before the switch is released by the combined lock:
    // its main, queue and (if any) shadow cells all go.
    held.release().await.unwrap();
    for table in [schema::MAIN, schema::QUEUE, schema::SHADOW] {
        assert!(
            w.store
                .read(table, "A", &RowQuery::all())
                .await
                .unwrap()
                .is_empty(),
            "{table}"
        );
    }
    new.release().await.unwrap();

    // A broken edit keeps the current mode.
    std::fs::write(&path, "[node\nmode = ").unwrap();
    node.refresh().await.unwrap();
    assert_eq!(node.status().configured, Mode::Legacy);
}

/// R3 through the one binding: a waiting acquisition whose algorithm the
/// node no longer resolves to is invalidated, ends with its own outcome
/// inside the node, and re-enters with the new algorithm — its caller sees
/// neither that outcome nor a fired token, only the guard.
#[tokio::test(start_paused = true)]
async fn an_invalidated_waiter_re_enters_with_the_new_algorithm_and_its_caller_sees_only_the_guard()
{
    let w = world();
    let (_dir, path, node) = start(&w, "combined").await;
    let held = node.acquire("A").await.unwrap();
    let caller = CancellationToken::new();
    let waiter = tokio::spawn({
        let node = node.clone();
        let options =
            AcquireOptions::with_timeout(Duration::from_secs(600)).cancelled_by(caller.clone());
        async move { node.acquire_with("A", options).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    write_config(&path, "legacy");
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert_eq!(node.status().effective, Algorithm::Legacy);
    held.release().await.unwrap();
    let guard = waiter.await.unwrap().unwrap();
    assert_eq!(guard.algorithm(), Algorithm::Legacy, "re-entered as legacy");
    assert!(!caller.is_cancelled(), "the caller's token is its own");
    guard.release().await.unwrap();
    node.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn nodes_follow_the_stage_and_report_the_version_they_act_on() {
    let w = world();
    let (_dir, _, node) = start(&w, "auto").await;
    assert_eq!(
        node.status().effective,
        Algorithm::Combined,
        "auto at legacy runs combined"
    );
    let settings = Settings::default();
    let rollout = Rollout::new(
        w.store.clone(),
        w.clock.clone(),
        settings.rollout.clone(),
        settings.lock.lease(),
        settings.lock.queue.clone(),
    );
    for to in [Stage::Dual, Stage::Queue] {
        let report = rollout
            .transition(TransitionRequest {
                to,
                by: "op".into(),
                reason: "test".into(),
                dry_run: false,
                expected_from: None,
            })
            .await
            .unwrap();
        assert!(report.applied, "{}", report.verdict);
        // Within one re-read period every node acts on the new stage.
        tokio::time::sleep(settings.rollout.stage_reread_every + Duration::from_secs(1)).await;
        assert_eq!(node.status().stage.map(|s| s.stage), Some(to));
    }
    assert_eq!(node.status().effective, Algorithm::Queue);
    tokio::time::sleep(settings.rollout.heartbeat_every + Duration::from_secs(1)).await;
    let (nodes, _) = live_nodes(w.store.as_ref(), w.clock.now(), std::time::Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(nodes[0].info.seen_stage, Some(Stage::Queue));
    assert_eq!(nodes[0].info.seen_version, Some(2));
}

#[tokio::test(start_paused = true)]
async fn an_unreadable_stage_at_start_means_combined() {
    let w = world();
    let faulty = Arc::new(lockshift_store::FaultyStore::new(w.store.clone(), 3));
    faulty.set_partitioned(true);
    let mut settings = Settings::default();
    settings.node.mode = Mode::Queue;
    settings.node.id = Some("n".into());
    let node = start_on(faulty.clone(), &w, settings).await.unwrap();
    assert_eq!(node.status().stage, None);
    assert_eq!(node.status().effective, Algorithm::Combined);
    faulty.set_partitioned(false);
    node.refresh().await.unwrap();
    assert_eq!(node.status().stage.map(|s| s.stage), Some(Stage::Legacy));
    assert_eq!(
        node.status().effective,
        Algorithm::Combined,
        "queue is still not allowed at legacy"
    );
}

/// A mode the stage allows, on a node whose first heartbeat failed: it
/// runs combined until one lands, and says so — not that the stage
/// forbids the mode (issue 31, 4b: "mode legacy is not allowed at stage
/// legacy").
#[tokio::test(start_paused = true)]
async fn a_failed_first_heartbeat_is_said_not_a_forbidding_stage() {
    let w = world();
    let faulty = Arc::new(lockshift_store::FaultyStore::new(w.store.clone(), 3));
    faulty.set_plan(lockshift_store::FaultPlan {
        fail_before: 1.0,
        scope: lockshift_store::FaultScope {
            tables: Some(vec![schema::NODES]),
            ops: Some(vec![lockshift_store::OpKind::Write]),
        },
        ..lockshift_store::FaultPlan::default()
    });
    let mut settings = Settings::default();
    settings.node.mode = Mode::Legacy;
    settings.node.id = Some("n".into());
    let node = start_on(faulty.clone(), &w, settings).await.unwrap();
    let status = node.status();
    assert_eq!(status.stage.map(|s| s.stage), Some(Stage::Legacy));
    assert_eq!(status.effective, Algorithm::Combined);
    assert_eq!(status.degraded_from, Some(Mode::Legacy));
    let why = status.unconfirmed_because.unwrap_or_default();
    assert!(
        why.starts_with("no heartbeat has landed yet: write on table nodes"),
        "{why}"
    );
    faulty.set_plan(lockshift_store::FaultPlan::default());
    tokio::time::sleep(Settings::default().rollout.heartbeat_every * 2).await;
    let status = node.status();
    assert_eq!(status.unconfirmed_because, None);
    assert_eq!(status.effective, Algorithm::Legacy);
}

/// At stage `legacy` a combined waiter takes its turn at the legacy pace and
/// prepares nothing (`Pacing::BesideLegacy`: a prepared shadow cell would make every
/// legacy attempt back off); once no legacy node can run (`dual`), the next
/// waiter announces itself in `shadow` while the holder still holds.
#[tokio::test(start_paused = true)]
async fn a_combined_waiter_prepares_its_shadow_entry_only_once_legacy_is_gone() {
    let w = world();
    let settings = |id: &str| {
        let mut s = Settings::default();
        s.node.id = Some(id.into());
        s.node.mode = Mode::Combined;
        s
    };
    let a = start_on(w.store.clone(), &w, settings("a")).await.unwrap();
    let b = start_on(w.store.clone(), &w, settings("b")).await.unwrap();
    let lock = LockId::new("L").unwrap();
    let shadow = || async {
        w.store
            .read(schema::SHADOW, "L", &RowQuery::all())
            .await
            .unwrap()
    };
    for stage in [Stage::Legacy, Stage::Dual] {
        if stage == Stage::Dual {
            let defaults = Settings::default();
            let rollout = Rollout::new(
                w.store.clone(),
                w.clock.clone(),
                defaults.rollout.clone(),
                defaults.lock.lease(),
                defaults.lock.queue.clone(),
            );
            let report = rollout
                .transition(TransitionRequest {
                    to: Stage::Dual,
                    by: "op".into(),
                    reason: "test".into(),
                    dry_run: false,
                    expected_from: None,
                })
                .await
                .unwrap();
            assert!(report.applied, "{}", report.verdict);
            a.refresh().await.unwrap();
            b.refresh().await.unwrap();
        }
        let held = a.acquire(&lock).await.unwrap();
        let waiter = {
            let locker = b.clone();
            let lock = lock.clone();
            tokio::spawn(async move { locker.acquire(&lock).await })
        };
        tokio::time::sleep(Duration::from_secs(2)).await;
        let prepared = shadow().await;
        if stage == Stage::Legacy {
            assert!(prepared.is_empty(), "nothing prepared beside legacy");
        } else {
            assert_eq!(
                prepared.len(),
                1,
                "the waiter announced itself ahead of time"
            );
            assert!(prepared[0].column.starts_with("b/"));
        }
        held.release().await.unwrap();
        let g = waiter.await.unwrap().unwrap();
        assert_eq!(g.algorithm(), Algorithm::Combined);
        assert!(shadow().await.is_empty());
        g.release().await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_legacy_holder_seen_while_waiting_is_recorded_as_legacy_activity() {
    // A binary that predates lockshift holds a lock (it never registers);
    // a combined node waits for it, sees it in main, and its next heartbeat
    // records legacy activity — what the legacy → dual guard waits out.
    let w = world();
    w.store
        .write(
            schema::MAIN,
            "L",
            &[lockshift_store::CellWrite::new("thread-17", b"".to_vec())],
            lockshift_store::WriteOptions::at(w.clock.now())
                .with_ttl(lockshift_store::Ttl::from_secs(5).unwrap()),
        )
        .await
        .unwrap();
    let mut s = Settings::default();
    s.node.id = Some("n".into());
    let node = start_on(w.store.clone(), &w, s).await.unwrap();
    assert!(
        lockshift_rollout::registry::last_activity(w.store.as_ref())
            .await
            .unwrap()
            .is_empty()
    );
    let guard = node.acquire(&LockId::new("L").unwrap()).await.unwrap();
    let acquired_at = w.clock.now();
    node.heartbeat().await.unwrap();
    let activity = lockshift_rollout::registry::last_activity(w.store.as_ref())
        .await
        .unwrap();
    let seen = activity
        .get(&Algorithm::Legacy)
        .copied()
        .expect("legacy activity recorded");
    assert!(
        seen <= acquired_at && acquired_at.duration_since(seen) < Duration::from_secs(6),
        "{seen:?}"
    );
    guard.release().await.unwrap();
}

/// Issue 22 (R5): two processes under one node id each keep a registry row,
/// find each other, and say so in their status; the one that leaves takes
/// only its own row.
#[tokio::test(start_paused = true)]
async fn two_processes_under_one_id_see_each_other_and_each_keeps_its_row() {
    let w = world();
    let (_d1, _, old) = start(&w, "legacy").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lockshift.toml");
    write_config(&path, "auto");
    let new = Node::builder()
        .config_file(&path)
        .env(HashMap::new())
        .seed(2)
        .store(w.store.clone())
        .clock(w.clock.clone())
        .start()
        .await
        .unwrap();
    assert_ne!(old.status().incarnation, new.status().incarnation);
    old.heartbeat().await.unwrap();
    let (nodes, _) = live_nodes(w.store.as_ref(), w.clock.now(), std::time::Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    assert!(nodes.iter().all(|n| n.info.node == "web-1"));
    assert_eq!(
        old.status().other_processes,
        [format!("web-1/{}", new.status().incarnation)]
    );
    assert_eq!(
        new.status().other_processes,
        [format!("web-1/{}", old.status().incarnation)]
    );
    old.shutdown().await;
    let (nodes, _) = live_nodes(w.store.as_ref(), w.clock.now(), std::time::Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!(
        nodes[0].info.incarnation,
        Some(new.status().incarnation.to_string())
    );
    new.heartbeat().await.unwrap();
    assert!(new.status().other_processes.is_empty());
    new.shutdown().await;
}

/// R8: every heartbeat of a node that may run legacy records, before the
/// row, that legacy may be in use until `stage_valid_for` from now (on the
/// database's clock, by its reading); a combined node promises nothing.
#[tokio::test(start_paused = true)]
async fn a_legacy_node_promises_its_activity_with_every_heartbeat() {
    let w = world();
    let (_dir, _, node) = start(&w, "legacy").await;
    let valid_for = RolloutSettings::default().stage_valid_for;
    let promised = lockshift_rollout::registry::last_activity(w.store.as_ref())
        .await
        .unwrap();
    // On the database's clock, at the latest the node's reading allows
    // (C1): never before the truth, within twice the reading's error.
    let at = promised[&Algorithm::Legacy].as_micros();
    let truth = w.clock.now().saturating_add(valid_for).as_micros();
    let error = i64::try_from(node.status().clock.unwrap().error_us).unwrap();
    assert!(
        at >= truth && at <= truth + 2 * error,
        "{at} vs {truth} ± {error}"
    );
    assert!(!promised.contains_key(&Algorithm::Queue));
    node.shutdown().await;
    let (_dir, _, node) = start(&w, "combined").await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    node.heartbeat().await.unwrap();
    let promised = lockshift_rollout::registry::last_activity(w.store.as_ref())
        .await
        .unwrap();
    assert!(
        promised[&Algorithm::Legacy] < w.clock.now(),
        "a combined node promises no legacy use"
    );
    node.shutdown().await;
}

/// The pacing of a combined acquisition can change while it waits, its
/// binding intact: bound while the node cannot confirm the stage (beside
/// legacy contenders), it stays bound when `dual` is confirmed — and reads
/// full speed from then on, through the binding it was given when bound;
/// beside legacy again once the view expires.
#[test]
fn a_waiting_combined_acquisition_reads_the_pacing_the_stage_calls_for() {
    use crate::binding::{Bindings, View};
    use lockshift_decide::binding::Pacing;
    use lockshift_decide::rollout::StageRecord;

    let wait = Duration::from_millis(300);
    let beside = Pacing::BesideLegacy {
        owner_wait_max: wait,
    };
    let t0 = std::time::Instant::now();
    let mut view = View::new(Duration::from_secs(30));
    view.clock(Some(t0 + Duration::from_secs(3600)));
    let mut b = Bindings::new(wait);
    let (id, binding) = b.bind(Algorithm::Combined, &view, None);
    b.follow(Algorithm::Combined, view.confirmed(t0));
    b.pace(view.confirmed(t0));
    assert_eq!(binding.pacing(), beside, "unconfirmed");
    let dual = StageRecord {
        stage: Stage::Dual,
        version: 1,
        ..StageRecord::initial()
    };
    view.read(dual, t0);
    view.heartbeat(t0, [Algorithm::Combined].into());
    b.follow(Algorithm::Combined, view.confirmed(t0));
    b.pace(view.confirmed(t0));
    assert!(
        !binding.is_invalidated() && !b.is_invalidated(id),
        "still bound"
    );
    assert_eq!(binding.pacing(), Pacing::FullSpeed, "dual confirmed");
    let later = t0 + Duration::from_secs(31);
    b.follow(Algorithm::Combined, view.confirmed(later));
    b.pace(view.confirmed(later));
    assert!(
        !binding.is_invalidated() && !b.is_invalidated(id),
        "still bound"
    );
    assert_eq!(binding.pacing(), beside, "expired");
}

/// A node hands out a fenced writer for a guard it holds: the guard's lock
/// and token, through the node's own (homes-routed) store. A later
/// holder's write wins; the earlier holder's late write is refused.
#[tokio::test(start_paused = true)]
async fn a_fenced_writer_carries_the_guards_lock_and_token() {
    use lockshift_store::CellWrite;
    use lockshift_store::fenced::FencedWriteError;
    let w = world();
    let (_dir, _path, node) = start(&w, "queue").await;
    let first = node.acquire("accounts").await.unwrap();
    let paused = node.fenced_writer(&first).await.unwrap();
    assert_eq!(paused.lock(), Some(first.lock_id()));
    assert_eq!(paused.token(), first.fencing_token().await.unwrap());
    first.release().await.unwrap();
    let second = node.acquire("accounts").await.unwrap();
    let next = node.fenced_writer(&second).await.unwrap();
    assert!(next.token() > paused.token());
    let cell = |v: &str| CellWrite::new("balance", v.to_string());
    next.write(schema::SCRATCH, "acct-3", &cell("90"))
        .await
        .unwrap();
    let late = paused.write(schema::SCRATCH, "acct-3", &cell("110")).await;
    assert!(
        matches!(late, Err(FencedWriteError::Refused { .. })),
        "{late:?}"
    );
    let held = w
        .store
        .read(schema::SCRATCH, "acct-3", &RowQuery::all())
        .await
        .unwrap();
    assert_eq!(held[0].value, b"90");
    // A guard whose lock the node gave back gets no writer.
    node.shutdown().await;
    assert!(second.is_lost());
    assert!(node.fenced_writer(&second).await.is_err());
}
