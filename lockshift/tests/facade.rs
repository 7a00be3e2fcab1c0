//! The facade as a service uses it: names for locks, one handle, a
//! shutdown that releases what is still held and leaves the registry.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use lockshift::prelude::*;
use lockshift::{LeaseLostReason, StartError};
use lockshift_rollout::registry::live_nodes;
use lockshift_store::{Clock, MemoryStore, RowQuery, Store, schema};

mod common;

use common::{World, node, world};

async fn main_cells(w: &World, lock: &str) -> usize {
    w.store
        .read(schema::MAIN, lock, &RowQuery::all())
        .await
        .expect("the embedded store reads")
        .len()
}

#[tokio::test(start_paused = true)]
async fn acquire_takes_a_name_a_string_or_a_lock_id() {
    let w = world();
    let node = node(&w, "web-1").await;
    let g = node.acquire("by-str").await.unwrap();
    g.release().await.unwrap();
    let g = node.acquire(String::from("by-string")).await.unwrap();
    g.release().await.unwrap();
    let id = LockId::new("by-id").unwrap();
    let g = node.acquire(&id).await.unwrap();
    g.release().await.unwrap();
    let g = node.acquire(id).await.unwrap();
    g.release().await.unwrap();
    let err = node.acquire("  padded").await.unwrap_err();
    assert!(
        matches!(err, AcquireError::InvalidLockId(_)),
        "an invalid name is refused before anything is written: {err}"
    );
    assert_eq!(main_cells(&w, "  padded").await, 0);
    let err = node.try_acquire("").await.unwrap_err();
    assert!(!err.is_held(), "{err}");
    node.shutdown().await;
}

/// The issue: a guard dropped at the end of `main` kept its lock for a full
/// TTL. `shutdown` releases it for the holder — who is told through
/// `lost()` — and the node leaves the registry only then, so the registry
/// never shows a node gone while its lock is held.
#[tokio::test(start_paused = true)]
async fn shutdown_releases_held_locks_tells_their_holders_and_leaves_the_registry() {
    let w = world();
    let node = node(&w, "web-1").await;
    let held = node.acquire("held").await.unwrap();
    let token = held.fencing_token().await.unwrap();
    let waiter = tokio::spawn({
        let node = node.clone();
        async move { node.acquire("held").await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(main_cells(&w, "held").await, 1);
    assert_eq!(
        live_nodes(w.store.as_ref(), w.clock.now(), std::time::Duration::ZERO)
            .await
            .unwrap()
            .0
            .len(),
        1
    );

    node.shutdown().await;

    assert!(matches!(
        waiter.await.unwrap(),
        Err(AcquireError::NodeStopped { .. })
    ));
    assert!(held.lost().is_cancelled(), "the holder is told");
    assert!(held.is_lost());
    assert_eq!(held.lost_reason(), Some(LeaseLostReason::Revoked));
    assert_eq!(held.until_lost().await, LeaseLostReason::Revoked);
    assert!(
        held.fencing_token().await.is_err(),
        "no token after release"
    );
    assert_eq!(main_cells(&w, "held").await, 0, "the lock is free at once");
    assert!(
        live_nodes(w.store.as_ref(), w.clock.now(), std::time::Duration::ZERO)
            .await
            .unwrap()
            .0
            .is_empty(),
        "deregistered"
    );
    held.release()
        .await
        .expect("releasing a revoked guard is a no-op");
    assert!(matches!(
        node.acquire("other").await,
        Err(AcquireError::NodeStopped { .. })
    ));
    node.shutdown().await; // again: nothing happens

    // The next holder gets a larger token.
    let other = self::node(&w, "web-2").await;
    let next = other.acquire("held").await.unwrap();
    assert!(next.fencing_token().await.unwrap() > token);
    next.release().await.unwrap();
    other.shutdown().await;
}

/// Clones are the same node; the node runs while any lives.
#[tokio::test(start_paused = true)]
async fn a_locker_outlives_the_handle_and_shutdown_reaches_it() {
    let w = world();
    let node = node(&w, "web-1").await;
    let locker = node.clone();
    let twin = node.clone();
    drop(node);
    tokio::time::sleep(Duration::from_secs(30)).await;
    let g = locker.acquire("L").await.unwrap();
    g.release().await.unwrap();
    assert_eq!(
        live_nodes(w.store.as_ref(), w.clock.now(), std::time::Duration::ZERO)
            .await
            .unwrap()
            .0
            .len(),
        1
    );
    twin.shutdown().await;
    assert!(matches!(
        locker.acquire("L").await,
        Err(AcquireError::NodeStopped { .. })
    ));
}

/// `Node::connect`: the file, the environment on top, the store it names.
#[tokio::test]
async fn connect_reads_the_file_and_names_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lockshift.toml");
    std::fs::write(
        &path,
        "[node]\nid = \"web-1\"\nmode = \"combined\"\n[store]\nbackend = \"embedded\"\n",
    )
    .unwrap();
    let node = Node::builder()
        .config_file(&path)
        .env(HashMap::from([(
            "LOCKSHIFT__NODE__ID".to_string(),
            "from-env".to_string(),
        )]))
        .start()
        .await
        .unwrap();
    assert_eq!(node.id().as_str(), "from-env", "the environment wins");
    assert_eq!(node.status().configured, Mode::Combined, "from the file");
    node.shutdown().await;

    let err = Node::connect(dir.path().join("missing.toml"))
        .await
        .unwrap_err();
    assert!(matches!(err, StartError::Settings(_)), "{err}");
    assert!(err.to_string().contains("missing.toml"), "{err}");
    std::fs::write(&path, "[lock]\nrenew_every = \"50s\"\n").unwrap();
    let err = Node::connect(&path).await.unwrap_err();
    assert!(
        err.to_string().contains("lock.renew_every (50s)"),
        "names the key and the rule: {err}"
    );
}

/// Issue 19 item 2: no silent local lock. Settings that name no store —
/// from code or from a file — do not start a node on a process-local
/// store; the error says exactly what to add. Asked for explicitly (a
/// store given to the builder, or `store.backend = "embedded"`), it runs.
#[tokio::test]
async fn a_node_without_a_named_store_refuses_to_start() {
    let err = Node::builder()
        .settings(Settings::default())
        .start()
        .await
        .unwrap_err();
    assert!(matches!(err, StartError::NoStore), "{err}");
    let msg = err.to_string();
    for needle in [
        "[store.cql] contact_points = [",
        "LOCKSHIFT__STORE__CQL__CONTACT_POINTS",
        "store.backend = \"embedded\"",
    ] {
        assert!(msg.contains(needle), "{needle}: {msg}");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lockshift.toml");
    std::fs::write(&path, "[node]\nid = \"web-1\"\n").unwrap();
    let err = Node::builder()
        .config_file(&path)
        .env(HashMap::new())
        .start()
        .await
        .unwrap_err();
    assert!(matches!(err, StartError::NoStore), "{err}");

    std::fs::write(
        &path,
        "[node]\nid = \"web-1\"\n[store]\nbackend = \"embedded\"\n",
    )
    .unwrap();
    let node = Node::builder()
        .config_file(&path)
        .env(HashMap::new())
        .start()
        .await
        .expect("the embedded store, asked for");
    node.shutdown().await;
    let node = Node::builder()
        .settings(Settings::default())
        .store(Arc::new(MemoryStore::new()))
        .start()
        .await
        .expect("a store given in code");
    node.shutdown().await;
}
