//! `migrate elect` and `migrate leader` on the embedded store.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockshift::{AcquireOptions, LockId, Node, Settings};
use lockshift_store::{MemoryStore, SharedStore, SystemClock};

use super::Env;
use super::leader::{leader, watch};
use super::lock_session::LockRequest;
use super::run_with_lock::{Request, RunResult, run_with_lock};

fn env_over(store: SharedStore) -> Env {
    Env::new(Settings::default(), store, Arc::new(SystemClock))
}

/// While `migrate elect`'s command runs, `migrate leader` names it with
/// its value and token; once it ends nobody leads — and `--watch` printed
/// each change once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elect_leads_while_its_command_runs_and_leader_follows() {
    let store: SharedStore = Arc::new(MemoryStore::new());
    let env = env_over(store.clone());
    let election = LockId::new("scheduler").unwrap();
    assert!(leader(&env, &election).await.unwrap().leader.is_none());

    let printed = Arc::new(Mutex::new(Vec::new()));
    let stop = tokio_util::sync::CancellationToken::new();
    let watching = tokio::spawn({
        let (env, election, printed, stop) = (
            env_over(store.clone()),
            election.clone(),
            printed.clone(),
            stop.clone(),
        );
        async move {
            watch(
                &env,
                &election,
                stop.cancelled_owned(),
                |r| {
                    printed.lock().unwrap().push(r.leader.clone());
                    Ok(())
                },
                |_| {},
            )
            .await
        }
    });
    // The watch's first read, before anyone leads: on a loaded machine the
    // spawned watch may start late, after the leader below was recorded.
    let first_read = tokio::time::Instant::now();
    while printed.lock().unwrap().is_empty() {
        assert!(
            first_read.elapsed() < Duration::from_secs(30),
            "the watch never printed its first read"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let request = Request {
        take: LockRequest {
            sharing: lockshift::Sharing::Exclusive,
            lock: election.clone(),
            mode: None,
            timeout: Some(Duration::from_secs(10)),
            fencing_token_required: true,
        },
        grace: Duration::from_secs(1),
        command: vec!["sleep".into(), "2".into()],
        proclaim: Some("http://here:8080".into()),
        supervisor: None,
    };
    let running = tokio::spawn({
        let env = env_over(store.clone());
        async move { run_with_lock(&env, request, |_| {}).await }
    });
    // The command runs for 2 s: it leads meanwhile, from when it started.
    let record = loop {
        if let Some(record) = leader(&env, &election).await.unwrap().leader {
            break record;
        }
        assert!(
            !running.is_finished(),
            "the command ended and nobody was seen leading"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(record.value, "http://here:8080");
    let report = running.await.unwrap().unwrap();
    assert_eq!(report.result, RunResult::Completed, "{report:?}");
    assert_eq!(report.holding.fencing_token, Some(record.token));
    assert_eq!(report.proclaimed.as_deref(), Some("http://here:8080"));
    assert!(leader(&env, &election).await.unwrap().leader.is_none());

    // The watch prints the leader's end at its next read.
    let released = tokio::time::Instant::now();
    while printed.lock().unwrap().last().is_none_or(Option::is_some) {
        assert!(
            released.elapsed() < Duration::from_secs(30),
            "the watch never printed the end of the leadership: {:?}",
            printed.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    watching.await.unwrap().unwrap();
    let printed = printed.lock().unwrap().clone();
    let nodes: Vec<Option<u64>> = printed
        .iter()
        .map(|l| l.as_ref().map(|l| l.token))
        .collect();
    assert_eq!(nodes, [None, Some(record.token), None], "{printed:?}");
}

/// A value no observer should print is refused before the command runs
/// (exit 1), and the lock is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elect_refuses_a_value_it_cannot_record() {
    let store: SharedStore = Arc::new(MemoryStore::new());
    let env = env_over(store.clone());
    let marker = tempfile::tempdir().unwrap();
    let ran = marker.path().join("ran");
    let request = Request {
        take: LockRequest {
            sharing: lockshift::Sharing::Exclusive,
            lock: LockId::new("scheduler").unwrap(),
            mode: None,
            timeout: Some(Duration::from_secs(10)),
            fencing_token_required: true,
        },
        grace: Duration::from_secs(1),
        command: vec!["touch".into(), ran.display().to_string()],
        proclaim: Some("bell\u{7}".into()),
        supervisor: None,
    };
    let report = run_with_lock(&env, request, |_| {}).await.unwrap();
    assert_eq!(report.result, RunResult::NotProclaimed, "{report:?}");
    assert_eq!(report.exit_code, 1);
    assert!(!ran.exists(), "the command did not run");
    let node = Node::builder().store(store).start().await.unwrap();
    let again = node
        .election("scheduler")
        .unwrap()
        .campaign("", AcquireOptions::with_timeout(Duration::from_secs(1)))
        .await
        .expect("the lock was released");
    again.resign().await.unwrap();
    node.shutdown().await;
}
