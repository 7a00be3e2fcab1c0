//! `migrate home forget COLUMN [--apply]`: removing a cell of the homes
//! row that this build cannot decode (docs/operating.md, "Several
//! datacenters").
//!
//! Such a cell refuses every lock its rule could home in every process —
//! every lock and the fleet's own rows, for a column that names no rule
//! (`prefix:`, a record of an empty prefix) — and every move, until it is
//! gone (docs/design.md §4a, H5). It is read from every datacenter, each
//! at `LOCAL_QUORUM` there, and deleted in each datacenter that shows it
//! `USING TIMESTAMP` the writetime read there: a newer write of the column
//! (a record someone wrote since) survives the delete, as a renewal
//! survives `migrate clean`'s (invariant 2 of `lib.rs`). A cell that
//! decodes is never removed: its rule is moved instead. Without `--apply`
//! it only says what would go (invariant 1).

use lockshift_decide::home::{HOMES_ROW, Rule};
use lockshift_store::homes::{read_row_at, records};
use lockshift_store::{Route, Timestamp, schema};
use serde::Serialize;

use super::Env;
use crate::{JSON_VERSION, Outcome};

/// The report of `migrate home forget` (JSON schema, `"version": 1`).
#[derive(Debug, Clone, Serialize)]
pub struct ForgetReport {
    /// Schema version, 1.
    pub version: u32,
    /// The column asked for.
    pub column: String,
    /// Whether the cell was to be deleted (`--apply`), not only judged.
    pub apply: bool,
    /// What each datacenter of the cluster shows of the column, and what
    /// became of it there.
    pub datacenters: Vec<ForgetSite>,
    /// Why nothing was deleted: the cell decodes somewhere (exit 3).
    pub refused: Option<String>,
    /// What the operator should know: a column that names no rule this
    /// build knows may be a newer build's record.
    pub notes: Vec<String>,
}

/// One datacenter in a [`ForgetReport`].
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ForgetSite {
    /// The datacenter.
    pub datacenter: String,
    /// Whether its read answered.
    pub answered: bool,
    /// The writetime of the cell it shows (µs); `null`: it shows none.
    pub writetime_us: Option<i64>,
    /// Whether that cell decodes (then it is not removed).
    pub decodes: bool,
    /// Deleted there (with `--apply`).
    pub removed: bool,
    /// Why it does not decode, or why the read or the delete failed.
    pub error: Option<String>,
}

impl ForgetReport {
    /// Exit 3 when refused; 1 when a datacenter that may show the cell
    /// was not read, or a delete failed, with `--apply`; else 0.
    pub fn outcome(&self) -> Outcome {
        let failed = |d: &ForgetSite| !d.answered || (d.writetime_us.is_some() && !d.removed);
        if self.refused.is_some() {
            Outcome::NotSafe
        } else if self.apply && self.datacenters.iter().any(failed) {
            Outcome::Failed
        } else {
            Outcome::Ok
        }
    }
}

/// Reads `column` of the homes row from every datacenter and — with
/// `apply`, unless some datacenter shows a cell of it that decodes —
/// deletes it in each datacenter that shows it, at the writetime read
/// there.
///
/// # Errors
/// None of its own: every read and delete failure is in the report.
pub async fn forget(env: &Env, column: &str, apply: bool) -> ForgetReport {
    let mut report = ForgetReport {
        version: JSON_VERSION,
        column: column.to_string(),
        apply,
        datacenters: Vec::new(),
        refused: None,
        notes: Vec::new(),
    };
    let datacenters = env.store.topology().datacenters;
    let mut found: Vec<(lockshift_store::Datacenter, Timestamp)> = Vec::new();
    for dc in &datacenters {
        let read = read_row_at(env.store.as_ref(), dc).await;
        let mut site = ForgetSite {
            datacenter: dc.to_string(),
            answered: read.is_ok(),
            writetime_us: None,
            decodes: false,
            removed: false,
            error: None,
        };
        match read {
            Err(e) => site.error = Some(e.to_string()),
            Ok(cells) => {
                if let Some(cell) = cells.into_iter().find(|c| c.column == column) {
                    site.writetime_us = Some(cell.writetime.as_micros());
                    let writetime = cell.writetime;
                    let (decoded, undecoded) = records(dc, vec![cell]);
                    site.decodes = !decoded.is_empty();
                    site.error = undecoded.into_iter().next().map(|u| u.error);
                    found.push((dc.clone(), writetime));
                }
            }
        }
        report.datacenters.push(site);
    }
    if let Some(site) = report.datacenters.iter().find(|d| d.decodes) {
        report.refused = Some(format!(
            "datacenter {} shows a record in {column:?} that decodes: a homes record that \
             decodes is moved (`migrate home move`), never removed",
            site.datacenter
        ));
        return report;
    }
    if found.is_empty() {
        report.notes.push(format!(
            "no datacenter that answered shows a cell {column:?}: nothing to remove \
             (`migrate home` lists the cells that do not decode)"
        ));
    } else if Rule::from_key(column).is_none() && !column.starts_with("prefix:") {
        report.notes.push(format!(
            "the column {column:?} names no rule this build knows: a newer build may read it — \
             remove it only if no process of such a build runs"
        ));
    }
    if !apply {
        return report;
    }
    for (dc, writetime) in found {
        let deleted = env
            .store
            .delete_via(
                &Route::Datacenter(dc.clone()),
                schema::ROLLOUT,
                HOMES_ROW,
                &[column.to_string()],
                writetime,
            )
            .await;
        if let Some(site) = report
            .datacenters
            .iter_mut()
            .find(|d| d.datacenter == dc.as_str())
        {
            match deleted {
                Ok(()) => site.removed = true,
                Err(e) => site.error = Some(format!("the delete failed: {e}")),
            }
        }
    }
    report
}
