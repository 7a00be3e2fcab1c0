//! Every pure decision lockshift makes, in one crate that cannot do I/O.
//!
//! A lock algorithm is a loop of "read some cells, decide, write some
//! cells". This crate holds the *decide* part, and only that: it reads no
//! store, opens no socket or file, spawns nothing and logs nothing. It has
//! no clock of its own — a decision that depends on time takes `now` as an
//! argument — and no randomness of its own — a decision that needs a drawn
//! value takes the value. So every decision is a plain function of its
//! inputs: the same inputs give the same answer, in a unit test as in a
//! node, and a table of cases is the natural way to test it.
//!
//! The crates that do the I/O (the store, the lock algorithms, the
//! rollout, the node) depend on this one; it depends on no other lockshift
//! crate and on nothing beyond `std`, `serde` and `thiserror`.
//! `tests/layout` checks both rules, on its `Cargo.toml` and on every source
//! file.
//!
//! # Modules
//!
//! - [`cell`]: the vocabulary of Cassandra's cell model — [`cell::Timestamp`],
//!   [`cell::Ttl`], [`cell::Table`], [`cell::Cell`], the shapes of reads and
//!   scans ([`cell::RowQuery`], [`cell::KeyPage`]), the key limits
//!   ([`cell::check_key`]) and [`cell::InvalidArgument`].
//! - [`reconcile`]: Cassandra's per-cell reconciliation rule (which version
//!   of a cell wins), TTL deadlines and when a tombstone may be purged.
//! - [`schema`]: every table lockshift uses and its options.
//! - [`sharing`]: shared acquisitions on the queue — a semaphore's
//!   permits, a read/write lock's two sides (P1–P4); [`shared_waiter`]:
//!   what such an acquisition does on each read of the queue and `main`.
//! - [`id`]: the identifiers — [`id::LockId`], [`id::NodeId`],
//!   [`id::OwnerId`], [`id::Incarnation`] — their rules ([`id::InvalidId`])
//!   and [`id::cut_short`]. What an id takes from the operating system or a
//!   random draw (host name, process id, a drawn tag) is an argument.
//! - [`cells`]: what lockshift writes into cells (reservation marks, the
//!   fence column) and what a cell read back says about its writer
//!   ([`cells::writer_of`], [`cells::is_legacy_evidence`]).
//! - [`algorithm`]: [`algorithm::Algorithm`], the configured
//!   [`algorithm::Mode`], the rollout [`algorithm::Stage`] and how a mode
//!   resolves against a stage ([`algorithm::resolve`]).
//! - [`binding`]: a node's view of the stage ([`binding::View`]) and the
//!   binding of each of its acquisitions ([`binding::Ledger`]): which
//!   acquisitions a new view invalidates, whether a guard may be handed
//!   out, and the oldest version the node still acts on.
//! - [`queue`]: the queue row — what a waiter's queue cell says
//!   ([`queue::queue_value`], [`queue::parse_queue_cell`]), a waiter's
//!   [`queue::mark`], where a waiter stands in a read of the row
//!   ([`queue::place`], [`queue::Position`]), and which waiters look dead
//!   to one that watched their cells stand still ([`queue::Sightings`]).
//! - [`waiter`]: the queue waiter's state machine — what a waiter in the
//!   queue lock's line does next, given what the last store operation
//!   showed ([`waiter::Waiter::on`]) — with how often it looks
//!   ([`waiter::poll_policy`]) and where a read of `main` shows its cell standing
//!   ([`waiter::handoff::standing`]).
//! - [`registry`]: what a node says about itself at every heartbeat
//!   ([`registry::NodeInfo`], [`registry::LeasePromise`]), a registry entry
//!   read back ([`registry::LiveNode`]), and the rows and columns they live
//!   in.
//! - [`census`]: a census of lock cells as data — each cell's owner
//!   ([`census::CellOwner`]) and age ([`census::CensusCell`]), the rows the
//!   database refused ([`census::UnreadableRow`]), what counts as stale
//!   ([`census::Staleness`]) — and the judgements on it (holders, waiters,
//!   legacy activity).
//! - [`rollout`]: the stage as stored ([`rollout::StageRecord`]), its
//!   history, the evidence the guards look at ([`rollout::Evidence`]), the
//!   guards' judgement ([`rollout::evaluate`], given the times it needs as
//!   [`rollout::GuardTimes`]), the verdicts ([`rollout::Guard`],
//!   [`rollout::Verdict`]) and which edges the rollout may take
//!   ([`rollout::edge_refusal`]).
//! - [`remedy`]: what to do about each way a rollout transition can be
//!   refused, and the runbook table built from those texts.
//! - [`clean`]: what `migrate clean` may delete — the judgement on each
//!   cell it found ([`clean::judge`]) and the second look before a delete.
//! - [`datacenter`]: a [`datacenter::Datacenter`]'s name, the
//!   [`datacenter::Route`] a store request takes (which datacenter
//!   coordinates it, at which consistency) and what a store knows of the
//!   cluster's datacenters ([`datacenter::Topology`]).
//! - [`fenced`]: a fenced write's rules — which token wins a cell
//!   ([`fenced::decide`]) and what a round that did not apply leads to
//!   ([`fenced::next_round`]).
//! - [`home`]: which datacenter decides each lock — the home rules
//!   ([`home::Rule`]), their records ([`home::HomeRecord`]), what a row
//!   belongs to ([`home::subject`]), and a process's view of every home
//!   ([`home::Homes`]): where a row's requests go, or why none may be sent.
//! - [`offset`]: a clock against the database's — a sample of the
//!   coordinator's clock ([`offset::OffsetSample`]), the reading kept
//!   from several ([`offset::filter`], [`offset::ClockReading`]), and a
//!   writer's time judged on the database's clock by its reading
//!   ([`offset::to_database_time`], [`offset::age`]).
//! - [`duration`]: durations as an operator writes them and as people read
//!   a measurement ([`duration::fmt_duration`],
//!   [`duration::fmt_duration_rounded`]).
//!
//! # The rules, and where they are kept
//!
//! Every invariant label is defined once, with its proof, in
//! `docs/design.md`; this index says where each is kept, so a change to
//! that code knows which rules it must hold. It defines nothing.
//!
//! | label | the rule, in a line | kept by |
//! |---|---|---|
//! | S1–S3 | last write wins; a tombstone wins a tie; TTLs count from apply time in whole seconds (§1) | [`reconcile`], and every store backend |
//! | S4, S5, S7 | order and limit; read-your-writes (Lemma 1); one row, one write (§1) | the store backends, checked by the store's conformance suite |
//! | S6 | tombstones cost reads (§1); the gc grace rule (§2a) | [`schema`] (each table's gc grace, [`schema::ttl_within_gc_grace`]), the store's tombstone accounting |
//! | L1–L6, L8 | a lease's stamps increase, it never resurrects a cell, tells its holder before the TTL, writes every cell, late writes hold nothing, waiting cells live briefly, a held lease's cells expire together (§5) | the lock crate's lease |
//! | L7 | a slot is reused only once its cells are gone (§2a) | the lock crate's slots |
//! | G1–G3 | the legacy shadow arbitration (§2) | the legacy crate's protocol; the combined lock's first step |
//! | Q1 | hold only on a read after my write showing me alone (§2) | [`waiter::handoff::standing`] |
//! | Q2, Q5 | who has a `main` cell; reservations never wait for each other (§2) | [`waiter`] |
//! | Q3 | waiting TTL, dead waiters skipped early (§2) | [`queue::Sightings`], [`waiter`], the queue lock's line |
//! | Q4 | poll by the measured round trip (§2) | [`waiter::poll_policy`] |
//! | Q6 | the reservation behind the waiter ahead (§3) | [`waiter`], [`waiter::handoff`] |
//! | P1–P3 | shared acquisitions: counting in `main`, one name one kind, arrival order (§3a) | [`sharing::judge_main`], [`sharing::may_try`], [`shared_waiter`] |
//! | P4 | only the queue and combined locks take shared acquisitions (§3a) | the legacy crate's locker (`SharingRefused`); the queue lock's line |
//! | R1 | no stage lets legacy and queue run together; one step at a time (§4) | [`rollout::edge_refusal`], [`rollout::evaluate`], the rollout crate |
//! | R2–R4 | a view expires; every acquisition is bound; hand-out (§4) | [`binding`] |
//! | R5 | every process reported with its oldest binding (§4) | [`binding::Ledger::acting_version`], [`registry::NodeInfo`] |
//! | R6 | the guards read bindings (§4) | [`rollout::evaluate`] |
//! | R7 | a handle or guard keeps its node alive (§4) | the node runtime (the facade) |
//! | R8 | act only on what the rollout's rows already say (§4) | [`binding::View`] (what the last heartbeat that landed declared), the rollout crate's activity promises |
//! | H1 | one home per lock, reached at `LOCAL_QUORUM` there from everywhere (§4a) | [`home::subject`], [`home::Homes::route`], the rollout crate's homes router |
//! | H2 | a home view expires unless its own datacenter confirms it (§4a) | [`home::Homes`] |
//! | H3 | a moved home serves only after the old one's views and leases ran out (§4a) | [`home::move_refusals`], the rollout crate's `move_home` and `move_wait` |
//! | C1 | a process acts as legacy or queue only on a measured clock within the margin; ages judged by measured offsets (§4b) | [`offset`], [`binding::View`] (the clock's part of a confirmed view), the node runtime's measurements |
//! | H4 | a forced move is the operator's explicit act (§4a) | [`home::move_refusals`] |
//!
//! The store crate re-exports the first three, which its `Store` trait
//! speaks in (its `Timestamp`, `schema::MAIN`, …), and the lock crate the
//! ids and [`algorithm::Algorithm`], which its API takes; every other crate
//! imports from here.

pub mod algorithm;
pub mod binding;
pub mod cell;
pub mod cells;
pub mod census;
pub mod clean;
pub mod datacenter;
pub mod duration;
pub mod election;
pub mod fenced;
pub mod home;
pub mod id;
pub mod offset;
pub mod queue;
pub mod reconcile;
pub mod registry;
pub mod remedy;
pub mod rollout;
pub mod schema;
pub mod shared_waiter;
pub mod sharing;
pub mod waiter;
