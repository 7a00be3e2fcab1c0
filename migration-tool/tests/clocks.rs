//! Issue 41 end to end, on the harness's endpoint (a real cluster when
//! `LOCKSHIFT_TEST_CONTACT_POINTS` is set): every node's clock read alone
//! and judged, and a `migrate lock` whose clock is two minutes behind
//! (`libfaketime`, `FAKETIME=-120s`) registering its measured offset and
//! running its mode on its clock corrected by it (docs/design.md §4b, C1),
//! and the operators' views of it.

// Integration tests: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Endpoint, eventually};
use lockshift_lock::Algorithm;
use lockshift_migration_tool::ops::node_clocks::node_clocks;
use lockshift_rollout::registry::live_nodes;
use lockshift_store::{Clock, SystemClock};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Where Debian's `faketime` package puts the library `faketime(1)`
/// preloads; `LOCKSHIFT_TEST_LIBFAKETIME` names another.
fn libfaketime() -> Option<String> {
    std::env::var("LOCKSHIFT_TEST_LIBFAKETIME")
        .ok()
        .into_iter()
        .chain([
            "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1".to_string(),
            "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1".to_string(),
            "/usr/lib/faketime/libfaketime.so.1".to_string(),
        ])
        .find(|p| std::path::Path::new(p).exists())
}

/// Every node the driver knows is read alone, in step with this machine's
/// clock (the endpoint's is this machine's; a real cluster's nodes run
/// NTP), and the verdict passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_is_read_alone_and_agrees() {
    let e = Endpoint::with_schema().await;
    let report = node_clocks(
        e.store().as_ref(),
        &SystemClock,
        Duration::from_millis(1_000),
    )
    .await;
    assert!(!report.nodes.is_empty(), "{report:?}");
    for n in &report.nodes {
        let r = n
            .reading
            .unwrap_or_else(|| panic!("{} not read: {:?}", n.address, n.error));
        assert!(r.offset_us.unsigned_abs() < 500_000, "{}: {r:?}", n.address);
        assert!(r.error_us < 100_000, "{}: {r:?}", n.address);
    }
    assert!(
        !report.exit_unsafe && report.beyond.is_empty(),
        "{report:?}"
    );
    eprintln!(
        "{}",
        lockshift_migration_tool::render::Human::human(&report)
    );
}

/// The reproduction: a process whose clock reads two minutes
/// behind registers its host's offset of +120 s (within 2 s), stamps on
/// its clock corrected by it, takes its lock as the legacy it was asked for,
/// and warns that the host's clock is off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_holder_two_minutes_behind_registers_its_offset_and_runs_its_mode() {
    let Some(lib) = libfaketime() else {
        assert!(
            std::env::var_os("LOCKSHIFT_REQUIRE_FAKETIME").is_none(),
            "LOCKSHIFT_REQUIRE_FAKETIME is set and libfaketime is not installed \
             (apt-get install faketime)"
        );
        println!("skipped: libfaketime is not installed (apt-get install faketime)");
        return;
    };
    let e = Endpoint::with_schema().await;
    let mut cmd = e.command(
        &["lock", "--mode", "legacy", "clock-check"],
        &[
            ("LD_PRELOAD", lib.as_str()),
            ("FAKETIME", "-120s"),
            ("RUST_LOG", "info"),
        ],
    );
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let store = e.store().clone();
    eventually(Duration::from_secs(30), "the process registers", || {
        let store = store.clone();
        async move {
            let (nodes, _) = live_nodes(store.as_ref(), SystemClock.now(), Duration::from_secs(5))
                .await
                .unwrap();
            nodes.iter().any(|n| n.info.host_clock.is_some())
        }
    })
    .await;
    let (nodes, _) = live_nodes(
        e.store().as_ref(),
        SystemClock.now(),
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    let row = nodes.iter().find(|n| n.info.host_clock.is_some()).unwrap();
    let host = row.info.host_clock.unwrap();
    let stamping = row.info.clock.unwrap();
    eprintln!(
        "registered: host {host:?} ({}), stamping {}",
        host.describe(),
        stamping.describe()
    );
    assert!(
        (host.offset_us - 120_000_000).unsigned_abs() < 2_000_000,
        "{host:?}"
    );
    assert!(
        stamping.offset_us.unsigned_abs() < 2_000_000,
        "{stamping:?}"
    );
    assert_eq!(row.info.effective, Algorithm::Legacy);
    assert!(!row.info.degraded);
    // Its heartbeat is stamped on the database's clock: fresh by anyone's.
    let age = row.heartbeat_age(SystemClock.now(), None, Duration::from_secs(5));
    assert!(age.surely_within(Duration::from_secs(10)), "{age:?}");
    operators_see_a_live_holder(&e, "clock-check").await;
    kill(Pid::from_raw(child.id().unwrap() as i32), Signal::SIGINT).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("migrate lock exits")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("this host's clock is beyond rollout.clock_skew_margin"),
        "{stderr}"
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// Issue 41 item 2: the operators' views, at the true time, of a live
/// holder of `lock` whose clock is two minutes behind: `inspect` names it
/// and calls no cell's lease over, `status` shows its offset and does not
/// call it silent, and `clean --apply` deletes nothing (each judged by the
/// holder's reading; by its stamps alone its cells are two minutes old).
async fn operators_see_a_live_holder(e: &Endpoint, lock: &str) {
    let inspect = e.migrate(&["inspect", lock, "--json"]).await;
    let j = inspect.expect_code(0).json();
    assert!(j["holder"].is_string(), "{j:#}");
    let cells = j["cells"].as_array().unwrap();
    assert!(!cells.is_empty(), "{j:#}");
    assert!(cells.iter().all(|c| c["lease_over"] == false), "{j:#}");
    let status = e.migrate(&["status"]).await;
    let text = &status.stdout;
    assert!(!text.contains("(silent)"), "{text}");
    assert!(text.contains("-120.0") || text.contains("-119.9"), "{text}");
    let status = e.migrate(&["status", "--json"]).await.json();
    let far = status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| !n["clock"].is_null())
        .unwrap_or_else(|| panic!("{status:#}"));
    assert_eq!(far["silent"], false, "{far:#}");
    assert!(
        far["heartbeat_age_ms"].as_u64().unwrap() < 15_000,
        "{far:#}"
    );
    let clean = e.migrate(&["clean", "--apply", "--json"]).await;
    let j = clean.expect_code(0).json();
    assert_eq!(j["summary"]["deleted"], 0, "{j:#}");
    let again = e.migrate(&["inspect", lock, "--json"]).await.json();
    assert_eq!(again["holder"], inspect.json()["holder"], "{again:#}");
}
