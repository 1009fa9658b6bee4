//! `DoubleBarrier`: participants enter together once `count` have arrived,
//! and leave together once all have left.

use std::collections::HashSet;
use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::api::kv::{Kv, KvPair};
use crate::api::txn::{KvOp, MAX_TXN_OPS};
use crate::client::{Client, OwedRun};
use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;
use crate::runtime::lease::Session;
use crate::runtime::ride_out::{Judging, RideOut};
use crate::transport::conn::Conn;

use super::poll::{passed, stop, stopped, Poll};

#[path = "double_steps.rs"]
mod steps;
use super::round::{counted, enter_step, leave_step, ready_index, Layout, LeaveStep, ReadyDoc};
use super::round::{Round, Step, View};

/// The largest count: opening a round is one transaction that checks every
/// counted participant key and creates `ready` (`count + 2` operations).
const MAX_COUNT: usize = MAX_TXN_OPS - 2;

/// How many times a participant that gives up tries to take its key back
/// conditionally (see `withdraw`) before deleting it outright.
const WITHDRAW_TRIES: usize = 8;

/// What one look at the listing calls for.
enum Look {
    /// A round counts us: entered.
    Entered(Round),
    /// A write was made: read the listing again now.
    Again,
    /// Wait for the next change.
    Wait,
}

/// What a participant keeps between `enter` and `leave`.
#[derive(Debug)]
struct Entered {
    session: Session,
    key: String,
    round: Round,
}

struct Shared {
    client: Client,
    layout: Layout,
    count: usize,
    explicit_session: Option<Session>,
    entered: Mutex<Option<Entered>>,
    /// Serialises this handle's `enter` and `leave` calls.
    turn: Mutex<()>,
    /// An async `enter` or `leave` of this handle is running (`double_steps`).
    busy: AtomicBool,
}

/// A double barrier on a KV prefix: [`DoubleBarrier::enter`] blocks until
/// `count` participants have entered, and [`DoubleBarrier::leave`] blocks
/// until every participant of the round has left.
///
/// This is etcd's `recipes.DoubleBarrier` and Curator's
/// `DistributedDoubleBarrier` on Consul: a computation that must start on N
/// workers at once, and must not be torn down before all N have finished,
/// wraps its work in `enter` and `leave`.
///
/// Each `enter` registers one participant: a key
/// `<prefix>/participants/<session>-<random>` acquired with the participant's
/// session (the client's default session unless one is given to
/// [`Client::double_barrier_with_session`]), so a participant whose process
/// dies stops counting once Consul ends its session. The participant that
/// sees `count` live participants and no open round opens one: it creates
/// `<prefix>/ready`, listing the participants it counted, in one transaction
/// that also checks each of their keys is unchanged — so a round opens only
/// while `count` participants really are there. Participants beyond `count`
/// wait for the next round. The book's "Barriers" page gives the keys,
/// values and every step, for other clients to interoperate.
///
/// A handle is one participant: enter, then leave, then it may enter again
/// (as a new participant). Several handles of one client (one session) are
/// several participants. Dropping a handle that entered and has not left
/// removes its participant key without waiting.
pub struct DoubleBarrier {
    shared: Arc<Shared>,
}

impl fmt::Debug for DoubleBarrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DoubleBarrier")
            .field("prefix", &self.shared.layout.prefix())
            .field("count", &self.shared.count)
            .field("entered", &self.is_entered())
            .finish()
    }
}

impl Client {
    /// A double barrier of `count` participants on `prefix`, whose
    /// participants use the client's default session.
    ///
    /// Errors: kind `InvalidArgument` for an empty or invalid prefix, or a
    /// count of 0 or above 126 (a round opens in one transaction that checks
    /// every counted participant: `count + 2` operations, so against Consul
    /// before 1.14, which allows 64, a count above 62 fails with kind
    /// `Unsupported` when a round would open); `Closed` for a closed client.
    pub fn double_barrier(&self, prefix: &str, count: usize) -> Result<DoubleBarrier> {
        self.make_double_barrier(prefix, count, None)
    }

    /// Like [`Client::double_barrier`], with participants registered under
    /// `session` instead of the client's default session: for example a
    /// session of behaviour `delete`, so a dead participant's key is deleted
    /// rather than left unlocked, or one bound to a service's health check.
    pub fn double_barrier_with_session(
        &self,
        prefix: &str,
        count: usize,
        session: Session,
    ) -> Result<DoubleBarrier> {
        self.make_double_barrier(prefix, count, Some(session))
    }

    fn make_double_barrier(
        &self,
        prefix: &str,
        count: usize,
        session: Option<Session>,
    ) -> Result<DoubleBarrier> {
        self.core().check_usable()?;
        let p = crate::foundations::keys::nonempty_prefix("prefix", prefix)?.trim_end_matches('/');
        if p.is_empty() {
            return Err(Error::new(ErrorKind::InvalidArgument, "missing prefix"));
        }
        if count == 0 || count > MAX_COUNT {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("double barrier count must be between 1 and {MAX_COUNT} (got {count})"),
            ));
        }
        Ok(DoubleBarrier {
            shared: Arc::new(Shared {
                client: self.clone(),
                layout: Layout::new(p),
                count,
                explicit_session: session,
                entered: Mutex::new(None),
                turn: Mutex::new(()),
                busy: AtomicBool::new(false),
            }),
        })
    }
}

/// A fresh participant id for `session`: the session, then 64 random bits.
fn participant_id(session: &Session) -> String {
    let bits = crate::foundations::random::random_u64();
    format!("{}-{bits:016x}", session.id())
}

impl DoubleBarrier {
    /// The prefix (without a trailing `/`).
    pub fn prefix(&self) -> &str {
        self.shared.layout.prefix()
    }

    /// The number of participants a round waits for.
    pub fn count(&self) -> usize {
        self.shared.count
    }

    /// Whether this handle has entered and not yet left.
    pub fn is_entered(&self) -> bool {
        lock(&self.shared.entered).is_some()
    }

    /// Registers this participant and waits until a round of `count`
    /// participants that counts it opens: `Ok(true)` once entered; `Ok(false)`
    /// when `timeout` passes first (`None` waits for as long as it takes,
    /// `Some(Duration::ZERO)` enters only if this participant completes a
    /// round). A participant arriving while a round it is not part of is
    /// open waits for the next round.
    ///
    /// Giving up leaves nothing behind: on a timeout, the participant key is
    /// removed in a transaction that checks `ready` is unchanged, so either a
    /// round counted it just then (and this returns `Ok(true)`: it entered) or
    /// no round can count it any more. On cancel or error the key is removed
    /// too; should that removal fail (Consul unreachable), the call's error
    /// says so and the removal goes on in the background until Consul
    /// confirms it ([`Client::close`] makes it too).
    ///
    /// Errors: kind `Conflict` when this handle has already entered, when the
    /// prefix's `ready` key holds something else or a round opened with another
    /// count, or when this participant's key was removed by someone else;
    /// `SessionInvalidated` when its session is lost while it waits;
    /// `Cancelled`, `Closed`; a wait in which Consul never answered fails with
    /// kind `Connection` rather than `Ok(false)`.
    pub fn enter(&self, timeout: Option<Duration>, cancel: Option<&CancelToken>) -> Result<bool> {
        let judging = Judging::start();
        let result = self.shared.enter(timeout, cancel);
        judging.verdict(self.shared.client.conn(), "double barrier enter", result)
    }

    /// Leaves: removes this participant's key, then waits until every
    /// participant of the round it entered has left (their keys removed, or
    /// no longer locked by a live session). `Ok(true)` then; `Ok(false)` when
    /// `timeout` passes first. The participant has left either way (its key
    /// is removed first); a timeout only means it did not see the others go.
    /// The last participant to see the round empty deletes `ready`.
    ///
    /// Errors: kind `Conflict` when this handle has not entered; `Cancelled`,
    /// `Closed`; a failed removal of the key (then retried in the background,
    /// as for [`DoubleBarrier::enter`]).
    pub fn leave(&self, timeout: Option<Duration>, cancel: Option<&CancelToken>) -> Result<bool> {
        let judging = Judging::start();
        let result = self.shared.leave(timeout, cancel);
        judging.verdict(self.shared.client.conn(), "double barrier leave", result)
    }
}

impl Shared {
    fn kv(&self) -> Kv<'_> {
        self.client.kv()
    }

    fn session(&self) -> Result<Session> {
        match &self.explicit_session {
            Some(s) if s.is_valid() => Ok(s.clone()),
            Some(s) => Err(Error::new(
                ErrorKind::SessionInvalidated,
                format!("the double barrier's session {} is lost", s.id()),
            )),
            None => self.client.default_session(),
        }
    }

    fn enter(&self, timeout: Option<Duration>, cancel: Option<&CancelToken>) -> Result<bool> {
        let _turn = lock(&self.turn);
        self.client.core().check_usable()?;
        if lock(&self.entered).is_some() {
            return Err(Error::new(
                ErrorKind::Conflict,
                "double barrier already entered (leave first)",
            ));
        }
        if cancel.is_some_and(CancelToken::is_cancelled) {
            return Err(Error::new(
                ErrorKind::Cancelled,
                "double barrier enter cancelled",
            ));
        }
        let session = self.session()?;
        let id = participant_id(&session);
        let key = self.layout.participant(&id);
        let deadline = crate::foundations::scope::deadline_after(timeout);
        let outcome = {
            let _scope = crate::foundations::scope::deadline(
                deadline.filter(|_| timeout != Some(Duration::ZERO)),
            );
            self.enter_steps(&session, &id, &key, deadline, cancel)
        };
        let round = match outcome {
            Ok(Some(round)) => round,
            Err(e) if !(e.kind() == ErrorKind::Timeout && passed(deadline)) => {
                // Whatever went wrong, this participant leaves no key behind.
                let e = stopped(e, "double barrier enter", cancel, Some(&session));
                self.remove(&session, &key);
                return Err(e);
            }
            // Out of time: take the key back, unless a round counted it just then.
            _ => match self.withdraw(&id, &key) {
                Ok(Some(round)) => round,
                Ok(None) => return Ok(false),
                Err(e) => {
                    self.remove_later(&session, &key);
                    return Err(e);
                }
            },
        };
        *lock(&self.entered) = Some(Entered {
            session,
            key,
            round,
        });
        Ok(true)
    }

    /// Registers participant `id` and waits for a round that counts it; `None`
    /// at the deadline.
    fn enter_steps(
        &self,
        session: &Session,
        id: &str,
        key: &str,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<Option<Round>> {
        let stop = stop(cancel, Some(session));
        let conn = self.client.conn();
        let mut ride = RideOut::new(conn, "double barrier enter", deadline, Some(&stop.token))
            .on_session(session);
        self.register(session, key, &mut ride)?;
        let mut poll = Poll::prefix(&self.client, &self.layout.listing());
        // Our own read, after our write: the listing shows our key.
        let mut entries = poll.read(&mut ride)?;
        let mut pruned = HashSet::new();
        loop {
            match self.enter_look(session, id, key, &entries, &mut pruned, &mut ride)? {
                Look::Entered(round) => return Ok(Some(round)),
                Look::Again => {
                    entries = poll.read(&mut ride)?;
                    continue;
                }
                Look::Wait => {}
            }
            match poll.next(&mut ride, deadline, &stop.token)? {
                Some(e) => entries = e,
                None => return Ok(None),
            }
        }
    }

    /// Registers participant `key`: its key acquired with `session`.
    fn register(&self, session: &Session, key: &str, ride: &mut RideOut<'_>) -> Result<()> {
        let registered = ride.run(|| {
            if !session.is_valid() {
                return Err(lost(session));
            }
            self.kv().acquire(key, b"", session.id(), 0)
        })?;
        if !registered {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("could not register double barrier participant {key:?}"),
            ));
        }
        Ok(())
    }

    /// One look of participant `id` at the listing `entries` (read after its
    /// registration), and the write it calls for.
    fn enter_look(
        &self,
        session: &Session,
        id: &str,
        key: &str,
        entries: &[KvPair],
        pruned: &mut HashSet<String>,
        ride: &mut RideOut<'_>,
    ) -> Result<Look> {
        let view = View::of(&self.layout, entries);
        self.prune(&view, pruned);
        match enter_step(&view, &self.layout, self.count, id)? {
            Step::Entered(round) => Ok(Look::Entered(round)),
            Step::Gone if !session.is_valid() => Err(lost(session)),
            Step::Gone => Err(Error::new(
                ErrorKind::Conflict,
                format!("double barrier participant {key:?} was removed by someone else"),
            )),
            Step::ClearStale(index) => {
                ride.run(|| self.kv().delete_cas(&self.layout.ready(), index))?;
                Ok(Look::Again)
            }
            Step::Open(chosen) => {
                let doc = ReadyDoc {
                    count: self.count as u64,
                    participants: chosen
                        .iter()
                        .filter_map(|p| self.layout.id_of(&p.key))
                        .map(str::to_string)
                        .collect(),
                };
                let ready = self.layout.ready();
                let mut ops: Vec<KvOp> = chosen
                    .iter()
                    .map(|p| KvOp::check_index(&p.key, p.modify_index))
                    .collect();
                ops.push(KvOp::check_not_exists(&ready));
                ops.push(KvOp::set(&ready, &doc.encode(), 0));
                // Applied or not (someone changed a counted key, or opened
                // the round first), the next listing tells.
                ride.run(|| applied(&self.client, &ops))?;
                Ok(Look::Again)
            }
            Step::Wait => Ok(Look::Wait),
        }
    }

    /// Deletes participant keys whose session ended (left unlocked by
    /// behaviour `release`), once per call each: check-and-set, best effort.
    fn prune(&self, view: &View<'_>, done: &mut HashSet<String>) {
        for p in &view.dead {
            if done.insert(p.key.clone()) {
                if let Err(e) = self.kv().delete_cas(&p.key, p.modify_index) {
                    log::debug!(
                        "baton double barrier: removing dead participant {:?}: {e}",
                        p.key
                    );
                }
            }
        }
    }

    /// After a timeout: removes participant `key` unless a round counts it,
    /// in one transaction that checks `ready` is as just read, so no round
    /// can count the participant once it is gone. `Some(round)` when a round
    /// counted it (it entered after all). Each request is bounded by the
    /// client's request timeout, not by the call's passed deadline.
    fn withdraw(&self, id: &str, key: &str) -> Result<Option<Round>> {
        let ready = self.layout.ready();
        for _ in 0..WITHDRAW_TRIES {
            let entries = self.kv().list(&self.layout.listing())?;
            let view = View::of(&self.layout, &entries);
            if let Some(round) = counted(&view, id) {
                return Ok(Some(round));
            }
            let Some(mine) = entries.iter().find(|p| p.key == key) else {
                return Ok(None);
            };
            let guard = match ready_index(&view) {
                Some(index) => KvOp::check_index(&ready, index),
                None => KvOp::check_not_exists(&ready),
            };
            if applied(
                &self.client,
                &[guard, KvOp::delete_cas(key, mine.modify_index)],
            )? {
                return Ok(None);
            }
        }
        // `ready` kept changing (rounds of others opening and closing): no
        // round counts us, as the last listing showed; delete outright.
        log::debug!("baton double barrier: withdrawing {key:?} unconditionally");
        self.kv().delete(key)?;
        Ok(None)
    }

    /// Removes participant `key` now, or else in the background.
    fn remove(&self, session: &Session, key: &str) {
        if let Err(e) = self.kv().delete(key) {
            log::debug!("baton double barrier: removing participant {key:?}: {e}");
            self.remove_later(session, key);
        }
    }

    /// Removes participant `key` on the clean-up thread, retried until Consul
    /// confirms it; owed to Consul meanwhile, so [`Client::close`] makes it too.
    fn remove_later(&self, session: &Session, key: &str) {
        if self.client.is_closed() {
            return;
        }
        let owned = key.to_string();
        let run: OwedRun = Arc::new(move |conn: &Conn| Kv { conn }.delete(&owned).map(|_| ()));
        let what = format!("double barrier: removing participant {key:?}");
        self.client
            .owe_work(session, key.to_string(), run, what, ());
    }

    fn leave(&self, timeout: Option<Duration>, cancel: Option<&CancelToken>) -> Result<bool> {
        let _turn = lock(&self.turn);
        self.client.core().check_usable()?;
        let Some(entered) = lock(&self.entered).take() else {
            return Err(Error::new(
                ErrorKind::Conflict,
                "double barrier not entered (enter first)",
            ));
        };
        let deadline = crate::foundations::scope::deadline_after(timeout);
        let stop = stop(cancel, None);
        let mut ride = RideOut::new(
            self.client.conn(),
            "double barrier leave",
            deadline,
            Some(&stop.token),
        );
        // Leave first, whatever the deadline: each try bounded by the request timeout.
        if let Err(e) = ride.run(|| self.kv().delete(&entered.key)) {
            self.remove_later(&entered.session, &entered.key);
            return Err(stopped(e, "double barrier leave", cancel, None));
        }
        let _scope = crate::foundations::scope::deadline(
            deadline.filter(|_| timeout != Some(Duration::ZERO)),
        );
        let mut poll = Poll::prefix(&self.client, &self.layout.listing());
        let waited: Result<bool> = (|| {
            let mut entries = poll.read(&mut ride)?;
            loop {
                if self.leave_look(&entries, &entered.round, &mut ride)? {
                    return Ok(true);
                }
                match poll.next(&mut ride, deadline, &stop.token)? {
                    Some(e) => entries = e,
                    None => return Ok(false),
                }
            }
        })();
        match waited {
            Err(e) if e.kind() == ErrorKind::Timeout && passed(deadline) => Ok(false),
            Err(e) => Err(stopped(e, "double barrier leave", cancel, None)),
            ok => ok,
        }
    }
}

impl Shared {
    /// One look of a participant that left at the listing `entries`: whether
    /// every participant of `round` has left (closing the round if it is the
    /// one to see it empty).
    fn leave_look(
        &self,
        entries: &[KvPair],
        round: &Round,
        ride: &mut RideOut<'_>,
    ) -> Result<bool> {
        let view = View::of(&self.layout, entries);
        match leave_step(&view, &self.layout, round) {
            LeaveStep::Done => Ok(true),
            LeaveStep::Close(index) => {
                // Not applied: someone else closed it first.
                ride.run(|| self.kv().delete_cas(&self.layout.ready(), index))?;
                Ok(true)
            }
            LeaveStep::Wait => Ok(false),
        }
    }
}

/// Runs `ops`; `false` when Consul refused the transaction (a check failed).
fn applied(client: &Client, ops: &[KvOp]) -> Result<bool> {
    match client.txn(ops) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == ErrorKind::Conflict && !e.txn_errors().is_empty() => Ok(false),
        Err(e) => Err(e),
    }
}

fn lost(session: &Session) -> Error {
    Error::new(
        ErrorKind::SessionInvalidated,
        format!(
            "session {} was lost while entering the double barrier",
            session.id()
        ),
    )
}

impl Drop for DoubleBarrier {
    fn drop(&mut self) {
        let sh = &self.shared;
        let Some(entered) = lock(&sh.entered).take() else {
            return;
        };
        if !sh.client.is_closed() {
            sh.remove(&entered.session, &entered.key);
        }
    }
}
