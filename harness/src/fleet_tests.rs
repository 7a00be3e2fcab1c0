use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use lockshift::Settings;
use lockshift::settings::StoreBackend;

use super::*;

/// Nodes on embedded stores; workers that wait for their stop, the first
/// worker of the second start panicking then; every worker's
/// (generation, index) recorded.
#[derive(Default)]
struct Idle {
    spawned: Arc<Mutex<Vec<(u64, usize)>>>,
    panics: AtomicUsize,
    no_store: bool,
}

impl Workload for Idle {
    type Env = usize;
    type Error = String;

    async fn build(&self, i: usize, mode: Mode, _: u64) -> Result<(NodeBuilder, usize), String> {
        let mut settings = Settings::default();
        settings.node.id = Some(format!("node{i}"));
        settings.node.mode = mode;
        if !self.no_store {
            settings.store.backend = Some(StoreBackend::Embedded);
        }
        Ok((Node::builder().settings(settings), i))
    }

    fn start_failed(&self, i: usize, error: StartError) -> String {
        format!("node{i}: {error}")
    }

    fn workers(&self) -> usize {
        2
    }

    fn worker(
        &self,
        _: Node,
        _: &usize,
        stop: CancellationToken,
        generation: u64,
        w: usize,
    ) -> impl Future<Output = ()> + Send + 'static {
        self.spawned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((generation, w));
        async move {
            stop.cancelled().await;
            assert!(!(generation == 2 && w == 0), "the worker panics as told");
        }
    }

    fn worker_panicked(&self, _: JoinError) {
        self.panics.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn nodes_start_restart_one_by_one_and_stop_with_their_workers() {
    let mut fleet = Fleet::new(Idle::default(), 2);
    fleet
        .start_all(Mode::Legacy)
        .await
        .expect("the fleet starts");
    assert_eq!(fleet.generation(), 2);
    let (node, env) = fleet.node(1).expect("node 1 runs");
    assert_eq!((node.status().configured, *env), (Mode::Legacy, 1));

    let mut restarted = Vec::new();
    fleet
        .restart_one_by_one(
            Mode::Queue,
            Duration::from_millis(1),
            |i| {
                if i == 0 {
                    Restart::Beside(Duration::from_millis(5))
                } else {
                    Restart::StopThenStart
                }
            },
            |i, node| restarted.push((i, node.status().configured)),
        )
        .await
        .expect("the fleet restarts");
    assert_eq!(restarted, [(0, Mode::Queue), (1, Mode::Queue)]);
    assert_eq!(fleet.generation(), 4);
    assert_eq!(fleet.workload().panics.load(Ordering::SeqCst), 1);

    fleet.stop_all().await;
    assert!(fleet.node(0).is_none() && fleet.node(1).is_none());
    let spawned = fleet
        .workload()
        .spawned
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let expected: Vec<(u64, usize)> = (1..=4).flat_map(|g| [(g, 0), (g, 1)]).collect();
    assert_eq!(spawned, expected);
}

#[tokio::test]
async fn a_node_that_cannot_start_is_the_workloads_error() {
    let mut fleet = Fleet::new(
        Idle {
            no_store: true,
            ..Idle::default()
        },
        1,
    );
    let error = fleet.start(0, Mode::Legacy).await.expect_err("no store");
    assert!(error.starts_with("node0: "), "{error}");
    assert!(fleet.node(0).is_none());
    assert_eq!(fleet.generation(), 1);
}
