//! `migrate lock <lock>`: take a lock and hold it until told to let go —
//! `etcdctl lock NAME` without a command, for a script that runs several
//! steps of its own under one lock:
//!
//! ```sh
//! coproc LOCK { migrate lock nightly; }
//! read -r token <&"${LOCK[0]}"            # held once this line comes
//! ./step-1 --fence "$token" && ./step-2 --fence "$token"
//! kill "$LOCK_PID"; wait "$LOCK_PID"       # 0: released; 4: the lease was lost meanwhile
//! ```
//!
//! The lock is taken exactly as `run-with-lock` takes it
//! ([`super::lock_session`]: a registered node, `--timeout`, the fencing
//! token required or not, the "waiting for" lines). Once held, one line
//! goes to stdout — the fencing token, or with `--json` one JSON object
//! ([`Held`]) — and the lock is held, its lease renewed by the guard, until
//!
//! - a signal (INT, TERM, HUP, QUIT): release, exit 0 — only if the lease
//!   was still proven then (checked against the clock, as before the token
//!   is printed); otherwise exit 4;
//! - the lease is lost: stderr says so, exit 4 (as `run-with-lock`).
//!
//! # What it cannot do
//!
//! `run-with-lock` stops its command when the lease is lost. Here the
//! holder is whatever read the line, which `migrate` does not know: it can
//! only exit 4 and say so. Between a lost lease and the script noticing,
//! another process may take the lock, so a resource the script changes
//! should check the fencing token (that is why the token is the line);
//! a script that cannot watch for the exit belongs under `run-with-lock`.

use lockshift_lock::{Algorithm, cut_short};
use serde::Serialize;
use tokio::time::Instant;

use super::lock_session::{
    Holding, LockRequest, LockSession, NotHeld, TokenWording, lost_reason, release,
};
use super::{Env, ms};
use crate::{JSON_VERSION, Outcome};

/// The line `migrate lock` prints on stdout once it holds the lock (with
/// `--json`; without, the fencing token alone). JSON schema, `"version": 1`,
/// on one line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Held {
    /// Schema version, 1.
    pub version: u32,
    /// The lock.
    pub lock: String,
    /// The fencing token (`null`: none could be had and
    /// `--fencing-token optional` holds without one).
    pub fencing_token: Option<u64>,
    /// The owner id of the acquisition.
    pub owner: String,
    /// The registered node id of this process.
    pub node: String,
    /// The algorithm that took the lock.
    pub algorithm: Algorithm,
    /// How long taking the lock took.
    pub waited_ms: u64,
}

impl Held {
    /// The line for a lock just taken.
    pub fn new(holding: &Holding) -> Held {
        Held {
            version: JSON_VERSION,
            lock: holding.lock.clone(),
            fencing_token: holding.fencing_token,
            // Set by every acquisition that returns a guard.
            owner: holding.owner.clone().unwrap_or_default(),
            node: holding.node.clone(),
            algorithm: holding.algorithm,
            waited_ms: holding.waited_ms,
        }
    }
}

/// How holding ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LockResult {
    /// Held until a signal, then released, the lease proven throughout.
    Released,
    /// The lease was lost while held.
    LeaseLost,
    /// The lock was not free within `--timeout`.
    Timeout,
    /// A signal came while waiting for the lock.
    Interrupted,
    /// No fencing token could be had while the lease held, and one was
    /// required (`--fencing-token required`, the default); released.
    NoFencingToken,
}

impl From<NotHeld> for LockResult {
    fn from(not_held: NotHeld) -> LockResult {
        match not_held {
            NotHeld::Timeout => LockResult::Timeout,
            NotHeld::Interrupted(_) => LockResult::Interrupted,
            NotHeld::NoFencingToken => LockResult::NoFencingToken,
        }
    }
}

/// The report of `migrate lock` when it ends (JSON schema, `"version": 1`;
/// with `--json` on stderr, as `run-with-lock`'s: stdout has the one
/// [`Held`] line).
#[derive(Debug, Clone, Serialize)]
pub struct LockReport {
    /// Schema version, 1.
    pub version: u32,
    /// Lock, node, mode, algorithm, owner, fencing token, wait and hold
    /// times, why the lease was lost (flattened: top-level fields).
    #[serde(flatten)]
    pub holding: Holding,
    /// How holding ended.
    pub result: LockResult,
    /// The signal that ended the hold or the wait (`SIGTERM`, …).
    pub signal: Option<String>,
    /// What `migrate` exits with.
    pub exit_code: i32,
}

impl LockReport {
    /// The exit status this ending maps to: 0 released, 4 lease lost, 3
    /// not free within `--timeout`, 128 + the signal that interrupted the
    /// wait, 1 no fencing token.
    pub fn outcome(&self) -> Outcome {
        match self.result {
            LockResult::Released => Outcome::Ok,
            LockResult::LeaseLost => Outcome::LeaseLost,
            LockResult::Timeout => Outcome::NotSafe,
            LockResult::Interrupted | LockResult::NoFencingToken => Outcome::Child(self.exit_code),
        }
    }
}

/// What `lock` says about its fencing token.
const WORDING: TokenWording = TokenWording {
    refused: "the lock was released (--fencing-token optional holds it without one)",
    without: "holding without a fencing token (the line on stdout is empty)",
};

/// Takes the lock, calls `on_held` once it holds it (to print the line),
/// then holds it until a signal or a lost lease, and releases. `note`
/// hears warnings (degraded mode, whom it waits for, lease lost).
///
/// # Errors
/// Node start or acquisition (other than timeout or signal) failures, and
/// `on_held`'s error — after the release: nobody can know the token, so
/// holding on would only keep others out.
pub async fn lock(
    env: &Env,
    request: LockRequest,
    mut on_held: impl FnMut(&Held) -> anyhow::Result<()>,
    mut note: impl FnMut(String),
) -> anyhow::Result<LockReport> {
    let (mut session, holding) = LockSession::start(env, &request, &mut note).await?;
    let mut report = LockReport {
        version: JSON_VERSION,
        holding,
        result: LockResult::Released,
        signal: None,
        exit_code: 0,
    };
    let result = hold(&mut session, &request, &mut report, &mut on_held, &mut note).await;
    session.shutdown().await;
    result.map(|()| report)
}

async fn hold(
    session: &mut LockSession,
    request: &LockRequest,
    report: &mut LockReport,
    on_held: &mut impl FnMut(&Held) -> anyhow::Result<()>,
    note: &mut impl FnMut(String),
) -> anyhow::Result<()> {
    let guard = match session
        .acquire(request, WORDING, &mut report.holding, note)
        .await?
    {
        Ok(guard) => guard,
        Err(not_held) => {
            report.result = not_held.into();
            report.exit_code = not_held.exit_code();
            if let NotHeld::Interrupted(signal) = not_held {
                report.signal = Some(signal.to_string());
            }
            return Ok(());
        }
    };
    let held_since = Instant::now();
    let lost = guard.lost();
    // Checked against the clock, not just the signal: a process paused
    // since it took the lock must not hand out its token.
    let lease_held = !guard.is_lost() && {
        if let Err(e) = on_held(&Held::new(&report.holding)) {
            release(guard, note).await;
            return Err(e.context("printing the fencing token"));
        }
        tokio::select! {
            // Lost first: a signal racing a loss must not pass for a hold
            // proven to the end.
            biased;
            () = lost.cancelled() => false,
            signal = session.next_signal() => {
                note(format!(
                    "{signal} received; releasing lock {}",
                    cut_short(&report.holding.lock)
                ));
                report.signal = Some(signal.to_string());
                // Exit 0 says the lease was proven until the release: the
                // clock decides, not only the renewal task (which a paused
                // process may not have run yet).
                !guard.is_lost()
            }
        }
    };
    if !lease_held {
        note("error: lease lost; the lock is no longer held".to_string());
        report.result = LockResult::LeaseLost;
        report.exit_code = 4;
        report.holding.lease_lost = Some(lost_reason(&guard));
    }
    report.holding.held_ms = ms(held_since.elapsed());
    release(guard, note).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use lockshift::Settings;
    use lockshift_decide::algorithm::Mode;
    use lockshift_lock::LockId;
    use lockshift_store::{
        FaultPlan, FaultScope, FaultyStore, MemoryStore, SharedStore, SystemClock, schema,
    };

    use super::*;
    use crate::render::Human;

    fn request(timeout: Duration) -> LockRequest {
        LockRequest {
            sharing: lockshift::Sharing::Exclusive,
            lock: LockId::new("job").unwrap(),
            mode: Some(Mode::Combined),
            timeout: Some(timeout),
            fencing_token_required: true,
        }
    }

    fn holding() -> Holding {
        Holding {
            lock: "job".into(),
            node: "migrate-h-1".into(),
            mode: Mode::Combined,
            stage: None,
            algorithm: Algorithm::Combined,
            degraded_from: None,
            owner: Some("migrate-h-1/7".into()),
            fencing_token: Some(42),
            waited_ms: 3,
            held_ms: 0,
            lease_lost: None,
        }
    }

    fn report(result: LockResult, exit_code: i32) -> LockReport {
        LockReport {
            version: JSON_VERSION,
            holding: holding(),
            result,
            signal: None,
            exit_code,
        }
    }

    /// The line on stdout: the token alone (empty without one), or one
    /// line of JSON naming the lock and the token.
    #[test]
    fn the_held_line_is_one_line() {
        let held = Held::new(&holding());
        assert_eq!(held.human(), "42\n");
        let json = serde_json::to_string(&held).unwrap();
        assert!(!json.contains('\n'), "{json}");
        let j: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            (&j["version"], &j["lock"], &j["fencing_token"], &j["owner"]),
            (
                &1.into(),
                &"job".into(),
                &42.into(),
                &"migrate-h-1/7".into()
            ),
            "{j}"
        );
        let none = Held {
            fencing_token: None,
            ..held
        };
        assert_eq!(none.human(), "\n");
    }

    /// Each ending: its exit status and what stderr says (table; the index
    /// is printed on failure).
    #[test]
    fn endings_map_to_exit_codes_and_lines() {
        let mut released = report(LockResult::Released, 0);
        released.signal = Some("SIGTERM".into());
        let mut lost = report(LockResult::LeaseLost, 4);
        lost.holding.lease_lost = Some("renewal failed".into());
        let cases = [
            (released, Outcome::Ok, "migrate: lock job released\n"),
            (
                lost,
                Outcome::LeaseLost,
                "migrate: lease of lock job lost (renewal failed); exit 4\n",
            ),
            (report(LockResult::Timeout, 3), Outcome::NotSafe, ""),
            (
                report(LockResult::Interrupted, 130),
                Outcome::Child(130),
                "migrate: interrupted while waiting for lock job\n",
            ),
            (report(LockResult::NoFencingToken, 1), Outcome::Child(1), ""),
        ];
        for (i, (report, outcome, line)) in cases.into_iter().enumerate() {
            assert_eq!(report.outcome(), outcome, "case #{i}");
            assert_eq!(report.human(), line, "case #{i}");
        }
        // The JSON report: the holding's fields at the top level.
        let j = serde_json::to_value(report(LockResult::Released, 0)).unwrap();
        assert_eq!(
            (&j["lock"], &j["result"]),
            (&"job".into(), &"released".into())
        );
        // A long lock name is echoed cut short.
        let mut long = report(LockResult::Interrupted, 130);
        long.holding.lock = "x".repeat(256);
        assert!(long.human().len() < 150, "{}", long.human());
    }

    /// Held elsewhere: not free within --timeout, exit 3, nothing printed.
    #[tokio::test]
    async fn a_lock_held_elsewhere_times_out_with_nothing_printed() {
        let store: SharedStore = Arc::new(MemoryStore::new());
        let env = Env::new(Settings::default(), store, Arc::new(SystemClock));
        let mut settings = Settings::default();
        settings.node.id = Some("other".into());
        let other = lockshift::Node::builder()
            .settings(settings)
            .store(env.raw.clone())
            .clock(env.clock.clone())
            .start()
            .await
            .unwrap();
        let guard = other.acquire(&LockId::new("job").unwrap()).await.unwrap();
        let mut printed = Vec::new();
        let mut notes = Vec::new();
        let r = lock(
            &env,
            request(Duration::from_millis(500)),
            |held| {
                printed.push(held.clone());
                Ok(())
            },
            |n| notes.push(n),
        )
        .await
        .unwrap();
        assert_eq!(
            (r.result, r.outcome()),
            (LockResult::Timeout, Outcome::NotSafe)
        );
        assert!(printed.is_empty(), "{printed:?}");
        // run-with-lock's words (the wait as measured, rounded), naming
        // the holder the waiter saw.
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("lock job was not free within 5")
                    && n.contains("ms: held by other/")
                    && n.ends_with(" (exit 3)")),
            "{notes:?}"
        );
        guard.release().await.unwrap();
        other.shutdown().await;
    }

    /// Renewals fail: the line was printed once, then the lease is lost —
    /// exit 4 with the reason — and the lock is given back.
    #[tokio::test]
    async fn a_lost_lease_ends_the_hold_with_exit_4() {
        let faulty = Arc::new(FaultyStore::new(MemoryStore::new(), 1));
        let store: SharedStore = faulty.clone();
        let mut settings = Settings::default();
        settings.lock.lease_ttl = Duration::from_secs(3);
        settings.lock.renew_every = Duration::from_secs(1);
        let env = Env::new(settings, store, Arc::new(SystemClock));
        let mut printed = Vec::new();
        let mut notes = Vec::new();
        let r = lock(
            &env,
            request(Duration::from_secs(10)),
            |held| {
                printed.push(held.clone());
                // From now on no write reaches the lock's tables.
                faulty.set_plan(FaultPlan {
                    scope: FaultScope {
                        tables: Some(vec![schema::MAIN, schema::QUEUE, schema::SHADOW]),
                        ops: None,
                    },
                    ..FaultPlan::default()
                });
                faulty.set_partitioned(true);
                Ok(())
            },
            |n| notes.push(n),
        )
        .await
        .unwrap();
        assert_eq!(printed.len(), 1, "{printed:?}");
        assert!(printed[0].fencing_token.is_some(), "{printed:?}");
        assert_eq!(
            (r.result, r.exit_code, r.outcome()),
            (LockResult::LeaseLost, 4, Outcome::LeaseLost),
            "{notes:?}"
        );
        assert!(r.holding.lease_lost.is_some());
        assert!(
            notes
                .iter()
                .any(|n| n == "error: lease lost; the lock is no longer held"),
            "{notes:?}"
        );
    }

    /// The line cannot be printed (stdout closed): the lock is released at
    /// once and the error returned.
    #[tokio::test]
    async fn a_line_that_cannot_be_printed_releases_the_lock() {
        let store: SharedStore = Arc::new(MemoryStore::new());
        let env = Env::new(Settings::default(), store, Arc::new(SystemClock));
        let err = lock(
            &env,
            request(Duration::from_secs(10)),
            |_| Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe).into()),
            |_| {},
        )
        .await
        .unwrap_err();
        assert!(crate::is_broken_pipe(&err), "{err:#}");
        let main = env
            .store
            .read(schema::MAIN, "job", &lockshift_store::RowQuery::all())
            .await
            .unwrap();
        assert!(main.is_empty(), "released: {main:?}");
    }
}
