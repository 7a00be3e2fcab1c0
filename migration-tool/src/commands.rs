//! One function per command: open what it needs, run its operation
//! ([`crate::ops`]), print its report ([`crate::render`]) and say how it
//! ended. [`crate::run`] is the table that picks one.

use anyhow::Context;
use lockshift::LockId;

use crate::interrupt::{INTERRUPTED, INTERRUPTED_CLEAN, INTERRUPTED_READ, until_interrupted};
use crate::{Outcome, UsageError, cli, connect, ops, render};

/// What every command is given: where to connect, and whether to print
/// JSON.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctx<'a> {
    pub(crate) connect: &'a cli::ConnectOpts,
    pub(crate) json: bool,
}

impl Ctx<'_> {
    /// Prints `report` as the command's report and ends `outcome`.
    fn done<R: render::Human + serde::Serialize>(
        self,
        report: &R,
        outcome: Outcome,
    ) -> anyhow::Result<Outcome> {
        render::print(report, self.json)?;
        Ok(outcome)
    }
}

/// `home`, `home move`, `home forget`.
pub(crate) async fn home(ctx: Ctx<'_>, action: Option<cli::HomeAction>) -> anyhow::Result<Outcome> {
    let env = ops::Env::open(ctx.connect).await?;
    match action {
        None => ctx.done(&ops::home::show(&env).await?, Outcome::Ok),
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
            ctx.done(&report, outcome)
        }
        Some(cli::HomeAction::Forget(args)) => {
            let report = ops::home_forget::forget(&env, &args.column, args.apply).await;
            ctx.done(&report, report.outcome())
        }
    }
}

/// `status`: stops on an interrupt with nothing written.
pub(crate) async fn status(ctx: Ctx<'_>) -> anyhow::Result<Outcome> {
    let env = ops::Env::open(ctx.connect).await?;
    let mut line = render::ProgressLine::new(ctx.json);
    let taken = until_interrupted(ops::status::status(&env, |p| line.update(p))).await;
    drop(line);
    let Some(report) = taken? else {
        render::note(INTERRUPTED_READ);
        return Ok(Outcome::Child(INTERRUPTED));
    };
    let outcome = if report.unsafe_state {
        Outcome::Unsafe
    } else {
        Outcome::Ok
    };
    ctx.done(&report, outcome)
}

/// `inspect LOCK`.
pub(crate) async fn inspect(ctx: Ctx<'_>, lock: &LockId) -> anyhow::Result<Outcome> {
    let env = ops::Env::open(ctx.connect).await?;
    let report = ops::inspect::inspect(&env, lock).await?;
    ctx.done(&report, report.outcome())
}

/// `clean`: stops on an interrupt, saying what was written.
pub(crate) async fn clean(ctx: Ctx<'_>, flags: cli::CleanArgs) -> anyhow::Result<Outcome> {
    let env = ops::Env::open(ctx.connect).await?;
    let options = ops::clean::CleanOptions::new(
        flags.stale_after,
        flags.stale_multiple,
        flags.force,
        flags.page_size,
    )?;
    let mut line = render::ProgressLine::new(ctx.json);
    let cleaning = ops::clean::clean(&env, &options, flags.apply, |p| line.update(p));
    let taken = until_interrupted(cleaning).await;
    drop(line);
    let Some(report) = taken? else {
        render::note(if flags.apply {
            INTERRUPTED_CLEAN
        } else {
            INTERRUPTED_READ
        });
        return Ok(Outcome::Child(INTERRUPTED));
    };
    let outcome = if report.summary.failed > 0 {
        Outcome::Failed
    } else {
        Outcome::Ok
    };
    ctx.done(&report, outcome)
}

/// `advance`.
pub(crate) async fn advance(ctx: Ctx<'_>, args: &cli::TransitionArgs) -> anyhow::Result<Outcome> {
    let env = ops::Env::open(ctx.connect).await?;
    let report = ops::advance::transition(&env, ops::advance::Direction::Forward, args).await?;
    ctx.done(&report, report.outcome())
}

/// `rollback`.
pub(crate) async fn rollback(ctx: Ctx<'_>, args: &cli::TransitionArgs) -> anyhow::Result<Outcome> {
    let env = ops::Env::open(ctx.connect).await?;
    let report = ops::rollback::rollback(&env, args).await?;
    ctx.done(&report, report.outcome())
}

/// `elect`: `run-with-lock` that proclaims `value` once held; the
/// election's lock is taken alone.
pub(crate) async fn elect(
    ctx: Ctx<'_>,
    acquire: cli::AcquireArgs,
    value: String,
    run: cli::RunArgs,
) -> anyhow::Result<Outcome> {
    if acquire.sharing() != lockshift::Sharing::Exclusive {
        anyhow::bail!(
            "elect takes its election's lock alone: --permits and --shared are for run-with-lock and lock"
        );
    }
    run_with_lock(ctx, acquire, run, Some(value)).await
}

/// `run-with-lock`, and `elect` (which proclaims `proclaim` once held).
pub(crate) async fn run_with_lock(
    ctx: Ctx<'_>,
    acquire: cli::AcquireArgs,
    run: cli::RunArgs,
    proclaim: Option<String>,
) -> anyhow::Result<Outcome> {
    let env = ops::Env::open(ctx.connect).await?;
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
    print_stderr(ctx, &result)?;
    Ok(result.outcome())
}

/// `leader ELECTION`, once or `--watch`ing until interrupted.
pub(crate) async fn leader(
    ctx: Ctx<'_>,
    election: &LockId,
    watch: bool,
) -> anyhow::Result<Outcome> {
    let env = ops::Env::open(ctx.connect).await?;
    let json = ctx.json;
    if watch {
        let stop = crate::interrupt::interrupted();
        ops::leader::watch(
            &env,
            election,
            stop,
            |r| render::print_line(r, json),
            |note| render::note(&note),
        )
        .await?;
    } else {
        render::print_line(&ops::leader::leader(&env, election).await?, json)?;
    }
    Ok(Outcome::Ok)
}

/// `lock`: one line on stdout once held; how it ended on stderr.
pub(crate) async fn lock(ctx: Ctx<'_>, acquire: cli::AcquireArgs) -> anyhow::Result<Outcome> {
    let env = ops::Env::open(ctx.connect).await?;
    let json = ctx.json;
    let result = ops::lock::lock(
        &env,
        lock_request(acquire),
        // The one line on stdout, once held.
        |held| render::print_line(held, json),
        |note| render::note(&note),
    )
    .await?;
    // How it ended goes to stderr, as run-with-lock's report: stdout has
    // had its one line.
    print_stderr(ctx, &result)?;
    Ok(result.outcome())
}

/// The child `run-with-lock` starts: never by hand.
pub(crate) fn run_with_lock_child() -> anyhow::Result<Outcome> {
    Err(UsageError(format!(
        "`{}` is started by `migrate run-with-lock`, not by hand",
        ops::child::SUBCOMMAND
    ))
    .into())
}

/// `schema`: prints (or `--apply`s) the statements, and with `--home`
/// records the fleet's first home once they applied.
pub(crate) async fn schema(ctx: Ctx<'_>, flags: cli::SchemaArgs) -> anyhow::Result<Outcome> {
    let cli::SchemaArgs {
        datacenters,
        replication_factor,
        apply,
        home,
    } = flags;
    let mut settings = connect::settings(ctx.connect, false)?;
    let mut report = ops::schema::schema(&settings.store.cql, &datacenters, replication_factor)?;
    if apply {
        let cql =
            ops::schema::with_replication(&settings.store.cql, &datacenters, replication_factor)?;
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
    let outcome = match report.home.as_ref().map(|h| h.outcome) {
        _ if failed => Outcome::Failed,
        Some("refused") => Outcome::NotSafe,
        Some("incomplete") => Outcome::Failed,
        _ => Outcome::Ok,
    };
    ctx.done(&report, outcome)
}

/// `serve`: a local CQL endpoint until interrupted.
pub(crate) async fn serve(ctx: Ctx<'_>, flags: cli::ServeArgs) -> anyhow::Result<Outcome> {
    let settings = connect::settings(ctx.connect, true)?;
    let metrics = crate::start_metrics(flags.metrics).await?;
    let options = ops::serve::ServeOptions {
        addr: flags.listen,
        latency: flags.latency,
        jitter: flags.jitter,
        metrics: metrics.as_ref(),
    };
    let json = ctx.json;
    ops::serve::serve(&settings, options, |ready| render::print(&ready, json)).await?;
    Ok(Outcome::Ok)
}

/// `bench`: the mode its flags pick, else the contention benchmark.
pub(crate) async fn bench(ctx: Ctx<'_>, args: cli::BenchArgs) -> anyhow::Result<Outcome> {
    // A cluster to measure must be named; the local endpoint needs none.
    let settings = if args.cluster {
        connect::store_settings(ctx.connect, true)?
    } else {
        connect::settings(ctx.connect, false)?
    };
    if args.sharing {
        return ctx.done(
            &ops::bench::sharing(&args, render::note).await?,
            Outcome::Ok,
        );
    }
    if args.idle {
        let report = ops::bench::idle(&args, &settings, render::note).await?;
        return ctx.done(&report, Outcome::Ok);
    }
    if !args.census.is_empty() {
        let report = ops::bench::census(&args, &settings, render::note).await?;
        return ctx.done(&report, Outcome::Ok);
    }
    if args.datacenters {
        let report = ops::bench::datacenters(&args, &settings).await?;
        return ctx.done(&report, Outcome::Ok);
    }
    if let Some(observers) = args.observers {
        let report = ops::bench::observe(&args, &settings, observers).await?;
        return ctx.done(&report, Outcome::Ok);
    }
    if let Some(writes) = args.fenced_writes {
        let report = ops::bench::fenced(&args, &settings, writes).await?;
        return ctx.done(&report, Outcome::Ok);
    }
    let config = ops::bench::config(&args, &settings)?;
    if config.soak.is_some() {
        return ctx.done(&ops::bench::soak(&config, render::note).await?, Outcome::Ok);
    }
    if !config.hold_locks.is_empty() {
        return ctx.done(&ops::bench::hold(&config, render::note).await?, Outcome::Ok);
    }
    ops::bench::check_plots_dir(&config)?;
    let report = ops::bench::bench(&config, render::note).await?;
    render::print(&report, ctx.json)?;
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

/// The worker process a multi-process `bench` starts.
pub(crate) async fn bench_worker(spec: &str) -> anyhow::Result<Outcome> {
    let mut spec =
        serde_json::from_str(spec).map_err(|e| UsageError(format!("invalid worker spec: {e}")))?;
    ops::bench::restore_password(&mut spec);
    lockshift_bench::run_worker(spec).await?;
    Ok(Outcome::Ok)
}

/// `demo`: on the cluster the connection settings name, in a keyspace of
/// its own, else in-process.
pub(crate) async fn demo(ctx: Ctx<'_>, args: cli::DemoArgs) -> anyhow::Result<Outcome> {
    // Before any node starts: handles made earlier record nothing.
    let _metrics = crate::start_metrics(args.metrics).await?;
    let observer = render::demo_observer(ctx.json);
    let report = match connect::cluster_settings(ctx.connect)? {
        Some(settings) => ops::demo::demo_on_cluster(&args, &settings.store.cql, observer).await?,
        None => ops::demo::demo(&args, observer).await?,
    };
    let outcome = if report.passed {
        Outcome::Ok
    } else {
        Outcome::Failed
    };
    ctx.done(&report, outcome)
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

/// A session's report on stderr (stdout belongs to the command, or had
/// its one line).
fn print_stderr<R: render::Human + serde::Serialize>(
    ctx: Ctx<'_>,
    result: &R,
) -> anyhow::Result<()> {
    if ctx.json {
        render::print_json_stderr(result)
    } else {
        render::print_stderr(result)
    }
}
