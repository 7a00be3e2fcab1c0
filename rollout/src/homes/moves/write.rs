//! The writes of a judged move (H3, H4, H6): the nested rules to the new
//! home, the record pending where the move must land first, then serving
//! there and everywhere else — or, for a move made already, its record
//! copied where it lacks — and what each datacenter holds afterwards.

use std::time::Duration;

use lockshift_decide::algorithm::Algorithm;
use lockshift_decide::home::{HomeRecord, MovePlan, Rule, fmt_micros};
use lockshift_store::{Clock, Datacenter, Route, SharedStore, StoreError, Timestamp, WriteOptions};
use tracing::info;

use super::gather::{Gathered, Judged, moved};
use super::{DatacenterRecord, Holds, MoveReport, MoveRequest};
use crate::homes::patient::{READ_ATTEMPTS, write_patiently, write_record};
use crate::registry::record_activity_via;
use crate::settings::RolloutSettings;

/// Writes a judged move (H6): the nested rules to the new home, the record
/// pending where the move must land first, then — its acknowledgement
/// being the moment the wait counts from — serving, there and everywhere
/// else that answered. A move made already ([`MovePlan::spreads_to`]) is
/// copied instead. Whatever could not be written is said in
/// [`MoveReport::incomplete`], with what each datacenter holds.
pub(super) async fn write(
    store: &SharedStore,
    clock: &dyn Clock,
    settings: &RolloutSettings,
    request: &MoveRequest,
    judged: Judged,
) -> MoveReport {
    let Judged {
        mut report,
        gathered,
    } = judged;
    let (Some(plan), Some(record)) = (report.plan.clone(), report.record.clone()) else {
        return report;
    };
    if !report.refusals.is_empty() {
        return report;
    }
    let key = request.ask.rule.key();
    if !plan.spreads_to.is_empty() {
        // Made already: the newest cell as it is, at its own stamp — what
        // replication would have brought (a copy never overrides a newer
        // record, S2).
        spread(store, &gathered, &plan.spreads_to, &key, &mut report).await;
        finish(store, settings, request, &record, &mut report).await;
        return report;
    }
    // First where the move must land: the current home (planned, H3), or
    // the new one (forced, H4). Then everywhere else that answered.
    let first = if request.ask.force {
        request.ask.to.clone()
    } else {
        plan.old_home().clone()
    };
    let rest: Vec<Datacenter> = gathered
        .scene
        .read
        .keys()
        .filter(|dc| **dc != first)
        .cloned()
        .collect();
    if let Err(why) = copy_nested(store, request, &gathered).await {
        report.incomplete = Some(why);
        return report;
    }
    // Above every stamp the rule's cell had, whatever this clock says.
    let stamp = clock.now().max(gathered.stamp.offset_micros(1));
    let Some(acked) = acknowledged(
        store,
        clock,
        (request, &plan, &record),
        (&gathered, &first, stamp),
        &mut report,
    )
    .await
    else {
        return report;
    };
    set(&mut report, &first, Some(Holds::Pending), None);
    // H6: the wait counts from this acknowledgement, a moment the pending
    // record is known to be in `first` at LOCAL_QUORUM.
    let record = moved(request, &plan, acked, report.wait);
    report.record = Some(record.clone());
    let stamp = acked.max(stamp.offset_micros(1));
    let serving = write_record(store, &first, &key, &record, stamp).await;
    if let Err(e) = &serving {
        set(&mut report, &first, None, Some(e.to_string()));
        report.incomplete = Some(incomplete(request, &report, &[]));
        return report;
    }
    report.applied = true;
    set(&mut report, &first, Some(Holds::Serving), None);
    report.written.push((first.clone(), None));
    for dc in rest {
        let result = write_record(store, &dc, &key, &record, stamp).await;
        note(&mut report, &dc, &result, Holds::Serving);
    }
    info!(rule = %request.ask.rule, from = %plan.old_home(), to = %request.ask.to,
        version = record.version, forced = request.ask.force, "home moved");
    finish(store, settings, request, &record, &mut report).await;
    report
}

/// A move made already: its newest cell copied as it is, at its own stamp,
/// to each datacenter in `to` — what replication would have brought (a
/// copy never overrides a newer record, S2).
async fn spread(
    store: &SharedStore,
    gathered: &Gathered,
    to: &[Datacenter],
    key: &str,
    report: &mut MoveReport,
) {
    let Some(cell) = &gathered.newest else {
        return;
    };
    for dc in to {
        let copied = write_patiently(
            store,
            &Route::Datacenter(dc.clone()),
            key,
            &cell.value,
            WriteOptions::at(cell.writetime),
        )
        .await;
        note(report, dc, &copied, Holds::Serving);
    }
    report.applied = true;
}

/// The rules the moved one covers, copied to the new home before it shows
/// the move: a process that confirms the move there learns of them in the
/// same read (H5). Each cell is copied as it was, at its own stamp, so a
/// copy never overrides a newer record. `Err` says what failed: nothing
/// of the move is written then.
async fn copy_nested(
    store: &SharedStore,
    request: &MoveRequest,
    gathered: &Gathered,
) -> Result<(), String> {
    let to = Route::Datacenter(request.ask.to.clone());
    for (_, cell) in gathered.nested.values() {
        let copied = write_patiently(
            store,
            &to,
            &cell.column,
            &cell.value,
            WriteOptions::at(cell.writetime),
        )
        .await;
        if let Err(e) = copied {
            return Err(format!(
                "nothing of the move was written: copying the record {:?} to {} failed ({e}); \
                 try again once {} answers",
                cell.column, request.ask.to, request.ask.to
            ));
        }
    }
    Ok(())
}

/// The moment the record is known pending in `first` at LOCAL_QUORUM,
/// from which the move's wait counts (H6): a move that completes a
/// pending one whose record `first` already showed has it — that read
/// (writing the pending record again would stamp it above a serving one
/// of an earlier attempt that may still land, and bury it); any other
/// writes the pending record at `stamp` and takes the acknowledgement.
/// `None` when that write was not acknowledged (`report` says so).
async fn acknowledged(
    store: &SharedStore,
    clock: &dyn Clock,
    (request, plan, record): (&MoveRequest, &MovePlan, &HomeRecord),
    (gathered, first, stamp): (&Gathered, &Datacenter, Timestamp),
    report: &mut MoveReport,
) -> Option<Timestamp> {
    let shown_at = plan
        .completes
        .then(|| {
            let shows = gathered.scene.read.get(first)?.iter().any(|(rule, r)| {
                *rule == request.ask.rule && r.version == plan.version && r.pending
            });
            shows
                .then(|| gathered.read_at.get(first).copied())
                .flatten()
        })
        .flatten();
    if shown_at.is_some() {
        return shown_at;
    }
    let key = request.ask.rule.key();
    let pending = write_record(store, first, &key, &record.as_pending(), stamp).await;
    if let Err(e) = &pending {
        // Not acknowledged: it may still land (and then serves nowhere).
        set(
            report,
            first,
            Some(Holds::Unknown),
            Some(format!("{e}; it may still land")),
        );
        report.incomplete = Some(incomplete(request, report, &[]));
        return None;
    }
    Some(clock.now())
}

/// After the record is written (or copied): the fleet's activity at the
/// new home for a move of the default rule, and what is incomplete.
async fn finish(
    store: &SharedStore,
    settings: &RolloutSettings,
    request: &MoveRequest,
    record: &HomeRecord,
    report: &mut MoveReport,
) {
    let mut also = Vec::new();
    if request.ask.rule == Rule::Default
        && let Err(e) = record_fleet_activity(store, settings, &request.ask.to, record).await
    {
        also.push(format!(
            "recording the fleet's activity at {} failed ({e}): until it is recorded, hold \
             every rollout transition for rollout.quiet_period after {} serves",
            request.ask.to, request.ask.to
        ));
    }
    // A write the move sent that failed; a datacenter that did not answer
    // at all is named (it holds what it held), but a forced move is made
    // exactly when one does not.
    let failed = report.written.iter().any(|(_, e)| e.is_some());
    if failed || !also.is_empty() {
        report.incomplete = Some(incomplete(request, report, &also));
    }
}

/// `report` after a write of the record (or a copy of it) to `dc` that
/// ended in `result`, which would leave `dc` holding `holds`.
fn note(report: &mut MoveReport, dc: &Datacenter, result: &Result<(), StoreError>, holds: Holds) {
    match result {
        Ok(()) => set(report, dc, Some(holds), None),
        Err(e) => set(report, dc, None, Some(e.to_string())),
    }
    report
        .written
        .push((dc.clone(), result.as_ref().err().map(ToString::to_string)));
}

/// Records what `dc` holds now (`None`: as read before) and why a write
/// there failed.
fn set(report: &mut MoveReport, dc: &Datacenter, holds: Option<Holds>, error: Option<String>) {
    if let Some(entry) = report.datacenters.iter_mut().find(|d| d.datacenter == *dc) {
        if let Some(holds) = holds {
            entry.holds = holds;
        }
        entry.error = error;
    } else {
        report.datacenters.push(DatacenterRecord {
            datacenter: dc.clone(),
            holds: holds.unwrap_or(Holds::Unknown),
            error,
        });
    }
}

/// What a move that could not write everything says: which datacenters
/// have its record (serving or pending), which do not, and what to run
/// next.
fn incomplete(request: &MoveRequest, report: &MoveReport, also: &[String]) -> String {
    let command = format!(
        "migrate home move{} --to {}",
        match &request.ask.rule {
            Rule::Default => String::new(),
            Rule::Prefix(p) => format!(" --prefix {p:?}"),
        },
        request.ask.to
    );
    let list = |holds: Holds| -> Vec<String> {
        report
            .datacenters
            .iter()
            .filter(|d| d.holds == holds)
            .map(|d| match &d.error {
                Some(e) => format!("{} ({e})", d.datacenter),
                None => d.datacenter.to_string(),
            })
            .collect()
    };
    let mut said = Vec::new();
    for (holds, what) in [
        (Holds::Serving, "serving at"),
        (Holds::Pending, "pending (serving nowhere) at"),
        (Holds::Without, "not at"),
        (Holds::Unknown, "unknown at"),
    ] {
        let at = list(holds);
        if !at.is_empty() {
            said.push(format!("{what} {}", at.join(", ")));
        }
    }
    let version = report.record.as_ref().map_or(0, |r| r.version);
    let next = if report.applied {
        let serves = report.record.as_ref().map_or_else(String::new, |r| {
            format!(" from {}", fmt_micros(r.serves_from))
        });
        let home_holds = report
            .datacenters
            .iter()
            .any(|d| d.datacenter == request.ask.to && d.holds == Holds::Serving);
        let copy = format!(
            "Replication brings the record to every datacenter that answers again; if one \
             still lacks it after that (`migrate home` shows it without version {version}: a \
             hint lost), run `{command}` again: it copies the record, as it is, to every \
             datacenter without it"
        );
        if home_holds {
            format!(
                "the move is made: {} serves{serves}. {copy}",
                request.ask.to
            )
        } else {
            format!(
                "the move is made: {to} serves{serves} once it holds the record, and no \
                 datacenter serves {rule} until it does. {copy}",
                to = request.ask.to,
                rule = request.ask.rule,
            )
        }
    } else {
        format!(
            "run the same move again (`{command}`) to complete it once {} answers: until \
             then no datacenter serves {}",
            report
                .datacenters
                .iter()
                .find(|d| d.error.is_some())
                .map_or_else(|| request.ask.to.to_string(), |d| d.datacenter.to_string()),
            request.ask.rule
        )
    };
    let mut text = format!(
        "the record (version {version}) is {}; {next}",
        said.join("; ")
    );
    for more in also {
        text.push_str("; ");
        text.push_str(more);
    }
    text
}

/// A move of the default rule moves the fleet's rows: records legacy and
/// queue activity at the new home until it serves plus a stage view's
/// life, so no quiet period counts across the move. Each write is stamped
/// with the time it records, so writing it again (a move asked again)
/// never lowers what is recorded.
async fn record_fleet_activity(
    store: &SharedStore,
    settings: &RolloutSettings,
    to: &Datacenter,
    record: &HomeRecord,
) -> Result<(), StoreError> {
    let until = Timestamp::from_micros(record.serves_from).saturating_add(settings.stage_valid_for);
    let route = Route::Datacenter(to.clone());
    for algorithm in [Algorithm::Legacy, Algorithm::Queue] {
        let mut attempt = 1;
        loop {
            match record_activity_via(store.as_ref(), &route, algorithm, until).await {
                Err(e) if e.is_retryable() && attempt < READ_ATTEMPTS => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(e),
                Ok(()) => break,
            }
        }
    }
    Ok(())
}
