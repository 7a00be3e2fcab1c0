//! The referee of an election: who acted as leader when, told by the
//! leaders themselves, and checked against the exclusion [`Oracle`] the
//! lock simulations use — never against what the library says.
//!
//! A *term* runs from the moment a campaign returned leadership to the
//! moment its leader stopped acting as one: it decided to resign, or a
//! look at [`is_lost`](lockshift::Leadership::is_lost) said the lease was
//! gone. A leader *acts* only in between looks that said it still leads,
//! so a leader paused past its lease (or cut off from the store) acts
//! until it stops looking, not until its lease ran out: while it is
//! paused it does nothing, and if on resuming it is told it still leads,
//! it acts again — inside the critical section of the election, where the
//! oracle sees any other leader acting at the same time.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use lockshift::{Algorithm, Leader, Stage};
use tokio::time::Instant;

use crate::sim::{Oracle, Violation};

/// How a term ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Its leader resigned.
    Resigned,
    /// Its leader, acting, looked and was told the lease was lost (cut
    /// off from the store, or revoked).
    Lost,
    /// Its leader was paused past its lease and was told on resuming.
    LostInPause,
    /// The run ended while it led (the leader resigned then).
    Stopped,
}

/// One leadership, as its leader lived it.
#[derive(Clone, Debug)]
pub struct Term {
    /// The leader as the campaign returned it (and as the last
    /// `proclaim` replaced it).
    pub leader: Leader,
    /// The algorithm that took the election's lock.
    pub algorithm: Algorithm,
    /// The stage the operator had set when the term began.
    pub stage: Stage,
    /// When the campaign returned.
    pub began: Instant,
    /// When its leader stopped acting as one, and why.
    pub ended: Option<(Instant, Ended)>,
    /// Whether its leader is acting (not paused) right now.
    pub acting: bool,
    /// What else happened in it, and when: proclaims, faults.
    pub notes: Vec<(Instant, String)>,
    /// The name the oracle knows it by.
    who: String,
}

#[derive(Debug, Default)]
struct Log {
    terms: Vec<Term>,
    /// What went wrong that is not an overlap (the oracle keeps those).
    problems: Vec<String>,
    /// The last change of who leads (or of what it proclaims), by any
    /// event the record can follow.
    last_change: Option<Instant>,
    /// Until when a record may outlive the leadership that wrote it (a
    /// lost lease, a failed release: the record's TTL runs out instead;
    /// a late landing: its TTL from then). Only until the next term
    /// begins: its leader took a token above every such record's, and a
    /// reader names no record below the fencing cell (E1).
    lingers_until: Option<Instant>,
}

impl Log {
    /// Whether a leader with a greater token than term `term`'s has
    /// begun: it took its token after every write of `term`'s record was
    /// sent, so no reader names that record again (E1).
    fn succeeded(&self, term: usize) -> bool {
        let token = self.terms[term].leader.token;
        self.terms.iter().any(|t| t.leader.token > token)
    }
}

/// The referee of one election.
#[derive(Debug)]
pub struct Referee {
    election: String,
    /// How long a record may outlive its leadership: the lease TTL plus the
    /// rounding of whole-second TTLs, plus slack.
    linger: Duration,
    oracle: Oracle,
    log: Mutex<Log>,
}

impl Referee {
    /// A referee of `election`, whose records live at most `linger` past
    /// the leadership that wrote them.
    pub fn new(election: &str, linger: Duration) -> Self {
        Referee {
            election: election.to_string(),
            linger,
            oracle: Oracle::default(),
            log: Mutex::default(),
        }
    }

    fn log(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A campaign returned `leader`, its lock taken by `algorithm` at
    /// `stage`: a term begins and its leader acts. Its token must be
    /// greater than every earlier leader's. Returns the term's number.
    pub fn begin(&self, leader: &Leader, algorithm: Algorithm, stage: Stage) -> usize {
        let now = Instant::now();
        let who = format!("{} (token {})", leader.node, leader.token);
        let mut log = self.log();
        if let Some(before) = log.terms.iter().max_by_key(|t| t.leader.token)
            && before.leader.token >= leader.token
        {
            let problem = format!(
                "{who} began leading after {} (token {}): tokens of successive leaders must increase",
                before.leader.node, before.leader.token
            );
            log.problems.push(problem);
        }
        self.oracle.enter(&self.election, &who);
        // E1: every record written before is below this leader's token.
        log.lingers_until = None;
        log.terms.push(Term {
            leader: leader.clone(),
            algorithm,
            stage,
            began: now,
            ended: None,
            acting: true,
            notes: Vec::new(),
            who,
        });
        log.last_change = Some(now);
        log.terms.len() - 1
    }

    /// Term `term`'s leader proclaimed a new value: the record now says
    /// `leader`, with the same node and token.
    pub fn proclaimed(&self, term: usize, leader: &Leader) {
        let mut log = self.log();
        let was = &log.terms[term].leader;
        if (&was.node, was.token) != (&leader.node, leader.token) {
            let problem = format!(
                "{} (token {}) proclaimed and got back {} (token {})",
                was.node, was.token, leader.node, leader.token
            );
            log.problems.push(problem);
        }
        log.terms[term].leader = leader.clone();
        log.last_change = Some(Instant::now());
    }

    /// Notes what happened in term `term` now (for the timeline).
    pub fn note(&self, term: usize, what: String) {
        self.log().terms[term].notes.push((Instant::now(), what));
    }

    /// Term `term`'s leader stops acting for a while (it is paused).
    pub fn pause(&self, term: usize) {
        let mut log = self.log();
        let t = &mut log.terms[term];
        if t.acting {
            t.acting = false;
            self.oracle.exit(&self.election, &t.who);
        }
    }

    /// Term `term`'s leader acts again (it resumed and was told it still
    /// leads): if another leader acts meanwhile, the oracle sees both.
    pub fn resume(&self, term: usize) {
        let mut log = self.log();
        let t = &mut log.terms[term];
        if !t.acting {
            t.acting = true;
            self.oracle.enter(&self.election, &t.who);
        }
    }

    /// Term `term` ends: its leader stops acting as one. With `lingers`,
    /// its record may outlive it (until its TTL runs out) — unless a later
    /// leader has begun (a leader paused past its lease ends after its
    /// successor began), whose token hides it (E1).
    pub fn end(&self, term: usize, how: Ended, lingers: bool) {
        let now = Instant::now();
        let mut log = self.log();
        let succeeded = log.succeeded(term);
        let t = &mut log.terms[term];
        if t.acting {
            t.acting = false;
            self.oracle.exit(&self.election, &t.who);
        }
        if t.ended.is_none() {
            t.ended = Some((now, how));
        }
        log.last_change = Some(now);
        if lingers && !succeeded {
            self.lingers(&mut log, now);
        }
    }

    /// Term `term`'s leader let go of the lock after its term ended: who
    /// leads may have changed now (its release's delete landed). With
    /// `lingers` (the release failed), its record may be left to its TTL
    /// — unless a later leader has begun, whose token hides it (E1).
    pub fn let_go(&self, term: usize, lingers: bool) {
        let now = Instant::now();
        let mut log = self.log();
        let succeeded = log.succeeded(term);
        log.last_change = Some(now);
        if lingers && !succeeded {
            self.lingers(&mut log, now);
        }
    }

    /// Who leads may have changed now without a term beginning or ending
    /// (a campaign that could not record its leadership let go). With
    /// `lingers`, a record may be left to its TTL.
    pub fn touched(&self, lingers: bool) {
        let now = Instant::now();
        let mut log = self.log();
        log.last_change = Some(now);
        if lingers {
            self.lingers(&mut log, now);
        }
    }

    fn lingers(&self, log: &mut Log, now: Instant) {
        let until = now + self.linger;
        log.lingers_until = Some(log.lingers_until.map_or(until, |u| u.max(until)));
    }

    /// A problem found by a check outside the referee (a convergence
    /// check, a leader not told it lost its lease), kept with the rest.
    pub fn problem(&self, problem: String) {
        self.log().problems.push(problem);
    }

    /// When the terms last changed (a term begun, ended or let go, a
    /// value proclaimed): a checkpoint compares only while it stays put.
    pub fn last_change(&self) -> Option<Instant> {
        self.log().last_change
    }

    /// Whether every record can be trusted to match the terms: no change
    /// for `quiet`, and no record outliving its leadership any more.
    pub fn settled_for(&self, quiet: Duration) -> bool {
        let now = Instant::now();
        let log = self.log();
        log.last_change.is_none_or(|t| now >= t + quiet)
            && log.lingers_until.is_none_or(|t| now >= t)
    }

    /// The current leader by the terms: the one whose term has not ended
    /// (`Err` when more than one has not — only a paused leader may
    /// outlive its lease unknowingly, so ask while none is).
    ///
    /// # Errors
    /// Every term still open, when there are several.
    pub fn current(&self) -> Result<Option<Leader>, Vec<Leader>> {
        let log = self.log();
        let open: Vec<Leader> = log
            .terms
            .iter()
            .filter(|t| t.ended.is_none())
            .map(|t| t.leader.clone())
            .collect();
        match open.len() {
            0 => Ok(None),
            1 => Ok(open.into_iter().next()),
            _ => Err(open),
        }
    }

    /// Every term so far.
    pub fn terms(&self) -> Vec<Term> {
        self.log().terms.clone()
    }

    /// Two leaders acting at once, as the oracle saw them.
    pub fn overlaps(&self) -> Vec<Violation> {
        self.oracle.violations()
    }

    /// Every other problem.
    pub fn problems(&self) -> Vec<String> {
        self.log().problems.clone()
    }
}
