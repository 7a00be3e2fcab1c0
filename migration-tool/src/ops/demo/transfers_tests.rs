//! What `--pause-holder` shows, made deterministic: a holder reads two
//! balances, pauses past its lease, a later holder moves money out of one
//! of them, and the first one wakes up and writes what it computed before
//! the pause. Without fencing its stale write lands and the books are off
//! — the demo's own check (`total_balance`) sees it; with fencing the
//! store refuses it, nothing is written, and the money adds up.

use std::sync::Arc;

use lockshift_store::{MemoryStore, Store};

use super::transfers::{Applied, Transfer, Write, open_account, total_balance};

const ACCOUNTS: [&str; 3] = ["account-000", "account-001", "account-002"];

/// The interleaving, with each holder's writes made as `how(token)` says.
/// Returns the total after it, and what the paused holder's writes did.
async fn paused_holder_wakes_late(store: &dyn Store, how: fn(u64) -> Write) -> (i64, Applied) {
    for a in ACCOUNTS {
        open_account(store, a, 1000).await.unwrap();
    }
    // P holds accounts 0 and 1 under token 10, reads both, decides to move
    // 50 from 0 to 1 — and pauses past its lease.
    let paused = Transfer::read(store, ACCOUNTS[0], ACCOUNTS[1], 50)
        .await
        .unwrap();
    // Q takes account 0's lock (and 2's) under token 11 and moves 30 from
    // 2 to 0.
    let later = Transfer::read(store, ACCOUNTS[2], ACCOUNTS[0], 30)
        .await
        .unwrap();
    assert_eq!(
        later.apply(store, how(11), how(11)).await.unwrap(),
        Applied::Both
    );
    // P wakes up and writes what it computed before the pause.
    let late = paused.apply(store, how(10), how(10)).await.unwrap();
    let accounts: Vec<String> = ACCOUNTS.iter().map(|a| a.to_string()).collect();
    (total_balance(store, &accounts).await.unwrap(), late)
}

#[tokio::test]
async fn without_fencing_the_paused_holders_late_write_breaks_the_books() {
    let store = Arc::new(MemoryStore::new());
    let (total, late) = paused_holder_wakes_late(store.as_ref(), |_| Write::Plain).await;
    assert_eq!(late, Applied::Both, "nothing stops a plain write");
    // Account 0 went back to 1000 - 50, erasing Q's +30: 30 vanished.
    assert_eq!(total, 3000 - 30, "the harness sees the money go missing");
}

#[tokio::test]
async fn with_fencing_the_late_write_is_refused_and_money_is_conserved() {
    let store = Arc::new(MemoryStore::new());
    let (total, late) = paused_holder_wakes_late(store.as_ref(), Write::Fenced).await;
    let Applied::Neither { refused } = late else {
        panic!("the late write landed: {late:?}")
    };
    assert_eq!(
        refused,
        "write to scratch/account-000 (column balance) refused: the row was last written under \
         fencing token 11, this holder's token is 10 — a later holder has written it"
    );
    assert_eq!(total, 3000, "money is conserved");
}
