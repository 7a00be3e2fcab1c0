//! What to do about a refusal: one text per way a guard (or a transition)
//! can fail, kept next to the guards that produce them. `migrate` prints
//! the action with each failing guard, and the table in
//! docs/operating.md §2 is generated from these texts ([`refusal_table`];
//! a test checks the document against it), so the two cannot drift.

use serde::Serialize;

use crate::algorithm::Algorithm;

/// One way a transition can be refused, with what it means and what to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Remedy {
    /// A node resolves the legacy algorithm.
    RunsLegacy,
    /// A node still has legacy acquisitions waiting or held.
    LegacyAcquisitions,
    /// A node's heartbeat promised legacy use until a moment ahead (R8).
    LegacyPromised,
    /// Legacy activity was seen within the quiet period.
    LegacySeen,
    /// A node resolves the queue algorithm (dual → legacy).
    RunsQueue,
    /// A node still has queue acquisitions waiting or held (dual → legacy).
    QueueAcquisitions,
    /// A node's heartbeat promised queue use until a moment ahead.
    QueuePromised,
    /// Queue activity was seen within the quiet period (dual → legacy).
    QueueSeen,
    /// Locks are held by queue holders (dual → legacy).
    HeldByQueue,
    /// A node resolves the combined algorithm (queue → complete).
    RunsCombined,
    /// A node still has combined acquisitions (queue → complete).
    CombinedAcquisitions,
    /// Locks are held by combined holders (queue → complete).
    HeldByCombined,
    /// A node has not read the current stage yet.
    ActsOnOldStage,
    /// A node cannot confirm the stage (R2).
    CannotConfirm,
    /// A node has acquisitions bound to an older stage version.
    BoundToOldVersion,
    /// Two live processes share a node id.
    SharedNodeId,
    /// A node has not heartbeat lately but still counts.
    Silent,
    /// Another operator's transition moved the stage first.
    Raced,
    /// The rollout lock stayed held by another transition.
    RolloutLockHeld,
    /// A lock's row cannot be read (too many tombstones): a guard that
    /// reads lock cells cannot be evaluated.
    UnreadableLock,
}

impl Remedy {
    /// Every remedy, in the order of the document's table.
    pub const ALL: [Remedy; 20] = [
        Remedy::RunsLegacy,
        Remedy::LegacyAcquisitions,
        Remedy::LegacyPromised,
        Remedy::LegacySeen,
        Remedy::ActsOnOldStage,
        Remedy::CannotConfirm,
        Remedy::BoundToOldVersion,
        Remedy::SharedNodeId,
        Remedy::Silent,
        Remedy::RunsCombined,
        Remedy::CombinedAcquisitions,
        Remedy::HeldByCombined,
        Remedy::RunsQueue,
        Remedy::QueueAcquisitions,
        Remedy::QueuePromised,
        Remedy::QueueSeen,
        Remedy::HeldByQueue,
        Remedy::Raced,
        Remedy::RolloutLockHeld,
        Remedy::UnreadableLock,
    ];

    /// A node resolving `algorithm` (the guard "no live node runs X").
    pub fn runs(algorithm: Algorithm) -> Remedy {
        match algorithm {
            Algorithm::Legacy => Remedy::RunsLegacy,
            Algorithm::Queue => Remedy::RunsQueue,
            Algorithm::Combined => Remedy::RunsCombined,
        }
    }

    /// A node with acquisitions of `algorithm` waiting or held.
    pub fn acquisitions(algorithm: Algorithm) -> Remedy {
        match algorithm {
            Algorithm::Legacy => Remedy::LegacyAcquisitions,
            Algorithm::Queue => Remedy::QueueAcquisitions,
            Algorithm::Combined => Remedy::CombinedAcquisitions,
        }
    }

    /// Locks held by `algorithm`'s holders.
    pub fn held_by(algorithm: Algorithm) -> Remedy {
        match algorithm {
            Algorithm::Queue => Remedy::HeldByQueue,
            _ => Remedy::HeldByCombined,
        }
    }

    /// Activity of `algorithm` within the quiet period: promised ahead
    /// (`promised`) or seen.
    pub fn activity(algorithm: Algorithm, promised: bool) -> Remedy {
        match (algorithm, promised) {
            (Algorithm::Queue, true) => Remedy::QueuePromised,
            (Algorithm::Queue, false) => Remedy::QueueSeen,
            (_, true) => Remedy::LegacyPromised,
            (_, false) => Remedy::LegacySeen,
        }
    }

    /// How the refusal reads (the "guard says" column; N, K, S, V, P, A, B
    /// stand for what the real text names).
    pub fn says(self) -> &'static str {
        match self {
            Remedy::RunsLegacy => "`node N runs legacy`",
            Remedy::LegacyAcquisitions => "`node N has K legacy acquisition(s) waiting or held`",
            Remedy::LegacyPromised => {
                "`legacy may be in use for another 25s (a node's heartbeat allows it), then the quiet period 2m`"
            }
            Remedy::LegacySeen => "`legacy activity seen 40s ago (quiet period 2m)`",
            Remedy::ActsOnOldStage => "`node N still acts on stage S`",
            Remedy::CannotConfirm => "`node N cannot confirm the stage`",
            Remedy::BoundToOldVersion => "`node N has acquisitions bound to stage version V`",
            Remedy::SharedNodeId => "`node N (process P) …`",
            Remedy::Silent => "`… (heartbeat 1m ago)` on any node",
            Remedy::RunsCombined => "`node N runs combined` (queue → complete)",
            Remedy::CombinedAcquisitions => {
                "`node N has K combined acquisition(s) waiting or held` (queue → complete)"
            }
            Remedy::HeldByCombined => "`K lock(s) held by combined holders: …` (queue → complete)",
            Remedy::RunsQueue => "`node N runs queue` (dual → legacy)",
            Remedy::QueueAcquisitions => {
                "`node N has K queue acquisition(s) waiting or held` (dual → legacy)"
            }
            Remedy::QueuePromised => "`queue may be in use for another …` (dual → legacy)",
            Remedy::QueueSeen => "`queue activity seen 40s ago (quiet period 2m)` (dual → legacy)",
            Remedy::HeldByQueue => "`K lock(s) held by queue holders: …` (dual → legacy)",
            Remedy::Raced => "`the stage moved from A to B while this command waited …`",
            Remedy::RolloutLockHeld => {
                "`the rollout lock stayed held by another operator's transition`"
            }
            Remedy::UnreadableLock => {
                "`cannot be evaluated: the database refuses to read K lock row(s): lock L (table T): … too many tombstones …`"
            }
        }
    }

    /// What it means.
    pub fn meaning(self) -> &'static str {
        match self {
            Remedy::RunsLegacy => {
                "N is configured `legacy` (or its stage does not allow its mode yet)"
            }
            Remedy::LegacyAcquisitions => {
                "N switched, but acquisitions it began as legacy are still waiting or held"
            }
            Remedy::LegacyPromised => {
                "a node runs legacy, or did until moments ago: every heartbeat of a node running \
                 legacy promises that it may start legacy acquisitions until `stage_valid_for` \
                 later, and the quiet period counts from the end of that promise — even if the \
                 node never reports again"
            }
            Remedy::LegacySeen => {
                "a legacy cell (a lockshift node in legacy mode, or a binary that predates \
                 lockshift) was seen that recently"
            }
            Remedy::ActsOnOldStage => "N has not read the new stage yet",
            Remedy::CannotConfirm => {
                "N's stage reads or heartbeats fail (it acts as combined meanwhile — safe)"
            }
            Remedy::BoundToOldVersion => {
                "N still has an acquisition that began under an older stage (waiting, or a lock \
                 held since)"
            }
            Remedy::SharedNodeId => {
                "two live processes share node id N (a replacement started before its \
                 predecessor stopped, or one `node.id` in a shared config file); each is judged \
                 on its own row"
            }
            Remedy::Silent => {
                "N is **silent**: no heartbeat lately; it still counts as last reported until \
                 its registry row expires (`stage_valid_for + lease_ttl + clock_skew_margin`, \
                 +1 s)"
            }
            Remedy::RunsCombined => "N is configured `combined`",
            Remedy::CombinedAcquisitions => {
                "N switched, but acquisitions it began as combined are still waiting or held"
            }
            Remedy::HeldByCombined => "locks taken with the combined lock are still held",
            Remedy::RunsQueue => {
                "N is configured `queue` (or `auto` and has not read the stage rolled back to yet)"
            }
            Remedy::QueueAcquisitions => {
                "N switched, but acquisitions it began as queue are still waiting or held"
            }
            Remedy::QueuePromised => {
                "a node runs queue, or did until moments ago; as for legacy, its heartbeat \
                 promises queue use until `stage_valid_for` later"
            }
            Remedy::QueueSeen => "a queue holding was seen that recently",
            Remedy::HeldByQueue => "locks taken with the queue lock are still held",
            Remedy::Raced => "another operator's transition won the race",
            Remedy::RolloutLockHeld => "a transition is running elsewhere",
            Remedy::UnreadableLock => {
                "a read of L's row passes more tombstones than Cassandra's \
                 `tombstone_failure_threshold`, so the database refuses it; what L holds cannot \
                 be known, and neither can the guard's answer"
            }
        }
    }

    /// What to do.
    pub fn action(self) -> &'static str {
        match self {
            Remedy::RunsLegacy => {
                "set `node.mode = \"auto\"` (or `combined`) in N's config file — the node \
                 switches within a re-read period, no restart — or redeploy it"
            }
            Remedy::LegacyAcquisitions
            | Remedy::QueueAcquisitions
            | Remedy::CombinedAcquisitions => {
                "wait for them to finish; a lock held for hours shows in `status` under locks — \
                 ask its owner, or restart N"
            }
            Remedy::LegacyPromised | Remedy::QueuePromised => {
                "switch the node (above), then wait the promise and the quiet period out"
            }
            Remedy::LegacySeen => {
                "wait out the quiet period. If it keeps recurring, some binary still runs the \
                 old lock: `migrate status` lists legacy cells now, `migrate inspect LOCK` shows \
                 their owners — find and upgrade it"
            }
            Remedy::ActsOnOldStage => "wait one `rollout.stage_reread_every` and try again",
            Remedy::CannotConfirm => {
                "fix N's connectivity to the cluster; the guard passes once it confirms the \
                 stage again"
            }
            Remedy::BoundToOldVersion => "wait for it to be released; restarting N ends it too",
            Remedy::SharedNodeId => {
                "wait for the old process to stop (or fix its connectivity); give every process \
                 its own `node.id` (§0)"
            }
            Remedy::Silent => {
                "if N is really gone, wait until `status` no longer lists it; if it is alive, \
                 find out why it cannot write its heartbeat"
            }
            Remedy::RunsCombined => "set it to `auto` or `queue`",
            Remedy::HeldByCombined | Remedy::HeldByQueue => {
                "wait for them to be released; if their owners are dead, the cells expire within \
                 a lease TTL (`migrate clean` lists overdue ones)"
            }
            Remedy::RunsQueue => {
                "set `node.mode = \"combined\"` (or `auto`, which follows the stage) in N's \
                 config file; the node switches within a re-read period"
            }
            Remedy::QueueSeen => "wait out the quiet period",
            Remedy::Raced => "`migrate status`, then decide again",
            Remedy::RolloutLockHeld => "try again in a minute",
            Remedy::UnreadableLock => UNREADABLE_ACTION,
        }
    }
}

/// What to do about a lock the database refuses to read: the one text
/// `migrate status`, `advance`, `inspect` and `run-with-lock` print.
pub const UNREADABLE_ACTION: &str = "run `migrate schema --apply` to give the tables the gc grace \
     the schema states; the row is read again once its tombstones are older than that (see \
     docs/operating.md, \"A lock the database refuses to read\")";

/// The table of docs/operating.md §2, generated from [`Remedy`]: header,
/// separator and one row per remedy.
pub fn refusal_table() -> String {
    let mut out = String::from("| guard says | meaning | do |\n|---|---|---|\n");
    for r in Remedy::ALL {
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            r.says(),
            r.meaning(),
            r.action()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/operating.md §2 is this table, row for row: edit the texts
    /// here and paste what the failure prints.
    #[test]
    fn the_runbook_table_is_generated_from_the_remedies() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operating.md");
        let doc = std::fs::read_to_string(path).unwrap_or_default();
        let table = refusal_table();
        assert!(
            doc.contains(&table),
            "docs/operating.md §2 must hold this table exactly:\n\n{table}"
        );
        // Every remedy is reachable by name in the table once.
        for r in Remedy::ALL {
            assert_eq!(doc.matches(r.says()).count(), 1, "{}", r.says());
        }
    }
}
