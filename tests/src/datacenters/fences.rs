//! Fenced writes across moves of a home (issue 45, item 2; F1 in
//! docs/design.md §5): the workers' fenced writes, the ledger of what they
//! wrote and what each datacenter held, and the fence check.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use lockshift::Node;
use lockshift_store::{Datacenter, MemoryStore};
use rand::Rng;
use rand::rngs::StdRng;
use tokio_util::sync::CancellationToken;

use super::{Outcome, Sites, lock};

/// How a worker's fenced write is routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FencedRoute {
    /// Through the writer its node hands out (`Node::fenced_writer`):
    /// where the lock's home is when the write is sent (F1).
    LocksHome,
    /// Negative control: on a raw client of the worker's datacenter,
    /// pinned to the home the node's view showed when the worker checked
    /// its guard — what `FencedWriter::via(Route::Datacenter(home))` did.
    PinnedAtCheck,
}

/// Each critical section, once the worker has checked that its guard is
/// not lost, takes a fenced writer, sometimes pauses (as a process paused
/// between its check and its write), and writes its lock's cell under the
/// guard's token.
#[derive(Debug, Clone)]
pub struct FencedWork {
    /// How the write is routed.
    pub route: FencedRoute,
    /// The chance of a pause between the check and the write, while
    /// [`pausing`](Self::pausing) is set.
    pub pause_chance: f64,
    /// The pause, drawn uniformly from this range.
    pub pause: (Duration, Duration),
    /// Whether workers pause now: a scenario sets it around the moments
    /// that matter (a pause holds the lock, since the node renews it).
    pub pausing: Arc<std::sync::atomic::AtomicBool>,
}

/// The table and column of every lock's fenced cell; the row is the lock's
/// name. A value is `token:owner:n`, so a copy names the token beside it.
pub const FENCED_COLUMN: &str = "fenced";

/// Every fenced write of a run and what the datacenters held: the
/// invariant is that each datacenter's copy of a cell never goes to a
/// smaller token, and that once the datacenters are whole every copy holds
/// the value written under the largest token acknowledged or later.
#[derive(Debug, Default)]
pub struct FenceLedger {
    /// Every write sent (or about to be): value → (lock, token).
    pub attempted: BTreeMap<String, (String, u64)>,
    /// The writes the store acknowledged, by lock: (token, value).
    pub acknowledged: BTreeMap<String, Vec<(u64, String)>>,
    /// Refused by a larger token in the cell.
    pub refused: u64,
    /// Refused without being sent: the lock's home not confirmed, or a
    /// moved home not serving yet.
    pub not_sent: u64,
    /// Other failures (may have landed).
    pub failed: u64,
    /// The token of each datacenter's copy of each lock's cell, as last
    /// seen.
    pub seen: BTreeMap<(String, String), u64>,
    /// Each acknowledged write's token and the timestamp the store gave
    /// it (the order copies reconcile in), by lock.
    pub stamped: BTreeMap<String, Vec<(u64, i64)>>,
    /// A datacenter's copy went to a smaller token.
    pub violations: Vec<String>,
    n: u64,
}

impl FenceLedger {
    /// Notes that a write of `lock`'s cell under `token` was stamped `at`:
    /// copies reconcile by timestamp, so a write under a smaller token
    /// stamped after one under a larger token would bring the fence down
    /// wherever both arrive.
    fn stamp(&mut self, lock: &str, token: u64, at: i64) {
        let stamped = self.stamped.entry(lock.to_string()).or_default();
        // The first write it is out of order with (one finding per write).
        let crossed = stamped
            .iter()
            .find(|&&(other, other_at)| {
                (token < other && at >= other_at) || (token > other && at <= other_at)
            })
            .copied();
        if let Some((other, other_at)) = crossed {
            let ((t1, a1), (t2, a2)) = if at > other_at {
                ((other, other_at), (token, at))
            } else {
                ((token, at), (other, other_at))
            };
            self.violations.push(format!(
                "{lock}: a write under token {t2} was stamped {a2} µs, not before one under \
                 token {t1} (stamped {a1} µs): the fence goes down where both arrive"
            ));
        }
        stamped.push((token, at));
    }

    /// Notes what `dc` holds of `lock`'s cell now (`value`, if any).
    fn observe(&mut self, dc: &str, lock: &str, value: Option<&str>, when: &str) {
        let Some(value) = value else { return };
        let token = token_of(value);
        let last = self
            .seen
            .entry((dc.to_string(), lock.to_string()))
            .or_insert(0);
        if token < *last {
            self.violations.push(format!(
                "{when}: {dc}'s copy of {lock}'s cell went from token {last} down to {value:?}"
            ));
        }
        *last = token;
    }
}

fn token_of(value: &str) -> u64 {
    value
        .split(':')
        .next()
        .and_then(|t| t.parse().ok())
        .unwrap_or(0)
}

/// The timestamp of the version of `lock`'s fenced cell holding `value`,
/// where some datacenter still holds it.
fn stamp_of(
    cluster: &MemoryStore,
    datacenters: &[Datacenter],
    lock: &str,
    value: &str,
) -> Option<i64> {
    use lockshift_store::reconcile::CellVersion;
    datacenters.iter().find_map(|dc| {
        cluster
            .client_in(dc)?
            .raw_row(lockshift_store::schema::SCRATCH, lock)
            .into_iter()
            .find_map(|(c, v)| match v {
                CellVersion::Live {
                    value: held,
                    timestamp,
                    ..
                } if c == FENCED_COLUMN && held == value.as_bytes() => Some(timestamp.as_micros()),
                _ => None,
            })
    })
}

/// What `dc`'s replicas hold of `column` of `row` in the scratch table now
/// (no repair: the datacenter's own copy); `None` for a datacenter the
/// cluster does not have.
pub fn copy_in(cluster: &MemoryStore, dc: &Datacenter, row: &str, column: &str) -> Option<String> {
    use lockshift_store::reconcile::CellVersion;
    cluster
        .client_in(dc)?
        .raw_row(lockshift_store::schema::SCRATCH, row)
        .into_iter()
        .filter(|(c, _)| c == column)
        .filter_map(|(_, v)| match v {
            CellVersion::Live {
                value, timestamp, ..
            } => Some((timestamp, value)),
            _ => None,
        })
        .max_by_key(|(t, _)| *t)
        .map(|(_, v)| String::from_utf8_lossy(&v).into_owned())
}

/// One worker's fenced writes.
pub(super) struct FencedWorker {
    pub(super) work: FencedWork,
    pub(super) node: Node,
    /// A client of the worker's datacenter, for writes pinned at the check.
    pub(super) raw: MemoryStore,
    pub(super) cluster: Arc<MemoryStore>,
    pub(super) datacenters: Vec<Datacenter>,
    pub(super) outcome: Arc<Outcome>,
    pub(super) stop: CancellationToken,
}

/// A fenced write as taken at the check: the lock's writer, or the home
/// the node showed and the guard's token.
enum Prepared {
    Writer(lockshift::fenced::FencedWriter),
    Pinned(Datacenter, u64),
}

/// What one fenced write did.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answer {
    Applied,
    /// Refused by a larger token in the cell.
    Refused,
    /// Not sent (refused by the route, or no coordinator to send it to).
    NotSent,
    /// Failed; may have landed.
    Failed,
}

impl FencedWorker {
    /// Checks `guard`, takes a writer (or notes the home, pinned), maybe
    /// pauses, and writes the lock's cell; records what happened and what
    /// every datacenter holds of the cell afterwards.
    pub(super) async fn write(&self, guard: &lockshift::LockGuard, rng: &mut StdRng) {
        if guard.is_lost() {
            return;
        }
        let Some(prepared) = self.prepare(guard).await else {
            return;
        };
        if self.work.pausing.load(std::sync::atomic::Ordering::Relaxed)
            && rng.random_bool(self.work.pause_chance)
        {
            let (low, high) = self.work.pause;
            let pause = if high > low {
                rng.random_range(low..high)
            } else {
                low
            };
            tokio::select! {
                biased;
                () = self.stop.cancelled() => return,
                () = tokio::time::sleep(pause) => {}
            }
        }
        let lock_name = guard.lock_id().as_str();
        let token = match &prepared {
            Prepared::Writer(w) => w.token(),
            Prepared::Pinned(_, token) => *token,
        };
        let value = {
            let mut ledger = lock(&self.outcome.fences);
            ledger.n += 1;
            let value = format!("{token}:{}:{}", guard.owner(), ledger.n);
            ledger
                .attempted
                .insert(value.clone(), (lock_name.to_string(), token));
            value
        };
        let answer = self.send(&prepared, lock_name, &value).await;
        let stamp = (answer == Answer::Applied)
            .then(|| stamp_of(&self.cluster, &self.datacenters, lock_name, &value))
            .flatten();
        let mut ledger = lock(&self.outcome.fences);
        if let Some(at) = stamp {
            ledger.stamp(lock_name, token, at);
        }
        match answer {
            Answer::Applied => ledger
                .acknowledged
                .entry(lock_name.to_string())
                .or_default()
                .push((token, value)),
            Answer::Refused => ledger.refused += 1,
            Answer::NotSent => ledger.not_sent += 1,
            Answer::Failed => ledger.failed += 1,
        }
        for dc in &self.datacenters {
            let copy = copy_in(&self.cluster, dc, lock_name, FENCED_COLUMN);
            ledger.observe(
                dc.as_str(),
                lock_name,
                copy.as_deref(),
                "after a fenced write",
            );
        }
    }

    /// What the write will be, as of the check (`None`: the guard was
    /// lost meanwhile, or the node knows no home).
    async fn prepare(&self, guard: &lockshift::LockGuard) -> Option<Prepared> {
        match self.work.route {
            FencedRoute::LocksHome => self
                .node
                .fenced_writer(guard)
                .await
                .ok()
                .map(Prepared::Writer),
            FencedRoute::PinnedAtCheck => {
                let token = guard.fencing_token().await.ok()?;
                let home = self
                    .node
                    .status()
                    .homes
                    .into_iter()
                    .find(|r| r.rule == lockshift_decide::home::Rule::Default.key())?
                    .record
                    .datacenter;
                Some(Prepared::Pinned(home, token))
            }
        }
    }

    async fn send(&self, prepared: &Prepared, lock_name: &str, value: &str) -> Answer {
        use lockshift::fenced::FencedWriteError;
        use lockshift_store::{FencedOutcome, Route, Store};
        let cell = lockshift_store::CellWrite::new(FENCED_COLUMN, value.to_string());
        let table = lockshift_store::schema::SCRATCH;
        let failed = |e: &lockshift_store::StoreError| {
            if e.may_have_applied() {
                Answer::Failed
            } else {
                Answer::NotSent
            }
        };
        match prepared {
            Prepared::Writer(w) => match w.write(table, lock_name, &cell).await {
                Ok(()) => Answer::Applied,
                Err(FencedWriteError::Refused { .. }) => Answer::Refused,
                Err(FencedWriteError::Store(e)) => failed(&e),
                Err(_) => Answer::Failed,
            },
            Prepared::Pinned(home, token) => match self
                .raw
                .write_fenced_via(
                    &Route::Datacenter(home.clone()),
                    table,
                    lock_name,
                    &cell,
                    *token,
                )
                .await
            {
                Ok(FencedOutcome::Applied { .. }) => Answer::Applied,
                Ok(_) => Answer::Refused,
                Err(e) => failed(&e),
            },
        }
    }
}

impl Sites {
    /// The fence check, once the datacenters are whole again and every
    /// hint is delivered: every datacenter's copy of each lock's cell is
    /// the same, never went to a smaller token on the way, and is the
    /// value written under the largest token acknowledged, or a larger
    /// one that may have landed. Every problem, in words (empty: none).
    pub async fn check_fences(&self) -> Vec<String> {
        use lockshift_store::{Route, RowQuery, Store};
        self.cluster.restore_all_links();
        self.cluster.deliver_hints();
        let datacenters = self.datacenters();
        for name in &self.locks {
            for dc in &datacenters {
                // A request coordinated there replays what it missed.
                if let Some(client) = self.cluster.client_in(dc) {
                    let _ = client
                        .read_via(
                            &Route::Datacenter(dc.clone()),
                            lockshift_store::schema::SCRATCH,
                            name,
                            &RowQuery::all(),
                        )
                        .await;
                }
            }
        }
        let mut problems = Vec::new();
        let mut ledger = lock(&self.outcome.fences);
        for name in &self.locks {
            let copies: Vec<Option<String>> = datacenters
                .iter()
                .map(|dc| copy_in(&self.cluster, dc, name, FENCED_COLUMN))
                .collect();
            for (dc, copy) in datacenters.iter().zip(&copies) {
                ledger.observe(dc.as_str(), name, copy.as_deref(), "once whole");
            }
            if copies.windows(2).any(|w| w[0] != w[1]) {
                problems.push(format!(
                    "{name}: the datacenters differ once whole: {copies:?}"
                ));
            }
            let last = ledger
                .acknowledged
                .get(*name)
                .and_then(|w| w.iter().max_by_key(|(t, _)| *t).cloned());
            let Some((largest, largest_value)) = last else {
                continue;
            };
            let Some(Some(copy)) = copies.first() else {
                problems.push(format!(
                    "{name}: no value, though {largest_value:?} was acknowledged"
                ));
                continue;
            };
            let token = token_of(copy);
            let known = ledger.attempted.contains_key(copy.as_str());
            if !known || token < largest || (token == largest && *copy != largest_value) {
                problems.push(format!(
                    "{name}: the cell holds {copy:?}, not the last holder's write \
                     ({largest_value:?}, the largest token acknowledged)"
                ));
            }
        }
        problems.extend(ledger.violations.iter().cloned());
        problems
    }
}
