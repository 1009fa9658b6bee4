//! `Lock`: a distributed mutex on one KV key, wire-compatible with Go's `api.Lock`.
//!
//! See [`Lock`] for the protocol.

mod blocking;
#[cfg(unix)]
mod direct;
mod shared;
pub mod warm;
mod wire;

pub(crate) use wire::flags_match;

use wire::Unlocked;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::api::kv::KvPair;
use crate::api::txn::KvOp;
use crate::client::Client;
use crate::foundations::cancel::{CancelToken, HookGuard};
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::{lock, Turnstile};
use crate::recipes::fence::Sequencer;
use crate::recipes::holding::{
    hold_lifecycle, loss_reason, Held, Hold, Holder, Lifecycle, Loss, Settling,
};
use crate::runtime::keyhub::KeySub;
use crate::runtime::lease::{CallbackId, LostReason, Session};
use crate::transport::http::QueryOptions;

/// The `Flags` value Go's `api.Lock` writes on its key (`0x2ddccbc058a50c18`).
pub const LOCK_FLAG_VALUE: u64 = 0x2ddc_cbc0_58a5_0c18;

/// Go's `ErrLockConflict` text.
pub(crate) const LOCK_CONFLICT: &str = "Existing key does not match lock use";

/// When the delay of the previous holder is unknown, retries after a lock-delay
/// refusal back off from this...
const DELAY_BACKOFF_START: Duration = Duration::from_millis(250);
/// ...up to this (Go's fixed retry time).
const DELAY_BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Added to a known lock-delay, for the server's timer granularity.
const DELAY_MARGIN: Duration = Duration::from_millis(10);

/// Options of a [`Lock`].
#[derive(Debug, Clone, Default)]
pub struct LockOptions {
    value: Vec<u8>,
    session: Option<Session>,
    flags: Option<u64>,
}

impl LockOptions {
    /// Default options: empty value, the client's default session.
    pub fn new() -> LockOptions {
        LockOptions::default()
    }

    /// The value written on acquire and sent again on release.
    pub fn value(mut self, value: impl Into<Vec<u8>>) -> Self {
        self.value = value.into();
        self
    }

    /// Hold the lock with this session instead of the client's default one.
    pub fn session(mut self, session: Session) -> Self {
        self.session = Some(session);
        self
    }

    /// The flags the key is written with, and that a key must carry to be taken
    /// as this lock's. The default is Go's `api.Lock` flag
    /// ([`LOCK_FLAG_VALUE`]), so Go services take part. `0` is how Consul's
    /// leader-election guide, `curl ...?acquire=`, py-consul and most scripts
    /// write a lock key: use it to share a key with such clients (Go's
    /// `api.Lock` then refuses the key, as it refuses any other flags).
    pub fn flags(mut self, flags: u64) -> Self {
        self.flags = Some(flags);
        self
    }
}

/// Why a holding ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockLost {
    /// Released by this process ([`Lock::release`]).
    Released,
    /// The key no longer carries our session: released, deleted or taken by
    /// someone else.
    KeyChanged,
    /// The session holding the lock was lost.
    SessionLost(LostReason),
    /// The client was closed.
    ClientClosed,
}

impl LockLost {
    /// A stable lowercase name: `"released"`, `"key_changed"`, `"session_lost"`,
    /// `"client_closed"` (the one the bindings report).
    pub fn name(self) -> &'static str {
        match self {
            LockLost::Released => "released",
            LockLost::KeyChanged => "key_changed",
            LockLost::SessionLost(_) => "session_lost",
            LockLost::ClientClosed => "client_closed",
        }
    }

    /// Why the session was lost, for [`LockLost::SessionLost`] (the same name
    /// the session's own state reports, e.g. `deadline_exceeded`).
    pub fn session_reason(self) -> Option<LostReason> {
        match self {
            LockLost::SessionLost(r) => Some(r),
            _ => None,
        }
    }
}

loss_reason!(LockLost);

/// A state of the key this lock learnt, with the raft index it is current as of
/// and when it was learnt.
#[derive(Debug, Clone)]
struct Known {
    entry: Option<KvPair>,
    as_of: u64,
    seen_at: Instant,
}

/// What a lock keeps with a holding (beside its session, token and generation).
pub(crate) struct LockHeld {
    /// Process-unique id of this holding (key of `Core::held_keys`).
    held_id: u64,
    sequencer: Sequencer,
    sub: Option<KeySub>,
    _session_hook: Option<HookGuard>,
}

struct Inner {
    value: Vec<u8>,
    life: Lifecycle<LockLost, LockHeld>,
    known: Option<Known>,
    /// The last other session seen holding the key, and its LockDelay if looked up.
    last_holder: Option<(String, Option<Duration>)>,
    /// When the last acquire that ended refused for lock-delay may try again.
    retry_at: Option<Instant>,
}

pub(crate) struct LockShared {
    client: Client,
    key: String,
    explicit_session: Option<Session>,
    /// The flags the key is written with ([`LockOptions::flags`]).
    flags: u64,
    id: u64,
    inner: Mutex<Inner>,
    /// Serialises acquires of this object (a warm acquire carries its turn, see `warm`).
    acquiring: Arc<Turnstile>,
}

/// A distributed lock on one key.
///
/// On the wire it follows Go's contract exactly (consul-semantics §7): the key is
/// acquired with flags [`LOCK_FLAG_VALUE`] and the lock's value, the value is sent
/// again on release, a key with other flags is a conflict, and "held" means the key
/// has a non-empty `Session`. A Go service using `api.Lock` and a baton process on
/// the same key therefore exclude each other.
///
/// Where it differs from Go, it is in cost and in what the holder learns:
///
/// * A warm acquire (the key's state is known from a previous read, release or
///   watch) is one `/v1/txn` request: `check-index` (or `check-not-exists`) then
///   `lock`. The check makes the flags test atomic, so a foreign key is never
///   overwritten. Waiters park on the client's key hub (one long poll per group of
///   keys), not on a thread per lock.
/// * When the key is free but Consul refuses it (lock-delay after the previous
///   holder's session was invalidated, which the server does not announce), the
///   retry happens when that session's LockDelay ends, measured from when the key
///   was seen free — learnt while the holder held the key — not after a fixed 5 s.
/// * Locks share the client's session by default; several `Lock`s of one process on
///   the same key and session queue locally, so only one of them talks to Consul.
/// * Loss (key taken or cleared by someone else, session invalidated, local lease
///   deadline passed) ends the holding: [`Lock::is_held`] turns false, callbacks run
///   once on the dispatcher, waiters and the holding's cancel token wake. The lock
///   can be acquired again afterwards.
///
/// Dropping a held `Lock` releases it.
pub struct Lock {
    pub(crate) shared: Arc<LockShared>,
    /// A second handle on the same lock for the async API's threads
    /// ([`Lock::view`]): dropping it releases nothing.
    view: bool,
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("key", &self.shared.key)
            .field("held", &lock(&self.shared.inner).life.held().is_some())
            .finish()
    }
}

static NEXT_LOCK_ID: AtomicU64 = AtomicU64::new(1);

/// Validates a key for a lock, election or guarded write ([`crate::foundations::keys`]'s rule).
pub(crate) fn check_key(key: &str) -> Result<String> {
    crate::foundations::keys::key(key).map(str::to_string)
}

impl Client {
    /// A lock on `key` held with the client's default session and an empty value.
    pub fn lock(&self, key: &str) -> Result<Lock> {
        self.lock_with(key, LockOptions::new())
    }

    /// A lock on `key` with options.
    pub fn lock_with(&self, key: &str, options: LockOptions) -> Result<Lock> {
        self.core().check_usable()?;
        let key = check_key(key)?;
        Ok(Lock {
            shared: Arc::new(LockShared {
                client: self.clone(),
                key,
                explicit_session: options.session,
                flags: options.flags.unwrap_or(LOCK_FLAG_VALUE),
                id: NEXT_LOCK_ID.fetch_add(1, Ordering::Relaxed),
                inner: Mutex::new(Inner {
                    value: options.value,
                    life: Lifecycle::new(
                        &self.core().transport.metrics,
                        crate::foundations::metrics::Recipe::Lock,
                    ),
                    known: None,
                    last_holder: None,
                    retry_at: None,
                }),
                acquiring: Arc::default(),
            }),
            view: false,
        })
    }
}

impl Lock {
    /// Another handle on this lock whose drop releases nothing: the async
    /// API's step threads act through it while the future borrows `self`.
    pub(crate) fn view(&self) -> Lock {
        Lock {
            shared: self.shared.clone(),
            view: true,
        }
    }

    /// When a try that found the key free but refused (lock-delay) may try
    /// again, if the last try was such.
    pub(crate) fn retry_hint(&self) -> Option<Instant> {
        lock(&self.shared.inner).retry_at
    }

    pub(crate) fn shared_client(&self) -> &Client {
        &self.shared.client
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// The value written by the next acquire (and resent on release).
    pub fn value(&self) -> Vec<u8> {
        lock(&self.shared.inner).value.clone()
    }

    /// Sets the value for the next acquire. Does not change the key while held
    /// (an [`Election`](crate::Election) can, with `proclaim`).
    pub fn set_value(&self, value: impl Into<Vec<u8>>) {
        lock(&self.shared.inner).value = value.into();
    }

    /// The session of the current holding, or the one the next acquire will use
    /// if it was given in the options.
    pub fn session(&self) -> Option<Session> {
        let g = lock(&self.shared.inner);
        g.life
            .held()
            .map(|h| h.session.clone())
            .or_else(|| self.shared.explicit_session.clone())
    }

    /// Acquires the lock, waiting up to `timeout` (`None` waits forever,
    /// `Some(Duration::ZERO)` tries once). Returns `Ok(true)` when held,
    /// `Ok(false)` when the timeout passed first.
    ///
    /// Errors: kind `Conflict` if the key exists with other flags (text
    /// `Existing key does not match lock use`) or this `Lock` is already held
    /// (`Lock already held`); `Cancelled` when `cancel` fires; `Closed` when the
    /// client closes; `SessionInvalidated` when an explicitly given session is
    /// lost (the default session is replaced instead); transport errors as they come.
    ///
    /// A timed acquire in which no request got an answer from Consul
    /// (connection refused, name not resolved, TLS failure, no answer in time)
    /// fails with kind `Connection`, naming the address, instead of `Ok(false)`:
    /// "not acquired" means someone else holds the key, or Consul answered but
    /// could not decide in time.
    ///
    /// Cancelled means nothing is held: if `cancel` fires before this
    /// returns, the answer is `Cancelled`, and a holding the acquire won
    /// meanwhile has been released.
    pub fn acquire(&self, timeout: Option<Duration>, cancel: Option<&CancelToken>) -> Result<bool> {
        let settling = Settling::start(lock(&self.shared.inner).life.recipe());
        let result = self.acquire_unjudged(timeout, cancel);
        let core = self.shared.client.core();
        settling.settle(core, "lock acquire", (timeout, cancel), result, || {
            self.abandon()
        })
    }

    /// Makes this lock's acquires and holdings count as `recipe`'s in the client's
    /// metrics (an election's lock counts as the election).
    pub(crate) fn count_as(&self, recipe: crate::foundations::metrics::Recipe) {
        lock(&self.shared.inner).life.count_as(recipe);
    }

    /// [`Lock::acquire`] without telling an unreachable Consul from
    /// contention (its caller does, under its own name).
    pub(crate) fn acquire_unjudged(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<bool> {
        let sh = &self.shared;
        sh.client.core().check_usable()?;
        #[cfg(unix)]
        if let Some(direct) = self.acquire_direct(timeout, cancel) {
            return direct;
        }
        let _serial = sh.acquiring.enter();
        if self.is_held() {
            return Err(Error::new(ErrorKind::Conflict, "Lock already held"));
        }
        let deadline = crate::foundations::scope::deadline_after(timeout);
        // Every request below is bounded by what is left of the timeout (a try-once
        // acquire gets the client's request timeout for its one attempt).
        let _scope = crate::foundations::scope::deadline(
            deadline.filter(|_| timeout != Some(Duration::ZERO)),
        );
        sh.acquire_in_turn(deadline, cancel, None)
    }

    /// The acquire as a warm call driven on this thread (`lock::direct`), when it is one:
    /// the turn free, the key known free, the loop connection idle (see `lock::warm`).
    #[cfg(unix)]
    fn acquire_direct(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Option<Result<bool>> {
        let deadline = crate::foundations::scope::deadline_after(timeout);
        let _scope = crate::foundations::scope::deadline(
            deadline.filter(|_| timeout != Some(Duration::ZERO)),
        );
        // The scope's own deadline (an enclosing call's may be sooner) bounds the request.
        let bound = crate::foundations::scope::plain_deadline()?;
        let w = self.warm_try()?;
        Some(direct::acquire(w, bound, deadline, cancel))
    }

    /// Tries once: `acquire(Some(Duration::ZERO), None)`.
    pub fn try_acquire(&self) -> Result<bool> {
        self.acquire(Some(Duration::ZERO), None)
    }

    /// Releases the lock (Go's `Unlock`: the key keeps its value and flags and
    /// loses its session; no lock-delay applies). Returns `Ok(false)` if this
    /// `Lock` did not hold it, or Consul says it was no longer ours.
    /// Callbacks are not called for a release.
    ///
    /// The holding ends at once, whatever Consul answers. If the release
    /// request fails (Consul without a leader, a connection error), the error
    /// says so and the release goes on in the background — retried until
    /// Consul confirms it or says the key is no longer the session's, however
    /// long Consul is unavailable — and [`Client::close`] tries it too, so the
    /// key is never left held by a session nobody renews.
    pub fn release(&self) -> Result<bool> {
        let sh = &self.shared;
        #[cfg(unix)]
        let plain = crate::foundations::scope::plain_deadline();
        #[cfg(unix)]
        if let Some(bound) = plain {
            if let Some(w) = self.warm_release() {
                return direct::release(w, bound);
            }
        }
        let Some((session, value)) = sh.end_for_release() else {
            return Ok(false);
        };
        let result = wire::unlock(&sh.client, &sh.key, &value, session.id(), sh.flags);
        sh.released(&session, value, result)
    }

    /// Whether the lock is held: acquired, not released, not lost, and the
    /// session's local lease deadline has not passed (checked without network).
    pub fn is_held(&self) -> bool {
        self.shared.is_held()
    }

    /// Why the last holding ended (`None` while held or before the first
    /// acquire). With [`LockLost::SessionLost`] it says why the session was
    /// lost, the reason the session itself reports.
    pub fn last_lost(&self) -> Option<LockLost> {
        self.shared.last_lost()
    }

    /// Why [`Lock::release`] found nothing to release, in words: never
    /// acquired or already released, the client closed, or lost and why (the
    /// text the bindings' not-held errors carry).
    pub fn not_held_message(&self) -> String {
        self.shared
            .not_held_message(&format!("lock {:?}", self.key()))
    }

    /// The fencing sequencer of the current holding.
    pub fn sequencer(&self) -> Option<Sequencer> {
        if !self.is_held() {
            return None;
        }
        lock(&self.shared.inner)
            .life
            .held()
            .map(|h| h.extra.sequencer.clone())
    }

    /// A token cancelled when the current holding ends (already cancelled when
    /// not held), for the holder's work to watch.
    pub fn cancel_token(&self) -> CancelToken {
        self.shared.cancel_token()
    }

    /// Registers a callback run once per lost holding (not for
    /// [`Lock::release`], not after the client is closed), on the client's
    /// dispatcher thread, never under a library lock. A panic in it is caught.
    pub fn on_lost(&self, callback: impl Fn(LockLost) + Send + Sync + 'static) -> CallbackId {
        self.shared.on_lost(callback)
    }

    /// Removes a callback. It may still run once if already queued.
    pub fn remove_callback(&self, id: CallbackId) {
        self.shared.remove_callback(id)
    }

    /// Blocks until the current holding ends and returns why; returns at once
    /// (with the last reason, or `Released`) when not held. Errors: `Timeout`
    /// when still held at `timeout`, `Cancelled` when `cancel` fires.
    pub fn wait_lost(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<LockLost> {
        self.shared.wait_lost(timeout, cancel)
    }

    /// Deletes the lock's key if nobody holds it (Go's `Destroy`). Errors: kind
    /// `Conflict` with `Lock already held` (this object holds it), `Lock in use`
    /// (someone does), or `Existing key does not match lock use` (foreign flags).
    pub fn destroy(&self) -> Result<()> {
        if self.is_held() {
            return Err(Error::new(ErrorKind::Conflict, "Lock already held"));
        }
        destroy_key(
            &self.shared.client,
            &self.shared.key,
            self.shared.flags,
            LOCK_CONFLICT,
            "Lock in use",
        )
    }

    /// Replaces the value of the held key, keeping its LockIndex (a `lock` by the
    /// same session, behind a `check-session` so a lost lock is never re-taken).
    pub(crate) fn update_value(&self, value: &[u8]) -> Result<KvPair> {
        let sh = &self.shared;
        let (session, generation, held_id) = {
            let g = lock(&sh.inner);
            match g.life.held() {
                Some(h) => (h.session.clone(), h.generation, h.extra.held_id),
                None => return Err(Error::new(ErrorKind::Conflict, "Lock not held")),
            }
        };
        let lock_index = lock(&sh.inner)
            .life
            .held()
            .map_or(0, |h| h.extra.sequencer.lock_index);
        match wire::relock(
            &sh.client,
            &sh.key,
            value,
            session.id(),
            lock_index,
            sh.flags,
        )? {
            Ok(mut pair) => {
                if let Some(h) = lock(&sh.client.core().held_keys).get_mut(&held_id) {
                    h.2 = value.to_vec();
                }
                let mut g = lock(&sh.inner);
                g.value = value.to_vec();
                // Observers in this process see the new value without waiting for a
                // poll (the txn answer carries no Value: it is the one we wrote).
                pair.value.get_or_insert_with(|| value.to_vec());
                if let Some(sub) = g.life.held().and_then(|h| h.extra.sub.as_ref()) {
                    // An unchanged value is a no-op that keeps the ModifyIndex, but
                    // Consul 1.6.0-1.7.x answered a txn with the new raft index
                    // anyway (GH-7832): keep the index we know.
                    if let Some(known) = sub.view().and_then(|v| v.entry) {
                        if known.session == pair.session
                            && known.lock_index == pair.lock_index
                            && known.flags == pair.flags
                            && known.value == pair.value
                        {
                            pair.modify_index = known.modify_index;
                        }
                    }
                    sub.learn(Some(pair.clone()), pair.modify_index);
                }
                Ok(pair)
            }
            Err(what) => {
                sh.lose(generation, LockLost::KeyChanged);
                Err(Error::new(
                    ErrorKind::Conflict,
                    format!("Lock not held: {what}"),
                ))
            }
        }
    }
}

impl Hold for Lock {
    hold_lifecycle!(LockLost);
    fn acquire(&self, timeout: Option<Duration>, cancel: Option<&CancelToken>) -> Result<bool> {
        Lock::acquire(self, timeout, cancel)
    }
    fn release(&self) -> Result<bool> {
        Lock::release(self)
    }
    fn is_held(&self) -> bool {
        Lock::is_held(self)
    }
    fn sequencer(&self) -> Option<Sequencer> {
        Lock::sequencer(self)
    }
    fn describe(&self) -> String {
        format!("lock {:?}", self.key())
    }
}

/// What a failed acquire may keep for the next one. A free key is worth keeping
/// (the next acquire is one check-index txn, which also proves it current); a key
/// held by another session is not: nothing watches it after we return, so the
/// next try would believe a holder that may be long gone.
fn cacheable(k: Known, session: &Session) -> Option<Known> {
    let holder = k.entry.as_ref().and_then(|p| p.session.as_deref());
    holder.is_none_or(|h| h == session.id()).then_some(k)
}

/// Go's `Destroy` for a lock or semaphore coordination key: delete it by CAS if it
/// exists with `flags` and no session.
pub(crate) fn destroy_key(
    client: &Client,
    key: &str,
    flags: u64,
    conflict: &str,
    in_use: &str,
) -> Result<()> {
    let Some(p) = client.kv().get(key)? else {
        return Ok(());
    };
    // A lock key a Consul before 1.6.2 stored with rounded flags is a lock key too.
    if !flags_match(flags, p.flags) {
        return Err(Error::new(ErrorKind::Conflict, conflict));
    }
    if p.session.is_some() {
        return Err(Error::new(ErrorKind::Conflict, in_use));
    }
    if !client.kv().delete_cas(key, p.modify_index)? {
        return Err(Error::new(ErrorKind::Conflict, in_use));
    }
    Ok(())
}

impl Drop for Lock {
    fn drop(&mut self) {
        if !self.view
            && lock(&self.shared.inner).life.held().is_some()
            && !self.shared.client.is_closed()
        {
            if let Err(e) = self.release() {
                log::warn!(
                    "baton lock {}: release on drop failed: {e}",
                    self.shared.key
                );
            }
        }
    }
}
