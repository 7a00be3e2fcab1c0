//! Fenced writes on a CQL cluster ([`Store::write_fenced_via`](crate::Store::write_fenced_via)):
//! a conditional `UPDATE` — one lightweight transaction, one Paxos round —
//! that sets the cell's `value` and its `fence` column only if the fence
//! recorded there is not larger than the writer's token.
//!
//! ```text
//! UPDATE ks.t SET value = ?, fence = ? WHERE row_key = ? AND column_name = ? IF fence <= ?
//! UPDATE ks.t SET value = ?, fence = ? WHERE row_key = ? AND column_name = ? IF fence = null
//! ```
//!
//! The first is sent; on a cell that records no fence yet (a null, or no
//! row) `fence <= ?` does not hold and Cassandra answers `[applied] =
//! false` with no fence, so the second is sent — the price of a cell's
//! first fenced write is two rounds. A racing writer between the two is
//! seen in the second's answer and decided again ([`next_round`], at most
//! [`MAX_ROUNDS`]).
//!
//! Serial consistency is `SERIAL`, or `LOCAL_SERIAL` when the commit is
//! at `LOCAL_QUORUM` (a route pinned to a datacenter — what a homes router
//! makes of a fenced write's lock while its home is confirmed, F1 in
//! docs/design.md §5): the Paxos round then counts the same replicas as
//! the quorum (`Statements::configure_conditional`). A route named by a
//! lock reaching this store unresolved (no homes router above it) is the
//! default route. No `USING TIMESTAMP`: Cassandra
//! refuses it on a conditional update and stamps the write with the
//! ballot.
//!
//! The two statements are prepared on a table's first fenced write, not
//! at connect: a table created before the `fence` column existed still
//! serves the locks, and only its fenced writes fail, naming the `ALTER
//! TABLE` that adds the column.

use std::sync::{Arc, PoisonError};

use scylla::statement::prepared::PreparedStatement;
use scylla::value::{CqlValue, Row};

use super::errors::classify_prepare;
use super::store::CqlStore;
use crate::cell::{OpKind, Table};
use crate::error::{StoreError, StoreErrorKind};
use crate::fenced::{Condition, FencedOutcome, MAX_ROUNDS, Next, check_token, next_round};
use crate::request::WriteFencedOp;
use crate::route::Route;

/// Binds: value blob, fence bigint, row_key text, column_name text, token
/// bigint.
pub(crate) fn update_if_at_most(keyspace: &str, table: Table) -> String {
    format!(
        "UPDATE {keyspace}.{table} SET value = ?, fence = ? WHERE row_key = ? AND column_name = ? \
         IF fence <= ?"
    )
}

/// Binds: value blob, fence bigint, row_key text, column_name text.
pub(crate) fn update_if_unfenced(keyspace: &str, table: Table) -> String {
    format!(
        "UPDATE {keyspace}.{table} SET value = ?, fence = ? WHERE row_key = ? AND column_name = ? \
         IF fence = null"
    )
}

/// One table's two conditional updates, prepared, not yet configured for
/// a route.
#[derive(Debug)]
pub(super) struct FencedStatements {
    at_most: PreparedStatement,
    unfenced: PreparedStatement,
}

/// What one round answered.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Answer {
    pub(super) applied: bool,
    /// The `fence` column of the answer: `None` for a null, or when the
    /// row does not exist (Cassandra then answers `[applied]` alone).
    pub(super) fence: Option<u64>,
}

/// Reads a conditional update's answer: `[applied]` first, then, when not
/// applied and the row exists, the condition's columns.
pub(super) fn answer(columns: &[&str], row: &Row) -> Result<Answer, String> {
    let applied = match (columns.first(), row.columns.first()) {
        (Some(&"[applied]"), Some(Some(CqlValue::Boolean(b)))) => *b,
        _ => {
            return Err(format!(
                "not a lightweight-transaction answer: columns {columns:?}"
            ));
        }
    };
    let fence = match columns
        .iter()
        .position(|c| *c == "fence")
        .and_then(|i| row.columns.get(i))
    {
        None | Some(None) => None,
        Some(Some(CqlValue::BigInt(v))) => {
            Some(u64::try_from(*v).map_err(|_| format!("the cell records a negative fence {v}"))?)
        }
        Some(Some(other)) => return Err(format!("the fence column holds {other:?}, not a bigint")),
    };
    Ok(Answer { applied, fence })
}

impl CqlStore {
    /// The CQL [`Store::write_fenced_via`](crate::Store::write_fenced_via).
    pub(super) async fn fenced_write(
        &self,
        route: &Route,
        table: Table,
        write: WriteFencedOp<'_>,
    ) -> Result<FencedOutcome, StoreError> {
        let WriteFencedOp { row, cell, token } = write;
        let op = OpKind::FencedWrite;
        let bound = check_token(token, table)?;
        let routed = self.statements_for(route, op, table)?;
        let prepared = self.fenced_statements(table).await?;
        let mut condition = Condition::AtMost;
        for round in 1..=MAX_ROUNDS {
            let mut statement = match condition {
                Condition::AtMost => prepared.at_most.clone(),
                Condition::Unfenced => prepared.unfenced.clone(),
            };
            routed.configure_conditional(&mut statement);
            let value = cell.value.as_slice();
            let column = cell.column.as_str();
            let result = match condition {
                Condition::AtMost => {
                    self.session()
                        .execute_unpaged(&statement, (value, bound, row, column, bound))
                        .await
                }
                Condition::Unfenced => {
                    self.session()
                        .execute_unpaged(&statement, (value, bound, row, column))
                        .await
                }
            }
            .map_err(|e| super::store::failed_on(route, e, op, table))?;
            let invalid =
                |why: String| StoreError::new(StoreErrorKind::Invalid, op, Some(table), why);
            let rows = result
                .into_rows_result()
                .map_err(|e| invalid(e.to_string()))?;
            let columns: Vec<&str> = rows.column_specs().iter().map(|c| c.name()).collect();
            let first = rows
                .first_row::<Row>()
                .map_err(|e| invalid(e.to_string()))?;
            let answer = answer(&columns, &first).map_err(invalid)?;
            if answer.applied {
                return Ok(FencedOutcome::Applied { rounds: round });
            }
            match next_round(condition, answer.fence, token) {
                Next::Refused { recorded } => {
                    return Ok(FencedOutcome::Refused {
                        recorded,
                        rounds: round,
                    });
                }
                Next::Send(next) => condition = next,
            }
        }
        Err(StoreError::new(
            StoreErrorKind::NotApplied,
            op,
            Some(table),
            format!(
                "the fence of {row:?}/{:?} changed under each of {MAX_ROUNDS} rounds; none applied",
                cell.column
            ),
        ))
    }

    /// The conditional updates of `table`, prepared on first use.
    async fn fenced_statements(&self, table: Table) -> Result<Arc<FencedStatements>, StoreError> {
        let cache = self.fenced_cache();
        if let Some(found) = cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&table)
        {
            return Ok(found.clone());
        }
        let ks = self.keyspace();
        let prepare = |text: String| async move {
            self.session().prepare(text.as_str()).await.map_err(|e| {
                let kind = classify_prepare(&e, OpKind::FencedWrite);
                let missing_column = e.to_string().contains("fence");
                let hint = if missing_column {
                    format!(
                        " — the table predates fenced writes: add the column with \
                         `migrate schema --apply`, or `ALTER TABLE {ks}.{table} ADD fence bigint`"
                    )
                } else {
                    String::new()
                };
                StoreError::new(
                    kind,
                    OpKind::FencedWrite,
                    Some(table),
                    format!("preparing `{text}`: {e}{hint}"),
                )
            })
        };
        let (at_most, unfenced) = futures::try_join!(
            prepare(update_if_at_most(ks, table)),
            prepare(update_if_unfenced(ks, table)),
        )?;
        let statements = Arc::new(FencedStatements { at_most, unfenced });
        cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(table, statements.clone());
        Ok(statements)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statement_text_is_the_agreed_cql() {
        assert_eq!(
            update_if_at_most("lockshift", crate::schema::SCRATCH),
            "UPDATE lockshift.scratch SET value = ?, fence = ? WHERE row_key = ? AND \
             column_name = ? IF fence <= ?"
        );
        assert_eq!(
            update_if_unfenced("lockshift", crate::schema::SCRATCH),
            "UPDATE lockshift.scratch SET value = ?, fence = ? WHERE row_key = ? AND \
             column_name = ? IF fence = null"
        );
    }

    #[test]
    fn answers_are_read_as_cassandra_sends_them() {
        let row = |values: Vec<Option<CqlValue>>| Row { columns: values };
        let yes = Some(CqlValue::Boolean(true));
        let no = Some(CqlValue::Boolean(false));
        // (columns, row, expected)
        let cases: Vec<(Vec<&str>, Row, Result<Answer, ()>)> = vec![
            (
                vec!["[applied]"],
                row(vec![yes.clone()]),
                Ok(Answer {
                    applied: true,
                    fence: None,
                }),
            ),
            // Not applied, no row: `[applied]` alone.
            (
                vec!["[applied]"],
                row(vec![no.clone()]),
                Ok(Answer {
                    applied: false,
                    fence: None,
                }),
            ),
            // Not applied, the row's fence is null.
            (
                vec!["[applied]", "fence"],
                row(vec![no.clone(), None]),
                Ok(Answer {
                    applied: false,
                    fence: None,
                }),
            ),
            (
                vec!["[applied]", "fence"],
                row(vec![no.clone(), Some(CqlValue::BigInt(42))]),
                Ok(Answer {
                    applied: false,
                    fence: Some(42),
                }),
            ),
            (
                vec!["fence"],
                row(vec![Some(CqlValue::BigInt(42))]),
                Err(()),
            ),
            (
                vec!["[applied]", "fence"],
                row(vec![no.clone(), Some(CqlValue::BigInt(-1))]),
                Err(()),
            ),
            (
                vec!["[applied]", "fence"],
                row(vec![no, Some(CqlValue::Int(1))]),
                Err(()),
            ),
        ];
        for (i, (columns, row, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                answer(&columns, &row).map_err(|_| ()),
                expected,
                "case #{i}"
            );
        }
    }
}
