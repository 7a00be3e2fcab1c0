//! Where a census reads each lock (docs/design.md §6a, "The census across
//! datacenters"): the scans of each table are made once per datacenter
//! that is some rule's home — coordinated there, at `LOCAL_QUORUM` — and
//! each row is classified only from the scan of its own home, by one
//! snapshot of the process's homes view taken when the census starts. The
//! requests a census sends so grow with token ranges, pages and home
//! datacenters, never with locks.
//!
//! The scan of the client's own datacenter (or of the store's default
//! route) is the *keeper*, made last: it also names the rows whose home
//! refuses them (out of reach, moving: [`concerns_only_the_row`]) and the
//! rows of a home whose scan failed over their token range — each once.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use lockshift_decide::census::CensusRequests;
use lockshift_store::homes::HomesSnapshot;
use lockshift_store::{Datacenter, OpKind, Route, Store, StoreError, Table, TokenRange};

use super::short_reason;

#[cfg(doc)]
use super::concerns_only_the_row;

/// The census's passes and the homes snapshot that decides each row's.
#[derive(Debug)]
pub(super) struct Plan {
    /// `None`: a store without homes — one pass on the default route
    /// reads and classifies every row.
    snapshot: Option<HomesSnapshot>,
    /// The routes scanned, the keeper last.
    passes: Vec<Route>,
}

/// What one pass does with a row it scanned.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Own {
    /// The row is homed where this pass reads: classify it.
    Classify,
    /// Another pass reads it.
    Skip,
    /// No pass can read it (its home refuses it, or the home's scan failed
    /// where it lies): the keeper names it unreadable, with why.
    Unreadable(String),
}

impl Plan {
    /// The plan for `store`: with a homes router, one pass per datacenter
    /// serving some rule and one for the client's own (the keeper);
    /// otherwise one pass on the default route.
    pub(super) fn of(store: &dyn Store) -> Plan {
        let Some(snapshot) = store.homes().map(|view| view.snapshot()) else {
            return Plan {
                snapshot: None,
                passes: vec![Route::Default],
            };
        };
        // A router sends a scan on the default route to the client's own
        // datacenter once any home is known: name it, so the requests are
        // counted where they go.
        let keeper = match (snapshot.any(), snapshot.local()) {
            (true, Some(local)) => Route::Datacenter(local.clone()),
            _ => Route::Default,
        };
        let mut passes: Vec<Route> = snapshot
            .homes_serving()
            .into_iter()
            .map(Route::Datacenter)
            .filter(|r| *r != keeper)
            .collect();
        passes.push(keeper);
        Plan {
            snapshot: Some(snapshot),
            passes,
        }
    }

    /// The routes scanned, the keeper last.
    pub(super) fn passes(&self) -> &[Route] {
        &self.passes
    }

    /// The keeper's route: the client's own datacenter, or the default.
    pub(super) fn keeper(&self) -> &Route {
        self.passes.last().unwrap_or(&Route::Default)
    }

    /// The pass that reads `table`/`row`: its home's (a row no home
    /// decides goes with the keeper, which reads the default route's).
    ///
    /// # Errors
    /// The refusal of its home (out of reach, moving), as a request of the
    /// row's would fail with it.
    pub(super) fn home(&self, table: Table, row: &str) -> Result<Route, StoreError> {
        let Some(snapshot) = &self.snapshot else {
            return Ok(Route::Default);
        };
        match snapshot.route(OpKind::Read, table, row)? {
            Route::Default => Ok(self.keeper().clone()),
            home => Ok(home),
        }
    }
}

/// One scan of every range of a table on one route, and what it shares
/// with the census's other passes.
#[derive(Clone, Copy)]
pub(super) struct Pass<'a> {
    /// Where this pass's requests are coordinated.
    pub(super) route: &'a Route,
    pub(super) plan: &'a Plan,
    /// The ranges earlier passes could not read, by route.
    pub(super) failed: &'a Mutex<Vec<FailedRange>>,
    pub(super) meter: &'a Meter,
}

/// A token range a pass could not read (its datacenter did not answer).
#[derive(Clone, Debug)]
pub(super) struct FailedRange {
    pub(super) route: Route,
    pub(super) table: Table,
    pub(super) range: TokenRange,
    pub(super) reason: String,
}

impl Pass<'_> {
    /// Whether this pass is the keeper.
    pub(super) fn is_keeper(&self) -> bool {
        self.route == self.plan.keeper()
    }

    /// Whether a failure to read a range here leaves the census to go on
    /// without it (and the keeper to name its rows): a scan of another
    /// datacenter than the client's own, which may be out of reach while
    /// this side is not. The keeper's own failures fail the census.
    pub(super) fn may_fail(&self) -> bool {
        !self.is_keeper()
    }

    /// What this pass does with `table`/`row` at `token`.
    pub(super) fn own(&self, table: Table, row: &str, token: i64) -> Own {
        let keeper = self.is_keeper();
        match self.plan.home(table, row) {
            Ok(home) if home == *self.route => Own::Classify,
            Ok(_) if !keeper => Own::Skip,
            Ok(home) if !self.plan.passes.contains(&home) => Own::Unreadable(format!(
                "its home {home} was not scanned (its rule's home did not serve when \
                 the census began)"
            )),
            Ok(home) => {
                let failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
                match failed
                    .iter()
                    .find(|f| f.route == home && f.table == table && f.range.contains(token))
                {
                    Some(f) => Own::Unreadable(format!("{home}: {}", f.reason)),
                    None => Own::Skip,
                }
            }
            Err(e) if keeper => Own::Unreadable(short_reason(&e)),
            Err(_) => Own::Skip,
        }
    }

    /// Why this pass's datacenter is out of reach for this census, when
    /// a range of an earlier table went unanswered there.
    pub(super) fn down(&self) -> Option<String> {
        let failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
        failed
            .iter()
            .find(|f| f.route == *self.route)
            .map(|f| f.reason.clone())
    }

    /// Notes the ranges this pass could not read, for the keeper.
    pub(super) fn failed_over(&self, table: Table, ranges: Vec<(TokenRange, String)>) {
        let mut failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
        failed.extend(ranges.into_iter().map(|(range, reason)| FailedRange {
            route: self.route.clone(),
            table,
            range,
            reason,
        }));
    }
}

/// The requests a census sends, by table and route.
#[derive(Debug, Default)]
pub(super) struct Meter(Mutex<BTreeMap<(Table, Option<Datacenter>), u64>>);

impl Meter {
    /// One request of `table` on `route`.
    pub(super) fn count(&self, table: Table, route: &Route) {
        let mut counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *counts
            .entry((table, route.datacenter().cloned()))
            .or_default() += 1;
    }

    /// The counts, sorted by table, then datacenter.
    pub(super) fn requests(&self) -> Vec<CensusRequests> {
        let counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        counts
            .iter()
            .map(|((table, datacenter), requests)| CensusRequests {
                table: *table,
                datacenter: datacenter.clone(),
                requests: *requests,
            })
            .collect()
    }
}
