//! The fleet: service nodes started, stopped, restarted one by one into a
//! new mode, each running workers that take locks.
//!
//! The rolling-restart tests and `migrate demo` drive the same life cycle
//! with different work: the tests count in critical sections, the demo
//! moves money. What differs is the caller's [`Workload`]: how a node is
//! built (its settings, store and clock) and what its workers do. What is
//! the same lives here, once: the start (each a new *generation* of the
//! fleet, from which the callers seed their random choices), the workers
//! spawned with a stop token, the stop (cancel, wait for the workers, shut
//! the node down) and the rolling restart.

use std::future::Future;
use std::time::Duration;

use lockshift::{Node, NodeBuilder, StartError};
use lockshift_decide::algorithm::Mode;
use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;

/// What a fleet runs: how one of its nodes is built and what its workers
/// do. The tests' workload counts in critical sections; the demo's moves
/// money between accounts.
pub trait Workload {
    /// What a node runs on besides the [`Node`] itself (its store
    /// connection, say), kept while it runs and lent to its workers.
    type Env: Send + Sync;
    /// Why a node could not start.
    type Error;

    /// How node `i` starts in `mode`, as the fleet's `generation`th start:
    /// the builder (settings, store, clock; the fleet calls
    /// [`start`](NodeBuilder::start)) and what the node runs on.
    fn build(
        &self,
        i: usize,
        mode: Mode,
        generation: u64,
    ) -> impl Future<Output = Result<(NodeBuilder, Self::Env), Self::Error>> + Send;

    /// The error for node `i`'s builder failing to start it.
    fn start_failed(&self, i: usize, error: StartError) -> Self::Error;

    /// How many workers each node runs.
    fn workers(&self) -> usize;

    /// Worker `w` of a node started as the fleet's `generation`th start:
    /// takes locks through `node` (a handle of its own) until `stop` is
    /// cancelled.
    fn worker(
        &self,
        node: Node,
        env: &Self::Env,
        stop: CancellationToken,
        generation: u64,
        w: usize,
    ) -> impl Future<Output = ()> + Send + 'static;

    /// A worker panicked (seen when its node stops). Ignored by default.
    fn worker_panicked(&self, error: JoinError) {
        let _ = error;
    }
}

/// How [`Fleet::restart_one_by_one`] restarts a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// Stop the node, then start it.
    StopThenStart,
    /// Start the replacement beside the running node under the same node
    /// id, as a container platform does, and stop the old process after
    /// this long, both running in between (issue 22).
    Beside(Duration),
}

/// One running node: the node, what it runs on, and its workers.
struct Running<E> {
    node: Node,
    env: E,
    stop: CancellationToken,
    workers: Vec<JoinHandle<()>>,
}

/// A fleet of nodes numbered from 0, each running or not, all running the
/// same [`Workload`].
#[derive(Debug)]
pub struct Fleet<W: Workload> {
    workload: W,
    nodes: Vec<Option<Running<W::Env>>>,
    generation: u64,
}

impl<E> std::fmt::Debug for Running<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running").finish_non_exhaustive()
    }
}

impl<W: Workload> Fleet<W> {
    /// A fleet of `size` nodes, none started yet.
    pub fn new(workload: W, size: usize) -> Self {
        Fleet {
            workload,
            nodes: (0..size).map(|_| None).collect(),
            generation: 0,
        }
    }

    /// The workload.
    pub fn workload(&self) -> &W {
        &self.workload
    }

    /// How many starts the fleet has made (each node start is one more).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Node `i` and what it runs on, when it runs.
    pub fn node(&self, i: usize) -> Option<(&Node, &W::Env)> {
        self.nodes[i].as_ref().map(|r| (&r.node, &r.env))
    }

    /// Starts node `i` in `mode` with its workers.
    ///
    /// # Errors
    /// The workload's, when the node cannot be built or started.
    pub async fn start(&mut self, i: usize, mode: Mode) -> Result<(), W::Error> {
        let running = self.launch(i, mode).await?;
        self.nodes[i] = Some(running);
        Ok(())
    }

    /// Starts every node in `mode`, in order.
    ///
    /// # Errors
    /// As [`start`](Self::start); the nodes before keep running.
    pub async fn start_all(&mut self, mode: Mode) -> Result<(), W::Error> {
        for i in 0..self.nodes.len() {
            self.start(i, mode).await?;
        }
        Ok(())
    }

    /// Starts a process of node `i` in `mode` without stopping one that
    /// runs.
    async fn launch(&mut self, i: usize, mode: Mode) -> Result<Running<W::Env>, W::Error> {
        self.generation += 1;
        let generation = self.generation;
        let (builder, env) = self.workload.build(i, mode, generation).await?;
        let node = builder
            .start()
            .await
            .map_err(|e| self.workload.start_failed(i, e))?;
        let stop = CancellationToken::new();
        let workers = (0..self.workload.workers())
            .map(|w| {
                tokio::spawn(
                    self.workload
                        .worker(node.clone(), &env, stop.clone(), generation, w),
                )
            })
            .collect();
        Ok(Running {
            node,
            env,
            stop,
            workers,
        })
    }

    /// Stops node `i`, if it runs: cancels its workers, waits for them,
    /// shuts the node down.
    pub async fn stop(&mut self, i: usize) {
        if let Some(r) = self.nodes[i].take() {
            r.stop.cancel();
            for w in r.workers {
                if let Err(e) = w.await {
                    self.workload.worker_panicked(e);
                }
            }
            r.node.shutdown().await;
        }
    }

    /// Stops every node, in order.
    pub async fn stop_all(&mut self) {
        for i in 0..self.nodes.len() {
            self.stop(i).await;
        }
    }

    /// Stops node `i`, then starts it in `mode`.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub async fn restart(&mut self, i: usize, mode: Mode) -> Result<(), W::Error> {
        self.stop(i).await;
        self.start(i, mode).await
    }

    /// Restarts every node into `mode`, one at a time in order, each the
    /// way `how` says; after each, calls `restarted` with the node and
    /// pauses for `pause`.
    ///
    /// # Errors
    /// As [`start`](Self::start); the restart stops there.
    pub async fn restart_one_by_one(
        &mut self,
        mode: Mode,
        pause: Duration,
        mut how: impl FnMut(usize) -> Restart,
        mut restarted: impl FnMut(usize, &Node),
    ) -> Result<(), W::Error> {
        for i in 0..self.nodes.len() {
            match how(i) {
                Restart::StopThenStart => self.restart(i, mode).await?,
                Restart::Beside(overlap) => {
                    let replacement = self.launch(i, mode).await?;
                    tokio::time::sleep(overlap).await;
                    self.stop(i).await;
                    self.nodes[i] = Some(replacement);
                }
            }
            if let Some(r) = &self.nodes[i] {
                restarted(i, &r.node);
            }
            tokio::time::sleep(pause).await;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "fleet_tests.rs"]
mod tests;
