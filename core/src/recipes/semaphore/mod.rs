//! `Semaphore`: up to `limit` holders at once, wire-compatible with Go's `api.Semaphore`.
//!
//! See [`Semaphore`] for the protocol.

mod acquire;
mod format;
mod give_back;
mod known;
mod prune;

use format::{contender_ours, listed};
pub(crate) use format::{path_join, LockDoc};
use give_back::give_back_now;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::api::kv::{KvPair, WriteOptions};
use crate::api::session_api::Behavior;
use crate::client::Client;
use crate::foundations::cancel::{CancelToken, HookGuard};
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;
use crate::recipes::holding::{
    hold_lifecycle, loss_reason, Hold, Holder, Lifecycle, Loss, Settling,
};
use crate::runtime::claim::{release_claim, take_claim};
use crate::runtime::cleanup::{Next, Owed};
use crate::runtime::keyhub::{Hook, KeySub};
use crate::runtime::lease::{CallbackId, LostReason, Session};
use crate::runtime::ride_out::RideOut;

/// The `Flags` value Go's `api.Semaphore` writes on its keys (`0xe0f69a2baa414de0`).
pub const SEMAPHORE_FLAG_VALUE: u64 = 0xe0f6_9a2b_aa41_4de0;

const SEMAPHORE_CONFLICT: &str = "Existing key does not match semaphore use";

/// Options of a [`Semaphore`].
#[derive(Debug, Clone, Default)]
pub struct SemaphoreOptions {
    value: Vec<u8>,
    session: Option<Session>,
}

impl SemaphoreOptions {
    /// Default options: empty value, a session of the semaphore's own.
    pub fn new() -> SemaphoreOptions {
        SemaphoreOptions::default()
    }

    /// The value of this holder's contender key.
    pub fn value(mut self, value: impl Into<Vec<u8>>) -> Self {
        self.value = value.into();
        self
    }

    /// Contend with this session instead of one of the semaphore's own. A
    /// session holds at most one slot of a given semaphore (its contender key is
    /// `<prefix>/<session>`): semaphores of one prefix given the same session
    /// take turns in that one slot.
    pub fn session(mut self, session: Session) -> Self {
        self.session = Some(session);
        self
    }
}

/// Why a semaphore holding ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SemaphoreLost {
    /// Released by this process.
    Released,
    /// Our contender key is gone or unlocked, or `.lock` no longer lists us.
    Removed,
    /// The session was lost.
    SessionLost(LostReason),
    /// The client was closed.
    ClientClosed,
}

impl SemaphoreLost {
    /// A stable lowercase name: `"released"`, `"removed"`, `"session_lost"`, `"client_closed"`.
    pub fn name(self) -> &'static str {
        match self {
            SemaphoreLost::Released => "released",
            SemaphoreLost::Removed => "removed",
            SemaphoreLost::SessionLost(_) => "session_lost",
            SemaphoreLost::ClientClosed => "client_closed",
        }
    }

    /// Why the session was lost, for [`SemaphoreLost::SessionLost`].
    pub fn session_reason(self) -> Option<LostReason> {
        match self {
            SemaphoreLost::SessionLost(r) => Some(r),
            _ => None,
        }
    }
}

loss_reason!(SemaphoreLost);

/// What a semaphore keeps with a holding: the watches of its contender key
/// and `.lock`, and the hook on its session.
pub(crate) struct SemaphoreHeld {
    /// The contender key's watch, then `.lock`'s.
    subs: Vec<KeySub>,
    _session_hook: Option<HookGuard>,
}

impl SemaphoreHeld {
    /// `.lock` as the key hub last showed it.
    fn lock_view(&self) -> Option<KvPair> {
        self.subs.get(1)?.view()?.entry
    }
}

struct Inner {
    value: Vec<u8>,
    life: Lifecycle<SemaphoreLost, SemaphoreHeld>,
    /// The session of a lost holding whose slot has not been given back yet
    /// (our entry in `.lock`, our contender key). Its local claim is kept until
    /// then, so no other local contender of the session runs meanwhile.
    unreleased: Option<Session>,
    /// When the last acquire, which found a dead holder's slot kept back for
    /// its lock-delay, should look again.
    retry_at: Option<Instant>,
    /// The session whose contender entry an async wait keeps between its tries
    /// ([`Semaphore::try_keeping`]): rewriting it each try would change the
    /// prefix the wait watches, and wake it for nothing.
    kept: Option<Session>,
    /// `.lock` as our last release left it, for the next acquire's one txn (`known`).
    known: Option<known::KnownLock>,
}

struct Shared {
    client: Client,
    prefix: String,
    limit: u64,
    explicit_session: Option<Session>,
    /// Without an explicit session: the semaphore's own (behaviour `delete`),
    /// created on first acquire, replaced once lost, destroyed when the
    /// `Semaphore` is dropped.
    own_session: Mutex<Option<Session>>,
    id: u64,
    inner: Mutex<Inner>,
    acquiring: Mutex<()>,
    /// Held while a lost holding's slot is given back.
    cleaning: Mutex<()>,
}

/// A counting semaphore on a KV prefix: at most `limit` holders at once.
///
/// On the wire it is Go's `api.Semaphore` (consul-semantics §8): each contender
/// acquires a key `<prefix>/<session>` (flags [`SEMAPHORE_FLAG_VALUE`]) with its
/// session, and the holders are listed in `<prefix>/.lock` as
/// `{"Limit":N,"Holders":{"<session>":true}}`, written only by check-and-set.
/// Holders whose session no longer appears on any key under the prefix are
/// pruned — unless Consul still holds their contender key back for lock-delay
/// (their session was invalidated less than its lock-delay ago): such a holder
/// may not know yet that it lost its slot, so the slot stays taken until the
/// delay ends or the holder gives it back (Go prunes at once).
/// Go services using `api.Semaphore` on the same prefix share the slots.
///
/// Waiters share one blocking query per prefix and write to Consul only when
/// the listing shows a free slot, so a change that frees no slot costs nothing.
/// By default each `Semaphore` contends with a session of its own (behaviour
/// `delete`, the client's default TTL and lock-delay, renewed by the client's
/// one renewer thread), as Go's `api.Semaphore` does, so several `Semaphore`s
/// of one client on one prefix hold several slots, and a dead contender's key
/// disappears with its session. Dropping a `Semaphore` releases it and
/// destroys its own session. Semaphores given the same session
/// ([`SemaphoreOptions::session`]) share that session's one slot, taking turns.
pub struct Semaphore {
    shared: Arc<Shared>,
    /// A second handle for the async API's threads ([`Semaphore::view`]):
    /// dropping it gives back and destroys nothing.
    view: bool,
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("prefix", &self.shared.prefix)
            .field("limit", &self.shared.limit)
            .field("held", &lock(&self.shared.inner).life.held().is_some())
            .finish()
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1 << 62);

impl Client {
    /// A semaphore with `limit` slots on `prefix`.
    pub fn semaphore(&self, prefix: &str, limit: u64) -> Result<Semaphore> {
        self.semaphore_with(prefix, limit, SemaphoreOptions::new())
    }

    /// A semaphore with options.
    pub fn semaphore_with(
        &self,
        prefix: &str,
        limit: u64,
        options: SemaphoreOptions,
    ) -> Result<Semaphore> {
        self.core().check_usable()?;
        let p = crate::foundations::keys::nonempty_prefix("prefix", prefix)?.trim_end_matches('/');
        if p.is_empty() {
            return Err(Error::new(ErrorKind::InvalidArgument, "missing prefix"));
        }
        if limit == 0 {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "semaphore limit must be positive",
            ));
        }
        Ok(Semaphore {
            shared: Arc::new(Shared {
                client: self.clone(),
                prefix: p.to_string(),
                limit,
                explicit_session: options.session,
                own_session: Mutex::new(None),
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                inner: Mutex::new(Inner {
                    value: options.value,
                    life: Lifecycle::new(
                        &self.core().transport.metrics,
                        crate::foundations::metrics::Recipe::Semaphore,
                    ),
                    unreleased: None,
                    retry_at: None,
                    kept: None,
                    known: None,
                }),
                acquiring: Mutex::new(()),
                cleaning: Mutex::new(()),
            }),
            view: false,
        })
    }
}

impl Semaphore {
    /// Another handle on this semaphore whose drop gives back nothing: the
    /// async API's step threads act through it while the future borrows `self`.
    pub(crate) fn view(&self) -> Semaphore {
        Semaphore {
            shared: self.shared.clone(),
            view: true,
        }
    }

    /// The client it talks through.
    pub(crate) fn shared_client(&self) -> &Client {
        &self.shared.client
    }

    /// When a try that found a dead holder's slot kept back for its lock-delay
    /// should look again, if the last try was such.
    pub(crate) fn retry_hint(&self) -> Option<Instant> {
        lock(&self.shared.inner).retry_at
    }

    /// Calls `hook` when anything under the prefix changes (a slot given back,
    /// a contender gone), until the returned watch drops.
    pub(crate) fn watch_changes(
        &self,
        hook: crate::runtime::watch::ChangeHook,
    ) -> Result<crate::runtime::watch::Watch> {
        let watch = self.shared.client.watch_prefix(&self.shared.prefix)?;
        watch.on_change(hook);
        Ok(watch)
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.shared.prefix
    }

    /// The number of slots.
    pub fn limit(&self) -> u64 {
        self.shared.limit
    }

    /// The session of the current holding, else the one the next acquire will
    /// use: the explicit one, or the semaphore's own once it has one.
    pub fn session(&self) -> Option<Session> {
        let sh = &self.shared;
        if let Some(h) = lock(&sh.inner).life.held() {
            return Some(h.session.clone());
        }
        sh.explicit_session
            .clone()
            .or_else(|| lock(&sh.own_session).clone())
    }

    fn contender_key(&self, session: &Session) -> String {
        path_join(&self.shared.prefix, session.id())
    }

    fn lock_key(&self) -> String {
        path_join(&self.shared.prefix, ".lock")
    }

    /// Takes a slot, waiting up to `timeout` (`None` forever, `Some(ZERO)` try
    /// once): `Ok(true)` when held, `Ok(false)` at the timeout (the contender key
    /// is removed again). Errors: kind `Conflict` for foreign flags or a limit that
    /// differs from the one stored (`semaphore limit conflict (lock: N, local: M)`)
    /// or when already held; `Cancelled`, `Closed`, `SessionInvalidated`.
    /// A timed acquire in which no request got an answer from Consul fails
    /// with kind `Connection` instead of `Ok(false)` (see [`Lock::acquire`](crate::Lock::acquire)).
    /// Cancelled means nothing is held (see [`Lock::acquire`](crate::Lock::acquire)).
    pub fn acquire(&self, timeout: Option<Duration>, cancel: Option<&CancelToken>) -> Result<bool> {
        let settling = Settling::start(crate::foundations::metrics::Recipe::Semaphore);
        let result = self.acquire_unjudged(timeout, cancel, false);
        let core = self.shared.client.core();
        settling.settle(core, "semaphore acquire", (timeout, cancel), result, || {
            self.abandon()
        })
    }

    /// One try of an async wait: [`Semaphore::try_acquire`] with `cancel`,
    /// except that when no slot is free the contender entry stays for the
    /// next try, until [`Semaphore::end_wait`].
    pub(crate) fn try_keeping(&self, cancel: &CancelToken) -> Result<bool> {
        let settling = Settling::start(crate::foundations::metrics::Recipe::Semaphore);
        let once = (Some(Duration::ZERO), Some(cancel));
        let result = self.acquire_unjudged(once.0, once.1, true);
        let core = self.shared.client.core();
        settling.settle(core, "semaphore acquire", once, result, || self.abandon())
    }

    /// Ends an async wait that kept its contender entry: removes it (unless a
    /// try since took a slot with it).
    pub(crate) fn end_wait(&self) {
        let sh = &self.shared;
        let _serial = lock(&sh.acquiring);
        let Some(session) = lock(&sh.inner).kept.take() else {
            return;
        };
        if self.is_held() {
            return;
        }
        if let Err(e) = give_back_now(sh, &session, false) {
            log::debug!(
                "baton semaphore {}: removing a waiter's contender entry: {e}",
                sh.prefix
            );
        }
    }

    fn acquire_unjudged(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
        keep: bool,
    ) -> Result<bool> {
        let sh = &self.shared;
        sh.client.core().check_usable()?;
        let _serial = lock(&sh.acquiring);
        if self.is_held() {
            return Err(Error::new(ErrorKind::Conflict, "Semaphore already held"));
        }
        let deadline = crate::foundations::scope::deadline_after(timeout);
        // Every request below is bounded by what is left of the timeout (a try-once
        // acquire gets the client's request timeout for its one attempt).
        let _scope = crate::foundations::scope::deadline(
            deadline.filter(|_| timeout != Some(Duration::ZERO)),
        );
        let past_deadline = |e: &Error| {
            e.kind() == ErrorKind::Timeout && deadline.is_some_and(|d| d <= Instant::now())
        };
        let mut ride = RideOut::new(sh.client.core(), "semaphore acquire", deadline, cancel);
        let session = match &sh.explicit_session {
            Some(s) => s.clone(),
            None => match ride.run(|| sh.own_session()) {
                Ok(s) => s,
                Err(e) if past_deadline(&e) => return Ok(false),
                Err(e) => return Err(e),
            },
        };
        sh.forget_lost_slot(&session);
        let contender = self.contender_key(&session);
        let kept = {
            let mut g = lock(&sh.inner);
            match g.kept.take() {
                Some(k) if k.id() == session.id() => true,
                Some(other) => {
                    // The session changed between tries: the old entry goes.
                    drop(g);
                    let _ = give_back_now(sh, &other, false);
                    false
                }
                None => false,
            }
        };
        if !kept
            && !take_claim(
                &session,
                &contender,
                sh.id,
                deadline,
                cancel,
                &sh.client.conn().closing,
            )?
        {
            return Ok(false);
        }
        let result = self.acquire_claimed(&session, &contender, deadline, cancel, kept);
        if matches!(result, Ok(true)) {
            return result;
        }
        if keep && matches!(result, Ok(false)) {
            // An async wait's next try comes: the entry (and the claim) stay.
            lock(&sh.inner).kept = Some(session);
            return result;
        }
        // Give up our contender entry, and the slot a write of `.lock` may have taken
        // (a timeout is reached only while waiting, never with a `.lock` write
        // unanswered: then the contender entry is all there is to remove).
        let _ = give_back_now(sh, &session, !matches!(result, Ok(false)));
        match result {
            Err(e) if past_deadline(&e) => Ok(false),
            other => other,
        }
    }

    /// Tries once: `acquire(Some(Duration::ZERO), None)`.
    pub fn try_acquire(&self) -> Result<bool> {
        self.acquire(Some(Duration::ZERO), None)
    }

    /// Releases the slot (Go's `Release`: remove us from `.lock` by CAS, then
    /// delete our contender key). `Ok(false)` if not held. No callbacks run.
    /// After a loss, it still gives the lost holding's slot back (as Go's
    /// `Release` does) and returns `Ok(false)`.
    pub fn release(&self) -> Result<bool> {
        let sh = &self.shared;
        let holding = lock(&sh.inner).life.release();
        let Some(holding) = holding else {
            return sh.give_back_lost_slot().map(|()| false);
        };
        let session = holding.session.clone();
        let seen = holding.extra.lock_view();
        holding.token.cancel();
        drop(holding);
        if sh.release_known(&session, seen) {
            return Ok(true);
        }
        give_back_now(sh, &session, true).map(|()| true)
    }

    /// Whether a slot is held (false once lost or past the session's deadline).
    pub fn is_held(&self) -> bool {
        self.shared.is_held()
    }

    /// Why the last holding ended (`None` while held or before the first
    /// acquire); see [`Lock::last_lost`](crate::Lock::last_lost).
    pub fn last_lost(&self) -> Option<SemaphoreLost> {
        self.shared.last_lost()
    }

    /// Why [`Semaphore::release`] found nothing to release, in words (see
    /// [`Lock::not_held_message`](crate::Lock::not_held_message)).
    pub fn not_held_message(&self) -> String {
        self.shared
            .not_held_message(&format!("a slot of semaphore {:?}", self.shared.prefix))
    }

    /// A token cancelled when the current holding ends (cancelled when not held).
    pub fn cancel_token(&self) -> CancelToken {
        self.shared.cancel_token()
    }

    /// Registers a callback run once per lost holding (not for a release), on the
    /// dispatcher thread.
    pub fn on_lost(&self, callback: impl Fn(SemaphoreLost) + Send + Sync + 'static) -> CallbackId {
        self.shared.on_lost(callback)
    }

    /// Removes a callback.
    pub fn remove_callback(&self, id: CallbackId) {
        self.shared.remove_callback(id)
    }

    /// Blocks until the holding ends; returns at once when not held. Errors:
    /// `Timeout`, `Cancelled`.
    pub fn wait_lost(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<SemaphoreLost> {
        self.shared.wait_lost(timeout, cancel)
    }

    /// Deletes `.lock` when no live holder remains (Go's `Destroy`). Errors: kind
    /// `Conflict` with `Semaphore already held`, `Semaphore in use`, or the flags conflict.
    pub fn destroy(&self) -> Result<()> {
        let sh = &self.shared;
        if self.is_held() {
            return Err(Error::new(ErrorKind::Conflict, "Semaphore already held"));
        }
        let entries = sh.client.kv().list(&sh.prefix)?;
        let lock_key = self.lock_key();
        let Some(lp) = entries.iter().find(|p| p.key == lock_key) else {
            return Ok(());
        };
        if lp.flags != SEMAPHORE_FLAG_VALUE {
            return Err(Error::new(ErrorKind::Conflict, SEMAPHORE_CONFLICT));
        }
        let mut doc = LockDoc::decode(&lock_key, lp.value.as_deref(), sh.limit)?;
        let alive: Vec<&str> = entries
            .iter()
            .filter_map(|p| p.session.as_deref())
            .collect();
        doc.holders.retain(|h, _| alive.contains(&h.as_str()));
        if !doc.holders.is_empty() || !sh.client.kv().delete_cas(&lock_key, lp.modify_index)? {
            return Err(Error::new(ErrorKind::Conflict, "Semaphore in use"));
        }
        Ok(())
    }
}

impl Hold for Semaphore {
    hold_lifecycle!(SemaphoreLost);
    fn acquire(&self, timeout: Option<Duration>, cancel: Option<&CancelToken>) -> Result<bool> {
        Semaphore::acquire(self, timeout, cancel)
    }
    fn release(&self) -> Result<bool> {
        Semaphore::release(self)
    }
    fn is_held(&self) -> bool {
        Semaphore::is_held(self)
    }
    fn describe(&self) -> String {
        format!("semaphore {:?}", self.prefix())
    }
}

impl Drop for Semaphore {
    fn drop(&mut self) {
        if self.view {
            return;
        }
        let pending = {
            let g = lock(&self.shared.inner);
            g.life.held().is_some() || g.unreleased.is_some()
        };
        if pending && !self.shared.client.is_closed() {
            if let Err(e) = self.release() {
                log::warn!(
                    "baton semaphore {}: release on drop failed: {e}",
                    self.shared.prefix
                );
            }
        }
        // Our own session goes with us: destroyed in the background once what is
        // owed on its behalf (a slot still being given back) is done.
        if let Some(own) = lock(&self.shared.own_session).take() {
            if own.is_valid() && !self.shared.client.is_closed() {
                own.shared.lose(LostReason::Destroyed);
                self.shared.client.core().destroy_later(own.id());
            }
        }
    }
}

impl Shared {
    /// The semaphore's own session, created (or replaced, once lost) now.
    fn own_session(&self) -> Result<Session> {
        let options = self
            .client
            .core()
            .default_session_options()
            .name("baton semaphore")
            .behavior(Behavior::Delete);
        self.client.session_in(&self.own_session, options)
    }
}

impl Shared {
    /// The task that gives our lost holding's slot back on the clean-up
    /// thread (our `.lock` entry may outlive the holding: a session that
    /// passed its deadline can still be alive at Consul), owed from now until
    /// done, even if the semaphore is dropped meanwhile.
    fn give_back_lost_task(
        self: &Arc<Self>,
        session: &Session,
    ) -> impl FnMut(&Client) -> Next + Send + 'static {
        let weak = Arc::downgrade(self);
        let (run, entry) = give_back::owe_give_back(self, session);
        let prefix = self.prefix.clone();
        let mut owed = Owed::new(session);
        move |c| {
            let _entry = &entry;
            let result = match weak.upgrade() {
                Some(sh) => sh.give_back_lost_slot(),
                None => run(c.conn()),
            };
            match result {
                Ok(()) => Next::Done,
                Err(e) => {
                    log::debug!("baton semaphore {prefix}: giving a lost slot back: {e}");
                    owed.failed(&e)
                }
            }
        }
    }
}

impl Holder for Arc<Shared> {
    type Lost = SemaphoreLost;
    type Extra = SemaphoreHeld;
    const NOUN: &'static str = "semaphore";

    fn with<T>(&self, f: impl FnOnce(&mut Lifecycle<SemaphoreLost, SemaphoreHeld>) -> T) -> T {
        f(&mut lock(&self.inner).life)
    }

    /// Ends holding `generation` (idempotent): the holding ends first, then its
    /// token and callbacks fire; logging and giving the slot back come after,
    /// off this thread.
    fn lose(&self, generation: u64, reason: SemaphoreLost) {
        // Owe the slot back before anyone can see the holding end (a `wait_lost` that
        // returns on the ended state, then a `close`, must find it owed), queue it after
        // the signal (queueing may start the clean-up thread, which the signal does not
        // wait for). If another thread ends this holding first, dropping the task here
        // takes the debt back: that thread owes it.
        let holder = (reason != SemaphoreLost::ClientClosed)
            .then(|| {
                let g = lock(&self.inner);
                g.life
                    .held()
                    .filter(|h| h.generation == generation)
                    .map(|h| h.session.clone())
            })
            .flatten();
        let give_back = holder.map(|s| self.give_back_lost_task(&s));
        let ended = {
            let mut g = lock(&self.inner);
            let Some(ended) = g.life.end(generation, reason) else {
                return;
            };
            if reason != SemaphoreLost::ClientClosed {
                g.unreleased = Some(ended.held.session.clone());
            }
            ended
        };
        let session = ended.held.session.clone();
        ended.signal(self.client.core(), &format!("semaphore {}", self.prefix));
        drop(ended);
        match give_back {
            Some(task) => self.client.clean_up(task),
            None => {
                let contender = path_join(&self.prefix, session.id());
                release_claim(&session, &contender, self.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue "A holding never lies", item 4: a key-hub poll answer made before
    /// our `.lock` write, delivered after the holding subscribed, must not end it.
    /// The hub is paused (a test-only pause point) with such an answer in hand
    /// while the semaphore is acquired, then let go.
    #[test]
    fn a_late_poll_answer_does_not_end_a_new_holding() {
        let dev = baton_devserver::DevServer::start(baton_devserver::Config {
            session_ttl_min: Duration::from_millis(500),
            ..Default::default()
        })
        .unwrap();
        let c = Client::builder().address(dev.http_addr()).build().unwrap();
        let patience = Some(Duration::from_secs(20));
        // Two locks held under `latepoll/`: the hub polls the prefix by recursion,
        // which covers the semaphore's keys before it subscribes to them.
        let n1 = c.lock("latepoll/x/1").unwrap();
        let n2 = c.lock("latepoll/y/1").unwrap();
        assert!(n1.acquire(patience, None).unwrap());
        assert!(n2.acquire(patience, None).unwrap());
        let (reached, go) = crate::runtime::keyhub::failpoint::arm("latepoll/");
        // A write under the prefix makes the hub take an answer (older than
        // anything the semaphore writes next).
        c.kv().put("latepoll/filler", b"x").unwrap();
        reached
            .recv_timeout(Duration::from_secs(20))
            .expect("the hub took an answer");
        let sem = c.semaphore("latepoll/sem", 2).unwrap();
        assert!(sem.acquire(patience, None).unwrap());
        go.send(()).unwrap();
        // The late answer lands at once; a false loss would follow it.
        let e = sem
            .wait_lost(Some(Duration::from_secs(1)), None)
            .expect_err("not lost");
        assert_eq!(e.kind(), ErrorKind::Timeout);
        assert!(sem.is_held());
        assert!(sem.release().unwrap(), "release found the slot gone");
        c.close(Duration::from_secs(5));
    }
}
