//! The rollout of a fleet from the legacy lock to the queue lock: the
//! stage record and its transitions under guards, the node registry, the
//! census of lock cells, and the locker factory that builds the lockers a
//! stage chooses among. The decisions themselves (the guards' judgement,
//! the edge rule, registry and census data) are pure and live in
//! `lockshift-decide`; this crate reads and writes the cells they judge.
//!
//! A service does not depend on this crate: the `lockshift` crate's node
//! follows the stage and reports to the registry. The operator tool reads
//! and moves the stage with [`Rollout`] (guards evaluated on
//! [`Rollout::evidence`]), and every locker in the workspace is built by
//! [`Lockers`], which gives each locker the time service it needs for as
//! long as it lives.
//!
//! The stages, the guards of each edge and why they keep legacy and queue
//! holders apart are written once, in docs/design.md §4: transitions keep
//! R1, and the registry carries what R5, R6 and R8 need.
//!
//! Across datacenters, [`homes`] decides where each lock's cells and the
//! fleet's rows are read and written (docs/design.md §4a, H1–H4): the
//! router every node's store goes through, the refresh of a process's
//! view of the homes, and home moves.
//!
//! # Modules
//! [`homes`] (the homes router, refresh, seeding, moves); [`rollout`] (the [`Rollout`] handle: transitions, history, the guards'
//! evidence, [`rollout::read_stage`]); [`registry`]
//! (heartbeat, deregistering, the live fleet, the activity record);
//! [`census`] (a census of lock cells, one lock's cells); [`Lockers`] (the
//! one locker factory); [`RolloutSettings`] (the `[rollout]` section; the
//! whole settings file is `lockshift::Settings`); [`RolloutError`] and
//! [`EvidenceError`].

pub mod census;
mod error;
pub mod homes;
mod lockers;
pub mod registry;
pub mod rollout;
mod settings;

pub use error::{EvidenceError, RolloutError};
pub use lockers::{LockerSettings, Lockers};
pub use rollout::{Rollout, TransitionReport, TransitionRequest};
pub use settings::RolloutSettings;
