//! `migrate run-with-lock` as an operator meets it (issue 11 items 3 and 5):
//! it dies with its command and the command with it (`kill -9` included),
//! real signals are forwarded and a second one escalates, settings decide
//! the node's mode and id, it says whom it waits for, and its report stays
//! off the command's stdout.

// Integration tests: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Endpoint, FAST, eventually};
use lockshift_decide::algorithm::Mode;
use lockshift_lock::LockId;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Whether `pid` runs (a zombie does not: it only waits to be reaped).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // "pid (comm) S ...": the state follows the last ')'.
            let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
            Some(state != 'Z' && state != 'X')
        })
        .unwrap_or(false)
}

/// `migrate` with its output away from the test's own: should a test fail
/// and leave the command running, it must not hold the test runner's pipes.
fn spawned(mut cmd: tokio::process::Command) -> tokio::process::Child {
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    cmd.spawn().unwrap()
}

/// Waits until `path` holds a pid, and returns it.
async fn pid_in(path: &Path) -> i32 {
    eventually(Duration::from_secs(30), "the command to start", || {
        let ready = std::fs::read_to_string(path)
            .ok()
            .is_some_and(|s| s.trim().parse::<i32>().is_ok());
        async move { ready }
    })
    .await;
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// `kill -9` of `migrate`: the command (and what it started) dies too —
/// otherwise it would run on without the lock once the cells expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_migrate_kills_the_command_and_its_children() {
    let e = Endpoint::with_schema().await;
    let dir = tempfile::tempdir().unwrap();
    let (shell, grandchild) = (dir.path().join("shell"), dir.path().join("grandchild"));
    let mut migrate = spawned(e.command(
        &[
            "run-with-lock",
            "nightly",
            "--",
            "sh",
            "-c",
            "echo $$ > \"$1\"; sleep 300 & echo $! > \"$2\"; wait",
            "sh",
            shell.to_str().unwrap(),
            grandchild.to_str().unwrap(),
        ],
        FAST,
    ));
    let (shell, grandchild) = (pid_in(&shell).await, pid_in(&grandchild).await);
    assert!(alive(shell) && alive(grandchild));
    let pid = Pid::from_raw(i32::try_from(migrate.id().unwrap()).unwrap());
    kill(pid, Signal::SIGKILL).unwrap();
    migrate.wait().await.unwrap();
    eventually(
        Duration::from_secs(10),
        "the command and its child to die with migrate",
        || async move { !alive(shell) && !alive(grandchild) },
    )
    .await;
}

/// Each signal migrate forwards (INT, TERM, HUP, QUIT) reaches the command
/// as it is — its own trap runs — and the command's exit code passes
/// through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_signal_is_forwarded() {
    let e = Endpoint::with_schema().await;
    for (signal, name) in [
        (Signal::SIGINT, "INT"),
        (Signal::SIGTERM, "TERM"),
        (Signal::SIGHUP, "HUP"),
        (Signal::SIGQUIT, "QUIT"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (ready, trapped) = (dir.path().join("ready"), dir.path().join("trapped"));
        // Every trap names its signal, so a forwarded TERM cannot pass for
        // a forwarded HUP.
        let script = r#"for s in INT TERM HUP QUIT; do trap "echo $s > '$2'; exit 5" $s; done; echo $$ > "$1"; while :; do sleep 0.1; done"#;
        let mut migrate = spawned(e.command(
            &[
                "run-with-lock",
                &format!("job-{name}"),
                "--",
                "sh",
                "-c",
                script,
                "sh",
                ready.to_str().unwrap(),
                trapped.to_str().unwrap(),
            ],
            FAST,
        ));
        pid_in(&ready).await;
        let pid = Pid::from_raw(i32::try_from(migrate.id().unwrap()).unwrap());
        kill(pid, signal).unwrap();
        let status = tokio::time::timeout(Duration::from_secs(30), migrate.wait())
            .await
            .unwrap_or_else(|_| panic!("migrate ends after a forwarded SIG{name}"))
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(&trapped).unwrap_or_default().trim(),
            name,
            "the command's SIG{name} trap ran"
        );
        assert_eq!(
            status.code(),
            Some(5),
            "SIG{name}: the command's own exit code"
        );
    }
}

/// A command that ignores SIGTERM: the second signal sends SIGKILL at once;
/// a single signal does so when --grace runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_or_the_grace_period_escalates_to_sigkill() {
    let e = Endpoint::with_schema().await;
    for (grace, signals) in [("60s", 2), ("1s", 1)] {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        let migrate = spawned(e.command(
            &[
                "run-with-lock",
                "stubborn",
                "--grace",
                grace,
                "--",
                "sh",
                "-c",
                "trap '' TERM; echo $$ > \"$1\"; while :; do sleep 0.1; done",
                "sh",
                ready.to_str().unwrap(),
            ],
            FAST,
        ));
        let shell = pid_in(&ready).await;
        let pid = Pid::from_raw(i32::try_from(migrate.id().unwrap()).unwrap());
        for _ in 0..signals {
            kill(pid, Signal::SIGTERM).unwrap();
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let Ok(out) =
            tokio::time::timeout(Duration::from_secs(30), migrate.wait_with_output()).await
        else {
            let _ = kill(Pid::from_raw(shell), Signal::SIGKILL);
            panic!("grace {grace}, {signals} signal(s): the command was never killed");
        };
        let out = out.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(137), "128 + SIGKILL: {stderr}");
        assert!(stderr.contains("SIGKILL"), "{stderr}");
        assert!(!alive(shell));
    }
}

/// `node.id` and `node.mode` come from the environment (and file) as for
/// every node — the flag still wins; the report goes to stderr and to
/// `--report FILE`, never into the command's stdout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_decide_the_node_and_the_report_stays_off_stdout() {
    let e = Endpoint::with_schema().await;
    let mut env = FAST.to_vec();
    env.extend([
        ("LOCKSHIFT__NODE__ID", "batch-7"),
        ("LOCKSHIFT__NODE__MODE", "legacy"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.json");
    let r = e
        .migrate_env(
            &[
                "--json",
                "run-with-lock",
                "job",
                "--report",
                file.to_str().unwrap(),
                "--",
                "echo",
                "hello",
            ],
            &env,
        )
        .await;
    r.expect_code(0);
    assert_eq!(r.stdout, "hello\n", "stdout is the command's alone");
    let j = r.stderr_json();
    assert_eq!(j["node"], "batch-7", "{j:#}");
    assert_eq!(j["mode"], "legacy");
    assert_eq!(j["algorithm"], "legacy");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(written["result"], "completed");
    assert_eq!(written["node"], "batch-7");

    let r = e
        .migrate_env(
            &[
                "--json",
                "run-with-lock",
                "job",
                "--mode",
                "combined",
                "--",
                "true",
            ],
            &env,
        )
        .await;
    let j = r.expect_code(0).stderr_json();
    assert_eq!(j["mode"], "combined", "the flag wins over the environment");

    // The same from a settings file, with nothing in the environment.
    let config = dir.path().join("lockshift.toml");
    std::fs::write(&config, "[node]\nid = \"from-file\"\nmode = \"legacy\"\n").unwrap();
    let r = e
        .migrate_env(
            &[
                "--config",
                config.to_str().unwrap(),
                "--json",
                "run-with-lock",
                "job",
                "--",
                "true",
            ],
            FAST,
        )
        .await;
    let j = r.expect_code(0).stderr_json();
    assert_eq!(j["node"], "from-file", "{j:#}");
    assert_eq!(j["mode"], "legacy", "{j:#}");
}

/// While the lock is held elsewhere, stderr says by whom.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_says_who_holds_the_lock() {
    let e = Endpoint::with_schema().await;
    let holder = e.node("holder", Mode::Combined).await;
    let guard = holder.acquire(&LockId::new("busy").unwrap()).await.unwrap();
    e.migrate_env(
        &["run-with-lock", "busy", "--timeout", "1s", "--", "true"],
        FAST,
    )
    .await
    .expect_code(3)
    .stderr_has(&format!(
        "waiting for busy (held by {} since",
        guard.owner()
    ));
    guard.release().await.unwrap();
}

/// The command starts with the signal state of any program: nothing
/// blocked by its supervisor, so SIGTERM ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_starts_with_no_signal_blocked() {
    let e = Endpoint::with_schema().await;
    let r = e
        .migrate_env(
            &[
                "run-with-lock",
                "mask",
                "--",
                "sh",
                "-c",
                "exec grep SigBlk /proc/self/status",
            ],
            FAST,
        )
        .await;
    r.expect_code(0);
    assert_eq!(r.stdout.trim(), "SigBlk:\t0000000000000000", "{r:#?}");
}

/// Reads `child`'s stderr until a line contains `needle` (at most 30 s);
/// returns everything read so far.
async fn stderr_until(child: &mut tokio::process::Child, needle: &str) -> String {
    use tokio::io::AsyncBufReadExt;
    let stderr = child.stderr.take().expect("stderr piped");
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let mut seen = String::new();
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            seen.push_str(&line);
            seen.push('\n');
            if line.contains(needle) {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(found, "stderr never said {needle:?}:\n{seen}");
    // Keep draining, so migrate never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    seen
}

/// Issue 19 item 4: `sh -c 'job &'` exits at once and leaves `job`
/// running; the lock stays held until `job` is gone too. Here `job`
/// ignores SIGTERM and the grace period is long, so it lives until the
/// test kills it: meanwhile another run-with-lock cannot take the lock;
/// after, it can.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_process_keeps_the_lock_until_it_is_gone() {
    let e = Endpoint::with_schema().await;
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("job");
    let mut migrate = spawned(e.command(
        &[
            "run-with-lock",
            "background",
            "--grace",
            "10m",
            "--",
            "sh",
            "-c",
            "trap '' TERM; sleep 44 & echo $! > \"$1\"",
            "sh",
            pidfile.to_str().unwrap(),
        ],
        FAST,
    ));
    let job = pid_in(&pidfile).await;
    stderr_until(&mut migrate, "still run in its process group").await;
    assert!(alive(job), "the background job ignores SIGTERM");
    e.migrate_env(
        &[
            "run-with-lock",
            "background",
            "--timeout",
            "1s",
            "--",
            "true",
        ],
        FAST,
    )
    .await
    .expect_code(3);
    assert!(
        migrate.try_wait().unwrap().is_none(),
        "migrate holds on while the job lives"
    );
    kill(Pid::from_raw(job), Signal::SIGKILL).unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), migrate.wait())
        .await
        .expect("migrate ends once the group is gone")
        .unwrap();
    assert_eq!(status.code(), Some(0), "the command's own exit code");
    e.migrate_env(
        &[
            "run-with-lock",
            "background",
            "--timeout",
            "5s",
            "--",
            "true",
        ],
        FAST,
    )
    .await
    .expect_code(0);
}

/// The leftover process is ended (SIGTERM) before migrate releases and
/// exits: when migrate is done, so is `sleep 44`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leftover_process_is_ended_before_the_release() {
    let e = Endpoint::with_schema().await;
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("job");
    let r = e
        .migrate_env(
            &[
                "run-with-lock",
                "leftover",
                "--",
                "sh",
                "-c",
                "sleep 44 & echo $! > \"$1\"",
                "sh",
                pidfile.to_str().unwrap(),
            ],
            FAST,
        )
        .await;
    let job: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let still_alive = alive(job);
    if still_alive {
        let _ = kill(Pid::from_raw(job), Signal::SIGKILL);
    }
    r.expect_code(0)
        .stderr_has("still run in its process group; sending them SIGTERM");
    assert!(!still_alive, "sleep 44 outlived migrate:\n{r:#?}");
}

/// A command that traps SIGINT, exits 0 and leaves a child behind (which
/// ignores SIGINT, as background jobs of `sh` do): the forwarded SIGINT
/// ends the command, then the child is ended, then migrate exits with the
/// command's code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_traps_sigint_and_leaves_a_child() {
    let e = Endpoint::with_schema().await;
    let dir = tempfile::tempdir().unwrap();
    let (shell, child) = (dir.path().join("shell"), dir.path().join("child"));
    let migrate = spawned(e.command(
        &[
            "run-with-lock",
            "trapper",
            "--",
            "sh",
            "-c",
            "trap 'exit 0' INT; sleep 45 & echo $! > \"$2\"; echo $$ > \"$1\"; wait",
            "sh",
            shell.to_str().unwrap(),
            child.to_str().unwrap(),
        ],
        FAST,
    ));
    let (shell, child) = (pid_in(&shell).await, pid_in(&child).await);
    let pid = Pid::from_raw(i32::try_from(migrate.id().unwrap()).unwrap());
    kill(pid, Signal::SIGINT).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(30), migrate.wait_with_output())
        .await
        .expect("migrate ends")
        .unwrap();
    let child_alive = alive(child);
    if child_alive {
        let _ = kill(Pid::from_raw(child), Signal::SIGKILL);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "the trap's exit 0: {stderr}");
    assert!(!alive(shell));
    assert!(!child_alive, "the child outlived migrate: {stderr}");
}

/// Issue 19 (A): while it waits, stderr says whom it waits for when that
/// changes — from the waiter's own reads, at most one line per
/// `WAIT_LINE_GAP`. Here A holds, B waits ahead of run-with-lock; A leaves,
/// B holds: the line names B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_says_who_it_waits_for_when_that_changes() {
    let e = Endpoint::with_schema().await;
    let lock = LockId::new("relay").unwrap();
    let (a, b) = (
        e.node("holder-a", Mode::Combined).await,
        e.node("next-b", Mode::Combined).await,
    );
    let held_a = a.acquire(&lock).await.unwrap();
    let b_task = {
        let locker = b.clone();
        let lock = lock.clone();
        tokio::spawn(async move { locker.acquire(&lock).await })
    };
    eventually(Duration::from_secs(10), "b to queue", || async {
        let queue = e
            .store()
            .read(
                lockshift_store::schema::QUEUE,
                "relay",
                &lockshift_store::RowQuery::all(),
            )
            .await
            .unwrap();
        queue.iter().any(|c| c.column.starts_with("next-b/"))
    })
    .await;
    let mut waiter = spawned(e.command(&["run-with-lock", "relay", "--", "true"], FAST));
    // Everything the waiter says, as it says it.
    let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        use tokio::io::AsyncBufReadExt;
        let said = said.clone();
        let mut lines = tokio::io::BufReader::new(waiter.stderr.take().unwrap()).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let mut said = said.lock().unwrap();
                said.push_str(&line);
                said.push('\n');
            }
        })
    };
    let holder_a = format!("held by {}", held_a.owner());
    eventually(Duration::from_secs(30), "the first waiting line", || {
        let said = said.lock().unwrap().contains(&holder_a);
        async move { said }
    })
    .await;
    held_a.release().await.unwrap();
    let held_b = b_task.await.unwrap().unwrap();
    let named_b = format!("waiting for relay: held by {}", held_b.owner());
    let gap = lockshift_migration_tool::ops::lock_session::WAIT_LINE_GAP;
    eventually(gap + Duration::from_secs(10), "a line naming B", || {
        let said = said.lock().unwrap().contains(&named_b);
        async move { said }
    })
    .await;
    held_b.release().await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), waiter.wait())
        .await
        .expect("the waiter gets the lock")
        .unwrap();
    reader.await.unwrap();
    assert_eq!(status.code(), Some(0), "{}", said.lock().unwrap());
}
