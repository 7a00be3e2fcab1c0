//! `migrate`: parse, run, map the outcome to an exit code — the one place
//! exit codes are decided (invariant 4 of `lib.rs`).
//!
//! | code | meaning |
//! |---|---|
//! | 0 | ok (`run-with-lock`: the command's own code passes through; `lock`: released after a signal) |
//! | 1 | error (database unreachable, schema missing, store failure, demo invariant broken) |
//! | 2 | usage (bad flag or value, invalid settings, unknown or skipped stage) |
//! | 3 | not safe yet / refused (guards; `run-with-lock` or `lock`: `--timeout` expired) |
//! | 4 | lease lost (`run-with-lock`, `lock`) |
//! | 5 | unsafe state (`status`: legacy and queue in use at once) |
//! | 126, 127 | `run-with-lock`: the command could not be run / was not found |
//! | 128 + n | `run-with-lock`, `lock`: signal n came while waiting for the lock |
//!
//! A closed stdout (`migrate status --json | head -1`) ends the command
//! quietly with 0: the reader has what it wanted.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::Parser as _;
use lockshift_migration_tool::cli::{Cli, Command};
use lockshift_migration_tool::ops;
use lockshift_migration_tool::{
    JSON_VERSION, Outcome, cut_long_words, error_text, is_broken_pipe, is_usage_error, run,
};
use tracing_subscriber::EnvFilter;

const OK: u8 = 0;
const ERROR: u8 = 1;
const USAGE: u8 = 2;
const NOT_SAFE: u8 = 3;
const LEASE_LOST: u8 = 4;
const UNSAFE: u8 = 5;

fn main() -> ExitCode {
    // clap prints usage errors and exits 2 (its default, kept) — with any
    // value it quotes cut short (invariant 5 of `lib.rs`).
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let _ = write!(
                std::io::stderr(),
                "{}",
                cut_long_words(&e.render().to_string())
            );
            return ExitCode::from(USAGE);
        }
    };
    // Signals blocked by whoever started us would be inherited by every
    // runtime thread (and never reach run-with-lock's forwarding): start
    // from a clean mask, before any thread exists.
    let _ = nix::sys::signal::SigSet::all().thread_unblock();
    // The run-with-lock supervisor: its own small runtime, no logging (its
    // stderr is the command's).
    if let Command::RunWithLockChild {
        parent,
        grace,
        command,
    } = &cli.command
    {
        return ExitCode::from(ops::child::supervise(*parent, *grace, command));
    }
    // Default: warnings of lockshift's own crates. The driver's connection
    // chatter is off: a failed connection is explained once, by `migrate`.
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn,scylla=off")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let json = cli.output.json;
    // run-with-lock's stdout is its command's: even its errors stay off it.
    let json_on_stderr = matches!(
        cli.command,
        Command::RunWithLock { .. } | Command::Elect { .. }
    );
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(ERROR);
        }
    };
    let result = runtime.block_on(run(cli));
    // Background tasks (driver connections, renewals) must not keep the
    // process alive once the command is done.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(Outcome::Ok) => ExitCode::from(OK),
        Ok(Outcome::NotSafe) => ExitCode::from(NOT_SAFE),
        Ok(Outcome::LeaseLost) => ExitCode::from(LEASE_LOST),
        Ok(Outcome::Unsafe) => ExitCode::from(UNSAFE),
        Ok(Outcome::Failed) => ExitCode::from(ERROR),
        Ok(Outcome::Child(code)) => {
            ExitCode::from(u8::try_from(code.clamp(0, 255)).unwrap_or(ERROR))
        }
        Err(e) if is_broken_pipe(&e) => ExitCode::from(OK),
        Err(e) => {
            let code = if is_usage_error(&e) { USAGE } else { ERROR };
            let text = error_text(&e);
            let _ = writeln!(std::io::stderr(), "error: {text}");
            if json {
                let body = serde_json::json!({
                    "version": JSON_VERSION,
                    "error": { "exit_code": code, "message": text },
                });
                // A failed write has nowhere left to be reported.
                let _ = if json_on_stderr {
                    writeln!(std::io::stderr(), "{body}")
                } else {
                    writeln!(std::io::stdout(), "{body}")
                };
            }
            ExitCode::from(code)
        }
    }
}
