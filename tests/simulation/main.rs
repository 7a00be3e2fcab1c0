//! Seeded simulations of fleets on the embedded store with a paused clock:
//! exclusion under contention with latency, failures and skew; leases;
//! fairness. Every run prints its seed on failure; `LOCKSHIFT_SEED=<n>`
//! replays it.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used)]

mod attacks;
mod clocks;
mod datacenters;
mod datacenters_partial;
mod datacenters_waits;
mod determinism;
mod election;
pub mod exclusion;
mod fairness;
mod fencing;
mod incarnations;
mod leases;
mod mixed;
mod moves;
mod rollout;
mod sharing;
mod sharing_moves;
mod tombstones;
