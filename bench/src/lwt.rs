//! The LWT lease: the lock Cassandra users build with lightweight
//! transactions (ShedLock's Cassandra provider, the DataStax pattern) — a
//! benchmark baseline, not a lockshift lock mode.
//!
//! - acquire: `INSERT INTO <ks>.bench_lwt_lease (name, owner) VALUES (?, ?)
//!   IF NOT EXISTS USING TTL ?`; when not applied, wait a jittered delay
//!   and try again;
//! - renew (while held, every `renew_every`): `UPDATE … USING TTL ? SET owner
//!   = ? WHERE name = ? IF owner = ?`; not applied means the lease is lost;
//! - release: `DELETE FROM … WHERE name = ? IF owner = ?`.
//!
//! Each is one request from the client, but a Paxos round on the cluster
//! (Cassandra 4.1's default Paxos v1: prepare, read, propose, commit). The
//! statements go through the session of the same [`CqlStore`] the locks
//! use, at its consistency (serial consistency to match) and request
//! timeout, so the comparison runs on the local endpoint and on a cluster
//! alike.
//!
//! The retry delay is uniform in `[0, 2 × RT)`, RT the measured round trip
//! of a plain read: a contender asks about once per round trip on average,
//! as often as the queue lock's next waiter polls — the baseline is not
//! slowed by a lazy retry. It has no queue, so who wins a free lease is
//! luck: that, and requests that time out with an unknown outcome under
//! contention, are what the benchmark shows.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lockshift_store::{Consistency, CqlStore};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use scylla::client::session::Session;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::{Consistency as DriverConsistency, SerialConsistency};
use scylla::value::{CqlValue, Row};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::BenchError;

/// The baseline's table, in lockshift's keyspace.
pub const TABLE: &str = "bench_lwt_lease";

/// How often a failed release is retried before the TTL is left to free
/// the lease.
const RELEASE_ATTEMPTS: u32 = 3;

/// The DDL of the baseline's table (run once by the orchestrator).
pub fn create_table_cql(keyspace: &str) -> String {
    format!("CREATE TABLE IF NOT EXISTS {keyspace}.{TABLE} (name text PRIMARY KEY, owner text)")
}

/// What a conditional statement answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// `[applied] = true`.
    Applied,
    /// `[applied] = false`; the current owner when the row exists.
    NotApplied {
        /// The `owner` column of the current row.
        owner: Option<String>,
    },
}

/// Reads `[applied]` and `owner` from a conditional statement's result
/// row, whatever other columns the server added (Cassandra answers every
/// column for `IF NOT EXISTS`, the condition's columns for `IF owner = ?`).
///
/// # Errors
/// When the row has no boolean `[applied]` column first.
pub fn answer(columns: &[&str], row: &Row) -> Result<Answer, String> {
    match (columns.first(), row.columns.first()) {
        (Some(&"[applied]"), Some(Some(CqlValue::Boolean(true)))) => Ok(Answer::Applied),
        (Some(&"[applied]"), Some(Some(CqlValue::Boolean(false)))) => {
            let owner = columns
                .iter()
                .position(|c| *c == "owner")
                .and_then(|i| row.columns.get(i))
                .and_then(|v| match v {
                    Some(CqlValue::Text(s) | CqlValue::Ascii(s)) => Some(s.clone()),
                    _ => None,
                });
            Ok(Answer::NotApplied { owner })
        }
        _ => Err(format!(
            "not a lightweight-transaction result: columns {columns:?}"
        )),
    }
}

/// What an acquisition attempt's answer means for `me`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// The lease is mine.
    Held,
    /// Someone else has it, or nobody does and my attempt lost: retry.
    Retry,
}

/// The decision after one `INSERT … IF NOT EXISTS`: mine if it applied —
/// or if it did not because the row already names me, which happens when
/// an earlier attempt of mine timed out but had applied (an unknown
/// outcome resolves on the next try, as careful users write it).
pub fn decide(answer: &Answer, me: &str) -> Attempt {
    match answer {
        Answer::Applied => Attempt::Held,
        Answer::NotApplied { owner: Some(o) } if o == me => Attempt::Held,
        Answer::NotApplied { .. } => Attempt::Retry,
    }
}

/// The next retry delay: uniform in `[0, 2 × round_trip)` (at least 1 ms
/// wide, so a zero round trip still spreads contenders).
pub fn retry_delay(rng: &mut impl Rng, round_trip: Duration) -> Duration {
    let width = (2 * round_trip).max(Duration::from_millis(1));
    width.mul_f64(rng.random::<f64>())
}

#[derive(Debug)]
struct Statements {
    acquire: PreparedStatement,
    renew: PreparedStatement,
    release: PreparedStatement,
}

/// One process's LWT lease client.
#[derive(Debug)]
pub struct LwtLocker {
    session: Arc<Session>,
    statements: Arc<Statements>,
    owner: String,
    ttl_secs: i32,
    renew_every: Duration,
    round_trip: Duration,
    rng: Mutex<StdRng>,
    /// Conditional statements sent (each one store operation for the
    /// client; a Paxos round for the cluster).
    sent: Arc<AtomicU64>,
    /// Attempts whose outcome was unknown (timeouts, unavailability).
    unknown: Arc<AtomicU64>,
}

/// A held LWT lease; renewed in the background until released.
#[derive(Debug)]
pub struct LwtGuard {
    session: Arc<Session>,
    statements: Arc<Statements>,
    name: String,
    owner: String,
    sent: Arc<AtomicU64>,
    stop: CancellationToken,
    renewer: JoinHandle<()>,
}

fn driver_consistency(c: Consistency) -> (DriverConsistency, SerialConsistency) {
    match c {
        Consistency::Quorum => (DriverConsistency::Quorum, SerialConsistency::Serial),
        Consistency::LocalQuorum => (
            DriverConsistency::LocalQuorum,
            SerialConsistency::LocalSerial,
        ),
    }
}

async fn execute(
    session: &Session,
    sent: &AtomicU64,
    statement: &PreparedStatement,
    values: impl scylla::serialize::row::SerializeRow,
) -> Result<Answer, String> {
    sent.fetch_add(1, Ordering::Relaxed);
    let rows = session
        .execute_unpaged(statement, values)
        .await
        .map_err(|e| e.to_string())?
        .into_rows_result()
        .map_err(|e| e.to_string())?;
    let columns: Vec<&str> = rows.column_specs().iter().map(|c| c.name()).collect();
    let row = rows.first_row::<Row>().map_err(|e| e.to_string())?;
    answer(&columns, &row)
}

impl LwtLocker {
    /// Prepares the three statements on `store`'s session.
    ///
    /// # Errors
    /// When preparing fails (e.g. the table was not created).
    #[allow(clippy::too_many_arguments)]
    pub async fn new(
        store: &CqlStore,
        consistency: Consistency,
        request_timeout: Duration,
        owner: String,
        ttl: Duration,
        renew_every: Duration,
        round_trip: Duration,
        seed: u64,
    ) -> Result<LwtLocker, BenchError> {
        let ks = store.keyspace();
        let session = store.session().clone();
        let (cl, serial) = driver_consistency(consistency);
        let prepare = |text: String| {
            let session = session.clone();
            async move {
                let mut s = session
                    .prepare(text.as_str())
                    .await
                    .map_err(|e| BenchError::Setting(format!("preparing `{text}`: {e}")))?;
                s.set_consistency(cl);
                s.set_serial_consistency(Some(serial));
                s.set_request_timeout(Some(request_timeout));
                Ok::<_, BenchError>(s)
            }
        };
        let statements = Statements {
            acquire: prepare(format!(
                "INSERT INTO {ks}.{TABLE} (name, owner) VALUES (?, ?) IF NOT EXISTS USING TTL ?"
            ))
            .await?,
            renew: prepare(format!(
                "UPDATE {ks}.{TABLE} USING TTL ? SET owner = ? WHERE name = ? IF owner = ?"
            ))
            .await?,
            release: prepare(format!(
                "DELETE FROM {ks}.{TABLE} WHERE name = ? IF owner = ?"
            ))
            .await?,
        };
        let ttl_secs = i32::try_from(ttl.as_secs().max(1)).unwrap_or(i32::MAX);
        Ok(LwtLocker {
            session,
            statements: Arc::new(statements),
            owner,
            ttl_secs,
            renew_every,
            round_trip,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            sent: Arc::new(AtomicU64::new(0)),
            unknown: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Conditional statements sent so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Attempts whose outcome was unknown so far.
    pub fn unknown_outcomes(&self) -> u64 {
        self.unknown.load(Ordering::Relaxed)
    }

    /// Resets both counters.
    pub fn reset_counts(&self) {
        self.sent.store(0, Ordering::Relaxed);
        self.unknown.store(0, Ordering::Relaxed);
    }

    /// Takes lease `name`, retrying with jitter while it is taken.
    ///
    /// # Errors
    /// Never gives up on a taken lease; returns an error only when
    /// `give_up` passes with every attempt failing or refused.
    pub async fn acquire(&self, name: &str, give_up: Duration) -> Result<LwtGuard, String> {
        let deadline = tokio::time::Instant::now() + give_up;
        let mut last_error = None;
        loop {
            let outcome = execute(
                &self.session,
                &self.sent,
                &self.statements.acquire,
                (name, self.owner.as_str(), self.ttl_secs),
            )
            .await;
            match outcome {
                Ok(a) if decide(&a, &self.owner) == Attempt::Held => return Ok(self.held(name)),
                Ok(_) => {}
                Err(e) => {
                    // A timeout may have applied: the next attempt finds out.
                    self.unknown.fetch_add(1, Ordering::Relaxed);
                    last_error = Some(e);
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(last_error
                    .unwrap_or_else(|| format!("lease {name} still taken after {give_up:?}")));
            }
            let delay = retry_delay(&mut *self.rng.lock().await, self.round_trip);
            lockshift_lock::pause::sleep(delay).await;
        }
    }

    fn held(&self, name: &str) -> LwtGuard {
        let stop = CancellationToken::new();
        let renewer = tokio::spawn(renew_loop(
            self.session.clone(),
            self.statements.clone(),
            self.sent.clone(),
            name.to_string(),
            self.owner.clone(),
            self.ttl_secs,
            self.renew_every,
            stop.clone(),
        ));
        LwtGuard {
            session: self.session.clone(),
            statements: self.statements.clone(),
            name: name.to_string(),
            owner: self.owner.clone(),
            sent: self.sent.clone(),
            stop,
            renewer,
        }
    }
}

/// Renews every `every` while held; a renewal that does not apply means the
/// lease expired or was taken over: stop (a real client would signal loss).
#[allow(clippy::too_many_arguments)]
async fn renew_loop(
    session: Arc<Session>,
    statements: Arc<Statements>,
    sent: Arc<AtomicU64>,
    name: String,
    owner: String,
    ttl_secs: i32,
    every: Duration,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let values = (ttl_secs, owner.as_str(), name.as_str(), owner.as_str());
        match execute(&session, &sent, &statements.renew, values).await {
            Ok(Answer::Applied) | Err(_) => {}
            Ok(Answer::NotApplied { .. }) => return,
        }
    }
}

impl LwtGuard {
    /// Stops renewing and deletes the lease if it is still mine.
    ///
    /// # Errors
    /// When every delete attempt failed (the TTL frees the lease then).
    pub async fn release(self) -> Result<(), String> {
        self.stop.cancel();
        let _ = self.renewer.await;
        let mut attempt = 0;
        loop {
            let values = (self.name.as_str(), self.owner.as_str());
            match execute(&self.session, &self.sent, &self.statements.release, values).await {
                Ok(_) => return Ok(()),
                Err(e) if attempt + 1 >= RELEASE_ATTEMPTS => return Err(e),
                Err(_) => attempt += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(values: Vec<Option<CqlValue>>) -> Row {
        Row { columns: values }
    }

    #[test]
    fn answers_are_read_by_column_name() {
        let text = |s: &str| Some(CqlValue::Text(s.to_string()));
        let cases: Vec<(&[&str], Row, Result<Answer, ()>)> = vec![
            (
                &["[applied]"],
                row(vec![Some(CqlValue::Boolean(true))]),
                Ok(Answer::Applied),
            ),
            // IF NOT EXISTS, taken: every column of the row.
            (
                &["[applied]", "name", "owner"],
                row(vec![Some(CqlValue::Boolean(false)), text("l"), text("b")]),
                Ok(Answer::NotApplied {
                    owner: Some("b".into()),
                }),
            ),
            // IF owner = ?, other owner: the condition's column.
            (
                &["[applied]", "owner"],
                row(vec![Some(CqlValue::Boolean(false)), text("b")]),
                Ok(Answer::NotApplied {
                    owner: Some("b".into()),
                }),
            ),
            // Row gone: `[applied]` alone.
            (
                &["[applied]"],
                row(vec![Some(CqlValue::Boolean(false))]),
                Ok(Answer::NotApplied { owner: None }),
            ),
            (&["owner"], row(vec![text("b")]), Err(())),
            (&["[applied]"], row(vec![None]), Err(())),
        ];
        for (columns, row, expected) in cases {
            assert_eq!(
                answer(columns, &row).map_err(|_| ()),
                expected,
                "{columns:?}"
            );
        }
    }

    #[test]
    fn attempts_decide_by_owner() {
        let taken = |o: Option<&str>| Answer::NotApplied {
            owner: o.map(str::to_string),
        };
        for (answer, expected) in [
            (Answer::Applied, Attempt::Held),
            (taken(Some("me")), Attempt::Held),
            (taken(Some("other")), Attempt::Retry),
            (taken(None), Attempt::Retry),
        ] {
            assert_eq!(decide(&answer, "me"), expected, "{answer:?}");
        }
    }

    #[test]
    fn retry_delays_spread_over_two_round_trips() {
        let mut rng = StdRng::seed_from_u64(7);
        let rt = Duration::from_millis(3);
        let delays: Vec<Duration> = (0..1000).map(|_| retry_delay(&mut rng, rt)).collect();
        assert!(delays.iter().all(|d| *d < 2 * rt));
        let mean = delays.iter().sum::<Duration>() / 1000;
        assert!(mean > rt.mul_f64(0.9) && mean < rt.mul_f64(1.1), "{mean:?}");
        let mut rng = StdRng::seed_from_u64(7);
        assert!(retry_delay(&mut rng, Duration::ZERO) < Duration::from_millis(1));
    }
}
