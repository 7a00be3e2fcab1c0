//! The lockshift benchmark: reproduce the thesis' tables 1–2 side by side,
//! see where the queue and combined locks stand against the LWT lease
//! Cassandra users build instead ([`lwt`]), and what holding many locks
//! costs one node ([`hold`]).
//!
//! P worker processes each take one shared lock K times, for each algorithm,
//! against the local endpoint with injected store latency or a real cluster.
//! Each worker reports its samples (request, acquisition and release times)
//! and its store-operation counts; [`stats`] turns them into waits (mean,
//! p50, p99, max), throughput, operations per acquisition, hand-off latency
//! in store round trips and fairness (longest same-process run, Jain's index
//! over windows); [`plot`] draws the thesis-style figures. The [`soak`]
//! takes one lock N times per algorithm and checks that the last waits are
//! the first ones' and that no read passes more than 1 000 tombstones
//! ([`reads`] records what each read cost). [`datacenters`] measures what a
//! lock's home costs the clients in it and outside it. [`fenced`] compares
//! a fenced write with a plain one; [`observe`] measures what following an
//! election's leader costs its observers. [`census`] times a census of N
//! held locks, as `migrate status` takes it, beside a raw scan of the same
//! tables.

mod algorithm;
pub mod census;
pub mod datacenters;
mod error;
pub mod fenced;
pub mod hold;
pub mod idle;
pub mod lwt;
pub mod observe;
pub mod plot;
pub mod reads;
pub mod report;
mod run;
pub mod sharing;
pub mod soak;
pub mod stats;
mod targets;
mod worker;

pub use algorithm::BenchAlgorithm;
pub use error::BenchError;
pub use report::{BenchReport, HoldBenchReport, SoakReport, render, render_hold, render_soak};
pub use run::{BenchConfig, WorkerCommand, run, run_hold, run_soak};
pub use worker::{Job, WorkerSpec, run_worker};
