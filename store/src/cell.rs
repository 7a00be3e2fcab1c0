//! The cell model, for the store's own modules: every type of
//! [`lockshift_decide::cell`] (re-exported from the crate root at the paths
//! they always had, `lockshift_store::Timestamp` and so on), plus the one
//! check that turns a rejected argument into a [`StoreError`].
//!
//! The model itself moved to `lockshift-decide` (issue 21), so that the
//! decisions made on cells need no store client; what needs a
//! [`StoreError`] stays here.

pub use lockshift_decide::cell::*;

use crate::error::StoreError;

/// The argument checks every backend makes before touching data: the row
/// key, every column and the start column (if any) must pass [`check_key`].
/// One function, so all backends reject the same calls the same way.
pub(crate) fn check_request<'a>(
    op: OpKind,
    table: Table,
    row: &str,
    columns: impl IntoIterator<Item = &'a str>,
    start_column: Option<&str>,
) -> Result<(), StoreError> {
    let invalid = |e: InvalidArgument| StoreError::invalid_argument(e, op, table);
    check_key("row key", row).map_err(invalid)?;
    for column in columns {
        check_key("column", column).map_err(invalid)?;
    }
    if let Some(start) = start_column {
        check_key("start column", start).map_err(invalid)?;
    }
    Ok(())
}
