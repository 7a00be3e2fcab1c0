//! Fenced writes: a service's own write that the database refuses once a
//! later holder of the lock has written (docs/design.md §5, "Fenced
//! writes").
//!
//! A holder paused past its lease — a GC pause, SIGSTOP, a VM migration —
//! may wake up and write after the next holder did, whatever it checked
//! before the pause. Its fencing token (`LockGuard::fencing_token`) is
//! smaller than the next holder's (§5, "Fencing tokens"), so the write is
//! made conditional on it: one lightweight transaction (a Paxos round)
//! that sets the cell *and* records the token beside it, applied only if
//! the token recorded there is not larger. The late write finds the larger
//! token and is refused by the database itself.
//!
//! - [`FencedWriter`]: the helper a service uses — a store, a lock and
//!   its holder's token; [`FencedWriter::write`] writes one cell or says
//!   who refused it ([`FencedWriteError::Refused`]). Its writes go where
//!   the lock's home is when each is sent ([`Route::HomeOf`]), never to a
//!   datacenter the caller names (docs/design.md §5, F1); a node hands
//!   one out for a guard it holds (`lockshift::Node::fenced_writer`).
//! - [`Store::write_fenced_via`] (a request, `Op::WriteFenced`): the conditional write every backend
//!   implements, answering a [`FencedOutcome`].
//! - [`decide`] and [`next_round`]: the pure rules both are made of
//!   (`lockshift_decide::fenced`'s, named here too).
//!
//! # Cost
//!
//! One Paxos round per fenced write (Cassandra 4.1: four round trips
//! between coordinator and replicas, against one for a plain write). A cell
//! with no token recorded yet takes two: `IF fence <= ?` cannot hold
//! against a null, so the write is sent again with `IF fence = null`
//! ([`next_round`]). `docs/benchmarks.md` has the measured ratio.
//!
//! # What it does not cover
//!
//! - A plain [`Store::delete`] of the cell removes its fence with it (the
//!   fence is a cell of the same CQL row), after which any token is
//!   accepted again: delete fenced data only when no holder may still
//!   write it, or overwrite it with a fenced write instead.
//! - The write carries no caller timestamp: Cassandra refuses `USING
//!   TIMESTAMP` on a conditional update and stamps it with the Paxos
//!   ballot, which is above every earlier ballot of the partition. Write a
//!   fenced cell only with fenced writes: a plain write with a timestamp of
//!   its own may land above or below them.
//! - No TTL: fenced data is the service's, kept until overwritten.

/// What a fenced write names — the store to connect, the tables, the cell,
/// the lock — here too, so a service that depends on `lockshift` alone
/// reaches them as `lockshift::fenced::…` (the same items as at the crate
/// root).
pub use crate::{CellWrite, CqlSettings, CqlStore, SharedStore, Table, schema};
/// The pure rules a fenced write is made of, defined in `lockshift-decide`.
pub use lockshift_decide::fenced::{Condition, Decision, MAX_ROUNDS, Next, decide, next_round};
pub use lockshift_decide::id::LockId;

#[cfg(doc)]
use crate::api::Store;
use crate::cell::OpKind;
use crate::error::{StoreError, StoreErrorKind};
use crate::route::Route;

/// What a fenced write did: the answer of [`Store::write_fenced_via`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FencedOutcome {
    /// Written, and the token recorded beside the value.
    Applied {
        /// Paxos rounds it took (on the embedded store: would take on a
        /// cluster): 1, or 2 when the cell had no token recorded yet.
        rounds: u32,
    },
    /// Refused: the cell records a larger token; nothing changed.
    Refused {
        /// The token recorded in the cell.
        recorded: u64,
        /// Paxos rounds it took (1, or 2 when a racing first write set
        /// the fence between them).
        rounds: u32,
    },
}

/// Refuses a token that CQL's `bigint` cannot hold; every backend checks
/// it, so all refuse the same calls.
pub(crate) fn check_token(token: u64, table: Table) -> Result<i64, StoreError> {
    i64::try_from(token).map_err(|_| {
        StoreError::new(
            StoreErrorKind::Invalid,
            OpKind::FencedWrite,
            Some(table),
            format!("fencing token {token} is larger than CQL's bigint holds (2^63 - 1)"),
        )
    })
}

// ===== FencedWriter =====

/// Writes cells of the store's tables conditionally on a holder's fencing
/// token, so that a holder paused past its lease cannot overwrite what the
/// next holder wrote: the database refuses it.
///
/// Each [`write`](Self::write) is one lightweight transaction (a Paxos
/// round; two for a cell never fenced before). Use it for the writes the
/// lock protects, with the token of the guard held while writing; read as
/// usual ([`Store::read`]).
///
/// A writer belongs to its lock ([`for_lock`](Self::for_lock)): each write
/// is routed as [`Route::HomeOf`] that lock, resolved when it is sent. On a
/// fleet with homes (docs/design.md §4a) that is the lock's home, at
/// `LOCAL_SERIAL`, only while the process's view confirms that home and
/// it serves — otherwise the write is refused without being sent, as the
/// lock's own requests are (F1, docs/design.md §5) — so write through the
/// node's homes-routed store: `lockshift::Node::fenced_writer` hands out
/// such a writer for a guard. On a store without homes the route is the
/// store's default. There is no way to pin a writer to a datacenter: a
/// home named when the writer was made may have moved by the time a
/// paused holder writes.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use lockshift_store::fenced::{FencedWriteError, FencedWriter, LockId};
/// use lockshift_store::{CellWrite, MemoryStore, schema};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let store = Arc::new(MemoryStore::new());
/// let lock = LockId::new("accounts").unwrap();
/// let balance = |v: i64| CellWrite::new("balance", v.to_string());
/// let paused = FencedWriter::for_lock(store.clone(), &lock, 41); // the holder that paused
/// let next = FencedWriter::for_lock(store.clone(), &lock, 42); // the one after it
/// next.write(schema::SCRATCH, "acct-3", &balance(90)).await?;
/// let late = paused.write(schema::SCRATCH, "acct-3", &balance(110)).await;
/// assert!(matches!(late, Err(FencedWriteError::Refused { recorded: 42, token: 41, .. })));
/// # Ok::<(), FencedWriteError>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct FencedWriter {
    store: SharedStore,
    token: u64,
    route: Route,
}

impl FencedWriter {
    /// Writes through `store` under `token` (`LockGuard::fencing_token`)
    /// of `lock`, each write routed to where `lock`'s home is when it is
    /// sent ([`Route::HomeOf`]; the store's default route on a store
    /// without homes).
    pub fn for_lock(store: SharedStore, lock: &LockId, token: u64) -> Self {
        FencedWriter {
            store,
            token,
            route: Route::HomeOf(lock.clone()),
        }
    }

    /// Writes through `store` under `token`, on the store's default route,
    /// tied to no lock: one Paxos round at `SERIAL` over every
    /// datacenter's replicas with the default `quorum` consistency (it
    /// stops while datacenters are cut apart), at `LOCAL_SERIAL` in the
    /// client's own datacenter with `local_quorum` — which across
    /// datacenters does not meet the successor's writes at another one.
    /// For a store of one datacenter, or of a fleet without homes; where
    /// locks have homes, use [`for_lock`](Self::for_lock) (F1).
    pub fn new(store: SharedStore, token: u64) -> Self {
        FencedWriter {
            store,
            token,
            route: Route::Default,
        }
    }

    /// The token the writes carry.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The lock whose home the writes go to (`None` for a writer made with
    /// [`new`](Self::new)).
    pub fn lock(&self) -> Option<&LockId> {
        self.route.lock()
    }

    /// Writes `cell` into `row` of `table` unless the cell records a larger
    /// token, and records this writer's token there.
    ///
    /// # Errors
    ///
    /// [`FencedWriteError::Refused`] when a later holder has written the
    /// cell (nothing changed); [`FencedWriteError::Store`] when the store
    /// failed — of kind [`StoreErrorKind::MaybeApplied`] after a timeout,
    /// when the write may still land (only if no larger token has landed
    /// first: it stays fenced) — or did not send it: of kind
    /// [`StoreErrorKind::HomeUnreachable`] when this process cannot
    /// confirm the lock's home now (its view expired, or the home moved
    /// and the new one is out of reach: the message names the home), of
    /// kind [`StoreErrorKind::Unavailable`] while a moved home does not
    /// serve yet (F1; nothing was sent in either case).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future is a timeout: the write may or may not land,
    /// and if it does, it was fenced.
    pub async fn write(
        &self,
        table: Table,
        row: &str,
        cell: &CellWrite,
    ) -> Result<(), FencedWriteError> {
        match self
            .store
            .write_fenced_via(&self.route, table, row, cell, self.token)
            .await?
        {
            FencedOutcome::Applied { .. } => Ok(()),
            FencedOutcome::Refused { recorded, .. } => Err(FencedWriteError::Refused {
                table,
                row: row.to_string(),
                column: cell.column.clone(),
                recorded,
                token: self.token,
            }),
        }
    }
}

/// Why a [`FencedWriter::write`] did not write.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FencedWriteError {
    /// The database refused the write: the cell records a larger token, so
    /// a later holder of the lock has written it and this holder's lease
    /// is over. Nothing changed; stop writing under this token.
    #[error(
        "write to {table}/{row} (column {column}) refused: the row was last written under \
         fencing token {recorded}, this holder's token is {token} — a later holder has written it"
    )]
    Refused {
        /// The table.
        table: Table,
        /// The row key.
        row: String,
        /// The column written.
        column: String,
        /// The token recorded in the cell.
        recorded: u64,
        /// This writer's token.
        token: u64,
    },
    /// The store failed; [`StoreError::may_have_applied`] says whether the
    /// write may still land.
    #[error("fenced write failed: {0}")]
    Store(StoreError),
}

// By hand, not `#[from]`: the message shows the cause, so it is not also
// chained as the source (the workspace's rule for error types).
impl From<StoreError> for FencedWriteError {
    fn from(e: StoreError) -> Self {
        FencedWriteError::Store(e)
    }
}

impl FencedWriteError {
    /// Whether the database refused the write for a larger token (the
    /// holder's lease is over), as opposed to a store failure.
    pub fn is_refused(&self) -> bool {
        matches!(self, FencedWriteError::Refused { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_names_what_refused_and_why() {
        let e = FencedWriteError::Refused {
            table: crate::schema::SCRATCH,
            row: "acct-3".into(),
            column: "balance".into(),
            recorded: 42,
            token: 41,
        };
        assert_eq!(
            e.to_string(),
            "write to scratch/acct-3 (column balance) refused: the row was last written under \
             fencing token 42, this holder's token is 41 — a later holder has written it"
        );
        assert!(e.is_refused());
    }

    #[test]
    fn a_token_beyond_bigint_is_invalid() {
        assert_eq!(check_token(7, crate::schema::SCRATCH), Ok(7));
        let e = check_token(u64::MAX, crate::schema::SCRATCH).unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Invalid);
        assert_eq!(e.op(), OpKind::FencedWrite);
    }
}
