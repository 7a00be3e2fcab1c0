//! Where the fleet keeps its locks, and the durations of the scenario.

use std::sync::Arc;
use std::time::Duration;

use lockshift::Settings;
use lockshift_decide::algorithm::Mode;
use lockshift_store::{CqlSettings, CqlStore, SharedClock, SharedStore, SystemClock};

use crate::sim::Cluster;

/// Where the fleet's nodes keep their locks.
#[derive(Debug, Clone)]
pub enum Backend {
    /// One shared embedded store (use under a paused clock).
    Embedded(Cluster),
    /// The local endpoint (or a cluster): each node connects on its own.
    Cql(Box<CqlSettings>),
}

impl Backend {
    pub(super) async fn store_for_node(&self) -> (SharedStore, SharedClock) {
        match self {
            Backend::Embedded(cluster) => (cluster.store.clone(), cluster.clock.clone()),
            Backend::Cql(settings) => {
                let store = CqlStore::connect(settings).await.expect("a node connects");
                (Arc::new(store), Arc::new(SystemClock))
            }
        }
    }
}

/// The durations of the scenario: lease, periods, pauses between steps.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    /// Lease TTL.
    pub lease_ttl: Duration,
    /// Renewal period.
    pub renew_every: Duration,
    /// Stage re-read period.
    pub reread: Duration,
    /// How long a node trusts an unconfirmed stage view.
    pub valid_for: Duration,
    /// Quiet period (must exceed re-read + TTL + skew margin).
    pub quiet: Duration,
    /// Skew margin.
    pub skew_margin: Duration,
    /// Heartbeat period.
    pub heartbeat: Duration,
    /// Registry TTL.
    pub heartbeat_ttl: Duration,
    /// Pause between restarts and after phases.
    pub pause: Duration,
    /// Workers' think time between acquisitions: uniform below this.
    pub think: Duration,
    /// How long a legacy contender pauses at most when the lock is owned
    /// (`lock.legacy.owner_wait_max`).
    pub legacy_owner_wait: Duration,
}

impl Timings {
    /// Timings for a paused-clock run (simulated seconds are free).
    pub fn simulated() -> Self {
        Timings {
            lease_ttl: Duration::from_secs(10),
            renew_every: Duration::from_secs(2),
            reread: Duration::from_secs(2),
            valid_for: Duration::from_secs(5),
            quiet: Duration::from_secs(20),
            skew_margin: Duration::from_secs(1),
            heartbeat: Duration::from_secs(1),
            heartbeat_ttl: Duration::from_secs(4),
            pause: Duration::from_secs(3),
            think: Duration::from_millis(200),
            legacy_owner_wait: Duration::from_secs(1),
        }
    }

    /// Short timings for a real-time run.
    pub fn real_time() -> Self {
        Timings {
            lease_ttl: Duration::from_secs(3),
            renew_every: Duration::from_millis(500),
            reread: Duration::from_millis(500),
            valid_for: Duration::from_millis(1_200),
            quiet: Duration::from_millis(5_000),
            skew_margin: Duration::from_millis(500),
            heartbeat: Duration::from_millis(300),
            heartbeat_ttl: Duration::from_secs(1),
            pause: Duration::from_millis(700),
            think: Duration::from_millis(60),
            legacy_owner_wait: Duration::from_secs(1),
        }
    }

    /// Settings for node `i` (id `node{i}`) in `mode` with these timings.
    ///
    /// # Panics
    /// If the timings break a settings rule (a test bug).
    pub fn settings(&self, i: usize, mode: Mode) -> Settings {
        self.settings_for(&format!("node{i}"), mode)
    }

    /// Settings for node `id` in `mode` with these timings.
    ///
    /// # Panics
    /// If the timings break a settings rule (a test bug).
    pub fn settings_for(&self, id: &str, mode: Mode) -> Settings {
        Settings::from_toml(&self.toml(id, mode)).expect("valid scenario settings")
    }

    /// The same settings as a config file's text (for nodes whose config is
    /// edited while they run).
    pub fn toml(&self, id: &str, mode: Mode) -> String {
        let d = |d: Duration| format!("\"{}ms\"", d.as_millis());
        format!(
            "[node]\nid = \"{id}\"\nmode = \"{mode}\"\n\n\
             [lock]\nlease_ttl = {}\nrenew_every = {}\n\n\
             [lock.legacy]\nowner_wait_max = {}\n\n\
             [rollout]\nstage_reread_every = {}\nstage_valid_for = {}\nquiet_period = {}\n\
             clock_skew_margin = {}\nheartbeat_every = {}\nheartbeat_ttl = {}\n",
            d(self.lease_ttl),
            d(self.renew_every),
            d(self.legacy_owner_wait),
            d(self.reread),
            d(self.valid_for),
            d(self.quiet),
            d(self.skew_margin),
            d(self.heartbeat),
            d(self.heartbeat_ttl),
        )
    }

    /// The bound on unavailability: a lease TTL plus a re-read period.
    pub fn unavailability_bound(&self) -> Duration {
        self.lease_ttl + self.reread
    }
}
