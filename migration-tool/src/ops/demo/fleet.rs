//! The fleet: service nodes started, stopped and restarted into a mode,
//! each running workers; what they share, the wait statistics per stage and
//! the once-a-second progress line.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use lockshift::Node;
use lockshift_decide::algorithm::{Mode, Stage};
use lockshift_harness::checker::Oracle;
use lockshift_store::SharedClock;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cli::DemoArgs;

use super::transfers::worker;
use super::{Connector, DemoEvent, Observer, StageWaits, demo_settings, emit};

pub(super) struct Shared {
    pub(super) accounts: Vec<String>,
    pub(super) stage: Mutex<Stage>,
    pub(super) oracle: Oracle,
    pub(super) waits: Mutex<BTreeMap<Stage, Vec<Duration>>>,
    pub(super) by_algorithm: Mutex<BTreeMap<String, u64>>,
    pub(super) transfers: AtomicU64,
    pub(super) aborted: AtomicU64,
    pub(super) errors: Mutex<Vec<String>>,
    pub(super) clock: SharedClock,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

pub(super) struct Running {
    node: Node,
    stop: CancellationToken,
    workers: Vec<JoinHandle<()>>,
}

pub(super) struct FleetState {
    pub(super) args: DemoArgs,
    pub(super) shared: Arc<Shared>,
    pub(super) nodes: Vec<Option<Running>>,
    pub(super) generation: u64,
}

impl FleetState {
    pub(super) async fn start(
        &mut self,
        i: usize,
        mode: Mode,
        connector: &dyn Connector,
    ) -> anyhow::Result<()> {
        self.generation += 1;
        let store = connector.connect().await?;
        let node = Node::builder()
            .settings(demo_settings(Some(i), mode)?)
            .store(store.clone())
            .clock(self.shared.clock.clone())
            .start()
            .await
            .with_context(|| format!("starting node svc-{i}"))?;
        let stop = CancellationToken::new();
        let workers = (0..self.args.workers)
            .map(|w| {
                let seed = self.args.seed ^ (self.generation << 16) ^ u64::from(w);
                tokio::spawn(worker(
                    node.clone(),
                    store.clone(),
                    self.shared.clone(),
                    stop.clone(),
                    seed,
                ))
            })
            .collect();
        self.nodes[i] = Some(Running {
            node,
            stop,
            workers,
        });
        Ok(())
    }

    pub(super) async fn stop(&mut self, i: usize) {
        if let Some(r) = self.nodes[i].take() {
            r.stop.cancel();
            for w in r.workers {
                let _ = w.await;
            }
            r.node.shutdown().await;
        }
    }

    pub(super) async fn restart_all(
        &mut self,
        mode: Mode,
        connector: &dyn Connector,
        observer: &Observer,
    ) -> anyhow::Result<()> {
        let pause = self.args.settle / 2;
        for i in 0..self.nodes.len() {
            self.stop(i).await;
            self.start(i, mode, connector).await?;
            let effective = self.nodes[i]
                .as_ref()
                .map(|r| r.node.status().effective.to_string())
                .unwrap_or_default();
            emit(
                observer,
                DemoEvent::Line(format!(
                    "restarted svc-{i} in mode {mode} (runs {effective})"
                )),
            );
            tokio::time::sleep(pause).await;
        }
        Ok(())
    }
}

pub(super) fn wait_stats(shared: &Shared) -> Vec<StageWaits> {
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

pub(super) fn spawn_ticker(shared: Arc<Shared>, observer: Observer) -> JoinHandle<()> {
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
                    "[{:>3}s] stage {stage:<8} transfers {done:>6} (+{}/s; {by}), aborted {}",
                    started.elapsed().as_secs(),
                    done - last,
                    shared.aborted.load(Ordering::Relaxed)
                )),
            );
            last = done;
        }
    })
}
