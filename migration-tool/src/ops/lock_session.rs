//! What `migrate run-with-lock` and `migrate lock` share: taking a lock
//! for an operator's process and giving it back.
//!
//! Both commands are one holder with one lock, differing only in what they
//! do while they hold it (run a command; wait for a signal). So everything
//! up to "held" and from "done" lives here, once:
//!
//! - [`LockSession::start`]: listen for signals first (INT, TERM, HUP,
//!   QUIT — from then on they no longer kill the process, so it can
//!   release), register as a [`Node`], say when the stage degrades the
//!   mode and who holds the lock now.
//! - [`LockSession::acquire`]: take the lock with `--timeout`, cancelled by
//!   a signal, saying whom it waits for ([`WaitLines`]); then take the
//!   fencing token, required or not.
//! - [`LockSession::next_signal`] while held, [`release`] and
//!   [`LockSession::shutdown`] at the end.
//!
//! The per-command parts — the child and its supervisor, the token line on
//! stdout — stay in [`super::run_with_lock`] and [`super::lock`].
//!
//! # Why a registered [`Node`] rather than a bare locker
//!
//! An operator's lock may be held for hours, and its algorithm matters to
//! the rollout as a service's (a legacy holder keeps `advance` to `dual`
//! from passing). A [`Node`] registers, reports, follows the stage — so the
//! guards see it — and deregisters: one stage read, one heartbeat.

use std::time::Duration;

use anyhow::Context;
use lockshift::{LockGuard, Node};
use lockshift_decide::algorithm::{Mode, Stage};
use lockshift_decide::duration::fmt_duration_rounded;
use lockshift_decide::queue::parse_queue_cell;
use lockshift_lock::{
    AcquireError, AcquireOptions, Algorithm, LockId, MAX_NODE_ID_LEN, NodeId, WaitingFor, cut_short,
};
use lockshift_store::{RowQuery, schema};
use nix::sys::signal::Signal;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Env, child, ms};

/// Which lock to take, and how: what `run-with-lock` and `lock` are asked
/// alike.
#[derive(Debug, Clone)]
pub struct LockRequest {
    /// The lock.
    pub lock: LockId,
    /// Configured mode (resolved against the stage); `None`: `node.mode`
    /// from the settings (file, `LOCKSHIFT__NODE__MODE`), as every node.
    pub mode: Option<Mode>,
    /// Give up waiting for the lock after this long.
    pub timeout: Option<Duration>,
    /// Whether holding needs a fencing token (no token: release, exit 1).
    pub fencing_token_required: bool,
    /// Exclusive, a reader's share, or a semaphore's permit.
    pub sharing: lockshift::Sharing,
}

/// The part of a report both commands fill in: who took which lock, how,
/// and for how long (flattened into their JSON reports).
#[derive(Debug, Clone, Serialize)]
pub struct Holding {
    /// The lock.
    pub lock: String,
    /// The registered node id of this process.
    pub node: String,
    /// Configured mode.
    pub mode: Mode,
    /// The stage the node read (`null`: could not read it; runs combined).
    pub stage: Option<Stage>,
    /// The algorithm that took the lock.
    pub algorithm: Algorithm,
    /// Set when the stage refused the configured mode (ran combined).
    pub degraded_from: Option<Mode>,
    /// The owner id of the acquisition.
    pub owner: Option<String>,
    /// Fencing token (queue-based algorithms).
    pub fencing_token: Option<u64>,
    /// How long taking the lock took.
    pub waited_ms: u64,
    /// How long the lock was held.
    pub held_ms: u64,
    /// Why the lease was lost.
    pub lease_lost: Option<String>,
}

/// Why [`LockSession::acquire`] ended without the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotHeld {
    /// The lock was not free within `--timeout`.
    Timeout,
    /// A signal came while waiting.
    Interrupted(Signal),
    /// No fencing token could be had while the lease held, and one was
    /// required; the lock was released.
    NoFencingToken,
}

impl NotHeld {
    /// What `migrate` exits with: 3 (as a refusal), 128 + the signal (the
    /// shell's convention), 1 (an error).
    pub fn exit_code(self) -> i32 {
        match self {
            NotHeld::Timeout => 3,
            NotHeld::Interrupted(signal) => 128 + signal as i32,
            NotHeld::NoFencingToken => 1,
        }
    }
}

/// What a command says about its fencing token where the two differ.
#[derive(Debug, Clone, Copy)]
pub struct TokenWording {
    /// Said as `error: WHY; REFUSED` when a required token cannot be had
    /// (WHY: the failure).
    pub refused: &'static str,
    /// Said as `warning: WITHOUT: WHY` when an optional token cannot be had.
    pub without: &'static str,
}

/// A registered node about to take, holding or done with one lock, and the
/// signals this process receives meanwhile.
#[derive(Debug)]
pub struct LockSession {
    node: Node,
    lock: LockId,
    interrupts: Interrupts,
    /// The holder this session's first read of `main` showed, if any.
    holder_at_start: Option<String>,
}

// ===== impl LockSession =====

impl LockSession {
    /// The node this session registered.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// Listens for signals, starts the node and fills in a [`Holding`]
    /// with what it knows before taking the lock. `note` hears a degraded
    /// mode and who holds the lock now.
    ///
    /// # Errors
    /// The node could not start (settings, store).
    pub async fn start(
        env: &Env,
        request: &LockRequest,
        note: &mut impl FnMut(String),
    ) -> anyhow::Result<(LockSession, Holding)> {
        // First: a signal from here on ends the wait (or the hold) and
        // releases, instead of killing the process with the lock held.
        let interrupts = Interrupts::listen();
        let mut settings = env.settings.clone();
        // Flag > LOCKSHIFT__NODE__… > file > default, as for every node; only
        // the id's default differs: `migrate-<host>-<pid>` says what it is.
        let node_id = match &settings.node.id {
            Some(id) => id.clone(),
            None => node_id(),
        };
        settings.node.id = Some(node_id.clone());
        if let Some(mode) = request.mode {
            settings.node.mode = mode;
        }
        let mode = settings.node.mode;
        let node = Node::builder()
            .settings(settings)
            .store(env.raw.clone())
            .clock(env.clock.clone())
            .start()
            .await
            .context("starting the lock node")?;
        let status = node.status();
        if let Some(why) = status.why_combined() {
            note(format!("warning: {why}"));
        }
        let holding = Holding {
            lock: request.lock.to_string(),
            node: node_id,
            mode,
            stage: status.stage.as_ref().map(|s| s.stage),
            algorithm: status.effective,
            degraded_from: status.degraded_from,
            owner: None,
            fencing_token: None,
            waited_ms: 0,
            held_ms: 0,
            lease_lost: None,
        };
        let holder_at_start = match waiting_line(env, &request.lock).await {
            Some((line, holder)) => {
                note(line);
                Some(holder)
            }
            None => None,
        };
        let session = LockSession {
            node,
            lock: request.lock.clone(),
            interrupts,
            holder_at_start,
        };
        Ok((session, holding))
    }

    /// Takes the lock (within `request.timeout`, cancelled by a signal),
    /// then its fencing token. While it waits, `note` hears whom it waits
    /// for whenever that changes, at most one line per [`WAIT_LINE_GAP`].
    /// Fills in `holding`'s wait, algorithm, owner and token.
    ///
    /// Without a token and `request.fencing_token_required`, the lock is
    /// released here and [`NotHeld::NoFencingToken`] returned; `wording`
    /// says what was not done.
    ///
    /// # Errors
    /// The acquisition failed other than by timeout or signal: a store
    /// error, or a lock the database refuses to read (named, with the
    /// remedy: waiting cannot help).
    ///
    /// # Cancel safety
    /// Not meant to be dropped: a dropped acquisition leaves its queue
    /// cell to the waiting TTL, a dropped token fetch leaves the lock to
    /// its guard's drop.
    pub async fn acquire(
        &mut self,
        request: &LockRequest,
        wording: TokenWording,
        holding: &mut Holding,
        note: &mut impl FnMut(String),
    ) -> anyhow::Result<Result<LockGuard, NotHeld>> {
        let started = Instant::now();
        let (watch, mut seen) = tokio::sync::watch::channel(WaitingFor::default());
        let options = AcquireOptions {
            timeout: request.timeout,
            cancel: Some(self.interrupts.token.clone()),
            watch: Some(std::sync::Arc::new(watch)),
            sharing: request.sharing,
        };
        // While it waits: a line whenever whom it waits for changes, as the
        // waiter's own reads show it (no read is made for it), at most one
        // line per WAIT_LINE_GAP.
        let acquire = self.node.acquire_with(&self.lock, options);
        tokio::pin!(acquire);
        let mut lines = WaitLines::new(&self.lock, started);
        let acquired = loop {
            tokio::select! {
                result = &mut acquire => break result,
                Ok(()) = seen.changed() => {
                    let state = seen.borrow_and_update().clone();
                    if let Some(line) = lines.seen(state, Instant::now()) {
                        note(line);
                    }
                }
                _ = sleep_until_opt(lines.due()) => {
                    if let Some(line) = lines.flush(Instant::now()) {
                        note(line);
                    }
                }
            }
        };
        let guard = match acquired {
            Ok(g) => g,
            // Someone was seen in the way (the acquisition tells a wait the
            // store cut short apart: `Unreachable`, below).
            Err(AcquireError::Timeout { waited, .. }) => {
                let mut state = seen.borrow().clone();
                // A waiter blocked from `main` may not have read who holds
                // it (the combined lock beside legacy pauses as legacy
                // does): the holder this session saw at the start, then.
                if state.holder.is_none() && state.ahead.is_none() {
                    state.holder = self.holder_at_start.clone();
                }
                let within = request.timeout.unwrap_or(waited); // as asked: scripts read it
                note(not_free_line(&self.lock, within, &state));
                holding.waited_ms = ms(waited);
                return Ok(Err(NotHeld::Timeout));
            }
            Err(AcquireError::Cancelled { .. }) => {
                holding.waited_ms = ms(started.elapsed());
                let signal = self
                    .interrupts
                    .drain()
                    .first()
                    .copied()
                    .unwrap_or(Signal::SIGINT);
                return Ok(Err(NotHeld::Interrupted(signal)));
            }
            // The database refuses to read the lock's rows: waiting cannot
            // help, and "not free" would be wrong.
            Err(AcquireError::Store { error, .. })
                if error.kind() == lockshift_store::StoreErrorKind::TooManyTombstones =>
            {
                return Err(super::refused_read(&self.lock, &error));
            }
            // The deadline passed while the store kept failing and nobody
            // was seen in the way: not "not free" (exit 3, which scripts
            // retry) but an error (exit 1) with the store's reason. So is
            // every other failure: a store error retrying cannot fix (a
            // lock whose home datacenter is out of reach, a missing
            // schema) ends the acquisition at once.
            Err(e) => {
                return Err(anyhow::Error::new(e)
                    .context(format!("taking lock {}", cut_short(self.lock.as_str()))));
            }
        };
        holding.waited_ms = ms(started.elapsed());
        holding.algorithm = guard.algorithm();
        holding.owner = Some(guard.owner().to_string());
        // Two round trips (retried within the lease by the guard): a token
        // the holder can hand to the resource.
        holding.fencing_token = match guard.fencing_token().await {
            Ok(token) => Some(token),
            Err(e) if request.fencing_token_required => {
                note(format!("error: {e}; {}", wording.refused));
                holding.lease_lost = guard.lost_reason().map(|r| r.to_string());
                release(guard, note).await;
                return Ok(Err(NotHeld::NoFencingToken));
            }
            Err(e) => {
                note(format!("warning: {}: {e}", wording.without));
                None
            }
        };
        Ok(Ok(guard))
    }

    /// The next signal this process receives (INT, TERM, HUP, QUIT),
    /// including one that came while the lock was being taken.
    ///
    /// # Cancel safety
    /// Cancel safe: a signal not returned stays queued.
    pub async fn next_signal(&mut self) -> Signal {
        match self.interrupts.rx.recv().await {
            Some(signal) => signal,
            // The listeners live as long as the runtime: never reached.
            None => std::future::pending().await,
        }
    }

    /// The signals this process receives (`run-with-lock` forwards them to
    /// its command).
    pub(crate) fn interrupts(&mut self) -> &mut Interrupts {
        &mut self.interrupts
    }

    /// Deregisters the node: the end of either command.
    pub async fn shutdown(self) {
        self.node.shutdown().await;
    }
}

/// Releases the lock; a failure is a warning (the cells expire within the
/// lease TTL).
pub async fn release(guard: LockGuard, note: &mut impl FnMut(String)) {
    if let Err(e) = guard.release().await {
        note(format!("warning: {e}"));
    }
}

/// Why `guard`'s lease was lost, for the report.
pub fn lost_reason(guard: &LockGuard) -> String {
    guard
        .lost_reason()
        .map_or("the lease could not be proven".to_string(), |r| {
            r.to_string()
        })
}

/// "waiting for L (held by O since T)", and O, when someone holds the lock
/// now. Best effort: a failed read just means no line.
async fn waiting_line(env: &Env, lock: &LockId) -> Option<(String, String)> {
    let store = env.store.as_ref();
    let main = store
        .read(schema::MAIN, lock.as_str(), &RowQuery::all())
        .await
        .ok()?;
    let holder = main.first()?;
    let now = env.clock.now();
    // A queue-based holder's queue cell names when it arrived; otherwise
    // only the last renewal of its main cell is known.
    let queued_at = store
        .read(schema::QUEUE, lock.as_str(), &RowQuery::all())
        .await
        .ok()
        .and_then(|cells| {
            cells.iter().find_map(|c| {
                let entry = parse_queue_cell(&c.column, &c.value)?;
                (entry.owner.as_str() == holder.column).then_some(entry.arrival)
            })
        })
        .and_then(|at| i64::try_from(at).ok());
    let since = match queued_at {
        Some(at) => format!(
            "since {} ago",
            humantime::format_duration(Duration::from_secs(
                now.duration_since(lockshift_store::Timestamp::from_micros(at))
                    .as_secs()
            ))
        ),
        None => format!(
            "since at least {} ago, its last renewal",
            humantime::format_duration(Duration::from_secs(
                now.duration_since(holder.writetime).as_secs()
            ))
        ),
    };
    let others = main.len() - 1;
    let line = format!(
        "waiting for {} (held by {} {since}{})",
        cut_short(lock.as_str()),
        cut_short(&holder.column),
        if others > 0 {
            format!("; {others} more cell(s) in main")
        } else {
            String::new()
        }
    );
    Some((line, holder.column.clone()))
}

/// At most one "waiting for" line per this long.
pub const WAIT_LINE_GAP: Duration = Duration::from_secs(5);

/// The "waiting for" lines of a waiting `run-with-lock` or `lock`,
/// rate-limited (pure: the caller feeds it what the waiter reported and
/// the time).
#[derive(Debug)]
pub struct WaitLines {
    lock: String,
    /// When the last line was printed (the first line, at start, counts).
    printed_at: Instant,
    /// What the last line printed said.
    printed: Option<WaitingFor>,
    /// A change not printed yet (too soon after the last line).
    pending: Option<WaitingFor>,
}

impl WaitLines {
    /// For `lock`, the first line printed at `start`.
    pub fn new(lock: &LockId, start: Instant) -> WaitLines {
        WaitLines {
            lock: lock.to_string(),
            printed_at: start,
            printed: None,
            pending: None,
        }
    }

    /// The waiter now waits for `state`: the line to print now, if any.
    pub fn seen(&mut self, state: WaitingFor, now: Instant) -> Option<String> {
        // Whom it waits for; the holder's TTL left changes at every read.
        let same = |p: &WaitingFor| (&p.holder, &p.ahead) == (&state.holder, &state.ahead);
        if self.printed.as_ref().is_some_and(same) || describe_wait(&self.lock, &state).is_none() {
            self.pending = None;
            return None;
        }
        self.pending = Some(state);
        self.flush(now)
    }

    /// When a pending line may be printed.
    pub fn due(&self) -> Option<Instant> {
        self.pending
            .as_ref()
            .map(|_| self.printed_at + WAIT_LINE_GAP)
    }

    /// The pending line, if it may be printed at `now`.
    pub fn flush(&mut self, now: Instant) -> Option<String> {
        if now < self.due()? {
            return None;
        }
        let state = self.pending.take()?;
        let line = describe_wait(&self.lock, &state);
        self.printed = Some(state);
        self.printed_at = now;
        line
    }
}

/// "lock L was not free within 20s: held by O (exit 3)": whom its reads saw in the way.
fn not_free_line(lock: &LockId, within: Duration, state: &WaitingFor) -> String {
    let lock = cut_short(lock.as_str());
    let within = fmt_duration_rounded(within);
    match in_the_way(state, false) {
        Some(who) => format!("lock {lock} was not free within {within}: {who} (exit 3)"),
        None => format!("lock {lock} was not free within {within} (exit 3)"),
    }
}

/// "waiting for L: held by O; 2 waiting ahead, first W" — `None` when the
/// waiter knows of nobody in its way.
fn describe_wait(lock: &str, state: &WaitingFor) -> Option<String> {
    let said = in_the_way(state, true)?;
    Some(format!("waiting for {}: {said}", cut_short(lock)))
}

/// "held by O (42 s left); 2 waiting ahead in line, first W" — the TTL
/// the holder's cell had left if `with_ttl`; `None` when `state` names
/// nobody.
fn in_the_way(state: &WaitingFor, with_ttl: bool) -> Option<String> {
    let holder = state.holder.as_deref().map(|h| match state.holder_ttl {
        Some(ttl) if with_ttl => format!("held by {} ({} s left)", cut_short(h), ttl.as_secs()),
        _ => format!("held by {}", cut_short(h)),
    });
    let ahead = state
        .ahead
        .as_ref()
        .map(|(n, first)| format!("{n} waiting ahead in line, first {}", cut_short(first)));
    match (holder, ahead) {
        (None, None) => None,
        (Some(h), None) => Some(h),
        (None, Some(a)) => Some(a),
        (Some(h), Some(a)) => Some(format!("{h}; {a}")),
    }
}

/// Sleeps until `at`; for ever without one (a `select!` branch that is off).
pub(crate) async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// `migrate-<host>-<pid>`, within the node id rules (the host name from
/// the operating system, as [`lockshift_lock::node_id_for_this_process`] has it).
fn node_id() -> String {
    let pid = std::process::id().to_string();
    let host: String = lockshift_lock::host_name()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(MAX_NODE_ID_LEN.saturating_sub(pid.len() + 10))
        .collect();
    let id = format!("migrate-{host}-{pid}");
    // Checked by the node's settings validation too; this only keeps the
    // fallback obviously valid.
    match NodeId::new(id.clone()) {
        Ok(_) => id,
        Err(_) => format!("migrate-{pid}"),
    }
}

/// Signals this process receives while it waits or holds: the first
/// cancels a pending acquisition; each is queued (`run-with-lock` forwards
/// them, `lock` releases on the first).
/// (Registering replaces their default action — dying — for the rest of
/// the process: `migrate` then releases the lock before it exits.)
#[derive(Debug)]
pub(crate) struct Interrupts {
    token: CancellationToken,
    pub(crate) rx: mpsc::UnboundedReceiver<Signal>,
}

impl Interrupts {
    fn listen() -> Interrupts {
        use tokio::signal::unix::{SignalKind, signal};
        let token = CancellationToken::new();
        let (tx, rx) = mpsc::unbounded_channel();
        for sig in child::FORWARDED {
            let Ok(mut stream) = signal(SignalKind::from_raw(sig as i32)) else {
                continue;
            };
            let (tx, token) = (tx.clone(), token.clone());
            tokio::spawn(async move {
                while stream.recv().await.is_some() {
                    token.cancel();
                    if tx.send(sig).is_err() {
                        return;
                    }
                }
            });
        }
        Interrupts { token, rx }
    }

    /// Signals received and not yet handled, oldest first.
    pub(crate) fn drain(&mut self) -> Vec<Signal> {
        let mut out = Vec::new();
        while let Ok(sig) = self.rx.try_recv() {
            out.push(sig);
        }
        out
    }
}

#[cfg(test)]
#[path = "lock_session_tests.rs"]
mod tests;
