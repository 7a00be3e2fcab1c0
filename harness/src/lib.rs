//! The one fleet harness and exclusion checker of lockshift, shared by the
//! tests (`lockshift-tests`: the seeded simulations, the attacks, the
//! rolling restarts) and by `migrate demo`.
//!
//! A run that hammers locks needs a referee that does not trust the locks:
//! something outside them that records who is inside which critical
//! section, and flags every time two holders are inside one lock at once.
//! The tests and the demo used to keep one each. They now share this one,
//! so "exclusion held" means the same thing in both.
//!
//! The crate sits in the *operate* layer of the crate map (issue 21's plan
//! §1, checked by `tests/layout`): it may import the decision crate and the
//! crates that do the I/O, never the operator tool or the tests.
//!
//! # Modules
//!
//! - [`checker`]: the exclusion checker, [`checker::Oracle`], and what it
//!   reports, [`checker::Violation`].
//! - [`fleet`]: the fleet, [`fleet::Fleet`]: nodes started, stopped and
//!   restarted one by one, each running the workers of a
//!   [`fleet::Workload`] the caller supplies.

pub mod checker;
pub mod fleet;
