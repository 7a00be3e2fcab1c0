//! Homes across datacenters: seeding the homes row, keeping a process's
//! view of it fresh, and moving a home (docs/design.md §4a, H1–H4). What a
//! process believes and where a row's requests go are decided in
//! `lockshift_decide::home`; this module does the I/O.
//!
//! The view and the router every node's store goes through live in
//! `lockshift_store::homes`, so that a lock's requests pass no code of
//! this crate; they are re-exported here beside what uses them.
//!
//! - [`HomesView`]: a process's view of the homes behind a lock, with its
//!   clock and datacenter — shared by the router and the task that
//!   refreshes it.
//! - [`HomesRouter`]: a store that sends every request on the default
//!   route to its row's home at `LOCAL_QUORUM` (H1), or refuses it without
//!   sending it when the home is not confirmed (H2) or a moved home does
//!   not serve yet (H3). Every algorithm runs on it unchanged.
//! - [`refresh`]: one read of the homes row from every datacenter, then
//!   the view; [`keep_fresh`] repeats it; [`seed`] (in `upkeep.rs`): a
//!   rule the settings name and no record holds yet is recorded through
//!   its home.
//! - [`move_home`] (in `moves.rs`): a planned move through the current
//!   home, or a forced one (H3, H4), guarded.

mod moves;
mod patient;
mod upkeep;

pub use lockshift_store::homes::{Configured, HomesRouter, HomesView, RefreshReport, refresh};
pub use moves::{DatacenterRecord, Holds, MoveReport, MoveRequest, move_home, move_wait};
pub use upkeep::{Refresher, Seeded, keep_fresh, seed};

#[cfg(test)]
mod tests;
