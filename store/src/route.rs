//! Routes: which datacenter coordinates a request. The types live in
//! `lockshift_decide::datacenter` (pure data the homes rules share) and are
//! re-exported at the crate root.

pub use lockshift_decide::datacenter::{Datacenter, Host, InvalidDatacenter, Route, Topology};
