//! A service's first lock: `migrate serve &`, then `cargo run` in this directory.
use lockshift::prelude::*;

#[lockshift::tokio::main(crate = "lockshift::tokio")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let node = Node::connect("lockshift.toml").await?;
    let guard = node.acquire("quickstart").await?;
    let token = guard.fencing_token().await?;
    println!("holding {} with fencing token {token}", guard.lock_id());
    guard.release().await?;
    node.shutdown().await;
    Ok(())
}
