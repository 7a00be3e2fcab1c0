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
//! before the cell can expire (lock invariant K3). Then the command must
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
use lockshift::Node;
use lockshift_combined::{Mode, Stage};
use lockshift_lock::{
    AcquireError, AcquireOptions, Algorithm, LockGuard, LockId, MAX_NODE_ID_LEN, NodeId,
    WaitingFor, cut_short, fmt_duration_rounded,
};
use lockshift_queue_lock::queue::parse_queue_cell;
use lockshift_store::{RowQuery, schema};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Env, child, ms};
use crate::{JSON_VERSION, Outcome};

/// What to run under which lock.
#[derive(Debug, Clone)]
pub struct Request {
    /// The lock.
    pub lock: LockId,
    /// Configured mode (resolved against the stage); `None`: `node.mode`
    /// from the settings (file, `LOCKSHIFT__NODE__MODE`), as every node.
    pub mode: Option<Mode>,
    /// Give up waiting for the lock after this long.
    pub timeout: Option<Duration>,
    /// SIGTERM (or a forwarded signal) → SIGKILL grace period.
    pub grace: Duration,
    /// Whether the command may start only with a fencing token.
    pub fencing_token_required: bool,
    /// Program and arguments.
    pub command: Vec<String>,
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
}

/// The report of `migrate run-with-lock` (JSON schema, `"version": 1`;
/// written after the command ends, with `--json` on stderr — stdout is the
/// command's — and with `--report FILE` to that file).
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
    /// Signals received and forwarded to the command's group, in order.
    pub forwarded_signals: Vec<String>,
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
/// (degraded mode, whom it waits for, lease lost, signals sent).
///
/// # Errors
/// Node start, acquisition (other than timeout) or wait failures.
pub async fn run_with_lock(
    env: &Env,
    request: Request,
    mut note: impl FnMut(String),
) -> anyhow::Result<RunReport> {
    let mut interrupts = Interrupts::listen();
    let mut settings = env.settings.clone();
    // Flag > LOCKSHIFT__NODE__… > file > default, as for every node; only
    // the id's default differs: `migrate-<host>-<pid>` says what it is.
    let node_id = match &settings.node.id {
        Some(id) => id.clone(),
        None => node_id(),
    };
    settings.node.id = Some(node_id.clone());
    if let Some(mode) = request.mode {
        settings.node.mode = mode;
    }
    let mode = settings.node.mode;
    let node = Node::builder()
        .settings(settings)
        .store(env.store.clone())
        .clock(env.clock.clone())
        .start()
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
        mode,
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
        forwarded_signals: Vec::new(),
        killed: false,
        exit_code: 0,
    };
    if let Some(line) = waiting_line(env, &request.lock).await {
        note(line);
    }
    let result = hold_and_run(&node, &request, &mut interrupts, &mut report, &mut note).await;
    node.shutdown().await;
    result.map(|()| report)
}

/// "waiting for L (held by O since T)", when someone holds the lock now.
/// Best effort: a failed read just means no line.
async fn waiting_line(env: &Env, lock: &LockId) -> Option<String> {
    let store = env.store.as_ref();
    let main = store
        .read(schema::MAIN, lock.as_str(), &RowQuery::all())
        .await
        .ok()?;
    let holder = main.first()?;
    let now = env.clock.now();
    // A queue-based holder's queue cell names when it arrived; otherwise
    // only the last renewal of its main cell is known.
    let queued_at = store
        .read(schema::QUEUE, lock.as_str(), &RowQuery::all())
        .await
        .ok()
        .and_then(|cells| {
            cells.iter().find_map(|c| {
                let entry = parse_queue_cell(&c.column, &c.value)?;
                (entry.owner.as_str() == holder.column).then_some(entry.arrival)
            })
        })
        .and_then(|at| i64::try_from(at).ok());
    let since = match queued_at {
        Some(at) => format!(
            "since {} ago",
            humantime::format_duration(Duration::from_secs(
                now.duration_since(lockshift_store::Timestamp::from_micros(at))
                    .as_secs()
            ))
        ),
        None => format!(
            "since at least {} ago, its last renewal",
            humantime::format_duration(Duration::from_secs(
                now.duration_since(holder.writetime).as_secs()
            ))
        ),
    };
    let others = main.len() - 1;
    Some(format!(
        "waiting for {lock} (held by {} {since}{})",
        holder.column,
        if others > 0 {
            format!("; {others} more cell(s) in main")
        } else {
            String::new()
        }
    ))
}

/// At most one "waiting for" line per this long.
pub const WAIT_LINE_GAP: Duration = Duration::from_secs(5);

/// The "waiting for" lines of a waiting `run-with-lock`, rate-limited
/// (pure: the caller feeds it what the waiter reported and the time).
#[derive(Debug)]
pub struct WaitLines {
    lock: String,
    /// When the last line was printed (the first line, at start, counts).
    printed_at: Instant,
    /// What the last line printed said.
    printed: Option<WaitingFor>,
    /// A change not printed yet (too soon after the last line).
    pending: Option<WaitingFor>,
}

impl WaitLines {
    /// For `lock`, the first line printed at `start`.
    pub fn new(lock: &LockId, start: Instant) -> WaitLines {
        WaitLines {
            lock: lock.to_string(),
            printed_at: start,
            printed: None,
            pending: None,
        }
    }

    /// The waiter now waits for `state`: the line to print now, if any.
    pub fn seen(&mut self, state: WaitingFor, now: Instant) -> Option<String> {
        if self.printed.as_ref() == Some(&state) || describe_wait(&self.lock, &state).is_none() {
            self.pending = None;
            return None;
        }
        self.pending = Some(state);
        self.flush(now)
    }

    /// When a pending line may be printed.
    pub fn due(&self) -> Option<Instant> {
        self.pending
            .as_ref()
            .map(|_| self.printed_at + WAIT_LINE_GAP)
    }

    /// The pending line, if it may be printed at `now`.
    pub fn flush(&mut self, now: Instant) -> Option<String> {
        if now < self.due()? {
            return None;
        }
        let state = self.pending.take()?;
        let line = describe_wait(&self.lock, &state);
        self.printed = Some(state);
        self.printed_at = now;
        line
    }
}

/// "waiting for L: held by O; 2 waiting ahead, first W" — `None` when the
/// waiter knows of nobody in its way.
fn describe_wait(lock: &str, state: &WaitingFor) -> Option<String> {
    let holder = state
        .holder
        .as_deref()
        .map(|h| format!("held by {}", cut_short(h)));
    let ahead = state
        .ahead
        .as_ref()
        .map(|(n, first)| format!("{n} waiting ahead in line, first {}", cut_short(first)));
    let said = match (holder, ahead) {
        (None, None) => return None,
        (Some(h), None) => h,
        (None, Some(a)) => a,
        (Some(h), Some(a)) => format!("{h}; {a}"),
    };
    Some(format!("waiting for {}: {said}", cut_short(lock)))
}

async fn hold_and_run(
    node: &Node,
    request: &Request,
    interrupts: &mut Interrupts,
    report: &mut RunReport,
    note: &mut impl FnMut(String),
) -> anyhow::Result<()> {
    let started = Instant::now();
    let (watch, mut seen) = tokio::sync::watch::channel(WaitingFor::default());
    let options = AcquireOptions {
        timeout: request.timeout,
        cancel: Some(interrupts.token.clone()),
        watch: Some(std::sync::Arc::new(watch)),
    };
    // While it waits: a line whenever whom it waits for changes, as the
    // waiter's own reads show it (no read is made for it), at most one
    // line per WAIT_LINE_GAP.
    let locker = node.locker();
    let acquire = locker.acquire_with(&request.lock, options);
    tokio::pin!(acquire);
    let mut lines = WaitLines::new(&request.lock, started);
    let acquired = loop {
        tokio::select! {
            result = &mut acquire => break result,
            Ok(()) = seen.changed() => {
                let state = seen.borrow_and_update().clone();
                if let Some(line) = lines.seen(state, Instant::now()) {
                    note(line);
                }
            }
            _ = sleep_until_opt(lines.due()) => {
                if let Some(line) = lines.flush(Instant::now()) {
                    note(line);
                }
            }
        }
    };
    let guard = match acquired {
        Ok(g) => g,
        Err(AcquireError::Timeout { waited, .. }) => {
            note(format!(
                "lock {} was not free within {} (exit 3)",
                request.lock,
                fmt_duration_rounded(waited)
            ));
            report.waited_ms = ms(waited);
            report.result = RunResult::Timeout;
            report.exit_code = 3;
            return Ok(());
        }
        Err(AcquireError::Cancelled { .. }) => {
            report.waited_ms = ms(started.elapsed());
            report.result = RunResult::Interrupted;
            let signal = interrupts
                .drain()
                .first()
                .copied()
                .unwrap_or(Signal::SIGINT);
            report.exit_code = 128 + signal as i32;
            return Ok(());
        }
        // The database refuses to read the lock's rows: waiting cannot
        // help, and "not free" would be wrong.
        Err(AcquireError::Store { error, .. })
            if error.kind() == lockshift_store::StoreErrorKind::TooManyTombstones =>
        {
            return Err(super::refused_read(&request.lock, &error));
        }
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("taking lock {}", request.lock)));
        }
    };
    report.waited_ms = ms(started.elapsed());
    report.algorithm = guard.algorithm();
    report.owner = Some(guard.owner().to_string());
    // Two round trips (retried within the lease by the guard): the child
    // gets a token it can hand to the resource.
    report.fencing_token = match guard.fencing_token().await {
        Ok(token) => Some(token),
        Err(e) if request.fencing_token_required => {
            note(format!(
                "error: {e}; the command was not started (--fencing-token optional starts it \
                 without one)"
            ));
            report.result = RunResult::NoFencingToken;
            report.exit_code = 1;
            report.lease_lost = guard.lost_reason().map(|r| r.to_string());
            if let Err(e) = guard.release().await {
                note(format!("warning: {e}"));
            }
            return Ok(());
        }
        Err(e) => {
            note(format!("warning: running without a fencing token: {e}"));
            None
        }
    };
    let held_since = Instant::now();

    // Checked against the clock, not just the signal: this process may have
    // been paused between taking the lock and here.
    let outcome = if guard.is_lost() {
        Ran::LeaseLost {
            killed: false,
            status: None,
        }
    } else {
        match spawn(request, &guard, report.fencing_token) {
            Err(e) => {
                note(format!("error: cannot run {:?}: {e}", request.command[0]));
                report.result = RunResult::SpawnFailed;
                report.exit_code = match e.kind() {
                    std::io::ErrorKind::NotFound => 127,
                    _ => 126,
                };
                Ran::NotStarted
            }
            Ok(child) => supervise(child, &guard, interrupts, request.grace, report, note).await?,
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
    cmd.env("LOCKSHIFT_LOCK_ID", request.lock.as_str())
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

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
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

/// `migrate-<host>-<pid>`, within the node id rules (the host name from
/// the operating system, as [`NodeId::for_this_process`] has it).
fn node_id() -> String {
    let pid = std::process::id().to_string();
    let host: String = lockshift_lock::host_name()
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
    let id = format!("migrate-{host}-{pid}");
    // Checked by the node's settings validation too; this only keeps the
    // fallback obviously valid.
    match NodeId::new(id.clone()) {
        Ok(_) => id,
        Err(_) => format!("migrate-{pid}"),
    }
}

/// Signals this process receives while it runs the command: the first
/// cancels a pending acquisition; each is queued for forwarding.
/// (Registering replaces their default action — dying — for the rest of
/// the process: `migrate` then stops the command and releases the lock.)
struct Interrupts {
    token: CancellationToken,
    rx: mpsc::UnboundedReceiver<Signal>,
}

impl Interrupts {
    fn listen() -> Interrupts {
        use tokio::signal::unix::{SignalKind, signal};
        let token = CancellationToken::new();
        let (tx, rx) = mpsc::unbounded_channel();
        for sig in child::FORWARDED {
            let Ok(mut stream) = signal(SignalKind::from_raw(sig as i32)) else {
                continue;
            };
            let (tx, token) = (tx.clone(), token.clone());
            tokio::spawn(async move {
                while stream.recv().await.is_some() {
                    token.cancel();
                    if tx.send(sig).is_err() {
                        return;
                    }
                }
            });
        }
        Interrupts { token, rx }
    }

    /// Signals received and not yet handled, oldest first.
    fn drain(&mut self) -> Vec<Signal> {
        let mut out = Vec::new();
        while let Ok(sig) = self.rx.try_recv() {
            out.push(sig);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use lockshift::Settings;
    use lockshift_store::{MemoryStore, SharedStore, SystemClock};

    use super::*;

    fn request(command: &[&str]) -> Request {
        Request {
            lock: LockId::new("job").unwrap(),
            mode: Some(Mode::Queue),
            timeout: Some(Duration::from_secs(10)),
            grace: Duration::from_secs(1),
            fencing_token_required: true,
            command: command.iter().map(|s| s.to_string()).collect(),
            supervisor: None,
        }
    }

    /// The "waiting for" lines: printed when whom the waiter waits for
    /// changes, at most one per `WAIT_LINE_GAP`, the latest change at the
    /// end of the gap; nothing for a waiter that knows of nobody.
    #[test]
    fn waiting_lines_follow_changes_at_most_one_per_gap() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let held = |h: &str| WaitingFor {
            holder: Some(h.into()),
            ahead: None,
        };
        let behind = |n: u32, first: &str| WaitingFor {
            holder: None,
            ahead: Some((n, first.into())),
        };
        let mut lines = WaitLines::new(&LockId::new("job").unwrap(), start);
        // (seen at second, state) → printed now?
        let steps: Vec<(u64, WaitingFor, Option<&str>)> = vec![
            (1, behind(2, "a/1"), None),
            (2, behind(1, "a/1"), None),
            (
                6,
                behind(1, "a/1"),
                Some("waiting for job: 1 waiting ahead in line, first a/1"),
            ),
            (7, held("b/2"), None),
            (8, WaitingFor::default(), None),
            (20, held("b/2"), Some("waiting for job: held by b/2")),
            (21, held("b/2"), None),
            (30, held("c/3"), Some("waiting for job: held by c/3")),
        ];
        for (i, (second, state, want)) in steps.into_iter().enumerate() {
            assert_eq!(lines.seen(state, at(second)).as_deref(), want, "step #{i}");
        }
        // A change too soon waits for the end of the gap, and only the
        // latest is printed.
        assert_eq!(lines.seen(held("d/4"), at(31)), None);
        assert_eq!(lines.seen(held("e/5"), at(32)), None);
        assert_eq!(lines.due(), Some(at(35)));
        assert_eq!(lines.flush(at(34)), None);
        assert_eq!(
            lines.flush(at(35)).as_deref(),
            Some("waiting for job: held by e/5")
        );
        assert_eq!(lines.due(), None);
        // Long names are cut short.
        let long = "x".repeat(10_000);
        let line = describe_wait("job", &held(&long)).unwrap();
        assert!(line.len() < 400, "{}", line.len());
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
        let optional = Request {
            fencing_token_required: false,
            ..request(&["sh", "-c", &touch])
        };
        let r = run_with_lock(&env, optional, |_| {}).await.unwrap();
        assert_eq!((r.result, r.fencing_token), (RunResult::Completed, None));
        assert!(marker.exists(), "optional: the command ran without a token");
    }
}
