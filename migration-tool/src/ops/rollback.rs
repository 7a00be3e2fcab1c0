//! `migrate rollback`: [`advance`](super::advance) walking backwards, with
//! the mirrored guards of the rollout crate (dual → legacy waits until no
//! node runs queue and the queue quiet period has passed; the other steps
//! back are always safe: combined and queue exclude each other).

use super::Env;
use super::advance::{Direction, TransitionReport, transition};
use crate::cli::TransitionArgs;

/// Moves (or evaluates moving) the stage one step back, or to `--to`.
///
/// # Errors
/// As [`transition`].
pub async fn rollback(env: &Env, args: &TransitionArgs) -> anyhow::Result<TransitionReport> {
    transition(env, Direction::Back, args).await
}
