//! `migrate run-with-lock <lock> -- <command…>`: hold a lock while a command
//! runs (etcd's `etcdctl lock`, YTsaurus' `run-command-with-lock`).
//!
//! # Why a registered [`Node`] rather than a bare locker
//!
//! A locked command can run for hours, and while it holds the lock its
//! algorithm matters to the rollout exactly as a service's does: a command
//! holding a lock through the legacy algorithm must keep `advance` to
//! `dual` from passing. A [`Node`] registers (configured and effective
//! mode, heartbeat), reports its activity and follows the stage — so the
//! guards see it — and deregisters when done. Its cost is one stage read and
//! one heartbeat at start.
//!
//! # Lease loss
//!
//! The guard's lost signal fires when the lease can no longer be proven,
//! before its TTL can run out (lock invariant I3). Then the command must
//! stop touching the guarded resource: it gets SIGTERM, then SIGKILL after
//! `--grace`, and `migrate` exits 4 whatever the command's own status.
//!
//! The command runs in its own process group so both signals reach
//! everything it started (a shell's children too); `migrate` forwards the
//! SIGINT/SIGTERM/SIGHUP it receives to that group. The price: a command
//! reading from the terminal would be stopped (SIGTTIN) — locked commands
//! are batch jobs.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use anyhow::Context;
use lockshift_combined::{Mode, Node, NodeOptions, Stage};
use lockshift_lock::{AcquireError, AcquireOptions, Algorithm, LockId, Locker, MAX_NODE_ID_LEN};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::Serialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::advance::hostname;
use super::{Env, ms};
use crate::{JSON_VERSION, Outcome};

/// What to run under which lock.
#[derive(Debug, Clone)]
pub struct Request {
    /// The lock.
    pub lock: LockId,
    /// Configured mode (resolved against the stage).
    pub mode: Mode,
    /// Give up waiting for the lock after this long.
    pub timeout: Option<Duration>,
    /// SIGTERM → SIGKILL grace period.
    pub grace: Duration,
    /// Program and arguments.
    pub command: Vec<String>,
}

/// How the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunResult {
    /// The command ran and exited by itself.
    Completed,
    /// The lease was lost; the command was stopped.
    LeaseLost,
    /// The lock was not free within `--timeout`; nothing ran.
    Timeout,
    /// Interrupted (SIGINT/SIGTERM) while waiting for the lock; nothing ran.
    Interrupted,
    /// The command could not be started.
    SpawnFailed,
}

/// The report of `migrate run-with-lock` (JSON schema, `"version": 1`;
/// printed on stdout after the command ends, only with `--json`).
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// Schema version, 1.
    pub version: u32,
    /// The lock.
    pub lock: String,
    /// The registered node id of this process.
    pub node: String,
    /// Configured mode.
    pub mode: Mode,
    /// The stage the node read (`null`: could not read it; runs combined).
    pub stage: Option<Stage>,
    /// The algorithm that took the lock.
    pub algorithm: Algorithm,
    /// Set when the stage refused the configured mode (ran combined).
    pub degraded_from: Option<Mode>,
    /// The owner id of the acquisition.
    pub owner: Option<String>,
    /// Fencing token (queue-based algorithms).
    pub fencing_token: Option<u64>,
    /// How long taking the lock took.
    pub waited_ms: u64,
    /// How long the lock was held.
    pub held_ms: u64,
    /// How the run ended.
    pub result: RunResult,
    /// The command's exit code, if it exited.
    pub child_exit_code: Option<i32>,
    /// The signal that ended the command, if one did.
    pub child_signal: Option<i32>,
    /// Why the lease was lost.
    pub lease_lost: Option<String>,
    /// Whether the command had to be killed (SIGKILL after the grace period).
    pub killed: bool,
    /// What `migrate` exits with.
    pub exit_code: i32,
}

impl RunReport {
    /// The exit status this run maps to.
    pub fn outcome(&self) -> Outcome {
        match self.result {
            RunResult::LeaseLost => Outcome::LeaseLost,
            RunResult::Timeout => Outcome::NotSafe,
            _ => Outcome::Child(self.exit_code),
        }
    }
}

/// Takes the lock, runs the command, releases. `note` hears warnings
/// (degraded mode, lease lost, signals sent).
///
/// # Errors
/// Node start, acquisition (other than timeout) or wait failures.
pub async fn run_with_lock(
    env: &Env,
    request: Request,
    mut note: impl FnMut(String),
) -> anyhow::Result<RunReport> {
    let interrupt = interrupt_token();
    let mut settings = env.settings.clone();
    let node_id = node_id();
    settings.node.id = Some(node_id.clone());
    settings.node.mode = request.mode;
    let node = Node::start(
        env.store.clone(),
        env.clock.clone(),
        NodeOptions::new(settings),
    )
    .await
    .context("starting the lock node")?;
    let status = node.status();
    if let Some(from) = status.degraded_from {
        note(format!(
            "warning: mode {from} is not allowed at stage {}; using combined",
            status
                .stage
                .as_ref()
                .map_or("unknown", |s| s.stage.as_str())
        ));
    }
    let mut report = RunReport {
        version: JSON_VERSION,
        lock: request.lock.to_string(),
        node: node_id,
        mode: request.mode,
        stage: status.stage.as_ref().map(|s| s.stage),
        algorithm: status.effective,
        degraded_from: status.degraded_from,
        owner: None,
        fencing_token: None,
        waited_ms: 0,
        held_ms: 0,
        result: RunResult::Completed,
        child_exit_code: None,
        child_signal: None,
        lease_lost: None,
        killed: false,
        exit_code: 0,
    };
    let result = hold_and_run(&node, &request, &interrupt, &mut report, &mut note).await;
    node.shutdown().await;
    result.map(|()| report)
}

async fn hold_and_run(
    node: &Node,
    request: &Request,
    interrupt: &CancellationToken,
    report: &mut RunReport,
    note: &mut impl FnMut(String),
) -> anyhow::Result<()> {
    let started = Instant::now();
    let options = AcquireOptions {
        timeout: request.timeout,
        cancel: Some(interrupt.clone()),
    };
    let guard = match node.locker().acquire_with(&request.lock, options).await {
        Ok(g) => g,
        Err(AcquireError::Timeout { waited, .. }) => {
            note(format!(
                "lock {} was not free within {} (exit 3)",
                request.lock,
                humantime::format_duration(Duration::from_millis(ms(waited)))
            ));
            report.waited_ms = ms(waited);
            report.result = RunResult::Timeout;
            report.exit_code = 3;
            return Ok(());
        }
        Err(AcquireError::Cancelled { .. }) => {
            report.waited_ms = ms(started.elapsed());
            report.result = RunResult::Interrupted;
            report.exit_code = 130;
            return Ok(());
        }
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("taking lock {}", request.lock)));
        }
    };
    report.waited_ms = ms(started.elapsed());
    report.algorithm = guard.algorithm();
    report.owner = Some(guard.owner().to_string());
    // Two round trips: the child gets a token it can hand to the resource.
    report.fencing_token = match guard.fencing_token().await {
        Ok(token) => Some(token),
        Err(e) => {
            note(format!("warning: running without a fencing token: {e}"));
            None
        }
    };
    let held_since = Instant::now();
    let lost = guard.lost();

    let outcome = if lost.is_cancelled() {
        Ran::LeaseLost {
            killed: false,
            status: None,
        }
    } else {
        let mut cmd = tokio::process::Command::new(&request.command[0]);
        cmd.args(&request.command[1..])
            .env("LOCKSHIFT_LOCK_ID", request.lock.as_str())
            .env("LOCKSHIFT_LOCK_OWNER", guard.owner().as_str())
            .process_group(0);
        if let Some(token) = report.fencing_token {
            cmd.env("LOCKSHIFT_FENCING_TOKEN", token.to_string());
        }
        match cmd.spawn() {
            Err(e) => {
                note(format!("error: cannot run {:?}: {e}", request.command[0]));
                report.result = RunResult::SpawnFailed;
                report.exit_code = match e.kind() {
                    std::io::ErrorKind::NotFound => 127,
                    _ => 126,
                };
                Ran::NotStarted
            }
            Ok(child) => supervise(child, &lost, interrupt, request.grace, note).await?,
        }
    };
    match outcome {
        Ran::NotStarted => {}
        Ran::Exited(status) => {
            record_status(report, status);
            report.exit_code = exit_code_of(status);
        }
        Ran::LeaseLost { killed, status } => {
            if let Some(status) = status {
                record_status(report, status);
            }
            report.killed = killed;
            report.result = RunResult::LeaseLost;
            report.exit_code = 4;
            report.lease_lost = Some(
                guard
                    .lost_reason()
                    .map_or("the lease could not be proven".to_string(), |r| {
                        r.to_string()
                    }),
            );
        }
    }
    report.held_ms = ms(held_since.elapsed());
    if let Err(e) = guard.release().await {
        note(format!("warning: {e}"));
    }
    Ok(())
}

enum Ran {
    NotStarted,
    Exited(ExitStatus),
    LeaseLost {
        killed: bool,
        status: Option<ExitStatus>,
    },
}

/// Waits for the child; on lease loss stops it (SIGTERM, grace, SIGKILL);
/// forwards one interrupt as SIGTERM.
async fn supervise(
    mut child: tokio::process::Child,
    lost: &CancellationToken,
    interrupt: &CancellationToken,
    grace: Duration,
    note: &mut impl FnMut(String),
) -> anyhow::Result<Ran> {
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let mut forwarded = false;
    loop {
        tokio::select! {
            status = child.wait() => {
                return Ok(Ran::Exited(status.context("waiting for the command")?));
            }
            _ = lost.cancelled() => {
                note(format!(
                    "error: lease lost; stopping the command (SIGTERM, SIGKILL after {})",
                    humantime::format_duration(grace)
                ));
                signal(group, Signal::SIGTERM);
                let (killed, status) = match tokio::time::timeout(grace, child.wait()).await {
                    Ok(status) => (false, status.ok()),
                    Err(_) => {
                        note("error: the command outlived the grace period; sending SIGKILL".into());
                        signal(group, Signal::SIGKILL);
                        (true, child.wait().await.ok())
                    }
                };
                return Ok(Ran::LeaseLost { killed, status });
            }
            _ = interrupt.cancelled(), if !forwarded => {
                forwarded = true;
                signal(group, Signal::SIGTERM);
            }
        }
    }
}

/// Signals the child's process group; a group already gone is fine.
fn signal(group: Option<Pid>, sig: Signal) {
    if let Some(group) = group {
        // ESRCH: the command has exited meanwhile — nothing to stop.
        let _ = killpg(group, sig);
    }
}

fn record_status(report: &mut RunReport, status: ExitStatus) {
    report.child_exit_code = status.code();
    report.child_signal = status.signal();
}

/// The shell convention: the exit code, or 128 + the signal that ended it.
fn exit_code_of(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// `migrate-<host>-<pid>`, within the node id rules.
fn node_id() -> String {
    let pid = std::process::id().to_string();
    let host: String = hostname()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(MAX_NODE_ID_LEN.saturating_sub(pid.len() + 10))
        .collect();
    format!("migrate-{host}-{pid}")
}

/// Fires on the first SIGINT, SIGTERM or SIGHUP this process receives.
/// (Registering replaces their default action — dying — for the rest of
/// the process: `migrate` then stops the command and releases the lock.)
fn interrupt_token() -> CancellationToken {
    use tokio::signal::unix::{SignalKind, signal};
    let token = CancellationToken::new();
    let fire = token.clone();
    let streams = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    );
    if let (Ok(mut int), Ok(mut term), Ok(mut hup)) = streams {
        tokio::spawn(async move {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
                _ = hup.recv() => {}
            }
            fire.cancel();
        });
    }
    token
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use lockshift_combined::Settings;
    use lockshift_store::{MemoryStore, SharedStore, SystemClock};

    use super::*;

    fn request(command: &[&str]) -> Request {
        Request {
            lock: LockId::new("job").unwrap(),
            mode: Mode::Queue,
            timeout: Some(Duration::from_secs(10)),
            grace: Duration::from_secs(1),
            command: command.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[tokio::test]
    async fn exit_codes_pass_through_and_the_mode_degrades() {
        let store: SharedStore = Arc::new(MemoryStore::new());
        let env = Env::new(Settings::default(), store, Arc::new(SystemClock));
        let mut notes = Vec::new();
        let r = run_with_lock(&env, request(&["sh", "-c", "exit 7"]), |n| notes.push(n))
            .await
            .unwrap();
        assert_eq!(r.outcome(), Outcome::Child(7));
        assert_eq!(
            r.algorithm,
            Algorithm::Combined,
            "queue is not allowed at legacy"
        );
        assert_eq!(r.degraded_from, Some(Mode::Queue));
        assert!(
            notes[0].contains("not allowed at stage legacy"),
            "{notes:?}"
        );
        let r = run_with_lock(&env, request(&["sh", "-c", "kill -9 $$"]), |_| {})
            .await
            .unwrap();
        assert_eq!(r.outcome(), Outcome::Child(137));
        let r = run_with_lock(&env, request(&["/nonexistent/cmd"]), |_| {})
            .await
            .unwrap();
        assert_eq!(
            (r.result, r.outcome()),
            (RunResult::SpawnFailed, Outcome::Child(127))
        );
    }
}
