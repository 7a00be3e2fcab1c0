//! Fenced writes ([`Store::write_fenced_via`](crate::Store::write_fenced_via)):
//! the token order and the rounds, on every backend.

use super::{Target, cell, value_of};
use crate::fenced::FencedOutcome;
use crate::schema::SCRATCH;

/// A fenced write is refused under a smaller token than the cell records,
/// applied under an equal or larger one; the first write of a cell takes
/// two rounds (on a cluster: `IF fence <= ?` fails on the null), the
/// others one; a refused write changes nothing.
pub async fn fenced_writes_refuse_smaller_tokens(t: &dyn Target) {
    let row = t.unique("fenced");
    let s = t.store();
    // (token, value, expected outcome, value afterwards)
    let steps = [
        (41, "100", FencedOutcome::Applied { rounds: 2 }, "100"),
        (41, "110", FencedOutcome::Applied { rounds: 1 }, "110"),
        (42, "90", FencedOutcome::Applied { rounds: 1 }, "90"),
        (
            41,
            "120",
            FencedOutcome::Refused {
                recorded: 42,
                rounds: 1,
            },
            "90",
        ),
    ];
    for (i, (token, value, expected, after)) in steps.into_iter().enumerate() {
        let got = s
            .write_fenced(SCRATCH, &row, &cell("balance", value), token)
            .await
            .unwrap_or_else(|e| panic!("step #{i}: {e}"));
        assert_eq!(got, expected, "step #{i}");
        assert_eq!(
            value_of(t, &row, "balance").await.as_deref(),
            Some(after),
            "step #{i}: a refused write changes nothing"
        );
    }
}

/// Concurrent fenced writers, each under its own token: whatever the
/// order they land in, the cell ends with the largest token's value (the
/// compare-and-set is linearizable), and every writer hears either
/// "applied" or a refusal naming a larger token.
pub async fn concurrent_fenced_writers_end_with_the_largest_token(t: &dyn Target) {
    let row = t.unique("fenced-race");
    let s = t.store();
    let writes = (1..=4u64).map(|token| {
        let row = row.clone();
        async move {
            let outcome = s
                .write_fenced(SCRATCH, &row, &cell("v", &token.to_string()), token)
                .await;
            (token, outcome)
        }
    });
    for (token, outcome) in futures::future::join_all(writes).await {
        match outcome {
            Ok(FencedOutcome::Applied { .. }) => {}
            Ok(FencedOutcome::Refused { recorded, .. }) => {
                assert!(recorded > token, "token {token} refused by {recorded}")
            }
            Err(e) => panic!("token {token}: {e}"),
        }
    }
    assert_eq!(value_of(t, &row, "v").await.as_deref(), Some("4"));
}
