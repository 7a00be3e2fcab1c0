//! `migrate run-with-lock <lock> -- <command…>`: hold a lock while a command
//! runs (etcd's `etcdctl lock`, YTsaurus' `run-command-with-lock`).
//!
//! Taking the lock and giving it back is [`super::lock_session`]'s, shared
//! with `migrate lock`; this module runs the command in between.
//!
//! # Lease loss
//!
//! The guard's lost signal fires when the lease can no longer be proven,
//! before the cell can expire (lease invariant L3). Then the command must
//! stop touching the guarded resource: it gets SIGTERM, then SIGKILL after
//! `--grace`, and `migrate` exits 4 whatever the command's own status. The
//! lease is checked once more (against the clock) just before the command
//! starts: a process paused after acquiring must not start it on a lost
//! lease.
//!
//! # Dying together
//!
//! The command runs in its own process group under a small supervisor
//! ([`super::child`]) that kills the whole group if `migrate` dies, even by
//! `kill -9`. Signals `migrate` receives (INT, TERM, HUP, QUIT) are
//! forwarded as they are to the group; if the command is still running
//! `--grace` later, or on a second signal, the group gets SIGKILL. The
//! price of the own group: a command reading from the terminal would be
//! stopped (SIGTTIN) — locked commands are batch jobs.
//!
//! # The whole group, then the release
//!
//! The lock is held until the command's whole process group is gone, not
//! only the command: `sh -c 'job &'` exits at once and leaves `job`
//! running, still touching the resource. When the command exits (or is
//! stopped after a lost lease or a signal) and processes remain in its
//! group, they get SIGTERM, then SIGKILL after `--grace`, and only once
//! the group is empty is the lock released and `migrate` exits. The
//! supervisor does this (so a `kill -9` of `migrate` meanwhile still kills
//! the group); `migrate` checks again after it ([`child::end_group`]).

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use anyhow::Context;
use lockshift::LockGuard;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::Serialize;
use tokio::time::Instant;

use super::lock_session::{
    Holding, Interrupts, LockRequest, LockSession, NotHeld, TokenWording, lost_reason, release,
    sleep_until_opt,
};
use super::{Env, child, ms};
use crate::{JSON_VERSION, Outcome};

/// What to run under which lock.
#[derive(Debug, Clone)]
pub struct Request {
    /// Which lock, and how to take it.
    pub take: LockRequest,
    /// SIGTERM (or a forwarded signal) → SIGKILL grace period.
    pub grace: Duration,
    /// Program and arguments.
    pub command: Vec<String>,
    /// `migrate elect`: once the lock is held, record this process as the
    /// leader of the election the lock names, proclaiming this value
    /// (docs/design.md §5b), before the command starts.
    pub proclaim: Option<String>,
    /// The `migrate` binary, to run the command under its supervisor
    /// ([`child`]); `None` runs it directly (it then survives a `kill -9`
    /// of this process — only for tests of this module).
    pub supervisor: Option<PathBuf>,
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
    /// Interrupted (SIGINT, SIGTERM, SIGHUP, SIGQUIT) while waiting for the
    /// lock; nothing ran.
    Interrupted,
    /// The command could not be started.
    SpawnFailed,
    /// No fencing token could be had while the lease held, and one was
    /// required (`--fencing-token required`, the default); nothing ran.
    NoFencingToken,
    /// `migrate elect`: the lock was held but the leader record could not
    /// be written; nothing ran.
    NotProclaimed,
}

impl From<NotHeld> for RunResult {
    fn from(not_held: NotHeld) -> RunResult {
        match not_held {
            NotHeld::Timeout => RunResult::Timeout,
            NotHeld::Interrupted(_) => RunResult::Interrupted,
            NotHeld::NoFencingToken => RunResult::NoFencingToken,
        }
    }
}

/// The report of `migrate run-with-lock` (JSON schema, `"version": 1`;
/// written after the command ends, with `--json` on stderr — stdout is the
/// command's — and with `--report FILE` to that file).
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// Schema version, 1.
    pub version: u32,
    /// Lock, node, mode, algorithm, owner, fencing token, wait and hold
    /// times, why the lease was lost (flattened: top-level fields).
    #[serde(flatten)]
    pub holding: Holding,
    /// How the run ended.
    pub result: RunResult,
    /// The command's exit code, if it exited.
    pub child_exit_code: Option<i32>,
    /// The signal that ended the command, if one did.
    pub child_signal: Option<i32>,
    /// Signals received and forwarded to the command's group, in order.
    pub forwarded_signals: Vec<String>,
    /// Whether the command had to be killed (SIGKILL after the grace period).
    pub killed: bool,
    /// `migrate elect`: the value proclaimed while the command ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proclaimed: Option<String>,
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

/// What `run-with-lock` says about its fencing token.
const WORDING: TokenWording = TokenWording {
    refused: "the command was not started (--fencing-token optional starts it without one)",
    without: "running without a fencing token",
};

/// Takes the lock, runs the command, releases. `note` hears warnings
/// (degraded mode, whom it waits for, lease lost, signals sent).
///
/// # Errors
/// Node start, acquisition (other than timeout) or wait failures.
pub async fn run_with_lock(
    env: &Env,
    request: Request,
    mut note: impl FnMut(String),
) -> anyhow::Result<RunReport> {
    let (mut session, holding) = LockSession::start(env, &request.take, &mut note).await?;
    let mut report = RunReport {
        version: JSON_VERSION,
        holding,
        result: RunResult::Completed,
        child_exit_code: None,
        child_signal: None,
        forwarded_signals: Vec::new(),
        killed: false,
        proclaimed: None,
        exit_code: 0,
    };
    let result = hold_and_run(&mut session, &request, &mut report, &mut note).await;
    session.shutdown().await;
    result.map(|()| report)
}

async fn hold_and_run(
    session: &mut LockSession,
    request: &Request,
    report: &mut RunReport,
    note: &mut impl FnMut(String),
) -> anyhow::Result<()> {
    let guard = match session
        .acquire(&request.take, WORDING, &mut report.holding, note)
        .await?
    {
        Ok(guard) => guard,
        Err(not_held) => {
            report.result = not_held.into();
            report.exit_code = not_held.exit_code();
            return Ok(());
        }
    };
    let held_since = Instant::now();
    if let Some(value) = &request.proclaim {
        let election = session.node().election(guard.lock_id())?;
        match election.proclaim(&guard, value.clone()).await {
            Ok(leader) => {
                note(format!("leading {} as {leader}", guard.lock_id()));
                report.proclaimed = Some(value.clone());
            }
            Err(e) => {
                note(format!("error: {e}; the command was not started"));
                report.result = RunResult::NotProclaimed;
                report.exit_code = 1;
                release(guard, note).await;
                return Ok(());
            }
        }
    }

    // Checked against the clock, not just the signal: this process may have
    // been paused between taking the lock and here.
    let outcome = if guard.is_lost() {
        Ran::LeaseLost {
            killed: false,
            status: None,
        }
    } else {
        match spawn(request, &guard, report.holding.fencing_token) {
            Err(e) => {
                note(format!("error: cannot run {:?}: {e}", request.command[0]));
                report.result = RunResult::SpawnFailed;
                report.exit_code = match e.kind() {
                    std::io::ErrorKind::NotFound => 127,
                    _ => 126,
                };
                Ran::NotStarted
            }
            Ok(child) => {
                supervise(
                    child,
                    &guard,
                    session.interrupts(),
                    request.grace,
                    report,
                    note,
                )
                .await?
            }
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
            report.holding.lease_lost = Some(lost_reason(&guard));
        }
    }
    report.holding.held_ms = ms(held_since.elapsed());
    release(guard, note).await;
    Ok(())
}

/// Starts the command in a new process group, under its supervisor when
/// there is one.
fn spawn(
    request: &Request,
    guard: &LockGuard,
    fencing_token: Option<u64>,
) -> std::io::Result<tokio::process::Child> {
    let program = &request.command[0];
    // The supervisor reports a missing program only by its exit code (127);
    // look first, so the report can say it was never started.
    if !program_exists(program) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no such program (not a file, not on PATH)",
        ));
    }
    let mut cmd = match &request.supervisor {
        Some(migrate) => {
            let mut cmd = tokio::process::Command::new(migrate);
            cmd.arg(child::SUBCOMMAND)
                .arg("--parent")
                .arg(std::process::id().to_string())
                .arg("--grace")
                .arg(humantime::format_duration(request.grace).to_string())
                .arg("--")
                .args(&request.command);
            cmd
        }
        None => {
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(&request.command[1..]);
            cmd
        }
    };
    cmd.env("LOCKSHIFT_LOCK_ID", request.take.lock.as_str())
        .env("LOCKSHIFT_LOCK_OWNER", guard.owner().as_str())
        .process_group(0);
    if let Some(token) = fencing_token {
        cmd.env("LOCKSHIFT_FENCING_TOKEN", token.to_string());
    }
    cmd.spawn()
}

/// Whether `program` names an existing file (a path) or one on `PATH`.
fn program_exists(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

enum Ran {
    NotStarted,
    Exited(ExitStatus),
    LeaseLost {
        killed: bool,
        status: Option<ExitStatus>,
    },
}

/// Waits for the child. On lease loss stops it (SIGTERM, grace, SIGKILL).
/// Forwards every signal this process receives as it is; the first starts
/// the grace period, a second (or its end) sends SIGKILL.
async fn supervise(
    mut child: tokio::process::Child,
    guard: &LockGuard,
    interrupts: &mut Interrupts,
    grace: Duration,
    report: &mut RunReport,
    note: &mut impl FnMut(String),
) -> anyhow::Result<Ran> {
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let lost = guard.lost();
    // A signal that arrived before the command started (while the lock was
    // being taken) is for the command too.
    let mut pending: Vec<Signal> = interrupts.drain();
    let mut kill_at: Option<Instant> = None;
    loop {
        for sig in pending.drain(..) {
            report.forwarded_signals.push(sig.to_string());
            if kill_at.is_none() {
                note(format!(
                    "{sig} received; forwarded to the command (SIGKILL in {} or on a second signal)",
                    humantime::format_duration(grace)
                ));
                signal(group, sig);
                kill_at = Some(Instant::now() + grace);
            } else {
                note(format!("{sig} received again; sending SIGKILL"));
                signal(group, Signal::SIGKILL);
                report.killed = true;
            }
        }
        tokio::select! {
            status = child.wait() => {
                let status = status.context("waiting for the command")?;
                // The supervisor waits for the whole group before it exits;
                // this covers a run without one (and a supervisor that died).
                if let Some(group) = group {
                    child::end_group(group, grace, &mut *note).await;
                }
                return Ok(Ran::Exited(status));
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
                if let Some(group) = group {
                    child::end_group(group, Duration::ZERO, &mut *note).await;
                }
                return Ok(Ran::LeaseLost { killed, status });
            }
            Some(sig) = interrupts.rx.recv() => pending.push(sig),
            _ = sleep_until_opt(kill_at), if !report.killed => {
                note(format!(
                    "the command outlived the {} grace period; sending SIGKILL",
                    humantime::format_duration(grace)
                ));
                signal(group, Signal::SIGKILL);
                report.killed = true;
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use lockshift::Settings;
    use lockshift_decide::algorithm::Mode;
    use lockshift_lock::{Algorithm, LockId};
    use lockshift_store::{MemoryStore, SharedStore, SystemClock, schema};

    use super::*;

    fn request(command: &[&str]) -> Request {
        Request {
            take: LockRequest {
                sharing: lockshift::Sharing::Exclusive,
                lock: LockId::new("job").unwrap(),
                mode: Some(Mode::Queue),
                timeout: Some(Duration::from_secs(10)),
                fencing_token_required: true,
            },
            grace: Duration::from_secs(1),
            command: command.iter().map(|s| s.to_string()).collect(),
            proclaim: None,
            supervisor: None,
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
            r.holding.algorithm,
            Algorithm::Combined,
            "queue is not allowed at legacy"
        );
        assert_eq!(r.holding.degraded_from, Some(Mode::Queue));
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

    /// Issue 18 item 4: a lock whose rows the database refuses to read
    /// stops the acquisition at once with that refusal and the remedy —
    /// not a wait until `--timeout` reported as "not free" — and the
    /// command does not run.
    #[tokio::test]
    async fn an_unreadable_lock_is_named_not_waited_for() {
        let clock: lockshift_store::SharedClock = Arc::new(SystemClock);
        let store: SharedStore = Arc::new(crate::ops::jammed::store(clock.clone()));
        for table in [schema::MAIN, schema::SHADOW, schema::QUEUE] {
            crate::ops::jammed::jam(store.as_ref(), clock.as_ref(), table, "job").await;
        }
        let env = Env::new(Settings::default(), store, clock);
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let touch = format!("touch '{}'", marker.display());
        let mut notes = Vec::new();
        let err = run_with_lock(&env, request(&["sh", "-c", &touch]), |n| notes.push(n))
            .await
            .unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.starts_with("the database refuses to read lock job: read on table "),
            "{text}"
        );
        assert!(text.contains("too many tombstones"), "{text}");
        assert!(text.contains("migrate schema --apply"), "{text}");
        assert!(notes.iter().all(|n| !n.contains("not free")), "{notes:?}");
        assert!(!marker.exists(), "the command did not run");
    }

    /// Issue 19 item 5: without a fencing token (the fencing cell out of
    /// reach for a whole lease TTL of retries) the command does not start,
    /// unless `--fencing-token optional`.
    #[tokio::test]
    async fn no_fencing_token_no_command_unless_optional() {
        use lockshift_store::{FaultPlan, FaultScope, FaultyStore};
        let faulty = Arc::new(FaultyStore::new(MemoryStore::new(), 1));
        faulty.set_plan(FaultPlan {
            scope: FaultScope {
                tables: Some(vec![schema::GLOBAL_TIME]),
                ops: None,
            },
            ..FaultPlan::default()
        });
        faulty.set_partitioned(true);
        let store: SharedStore = faulty.clone();
        let mut settings = Settings::default();
        settings.lock.lease_ttl = Duration::from_secs(3);
        settings.lock.renew_every = Duration::from_secs(1);
        let env = Env::new(settings, store, Arc::new(SystemClock));
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let touch = format!("touch '{}'", marker.display());
        let mut notes = Vec::new();
        let r = run_with_lock(&env, request(&["sh", "-c", &touch]), |n| notes.push(n))
            .await
            .unwrap();
        assert_eq!(r.result, RunResult::NoFencingToken, "{notes:?}");
        assert_eq!(r.outcome(), Outcome::Child(1));
        assert!(!marker.exists(), "the command did not run");
        assert!(
            notes
                .iter()
                .any(|n| n.contains("the command was not started")),
            "{notes:?}"
        );
        let mut optional = request(&["sh", "-c", &touch]);
        optional.take.fencing_token_required = false;
        let r = run_with_lock(&env, optional, |_| {}).await.unwrap();
        assert_eq!(
            (r.result, r.holding.fencing_token),
            (RunResult::Completed, None)
        );
        assert!(marker.exists(), "optional: the command ran without a token");
    }
}
