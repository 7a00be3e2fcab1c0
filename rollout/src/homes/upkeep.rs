//! Seeding the rules a process's settings name, and keeping a process's
//! view of the homes fresh.

use std::sync::Arc;
use std::time::Duration;

use lockshift_decide::home::{HOMES_ROW, HomeRecord, Rule, seed_stamp};
use lockshift_store::homes::{HomesView, RefreshReport, refresh};
use lockshift_store::{
    CellWrite, Datacenter, Route, SharedStore, StoreError, Timestamp, WriteOptions, schema,
};
use tracing::{info, warn};

use super::patient::record_value;

/// How far a registered process's clock may be behind this one's when
/// the seed counts the processes that may be running (the default
/// `rollout.clock_skew_margin`): a process counted one margin longer only
/// makes the seed wait the move wait.
const SEED_REGISTRY_MARGIN: Duration = Duration::from_secs(5);

/// A rule [`seed`] recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seeded {
    /// The rule.
    pub rule: Rule,
    /// The record written.
    pub record: HomeRecord,
}

/// Records each rule `view`'s settings name that no read of `report`
/// found a record of — only where `report` read that home (so the home is
/// known to hold none) — or only a seed of that home the home does not
/// show, or one still pending (one cut short before its last write, which
/// would otherwise leave the rule unconfirmed for good, H6). A seed is version 1, stamped
/// below every move ([`seed_stamp`]: a move wins over it, a later seed
/// over an earlier one).
///
/// In a cluster of one datacenter it is written to the home, and serves at
/// once when the home's registry shows no live process but `me` (a fleet's
/// first start); otherwise processes may be routing the rule's locks the
/// store's default way, and it serves after `wait` (H3: their views and
/// leases run out first; [`super::move_wait`]).
///
/// In a cluster of several datacenters (H5) it is written to every other
/// datacenter first and to the home last, and always serves after `wait`:
/// a process routes a row no rule covers only on reads of *every*
/// datacenter that did not show one, so its route ends within
/// `stage_valid_for` of those writes' acknowledgements — which is why the
/// record is first written pending there and serves only `wait` after the
/// last acknowledgement (H6). A registry read cannot stand in for the
/// wait there: a process may register in a datacenter the home has not
/// heard from.
///
/// # Errors
/// A failed registry read or write; rules seeded before it stay seeded.
pub async fn seed(
    store: &SharedStore,
    view: &HomesView,
    report: &RefreshReport,
    me: &str,
    wait: Duration,
) -> Result<Vec<Seeded>, StoreError> {
    // Each rule to record, with the serving seed to complete when one was
    // cut short before its last write.
    let missing: Vec<(Rule, Datacenter, Option<HomeRecord>)> = {
        let homes = view.homes();
        view.configured()
            .rules()
            .iter()
            .filter_map(|(rule, dc)| {
                // No record, or only a seed of this home that has not
                // reached it (a seed cut short before its last write), or
                // one still pending (H6).
                let complete = match homes.record(rule) {
                    None => None,
                    Some(r) if r.version == 1 && r.datacenter == *dc && r.pending => None,
                    Some(r)
                        if r.version == 1
                            && r.datacenter == *dc
                            && homes.shown_by(rule, dc).is_none() =>
                    {
                        Some(r.clone())
                    }
                    Some(_) => return None,
                };
                report
                    .read
                    .contains(dc)
                    .then(|| (rule.clone(), dc.clone(), complete))
            })
            .collect()
    };
    let datacenters = store.topology().datacenters;
    let several = datacenters.len() > 1;
    let mut seeded = Vec::new();
    for (rule, home, complete) in missing {
        // The one check of a prefix (settings validation makes it too): a
        // record no build decodes would refuse every lock of the fleet.
        if let Rule::Prefix(p) = &rule
            && let Err(e) = Rule::prefix(p.as_str())
        {
            warn!(error = %e, %home, "not recording the home the settings name for this prefix");
            continue;
        }
        let route = Route::Datacenter(home.clone());
        let now = view.clock().now();
        let (nodes, undecoded) =
            crate::registry::live_nodes_via(store.as_ref(), &route, now, SEED_REGISTRY_MARGIN)
                .await?;
        let rows: Vec<_> = nodes.into_iter().filter(|n| n.column != me).collect();
        // A process of a build that predates homes never reads the record:
        // it would go on reaching these locks the store's default way (an
        // entry that does not decode may be one).
        let unaware: Vec<String> = rows
            .iter()
            .filter(|n| n.info.homes.is_none())
            .map(|n| n.column.clone())
            .chain(undecoded)
            .map(|c| lockshift_decide::id::cut_short(&c).into_owned())
            .collect();
        if !unaware.is_empty() {
            warn!(%rule, %home, processes = %unaware.join(", "),
                "not recording the home the settings name: these registered processes run a build that does not know homes; upgrade them first");
            continue;
        }
        let others = rows.len();
        // The home last: the others' acknowledgements bound every route
        // that did not see the rule (H5).
        let mut order: Vec<Datacenter> = if several {
            datacenters
                .iter()
                .filter(|dc| **dc != home)
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        order.push(home.clone());
        let wait_for = if several || others > 0 {
            Some(wait)
        } else {
            None
        };
        let record = match complete {
            // A serving seed that has not reached every datacenter: the
            // same record again, at a stamp of its own time — never a
            // pending one, which could bury it (H6).
            Some(record) => {
                let stamp = seed_stamp(Timestamp::from_micros(record.at), 1);
                for dc in &order {
                    write_record(store, &rule, dc, &record, stamp).await?;
                }
                record
            }
            None => write_seed(store, view, &rule, &home, &order, wait_for, me).await?,
        };
        info!(%rule, %home, others, serves_from = %lockshift_decide::home::fmt_micros(record.serves_from),
            "recorded the home the settings name");
        seeded.push(Seeded { rule, record });
    }
    Ok(seeded)
}

/// Writes `rule`'s seed to each datacenter of `order` in turn (the home
/// last), serving at once for `wait_for = None`. Otherwise (H6) it is
/// first written *pending* — serving nowhere — to every datacenter of
/// `order` but the home (to the home alone when it is the only one), and
/// once each of those writes is acknowledged it is written serving,
/// `wait_for` after the last acknowledgement, to each datacenter of
/// `order`: a write that was not acknowledged may land at any later time,
/// so the wait counts only from writes known to have landed.
async fn write_seed(
    store: &SharedStore,
    view: &HomesView,
    rule: &Rule,
    home: &Datacenter,
    order: &[Datacenter],
    wait_for: Option<Duration>,
    me: &str,
) -> Result<HomeRecord, StoreError> {
    let now = view.clock().now();
    let mut record = HomeRecord::seed(home.clone(), me, now);
    let mut stamp = seed_stamp(now, 0);
    if let Some(wait) = wait_for {
        let bound = if order.len() > 1 {
            &order[..order.len() - 1]
        } else {
            order
        };
        let pending = record.as_pending();
        for dc in bound {
            write_record(store, rule, dc, &pending, stamp).await?;
        }
        // H6: every route that did not see the rule ends within
        // `stage_valid_for` of these acknowledgements (H5).
        let acked = view.clock().now();
        record.serves_from = acked.saturating_add(wait).as_micros();
        record.at = acked.as_micros();
        stamp = seed_stamp(acked, 1);
    }
    for dc in order {
        write_record(store, rule, dc, &record, stamp).await?;
    }
    Ok(record)
}

/// Writes `record` as `rule`'s cell of the homes row in `dc` at `stamp`.
async fn write_record(
    store: &SharedStore,
    rule: &Rule,
    dc: &Datacenter,
    record: &HomeRecord,
    stamp: Timestamp,
) -> Result<(), StoreError> {
    let value = record_value(record)?;
    store
        .write_via(
            &Route::Datacenter(dc.clone()),
            schema::ROLLOUT,
            HOMES_ROW,
            &[CellWrite::new(rule.key(), value)],
            WriteOptions::at(stamp),
        )
        .await
}

/// Refreshes `view` from `store` every `every` until the returned handle
/// is dropped: what keeps a long-running tool's view of the homes
/// confirmed (a node refreshes on its own re-read loop).
pub fn keep_fresh(store: SharedStore, view: Arc<HomesView>, every: Duration) -> Refresher {
    Refresher(tokio::spawn(async move {
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            ticker.tick().await;
            refresh(&store, &view).await;
        }
    }))
}

/// The task [`keep_fresh`] started; dropping it stops the task.
#[derive(Debug)]
pub struct Refresher(tokio::task::JoinHandle<()>);

impl Drop for Refresher {
    fn drop(&mut self) {
        self.0.abort();
    }
}
