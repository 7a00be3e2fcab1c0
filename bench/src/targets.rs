//! Where the benchmarks that run in this process run, besides the embedded
//! store: the local endpoint (the CQL emulator, in-process, with an
//! injected latency per round trip) and a keyspace of their own on a real
//! cluster. Shared by [`crate::fenced`], [`crate::observe`],
//! [`crate::census`] and [`crate::idle`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use lockshift_cql_emulator::{Emulator, EmulatorHandle, Fault, FaultRule};
use lockshift_store::{CqlSettings, CqlStore, MemoryStore, SharedStore};

use crate::error::BenchError;

/// The embedded store's target name.
pub(crate) const EMBEDDED: &str = "embedded store (in-process)";

/// The local endpoint, started in this process on a free port, and a
/// store connected to it (its keyspace created).
pub(crate) struct LocalEndpoint {
    endpoint: EmulatorHandle,
    store: Arc<CqlStore>,
    target: String,
}

impl LocalEndpoint {
    /// Starts an endpoint whose tables answer each round trip after
    /// `latency` (none when zero), and connects to it.
    ///
    /// # Errors
    /// The endpoint does not start, or the store cannot connect to it.
    pub(crate) async fn start(latency: Duration) -> Result<Self, BenchError> {
        let endpoint = Emulator::builder()
            .start(([127, 0, 0, 1], 0).into())
            .await?;
        if !latency.is_zero() {
            endpoint
                .faults()
                .add(FaultRule::new(Fault::Latency(latency)).on_table("lockshift.*"))?;
        }
        let local = CqlSettings {
            contact_points: vec![endpoint.local_addr().to_string()],
            create_schema: true,
            ..CqlSettings::default()
        };
        let store = Arc::new(CqlStore::connect(&local).await?);
        let target = format!(
            "local endpoint ({} per round trip)",
            lockshift_decide::duration::fmt_duration(latency)
        );
        Ok(LocalEndpoint {
            endpoint,
            store,
            target,
        })
    }

    /// The store connected to it.
    pub(crate) fn store(&self) -> SharedStore {
        self.store.clone()
    }

    /// What a report calls it: `local endpoint (2ms per round trip)`.
    pub(crate) fn target(&self) -> &str {
        &self.target
    }

    /// Closes this store's connection and stops the endpoint (its cells
    /// go with it). Stores handed out by [`store`](Self::store) that are
    /// still held fail from then on.
    pub(crate) async fn shutdown(self) {
        drop(self.store);
        self.endpoint.shutdown().await;
    }
}

/// Runs `measure` on each store a comparison covers, in turn, and gives
/// its runs in that order: the embedded store, the local endpoint with
/// `latency` per round trip (stopped once its run ends), and `cluster`
/// when given (its keyspace created if missing). Each run is handed the
/// store and the name a report gives it.
///
/// # Errors
/// The first of: the endpoint or the cluster cannot be reached, or a run
/// fails.
pub(crate) async fn on_each_store<R, F, Fut>(
    latency: Duration,
    cluster: Option<&CqlSettings>,
    mut measure: F,
) -> Result<Vec<R>, BenchError>
where
    F: FnMut(String, SharedStore) -> Fut,
    Fut: Future<Output = Result<R, BenchError>>,
{
    let mut runs = Vec::new();
    let embedded: SharedStore = Arc::new(MemoryStore::new());
    runs.push(measure(EMBEDDED.into(), embedded).await?);

    let endpoint = LocalEndpoint::start(latency).await?;
    runs.push(measure(endpoint.target().into(), endpoint.store()).await?);
    endpoint.shutdown().await;

    if let Some(cluster) = cluster {
        let mut create = cluster.clone();
        create.create_schema = true;
        let store: SharedStore = Arc::new(CqlStore::connect(&create).await?);
        let target = format!("cluster {}", store.describe());
        runs.push(measure(target, store).await?);
    }
    Ok(runs)
}

/// A keyspace of its own on `cluster`, `keyspace`, created the way
/// `migrate schema --apply` creates one (replication from the settings,
/// then every table's options), and a store connected to it. The caller
/// drops it when done ([`CqlStore::drop_keyspace`]).
///
/// # Errors
/// The cluster cannot be reached, or refuses to create the keyspace or a
/// table (a refused table option is only told to `progress`).
pub(crate) async fn own_keyspace(
    cluster: &CqlSettings,
    keyspace: &str,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<Arc<CqlStore>, BenchError> {
    let mut cql = cluster.clone();
    cql.keyspace = keyspace.to_string();
    cql.create_schema = false;
    progress(&format!("creating keyspace {keyspace}"));
    for step in CqlStore::apply_schema(&cql).await? {
        if let Some(refused) = step.refused {
            progress(&format!("schema: `{}` refused: {refused}", step.statement));
        }
    }
    Ok(Arc::new(CqlStore::connect(&cql).await?))
}

/// Drops the keyspace of `store` (one [`own_keyspace`] made) once the
/// work on it is `done`, whether it succeeded or not.
///
/// # Errors
/// `done`'s error first, else the drop's.
pub(crate) async fn drop_after<T>(
    store: &CqlStore,
    done: Result<T, BenchError>,
) -> Result<T, BenchError> {
    let dropped = store.drop_keyspace().await;
    let done = done?;
    dropped?;
    Ok(done)
}
