//! The workload: workers moving money between accounts under both
//! accounts' locks, the balances they read and write, and the holders the
//! exclusion checker records.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use anyhow::Context;
use lockshift::{LockGuard, Node};
use lockshift_lock::{AcquireOptions, LockId};
use lockshift_store::{CellWrite, RowQuery, SharedStore, Store, Timestamp, WriteOptions, schema};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::fleet::Shared;

/// One transfer loop.
pub(super) async fn worker(
    node: Node,
    store: SharedStore,
    shared: Arc<Shared>,
    stop: CancellationToken,
    seed: u64,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = shared.accounts.len();
    while !stop.is_cancelled() {
        let a = rng.random_range(0..n);
        let b = (a + rng.random_range(1..n)) % n;
        let amount = rng.random_range(1..=50_i64);
        match transfer(&node, store.as_ref(), &shared, &stop, a, b, amount).await {
            Ok(true) => {
                shared.transfers.fetch_add(1, Ordering::Relaxed);
            }
            Ok(false) => {
                if !stop.is_cancelled() {
                    shared.aborted.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) => {
                shared
                    .errors
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(format!("transfer failed half-way: {e:#}"));
            }
        }
        let pause = Duration::from_millis(rng.random_range(0..20));
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// Moves `amount` from account `from` to `to`. `Ok(false)`: abandoned
/// before any write (lock not taken, lease lost); `Err`: a write failed
/// after another had landed — money may have moved one way only.
async fn transfer(
    node: &Node,
    store: &dyn Store,
    shared: &Shared,
    stop: &CancellationToken,
    from: usize,
    to: usize,
    amount: i64,
) -> anyhow::Result<bool> {
    let (first, second) = (from.min(to), from.max(to));
    let options =
        || AcquireOptions::with_timeout(Duration::from_secs(30)).cancelled_by(stop.clone());
    let stage = *shared.stage.lock().unwrap_or_else(PoisonError::into_inner);
    let waited = Instant::now();
    let Ok(g1) = node
        .acquire_with(&lock_id(&shared.accounts[first])?, options())
        .await
    else {
        return Ok(false);
    };
    let g2 = match node
        .acquire_with(&lock_id(&shared.accounts[second])?, options())
        .await
    {
        Ok(g) => g,
        Err(_) => {
            let _ = g1.release().await;
            return Ok(false);
        }
    };
    let wait = waited.elapsed();
    let guards = [g1, g2];
    let holders = guards.each_ref().map(holder);
    for (lock, who) in &holders {
        shared.oracle.enter(lock, who);
    }
    let result = move_money(store, shared, &guards, from, to, amount).await;
    for (lock, who) in &holders {
        shared.oracle.exit(lock, who);
    }
    if matches!(result, Ok(true)) {
        shared
            .waits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(stage)
            .or_default()
            .push(wait);
        *shared
            .by_algorithm
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(guards[0].algorithm().to_string())
            .or_default() += 1;
    }
    for g in guards {
        let _ = g.release().await;
    }
    result
}

async fn move_money(
    store: &dyn Store,
    shared: &Shared,
    guards: &[LockGuard; 2],
    from: usize,
    to: usize,
    amount: i64,
) -> anyhow::Result<bool> {
    let (a, b) = (&shared.accounts[from], &shared.accounts[to]);
    let Ok((balance_a, wt_a)) = read_balance(store, a).await else {
        return Ok(false);
    };
    let Ok((balance_b, wt_b)) = read_balance(store, b).await else {
        return Ok(false);
    };
    // The lost signal fires before the lease can expire: checked last thing
    // before writing, a holder never writes after it has been told.
    if guards.iter().any(LockGuard::is_lost) {
        return Ok(false);
    }
    if write_balance(store, a, balance_a - amount, Some(wt_a))
        .await
        .is_err()
    {
        return Ok(false);
    }
    // The first write landed: the second must too, or the books are off.
    let mut last = None;
    for _ in 0..5 {
        match write_balance(store, b, balance_b + amount, Some(wt_b)).await {
            Ok(()) => return Ok(true),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("crediting {b} failed")))
}

fn lock_id(account: &str) -> anyhow::Result<LockId> {
    LockId::new(account).map_err(|e| anyhow::anyhow!("{e}"))
}

const BALANCE: &str = "balance";

async fn read_balance(store: &dyn Store, account: &str) -> anyhow::Result<(i64, Timestamp)> {
    let cells = store
        .read(
            schema::SCRATCH,
            account,
            &RowQuery::first(1).starting_at(BALANCE),
        )
        .await?;
    let cell = cells
        .into_iter()
        .find(|c| c.column == BALANCE)
        .with_context(|| format!("account {account} has no balance"))?;
    let value = std::str::from_utf8(&cell.value)
        .ok()
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("account {account}'s balance does not parse"))?;
    Ok((value, cell.writetime))
}

/// Writes a balance stamped after the version it replaces, whatever this
/// process's clock says (last write wins by timestamp).
pub(super) async fn write_balance(
    store: &dyn Store,
    account: &str,
    balance: i64,
    replaces: Option<Timestamp>,
) -> anyhow::Result<()> {
    let now = Timestamp::from_micros(
        i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_micros())
                .unwrap_or(0),
        )
        .unwrap_or(i64::MAX),
    );
    let at = replaces.map_or(now, |old| now.max(old.offset_micros(1)));
    store
        .write(
            schema::SCRATCH,
            account,
            &[CellWrite::new(BALANCE, balance.to_string().into_bytes())],
            WriteOptions::at(at),
        )
        .await?;
    Ok(())
}

pub(super) async fn total_balance(store: &dyn Store, accounts: &[String]) -> anyhow::Result<i64> {
    let mut sum = 0;
    for a in accounts {
        sum += read_balance(store, a).await?.0;
    }
    Ok(sum)
}

// ===== exclusion checker =====

/// The lock a guard holds and its holder, as the exclusion checker
/// ([`Oracle`](lockshift_harness::checker::Oracle)) names them:
/// `owner (algorithm)`.
fn holder(guard: &LockGuard) -> (String, String) {
    (
        guard.lock_id().to_string(),
        format!("{} ({})", guard.owner(), guard.algorithm()),
    )
}
