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
//! 1. It leads a new process group (`migrate` spawns it with
//!    `process_group(0)`), and its command joins that group, so one
//!    `killpg` reaches everything the command started.
//! 2. It catches the signals `migrate` forwards (tokio's safe handlers)
//!    and asks for `SIGTERM` when its parent dies; then it checks that the
//!    parent is still the one it was started by (if `migrate` died in
//!    between, it exits at once). Catching — rather than blocking or
//!    ignoring, which `exec` would pass on — leaves the command with the
//!    default dispositions: handlers are reset by `exec`.
//! 3. It runs the command and waits for it.
//! 4. A signal while the parent lives was forwarded to the whole group by
//!    `migrate`: the command got it too, so the supervisor ignores it. A
//!    signal after the parent is gone (`getppid` changed) is the death
//!    signal: it kills the group with `SIGKILL` — the lock is no longer
//!    guarded, so the command must stop touching what it protects *now*,
//!    not after a grace period.
//! 5. When the command ends, the supervisor ends the same way: same exit
//!    code; killed by a signal, `128 + n` (the shell's convention — dying by
//!    a signal it catches itself would need `unsafe` to restore the default
//!    handler), or by the signal itself when it is not one it catches.
//!
//! Doubt: the death signal fires when the *thread* that spawned the
//! supervisor exits, not the process. `migrate` spawns it from the thread
//! running `main`'s `block_on`, which lives as long as the process.

use std::process::ExitStatus;

use nix::sys::signal::{SigSet, Signal, killpg, raise};
use nix::unistd::{Pid, getpgrp, getppid};
use tokio::signal::unix::{SignalKind, signal};

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
pub fn supervise(parent: i32, command: &[String]) -> u8 {
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
    runtime.block_on(run(parent, command))
}

async fn run(parent: i32, command: &[String]) -> u8 {
    let parent = Pid::from_raw(parent);
    // A blocked signal mask survives fork and exec: whatever launched
    // `migrate` with signals blocked (some launchers and test harnesses
    // do) would pass them on to the command, which then ignores SIGTERM.
    // The command starts from a clean mask (this thread spawns it).
    if let Err(e) = SigSet::all().thread_unblock() {
        eprintln!("migrate: cannot clear the signal mask for the command: {e}");
        return 126;
    }
    // Handlers first: from here on neither a forwarded signal nor the death
    // signal can end this process before it has acted on it.
    let mut streams = Vec::new();
    for s in FORWARDED {
        match signal(SignalKind::from_raw(s as i32)) {
            Ok(stream) => streams.push(stream),
            Err(e) => {
                eprintln!("migrate: cannot catch {s} in the command's supervisor: {e}");
                return 126;
            }
        }
    }
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGTERM) {
        eprintln!("migrate: cannot ask for a parent-death signal: {e}");
        return 126;
    }
    // Asked for only now: had `migrate` died before, no signal would come.
    if getppid() != parent {
        eprintln!("migrate: run-with-lock ended before its command could start");
        return 126;
    }
    let Some((program, args)) = command.split_first() else {
        eprintln!("migrate: no command to run");
        return 126;
    };
    let mut child = match tokio::process::Command::new(program).args(args).spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("migrate: cannot run {program:?}: {e}");
            return if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
        }
    };
    let group = getpgrp();
    let [int, term, hup, quit] = &mut streams[..] else {
        return 126;
    };
    loop {
        tokio::select! {
            status = child.wait() => {
                return match status {
                    Ok(status) => end_like(status),
                    Err(e) => {
                        eprintln!("migrate: waiting for the command failed: {e}");
                        let _ = killpg(group, Signal::SIGKILL);
                        126
                    }
                };
            }
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {}
            _ = quit.recv() => {}
        }
        if getppid() != parent {
            // The parent-death signal: `migrate` is gone, nobody guards the
            // lock any more. This kills the supervisor too.
            let _ = killpg(group, Signal::SIGKILL);
            return 137;
        }
        // Otherwise forwarded by `migrate` to the whole group: the command
        // has it already.
    }
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
