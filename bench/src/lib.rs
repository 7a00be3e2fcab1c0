//! The lockshift benchmark: reproduce the thesis' tables 1–2 side by side,
//! and see where the queue and combined locks stand.
//!
//! P worker processes each take one shared lock K times, for each algorithm,
//! against the local endpoint with injected store latency or a real cluster.
//! Each worker reports its samples (request, acquisition and release times)
//! and its store-operation counts; [`stats`] turns them into waits (mean,
//! p50, p99, max), throughput, operations per acquisition, hand-off latency
//! in store round trips and fairness (longest same-process run, Jain's index
//! over windows); [`plot`] draws the thesis-style figures.

pub mod plot;
pub mod stats;
