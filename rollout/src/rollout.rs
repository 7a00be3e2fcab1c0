//! The rollout state machine: the stage stored in the database, guarded
//! transitions, and their history.
//!
//! The `rollout` table holds row [`STAGE_ROW`] (one cell, the current
//! [`StageRecord`]) and row [`HISTORY_ROW`] (one cell per transition or
//! refusal, named by time). A transition is a compare-and-check: under the
//! rollout lock (a combined lock — safe whatever the stage), read the stage,
//! check the edge and every guard on fresh evidence, and only then write the
//! new record with a timestamp above the old one's.
//!
//! # Guards (docs/design.md §4)
//!
//! | edge | guards |
//! |---|---|
//! | legacy → dual | no node runs legacy; no legacy activity within the quiet period |
//! | dual → queue | no node runs legacy; every node acts on `dual`; no legacy activity within the quiet period |
//! | queue → complete | no node runs legacy or combined; every node acts on `queue`; no lock held by a combined holder; no legacy activity within the quiet period |
//! | complete → queue | none: combined and queue are safe together |
//! | queue → dual | none: combined and queue are safe together |
//! | dual → legacy | no node runs queue; every node acts on `dual`; no lock held by a queue holder; no queue activity within the quiet period |
//!
//! "Runs X" counts a node's acquisitions of X waiting or held, not only its
//! resolution for new ones; "acts on N" reads the oldest stage version any
//! of its acquisitions is bound to. Every registry row counts, also of a
//! node whose heartbeat stopped: the row outlives that node's stage view
//! by a lease TTL (docs/design.md §4, R5–R6).
//!
//! The quiet period covers what the registry cannot see: binaries that
//! predate lockshift (they never register; their cells are the evidence).
//! It must exceed `stage_valid_for + lease_ttl + clock_skew_margin`: a node
//! acts on a stage it cannot confirm for at most `stage_valid_for`, a
//! holder's cells live one lease TTL, clocks differ by the skew margin.
//!
//! # Reads are retried; writes are not
//!
//! Every read an operation makes — the stage, the history, each step of
//! gathering the evidence — is retried after a failure that may pass (a
//! timeout, too few replicas, no connection: [`StoreError::is_retryable`])
//! until the operation's deadline ([`OPERATION_DEADLINE`] from its start;
//! for a transition, its wait for the rollout lock counts too): one read
//! timeout on a cluster with a node cut off no longer fails `advance` or
//! `status`. A read changes nothing, so trying it again is always safe.
//! The stage and history writes are not retried: a write that timed out
//! may have landed, and the operator, told so, decides.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use lockshift_decide::rollout;
use lockshift_lock::{
    AcquireOptions, Algorithm, Binding, LeaseSettings, LockContext, LockId, Locker, NodeId,
};
use lockshift_queue_lock::{QueueSettings, TimeSettings, TimeSourceKind};
use lockshift_store::{
    CellWrite, RowQuery, SharedClock, SharedStore, StoreError, StoreErrorKind, Table, Timestamp,
    WriteOptions, schema,
};
use serde::Serialize;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::census::{CensusOptions, FleetStaleness, take_census};
use crate::error::{EvidenceError, RolloutError};
use crate::lockers::{LockerSettings, Lockers};
use crate::registry::{last_activity, live_nodes};
use crate::settings::RolloutSettings;
use lockshift_decide::algorithm::Stage;
use lockshift_decide::census::Staleness;

use lockshift_decide::rollout::{
    Evidence, HISTORY_ROW, HistoryAction, HistoryEntry, ROLLOUT_LOCK, STAGE_COLUMN, STAGE_ROW,
    StageRecord, Verdict, edge_refusal,
};

/// How long a rollout operation — a transition, a gathering of evidence
/// for `status` or a dry run — goes on retrying reads that failed in a way
/// that may pass; for a transition it includes the wait for the rollout
/// lock.
pub const OPERATION_DEADLINE: Duration = Duration::from_secs(60);

/// Cells per page of the census's scans: the page size Cassandra's
/// drivers fetch by default.
const CENSUS_PAGE_CELLS: u32 = 5000;

/// The first pause between two tries of a read; it doubles up to
/// [`READ_RETRY_PAUSE_MAX`].
const READ_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// The longest pause between two tries of a read.
const READ_RETRY_PAUSE_MAX: Duration = Duration::from_secs(2);

/// `read`, tried again after every failure that may pass
/// ([`StoreError::is_retryable`]) as long as the next try can start before
/// `deadline`, pausing 100 ms, then twice as long each time up to 2 s — but
/// not after a refusal that was never sent ([`StoreError::was_sent`]: a
/// moving home, which names when it serves).
///
/// # Errors
/// The first error retrying cannot fix, or the last one when the deadline
/// came first.
pub async fn retry_reads<T>(
    deadline: Instant,
    mut read: impl AsyncFnMut() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let mut pause = READ_RETRY_PAUSE;
    loop {
        match read().await {
            // A refusal without sending (a moving home) is no failure that
            // passes between tries: its end is named in it, often minutes
            // away, and the caller says so at once.
            Err(e) if e.is_retryable() && e.was_sent() && Instant::now() + pause < deadline => {
                warn!(error = %e, "a rollout read failed; trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(READ_RETRY_PAUSE_MAX);
            }
            outcome => return outcome,
        }
    }
}

/// Reads the current stage (the initial record when none was ever written),
/// with the write timestamp of its cell. One read, not retried
/// ([`Rollout::current`] retries).
///
/// # Errors
/// A store error, or `Invalid` when the cell does not decode.
pub async fn read_stage(
    store: &dyn lockshift_store::Store,
) -> Result<(StageRecord, Option<Timestamp>), StoreError> {
    let cells = store
        .read(
            schema::ROLLOUT,
            STAGE_ROW,
            &RowQuery::first(1).starting_at(STAGE_COLUMN),
        )
        .await?;
    match cells.into_iter().find(|c| c.column == STAGE_COLUMN) {
        Some(cell) => {
            let record = serde_json::from_slice(&cell.value).map_err(|e| {
                StoreError::new(
                    StoreErrorKind::Invalid,
                    lockshift_store::OpKind::Read,
                    Some(schema::ROLLOUT),
                    format!("the stored rollout stage does not decode: {e}"),
                )
            })?;
            Ok((record, Some(cell.writetime)))
        }
        None => Ok((StageRecord::initial(), None)),
    }
}

/// Checks the edge `from → to`: adjacent stages only
/// ([`lockshift_decide::rollout::edge_refusal`] says why not).
///
/// # Errors
/// [`RolloutError::InvalidTransition`] saying why.
pub fn check_edge(from: Stage, to: Stage) -> Result<(), RolloutError> {
    match edge_refusal(from, to) {
        None => Ok(()),
        Some(why) => Err(RolloutError::InvalidTransition { from, to, why }),
    }
}

/// The guards of `from → to` evaluated on `evidence` (pure: no I/O), with
/// the times `settings` set ([`RolloutSettings::guard_times`]): the
/// judgement is `lockshift_decide::rollout::evaluate`.
pub fn evaluate(evidence: &Evidence, to: Stage, settings: &RolloutSettings) -> Verdict {
    rollout::evaluate(evidence, to, settings.guard_times())
}

/// The longest reason or guard detail stored in a history entry (bytes).
const HISTORY_TEXT_MAX: usize = 1_000;

/// `text` cut to [`HISTORY_TEXT_MAX`] bytes (on a character boundary).
fn bounded_text(mut text: String) -> String {
    if text.len() > HISTORY_TEXT_MAX {
        let mut end = HISTORY_TEXT_MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str(" …(cut)");
    }
    text
}

/// What the operator asked for.
#[derive(Clone, Debug)]
pub struct TransitionRequest {
    /// The target stage.
    pub to: Stage,
    /// Who asks (recorded).
    pub by: String,
    /// Why (recorded).
    pub reason: String,
    /// Only evaluate: change nothing, record nothing.
    pub dry_run: bool,
    /// The stage the operator saw: under the rollout lock, a stage found
    /// different is refused ([`RolloutError::InvalidTransition`] naming
    /// the stage found) instead of moved from — an edge from there may be
    /// valid but is not what was asked. `None`: any stage adjacent to `to`.
    pub expected_from: Option<Stage>,
}

/// What a transition did.
#[derive(Clone, Debug, Serialize)]
pub struct TransitionReport {
    /// The guards' verdict.
    pub verdict: Verdict,
    /// Whether the stage changed.
    pub applied: bool,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// The new record, when applied.
    pub record: Option<StageRecord>,
}

/// Reads and changes the rollout stage.
#[derive(Debug, Clone)]
pub struct Rollout {
    store: SharedStore,
    clock: SharedClock,
    settings: RolloutSettings,
    lease: LeaseSettings,
    queue: QueueSettings,
    stale_after: Staleness,
}

impl Rollout {
    /// Over `store`, with the fleet's settings.
    pub fn new(
        store: SharedStore,
        clock: SharedClock,
        settings: RolloutSettings,
        lease: LeaseSettings,
        queue: QueueSettings,
    ) -> Self {
        let stale_after = Staleness::of(&queue, &lease);
        Rollout {
            store,
            clock,
            settings,
            lease,
            queue,
            stale_after,
        }
    }

    /// The current stage, its read retried within [`OPERATION_DEADLINE`].
    ///
    /// # Errors
    /// The store error.
    pub async fn current(&self) -> Result<StageRecord, StoreError> {
        let deadline = Instant::now() + OPERATION_DEADLINE;
        let store = self.store.as_ref();
        Ok(retry_reads(deadline, async || read_stage(store).await)
            .await?
            .0)
    }

    /// The history, in stage-version order (oldest first), its read retried
    /// within [`OPERATION_DEADLINE`].
    ///
    /// # Errors
    /// The store error.
    pub async fn history(&self) -> Result<Vec<HistoryEntry>, StoreError> {
        let deadline = Instant::now() + OPERATION_DEADLINE;
        let store = self.store.as_ref();
        let cells = retry_reads(deadline, async || {
            store
                .read(schema::ROLLOUT, HISTORY_ROW, &RowQuery::all())
                .await
        })
        .await?;
        Ok(cells
            .into_iter()
            .filter_map(|c| serde_json::from_slice(&c.value).ok())
            .collect())
    }

    /// Gathers the evidence guards look at: stage, registry, activity and a
    /// census of every lock cell. The one gatherer: `advance`, `rollback`,
    /// their dry runs and `migrate status` all judge on what it returns, so
    /// they cannot disagree.
    ///
    /// # Errors
    /// [`EvidenceError`] naming what was being read.
    pub async fn evidence(&self) -> Result<Evidence, EvidenceError> {
        self.evidence_with_progress(|_, _| {}).await
    }

    /// As [`evidence`](Self::evidence), telling `progress` how many rows of
    /// each table the census has scanned so far (it can take a while on a
    /// large keyspace). Each step's reads are retried within
    /// [`OPERATION_DEADLINE`] (a census that fails is taken again).
    ///
    /// # Errors
    /// [`EvidenceError`] naming what was being read.
    pub async fn evidence_with_progress(
        &self,
        progress: impl FnMut(Table, usize),
    ) -> Result<Evidence, EvidenceError> {
        self.evidence_until(Instant::now() + OPERATION_DEADLINE, progress)
            .await
    }

    /// The evidence, each read retried until `deadline`.
    async fn evidence_until(
        &self,
        deadline: Instant,
        mut progress: impl FnMut(Table, usize),
    ) -> Result<Evidence, EvidenceError> {
        let store = self.store.as_ref();
        let step = |step: &'static str| move |error| EvidenceError { step, error };
        let (current, _) = retry_reads(deadline, async || read_stage(store).await)
            .await
            .map_err(step("reading the rollout stage"))?;
        let margin = self.settings.clock_skew_margin;
        let (nodes, unreadable_nodes) = retry_reads(deadline, async || {
            live_nodes(store, self.clock.now(), margin).await
        })
        .await
        .map_err(step("reading the node registry"))?;
        let activity = retry_reads(deadline, async || last_activity(store).await)
            .await
            .map_err(step("reading the activity record"))?;
        // Cells are aged on the database's clock: this process's own
        // reading, beside each writer's (three reads, once).
        let reader = crate::census::read_own_clock(store, self.clock.as_ref()).await;
        let options = CensusOptions {
            stale_after: self.stale_after,
            clock_skew_margin: self.settings.clock_skew_margin,
            page_size: NonZeroU32::new(CENSUS_PAGE_CELLS).unwrap_or(NonZeroU32::MIN),
            reader,
        };
        let census = retry_reads(deadline, async || {
            take_census(
                store,
                self.clock.as_ref(),
                &nodes,
                options,
                &|_| false,
                &mut progress,
            )
            .await
        })
        .await
        .map_err(step("taking a census of lock cells"))?;
        Ok(Evidence {
            current,
            nodes,
            unreadable_nodes,
            census,
            activity,
            now: self.clock.now(),
        })
    }

    /// Moves the stage to `request.to` if the edge is valid and every guard
    /// holds, recording the transition — or the refusal — in the history.
    ///
    /// # Errors
    /// [`RolloutError::InvalidTransition`] for a non-adjacent or unchanged
    /// stage; store or lock errors. A refusal is not an error: the report
    /// says `applied: false` with the verdict.
    pub async fn transition(
        &self,
        request: TransitionRequest,
    ) -> Result<TransitionReport, RolloutError> {
        let deadline = Instant::now() + OPERATION_DEADLINE;
        if request.dry_run {
            let evidence = self.evidence_until(deadline, |_, _| {}).await?;
            check_edge(evidence.current.stage, request.to)?;
            return Ok(TransitionReport {
                verdict: evaluate(&evidence, request.to, &self.settings),
                applied: false,
                dry_run: true,
                record: None,
            });
        }
        let locker = self.rollout_locker(&request.by)?;
        let lock = LockId::new(ROLLOUT_LOCK).map_err(|e| RolloutError::Internal(e.to_string()))?;
        let guard = locker
            .acquire_with(
                &lock,
                AcquireOptions::with_timeout(deadline.saturating_duration_since(Instant::now())),
                &Binding::unbound(),
            )
            .await?;
        let result = self.transition_locked(&request, deadline).await;
        if let Err(e) = guard.release().await {
            warn!(error = %e, "rollout lock release failed; it expires with its TTL");
        }
        result
    }

    async fn transition_locked(
        &self,
        request: &TransitionRequest,
        deadline: Instant,
    ) -> Result<TransitionReport, RolloutError> {
        let store = self.store.as_ref();
        let (_, stage_written_at) = retry_reads(deadline, async || read_stage(store).await).await?;
        let evidence = self.evidence_until(deadline, |_, _| {}).await?;
        let from = evidence.current.stage;
        if let Some(expected) = request.expected_from
            && expected != from
        {
            return Err(RolloutError::InvalidTransition {
                from,
                to: request.to,
                why: format!("the stage moved from {expected} to {from} meanwhile"),
            });
        }
        check_edge(from, request.to)?;
        let verdict = evaluate(&evidence, request.to, &self.settings);
        let now = self.clock.now();
        if !verdict.is_safe() {
            info!(%from, to = %request.to, failures = ?verdict.failures(), "transition refused");
            self.record_history(
                evidence.current.version,
                HistoryEntry {
                    at: now.as_micros(),
                    by: request.by.clone(),
                    action: HistoryAction::Refusal,
                    from,
                    to: request.to,
                    reason: request.reason.clone(),
                    failed_guards: verdict.failures(),
                },
            )
            .await?;
            return Ok(TransitionReport {
                verdict,
                applied: false,
                dry_run: false,
                record: None,
            });
        }
        let record = StageRecord {
            stage: request.to,
            version: evidence.current.version + 1,
            changed_at: now.as_micros(),
            by: request.by.clone(),
            reason: request.reason.clone(),
        };
        // Above the old record's timestamp whatever this machine's clock says:
        // last-write-wins must pick the new stage.
        let stamp = stage_written_at.map_or(now, |old| now.max(old.offset_micros(1)));
        let value =
            serde_json::to_vec(&record).map_err(|e| RolloutError::Internal(e.to_string()))?;
        self.store
            .write(
                schema::ROLLOUT,
                STAGE_ROW,
                &[CellWrite::new(STAGE_COLUMN, value)],
                WriteOptions::at(stamp),
            )
            .await?;
        self.record_history(
            record.version,
            HistoryEntry {
                at: now.as_micros(),
                by: request.by.clone(),
                action: HistoryAction::Transition,
                from,
                to: request.to,
                reason: request.reason.clone(),
                failed_guards: Vec::new(),
            },
        )
        .await?;
        info!(%from, to = %request.to, version = record.version, by = %request.by, "stage changed");
        Ok(TransitionReport {
            verdict,
            applied: true,
            dry_run: false,
            record: Some(record),
        })
    }

    /// Records `entry` made at stage version `version` (a transition: the
    /// version it created). Columns sort by version — immune to operators'
    /// clocks — then the transition into it before refusals made at it,
    /// then time; a random suffix keeps two entries in one microsecond apart.
    async fn record_history(
        &self,
        version: u64,
        mut entry: HistoryEntry,
    ) -> Result<(), RolloutError> {
        // Every later `status` prints the history: keep each entry small.
        entry.reason = bounded_text(entry.reason);
        entry.failed_guards = entry.failed_guards.into_iter().map(bounded_text).collect();
        let kind = match entry.action {
            HistoryAction::Transition => 0,
            HistoryAction::Refusal => 1,
        };
        let column = format!(
            "{version:010}-{kind}-{:020}-{:016x}",
            entry.at.max(0),
            rand::random::<u64>()
        );
        let value =
            serde_json::to_vec(&entry).map_err(|e| RolloutError::Internal(e.to_string()))?;
        self.store
            .write(
                schema::ROLLOUT,
                HISTORY_ROW,
                &[CellWrite::new(column, value)],
                WriteOptions::at(Timestamp::from_micros(entry.at)),
            )
            .await?;
        Ok(())
    }

    /// The rollout lock's locker: combined (safe whatever the stage), on
    /// the local clock (one short acquisition needs no `GlobalTime`).
    fn rollout_locker(&self, by: &str) -> Result<Arc<dyn Locker>, RolloutError> {
        let node =
            NodeId::new(sanitize_node(by)).map_err(|e| RolloutError::Internal(e.to_string()))?;
        let ctx = LockContext::new(
            self.store.clone(),
            self.clock.clone(),
            node,
            self.lease.clone(),
            None,
        )
        .map_err(|e| RolloutError::Internal(e.to_string()))?;
        let settings = LockerSettings {
            queue: self.queue.clone(),
            time: TimeSettings {
                source: TimeSourceKind::Local,
                ..TimeSettings::default()
            },
            ..LockerSettings::default()
        };
        Ok(Lockers::new(Arc::new(ctx), settings).build(Algorithm::Combined))
    }
}

/// A node id derived from a free-form operator name.
pub(crate) fn sanitize_node(by: &str) -> String {
    let cleaned: String = by
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':') {
                c
            } else {
                '_'
            }
        })
        .take(lockshift_lock::MAX_NODE_ID_LEN)
        .collect();
    if cleaned.is_empty() {
        "operator".to_string()
    } else {
        cleaned
    }
}

#[cfg(test)]
#[path = "rollout_tests.rs"]
mod tests;
