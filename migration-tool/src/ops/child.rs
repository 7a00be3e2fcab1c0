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
//! 2. It blocks the signals `migrate` forwards and asks for `SIGTERM` when
//!    its parent dies; then it checks that the parent is still the one it
//!    was started by (if `migrate` died in between, it exits at once).
//! 3. It runs the command (which starts with an empty signal mask — std
//!    resets it) and waits for it.
//! 4. A thread waits for the blocked signals. A signal while the parent
//!    lives was forwarded to the whole group by `migrate`: the command got
//!    it too, so the supervisor ignores it. A signal after the parent is
//!    gone (`getppid` changed) is the death signal: it kills the group with
//!    `SIGKILL` — the lock is no longer guarded, so the command must stop
//!    touching what it protects *now*, not after a grace period.
//! 5. When the command ends, the supervisor ends the same way: same exit
//!    code, or the same signal (re-raised; `128 + n` if it is ignored).
//!
//! Doubt: the death signal fires when the *thread* that spawned the
//! supervisor exits, not the process. `migrate` spawns it from the thread
//! running `main`'s `block_on`, which lives as long as the process.

use std::process::ExitStatus;

use nix::sys::signal::{SigSet, Signal, killpg, raise};
use nix::unistd::{Pid, getpgrp, getppid};

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
/// it, `command` the program and its arguments. Returns the exit code when
/// the command exited normally (its own code; 126/127 when it could not be
/// started); when it was killed by a signal, dies by the same signal.
///
/// Must run before any other thread exists (the signal mask is inherited
/// by threads created later, not by those already running).
pub fn supervise(parent: i32, command: &[String]) -> u8 {
    let mut blocked = SigSet::empty();
    for s in FORWARDED {
        blocked.add(s);
    }
    if let Err(e) = blocked.thread_block() {
        eprintln!("migrate: cannot block signals in the command's supervisor: {e}");
        return 126;
    }
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGTERM) {
        eprintln!("migrate: cannot ask for a parent-death signal: {e}");
        return 126;
    }
    // Asked for only now: had `migrate` died before, no signal would come.
    if getppid() != Pid::from_raw(parent) {
        eprintln!("migrate: run-with-lock ended before its command could start");
        return 126;
    }
    let Some((program, args)) = command.split_first() else {
        eprintln!("migrate: no command to run");
        return 126;
    };
    let mut child = match std::process::Command::new(program).args(args).spawn() {
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
    std::thread::spawn(move || {
        loop {
            let Ok(_signal) = blocked.wait() else { return };
            if getppid() != Pid::from_raw(parent) {
                // The parent-death signal: `migrate` is gone, nobody guards
                // the lock any more. This kills the supervisor too.
                let _ = killpg(group, Signal::SIGKILL);
                return;
            }
            // Forwarded by `migrate` to the whole group: the command has
            // it already.
        }
    });
    match child.wait() {
        Ok(status) => end_like(status),
        Err(e) => {
            eprintln!("migrate: waiting for the command failed: {e}");
            let _ = killpg(group, Signal::SIGKILL);
            126
        }
    }
}

/// The exit code for `status`, after trying to die by its signal instead.
fn end_like(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return u8::try_from(code.clamp(0, 255)).unwrap_or(1);
    }
    let Some(n) = status.signal() else { return 1 };
    if let Ok(signal) = Signal::try_from(n) {
        let mut only = SigSet::empty();
        only.add(signal);
        // Blocked signals are pending, not lost: unblock, then raise. With
        // its default action it ends this process; an ignored one (SIGPIPE,
        // which Rust ignores) falls through to the shell's convention.
        let _ = only.thread_unblock();
        let _ = raise(signal);
    }
    u8::try_from(128 + n).unwrap_or(1)
}
