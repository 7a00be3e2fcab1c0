//! `migrate advance`: the guarded transitions of the rollout crate
//! ([`Rollout::transition`](lockshift_rollout::Rollout::transition)), with
//! the operator-facing rules around them. `rollback` is the same code
//! walking the other way (see [`super::rollback`]).
//!
//! - No `--to`: only with `--dry-run` (one step in the command's
//!   direction). A change names its target: a plain `advance` moved from
//!   whatever stage it found, so two of them a moment apart moved the fleet
//!   two stages; with `--to`, the second finds the stage already there.
//! - Already at the target: nothing to do, exit 0 (scripts may repeat).
//! - A target the other way, a skipped stage, no step left: usage errors
//!   (exit 2) — waiting cannot make them valid.
//! - A guard failing: a refusal (exit 3), recorded in the history, every
//!   failing guard listed. `--dry-run` evaluates the same guards on the
//!   same evidence and records nothing (invariant 1 of `lib.rs`).

use anyhow::Context;
use lockshift_decide::algorithm::Stage;
use lockshift_decide::remedy::Remedy;
use lockshift_decide::rollout::{Guard, StageRecord};
use lockshift_rollout::RolloutError;
use lockshift_rollout::rollout::TransitionRequest;
use serde::Serialize;

use super::Env;
use crate::cli::TransitionArgs;
use crate::{JSON_VERSION, Outcome, UsageError};

/// Which way a command moves the stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// `advance`.
    Forward,
    /// `rollback`.
    Back,
}

impl Direction {
    fn command(self) -> &'static str {
        match self {
            Direction::Forward => "advance",
            Direction::Back => "rollback",
        }
    }
}

/// The report of `migrate advance` / `migrate rollback` (JSON schema,
/// `"version": 1`).
#[derive(Debug, Clone, Serialize)]
pub struct TransitionReport {
    /// Schema version, 1.
    pub version: u32,
    /// `advance` or `rollback`.
    pub command: &'static str,
    /// The stage before.
    pub from: Stage,
    /// The stage asked for.
    pub to: Stage,
    /// Only evaluated; nothing changed or recorded.
    pub dry_run: bool,
    /// Whether the stage changed.
    pub applied: bool,
    /// The stage already was `to`: nothing to do.
    pub already: bool,
    /// Whether every guard holds.
    pub safe: bool,
    /// Every guard of the edge: name, passed, detail, what to do.
    pub guards: Vec<Guard>,
    /// The failing guards' details.
    pub because: Vec<String>,
    /// What to do about the refusal, each once (the "do" column of
    /// docs/operating.md §2).
    pub actions: Vec<String>,
    /// What the guards cannot know (e.g. no node registered at all).
    pub caveats: Vec<String>,
    /// The new stage record, when applied.
    pub record: Option<StageRecord>,
    /// Set when another transition moved the stage (to this one) while
    /// this command waited: it lost the race and changed nothing.
    pub raced: Option<Stage>,
}

impl TransitionReport {
    /// Exit status: ok when applied, already there, or a dry run found it
    /// safe; not safe otherwise.
    pub fn outcome(&self) -> Outcome {
        if self.applied || self.already || (self.dry_run && self.safe) {
            Outcome::Ok
        } else {
            Outcome::NotSafe
        }
    }
}

/// Moves (or, with `--dry-run`, evaluates moving) the stage one step in
/// `direction`, or to `--to`.
///
/// # Errors
/// [`UsageError`] for a transition that can never be made from here; store
/// and lock errors otherwise.
pub async fn transition(
    env: &Env,
    direction: Direction,
    args: &TransitionArgs,
) -> anyhow::Result<TransitionReport> {
    // Retried within the operation's deadline, as every read of the
    // rollout is: one read timeout must not fail the command.
    let current = env
        .rollout()
        .current()
        .await
        .context("reading the rollout stage")?;
    let from = current.stage;
    let to = target(from, direction, args.to)?;
    if args.to.is_none() && !args.dry_run {
        // A plain `advance` would move from whatever stage it finds: two of
        // them a moment apart (a retry, a second operator) moved the fleet
        // two stages. A change names its target, so repeating it is
        // harmless (already there: exit 0).
        return Err(UsageError(format!(
            "say which stage to move to: the stage is {from}, so `migrate {} --to {to}` \
             (without --to a command would move from whatever stage it finds when it runs — \
             two of them a moment apart would move two stages; `--dry-run` needs no --to)",
            direction.command()
        ))
        .into());
    }
    let mut report = TransitionReport {
        version: JSON_VERSION,
        command: direction.command(),
        from,
        to,
        dry_run: args.dry_run,
        applied: false,
        already: false,
        safe: true,
        guards: Vec::new(),
        because: Vec::new(),
        actions: Vec::new(),
        caveats: Vec::new(),
        record: None,
        raced: None,
    };
    if from == to {
        report.already = true;
        return Ok(report);
    }
    let request = TransitionRequest {
        to,
        by: args.by.clone().unwrap_or_else(default_operator),
        reason: args.reason.clone(),
        dry_run: args.dry_run,
        // Move from the stage this command read, or not at all.
        expected_from: Some(from),
    };
    let done = match env.rollout().transition(request).await {
        Ok(done) => done,
        // The stage moved between this command's first read and its turn
        // under the rollout lock: another operator won the race. Not a
        // usage error — the same command was valid a moment ago — but a
        // refusal (exit 3) saying what happened.
        // Another operator's transition got there first: what was asked
        // for is done.
        Err(RolloutError::InvalidTransition { from: now, .. }) if now == to => {
            report.already = true;
            report.raced = Some(now);
            return Ok(report);
        }
        Err(RolloutError::InvalidTransition { from: now, .. }) if now != from => {
            report.safe = false;
            report.raced = Some(now);
            report.because = vec![format!(
                "the stage moved from {from} to {now} while this command waited for the \
                 rollout lock (another `migrate advance` or `rollback`?)"
            )];
            report.actions = vec![Remedy::Raced.action().to_string()];
            return Ok(report);
        }
        Err(e @ RolloutError::InvalidTransition { .. }) => {
            return Err(UsageError(e.to_string()).into());
        }
        Err(RolloutError::Lock(e @ lockshift_lock::AcquireError::Timeout { .. })) => {
            report.safe = false;
            report.because = vec![format!(
                "the rollout lock stayed held by another operator's transition: {e}"
            )];
            report.actions = vec![Remedy::RolloutLockHeld.action().to_string()];
            return Ok(report);
        }
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("moving from stage {from} to {to}")));
        }
    };
    report.from = done.verdict.from;
    report.safe = done.verdict.is_safe();
    report.because = done.verdict.failures();
    report.actions = done.verdict.actions();
    report.caveats = done.verdict.caveats.clone();
    report.guards = done.verdict.guards;
    report.applied = done.applied;
    report.record = done.record;
    Ok(report)
}

/// The stage to move to.
fn target(from: Stage, direction: Direction, to: Option<Stage>) -> anyhow::Result<Stage> {
    let usage = |m: String| anyhow::Error::new(UsageError(m));
    match (direction, to) {
        (Direction::Forward, None) => from.next().ok_or_else(|| {
            usage(format!(
                "stage {from} is the last stage: there is nothing to advance to (`migrate rollback` goes back)"
            ))
        }),
        (Direction::Back, None) => from.previous().ok_or_else(|| {
            usage(format!(
                "stage {from} is the first stage: there is nothing to roll back to"
            ))
        }),
        (Direction::Forward, Some(to)) if to < from => Err(usage(format!(
            "stage {to} is before the current stage {from}: `advance` moves forward; use `migrate rollback --to {to}`"
        ))),
        (Direction::Back, Some(to)) if to > from => Err(usage(format!(
            "stage {to} is after the current stage {from}: `rollback` moves back; use `migrate advance --to {to}`"
        ))),
        (_, Some(to)) => Ok(to),
    }
}

/// `$USER@host`, for the history.
pub fn default_operator() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "operator".to_string());
    format!("{user}@{}", hostname())
}

/// This machine's name, from the operating system (never `$HOSTNAME`).
pub fn hostname() -> String {
    lockshift_lock::host_name()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use lockshift::Settings;
    use lockshift_store::{MemoryStore, SharedStore, SystemClock};

    use super::*;

    fn args(to: Option<Stage>, dry_run: bool) -> TransitionArgs {
        TransitionArgs {
            to,
            dry_run,
            by: Some("tester".into()),
            reason: "test".into(),
        }
    }

    /// Issue 18 item 4: `advance` refuses (exit 3) while a lock cannot be
    /// read, naming it, the reason and the remedy.
    #[tokio::test]
    async fn advance_refuses_while_a_lock_cannot_be_read() {
        let clock: lockshift_store::SharedClock = Arc::new(SystemClock);
        let store: SharedStore = Arc::new(crate::ops::jammed::store(clock.clone()));
        crate::ops::jammed::jam(
            store.as_ref(),
            clock.as_ref(),
            lockshift_store::schema::SHADOW,
            "jammed",
        )
        .await;
        // A queue holder of the lock: `main` names it, so its refused
        // `shadow` row is read, and named, though the scan cannot pass it.
        store
            .write(
                lockshift_store::schema::MAIN,
                "jammed",
                &[lockshift_store::CellWrite::new(
                    "n1/0000000000000001",
                    b"queue".to_vec(),
                )],
                lockshift_store::WriteOptions::at(clock.now()),
            )
            .await
            .unwrap();
        let env = Env::new(Settings::default(), store, clock);
        let r = transition(&env, Direction::Forward, &args(Some(Stage::Dual), false))
            .await
            .unwrap();
        assert!(!r.applied && !r.safe);
        assert_eq!(r.outcome(), Outcome::NotSafe);
        assert!(
            r.because.iter().any(|b| b
                .starts_with("cannot be evaluated: the database refuses to read 2 lock row(s): ")
                && b.contains(
                    "lock \"jammed\" (table shadow): read on table shadow failed: too many \
                     tombstones"
                )),
            "{:?}",
            r.because
        );
        assert!(
            r.actions
                .iter()
                .any(|a| a.starts_with("run `migrate schema --apply`")),
            "{:?}",
            r.actions
        );
    }

    /// Issue 31 item 4d: `advance --to dual` exited 1 on one read timeout
    /// of the rollout stage. Every read of the operation is retried within
    /// its deadline: reads of the `rollout` row that time out (twice, then
    /// twice more at the evidence) do not fail it, and neither does one of
    /// the registry. A read timeout that outlasts the deadline still does.
    #[tokio::test(start_paused = true)]
    async fn advance_retries_reads_that_time_out() {
        use lockshift_store::{FailPoint, FaultPlan, FaultScope, FaultyStore, OpKind, schema};
        let faulty = Arc::new(FaultyStore::new(MemoryStore::new(), 3));
        faulty.set_plan(FaultPlan {
            scope: FaultScope {
                tables: Some(vec![schema::ROLLOUT, schema::NODES]),
                ops: Some(vec![OpKind::Read]),
            },
            ..FaultPlan::default()
        });
        faulty.fail_next(5, FailPoint::After);
        let store: SharedStore = faulty.clone();
        let env = Env::new(Settings::default(), store, Arc::new(SystemClock));
        let done = transition(&env, Direction::Forward, &args(Some(Stage::Dual), false))
            .await
            .unwrap();
        assert!(done.applied, "{done:?}");
        let dry = transition(&env, Direction::Forward, &args(None, true))
            .await
            .unwrap();
        assert!(dry.dry_run, "{dry:?}");
        // A store that never answers: the last error, after the deadline.
        faulty.set_partitioned(true);
        let started = tokio::time::Instant::now();
        let e = transition(&env, Direction::Forward, &args(Some(Stage::Queue), false))
            .await
            .unwrap_err();
        assert!(
            started.elapsed()
                >= lockshift_rollout::rollout::OPERATION_DEADLINE
                    - std::time::Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert!(
            format!("{e:#}").starts_with("reading the rollout stage: read on table rollout"),
            "{e:#}"
        );
    }

    #[tokio::test]
    async fn advance_skip_already_and_rollback() {
        let store: SharedStore = Arc::new(MemoryStore::new());
        let env = Env::new(Settings::default(), store, Arc::new(SystemClock));
        let e = transition(&env, Direction::Forward, &args(Some(Stage::Queue), false))
            .await
            .unwrap_err();
        assert!(crate::is_usage_error(&e));
        assert!(
            e.to_string()
                .contains("stages cannot be skipped; move to dual first"),
            "{e}"
        );
        let dry = transition(&env, Direction::Forward, &args(None, true))
            .await
            .unwrap();
        assert!(dry.dry_run && dry.safe && !dry.applied);
        assert_eq!(dry.outcome(), Outcome::Ok);
        let e = transition(&env, Direction::Forward, &args(None, false))
            .await
            .unwrap_err();
        assert!(crate::is_usage_error(&e));
        assert!(e.to_string().contains("`migrate advance --to dual`"), "{e}");
        let done = transition(&env, Direction::Forward, &args(Some(Stage::Dual), false))
            .await
            .unwrap();
        assert!(done.applied, "{done:?}");
        assert_eq!(done.record.as_ref().unwrap().stage, Stage::Dual);
        let again = transition(&env, Direction::Forward, &args(Some(Stage::Dual), false))
            .await
            .unwrap();
        assert!(again.already);
        assert_eq!(again.outcome(), Outcome::Ok);
        let e = transition(&env, Direction::Forward, &args(Some(Stage::Legacy), false))
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("use `migrate rollback --to legacy`"),
            "{e}"
        );
        let back = transition(&env, Direction::Back, &args(Some(Stage::Legacy), false))
            .await
            .unwrap();
        assert!(back.applied);
        assert_eq!(back.to, Stage::Legacy);
        let e = transition(&env, Direction::Back, &args(None, true))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("first stage"), "{e}");
    }
}
