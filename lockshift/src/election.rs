//! Leader election on a lock (docs/design.md §5b): [`Election::campaign`]
//! waits its turn for the election's lock — first come, first served where
//! the queue lock runs — and records the leader; [`Election::leader`] reads
//! who leads; [`Election::observe`] follows it. Every stage of the rollout takes
//! the lock with its own algorithm, and the record is read the same way
//! whichever took it, so leadership works across a stage change: there is
//! one leader at a time because there is one holder at a time.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lockshift_decide::election::{LeaderRecord, check_value, leader_column};
use lockshift_lock::{
    AcquireError, AcquireOptions, FenceError, LeaseLostReason, LockId, ReleaseError, write_leader,
};
use lockshift_store::{Clock, SharedStore, StoreError};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span};

use crate::{LockGuard, Node};

/// How often an observer reads who leads: it sees a new leader within
/// this plus one read, at one read of the lock's fencing row per period
/// (2 reads a second), at the lock's home.
pub const OBSERVE_EVERY: Duration = Duration::from_millis(500);

/// The first pause before writing a leader record again after a transient
/// failure; pauses double up to [`RECORD_RETRY_MAX`].
const RECORD_RETRY_FIRST: Duration = Duration::from_millis(20);
/// The longest pause between two writes of a leader record.
const RECORD_RETRY_MAX: Duration = Duration::from_secs(1);

/// Who leads an election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leader {
    /// The leader's node id.
    pub node: String,
    /// What it proclaimed.
    pub value: String,
    /// When it became leader, by its clock.
    pub since: SystemTime,
    /// The lock's fencing token it holds: a resource that refuses smaller
    /// tokens refuses every former leader.
    pub token: u64,
}

impl Leader {
    fn of(record: LeaderRecord) -> Leader {
        let since = u64::try_from(record.since)
            .map_or(UNIX_EPOCH, |us| UNIX_EPOCH + Duration::from_micros(us));
        Leader {
            node: record.node,
            value: record.value,
            since,
            token: record.token,
        }
    }
}

impl fmt::Display for Leader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (token {}", self.node, self.token)?;
        if !self.value.is_empty() {
            write!(
                f,
                ", value {:?}",
                lockshift_decide::id::cut_short(&self.value)
            )?;
        }
        f.write_str(")")
    }
}

/// Why a campaign did not end in leadership.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CampaignError {
    /// The proclaimed value is refused (too long, or a control character).
    #[error("election {election}: {reason}")]
    InvalidValue {
        /// The election.
        election: LockId,
        /// Why.
        reason: String,
    },
    /// A guard of another lock was handed to [`Election::proclaim`].
    #[error("election {election}: the guard holds {held}, not the election's lock")]
    OtherLock {
        /// The election.
        election: LockId,
        /// The lock the guard holds.
        held: LockId,
    },
    /// Taking the election's lock failed (timeout, store, node stopped…).
    #[error("{0}")]
    Acquire(AcquireError),
    /// The lock is held, but its fencing token or the leader record could
    /// not be written (a campaign releases the lock again).
    #[error("election {election}: holds the lock but could not record the leadership ({why})")]
    Record {
        /// The election.
        election: LockId,
        /// What failed.
        why: String,
    },
}

impl From<AcquireError> for CampaignError {
    fn from(e: AcquireError) -> Self {
        CampaignError::Acquire(e)
    }
}

/// Leadership of an election: the election's lock, held, and the leader
/// record observers read. Watch [`lost`](Leadership::lost) as a holder
/// watches its guard's, and hand a resource [`token`](Leadership::token).
#[must_use = "leadership lasts only while this lives: `resign().await` it when done"]
#[derive(Debug)]
pub struct Leadership {
    election: Election,
    guard: LockGuard,
    leader: Leader,
}

impl Leadership {
    /// The election led.
    pub fn election(&self) -> &Election {
        &self.election
    }

    /// This leader as observers read it.
    pub fn leader(&self) -> &Leader {
        &self.leader
    }

    /// The election's lock, held: its owner id, its algorithm, its checks.
    pub fn guard(&self) -> &LockGuard {
        &self.guard
    }

    /// The fencing token of this leadership.
    pub fn token(&self) -> u64 {
        self.leader.token
    }

    /// Fires when the leadership can no longer be relied on (the lease is
    /// lost, or the node revoked the lock): stop acting as leader.
    pub fn lost(&self) -> CancellationToken {
        self.guard.lost()
    }

    /// [`lost`](Self::lost) as a future.
    pub async fn until_lost(&self) -> LeaseLostReason {
        self.guard.until_lost().await
    }

    /// Whether the leadership is lost.
    pub fn is_lost(&self) -> bool {
        self.guard.is_lost()
    }

    /// Proclaims a new value: the leader record is replaced, and
    /// [`leader`](Self::leader) shows it once this returns.
    ///
    /// # Errors
    /// As [`Election::proclaim`]. The leadership stays, and
    /// [`leader`](Self::leader) keeps the last value known written; after
    /// a write that timed out the record may hold either value.
    pub async fn proclaim(&mut self, value: impl Into<String>) -> Result<&Leader, CampaignError> {
        self.leader = self.election.proclaim(&self.guard, value).await?;
        Ok(&self.leader)
    }

    /// Steps down: releases the lock (the record goes with it), so the next
    /// candidate in line leads.
    ///
    /// # Errors
    /// As [`LockGuard::release`]: the cells are left to their TTL.
    pub async fn resign(self) -> Result<(), ReleaseError> {
        self.guard.release().await
    }
}

/// An election: a lock whose holder leads and says so in a leader record
/// that anyone can read. [`Node::election`] hands one out, as
/// [`Node::semaphore`] hands out a semaphore; it is cheap to clone, and
/// like a [`Node`] clone it keeps the node running while it lives.
///
/// [`campaign`](Self::campaign) waits its turn for the election's lock,
/// first come, first served where the queue lock runs, then records the
/// leader. [`leader`](Self::leader) reads who leads, and
/// [`observe`](Self::observe) follows it.
#[derive(Clone, Debug)]
pub struct Election {
    node: Node,
    id: LockId,
}

impl Election {
    pub(crate) fn new(node: Node, id: LockId) -> Election {
        Election { node, id }
    }

    /// The election's name: the name of its lock.
    pub fn name(&self) -> &LockId {
        &self.id
    }

    /// Campaigns proclaiming `value`: waits its turn for the election's
    /// lock (first come, first served where the queue lock runs), then
    /// records this node as leader: its node id, `value`, the time and the
    /// lock's fencing token, where [`leader`](Self::leader) and
    /// [`observe`](Self::observe) read it. The record lives as long as the
    /// lock is held.
    ///
    /// # Errors
    /// [`CampaignError::InvalidValue`] for a value longer than 4 KiB or
    /// holding a control character; [`CampaignError::Acquire`] as
    /// [`Node::acquire_with`]; [`CampaignError::Record`] when the record
    /// could not be written (the lock is released).
    ///
    /// # Cancel safety
    /// Cancel safe while waiting (as `acquire`); dropped after the lock was
    /// taken, the lock is released in the background.
    pub async fn campaign(
        &self,
        value: impl Into<String>,
        options: AcquireOptions,
    ) -> Result<Leadership, CampaignError> {
        let value = self.checked(value.into())?;
        let span = info_span!("campaign", election = %self.id, node = %self.node.id());
        async {
            let guard = self.node.acquire_id(&self.id, options).await?;
            match self.record(&guard, value).await {
                Ok(leader) => Ok(Leadership {
                    election: self.clone(),
                    guard,
                    leader,
                }),
                Err(e) => {
                    let _ = guard.release().await;
                    Err(e)
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Records the holder of `guard`, a guard of this election's lock taken
    /// some other way than [`campaign`](Self::campaign) (with
    /// [`Node::acquire_with`], say), as the leader, proclaiming `value`.
    /// Called again, it proclaims a new value (the record is replaced); a
    /// [`Leadership`] does the same with [`Leadership::proclaim`].
    ///
    /// # Errors
    /// [`CampaignError::InvalidValue`]; [`CampaignError::OtherLock`] when
    /// `guard` holds another lock; [`CampaignError::Record`] when the
    /// fencing token or the record could not be written (the lock stays
    /// held: release it or try again).
    pub async fn proclaim(
        &self,
        guard: &LockGuard,
        value: impl Into<String>,
    ) -> Result<Leader, CampaignError> {
        if guard.lock_id() != &self.id {
            return Err(CampaignError::OtherLock {
                election: self.id.clone(),
                held: guard.lock_id().clone(),
            });
        }
        let value = self.checked(value.into())?;
        self.record(guard, value).await
    }

    fn checked(&self, value: String) -> Result<String, CampaignError> {
        match check_value(&value) {
            Ok(()) => Ok(value),
            Err(reason) => Err(CampaignError::InvalidValue {
                election: self.id.clone(),
                reason,
            }),
        }
    }

    /// Writes the leader record of the holder of `guard`, a guard of this
    /// election's lock.
    async fn record(&self, guard: &LockGuard, value: String) -> Result<Leader, CampaignError> {
        let failed = |why: String| CampaignError::Record {
            election: self.id.clone(),
            why,
        };
        let token = guard.fencing_token().await.map_err(|e| {
            failed(match e {
                FenceError::Store { error, .. } => format!("its fencing token: {error}"),
                other => other.to_string(),
            })
        })?;
        let record = LeaderRecord {
            node: self.node.id().to_string(),
            owner: guard.owner().to_string(),
            value,
            since: self.node.clock().now().as_micros(),
            token,
        };
        let bytes = serde_json::to_vec(&record).map_err(|e| failed(e.to_string()))?;
        let column = leader_column(guard.owner().as_str());
        // Written again after a transient failure, while the lease holds
        // (the fencing token is taken the same way): the same cell, so a
        // write that did land is merely renewed.
        let mut pause = RECORD_RETRY_FIRST;
        loop {
            match write_leader(guard, &column, &bytes).await {
                Some(Ok(())) => return Ok(Leader::of(record)),
                Some(Err(e)) if e.is_retryable() && !guard.is_lost() => {
                    debug!(election = %self.id, error = %e, "writing the leader record: again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(RECORD_RETRY_MAX);
                }
                Some(Err(e)) => return Err(failed(e.to_string())),
                None => return Err(failed("the lock was revoked".to_string())),
            }
        }
    }

    /// Who leads now, read at the lock's home (`None`: nobody).
    ///
    /// # Errors
    /// The store error.
    pub async fn leader(&self) -> Result<Option<Leader>, ElectionReadError> {
        read_leader(self.node.store(), &self.id)
            .await
            .map_err(|error| ElectionReadError::Store {
                election: self.id.clone(),
                error,
            })
    }

    /// Follows who leads: a [`LeaderWatch`] whose value changes within
    /// [`OBSERVE_EVERY`] plus one read of a change, at a cost of one read
    /// every [`OBSERVE_EVERY`] for as long as it lives (or until the node
    /// stops).
    pub fn observe(&self) -> LeaderWatch {
        let (tx, rx) = watch::channel(Observed::default());
        let store = self.node.store().clone();
        let stop = self.node.stopped();
        let election = self.id.clone();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(OBSERVE_EVERY);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    biased;
                    () = tx.closed() => return,
                    () = stop.cancelled() => return,
                    _ = ticker.tick() => {}
                }
                let read = read_leader(&store, &election).await;
                tx.send_if_modified(|seen| match read {
                    Ok(leader) => {
                        let changed = seen.leader != leader || !seen.read;
                        seen.leader = leader;
                        seen.read = true;
                        seen.error = None;
                        changed
                    }
                    Err(e) => {
                        debug!(%election, error = %e, "observing the leader: read failed");
                        seen.error = Some(e.to_string());
                        false
                    }
                });
            }
        });
        LeaderWatch { rx }
    }
}

/// Why who leads could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ElectionReadError {
    /// The store failed.
    #[error("reading the leader of {election}: {error}")]
    Store {
        /// The election.
        election: LockId,
        /// The store error.
        error: StoreError,
    },
}

/// The current leader of `election`.
async fn read_leader(store: &SharedStore, election: &LockId) -> Result<Option<Leader>, StoreError> {
    Ok(lockshift_lock::read_leader(store.as_ref(), election)
        .await?
        .map(Leader::of))
}

#[derive(Clone, Debug, Default)]
struct Observed {
    read: bool,
    leader: Option<Leader>,
    error: Option<String>,
}

/// Who leads an election, kept current by a background read every
/// [`OBSERVE_EVERY`] for as long as this (or a clone) lives.
#[derive(Clone, Debug)]
pub struct LeaderWatch {
    rx: watch::Receiver<Observed>,
}

impl LeaderWatch {
    /// The leader as last read (`None`: nobody, or not read yet).
    pub fn current(&self) -> Option<Leader> {
        self.rx.borrow().leader.clone()
    }

    /// The last read's failure, if the last read failed (the leader shown
    /// is then the one read before it).
    pub fn last_error(&self) -> Option<String> {
        self.rx.borrow().error.clone()
    }

    /// Waits for the first read, then for each change of leader (a new
    /// leader, or nobody), and returns it. `None` from the outer option
    /// when the node stopped.
    pub async fn changed(&mut self) -> Option<Option<Leader>> {
        self.rx.changed().await.ok()?;
        Some(self.rx.borrow_and_update().leader.clone())
    }
}
