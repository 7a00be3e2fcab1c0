//! The fleet's workload: service nodes on connections of their own, each
//! running transfer workers, started, stopped and restarted by the shared
//! harness ([`lockshift_harness::fleet`]); what the workers share, the wait
//! statistics per stage and the once-a-second progress line.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lockshift::{Node, NodeBuilder, StartError};
use lockshift_decide::algorithm::{Mode, Stage};
use lockshift_harness::checker::Oracle;
use lockshift_harness::fleet::{Fleet, Restart, Workload};
use lockshift_store::{SharedClock, SharedStore};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cli::DemoArgs;

use super::pause::{Pausable, PauseFault};
use super::transfers::worker;
use super::{Connector, DemoEvent, Observer, StageWaits, demo_settings, emit};

pub(super) struct DemoWorld {
    pub(super) accounts: Vec<String>,
    pub(super) stage: Mutex<Stage>,
    pub(super) oracle: Oracle,
    pub(super) waits: Mutex<BTreeMap<Stage, Vec<Duration>>>,
    pub(super) by_algorithm: Mutex<BTreeMap<String, u64>>,
    pub(super) transfers: AtomicU64,
    pub(super) aborted: AtomicU64,
    /// Balance writes the store refused for a later holder's token.
    pub(super) fenced_refusals: AtomicU64,
    pub(super) pause: PauseFault,
    pub(super) errors: Mutex<Vec<String>>,
    pub(super) clock: SharedClock,
}

impl fmt::Debug for DemoWorld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DemoWorld").finish_non_exhaustive()
    }
}

/// The demo's workload: nodes `svc-{i}` on connections of their own,
/// workers moving money.
pub(super) struct Transfers<'a> {
    pub(super) args: DemoArgs,
    pub(super) shared: Arc<DemoWorld>,
    pub(super) connector: &'a dyn Connector,
}

impl Workload for Transfers<'_> {
    type Env = Arc<Pausable>;
    type Error = anyhow::Error;

    async fn build(
        &self,
        i: usize,
        mode: Mode,
        _: u64,
    ) -> anyhow::Result<(NodeBuilder, Arc<Pausable>)> {
        // The node and its workers share one connection, paused together
        // by `--pause-holder` (`pause.rs`).
        let store = Arc::new(Pausable::new(self.connector.connect().await?));
        let builder = Node::builder()
            .settings(demo_settings(Some(i), mode)?)
            .store(store.clone() as SharedStore)
            .clock(self.shared.clock.clone());
        Ok((builder, store))
    }

    fn start_failed(&self, i: usize, error: StartError) -> anyhow::Error {
        anyhow::Error::new(error).context(format!("starting node svc-{i}"))
    }

    fn workers(&self) -> usize {
        usize::from(self.args.workers)
    }

    fn worker(
        &self,
        node: Node,
        store: &Arc<Pausable>,
        stop: CancellationToken,
        generation: u64,
        w: usize,
    ) -> impl Future<Output = ()> + Send + 'static {
        let seed = self.args.seed ^ (generation << 16) ^ w as u64;
        worker(node, store.clone(), self.shared.clone(), stop, seed)
    }
}

/// Restarts every node into `mode`, one by one, telling the observer what
/// each runs now.
pub(super) async fn restart_all(
    fleet: &mut Fleet<Transfers<'_>>,
    mode: Mode,
    observer: &Observer,
) -> anyhow::Result<()> {
    let pause = fleet.workload().args.settle / 2;
    fleet
        .restart_one_by_one(
            mode,
            pause,
            |_| Restart::StopThenStart,
            |i, node| {
                let effective = node.status().effective.to_string();
                emit(
                    observer,
                    DemoEvent::Line(format!(
                        "restarted svc-{i} in mode {mode} (runs {effective})"
                    )),
                );
            },
        )
        .await
}

pub(super) fn wait_stats(shared: &DemoWorld) -> Vec<StageWaits> {
    let waits = shared.waits.lock().unwrap_or_else(PoisonError::into_inner);
    waits
        .iter()
        .map(|(stage, ws)| {
            let mut ms: Vec<f64> = ws.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
            ms.sort_by(f64::total_cmp);
            let n = ms.len();
            let p99 = ms
                .get((n * 99).div_ceil(100).saturating_sub(1))
                .copied()
                .unwrap_or(0.0);
            StageWaits {
                stage: stage.to_string(),
                transfers: n,
                mean_ms: if n == 0 {
                    0.0
                } else {
                    ms.iter().sum::<f64>() / n as f64
                },
                p99_ms: p99,
                max_ms: ms.last().copied().unwrap_or(0.0),
            }
        })
        .collect()
}

pub(super) fn spawn_ticker(shared: Arc<DemoWorld>, observer: Observer) -> JoinHandle<()> {
    tokio::spawn(async move {
        let started = Instant::now();
        let mut last = 0;
        let mut ticker = tokio::time::interval(Duration::from_secs(1));
        ticker.tick().await;
        loop {
            ticker.tick().await;
            let done = shared.transfers.load(Ordering::Relaxed);
            let stage = *shared.stage.lock().unwrap_or_else(PoisonError::into_inner);
            let by: BTreeMap<String, u64> = shared
                .by_algorithm
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            let by = by
                .iter()
                .map(|(a, n)| format!("{a} {n}"))
                .collect::<Vec<_>>()
                .join(", ");
            emit(
                &observer,
                DemoEvent::Tick(format!(
                    "[{:>3}s] stage {stage:<8} transfers {done:>6} (+{}/s; {by}), aborted {}, \
                     late writes refused {}",
                    started.elapsed().as_secs(),
                    done - last,
                    shared.aborted.load(Ordering::Relaxed),
                    shared.fenced_refusals.load(Ordering::Relaxed)
                )),
            );
            last = done;
        }
    })
}
