//! Leader election on one key (Consul's leader-election recipe), built on [`Lock`].
//!
//! Candidates campaign by acquiring the key with their value (e.g. their
//! address); the leader is whoever's session holds it, and everyone else reads
//! the key to find it. Because the key is an ordinary [`Lock`] key, Go services
//! using `api.Lock` on it take part in the same election.

use std::fmt;
use std::time::{Duration, Instant};

use crossbeam_channel::select;

use crate::api::kv::KvPair;
use crate::client::Client;
use crate::foundations::cancel::CancelToken;
use crate::foundations::compat::through_f64;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::recipes::fence::Sequencer;
use crate::recipes::holding::{hold_lifecycle, Hold};
use crate::recipes::lock::{check_key, Lock, LockLost, LockOptions, LOCK_FLAG_VALUE};
use crate::runtime::keyhub::{Hook, KeySub};
use crate::runtime::lease::{CallbackId, Session};
use crate::transport::http::{Consistency, QueryOptions};

/// Options of an [`Election`].
#[derive(Debug, Clone, Default)]
pub struct ElectionOptions {
    session: Option<Session>,
    flags: Option<u64>,
}

impl ElectionOptions {
    /// Default options: campaign with the client's default session.
    pub fn new() -> ElectionOptions {
        ElectionOptions::default()
    }

    /// Campaign with this session instead of the client's default one.
    pub fn session(mut self, session: Session) -> Self {
        self.session = Some(session);
        self
    }

    /// The flags the leader key is written with (see [`LockOptions::flags`]):
    /// Go's `api.Lock` flag by default; `0` to campaign alongside clients that
    /// follow Consul's leader-election guide (`?acquire=` with flags 0: curl,
    /// py-consul, most scripts). Observing reads any leader key either way.
    pub fn flags(mut self, flags: u64) -> Self {
        self.flags = Some(flags);
        self
    }
}

/// The current leader as read from the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// The value the leader campaigned (or last proclaimed) with.
    pub value: Vec<u8>,
    /// The leader's session.
    pub session: String,
    /// The key's LockIndex: changes with every new leader, not with `proclaim`.
    pub lock_index: u64,
    /// The key's ModifyIndex (monotonic).
    pub token: u64,
}

/// One observation of an election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderEvent {
    /// Someone leads.
    Leader(Leader),
    /// Nobody holds the key (or it does not exist).
    NoLeader,
}

/// Reads the leader from a key entry: whoever's session holds the key, whatever
/// the flags it was written with (Go's `api.Lock` flag, or flags 0 as Consul's
/// leader-election guide writes it), as the guide's "discover the leader" step does.
fn leader_of(entry: Option<&KvPair>) -> Option<Leader> {
    let p = entry?;
    p.session.as_ref().map(|s| Leader {
        value: p.value.clone().unwrap_or_default(),
        session: s.clone(),
        lock_index: p.lock_index,
        token: p.modify_index,
    })
}

/// A participant in the election on one key.
pub struct Election {
    lock: Lock,
}

impl Election {
    /// Another handle on this election whose drop resigns nothing (see
    /// [`Lock::view`]).
    pub(crate) fn view(&self) -> Election {
        Election {
            lock: self.lock.view(),
        }
    }
}

impl fmt::Debug for Election {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Election")
            .field("key", &self.lock.key())
            .field("leader", &self.lock.is_held())
            .finish()
    }
}

impl Client {
    /// An election on `key`, campaigning with the client's default session.
    pub fn election(&self, key: &str) -> Result<Election> {
        self.election_with(key, ElectionOptions::new())
    }

    /// An election on `key` with options.
    pub fn election_with(&self, key: &str, options: ElectionOptions) -> Result<Election> {
        let mut lo = LockOptions::new();
        if let Some(s) = options.session {
            lo = lo.session(s);
        }
        if let Some(f) = options.flags {
            lo = lo.flags(f);
        }
        let lock = self.lock_with(key, lo)?;
        // Its holdings and campaigns count as the election's.
        lock.count_as(crate::foundations::metrics::Recipe::Election);
        Ok(Election { lock })
    }

    /// Reads the current leader of the election on `key` (one consistent read):
    /// whoever's session holds the key, whatever flags it was written with (Go's
    /// `api.Lock` flag, or 0 as Consul's leader-election guide writes it).
    pub fn leader(&self, key: &str) -> Result<Option<Leader>> {
        let key = check_key(key)?;
        let opts = QueryOptions::default().with_consistency(Consistency::Consistent);
        let (entry, _) = self.kv().get_with(&key, &opts)?;
        Ok(leader_of(entry.as_ref()))
    }

    /// Follows the election on `key`: see [`Election::observe`].
    pub fn observe_leader(&self, key: &str) -> Result<Observer> {
        self.observe_leader_hooked(key, None)
    }

    /// [`Client::observe_leader`], calling `hook` on the hub thread whenever
    /// the key changes (the async API's stream wakes its task with it).
    pub(crate) fn observe_leader_hooked(&self, key: &str, hook: Option<Hook>) -> Result<Observer> {
        let key = check_key(key)?;
        let sub = KeySub::new(&self.core().conn, &self.core().keyhub, &key, None, hook)?;
        Ok(Observer {
            client: self.clone(),
            key,
            sub,
            last: None,
            newest_term: 0,
            each_term: false,
        })
    }
}

impl Election {
    /// The election's key.
    pub fn key(&self) -> &str {
        self.lock.key()
    }

    /// The underlying lock.
    pub fn lock(&self) -> &Lock {
        &self.lock
    }

    /// Campaigns with `value` until elected (`Ok(true)`), `timeout` passes
    /// (`Ok(false)`), or `cancel` fires (kind `Cancelled`). See [`Lock::acquire`].
    pub fn campaign(
        &self,
        value: &[u8],
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<bool> {
        self.lock.set_value(value);
        self.campaign_as_set(timeout, cancel)
    }

    /// [`Election::campaign`] with the value already set.
    fn campaign_as_set(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<bool> {
        let settling =
            crate::recipes::holding::Settling::start(crate::foundations::metrics::Recipe::Election);
        let result = self.lock.acquire_unjudged(timeout, cancel);
        let core = self.lock.shared_client().core();
        settling.settle(core, "campaign", (timeout, cancel), result, || {
            self.lock.abandon()
        })
    }

    /// Steps down (releases the key, no lock-delay). `Ok(false)` if not leader.
    pub fn resign(&self) -> Result<bool> {
        self.lock.release()
    }

    /// Why [`Election::resign`] found nothing to give up, in words: never
    /// elected or already resigned, the client closed, or leadership lost and
    /// why (the text the bindings' not-held errors carry).
    pub fn not_held_message(&self) -> String {
        crate::runtime::lease::not_held_message(
            &format!("the leadership of election {:?}", self.lock.key()),
            self.lock.last_lost().map(|l| (l.name(), l.to_string())),
        )
    }

    /// Replaces the leader's value while leading, keeping the LockIndex (so
    /// sequencers stay valid). Kind `Conflict` (`Lock not held`) if not leader;
    /// if the key turned out to be no longer ours, leadership is marked lost.
    pub fn proclaim(&self, value: &[u8]) -> Result<()> {
        if !self.lock.is_held() {
            return Err(Error::new(ErrorKind::Conflict, "Lock not held"));
        }
        self.lock.update_value(value).map(|_| ())
    }

    /// Whether this participant leads (see [`Lock::is_held`]).
    pub fn is_leader(&self) -> bool {
        self.lock.is_held()
    }

    /// The current leader (one consistent read).
    pub fn leader(&self) -> Result<Option<Leader>> {
        self.lock.shared_client().leader(self.lock.key())
    }

    /// A stream of leader changes: the first [`Observer::next`] returns the
    /// current state, later ones only changes (a new leader, a new value, or no
    /// leader). Observers share the client's key hub; they never step back to an
    /// older state, even after reconnecting.
    pub fn observe(&self) -> Result<Observer> {
        self.lock.shared_client().observe_leader(self.lock.key())
    }

    /// The fencing sequencer while leading.
    pub fn sequencer(&self) -> Option<Sequencer> {
        self.lock.sequencer()
    }

    /// Registers a callback run when leadership is lost (see [`Lock::on_lost`]).
    pub fn on_lost(&self, callback: impl Fn(LockLost) + Send + Sync + 'static) -> CallbackId {
        self.lock.on_lost(callback)
    }

    /// Removes a callback registered with [`Election::on_lost`].
    pub fn remove_callback(&self, id: CallbackId) {
        self.lock.remove_callback(id)
    }

    /// Blocks until leadership ends (see [`Lock::wait_lost`]).
    pub fn wait_lost(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<LockLost> {
        self.lock.wait_lost(timeout, cancel)
    }

    /// Why the last leadership ended (see [`Lock::last_lost`]).
    pub fn last_lost(&self) -> Option<LockLost> {
        self.lock.last_lost()
    }

    /// A token cancelled when leadership ends (see [`Lock::cancel_token`]).
    pub fn cancel_token(&self) -> CancelToken {
        self.lock.cancel_token()
    }
}

/// An election as a [`Hold`]: `acquire` campaigns with the value last set
/// (by [`Election::campaign`], [`Election::proclaim`] or the options),
/// `release` resigns.
impl Hold for Election {
    hold_lifecycle!(LockLost);
    fn acquire(&self, timeout: Option<Duration>, cancel: Option<&CancelToken>) -> Result<bool> {
        self.campaign_as_set(timeout, cancel)
    }
    fn release(&self) -> Result<bool> {
        self.resign()
    }
    fn is_held(&self) -> bool {
        self.is_leader()
    }
    fn sequencer(&self) -> Option<Sequencer> {
        Election::sequencer(self)
    }
    fn describe(&self) -> String {
        format!("election {:?}", self.lock.key())
    }
}

/// Follows an election: see [`Election::observe`].
pub struct Observer {
    client: Client,
    key: String,
    sub: KeySub,
    last: Option<LeaderEvent>,
    /// The highest LockIndex of the key seen so far: the latest term anyone began.
    newest_term: u64,
    /// Report a state again when a newer term began and ended between two looks (a leader
    /// task's hand-over wait, [`Observer::taken_over_since`]); users' observers do not.
    each_term: bool,
}

impl fmt::Debug for Observer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observer")
            .field("key", &self.key)
            .field("last", &self.last)
            .finish()
    }
}

impl Observer {
    /// The next state not returned yet, if the hub has one (never blocks).
    pub(crate) fn take_event(&mut self) -> Result<Option<LeaderEvent>> {
        self.client.core().check_usable()?;
        while let Some(v) = self.sub.take_new() {
            let term = v.entry.as_ref().map_or(0, |p| p.lock_index);
            let newer_term = term > self.newest_term;
            self.newest_term = self.newest_term.max(term);
            if v.entry
                .as_ref()
                .is_some_and(|p| p.session.is_some() && p.flags == through_f64(LOCK_FLAG_VALUE))
            {
                // A lock txn on a Consul before 1.6.2 stored a rounded flag, and its
                // writer rewrites it at once: wait for that entry, whose index the
                // leader's sequencer carries (or for the key's release, if it died).
                continue;
            }
            let event = match leader_of(v.entry.as_ref()) {
                Some(l) => LeaderEvent::Leader(l),
                None => LeaderEvent::NoLeader,
            };
            if self.last.as_ref() != Some(&event) || (self.each_term && newer_term) {
                self.last = Some(event.clone());
                return Ok(Some(event));
            }
        }
        Ok(None)
    }

    /// The key observed.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Reports a state again when a newer term began since the last look, even if the key
    /// looks the same (free, then free again after a term too short to be seen held).
    pub(crate) fn reporting_each_term(mut self) -> Observer {
        self.each_term = true;
        self
    }

    /// Whether someone took the key after the term with LockIndex `term` (whether or not
    /// they still hold it), by the newest state seen. A leader task's hand-over waits for
    /// this, rather than for a leader of another session: right after a short term the
    /// client's view may still show the leader from before it, and a later term may begin
    /// and end between two looks.
    pub(crate) fn taken_over_since(&self, term: u64) -> bool {
        self.newest_term > term
    }

    /// The client it observes through.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// Blocks until the election's state differs from the last one returned (the
    /// first call returns the current state). The leader is whoever's session
    /// holds the key, whatever flags it was written with. Errors: `Timeout` when
    /// nothing changed by `timeout`, `Cancelled`, `Closed`.
    pub fn next(
        &mut self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<LeaderEvent> {
        let end = crate::foundations::scope::deadline_after(timeout);
        let never = crossbeam_channel::never();
        let cancel_rx = cancel.map_or_else(|| never.clone(), |c| c.receiver());
        let closed = self.client.core().closing.receiver();
        loop {
            if let Some(event) = self.take_event()? {
                return Ok(event);
            }
            if cancel.is_some_and(|c| c.is_cancelled()) {
                return Err(Error::new(ErrorKind::Cancelled, "observe cancelled"));
            }
            if end.is_some_and(|e| e <= Instant::now()) {
                let why = match self.sub.last_error() {
                    Some(e) => {
                        format!("no leader change before the timeout (last poll error: {e})")
                    }
                    None => "no leader change before the timeout".to_string(),
                };
                return Err(Error::new(ErrorKind::Timeout, why));
            }
            let tick = end.map_or_else(crossbeam_channel::never, crossbeam_channel::at);
            select! {
                recv(self.sub.changes()) -> _ => {}
                recv(cancel_rx) -> _ => {}
                recv(closed) -> _ => {}
                recv(tick) -> _ => {}
            }
        }
    }
}
