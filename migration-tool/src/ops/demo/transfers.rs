//! The workload: workers moving money between accounts under both
//! accounts' locks, the balances they read and write, and the holders the
//! exclusion checker records.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use anyhow::Context;
use lockshift::{LockGuard, Node};
use lockshift_lock::{AcquireOptions, LockId};
#[cfg(test)]
use lockshift_store::WriteOptions;
use lockshift_store::{
    CellWrite, FencedOutcome, FencedWriteError, RowQuery, Store, Timestamp, schema,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::fleet::DemoWorld;
use super::pause::{PAUSE_LIMIT, Pausable};

/// One transfer loop.
pub(super) async fn worker(
    node: Node,
    store: Arc<Pausable>,
    shared: Arc<DemoWorld>,
    stop: CancellationToken,
    seed: u64,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = shared.accounts.len();
    while !stop.is_cancelled() {
        let a = rng.random_range(0..n);
        let b = (a + rng.random_range(1..n)) % n;
        let amount = rng.random_range(1..=50_i64);
        match transfer(&node, &store, &shared, &stop, a, b, amount).await {
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
    store: &Pausable,
    shared: &DemoWorld,
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
    // The checker counts a holder from its acquisition until its release
    // — or until its lost signal fires: from then on another may hold the
    // lock, and what the lost holder still sends is a late write, which
    // the fence refuses (`--pause-holder`), not a second holder.
    let lost = guards.each_ref().map(LockGuard::lost);
    let mut work = Box::pin(move_money(store, shared, &guards, from, to, amount));
    let mut inside = [true, true];
    let result = 'done: loop {
        tokio::select! {
            result = &mut work => break 'done result,
            _ = lost[0].cancelled(), if inside[0] => {
                shared.oracle.exit(&holders[0].0, &holders[0].1);
                inside[0] = false;
            }
            _ = lost[1].cancelled(), if inside[1] => {
                shared.oracle.exit(&holders[1].0, &holders[1].1);
                inside[1] = false;
            }
        }
    };
    drop(work);
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

/// What a transfer's guards let it do, read before it writes.
async fn move_money(
    store: &Pausable,
    shared: &DemoWorld,
    guards: &[LockGuard; 2],
    from: usize,
    to: usize,
    amount: i64,
) -> anyhow::Result<bool> {
    let (a, b) = (&shared.accounts[from], &shared.accounts[to]);
    // Each account's balance is written under its own lock's token. The
    // first call per guard costs two round trips (docs/design.md §5).
    let (Ok(token_a), Ok(token_b)) = (
        guards[0].fencing_token().await,
        guards[1].fencing_token().await,
    ) else {
        return Ok(false);
    };
    // Guards are in lock-id order; accounts in transfer order.
    let (token_a, token_b) = if from < to {
        (token_a, token_b)
    } else {
        (token_b, token_a)
    };
    let Ok(plan) = Transfer::read(store, a, b, amount).await else {
        return Ok(false);
    };
    // The lost signal fires before the lease can expire: checked last thing
    // before writing, a holder never writes after it has been told — unless
    // it pauses right here, which is what the fencing tokens are for.
    if guards.iter().any(LockGuard::is_lost) {
        return Ok(false);
    }
    if shared.pause.claim() {
        pause_here(store, shared, &plan, [token_a, token_b]).await;
    }
    let _no_split = store.writing().await;
    match plan
        .apply(store, Write::Fenced(token_a), Write::Fenced(token_b))
        .await?
    {
        Applied::Both => Ok(true),
        Applied::Neither { refused } => {
            shared.fenced_refusals.fetch_add(1, Ordering::Relaxed);
            shared
                .pause
                .note(format!("the late write was refused: {refused}"));
            Ok(false)
        }
    }
}

/// `--pause-holder`: pauses this worker's node (see `pause.rs`) until a
/// later holder has written `plan`'s first account, for at least a lease
/// TTL and a second.
async fn pause_here(store: &Pausable, shared: &DemoWorld, plan: &Transfer, tokens: [u64; 2]) {
    let started = Instant::now();
    let at_least = shared.pause.at_least;
    let observer = store.inner().clone();
    let (account, seen) = (plan.from.clone(), plan.from_written);
    let mut overtaken = false;
    store
        .pause_until(async {
            tokio::time::sleep(at_least).await;
            while started.elapsed() < PAUSE_LIMIT {
                if read_balance(observer.as_ref(), &account)
                    .await
                    .is_ok_and(|(_, written)| written != seen)
                {
                    overtaken = true;
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
    shared.pause.note(format!(
        "paused a holder of {} and {} (tokens {} and {}) after its last lease check, for {:.1} s; {}",
        plan.from,
        plan.to,
        tokens[0],
        tokens[1],
        started.elapsed().as_secs_f64(),
        if overtaken {
            format!("a later holder wrote {account} meanwhile")
        } else {
            format!("no later holder wrote {account} within {PAUSE_LIMIT:?}")
        }
    ));
}

fn lock_id(account: &str) -> anyhow::Result<LockId> {
    LockId::new(account).map_err(|e| anyhow::anyhow!("{e}"))
}

const BALANCE: &str = "balance";

/// A transfer read and decided: the new balances of both accounts, and
/// when the balances it read were written.
#[derive(Debug, Clone)]
pub(super) struct Transfer {
    pub(super) from: String,
    pub(super) to: String,
    new_from: i64,
    new_to: i64,
    from_written: Timestamp,
    to_written: Timestamp,
}

/// How a balance is written.
#[derive(Debug, Clone, Copy)]
pub(super) enum Write {
    /// Under this fencing token: refused after a later holder's write.
    Fenced(u64),
    /// A plain write stamped after the version it replaces (what the demo
    /// did before fenced writes; kept for the test that shows what a
    /// paused holder does without them).
    #[cfg(test)]
    Plain,
}

/// What [`Transfer::apply`] did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Applied {
    /// Both balances written.
    Both,
    /// The first write was refused (nothing written): why.
    Neither { refused: String },
}

impl Transfer {
    /// Reads both balances and decides the new ones.
    pub(super) async fn read(
        store: &dyn Store,
        from: &str,
        to: &str,
        amount: i64,
    ) -> anyhow::Result<Transfer> {
        let (balance_from, from_written) = read_balance(store, from).await?;
        let (balance_to, to_written) = read_balance(store, to).await?;
        Ok(Transfer {
            from: from.to_string(),
            to: to.to_string(),
            new_from: balance_from - amount,
            new_to: balance_to + amount,
            from_written,
            to_written,
        })
    }

    /// Writes both balances: the debit, then the credit. A refused debit
    /// writes nothing; once the debit landed the credit must too (it is
    /// retried), or the books are off: an error.
    pub(super) async fn apply(
        &self,
        store: &dyn Store,
        how_from: Write,
        how_to: Write,
    ) -> anyhow::Result<Applied> {
        match write_balance(
            store,
            &self.from,
            self.new_from,
            how_from,
            self.from_written,
        )
        .await?
        {
            Written::Yes => {}
            Written::Refused(why) => return Ok(Applied::Neither { refused: why }),
        }
        let mut last = None;
        for _ in 0..5 {
            match write_balance(store, &self.to, self.new_to, how_to, self.to_written).await {
                Ok(Written::Yes) => return Ok(Applied::Both),
                Ok(Written::Refused(why)) => {
                    anyhow::bail!(
                        "{} was debited but its credit to {} was refused: {why}",
                        self.from,
                        self.to
                    )
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("crediting {} failed", self.to)))
    }
}

pub(super) async fn read_balance(
    store: &dyn Store,
    account: &str,
) -> anyhow::Result<(i64, Timestamp)> {
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

/// Whether a balance write landed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Written {
    Yes,
    /// Refused by its fence: the refusal's words.
    Refused(String),
}

/// Writes a balance as `how` says. `replaces`: when the balance it
/// replaces was written (a plain write is stamped after it).
pub(super) async fn write_balance(
    store: &dyn Store,
    account: &str,
    balance: i64,
    how: Write,
    replaces: Timestamp,
) -> anyhow::Result<Written> {
    let cell = CellWrite::new(BALANCE, balance.to_string().into_bytes());
    match how {
        Write::Fenced(token) => {
            // The store stamps a fenced write above what it replaces.
            let _ = replaces;
            match store
                .write_fenced(schema::SCRATCH, account, &cell, token)
                .await?
            {
                FencedOutcome::Applied { .. } => Ok(Written::Yes),
                FencedOutcome::Refused { recorded, .. } => Ok(Written::Refused(
                    FencedWriteError::Refused {
                        table: schema::SCRATCH,
                        row: account.to_string(),
                        column: BALANCE.to_string(),
                        recorded,
                        token,
                    }
                    .to_string(),
                )),
                _ => anyhow::bail!("a fenced write of {account} answered an unknown outcome"),
            }
        }
        #[cfg(test)]
        Write::Plain => {
            let now = Timestamp::from_micros(
                i64::try_from(
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_micros())
                        .unwrap_or(0),
                )
                .unwrap_or(i64::MAX),
            );
            let at = now.max(replaces.offset_micros(1));
            store
                .write(schema::SCRATCH, account, &[cell], WriteOptions::at(at))
                .await?;
            Ok(Written::Yes)
        }
    }
}

/// Opens `account` with `balance`, under token 0: every holder's token is
/// larger, and a fenced cell is written only with fenced writes.
pub(super) async fn open_account(
    store: &dyn Store,
    account: &str,
    balance: i64,
) -> anyhow::Result<()> {
    match write_balance(
        store,
        account,
        balance,
        Write::Fenced(0),
        Timestamp::from_micros(0),
    )
    .await?
    {
        Written::Yes => Ok(()),
        Written::Refused(why) => anyhow::bail!("opening {account}: {why}"),
    }
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
