//! The rollout of a fleet from the legacy lock to the queue lock: the
//! stage record and its transitions under guards, the node registry, the
//! census of lock cells, and the locker factory that builds the lockers a
//! stage chooses among. The decisions themselves (the guards' judgement,
//! the edge rule, registry and census data) are pure and live in
//! `lockshift-decide`; this crate reads and writes the cells they judge.
