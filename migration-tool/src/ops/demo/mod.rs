//! `migrate demo`: the rollout of docs/design.md §4 on a live, simulated fleet —
//! the user-facing version of `tests/simulation/rollout.rs`, in real time
//! and over the CQL protocol.
//!
//! A local endpoint runs in-process with a little injected latency. Service
//! nodes ([`Node`](lockshift::Node), each with its own connection) run
//! workers that move money between accounts: lock both accounts (ids
//! sorted, so two transfers never wait on each other crosswise), read both
//! balances, write both new balances, release. The fleet is rolled legacy →
//! dual → queue → complete with restarts one node at a time, exactly as an
//! operator would:
//!
//! 1. every node on `legacy`;
//! 2. restart each into `auto` (combined at stage legacy);
//! 3. `advance` to dual — refused until the legacy quiet period has passed
//!    (the refusals are shown);
//! 4. `advance` to queue;
//! 5. restart each into `queue`;
//! 6. `advance` to complete.
//!
//! # What is checked
//!
//! - **Money is conserved**: the sum of balances at the end equals the sum
//!   at the start. A lost update (two holders interleaving read and write)
//!   breaks it.
//! - **Exclusion**: an in-process checker (the simulations' [`Oracle`])
//!   records the holder of every account lock between acquisition and
//!   release; a second holder is a violation.
//! - **The rollout completes**.
//!
//! A worker whose lease is lost before it writes abandons the transfer
//! (that is what the lost signal is for), so an aborted transfer moves no
//! money. A worker paused *after* that check (`--pause-holder`, see
//! `pause.rs`) writes late: every balance is written with a fenced write
//! under the account lock's fencing token (docs/design.md §5, "Fenced
//! writes"), so the store refuses the late write once a later holder has
//! written the account; the transfer is abandoned and counted
//! (`DemoReport::fenced_refusals`). The exclusion checker counts a holder
//! until its release or its lost signal, whichever comes first.

mod fleet;
mod pause;
mod transfers;

#[cfg(test)]
#[path = "transfers_tests.rs"]
mod transfers_tests;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use lockshift::Settings;
use lockshift_decide::algorithm::{Mode, Stage};
use lockshift_harness::checker::{Oracle, Violation};
use lockshift_harness::fleet::Fleet as NodeFleet;
use lockshift_rollout::RolloutSettings;
use lockshift_rollout::rollout::TransitionRequest;
use lockshift_store::{SharedClock, SharedStore, Store, SystemClock};
use serde::Serialize;
use tokio::time::Instant;

use super::Env;
use super::status::{StatusReport, status};
use crate::JSON_VERSION;
use crate::cli::DemoArgs;
use fleet::{DemoWorld, Transfers, restart_all, spawn_ticker, wait_stats};
use pause::PauseFault;
use transfers::{open_account, total_balance};

/// Something the demo tells the operator while it runs.
#[derive(Debug, Clone)]
pub enum DemoEvent {
    /// A new phase begins.
    Phase(String),
    /// A detail (a refusal, a restart).
    Line(String),
    /// The once-a-second progress line.
    Tick(String),
    /// `migrate status` at a stage.
    Status(Box<StatusReport>),
}

/// The final report of `migrate demo` (JSON schema, `"version": 1`).
#[derive(Debug, Clone, Serialize)]
pub struct DemoReport {
    /// Schema version, 1.
    pub version: u32,
    /// Every invariant held.
    pub passed: bool,
    /// Nodes, workers per node, accounts.
    pub fleet: Fleet,
    /// Transfers completed.
    pub transfers: u64,
    /// Transfers abandoned (lease lost, lock not taken in time, a balance
    /// write refused).
    pub aborted: u64,
    /// Balance writes the database refused because a later holder of the
    /// account's lock had written it (a fenced write under a smaller
    /// token): late writes of a holder paused past its lease. The
    /// transfer is abandoned, and none moved money.
    pub fenced_refusals: u64,
    /// `--pause-holder`: what the paused holder did, and what was refused
    /// (empty without the fault).
    pub pause_holder: Vec<String>,
    /// Sum of balances at the start.
    pub balance_before: i64,
    /// Sum of balances at the end.
    pub balance_after: i64,
    /// `balance_before == balance_after`.
    pub balance_conserved: bool,
    /// Exclusion violations seen by the checker (empty when clean).
    pub violations: Vec<String>,
    /// Lock waits (both locks of a transfer) per stage.
    pub waits: Vec<StageWaits>,
    /// Transfers per algorithm that took the locks.
    pub by_algorithm: BTreeMap<String, u64>,
    /// Stages the fleet went through, in order.
    pub stages: Vec<String>,
    /// Whether the rollout reached `complete`.
    pub reached_complete: bool,
    /// Refusals seen on the way, with their reasons.
    pub refusals: Vec<String>,
    /// Wall time of the whole run.
    pub duration_ms: u64,
    /// Where it ran: the in-process endpoint, or the cluster and the
    /// keyspace it made for itself (and dropped).
    pub database: String,
}

/// The fleet's size.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Fleet {
    /// Service nodes.
    pub nodes: u16,
    /// Workers per node.
    pub workers: u16,
    /// Accounts.
    pub accounts: u16,
}

/// Lock waits of the transfers made while the stage was `stage`.
#[derive(Debug, Clone, Serialize)]
pub struct StageWaits {
    /// The stage.
    pub stage: String,
    /// Transfers made.
    pub transfers: usize,
    /// Mean wait.
    pub mean_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Longest.
    pub max_ms: f64,
}

/// Opens a store connection for one node (or the operator).
#[async_trait]
pub trait Connector: Send + Sync + fmt::Debug {
    /// A new connection.
    async fn connect(&self) -> anyhow::Result<SharedStore>;
}

/// Every "connection" is the same in-process store (for tests without an
/// endpoint).
#[derive(Debug, Clone)]
pub struct SameStore(pub SharedStore);

#[async_trait]
impl Connector for SameStore {
    async fn connect(&self) -> anyhow::Result<SharedStore> {
        Ok(self.0.clone())
    }
}

/// Runs the demo on a local endpoint started in-process (see
/// [`demo_on_cluster`] for a real one).
///
/// # Errors
/// The endpoint or a connection could not be set up, or the rollout got
/// stuck (invariant failures are in the report, not errors).
pub async fn demo(
    args: &DemoArgs,
    observer: impl FnMut(DemoEvent) + Send + 'static,
) -> anyhow::Result<DemoReport> {
    let endpoint = super::serve::start_endpoint(
        "127.0.0.1:0".parse().context("the endpoint address")?,
        Some(args.latency),
        None,
    )
    .await?;
    let addr = endpoint.local_addr();
    let cql = lockshift_store::CqlSettings {
        contact_points: vec![addr.to_string()],
        create_schema: false,
        ..lockshift_store::CqlSettings::default()
    };
    let operator = super::serve::create_schema(&cql, addr).await?;
    let connector = super::serve::CqlConnector(cql);
    let observer: Observer = Arc::new(Mutex::new(observer));
    emit(
        &observer,
        DemoEvent::Phase(format!(
            "local CQL endpoint on {addr} ({} latency); {} nodes x {} workers moving money between {} accounts",
            humantime::format_duration(args.latency),
            args.nodes,
            args.workers,
            args.accounts
        )),
    );
    let report = run(args, operator, &connector, observer).await;
    endpoint.shutdown().await;
    report
}

/// Runs the demo on the cluster `cql` names, in a keyspace of its own
/// (`lockshift_demo_<random>`, created with `cql.replication`), dropped at
/// the end whatever the outcome — the fleet's own keyspace is never
/// touched. The injected latency does not apply: the cluster has its own.
///
/// # Errors
/// The cluster could not be reached or the keyspace not created; the
/// rollout got stuck; the keyspace could not be dropped (named, so an
/// operator can drop it by hand).
pub async fn demo_on_cluster(
    args: &DemoArgs,
    cql: &lockshift_store::CqlSettings,
    observer: impl FnMut(DemoEvent) + Send + 'static,
) -> anyhow::Result<DemoReport> {
    let mut cql = cql.clone();
    cql.keyspace = format!("lockshift_demo_{:016x}", rand::random::<u64>());
    cql.create_schema = true;
    let points = cql.contact_points.join(", ");
    let operator = Arc::new(
        lockshift_store::CqlStore::connect(&cql)
            .await
            .with_context(|| {
                format!("creating the demo's keyspace {} at {points}", cql.keyspace)
            })?,
    );
    cql.create_schema = false;
    let connector = super::serve::CqlConnector(cql.clone());
    let observer: Observer = Arc::new(Mutex::new(observer));
    emit(
        &observer,
        DemoEvent::Phase(format!(
            "cluster {points}, keyspace {} (made for this run, dropped at the end); {} nodes x {} \
             workers moving money between {} accounts",
            cql.keyspace, args.nodes, args.workers, args.accounts
        )),
    );
    let report = run(args, operator.clone(), &connector, observer).await;
    let dropped = operator.drop_keyspace().await;
    let mut report = report?;
    dropped.with_context(|| {
        format!(
            "the demo ran, but dropping its keyspace {} failed: drop it by hand",
            cql.keyspace
        )
    })?;
    report.database = format!("{} (keyspace dropped)", operator.describe());
    Ok(report)
}

type Observer = Arc<Mutex<dyn FnMut(DemoEvent) + Send>>;

fn emit(observer: &Observer, event: DemoEvent) {
    let mut f = observer.lock().unwrap_or_else(PoisonError::into_inner);
    f(event);
}

/// Short leases and periods so stages move in seconds, validated by
/// [`Settings`] like any fleet's.
pub fn demo_settings(node: Option<usize>, mode: Mode) -> anyhow::Result<Settings> {
    let mut s = Settings::default();
    s.node.id = node.map(|i| format!("svc-{i}"));
    s.node.mode = mode;
    s.lock.lease_ttl = Duration::from_secs(4);
    s.lock.renew_every = Duration::from_secs(1);
    s.lock.queue.waiter_poll = Duration::from_millis(50);
    s.lock.legacy.owner_wait_max = Duration::from_millis(200);
    s.rollout = RolloutSettings {
        stage_reread_every: Duration::from_secs(1),
        stage_valid_for: Duration::from_secs(2),
        quiet_period: Duration::from_secs(7),
        clock_skew_margin: Duration::from_millis(500),
        heartbeat_every: Duration::from_millis(500),
        heartbeat_ttl: Duration::from_secs(2),
    };
    s.validated().context("the demo's settings")
}

/// The demo on any connector (the binary's: an endpoint; tests: one
/// embedded store).
///
/// # Errors
/// As [`demo`].
pub async fn run(
    args: &DemoArgs,
    operator: SharedStore,
    connector: &dyn Connector,
    observer: Observer,
) -> anyhow::Result<DemoReport> {
    let started = Instant::now();
    let clock: SharedClock = Arc::new(SystemClock);
    let env = Env::new(
        demo_settings(None, Mode::Auto)?,
        operator.clone(),
        clock.clone(),
    );
    let accounts: Vec<String> = (0..args.accounts)
        .map(|i| format!("account-{i:03}"))
        .collect();
    for a in &accounts {
        open_account(operator.as_ref(), a, args.balance).await?;
    }
    let balance_before = total_balance(operator.as_ref(), &accounts).await?;
    let shared = shared_state(args, accounts, clock.clone());
    let mut fleet = NodeFleet::new(
        Transfers {
            args: args.clone(),
            shared: shared.clone(),
            connector,
        },
        usize::from(args.nodes),
    );
    let ticker = spawn_ticker(shared.clone(), observer.clone());
    let Rolled {
        stages,
        refusals,
        reached_complete,
    } = roll(&env, &mut fleet, &shared, args, &observer).await?;
    emit(
        &observer,
        DemoEvent::Phase("stopping the fleet and checking the books".into()),
    );
    fleet.stop_all().await;
    ticker.abort();
    let balance_after = total_balance(operator.as_ref(), &shared.accounts).await?;
    let waits = wait_stats(&shared);
    let balance_conserved = balance_before == balance_after;
    let transfers = shared.transfers.load(Ordering::SeqCst);
    let fenced_refusals = shared.fenced_refusals.load(Ordering::SeqCst);
    let pause_holder = shared.pause.notes();
    let violations = violations(&shared, args, fenced_refusals, &pause_holder);
    Ok(DemoReport {
        version: JSON_VERSION,
        passed: balance_conserved && violations.is_empty() && reached_complete && transfers > 0,
        fleet: Fleet {
            nodes: args.nodes,
            workers: args.workers,
            accounts: args.accounts,
        },
        transfers,
        aborted: shared.aborted.load(Ordering::SeqCst),
        fenced_refusals,
        pause_holder,
        balance_before,
        balance_after,
        balance_conserved,
        violations,
        waits,
        by_algorithm: shared
            .by_algorithm
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone(),
        stages,
        reached_complete,
        refusals,
        duration_ms: super::ms(started.elapsed()),
        database: operator.describe(),
    })
}

/// The demo's shared state, its accounts opened.
fn shared_state(args: &DemoArgs, accounts: Vec<String>, clock: SharedClock) -> Arc<DemoWorld> {
    Arc::new(DemoWorld {
        accounts,
        stage: Mutex::new(Stage::Legacy),
        oracle: Oracle::default(),
        waits: Mutex::new(BTreeMap::new()),
        by_algorithm: Mutex::new(BTreeMap::new()),
        transfers: AtomicU64::new(0),
        aborted: AtomicU64::new(0),
        fenced_refusals: AtomicU64::new(0),
        // After the fleet has run a while; longer than a lease TTL and a
        // second, so the paused holder's cells expire.
        pause: PauseFault::new(args.pause_holder.then(|| {
            let settings = demo_settings(None, Mode::Auto).map(|s| s.lock.lease_ttl);
            let ttl = settings.unwrap_or(Duration::from_secs(4));
            (Instant::now() + args.settle, ttl + Duration::from_secs(1))
        })),
        errors: Mutex::new(Vec::new()),
        clock: clock.clone(),
    })
}

/// Where the rollout got: the stages it passed, the advances refused,
/// whether it reached `complete`.
struct Rolled {
    stages: Vec<String>,
    refusals: Vec<String>,
    reached_complete: bool,
}

/// The rollout, as an operator runs it: legacy, a rolling restart into
/// `auto`, then each advance (with its restart) while they are safe.
async fn roll(
    env: &Env,
    fleet: &mut NodeFleet<Transfers<'_>>,
    shared: &DemoWorld,
    args: &DemoArgs,
    observer: &Observer,
) -> anyhow::Result<Rolled> {
    let observer = observer.clone();
    let mut stages = vec![Stage::Legacy.to_string()];
    let mut refusals = Vec::new();
    emit(
        &observer,
        DemoEvent::Phase("stage legacy: every node runs the legacy lock".into()),
    );
    fleet.start_all(Mode::Legacy).await?;
    tokio::time::sleep(args.settle).await;
    show_status(env, &observer).await;

    emit(
        &observer,
        DemoEvent::Phase(
            "rolling restart into mode auto (combined while the stage is legacy)".into(),
        ),
    );
    restart_all(fleet, Mode::Auto, &observer).await?;
    show_status(env, &observer).await;

    let mut reached_complete = false;
    let steps: [(Stage, Option<Mode>); 3] = [
        (Stage::Dual, None),
        (Stage::Queue, Some(Mode::Queue)),
        (Stage::Complete, None),
    ];
    for (to, restart_into) in steps {
        emit(&observer, DemoEvent::Phase(format!("advance to {to}")));
        if !advance(env, to, &observer, &mut refusals).await? {
            break;
        }
        *shared.stage.lock().unwrap_or_else(PoisonError::into_inner) = to;
        stages.push(to.to_string());
        reached_complete = to == Stage::Complete;
        tokio::time::sleep(args.settle).await;
        show_status(env, &observer).await;
        if let Some(mode) = restart_into {
            emit(
                &observer,
                DemoEvent::Phase(format!("rolling restart into mode {mode}")),
            );
            restart_all(fleet, mode, &observer).await?;
            show_status(env, &observer).await;
        }
    }
    Ok(Rolled {
        stages,
        refusals,
        reached_complete,
    })
}

/// Everything that went wrong: two holders at once, a worker's errors,
/// and with `--pause-holder` a late write that was not refused.
fn violations(
    shared: &DemoWorld,
    args: &DemoArgs,
    fenced_refusals: u64,
    pause_holder: &[String],
) -> Vec<String> {
    let mut violations: Vec<String> = shared
        .oracle
        .violations()
        .iter()
        .map(Violation::held_at_once)
        .collect();
    violations.extend(
        shared
            .errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned(),
    );
    if args.pause_holder && fenced_refusals == 0 {
        violations.push(format!(
            "--pause-holder: no late write was refused ({})",
            if pause_holder.is_empty() {
                "no holder was paused".to_string()
            } else {
                pause_holder.join("; ")
            }
        ));
    }
    violations
}

/// Asks for `to` until the guards allow it (at most a minute), showing each
/// refusal's reasons.
async fn advance(
    env: &Env,
    to: Stage,
    observer: &Observer,
    refusals: &mut Vec<String>,
) -> anyhow::Result<bool> {
    let rollout = env.rollout();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let report = rollout
            .transition(TransitionRequest {
                to,
                by: "demo-operator".into(),
                reason: format!("demo: rolling to {to}"),
                dry_run: false,
                expected_from: None,
            })
            .await
            .with_context(|| format!("advancing to {to}"))?;
        if report.applied {
            emit(observer, DemoEvent::Line(format!("stage is now {to}")));
            return Ok(true);
        }
        let why = report.verdict.failures().join("; ");
        emit(
            observer,
            DemoEvent::Line(format!("refused: {why} — retrying in 1s")),
        );
        refusals.push(format!("{} -> {to}: {why}", report.verdict.from));
        if Instant::now() > deadline {
            emit(observer, DemoEvent::Line(format!("giving up on {to}")));
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn show_status(env: &Env, observer: &Observer) {
    match status(env, |_| {}).await {
        Ok(report) => emit(observer, DemoEvent::Status(Box::new(report))),
        Err(e) => emit(observer, DemoEvent::Line(format!("status failed: {e:#}"))),
    }
}
