//! `migrate`: the operator tool that moves a fleet from the legacy lock to
//! the queue lock (docs/design.md §5), in the style of `sqlx migrate`,
//! `etcdctl lock` and YTsaurus' `run-command-with-lock`.
//!
//! The binary (`src/main.rs`) is a few lines over this library: parse
//! ([`cli::Cli`]), [`run`], map the [`Outcome`] or error to an exit code.
//!
//! # Layout
//!
//! - [`cli`]: every argument (clap derive), shared option groups.
//! - [`connect`]: flags + environment + file → settings → an open store,
//!   with errors that say what to do next.
//! - [`ops`]: one module per command. Each gathers or changes state and
//!   returns a typed report; none prints (progress goes through callbacks).
//! - [`render`]: draws a report as an aligned table or as JSON — the same
//!   struct either way, so the two never disagree.
//!
//! # Invariants
//!
//! 1. Destructive commands (`clean`, `advance`, `rollback`) run the
//!    same code path with and without the change; the dry run stops just
//!    before the write.
//! 2. `clean` deletes a cell only `USING TIMESTAMP` its observed
//!    writetime, after a re-read showed that writetime unchanged — for a
//!    cell with a promise, a second look one and a half promised renewal
//!    periods after the scan, so an owner renewing within its promise is
//!    never deleted: a renewal (newer timestamp) survives the delete by the
//!    store's tie rule.
//! 3. Every JSON report has `"version": 1` at the top; fields are only
//!    ever added under that version.
//! 4. Exit codes are decided in one place (`main.rs`) from [`Outcome`]
//!    and the error chain ([`UsageError`] → 2, anything else → 1).
//! 5. A message echoes a value once, cut short: settings and flag
//!    values through `cut_short`/`echo`, and clap's own usage errors through
//!    [`cut_long_words`]; an error chain is printed with each cause once
//!    ([`error_text`]) — errors that show their source and also chain it
//!    said "Address already in use" twice. Every error type of the
//!    workspace shows its cause in its message and does not also return
//!    it as `source()` (`lockshift_lock`'s error module), so anyhow's own
//!    `{:#}` prints each cause once as well.

// Every public item is documented (the workspace warns, CI denies warnings).
#![warn(missing_docs)]

pub mod cli;
mod commands;
pub mod connect;
mod interrupt;
pub mod ops;
pub mod render;

use std::fmt;

use anyhow::Context;

use cli::{Cli, Command};

/// The version of every JSON report's schema (invariant 3).
pub const JSON_VERSION: u32 = 1;

/// How a command ended when it did not fail outright.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done.
    Ok,
    /// Guards refused, or a dry run found the transition not yet safe, or
    /// the lock was not free within `--timeout` (`run-with-lock`, `lock`).
    NotSafe,
    /// `run-with-lock` lost its lease and stopped the command, or `lock`
    /// lost the lease of the lock it held.
    LeaseLost,
    /// An invariant broke (`demo`).
    Failed,
    /// `status` found the fleet in an unsafe state (legacy and queue in use
    /// at once): exit 5, so a monitoring script can page on it.
    Unsafe,
    /// An exit code set by the command: `run-with-lock`'s command's own
    /// status, passed through; 128 + the signal that interrupted a wait
    /// (`run-with-lock`, `lock`); 1 when no fencing token could be had.
    Child(i32),
}

/// A usage error: the invocation is wrong (a value, a setting, a transition
/// that can never be made from here). Exit code 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Whether `err` is a write to a closed pipe anywhere in its chain (the
/// reader went away, e.g. `| head -1`): not worth a word.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    let broken = |io: &std::io::Error| io.kind() == std::io::ErrorKind::BrokenPipe;
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>().is_some_and(broken)
            // A benchmark worker writing its report: the I/O error is shown
            // by the benchmark's error, not chained (lockshift's errors
            // never do both).
            || matches!(
                e.downcast_ref::<lockshift_bench::BenchError>(),
                Some(lockshift_bench::BenchError::Io(io)) if broken(io)
            )
    })
}

/// The error and its causes, `: `-separated, each cause once: a cause
/// whose text the message so far already holds (an error that shows its
/// source and also chains it) is not repeated. lockshift's own errors show
/// their cause and never chain it as well, so this matters only for
/// foreign errors that do both.
pub fn error_text(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// `text` with every run of more than 200 bytes without whitespace cut
/// short (a value clap quotes in a usage error).
pub fn cut_long_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(4_096));
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if word.len() > 200 {
            out.push_str(&lockshift_lock::cut_short(word));
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_whitespace() {
            flush(&mut word, &mut out);
            out.push(c);
        } else {
            word.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Whether `err` is a usage error anywhere in its chain.
pub fn is_usage_error(err: &anyhow::Error) -> bool {
    err.chain()
        .any(|e| e.downcast_ref::<UsageError>().is_some())
}

/// Starts the Prometheus scrape endpoint when `--metrics` asks for one,
/// saying where on stderr.
///
/// # Errors
/// The address cannot be bound.
async fn start_metrics(
    addr: Option<std::net::SocketAddr>,
) -> anyhow::Result<Option<lockshift::metrics::MetricsServer>> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let server = lockshift::metrics::serve_prometheus(addr)
        .await
        .context("starting the metrics endpoint")?;
    render::note(&format!(
        "metrics on http://{}/metrics",
        server.local_addr()
    ));
    Ok(Some(server))
}

/// Runs one parsed command to its outcome, printing its report: the table
/// of commands, each a function of the `commands` module.
///
/// # Errors
/// Anything that stopped the command; see [`is_usage_error`].
pub async fn run(cli: Cli) -> anyhow::Result<Outcome> {
    let ctx = commands::Ctx {
        connect: &cli.connect,
        json: cli.output.json,
    };
    match cli.command {
        Command::Home { action } => commands::home(ctx, action).await,
        Command::Status => commands::status(ctx).await,
        Command::Inspect { lock } => commands::inspect(ctx, &lock).await,
        Command::Clean(args) => commands::clean(ctx, args).await,
        Command::Advance(args) => commands::advance(ctx, &args).await,
        Command::Rollback(args) => commands::rollback(ctx, &args).await,
        Command::RunWithLock { acquire, run } => {
            commands::run_with_lock(ctx, acquire, run, None).await
        }
        Command::Elect {
            acquire,
            value,
            run,
        } => commands::elect(ctx, acquire, value, run).await,
        Command::Leader { election, watch } => commands::leader(ctx, &election, watch).await,
        Command::Lock(acquire) => commands::lock(ctx, acquire).await,
        Command::RunWithLockChild { .. } => commands::run_with_lock_child(),
        Command::Schema(args) => commands::schema(ctx, args).await,
        Command::Serve(args) => commands::serve(ctx, args).await,
        Command::Bench(args) => commands::bench(ctx, args).await,
        Command::BenchWorker { spec } => commands::bench_worker(&spec).await,
        Command::Demo(args) => commands::demo(ctx, args).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 19 (C) #9: a cause the message already shows is not repeated.
    #[test]
    fn each_cause_is_said_once() {
        #[derive(Debug)]
        struct Bind(std::io::Error);
        impl fmt::Display for Bind {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "could not listen on 127.0.0.1:9042: {}", self.0)
            }
        }
        impl std::error::Error for Bind {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = anyhow::Error::new(Bind(std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            "Address already in use (os error 98)",
        )))
        .context("starting the endpoint");
        assert_eq!(
            error_text(&e),
            "starting the endpoint: could not listen on 127.0.0.1:9042: Address already in use (os error 98)"
        );
    }

    #[test]
    fn long_words_are_cut_short() {
        let long = "x".repeat(100_000);
        let text = format!("error: invalid value '{long}' for '<LOCK>'\n");
        let cut = cut_long_words(&text);
        assert!(cut.len() < 400, "{}", cut.len());
        assert!(cut.starts_with("error: invalid value 'xxx") && cut.ends_with("for '<LOCK>'\n"));
        assert_eq!(cut_long_words("a b\tc\n"), "a b\tc\n");
    }
}
