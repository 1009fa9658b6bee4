//! `Barrier`: one key whose presence holds every waiter back.

use std::time::Duration;

use crate::api::kv::{KvPair, WriteOptions};
use crate::api::txn::KvOp;
use crate::client::Client;
use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::runtime::lease::Session;
use crate::runtime::ride_out::{Judging, RideOut};

use super::poll::{passed, stop, stopped, Poll};

/// How many times a write that lost a race on the barrier key (the key changed
/// between our read and our check-and-set) is tried again before giving up
/// with a `Conflict`: each retry means someone else changed the key meanwhile.
const RACE_RETRIES: usize = 32;

/// A barrier on one KV key: while the key is there, [`Barrier::wait`] blocks;
/// once it is removed, every waiter goes on.
///
/// This is etcd's `recipes.Barrier` and Curator's `DistributedBarrier` on
/// Consul: one process raises the barrier ([`Barrier::hold`]) before the
/// others start waiting on it, and lowers it ([`Barrier::release`]) when they
/// may proceed, for example once a shared resource is ready. Any process may
/// lower it: the key carries no owner.
///
/// The barrier key is written with flags `0` and an empty value. By default it
/// is a plain key, not bound to a session: it stays up until someone releases
/// it, even if the process that raised it dies (a barrier whose holder died
/// keeps everyone waiting, which is what a gate that must be opened on purpose
/// wants). [`Barrier::hold_with_session`] binds it to a session instead, so it
/// falls when the session ends. See the book's "Barriers" page for the
/// exact rule another client must follow.
///
/// A `Barrier` is a handle on the key: it holds no state of its own and can
/// be cloned and shared between threads.
#[derive(Debug, Clone)]
pub struct Barrier {
    client: Client,
    key: String,
}

impl Client {
    /// A barrier on `key` (nothing is written until [`Barrier::hold`]).
    /// Errors: kind `InvalidArgument` for a key Consul cannot take (see
    /// [`Client::kv`]'s key rule), `Closed` for a closed client.
    pub fn barrier(&self, key: &str) -> Result<Barrier> {
        self.core().check_usable()?;
        let key = crate::foundations::keys::key(key)?.to_string();
        Ok(Barrier {
            client: self.clone(),
            key,
        })
    }
}

/// Whether a barrier key raises the barrier: it does unless a session locked
/// it once and no longer does (its holder's session ended and Consul, by the
/// session's behaviour `release`, left the key unlocked). A key that was never
/// locked (LockIndex 0) raises the barrier with no session.
pub(super) fn raised(entry: &KvPair) -> bool {
    entry.session.is_some() || entry.lock_index == 0
}

impl Barrier {
    /// The barrier's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Raises the barrier: creates its key, unless it exists (a check-and-set
    /// with index 0, `?cas=0`). Returns `Ok(true)` when this call raised it,
    /// `Ok(false)` when it was already up (raised by anyone; the key is left as
    /// it was). A key left over from a session-bound hold whose session ended
    /// does not count as up: it is replaced.
    ///
    /// The key is not bound to a session: the barrier stays up until someone
    /// calls [`Barrier::release`], whatever happens to this process.
    pub fn hold(&self) -> Result<bool> {
        let kv = self.client.kv();
        let create = WriteOptions {
            cas: Some(0),
            ..Default::default()
        };
        for _ in 0..RACE_RETRIES {
            if kv.put_with(&self.key, b"", &create)? {
                return Ok(true);
            }
            if !self.clear_fallen()? {
                return Ok(false);
            }
        }
        Err(self.raced("raise"))
    }

    /// Raises the barrier bound to `session`: the key is created locked by the
    /// session (a transaction: `check-not-exists`, then `lock`), so it falls
    /// when the session ends — destroyed, expired, or invalidated by a failed
    /// health check — and waiters go on, as they would after a release. Use it
    /// when a crashed holder must not keep everyone waiting. Returns `Ok(true)`
    /// when this call raised it, `Ok(false)` when it was already up.
    ///
    /// The session's behaviour decides what Consul does with the key when the
    /// session ends: `delete` removes it; `release` (Consul's default, and the
    /// client's default session) leaves it unlocked, which every baton process
    /// reads as "not raised" (see the book for the rule). Consul's lock-delay
    /// applies to the key name after such an end: for that long (the ended
    /// session's LockDelay, 15 s by default) no session can lock the key, and
    /// this call fails with kind `Conflict` naming the lock-delay, while
    /// [`Barrier::hold`] (no session) still works.
    ///
    /// Errors: kind `SessionInvalidated` when `session` is no longer valid.
    pub fn hold_with_session(&self, session: &Session) -> Result<bool> {
        let ops = [
            KvOp::check_not_exists(&self.key),
            KvOp::lock(&self.key, b"", 0, session.id()),
        ];
        for _ in 0..RACE_RETRIES {
            if !session.is_valid() {
                return Err(Error::new(
                    ErrorKind::SessionInvalidated,
                    format!(
                        "session {} is lost: it cannot hold barrier {:?}",
                        session.id(),
                        self.key
                    ),
                ));
            }
            match self.client.txn(&ops) {
                Ok(_) => return Ok(true),
                Err(e) if e.kind() == ErrorKind::Conflict && !e.txn_errors().is_empty() => {
                    // Consul reports every failing op: a failed check (the key
                    // exists) says all; the lock failing alone is lock-delay or the session.
                    let exists = e.txn_errors().iter().any(|t| t.op_index == 0);
                    if let Some(lock) = e.txn_errors().iter().find(|t| t.op_index == 1 && !exists) {
                        return Err(Error::new(
                            ErrorKind::Conflict,
                            format!(
                                "cannot raise barrier {:?} with session {}: {}",
                                self.key,
                                session.id(),
                                lock.what
                            ),
                        ));
                    }
                    // The check failed: the key exists.
                    if !self.clear_fallen()? {
                        return Ok(false);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(self.raced("raise"))
    }

    /// After a create found the key there: deletes it if it is a fallen
    /// session-bound hold (check-and-set on its ModifyIndex) and says whether
    /// the create is worth trying again (`false`: the barrier is up).
    fn clear_fallen(&self) -> Result<bool> {
        let kv = self.client.kv();
        match kv.get(&self.key)? {
            // Released between our create and our read: try again.
            None => Ok(true),
            Some(p) if raised(&p) => Ok(false),
            Some(p) => {
                kv.delete_cas(&self.key, p.modify_index)?;
                Ok(true)
            }
        }
    }

    /// Lowers the barrier: deletes its key (check-and-set on the ModifyIndex
    /// read just before, so a barrier raised again meanwhile is not taken
    /// down unseen). Returns `Ok(true)` when this call lowered a raised
    /// barrier, `Ok(false)` when it was not up (no key, or a fallen
    /// session-bound hold, which is removed). Any process may release a
    /// barrier, whoever raised it.
    pub fn release(&self) -> Result<bool> {
        let kv = self.client.kv();
        for _ in 0..RACE_RETRIES {
            let Some(p) = kv.get(&self.key)? else {
                return Ok(false);
            };
            if kv.delete_cas(&self.key, p.modify_index)? {
                return Ok(raised(&p));
            }
        }
        Err(self.raced("lower"))
    }

    /// Whether the barrier is up now (one read of the key).
    pub fn is_held(&self) -> Result<bool> {
        Ok(self.client.kv().get(&self.key)?.is_some_and(|p| raised(&p)))
    }

    /// Blocks until the barrier is down: `Ok(true)` at once if it is not up,
    /// else as soon as Consul reports it released (or fallen, for a
    /// session-bound hold). `Ok(false)` when `timeout` passes first (`None`
    /// waits for as long as it takes, `Some(Duration::ZERO)` looks once).
    ///
    /// The wait is one blocking query at a time on the key, starting from a
    /// read made by this call, so a barrier raised before the call is never
    /// missed. A barrier lowered and raised again within one blocking query
    /// may not release the waiter: Consul reports the state at the time of its
    /// answer, as for any watcher of the key.
    ///
    /// Errors: kind `Cancelled` when `cancel` fires, `Closed` when the client
    /// closes; a wait in which Consul never answered fails with kind
    /// `Connection` rather than `Ok(false)`.
    pub fn wait(&self, timeout: Option<Duration>, cancel: Option<&CancelToken>) -> Result<bool> {
        let judging = Judging::start();
        let result = self.wait_unjudged(timeout, cancel);
        judging.verdict(self.client.conn(), "barrier wait", result)
    }

    fn wait_unjudged(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<bool> {
        self.client.core().check_usable()?;
        if cancel.is_some_and(CancelToken::is_cancelled) {
            return Err(Error::new(ErrorKind::Cancelled, "barrier wait cancelled"));
        }
        let deadline = crate::foundations::scope::deadline_after(timeout);
        let stop = stop(cancel, None);
        let _scope = crate::foundations::scope::deadline(
            deadline.filter(|_| timeout != Some(Duration::ZERO)),
        );
        let mut ride = RideOut::new(
            self.client.conn(),
            "barrier wait",
            deadline,
            Some(&stop.token),
        );
        let mut poll = Poll::key(&self.client, &self.key);
        let waited: Result<bool> = (|| {
            let mut entries = poll.read(&mut ride)?;
            loop {
                if !entries.first().is_some_and(raised) {
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
            Err(e) => Err(stopped(e, "barrier wait", cancel, None)),
            ok => ok,
        }
    }

    fn raced(&self, what: &str) -> Error {
        Error::new(
            ErrorKind::Conflict,
            format!(
                "could not {what} barrier {:?}: the key kept changing under us",
                self.key
            ),
        )
    }
}

/// A barrier's wait between its looks, for the async layer: each step reads the key
/// once; a change of the key (the client's key hub) calls for the next.
pub(crate) struct WaitSteps {
    barrier: Barrier,
    /// What bounds each look's request: the call's deadline, unless it looks once.
    bound: Option<std::time::Instant>,
}

impl Barrier {
    /// The steps of [`Barrier::wait`] bounded by `timeout`.
    pub(crate) fn wait_steps(&self, timeout: Option<Duration>) -> WaitSteps {
        let deadline = crate::foundations::scope::deadline_after(timeout);
        WaitSteps {
            barrier: self.clone(),
            bound: deadline.filter(|_| timeout != Some(Duration::ZERO)),
        }
    }

    /// The client it talks through.
    pub(crate) fn shared_client(&self) -> &Client {
        &self.client
    }
}

impl crate::runtime::step_wait::StepWait for WaitSteps {
    type Out = bool;

    fn step(&mut self, _cancel: &CancelToken) -> Result<Option<bool>> {
        let _scope = crate::foundations::scope::deadline(self.bound);
        Ok((!self.barrier.is_held()?).then_some(true))
    }

    fn timed_out(&mut self) -> Result<bool> {
        Ok(false)
    }
}
