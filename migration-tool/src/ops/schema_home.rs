//! `migrate schema --home DC --apply`: the fleet's first home, recorded
//! before any process of the fleet starts (docs/design.md §4a, "Turning
//! homes on"; docs/operating.md §13, set-up).
//!
//! A home the fleet's first start records from its settings (a seed)
//! serves only after the move wait — about two minutes — because a process
//! may have routed the locks the store's default way on reads that did
//! not show it (H5), and its views and leases must run out first. Where no
//! process has run, none can have: a home recorded in every datacenter
//! before the first process starts is read by that process, from every
//! datacenter, before its first lock, and serves at once. What the tool
//! checks of that — nothing registered in any datacenter's registry, no
//! homes record anywhere — is what a process that ran would have left; a
//! process started while this runs is the one case it cannot see, so it
//! is run before any is started.
//!
//! The record is version 1 of the default rule, stamped as a seed (below
//! every move, `seed_stamp`), and written to every datacenter — the home
//! last — each at `LOCAL_QUORUM` there. Run again after a write failed, it
//! copies the cell an earlier run wrote, as it is, where it lacks: two
//! records of one version that differ would be refused as two moves that
//! raced.

use lockshift_decide::home::{HOMES_ROW, HomeRecord, Rule, seed_stamp};
use lockshift_store::homes::records;
use lockshift_store::{
    Cell, CellWrite, Clock, Datacenter, Route, RowQuery, SharedStore, WriteOptions, schema,
};
use serde::Serialize;

/// What `migrate schema --home` did (the `home` key of its report).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct HomeRecorded {
    /// The home asked for.
    pub home: String,
    /// `recorded`, `recorded already`, `refused` (exit 3) or `incomplete`
    /// (exit 1: run the same command again).
    pub outcome: &'static str,
    /// Why it was refused, or what is incomplete.
    pub why: Option<String>,
    /// Each datacenter, with the error of its write (`null`: it holds the
    /// record).
    pub datacenters: Vec<(String, Option<String>)>,
}

impl HomeRecorded {
    fn refused(home: &Datacenter, why: String) -> HomeRecorded {
        HomeRecorded {
            home: home.to_string(),
            outcome: "refused",
            why: Some(why),
            datacenters: Vec::new(),
        }
    }
}

/// Whether `record` is a first home of `home` as this command writes it:
/// version 1, serving from the start, no move behind it.
fn first_home(record: &HomeRecord, home: &Datacenter) -> bool {
    record.version == 1
        && record.datacenter == *home
        && record.serves_from == 0
        && !record.pending
        && record.moved_from.is_none()
}

/// Records `home` as the home of the default rule in every datacenter of
/// `store`'s cluster, serving at once — unless some datacenter does not
/// answer, shows a homes record (another than this one), or shows a
/// registered process (read by a clock that may be `margin` ahead of a
/// writer's).
pub async fn record_home(
    store: &SharedStore,
    clock: &dyn Clock,
    home: &Datacenter,
    by: &str,
    margin: std::time::Duration,
) -> HomeRecorded {
    let datacenters = store.topology().datacenters;
    if !datacenters.contains(home) {
        return HomeRecorded::refused(
            home,
            format!(
                "{home} is not a datacenter of this cluster (it has {})",
                datacenters
                    .iter()
                    .map(Datacenter::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    // The home last: every other datacenter holds the record before the
    // home does (as a seed is written, H5).
    let mut order: Vec<Datacenter> = datacenters.iter().filter(|d| *d != home).cloned().collect();
    order.push(home.clone());
    let mut ours: Option<Cell> = None;
    let mut lacking = Vec::new();
    for dc in &order {
        match survey(store, clock, home, dc, margin).await {
            Ok(Shows::Nothing) => lacking.push(dc.clone()),
            Ok(Shows::Ours(cell)) => ours = cell,
            Err(why) => return HomeRecorded::refused(home, why),
        }
    }
    // A cell an earlier run wrote is copied as it is; else a new one.
    let (value, stamp) = match ours {
        Some(cell) => (cell.value, cell.writetime),
        None => {
            let now = clock.now();
            let record = HomeRecord::seed(home.clone(), by, now);
            match serde_json::to_vec(&record) {
                Ok(value) => (value, seed_stamp(now, 0)),
                Err(e) => return HomeRecorded::refused(home, e.to_string()),
            }
        }
    };
    write_where_lacking(store, home, &order, lacking, &value, stamp).await
}

/// What one datacenter shows of the first home.
enum Shows {
    /// No homes record.
    Nothing,
    /// This very record, written by an earlier run (its cell).
    Ours(Option<Cell>),
}

/// Reads `dc`'s homes row and registry: what it shows, or why the first
/// home must not be recorded (it does not answer, a process registered,
/// a cell that does not decode, another home recorded).
async fn survey(
    store: &SharedStore,
    clock: &dyn Clock,
    home: &Datacenter,
    dc: &Datacenter,
    margin: std::time::Duration,
) -> Result<Shows, String> {
    let route = Route::Datacenter(dc.clone());
    let read = async |table, row| store.read_via(&route, table, row, &RowQuery::all()).await;
    let (cells, registered) = match (
        read(schema::ROLLOUT, HOMES_ROW).await,
        lockshift_rollout::registry::live_nodes_via(store.as_ref(), &route, clock.now(), margin)
            .await,
    ) {
        (Ok(cells), Ok((nodes, undecoded))) => (
            cells,
            nodes
                .into_iter()
                .map(|n| n.column)
                .chain(undecoded)
                .collect::<Vec<_>>(),
        ),
        (Err(e), _) | (_, Err(e)) => {
            return Err(format!(
                "datacenter {dc} does not answer ({e}): the first home is recorded in \
                         every datacenter before any process starts, or not at all"
            ));
        }
    };
    if let Some(process) = registered.first() {
        return Err(format!(
            "process {} is registered in {dc}: the fleet has started, and a home \
                     recorded now could serve while views and leases taken without it last. \
                     Start the processes with lock.home_datacenter = {home:?}: they record \
                     it, serving after the move wait (docs/operating.md, \"Several \
                     datacenters\")",
            lockshift_decide::id::cut_short(process)
        ));
    }
    let (found, undecoded) = records(dc, cells.clone());
    if let Some(cell) = undecoded.first() {
        return Err(format!(
            "{dc} shows a homes cell that does not decode ({:?}: {}): remove it first \
                     (`migrate home forget`)",
            cell.column, cell.error
        ));
    }
    match found.as_slice() {
        [] => Ok(Shows::Nothing),
        [(Rule::Default, record)] if first_home(record, home) => Ok(Shows::Ours(
            cells.into_iter().find(|c| c.column == Rule::Default.key()),
        )),
        [(rule, record), ..] => Err(format!(
            "{dc} shows a home recorded already ({rule} in {}, version {}): \
                 change it with `migrate home move`",
            record.datacenter, record.version
        )),
    }
}

/// Writes the record (`value` at `stamp`) where it lacks, the home last;
/// after a failure nothing more is written.
async fn write_where_lacking(
    store: &SharedStore,
    home: &Datacenter,
    order: &[Datacenter],
    lacking: Vec<Datacenter>,
    value: &[u8],
    stamp: lockshift_store::Timestamp,
) -> HomeRecorded {
    let mut report = HomeRecorded {
        home: home.to_string(),
        outcome: if lacking.is_empty() {
            "recorded already"
        } else {
            "recorded"
        },
        why: None,
        datacenters: order.iter().map(|dc| (dc.to_string(), None)).collect(),
    };
    let mut failed = false;
    for dc in lacking {
        // The home last: after a failure nothing more is written, so no
        // datacenter is the home while another does not know it.
        let written = if failed {
            Err("not written: an earlier write failed".to_string())
        } else {
            store
                .write_via(
                    &Route::Datacenter(dc.clone()),
                    schema::ROLLOUT,
                    HOMES_ROW,
                    &[CellWrite::new(Rule::Default.key(), value.to_vec())],
                    WriteOptions::at(stamp),
                )
                .await
                .map_err(|e| e.to_string())
        };
        if let Err(e) = written {
            failed = true;
            if let Some(entry) = report
                .datacenters
                .iter_mut()
                .find(|(d, _)| d == dc.as_str())
            {
                entry.1 = Some(e);
            }
        }
    }
    if failed {
        report.outcome = "incomplete";
        report.why = Some(
            "the record could not be written in every datacenter: run the same command again \
             before any process starts (it copies the record where it lacks)"
                .to_string(),
        );
    }
    report
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::time::Duration;

    use lockshift::{Node, Settings};
    use lockshift_lock::{AcquireOptions, LockId};
    use lockshift_store::{MemoryStore, SharedClock, TokioClock};

    use super::*;

    const MARGIN: Duration = Duration::from_secs(5);

    fn dc(name: &str) -> Datacenter {
        Datacenter::new(name).unwrap()
    }

    /// A fresh two-datacenter cluster (RF 3 each), on the paused clock.
    fn cluster() -> (MemoryStore, SharedClock) {
        let clock: SharedClock = Arc::new(TokioClock::new());
        let cluster = MemoryStore::with_clock(clock.clone())
            .with_datacenters(vec![(dc("dc1"), 3), (dc("dc2"), 3)], 7);
        (cluster, clock)
    }

    /// The first process of the fleet, in `place`, its settings naming
    /// dc1 the home: started, then timed taking a free lock.
    async fn first_lock(cluster: &MemoryStore, clock: &SharedClock, place: &str) -> Duration {
        let mut settings = Settings::default();
        settings.node.id = Some(format!("first-{place}"));
        settings.lock.home_datacenter = Some(dc("dc1"));
        let store: SharedStore = Arc::new(cluster.client_in(&dc(place)).unwrap());
        let started = tokio::time::Instant::now();
        let node = Node::builder()
            .settings(settings)
            .seed(1)
            .env(HashMap::new())
            .store(store)
            .clock(clock.clone())
            .start()
            .await
            .unwrap();
        let guard = node
            .acquire_with(
                &LockId::new("nightly").unwrap(),
                AcquireOptions::with_timeout(Duration::from_secs(300)),
            )
            .await
            .unwrap();
        let took = started.elapsed();
        guard.release().await.unwrap();
        node.shutdown().await;
        took
    }

    /// Issue 42 item 4: the home recorded before any process starts
    /// (`migrate schema --home dc1 --apply`) serves at once, so the first
    /// lock of a fresh two-datacenter fleet is taken in well under 5 s —
    /// from either side — where a fleet that records it from its settings
    /// waits the move wait (the control, over a minute). Once a process
    /// has registered, or a home is recorded, it is refused; run again it
    /// changes nothing.
    #[tokio::test(start_paused = true)]
    async fn a_home_recorded_before_the_first_start_serves_at_once() {
        // The control: the first start seeds the home, which waits.
        let (fresh, clock) = cluster();
        let seeded = first_lock(&fresh, &clock, "dc1").await;
        assert!(seeded > Duration::from_secs(60), "{seeded:?}");

        let (fresh, clock) = cluster();
        let tool: SharedStore = Arc::new(fresh.client_in(&dc("dc2")).unwrap());
        let recorded = record_home(&tool, clock.as_ref(), &dc("dc1"), "op", MARGIN).await;
        assert_eq!(recorded.outcome, "recorded", "{recorded:?}");
        assert!(recorded.datacenters.iter().all(|(_, e)| e.is_none()));
        let again = record_home(&tool, clock.as_ref(), &dc("dc1"), "op", MARGIN).await;
        assert_eq!(again.outcome, "recorded already", "{again:?}");
        let other = record_home(&tool, clock.as_ref(), &dc("dc2"), "op", MARGIN).await;
        assert_eq!(other.outcome, "refused", "{other:?}");
        for place in ["dc1", "dc2"] {
            let took = first_lock(&fresh, &clock, place).await;
            assert!(took < Duration::from_secs(5), "{place}: {took:?}");
        }
        // A process ran: its registry row is there until it expires.
        let (fresh, clock) = cluster();
        let tool: SharedStore = Arc::new(fresh.client_in(&dc("dc1")).unwrap());
        let mut settings = Settings::default();
        settings.node.id = Some("early".into());
        let early = Node::builder()
            .settings(settings)
            .env(HashMap::new())
            .store(tool.clone())
            .clock(clock.clone())
            .start()
            .await
            .unwrap();
        let refused = record_home(&tool, clock.as_ref(), &dc("dc1"), "op", MARGIN).await;
        assert_eq!(refused.outcome, "refused", "{refused:?}");
        assert!(
            refused
                .why
                .as_deref()
                .is_some_and(|w| w.contains("process early") && w.contains("is registered")),
            "{refused:?}"
        );
        early.shutdown().await;
    }
}
