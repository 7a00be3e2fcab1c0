//! Homes across datacenters: a process's view of where each lock's cells
//! live, and the router that sends every request of a lock to its home
//! (docs/design.md §4a, H1–H4). What a process believes and where a row's
//! requests go are decided in `lockshift_decide::home`; this module does
//! the I/O a request needs. Seeding the homes row, keeping the view fresh
//! and moving a home are the rollout's (`lockshift_rollout::homes`); the
//! router lives here so that a lock's requests pass through the store
//! crate only.
//!
//! - [`HomesView`]: a process's view of the homes ([`Homes`]) behind a
//!   lock, with its clock and datacenter — shared by the router and the
//!   task that refreshes it.
//! - [`HomesRouter`]: a [`Store`] that sends every request on the default
//!   route to its row's home at `LOCAL_QUORUM` (H1) — and every request
//!   named by a lock ([`Route::HomeOf`], a fenced write's) to that lock's
//!   home (F1) — or refuses it without
//!   sending it when the home is not confirmed (H2,
//!   [`StoreErrorKind::HomeUnreachable`]) or a moved home does not serve
//!   yet (H3, [`StoreErrorKind::HomeMoving`], naming when it serves: a
//!   waiter waits that long). Every algorithm runs on it unchanged.
//! - [`refresh`] (in `read.rs`): one read of the homes row from every
//!   datacenter, then the view; [`records`], what such a read holds.

mod read;
mod snapshot;

use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use lockshift_decide::home::{Homes, Refusal, RuleState, Subject, subject};

use crate::request::{Request, Response};
use crate::{
    Datacenter, OpKind, Route, SharedClock, SharedStore, Store, StoreError, StoreErrorKind, Table,
    schema,
};

pub use read::{Configured, RefreshReport, read_row_at, records, refresh};
pub use snapshot::HomesSnapshot;

/// A process's view of the homes, shared by its router and the task that
/// refreshes it.
#[derive(Debug)]
pub struct HomesView {
    homes: Mutex<Homes>,
    clock: SharedClock,
    /// The process's own datacenter, when named.
    local: Option<Datacenter>,
    /// The rules the settings name (seeded when no record holds them; a
    /// process that names homes refuses every lock until it knows them).
    configured: Configured,
    /// When a request last tried to confirm each datacenter's homes on
    /// the spot (at most once a second each: [`HomesRouter`]).
    attempts: Mutex<std::collections::BTreeMap<Datacenter, std::time::Instant>>,
}

impl HomesView {
    /// A view that knows no home yet, for a process in `local` whose
    /// settings name `configured`, confirmed for `valid_for` after each
    /// read from a home.
    pub fn new(
        clock: SharedClock,
        local: Option<Datacenter>,
        configured: Configured,
        valid_for: std::time::Duration,
    ) -> Self {
        HomesView {
            homes: Mutex::new(Homes::new(valid_for, read::now())),
            clock,
            local,
            configured,
            attempts: Mutex::new(std::collections::BTreeMap::new()),
        }
    }

    /// The view itself, to observe reads into or to decide with.
    pub fn homes(&self) -> MutexGuard<'_, Homes> {
        self.homes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The process's own datacenter, when named.
    pub fn local(&self) -> Option<&Datacenter> {
        self.local.as_ref()
    }

    /// The clock records are stamped by.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// The rules the settings name.
    pub fn configured(&self) -> &Configured {
        &self.configured
    }

    /// Every rule's state now, for the heartbeat and reports.
    pub fn states(&self) -> Vec<RuleState> {
        self.homes().states(read::now())
    }

    /// The datacenters to read again on the spot for a request of
    /// `table`/`row` refused as out of reach: its rule's home (recorded,
    /// or as the settings name it), or — no rule covering it — the
    /// datacenters not read lately (H5); each unless a request tried it
    /// less than a second ago. So a transient failure of the background
    /// re-read does not refuse the home side's locks, while the far side
    /// of a split, which cannot reach the home anyway, is still refused
    /// within one attempt.
    pub fn to_confirm(&self, table: Table, row: &str) -> Vec<Datacenter> {
        self.to_confirm_for(subject(table, row))
    }

    /// [`to_confirm`](Self::to_confirm) for the rows of `subject`.
    pub fn to_confirm_for(&self, subject: Subject<'_>) -> Vec<Datacenter> {
        let wanted: Vec<Datacenter> = {
            let homes = self.homes();
            match homes.rule_of(subject) {
                Some(rule) => homes
                    .record(&rule)
                    .map(|r| r.datacenter.clone())
                    .into_iter()
                    .collect(),
                None => match self.configured.rule_of(subject) {
                    Some((_, dc)) => vec![dc],
                    None => homes
                        .unsurveyed(read::now())
                        .into_iter()
                        .map(|(dc, _)| dc)
                        .collect(),
                },
            }
        };
        let now = read::now();
        let mut attempts = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
        wanted
            .into_iter()
            .filter(|dc| {
                let recent = attempts.get(dc).is_some_and(|t| {
                    now.saturating_duration_since(*t) < std::time::Duration::from_secs(1)
                });
                if !recent {
                    attempts.insert(dc.clone(), now);
                }
                !recent
            })
            .collect()
    }

    /// Where the requests of `table`/`row` on the default route go now.
    ///
    /// # Errors
    /// The refusal, as the store error the request fails with.
    pub fn route(&self, op: OpKind, table: Table, row: &str) -> Result<Route, StoreError> {
        self.route_for(op, table, subject(table, row))
    }

    /// Where the requests of `subject`'s rows go now; `op` and `table`
    /// name the request in a refusal.
    ///
    /// # Errors
    /// The refusal, as the store error the request fails with.
    pub fn route_for(
        &self,
        op: OpKind,
        table: Table,
        subject: Subject<'_>,
    ) -> Result<Route, StoreError> {
        let homes = self.homes();
        snapshot::route_for(
            &homes,
            &self.configured,
            self.local.as_ref(),
            (read::now(), self.clock.now()),
            (op, table, subject),
        )
    }
}

/// The store error a refused request fails with — nothing was sent
/// either way ([`StoreError::was_sent`]): a moving home's, retryable when
/// the new home serves ([`StoreError::retry_after`]); any other, not
/// retryable from here.
fn refused(
    op: OpKind,
    table: Table,
    subject: Subject<'_>,
    refusal: &Refusal,
    local: Option<&Datacenter>,
) -> StoreError {
    let error = |kind| StoreError::new(kind, op, Some(table), refusal.describe(subject, local));
    match refusal.serves_in() {
        Some(after) => error(StoreErrorKind::HomeMoving).with_retry_after(after),
        None => error(StoreErrorKind::HomeUnreachable),
    }
}

/// What a fenced write pinned to a datacenter gets from a homes router: a
/// datacenter named by the caller may have stopped being the lock's home
/// while the write waited, and a compare-and-set there would not meet the
/// successor's writes at the new home (docs/design.md §5, F1).
fn pinned_fenced_write(table: Table, row: &str, dc: &Datacenter) -> StoreError {
    StoreError::new(
        StoreErrorKind::Invalid,
        OpKind::FencedWrite,
        Some(table),
        format!(
            "fenced write to {table}/{:?} pinned to datacenter {dc}: on a fleet with homes a \
             fenced write names its lock (Route::HomeOf; FencedWriter::for_lock, \
             Node::fenced_writer), so that it is sent only to where the lock's home is when \
             it is sent (docs/design.md §5, F1)",
            lockshift_decide::id::cut_short(row)
        ),
    )
}

/// A [`Store`] sending each request on the default route to its row's home
/// (H1), each named by a lock ([`Route::HomeOf`]) to that lock's home (F1)
/// — or refusing it (H2, H3) — and every other pinned request as pinned.
pub struct HomesRouter {
    inner: SharedStore,
    view: std::sync::Arc<HomesView>,
}

impl fmt::Debug for HomesRouter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HomesRouter")
            .field("inner", &self.inner.describe())
            .field("local", &self.view.local)
            .finish_non_exhaustive()
    }
}

impl HomesRouter {
    /// Routes `inner`'s requests by `view`.
    pub fn new(inner: SharedStore, view: std::sync::Arc<HomesView>) -> Self {
        view.homes().set_datacenters(inner.topology().datacenters);
        HomesRouter { inner, view }
    }

    /// The store underneath, for requests that name their own route.
    pub fn inner(&self) -> &SharedStore {
        &self.inner
    }

    /// The view it routes by.
    pub fn view(&self) -> &std::sync::Arc<HomesView> {
        &self.view
    }

    /// Where a request on `route` goes (H1–H3): a request on the default
    /// route by its row's home, one named by a lock ([`Route::HomeOf`]) by
    /// that lock's home, decided now, as it is sent (F1). A request
    /// refused because its home is unconfirmed reads that home's record
    /// first, once a second at most per home
    /// ([`HomesView::to_confirm_for`]), and is routed by what that shows.
    /// A pinned request goes as pinned — except a fenced write, which is
    /// refused: its compare-and-set must run where its lock's home is now.
    async fn route(
        &self,
        route: &Route,
        op: OpKind,
        table: Table,
        row: &str,
    ) -> Result<Route, StoreError> {
        let subject = match route {
            Route::Datacenter(dc) if op == OpKind::FencedWrite => {
                return Err(pinned_fenced_write(table, row, dc));
            }
            // A node alone is asked its clock and nothing else
            // (`Request::check`): no home decides it.
            Route::Datacenter(_) | Route::Host(_) => return Ok(route.clone()),
            // Routed as the lock's own rows are (a lock named like a fleet
            // row is the fleet's, `subject`).
            Route::HomeOf(lock) => subject(schema::MAIN, lock.as_str()),
            Route::Default => subject(table, row),
        };
        match self.view.route_for(op, table, subject) {
            Err(e) if e.kind() == StoreErrorKind::HomeUnreachable => {
                let datacenters = self.view.to_confirm_for(subject);
                if datacenters.is_empty() {
                    return Err(e);
                }
                read::confirm(&self.inner, &self.view, datacenters).await;
                self.view.route_for(op, table, subject)
            }
            routed => routed,
        }
    }

    /// Scans span every lock: with homes, they read the process's own
    /// datacenter (which every home replicates to), else the default route.
    fn scan_route(&self, route: &Route) -> Route {
        match (route, self.view.homes().any(), &self.view.local) {
            (Route::Default, true, Some(local)) => Route::Datacenter(local.clone()),
            _ => route.clone(),
        }
    }
}

#[async_trait]
impl Store for HomesRouter {
    async fn call(&self, request: Request<'_>) -> Result<Response, StoreError> {
        let route = match (request.row(), &request.route) {
            (Some(row), route) => {
                self.route(route, request.kind(), request.table, row)
                    .await?
            }
            (None, Route::HomeOf(_)) => {
                self.route(&request.route, request.kind(), request.table, "")
                    .await?
            }
            (None, route) => self.scan_route(route),
        };
        self.inner.call(request.via(route)).await
    }

    fn wraps(&self) -> Option<&dyn Store> {
        Some(self.inner.as_ref())
    }

    fn homes(&self) -> Option<std::sync::Arc<HomesView>> {
        Some(self.view.clone())
    }
}

#[cfg(test)]
mod tests;
