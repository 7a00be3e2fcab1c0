//! Building lockers of each algorithm for simulated nodes.

use std::sync::Arc;

use lockshift_combined::CombinedLocker;
use lockshift_legacy::{LegacyLocker, LegacySettings};
use lockshift_lock::Locker;
use lockshift_queue_lock::{QueueLocker, QueueSettings, TimeService, TimeSettings};

use crate::sim::NodeEnv;

/// A node's locker plus what must stay alive with it.
#[derive(Debug)]
pub struct NodeLocker {
    /// The locker.
    pub locker: Arc<dyn Locker>,
    /// The node's time service (its updater stops when dropped).
    pub time: Option<TimeService>,
}

/// A legacy locker for `env`.
pub fn legacy(env: &NodeEnv) -> NodeLocker {
    NodeLocker {
        locker: Arc::new(LegacyLocker::new(
            env.ctx.clone(),
            LegacySettings::default(),
        )),
        time: None,
    }
}

/// A queue locker for `env` with the default (hybrid) time service.
pub fn queue(env: &NodeEnv) -> NodeLocker {
    queue_with(env, QueueSettings::default(), TimeSettings::default())
}

/// A queue locker for `env` with the given settings.
pub fn queue_with(env: &NodeEnv, settings: QueueSettings, time: TimeSettings) -> NodeLocker {
    let service = TimeService::start(&time, env.store.clone(), env.clock.clone());
    NodeLocker {
        locker: Arc::new(QueueLocker::new(
            env.ctx.clone(),
            service.source(),
            settings,
        )),
        time: Some(service),
    }
}

/// A combined locker for `env` with the default (hybrid) time service.
pub fn combined(env: &NodeEnv) -> NodeLocker {
    let service = TimeService::start(
        &TimeSettings::default(),
        env.store.clone(),
        env.clock.clone(),
    );
    NodeLocker {
        locker: Arc::new(CombinedLocker::new(
            env.ctx.clone(),
            service.source(),
            QueueSettings::default(),
        )),
        time: Some(service),
    }
}
