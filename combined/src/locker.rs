//! [`CombinedLocker`]: thesis §7.2 — queue order, entry into `main` through
//! the legacy shadow arbitration, then a re-read of `main`.

use async_trait::async_trait;
use lockshift_decide::binding::Pacing;
use lockshift_decide::waiter::handoff::{Standing, others_in, standing};
use lockshift_decide::waiter::{Arrived, Entered, Policy};
use lockshift_lock::{Algorithm, Lease};
use lockshift_queue_lock::{Arrival, LineLocker, MainEntry, read_main};
use lockshift_store::{RowQuery, Store, StoreError, schema};

/// The combined lock's entry: shadow arbitration (so legacy contenders see
/// it), then a read of `main` after writing it (so queue holders are seen).
///
/// # Round trips, and why no fewer
///
/// The legacy argument (docs/design.md §3) needs three things in order: my
/// `shadow` write before my `shadow` read (Lemma 1 on `shadow`), that read
/// showing my cell alone *before* my read of `main` (else a legacy holder
/// that finished its shadow phase just before my read could be missed), and
/// my `main` write before my `shadow` delete. It does not need the read of
/// `main` to come before the write of `main` — the thesis' first step (G1)
/// reads `main` empty first, then writes, then re-reads (Q1); reading once
/// *after* writing gives both arguments at once: against legacy, that read
/// follows the `shadow` read; against queue, it follows my `main` write
/// (Lemma 1). So, from stage `dual` on, an uncontended acquisition is **3
/// round trips**: write queue, `shadow` and `main` cells together; read the
/// place and `shadow` together; read `main`. Fewer is impossible: the
/// `shadow` read must follow the `shadow` write, and the `main` read must
/// follow the `shadow` read. (The queue lock's 2 lack the middle link.)
///
/// Beside legacy contenders ([`Pacing::BesideLegacy`]: stage `legacy`, or a
/// stage the node cannot confirm) it keeps the thesis' shape — never a `main` cell before a
/// fresh read of `main` found it empty, so a legacy contender never sees a
/// `main` cell that is about to vanish and pauses a full owner-wait for it
/// — in **5 round trips**: queue and `shadow` writes together, place and
/// `shadow` reads together, the fresh read of `main`, the `main` write, the
/// re-read (Q1).
///
/// # The hand-off from `dual` on (Q6)
///
/// The waiter second in line writes its `shadow` and `main` cells early,
/// both naming the waiter ahead, which disregards them on every path (the
/// paced one too: a node that cannot confirm the stage may be ahead of one
/// that can). It claims with one read of `main` after a queue read that
/// shows that waiter gone, read together with `shadow` showing my cell
/// alone (or beside cells naming me), and only if my `shadow` cell has
/// lived since ([`MainEntry::can_claim`]) — so the legacy argument's three
/// orders hold. A hand-off is then the queue lock's: two reads after the
/// previous holder leaves the queue. Why it is safe: Q6's proof,
/// docs/design.md §3 ("The reservation behind the waiter ahead").
///
/// # Pacing
///
/// How it paces itself is the acquisition's [`Pacing`], read from its
/// [`Binding`](lockshift_lock::Binding) at each step (see [`Pacing`] for
/// why; unbound, as beside legacy contenders): beside legacy contenders it prepares nothing and its
/// first waiter pauses like a legacy contender while `main` is taken; at
/// full speed it prepares hand-offs.
#[derive(Debug, Clone, Copy, Default)]
pub struct CombinedEntry;

impl CombinedEntry {
    fn value(&self) -> &'static [u8] {
        Algorithm::Combined.as_str().as_bytes()
    }

    /// Whether `shadow` holds my cell alone — beside cells reserved behind
    /// me at most (Q6): those are combined waiters', never a legacy
    /// contender's, and between combined waiters `main` decides (Q1), so
    /// Lemma 1 on `shadow` still holds against every legacy contender.
    async fn shadow_alone(&self, store: &dyn Store, lease: &Lease) -> Result<bool, StoreError> {
        // The whole row, as `read_main` reads `main`: a limited read could
        // stop short of a contender sorted after rows that are no cells.
        let shadow = store
            .read(schema::SHADOW, lease.lock().as_str(), &RowQuery::all())
            .await?;
        Ok(standing(lease.owner().as_str(), lease.mark(), &shadow) == Standing::Alone)
    }

    /// The thesis' two steps, G1 then Q1, after my `shadow` cell was found
    /// alone: a fresh read of `main` (empty, or nothing is written), the
    /// `main` write, the re-read. `None` when `main` was taken on the fresh read.
    async fn classic_main(
        &self,
        store: &dyn Store,
        lease: &Lease,
    ) -> Result<Option<Vec<lockshift_store::Cell>>, StoreError> {
        // G1, listing 4 line 10: a fresh read — it must follow the shadow
        // read. Cells reserved behind me do not count (Q6): their owners
        // wait for me, and a node that saw the stage move on may have
        // written them while this one cannot confirm it.
        let fresh = read_main(store, lease).await?;
        if others_in(lease.owner().as_str(), lease.mark(), &fresh) {
            return Ok(None);
        }
        // G1, line 11: my main cell.
        lease
            .write_holding(schema::MAIN, lease.owner().as_str(), self.value())
            .await?;
        // Q1: re-read main (Lemma 1 against queue holders).
        Ok(Some(read_main(store, lease).await?))
    }

    /// The outcome of an attempt whose `main` read is `main`: the lock, or
    /// my `main` cell removed again (keeping `shadow` as the preparation
    /// when `keep_shadow`).
    async fn conclude(
        &self,
        lease: &Lease,
        main: Vec<lockshift_store::Cell>,
        keep_shadow: bool,
    ) -> Result<Entered, StoreError> {
        if standing(lease.owner().as_str(), lease.mark(), &main) == Standing::Alone {
            return Ok(Entered::Read {
                main,
                marked_reservation: false,
            });
        }
        // Someone else is in main: a combined `main` cell is never left as a
        // reservation (it is not marked one, and two would wait for each
        // other); the checked `shadow` cell is the preparation instead.
        lease.delete(schema::MAIN, lease.owner().as_str()).await?;
        if !keep_shadow {
            lease.delete_all_in(schema::SHADOW).await?;
        }
        Ok(Entered::Blocked {
            shadow_checked: keep_shadow,
        })
    }
}

#[async_trait]
impl MainEntry for CombinedEntry {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Combined
    }

    fn policy(&self) -> Policy {
        Policy::COMBINED
    }

    /// The fast path (see the type's docs for the round trips).
    async fn arrive(
        &self,
        store: &dyn Store,
        lease: &Lease,
        arrival: Arrival<'_>,
        fast: bool,
        pacing: Pacing,
    ) -> Result<Arrived, StoreError> {
        if !fast {
            return arrival.enqueue_then_place().await;
        }
        let me = lease.owner().as_str();
        let beside_legacy = pacing.beside_legacy();
        // Round 1: the queue cell and the shadow announcement together (and
        // from `dual` on my main cell too: it needs only to precede my
        // shadow delete and my read of main).
        let (queued, announced, wrote_main) = tokio::join!(
            arrival.enqueue,
            lease.write(schema::SHADOW, me, self.value()),
            async {
                if beside_legacy {
                    Ok(())
                } else {
                    lease.write_holding(schema::MAIN, me, self.value()).await
                }
            }
        );
        queued?;
        announced?;
        wrote_main?;
        // Round 2: my place and shadow (Lemma 1 on shadow: of two
        // contenders that both wrote, at least one sees the other here).
        let (position, alone) = tokio::join!(arrival.position, self.shadow_alone(store, lease));
        let (position, alone) = (position?, alone?);
        if !position.is_first() || !alone {
            return Ok(Arrived {
                position,
                main: None,
                wrote: true,
            });
        }
        let main = if beside_legacy {
            // Rounds 3–5: the thesis' two steps, G1 and Q1.
            self.classic_main(store, lease).await?
        } else {
            // Round 3: main, after the shadow read.
            Some(read_main(store, lease).await?)
        };
        Ok(Arrived {
            position,
            main,
            wrote: true,
        })
    }

    /// The first waiter's attempt. From `dual` on: shadow and main written
    /// together, shadow read, main read (3 round trips) — or, with the
    /// preparation standing (my `shadow` cell checked alone and proven
    /// since), main written and read (2). Beside legacy contenders: G1 and
    /// Q1 as the thesis has them.
    async fn enter(
        &self,
        store: &dyn Store,
        lease: &Lease,
        shadow_checked: bool,
        pacing: Pacing,
    ) -> Result<Entered, StoreError> {
        let me = lease.owner().as_str();
        if pacing.beside_legacy() {
            // G1: write shadow, read shadow alone, fresh read of main
            // empty, write main; Q1: re-read main. (The legacy lock's own
            // steps, but disregarding cells reserved behind me: Q6.)
            lease.write(schema::SHADOW, me, self.value()).await?;
            if self.shadow_alone(store, lease).await?
                && let Some(main) = self.classic_main(store, lease).await?
            {
                return self.conclude(lease, main, false).await;
            }
            lease.delete(schema::SHADOW, me).await?;
            return Ok(Entered::Blocked {
                shadow_checked: false,
            });
        }
        // The prepared shadow row of docs/design.md §3: my shadow cell was
        // read alone earlier and has lived since (the lease proves it), so
        // the legacy argument needs only my main read to follow that read.
        if shadow_checked && lease.check_valid().is_ok() && lease.is_proven(schema::SHADOW, me) {
            // Write main, then read it (Lemma 1 against queue holders).
            lease.write_holding(schema::MAIN, me, self.value()).await?;
            let main = read_main(store, lease).await?;
            return self.conclude(lease, main, true).await;
        }
        // Round 1: shadow announcement and main cell together.
        let (announced, wrote_main) = tokio::join!(
            lease.write(schema::SHADOW, me, self.value()),
            lease.write_holding(schema::MAIN, me, self.value())
        );
        announced?;
        wrote_main?;
        // Round 2: alone in shadow?
        if !self.shadow_alone(store, lease).await? {
            self.tidy(lease).await?;
            return Ok(Entered::Blocked {
                shadow_checked: false,
            });
        }
        // Round 3: main, after the shadow read.
        let main = read_main(store, lease).await?;
        self.conclude(lease, main, true).await
    }

    /// Q6: my `main` cell and my `shadow` announcement, both reserved behind
    /// `ahead`, written together. The waiter ahead disregards both; a
    /// legacy contender sees them as anyone's.
    async fn reserve_behind(
        &self,
        _store: &dyn Store,
        lease: &Lease,
        ahead: &str,
    ) -> Result<(), StoreError> {
        let me = lease.owner().as_str();
        let value = lockshift_decide::cells::reserved_behind(Algorithm::Combined, ahead);
        let (announced, reserved) = tokio::join!(
            lease.write(schema::SHADOW, me, &value),
            lease.write(schema::MAIN, me, &value)
        );
        announced?;
        reserved
    }

    /// Q6 needs the legacy argument's order too: my `shadow` cell read
    /// alone (it was written when I reserved), before any read of `main`
    /// that may claim — and living from then on ([`Self::can_claim`]).
    async fn ready_behind(&self, store: &dyn Store, lease: &Lease) -> Result<bool, StoreError> {
        self.shadow_alone(store, lease).await
    }

    /// A claim on a reservation also needs my `shadow` cell, read alone
    /// before, to have lived since (the lease proves it): then a legacy
    /// contender that missed it had finished its `main` write before my
    /// read of `main`.
    fn can_claim(&self, lease: &Lease) -> bool {
        lease.check_valid().is_ok() && lease.is_proven(schema::SHADOW, lease.owner().as_str())
    }

    /// The shadow cell has done its work once the lock is held.
    fn settle(&self, lease: &Lease) {
        lease.delete_in_background(schema::SHADOW, lease.owner().as_str());
    }

    async fn tidy(&self, lease: &Lease) -> Result<(), StoreError> {
        lease.delete_all_in(schema::MAIN).await?;
        lease.delete_all_in(schema::SHADOW).await
    }
}

/// The combined lock: safe beside legacy holders, queue holders and itself.
///
/// Each acquisition paces itself as its
/// [`Binding`](lockshift_lock::Binding) says; an unbound one paces for
/// legacy contenders with the legacy lock's default settings
/// ([`Pacing::default`]): it cannot know there are none. Its `new` takes a
/// [`TimeService`](lockshift_queue_lock::TimeService)'s source, held (with
/// the service's updater) for as long as the locker lives.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use lockshift_combined::CombinedLocker;
/// use lockshift_lock::{LeaseSettings, LockContext, LockId, Locker, NodeId};
/// use lockshift_queue_lock::{QueueSettings, TimeService, TimeSettings};
/// use lockshift_store::{MemoryStore, SharedStore, SystemClock};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let store: SharedStore = Arc::new(MemoryStore::new());
/// let time = TimeService::start(&TimeSettings::default(), store.clone(), Arc::new(SystemClock));
/// let ctx = LockContext::new(store, Arc::new(SystemClock), NodeId::new("n1")?,
///     LeaseSettings::default(), None)?;
/// let locker = CombinedLocker::new(Arc::new(ctx), time.source(), QueueSettings::default());
/// let guard = locker.acquire(&LockId::new("accounts")?).await?;
/// guard.release().await?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub type CombinedLocker = LineLocker<CombinedEntry>;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use std::sync::Arc;

    use lockshift_lock::{
        AcquireOptions, Binding, LeaseSettings, LockContext, LockId, Locker, NodeId,
    };
    use lockshift_queue_lock::{QueueSettings, TimeService, TimeSettings, TimeSourceKind};
    use lockshift_store::{FaultPlan, FaultyStore, MemoryStore, OpKind, SharedClock, TokioClock};

    use super::*;

    /// The store answers each operation after 10 ms of virtual latency: the
    /// time an acquisition takes counts its sequential round trips.
    const LATENCY: Duration = Duration::from_millis(10);

    /// An uncontended acquisition paced by `pacing`; returns the round
    /// trips it took (from the virtual time) and the operations.
    async fn uncontended(pacing: Pacing) -> (u32, lockshift_store::OpCounts) {
        let clock: SharedClock = Arc::new(TokioClock::new());
        let store = Arc::new(
            FaultyStore::new(MemoryStore::with_clock(clock.clone()), 1)
                .with_plan(FaultPlan::latency(LATENCY, Duration::ZERO)),
        );
        let time = TimeService::start(
            &TimeSettings {
                source: TimeSourceKind::Local,
                ..TimeSettings::default()
            },
            store.clone(),
            clock.clone(),
        );
        let ctx = LockContext::new(
            store.clone(),
            clock,
            NodeId::new("n").unwrap(),
            LeaseSettings::default(),
            Some(1),
        )
        .unwrap();
        let locker = CombinedLocker::new(Arc::new(ctx), time.source(), QueueSettings::default());
        let started = tokio::time::Instant::now();
        let guard = locker
            .acquire_with(
                &LockId::new("L").unwrap(),
                AcquireOptions::default(),
                &Binding::unbound().with_default_pacing(pacing),
            )
            .await
            .unwrap();
        let took = started.elapsed();
        let counts = store.op_counts();
        // Whole round trips: each takes 10–12 ms (the timer rounds each of
        // the store's two sleeps up to a millisecond), so up to five of them
        // are told apart by rounding to 11 ms.
        let round_trips = u32::try_from((took.as_millis() + 5) / 11).unwrap_or(u32::MAX);
        // Off the acquire path, in the background: the shadow and queue
        // cells go (the holder keeps only its main cell).
        tokio::time::sleep(LATENCY * 3).await;
        store.reset_counts();
        guard.release().await.unwrap();
        assert_eq!(
            store.op_counts().of_kind(OpKind::Delete),
            1,
            "the release deletes main only"
        );
        (round_trips, counts)
    }

    #[tokio::test(start_paused = true)]
    async fn uncontended_acquire_costs_three_round_trips_from_dual_on() {
        let (round_trips, c) = uncontended(Pacing::FullSpeed).await;
        assert_eq!(round_trips, 3, "{c}");
        // Round 1: queue, shadow and main writes; round 2: place and shadow
        // reads; round 3: the main read.
        assert_eq!(c.get(schema::QUEUE, OpKind::Write), 1, "{c}");
        assert_eq!(c.get(schema::SHADOW, OpKind::Write), 1, "{c}");
        assert_eq!(c.get(schema::MAIN, OpKind::Write), 1, "{c}");
        assert_eq!(c.get(schema::QUEUE, OpKind::Read), 1, "{c}");
        assert_eq!(c.get(schema::SHADOW, OpKind::Read), 1, "{c}");
        assert_eq!(c.get(schema::MAIN, OpKind::Read), 1, "{c}");
        assert_eq!(c.total(), 6, "{c}");
    }

    #[tokio::test(start_paused = true)]
    async fn uncontended_acquire_costs_five_round_trips_beside_legacy() {
        let (round_trips, c) = uncontended(Pacing::BesideLegacy {
            owner_wait_max: Duration::from_secs(1),
        })
        .await;
        assert_eq!(round_trips, 5, "{c}");
        // Queue and shadow writes; place and shadow reads; G1's fresh read
        // of main and main write; Q1's re-read.
        assert_eq!(c.get(schema::QUEUE, OpKind::Write), 1, "{c}");
        assert_eq!(c.get(schema::SHADOW, OpKind::Write), 1, "{c}");
        assert_eq!(c.get(schema::QUEUE, OpKind::Read), 1, "{c}");
        assert_eq!(c.get(schema::SHADOW, OpKind::Read), 1, "{c}");
        assert_eq!(c.get(schema::MAIN, OpKind::Read), 2, "{c}");
        assert_eq!(c.get(schema::MAIN, OpKind::Write), 1, "{c}");
        assert_eq!(c.total(), 7, "{c}");
    }
}
