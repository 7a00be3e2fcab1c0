//! A service that keeps an inventory under a lockshift lock, as a real one
//! would: `auto` mode (it follows the rollout stage), a fenced resource that
//! refuses writes from a holder that was replaced, work that stops the
//! moment the lease is lost, and a mode that changes when its config file
//! does — no restart.
//!
//! ```sh
//! migrate serve &                                               # a local endpoint on 127.0.0.1:9042
//! cargo run -p lockshift --example service -- examples/service/lockshift.toml
//! # in another terminal, while it runs:
//! sed -i 's/mode = "auto"/mode = "combined"/' examples/service/lockshift.toml   # switches within 10 s
//! migrate --contact-points 127.0.0.1:9042 advance --to dual     # the stage moves; `auto` follows
//! ```
//!
//! Stops after `--rounds N` rounds (default: runs until Ctrl-C), then shuts
//! the node down, which releases whatever it still holds.

use std::sync::Mutex;
use std::time::Duration;

use lockshift::prelude::*;
use lockshift::{Algorithm, LockGuard};

/// The guarded resource: it remembers the largest fencing token it has seen
/// and refuses anything older (docs/design.md §5). A real one keeps that
/// number next to the data, e.g. a column checked in the same transaction.
#[derive(Default)]
struct Inventory {
    largest_token: u64,
    items: u64,
}

impl Inventory {
    fn restock(&mut self, token: u64, items: u64) -> Result<u64, String> {
        if token < self.largest_token {
            return Err(format!(
                "refused: token {token} is older than {}",
                self.largest_token
            ));
        }
        self.largest_token = token;
        self.items += items;
        Ok(self.items)
    }
}

/// One round of work under the lock: stop at once if the lease is lost.
async fn work(guard: &LockGuard, inventory: &Mutex<Inventory>) -> Result<(), String> {
    let token = guard
        .fencing_token()
        .await
        .map_err(|e| format!("no fencing token: {e}"))?;
    for _ in 0..5 {
        tokio::select! {
            why = guard.until_lost() => return Err(format!("lease lost ({why}); stopping")),
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
        // Checked right before touching the resource; the token covers a
        // pause between this check and the write.
        if guard.is_lost() {
            return Err("lease lost; stopping".to_string());
        }
        let mut inventory = inventory.lock().map_err(|_| "inventory poisoned")?;
        let items = inventory.restock(token, 1)?;
        println!("  restocked with token {token}: {items} items");
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // lockshift logs through `tracing`: without a subscriber its warnings
    // (a lost lease, a stage it cannot confirm) would be silent.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,lockshift=info".into()),
        )
        .init();
    let mut args = std::env::args().skip(1);
    let mut config = "examples/service/lockshift.toml".to_string();
    let mut rounds = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--rounds" => {
                let n = args.next().unwrap_or_default();
                rounds = Some(n.parse::<u64>().map_err(|e| {
                    format!("--rounds takes a whole number of rounds, not {n:?}: {e}")
                })?);
            }
            path => config = path.to_string(),
        }
    }

    let node = Node::connect(&config).await?;
    println!("node {} started; config {config}", node.id());
    let inventory = Mutex::new(Inventory::default());
    let mut last: Option<(Mode, Algorithm, Option<Stage>)> = None;
    let mut round = 0u64;
    loop {
        let status = node.status();
        let now = (
            status.configured,
            status.effective,
            status.stage.as_ref().map(|s| s.stage),
        );
        if last != Some(now) {
            // Edits to `node.mode` in the file and stage changes land here
            // within `rollout.stage_reread_every`.
            println!(
                "mode {} → acquiring with {} at stage {}{}",
                now.0,
                now.1,
                now.2.map_or("unknown".to_string(), |s| s.to_string()),
                if status.view_expired {
                    " (cannot confirm the stage: acting as combined)"
                } else {
                    ""
                }
            );
            last = Some(now);
        }
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            acquired = node.acquire_with("inventory", AcquireOptions::with_timeout(Duration::from_secs(30))) => {
                match acquired {
                    Ok(guard) => {
                        println!("round {round}: holding inventory ({})", guard.algorithm());
                        if let Err(why) = work(&guard, &inventory).await {
                            eprintln!("round {round}: {why}");
                        }
                        if let Err(e) = guard.release().await {
                            eprintln!("release left cells to their TTL: {e}");
                        }
                    }
                    Err(e) if e.is_retryable() => eprintln!("round {round}: {e}; trying again"),
                    Err(e) => return Err(e.into()),
                }
            }
        }
        round += 1;
        if rounds.is_some_and(|n| round >= n) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Releases anything still held (a guard's `lost()` fires) and leaves
    // the registry; without it the lock would stay held for a lease TTL.
    node.shutdown().await;
    println!("shut down");
    Ok(())
}
