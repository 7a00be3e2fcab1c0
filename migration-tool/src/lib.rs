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
pub mod connect;
mod interrupt;
pub mod ops;
pub mod render;

use interrupt::{INTERRUPTED, INTERRUPTED_CLEAN, INTERRUPTED_READ, until_interrupted};

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

/// The acquisition flags as the operations take them.
fn lock_request(args: cli::AcquireArgs) -> ops::lock_session::LockRequest {
    ops::lock_session::LockRequest {
        sharing: args.sharing(),
        lock: args.lock,
        mode: args.mode,
        timeout: args.timeout,
        fencing_token_required: args.fencing_token == cli::FencingTokenArg::Required,
    }
}

/// `run-with-lock`, and `elect` (which proclaims `proclaim` once held).
async fn run_with_lock(
    connect: &cli::ConnectOpts,
    json: bool,
    acquire: cli::AcquireArgs,
    run: cli::RunArgs,
    proclaim: Option<String>,
) -> anyhow::Result<Outcome> {
    let env = ops::Env::open(connect).await?;
    let cli::RunArgs {
        grace,
        report,
        command,
    } = run;
    let request = ops::run_with_lock::Request {
        take: lock_request(acquire),
        grace,
        command,
        proclaim,
        supervisor: Some(
            std::env::current_exe()
                .context("finding the migrate binary to supervise the command")?,
        ),
    };
    let result = ops::run_with_lock::run_with_lock(&env, request, |note| {
        render::note(&note);
    })
    .await?;
    // stdout belongs to the command: reports go elsewhere.
    if let Some(path) = &report {
        render::write_json(&result, path)?;
    }
    if json {
        render::print_json_stderr(&result)?;
    } else {
        render::print_stderr(&result)?;
    }
    Ok(result.outcome())
}

/// Runs one parsed command to its outcome, printing its report.
///
/// # Errors
/// Anything that stopped the command; see [`is_usage_error`].
pub async fn run(cli: Cli) -> anyhow::Result<Outcome> {
    let json = cli.output.json;
    let connect = &cli.connect;
    match cli.command {
        Command::Home { action } => {
            let env = ops::Env::open(connect).await?;
            match action {
                None => {
                    let report = ops::home::show(&env).await?;
                    render::print(&report, json)?;
                    Ok(Outcome::Ok)
                }
                Some(cli::HomeAction::Move(args)) => {
                    let (report, outcome) = ops::home::move_(
                        &env,
                        ops::home::MoveArgs {
                            prefix: args.prefix,
                            to: args.to,
                            force: args.force,
                            dry_run: args.dry_run,
                            by: args.by.unwrap_or_else(ops::advance::default_operator),
                        },
                    )
                    .await?;
                    render::print(&report, json)?;
                    Ok(outcome)
                }
                Some(cli::HomeAction::Forget(args)) => {
                    let report = ops::home_forget::forget(&env, &args.column, args.apply).await;
                    render::print(&report, json)?;
                    Ok(report.outcome())
                }
            }
        }
        Command::Status => {
            let env = ops::Env::open(connect).await?;
            let mut line = render::ProgressLine::new(json);
            let taken = until_interrupted(ops::status::status(&env, |p| line.update(p))).await;
            drop(line);
            let Some(report) = taken? else {
                render::note(INTERRUPTED_READ);
                return Ok(Outcome::Child(INTERRUPTED));
            };
            render::print(&report, json)?;
            Ok(if report.unsafe_state {
                Outcome::Unsafe
            } else {
                Outcome::Ok
            })
        }
        Command::Inspect { lock } => {
            let env = ops::Env::open(connect).await?;
            let report = ops::inspect::inspect(&env, &lock).await?;
            render::print(&report, json)?;
            Ok(report.outcome())
        }
        Command::Clean {
            apply,
            stale_after,
            stale_multiple,
            force,
            page_size,
        } => {
            let env = ops::Env::open(connect).await?;
            let options =
                ops::clean::CleanOptions::new(stale_after, stale_multiple, force, page_size)?;
            let mut line = render::ProgressLine::new(json);
            let taken =
                until_interrupted(ops::clean::clean(&env, &options, apply, |p| line.update(p)))
                    .await;
            drop(line);
            let Some(report) = taken? else {
                render::note(if apply {
                    INTERRUPTED_CLEAN
                } else {
                    INTERRUPTED_READ
                });
                return Ok(Outcome::Child(INTERRUPTED));
            };
            render::print(&report, json)?;
            Ok(if report.summary.failed > 0 {
                Outcome::Failed
            } else {
                Outcome::Ok
            })
        }
        Command::Advance(args) => {
            let env = ops::Env::open(connect).await?;
            let report =
                ops::advance::transition(&env, ops::advance::Direction::Forward, &args).await?;
            render::print(&report, json)?;
            Ok(report.outcome())
        }
        Command::Rollback(args) => {
            let env = ops::Env::open(connect).await?;
            let report = ops::rollback::rollback(&env, &args).await?;
            render::print(&report, json)?;
            Ok(report.outcome())
        }
        Command::RunWithLock { acquire, run } => {
            run_with_lock(connect, json, acquire, run, None).await
        }
        Command::Elect {
            acquire,
            value,
            run,
        } => {
            if acquire.sharing() != lockshift::Sharing::Exclusive {
                anyhow::bail!(
                    "elect takes its election's lock alone: --permits and --shared are for run-with-lock and lock"
                );
            }
            run_with_lock(connect, json, acquire, run, Some(value)).await
        }
        Command::Leader { election, watch } => {
            let env = ops::Env::open(connect).await?;
            if watch {
                let stop = interrupt::interrupted();
                ops::leader::watch(
                    &env,
                    &election,
                    stop,
                    |r| render::print_line(r, json),
                    |note| render::note(&note),
                )
                .await?;
            } else {
                render::print_line(&ops::leader::leader(&env, &election).await?, json)?;
            }
            Ok(Outcome::Ok)
        }
        Command::Lock(acquire) => {
            let env = ops::Env::open(connect).await?;
            let result = ops::lock::lock(
                &env,
                lock_request(acquire),
                // The one line on stdout, once held.
                |held| render::print_line(held, json),
                |note| render::note(&note),
            )
            .await?;
            // How it ended goes to stderr, as run-with-lock's report: stdout
            // has had its one line.
            if json {
                render::print_json_stderr(&result)?;
            } else {
                render::print_stderr(&result)?;
            }
            Ok(result.outcome())
        }
        Command::RunWithLockChild { .. } => Err(UsageError(format!(
            "`{}` is started by `migrate run-with-lock`, not by hand",
            ops::child::SUBCOMMAND
        ))
        .into()),
        Command::Schema {
            datacenters,
            replication_factor,
            apply,
            home,
        } => {
            let mut settings = connect::settings(connect, false)?;
            let mut report =
                ops::schema::schema(&settings.store.cql, &datacenters, replication_factor)?;
            if apply {
                let cql = ops::schema::with_replication(
                    &settings.store.cql,
                    &datacenters,
                    replication_factor,
                )?;
                ops::schema::apply(&cql, &mut report).await?;
                settings.store.cql = cql;
            }
            let failed = report.applied.as_ref().is_some_and(|steps| {
                steps
                    .iter()
                    .any(|s| s.outcome == ops::schema::StepOutcome::Refused)
            });
            if let Some(home) = home.filter(|_| !failed) {
                let store = connect::open(&settings).await?;
                let by = ops::advance::default_operator();
                report.home = Some(
                    ops::schema_home::record_home(
                        &store,
                        &lockshift_store::SystemClock,
                        &home,
                        &by,
                        settings.rollout.clock_skew_margin,
                    )
                    .await,
                );
            }
            render::print(&report, json)?;
            Ok(match report.home.as_ref().map(|h| h.outcome) {
                _ if failed => Outcome::Failed,
                Some("refused") => Outcome::NotSafe,
                Some("incomplete") => Outcome::Failed,
                _ => Outcome::Ok,
            })
        }
        Command::Serve {
            listen,
            latency,
            jitter,
            metrics,
        } => {
            let settings = connect::settings(connect, true)?;
            let metrics = start_metrics(metrics).await?;
            let options = ops::serve::ServeOptions {
                addr: listen,
                latency,
                jitter,
                metrics: metrics.as_ref(),
            };
            ops::serve::serve(&settings, options, |ready| render::print(&ready, json)).await?;
            Ok(Outcome::Ok)
        }
        Command::Bench(args) => {
            // A cluster to measure must be named; the local endpoint needs none.
            let settings = if args.cluster {
                connect::store_settings(connect, true)?
            } else {
                connect::settings(connect, false)?
            };
            if args.sharing {
                let report = ops::bench::sharing(&args, render::note).await?;
                render::print(&report, json)?;
                return Ok(Outcome::Ok);
            }
            if args.idle {
                let report = ops::bench::idle(&args, &settings, render::note).await?;
                render::print(&report, json)?;
                return Ok(Outcome::Ok);
            }
            if !args.census.is_empty() {
                let report = ops::bench::census(&args, &settings, render::note).await?;
                render::print(&report, json)?;
                return Ok(Outcome::Ok);
            }
            if args.datacenters {
                let report = ops::bench::datacenters(&args, &settings).await?;
                render::print(&report, json)?;
                return Ok(Outcome::Ok);
            }
            if let Some(observers) = args.observers {
                let report = ops::bench::observe(&args, &settings, observers).await?;
                render::print(&report, json)?;
                return Ok(Outcome::Ok);
            }
            if let Some(writes) = args.fenced_writes {
                let report = ops::bench::fenced(&args, &settings, writes).await?;
                render::print(&report, json)?;
                return Ok(Outcome::Ok);
            }
            let config = ops::bench::config(&args, &settings)?;
            if config.soak.is_some() {
                let report = ops::bench::soak(&config, render::note).await?;
                render::print(&report, json)?;
                return Ok(Outcome::Ok);
            }
            if !config.hold_locks.is_empty() {
                let report = ops::bench::hold(&config, render::note).await?;
                render::print(&report, json)?;
                return Ok(Outcome::Ok);
            }
            ops::bench::check_plots_dir(&config)?;
            let report = ops::bench::bench(&config, render::note).await?;
            render::print(&report, json)?;
            if report.plot_errors.is_empty() {
                Ok(Outcome::Ok)
            } else {
                // The table is out; now say what is missing, and fail.
                Err(anyhow::anyhow!(
                    "plots not written: {}",
                    report.plot_errors.join("; ")
                ))
            }
        }
        Command::BenchWorker { spec } => {
            let mut spec = serde_json::from_str(&spec)
                .map_err(|e| UsageError(format!("invalid worker spec: {e}")))?;
            ops::bench::restore_password(&mut spec);
            lockshift_bench::run_worker(spec).await?;
            Ok(Outcome::Ok)
        }
        Command::Demo(args) => {
            // Before any node starts: handles made earlier record nothing.
            let _metrics = start_metrics(args.metrics).await?;
            // Connection settings given (flag, environment or file): the
            // demo runs there, in a keyspace of its own; else in-process.
            let report = match connect::cluster_settings(connect)? {
                Some(settings) => {
                    ops::demo::demo_on_cluster(
                        &args,
                        &settings.store.cql,
                        render::demo_observer(json),
                    )
                    .await?
                }
                None => ops::demo::demo(&args, render::demo_observer(json)).await?,
            };
            render::print(&report, json)?;
            Ok(if report.passed {
                Outcome::Ok
            } else {
                Outcome::Failed
            })
        }
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
