//! Reading the homes row from every datacenter into a [`HomesView`], and
//! the homes a process's settings name.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lockshift_decide::home::{HOMES_ROW, HomeRecord, Rule, Subject, Unreadable, rule_for};
use tokio::task::JoinSet;
use tracing::warn;

use super::HomesView;
use crate::{Cell, Datacenter, Route, RowQuery, SharedStore, Store, StoreError, schema};

/// Now, on tokio's clock (paused in simulations), as the home decisions
/// take it.
pub(super) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// The homes a process's settings name: `lock.home_datacenter` (the
/// default rule) and `lock.homes` (prefix rules). Records in the store win
/// over them; they only seed a rule no record holds (docs/design.md §4a).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Configured(Vec<(Rule, Datacenter)>);

impl Configured {
    /// The default rule's home (if any) and the prefix rules.
    pub fn new(
        default: Option<Datacenter>,
        prefixes: impl IntoIterator<Item = (String, Datacenter)>,
    ) -> Self {
        Configured(
            default
                .map(|dc| (Rule::Default, dc))
                .into_iter()
                .chain(prefixes.into_iter().map(|(p, dc)| (Rule::Prefix(p), dc)))
                .collect(),
        )
    }

    /// Whether the settings name no home.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each rule with its configured home.
    pub fn rules(&self) -> &[(Rule, Datacenter)] {
        &self.0
    }

    /// The configured rule deciding `subject`, with its home; `None` when
    /// no configured rule covers it.
    pub fn rule_of(&self, subject: Subject<'_>) -> Option<(Rule, Datacenter)> {
        let rule = match subject {
            Subject::Unhomed => return None,
            Subject::Fleet => Rule::Default,
            Subject::Lock(name) => rule_for(self.0.iter().map(|(r, _)| r), name),
        };
        self.0.iter().find(|(r, _)| *r == rule).cloned()
    }
}

/// What one [`refresh`] found.
#[derive(Clone, Debug, Default)]
pub struct RefreshReport {
    /// The datacenters whose homes row was read.
    pub read: Vec<Datacenter>,
    /// Those whose read failed, with the error.
    pub failed: Vec<(Datacenter, StoreError)>,
}

/// The records of a read of the homes row from `from`, and the cells
/// that do not decode (written by a newer build, or by hand): those refuse
/// the rows they could decide (`Homes::route`), never skipped.
pub fn records(from: &Datacenter, cells: Vec<Cell>) -> (Vec<(Rule, HomeRecord)>, Vec<Unreadable>) {
    let mut records = Vec::new();
    let mut unreadable = Vec::new();
    for cell in cells {
        let rule = Rule::from_key(&cell.column);
        match (rule, serde_json::from_slice::<HomeRecord>(&cell.value)) {
            (Some(rule), Ok(record)) => records.push((rule, record)),
            (rule, decoded) => {
                let error = match decoded {
                    Err(e) => e.to_string(),
                    Ok(_) => "its column names no rule this build knows".to_string(),
                };
                let cell = Unreadable {
                    rule,
                    column: lockshift_decide::id::cut_short(&cell.column).into_owned(),
                    datacenter: from.clone(),
                    error: lockshift_decide::id::cut_short(&error).into_owned(),
                };
                warn!(column = %cell.column, datacenter = %from, error = %cell.error,
                    "a cell of the homes row does not decode; the locks it could home are refused");
                unreadable.push(cell);
            }
        }
    }
    (records, unreadable)
}

/// Reads the homes row from every datacenter the store knows — each at
/// `LOCAL_QUORUM` there, all at once — and observes each answer into
/// `view` (H2: a rule is confirmed by a read from its own home; reading
/// the others too is how a process learns of a forced move, H4). Store
/// errors are kept in the view and the report, not returned.
pub async fn refresh(store: &SharedStore, view: &Arc<HomesView>) -> RefreshReport {
    let datacenters = store.topology().datacenters;
    view.homes().set_datacenters(datacenters.clone());
    let mut report = RefreshReport::default();
    if let [dc] = datacenters.as_slice() {
        // One datacenter: read it in place (no task to schedule, so a
        // single-datacenter node refreshes exactly as it always did).
        let answer = read_from(store.clone(), dc.clone()).await;
        note(view, answer, &mut report);
        return report;
    }
    let mut reads = JoinSet::new();
    for dc in datacenters {
        reads.spawn(read_from(store.clone(), dc));
    }
    while let Some(joined) = reads.join_next().await {
        if let Ok(answer) = joined {
            note(view, answer, &mut report);
        }
    }
    report.read.sort();
    report.failed.sort_by(|a, b| a.0.cmp(&b.0));
    report
}

type Answer = (Datacenter, Instant, Result<Vec<Cell>, StoreError>);

/// How many times a refresh reads a datacenter's homes row before it
/// keeps the failure: one transient failure (a timeout, a node
/// restarting) must not let a home view lapse.
const READ_ATTEMPTS: u32 = 2;

/// The homes row as `dc` holds it: its cells, read once, coordinated in
/// `dc` at `LOCAL_QUORUM` (each datacenter holds its own copy, H1). What
/// every reader of the row sends; [`records`] decodes the cells.
///
/// # Errors
/// The store error.
pub async fn read_row_at(store: &dyn Store, dc: &Datacenter) -> Result<Vec<Cell>, StoreError> {
    let route = Route::Datacenter(dc.clone());
    store
        .read_via(&route, schema::ROLLOUT, HOMES_ROW, &RowQuery::all())
        .await
}

/// A read of the homes row from `dc` (again after a transient failure),
/// with when the read that answered was sent.
async fn read_from(store: SharedStore, dc: Datacenter) -> Answer {
    let mut attempt = 1;
    loop {
        let sent = now();
        let result = read_row_at(store.as_ref(), &dc).await;
        match result {
            Err(e) if e.is_retryable() && attempt < READ_ATTEMPTS => {
                tracing::debug!(%dc, error = %e, "homes read failed; once more");
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            result => return (dc, sent, result),
        }
    }
}

/// Reads the homes row from each of `datacenters` now, all at once, and
/// observes the answers into `view`: a request confirming its home — or
/// that no home covers it — on the spot.
pub(super) async fn confirm(store: &SharedStore, view: &HomesView, datacenters: Vec<Datacenter>) {
    if let [dc] = datacenters.as_slice() {
        let answer = read_from(store.clone(), dc.clone()).await;
        note(view, answer, &mut RefreshReport::default());
        return;
    }
    let mut reads = JoinSet::new();
    for dc in datacenters {
        reads.spawn(read_from(store.clone(), dc));
    }
    while let Some(joined) = reads.join_next().await {
        if let Ok(answer) = joined {
            note(view, answer, &mut RefreshReport::default());
        }
    }
}

fn note(view: &HomesView, (dc, sent, result): Answer, report: &mut RefreshReport) {
    match result {
        Ok(cells) => {
            let (records, unreadable) = records(&dc, cells);
            let mut homes = view.homes();
            homes.observe(&dc, sent, records);
            homes.observe_unreadable(&dc, unreadable);
            drop(homes);
            report.read.push(dc);
        }
        Err(e) => {
            view.homes().failed(&dc, e.to_string());
            report.failed.push((dc, e));
        }
    }
}
