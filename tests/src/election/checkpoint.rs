//! Checkpoints of the election runs: the fleet holds still, then
//! `Election::leader` and every observer must name the leader the terms say
//! leads.

use std::time::Duration;

use lockshift::{Leader, OBSERVE_EVERY};
use rand::Rng;
use tokio::time::Instant;

use super::report::names;
use super::{CHECKPOINT_ATTEMPTS, ELECTION, SETTLE_WITHIN, SLACK, World};

impl World {
    /// A checkpoint with probability `p`.
    pub async fn maybe_checkpoint(&mut self, p: f64, what: &str) {
        if self.rng.random_bool(p) {
            self.checkpoint(what).await;
        }
    }

    /// The fleet holds still until nothing changed for longer than an
    /// observer's period and no record can outlive its leadership; then
    /// `Election::leader` and every observer must name the leader the terms say
    /// leads (or nobody). The fleet carries on after.
    ///
    /// Holding still stops resignations and new stage moves, not faults: a
    /// lease may still be lost (a renewal timed out) while the observers
    /// are compared, and the next leader campaign in. What was compared
    /// before such a change is compared against terms that no longer
    /// hold, so the checkpoint is taken again once the fleet settles
    /// (up to `CHECKPOINT_ATTEMPTS` times; one not completed is not
    /// counted).
    pub async fn checkpoint(&mut self, what: &str) {
        self.shared.hold_still(true);
        for _ in 0..CHECKPOINT_ATTEMPTS {
            if !self.settle(what).await {
                break;
            }
            let before = self.referee().last_change();
            let found = self.compare(what).await;
            if self.referee().last_change() != before {
                continue;
            }
            for problem in found {
                self.referee().problem(problem);
            }
            self.count_checkpoint();
            break;
        }
        self.shared.hold_still(false);
    }

    /// Waits for the fleet to hold still; `false` (a problem recorded)
    /// when it did not within [`SETTLE_WITHIN`].
    pub(super) async fn settle(&self, what: &str) -> bool {
        let deadline = Instant::now() + SETTLE_WITHIN;
        while !(self.shared.all_settled() && self.referee().settled_for(OBSERVE_EVERY + SLACK)) {
            if Instant::now() > deadline {
                self.referee().problem(format!(
                    "{what}: the fleet did not hold still within {SETTLE_WITHIN:?}"
                ));
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        true
    }

    /// Who leads by `Election::leader`, read through an observer's node
    /// (asked again while the read fails).
    async fn read_leader(&self) -> Result<Option<Leader>, String> {
        let node = self
            .watchers
            .first()
            .or_else(|| self.candidates.first().map(|c| &c.node))
            .expect("a node to read through");
        let election = node.election(ELECTION).map_err(|e| e.to_string())?;
        let mut last = String::new();
        for _ in 0..20 {
            match election.leader().await {
                Ok(leader) => return Ok(leader),
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(last)
    }

    /// What the checkpoint finds: every way `Election::leader` or an observer
    /// differs from the leader the terms name.
    pub(super) async fn compare(&self, what: &str) -> Vec<String> {
        let mut found = Vec::new();
        let expected = match self.referee().current() {
            Ok(expected) => expected,
            Err(open) => {
                found.push(format!(
                    "{what}: several leaderships are open at once: {}",
                    names(&open)
                ));
                return found;
            }
        };
        let shown =
            |l: &Option<Leader>| l.as_ref().map_or("nobody".to_string(), ToString::to_string);
        match self.read_leader().await {
            Ok(read) if read == expected => {}
            Ok(read) => found.push(format!(
                "{what}: Election::leader says {} ({read:?}), the leaders say {} ({expected:?})",
                shown(&read),
                shown(&expected)
            )),
            Err(e) => found.push(format!("{what}: who leads could not be read: {e}")),
        }
        for o in &self.observers {
            // The last read must have succeeded (a failed one keeps the
            // leader read before it): wait for one that does.
            for _ in 0..20 {
                if o.watch.last_error().is_none() {
                    break;
                }
                tokio::time::sleep(OBSERVE_EVERY).await;
            }
            let seen = o.watch.current();
            if seen != expected {
                found.push(format!(
                    "{what}: {} shows {} ({seen:?}) {:?} after the last change, the leaders say {} ({expected:?}){}",
                    o.what,
                    shown(&seen),
                    OBSERVE_EVERY + SLACK,
                    shown(&expected),
                    o.watch
                        .last_error()
                        .map_or(String::new(), |e| format!("; its last read failed: {e}"))
                ));
            }
        }
        found
    }

    /// Counts a checkpoint taken whole.
    pub(super) fn count_checkpoint(&self) {
        let expected = self.referee().current().ok().flatten();
        let mut stats = self.shared.stats();
        stats.checkpoints += 1;
        stats.checkpoints_led += usize::from(expected.is_some());
        stats.observations += self.observers.len();
    }
}
