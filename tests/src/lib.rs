//! Shared harness for lockshift's cross-crate tests: targets for the store
//! conformance suite and (as the lock crates land) simulated fleets.

pub mod attacks;
pub mod clocks;
pub mod datacenters;
pub mod election;
pub mod fleet;
pub mod rolling;
pub mod sim;
pub mod targets;
