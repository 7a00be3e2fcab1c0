//! The homes as a process sees them at one moment ([`HomesSnapshot`]):
//! what routes many rows alike, such as a census that reads each lock at
//! its home's datacenter from scans of whole token ranges
//! (docs/design.md §6a) — every row decided by the same view, so that no
//! row is read at two homes, or at none, because the view changed
//! between two scans.

use std::time::Instant;

use lockshift_decide::home::{Homes, Refusal, Rule, Subject, subject};

use super::{Configured, HomesView, read, refused};
use crate::{Datacenter, OpKind, Route, StoreError, Table, Timestamp};

/// A copy of a [`HomesView`] and of the moment it was taken: routes rows
/// as the view routed them then ([`HomesView::route`]).
#[derive(Clone, Debug)]
pub struct HomesSnapshot {
    homes: Homes,
    configured: Configured,
    local: Option<Datacenter>,
    now: Instant,
    wall: Timestamp,
}

impl HomesView {
    /// The view as it is now, to route many rows alike.
    pub fn snapshot(&self) -> HomesSnapshot {
        HomesSnapshot {
            homes: self.homes().clone(),
            configured: self.configured.clone(),
            local: self.local.clone(),
            now: read::now(),
            wall: self.clock.now(),
        }
    }
}

impl HomesSnapshot {
    /// Whether any home is known (without one, every row takes the
    /// store's default route).
    pub fn any(&self) -> bool {
        self.homes.any()
    }

    /// The process's own datacenter, when named.
    pub fn local(&self) -> Option<&Datacenter> {
        self.local.as_ref()
    }

    /// Where the requests of `table`/`row` went when the snapshot was
    /// taken: its home's datacenter, or the store's default route where no
    /// home applies.
    ///
    /// # Errors
    /// The refusal ([`StoreErrorKind::HomeUnreachable`](crate::StoreErrorKind::HomeUnreachable),
    /// [`HomeMoving`](crate::StoreErrorKind::HomeMoving)), as the request
    /// would have failed with it.
    pub fn route(&self, op: OpKind, table: Table, row: &str) -> Result<Route, StoreError> {
        route_for(
            &self.homes,
            &self.configured,
            self.local.as_ref(),
            (self.now, self.wall),
            (op, table, subject(table, row)),
        )
    }

    /// The datacenters some rule's locks are served from: each rule whose
    /// home serves, by its home (sorted, each once).
    pub fn homes_serving(&self) -> Vec<Datacenter> {
        let mut out: Vec<Datacenter> = self
            .homes
            .rules()
            .filter_map(|rule| {
                // A lock named by the rule's own prefix is decided by it,
                // and the fleet's rows by the default rule.
                let subject = match rule {
                    Rule::Default => Subject::Fleet,
                    Rule::Prefix(p) => Subject::Lock(p),
                };
                // A refused rule's locks are named by the caller's own
                // datacenter's scan; an unhomed one's read there too.
                self.homes
                    .route(subject, self.now, self.wall)
                    .unwrap_or_default()
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// Where the requests of `subject`'s rows go at `now` (monotonic, wall):
/// the one decision a router and a snapshot share. A process whose
/// settings name homes never falls back to the store's default route for
/// a lock: until its homes are known it refuses, naming the home its
/// settings expect.
pub(super) fn route_for(
    homes: &Homes,
    configured: &Configured,
    local: Option<&Datacenter>,
    (now, wall): (Instant, Timestamp),
    (op, table, subject): (OpKind, Table, Subject<'_>),
) -> Result<Route, StoreError> {
    if !homes.any()
        && let Some((rule, home)) = configured.rule_of(subject)
    {
        let refusal = Refusal::Unconfirmed {
            rule,
            last_error: homes.failure_of(&home),
            home,
            since: None,
        };
        return Err(refused(op, table, subject, &refusal, local));
    }
    match homes.route(subject, now, wall) {
        Ok(Some(home)) => Ok(Route::Datacenter(home)),
        Ok(None) => Ok(Route::Default),
        Err(refusal) => Err(refused(op, table, subject, &refusal, local)),
    }
}
