//! What the facade's integration tests share: an embedded store on the
//! paused clock, and nodes on it.

#![allow(dead_code)] // each test binary uses its part

use std::sync::Arc;

use lockshift::prelude::*;
use lockshift_store::{MemoryStore, SharedClock, TokioClock};

/// An embedded store and the clock it and every node run on.
pub struct World {
    pub store: Arc<MemoryStore>,
    pub clock: SharedClock,
}

/// A world on tokio's (paused) clock.
pub fn world() -> World {
    let clock: SharedClock = Arc::new(TokioClock::new());
    World {
        store: Arc::new(MemoryStore::with_clock(clock.clone())),
        clock,
    }
}

/// A node `id` on the world's store and clock, default settings.
pub async fn node(w: &World, id: &str) -> Node {
    let mut settings = Settings::default();
    settings.node.id = Some(id.to_string());
    Node::builder()
        .settings(settings)
        .store(w.store.clone())
        .clock(w.clock.clone())
        .start()
        .await
        .expect("node starts")
}
