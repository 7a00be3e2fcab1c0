//! Cross-process visibility: the `cql-emulator` binary runs as one OS
//! process, this test binary is a second, and it re-executes itself as a
//! third (running one of the `#[ignore]`d child tests below). What one
//! process writes through the endpoint, the others read.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const ADDR_VAR: &str = "LOCKSHIFT_EMULATOR_TEST_ADDR";

/// Kills the endpoint process however the test ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

async fn start_binary() -> (Killed, std::net::SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cql-emulator"))
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the cql-emulator binary starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("the binary printed its address in time")
        .expect("stdout readable")
        .expect("a line on stdout");
    let addr = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .parse()
        .expect("an address");
    (Killed(child), addr)
}

/// Runs one of this binary's ignored tests in a new OS process.
async fn run_child(test: &str, addr: std::net::SocketAddr) {
    let status = Command::new(std::env::current_exe().expect("own path"))
        .args(["--exact", test, "--ignored", "--test-threads=1"])
        .env(ADDR_VAR, addr.to_string())
        .status()
        .await
        .expect("child process runs");
    assert!(status.success(), "child process {test} failed: {status}");
}

#[tokio::test]
async fn a_process_reads_what_another_process_wrote() {
    let (_endpoint, addr) = start_binary().await;
    run_child("child_writes", addr).await;
    let s = session(addr, true).await;
    let st = Statements::prepare(&s, "main").await;
    let cells = read(&s, &st, "shared-lock", 10).await;
    assert_eq!(
        cells,
        vec![("owner-in-child".to_string(), b"child".to_vec(), 42, None)],
        "this process sees the child's write"
    );
    write(&s, &st, "shared-lock", "owner-in-parent", b"parent", 0, 43).await;
    run_child("child_reads", addr).await;
}

/// Child side: writes one cell (run by the test above, not on its own).
#[tokio::test]
#[ignore = "runs as a separate OS process, started by a_process_reads_what_another_process_wrote"]
async fn child_writes() {
    let Ok(addr) = std::env::var(ADDR_VAR) else {
        return;
    };
    let s = session(addr.parse().unwrap(), false).await;
    create_schema(&s).await;
    let st = Statements::prepare(&s, "main").await;
    write(&s, &st, "shared-lock", "owner-in-child", b"child", 0, 42).await;
}

/// Child side: must see the parent's cell.
#[tokio::test]
#[ignore = "runs as a separate OS process, started by a_process_reads_what_another_process_wrote"]
async fn child_reads() {
    let Ok(addr) = std::env::var(ADDR_VAR) else {
        return;
    };
    let s = session(addr.parse().unwrap(), false).await;
    let st = Statements::prepare(&s, "main").await;
    let owners: Vec<String> = read(&s, &st, "shared-lock", 10)
        .await
        .into_iter()
        .map(|c| c.0)
        .collect();
    assert_eq!(owners, ["owner-in-child", "owner-in-parent"]);
}
