//! The supervisor between `migrate run-with-lock` and its command: the
//! piece that makes the command die with `migrate`, even by `kill -9`.
//!
//! # Why a separate process
//!
//! Linux's parent-death signal (`PR_SET_PDEATHSIG`) is the only way a
//! process learns that its parent was killed outright. It must be set by
//! the child itself, after `fork` and before `exec` — in `pre_exec`, an
//! `unsafe` hook, and this workspace forbids `unsafe` (`unsafe_code =
//! "forbid"` cannot be lifted by a local `allow`). And it only reaches that
//! one child: a shell's own children would outlive it. So `migrate` runs
//! itself again as this small supervisor (`migrate run-with-lock-child`,
//! hidden), which uses nix's safe wrappers only:
//!
//! 1. It leads a new process group G (`migrate` spawns it with
//!    `process_group(0)`), and its command joins G, so one `killpg`
//!    reaches everything the command started.
//! 2. It catches the signals `migrate` forwards (tokio's safe handlers)
//!    and asks for `SIGTERM` when its parent dies; then it checks that the
//!    parent is still the one it was started by (if `migrate` died in
//!    between, it exits at once). Catching — rather than blocking or
//!    ignoring, which `exec` would pass on — leaves the command with the
//!    default dispositions: handlers are reset by `exec`.
//! 3. It runs the command, then leaves G for `migrate`'s own group: from
//!    then on G holds exactly the command and what it started, and
//!    `killpg(G, 0)` answers "is any of it still running?" — what the
//!    supervisor must know to wait for the whole group (step 6).
//! 4. A signal while the parent lives came from `migrate` (forwarded to G)
//!    or from the terminal to `migrate`'s group: either way `migrate` deals
//!    with it, so the supervisor ignores it. A signal after the parent is
//!    gone (`getppid` changed) is the death signal: it kills G with
//!    `SIGKILL` — the lock is no longer guarded, so the command must stop
//!    touching what it protects *now*, not after a grace period.
//! 5. When the command ends, the supervisor ends the same way: same exit
//!    code; killed by a signal, `128 + n` (the shell's convention — dying by
//!    a signal it catches itself would need `unsafe` to restore the default
//!    handler), or by the signal itself when it is not one it catches.
//! 6. But first the rest of G: a command that exits leaving a background
//!    process (`sh -c 'job &'`) has not stopped touching the resource, so
//!    the lock must outlive that process too. The supervisor sends G
//!    `SIGTERM`, waits up to `--grace` for it to empty, then sends
//!    `SIGKILL` ([`end_group`]); only then does it exit, and only then does
//!    `migrate` release. Staying alive meanwhile keeps step 4's guarantee:
//!    should `migrate` die now, the death signal still kills G.
//!
//! A process that leaves G itself (`setsid`, a daemon that double-forks
//! into a new session) is out of reach: no process group tells about it.
//!
//! Doubt: the death signal fires when the *thread* that spawned the
//! supervisor exits, not the process. `migrate` spawns it from the thread
//! running `main`'s `block_on`, which lives as long as the process.

use std::process::ExitStatus;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{SigSet, Signal, killpg, raise};
use nix::unistd::{Pid, getpgid, getpgrp, getppid, setpgid};
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::Instant;

/// The hidden subcommand that runs the supervisor.
pub const SUBCOMMAND: &str = "run-with-lock-child";

/// The signals `migrate run-with-lock` forwards to the command's group.
pub const FORWARDED: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// Runs the supervisor: `parent` is the pid of the `migrate` that started
/// it, `command` the program and its arguments. Returns the exit code (the
/// command's own; 126/127 when it could not be started; see the module
/// docs for a command killed by a signal).
pub fn supervise(parent: i32, grace: Duration, command: &[String]) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("migrate: cannot start the command's supervisor: {e}");
            return 126;
        }
    };
    runtime.block_on(run(parent, grace, command))
}

async fn run(parent: i32, grace: Duration, command: &[String]) -> u8 {
    let parent = Pid::from_raw(parent);
    let mut streams = match prepare(parent) {
        Ok(streams) => streams,
        Err(code) => return code,
    };
    let mut child = match spawn(command) {
        Ok(child) => child,
        Err(code) => return code,
    };
    let group = getpgrp();
    // Step 3: leave G, so that G is the command's alone. Should this fail
    // (it should not: same session), G still holds the supervisor, and
    // waiting for G to empty would wait for ever: then only the command is
    // waited for, as before.
    let watch_group = match getpgid(Some(parent)).and_then(|p| setpgid(Pid::from_raw(0), p)) {
        Ok(()) => true,
        Err(e) => {
            eprintln!(
                "migrate: cannot leave the command's process group ({e}); processes the \
                 command leaves behind are not waited for"
            );
            false
        }
    };
    let [int, term, hup, quit] = &mut streams[..] else {
        return 126;
    };
    let mut status = None;
    let mut ending: Option<GroupEnd> = None;
    loop {
        if status.is_some() && (!watch_group || !group_alive(group)) {
            break;
        }
        let tick = tokio::time::sleep(GROUP_POLL);
        tokio::select! {
            done = child.wait(), if status.is_none() => match done {
                Ok(s) => {
                    status = Some(s);
                    if watch_group && group_alive(group) {
                        eprintln!(
                            "migrate: the command exited, but processes it started still run in \
                             its process group; sending them SIGTERM (SIGKILL in {}); the lock \
                             is held until they are gone",
                            humantime::format_duration(grace)
                        );
                        ending = Some(GroupEnd::start(group, grace));
                    }
                }
                Err(e) => {
                    eprintln!("migrate: waiting for the command failed: {e}");
                    let _ = killpg(group, Signal::SIGKILL);
                    return 126;
                }
            },
            _ = tick, if status.is_some() => {
                if let Some(end) = &mut ending
                    && let Some(note) = end.step()
                {
                    eprintln!("migrate: {note}");
                    if end.given_up() {
                        break;
                    }
                }
                continue;
            }
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {}
            _ = quit.recv() => {}
        }
        if getppid() != parent {
            // The parent-death signal: `migrate` is gone, nobody guards the
            // lock any more. This kills the supervisor too (when it could
            // not leave the group).
            let _ = killpg(group, Signal::SIGKILL);
            return 137;
        }
        // Otherwise forwarded by `migrate` to the group, or sent to
        // `migrate`'s own group: `migrate` deals with it.
    }
    match status {
        Some(status) => end_like(status),
        None => 126,
    }
}

/// Readies the supervisor before the command starts: a clean signal mask
/// for the command, handlers for the forwarded signals, the parent-death
/// signal — and `migrate` (`parent`) still there. Else the exit code.
fn prepare(parent: Pid) -> Result<Vec<tokio::signal::unix::Signal>, u8> {
    // A blocked signal mask survives fork and exec: whatever launched
    // `migrate` with signals blocked (some launchers and test harnesses
    // do) would pass them on to the command, which then ignores SIGTERM.
    // The command starts from a clean mask (this thread spawns it).
    if let Err(e) = SigSet::all().thread_unblock() {
        eprintln!("migrate: cannot clear the signal mask for the command: {e}");
        return Err(126);
    }
    // Handlers first: from here on neither a forwarded signal nor the death
    // signal can end this process before it has acted on it.
    let mut streams = Vec::new();
    for s in FORWARDED {
        match signal(SignalKind::from_raw(s as i32)) {
            Ok(stream) => streams.push(stream),
            Err(e) => {
                eprintln!("migrate: cannot catch {s} in the command's supervisor: {e}");
                return Err(126);
            }
        }
    }
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGTERM) {
        eprintln!("migrate: cannot ask for a parent-death signal: {e}");
        return Err(126);
    }
    // Asked for only now: had `migrate` died before, no signal would come.
    if getppid() != parent {
        eprintln!("migrate: run-with-lock ended before its command could start");
        return Err(126);
    }
    Ok(streams)
}

/// Starts `command` (program and arguments); else the exit code: 127 for
/// a program not found, 126 otherwise.
fn spawn(command: &[String]) -> Result<tokio::process::Child, u8> {
    let Some((program, args)) = command.split_first() else {
        eprintln!("migrate: no command to run");
        return Err(126);
    };
    match tokio::process::Command::new(program).args(args).spawn() {
        Ok(child) => Ok(child),
        Err(e) => {
            eprintln!("migrate: cannot run {program:?}: {e}");
            Err(if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            })
        }
    }
}

/// How often the group is looked at while it is being ended.
const GROUP_POLL: Duration = Duration::from_millis(20);

/// How long to wait for the group to vanish after `SIGKILL`: processes
/// killed are gone at once, but a member that already exited stays in the
/// group as a zombie until its parent reaps it — normally at once (an
/// orphan's new parent is init), never if that parent does not reap.
const AFTER_KILL: Duration = Duration::from_secs(5);

/// Whether any process (a zombie included) is still in group `g`.
///
/// `EPERM` — members this process may not signal — counts as "none left
/// to wait for": they cannot be ended from here either.
pub fn group_alive(g: Pid) -> bool {
    match killpg(g, None) {
        Ok(()) => true,
        Err(Errno::ESRCH | Errno::EPERM) => false,
        Err(_) => false,
    }
}

/// Ending a process group: `SIGTERM`, up to `grace` for it to empty, then
/// `SIGKILL`, then up to 5 s more. Driven by [`step`](Self::step)
/// from a polling loop (the caller decides how to wait).
#[derive(Debug)]
pub struct GroupEnd {
    group: Pid,
    kill_at: Instant,
    killed_at: Option<Instant>,
    given_up: bool,
}

impl GroupEnd {
    /// Sends the group `SIGTERM` now.
    pub fn start(group: Pid, grace: Duration) -> GroupEnd {
        let _ = killpg(group, Signal::SIGTERM);
        GroupEnd {
            group,
            kill_at: Instant::now() + grace,
            killed_at: None,
            given_up: false,
        }
    }

    /// Moves on when a deadline passed: `SIGKILL` after the grace period,
    /// giving up 5 s later. Returns what it did, to be said.
    pub fn step(&mut self) -> Option<String> {
        let now = Instant::now();
        match self.killed_at {
            None if now >= self.kill_at => {
                let _ = killpg(self.group, Signal::SIGKILL);
                self.killed_at = Some(now);
                Some(
                    "processes of the command's group outlived the grace period; sent SIGKILL"
                        .into(),
                )
            }
            Some(at) if !self.given_up && now >= at + AFTER_KILL => {
                self.given_up = true;
                Some(format!(
                    "the command's process group still has members {} after SIGKILL \
                     (zombies whose parent does not reap them?); going on",
                    humantime::format_duration(AFTER_KILL)
                ))
            }
            _ => None,
        }
    }

    /// Whether SIGKILL was sent.
    pub fn killed(&self) -> bool {
        self.killed_at.is_some()
    }

    /// Whether waiting was given up (members left after SIGKILL).
    pub fn given_up(&self) -> bool {
        self.given_up
    }
}

/// Ends group `group` if anything is left in it (see [`GroupEnd`]),
/// waiting until it is empty. Returns whether anything was left.
pub async fn end_group(group: Pid, grace: Duration, mut note: impl FnMut(String)) -> bool {
    if !group_alive(group) {
        return false;
    }
    note(format!(
        "processes the command started still run in its process group; sending them SIGTERM \
         (SIGKILL in {}); the lock is held until they are gone",
        humantime::format_duration(grace)
    ));
    let mut end = GroupEnd::start(group, grace);
    while group_alive(group) {
        tokio::time::sleep(GROUP_POLL).await;
        if let Some(said) = end.step() {
            note(said);
            if end.given_up() {
                break;
            }
        }
    }
    true
}

/// The exit code for `status`, after dying by its signal where possible.
fn end_like(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return u8::try_from(code.clamp(0, 255)).unwrap_or(1);
    }
    let Some(n) = status.signal() else { return 1 };
    if let Ok(signal) = Signal::try_from(n)
        && !FORWARDED.contains(&signal)
    {
        // Not caught here: its default action ends this process the same
        // way (SIGPIPE, which Rust ignores, falls through).
        let _ = raise(signal);
    }
    u8::try_from(128 + n).unwrap_or(1)
}
