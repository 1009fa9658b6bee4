//! `Lock`: a distributed mutex on one KV key, wire-compatible with Go's `api.Lock`.
//!
//! See [`Lock`] for the protocol.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver, Sender};
use once_cell::sync::Lazy;

use crate::cancel::{CancelToken, HookGuard};
use crate::cleanup::{Next, Owed};
use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::fence::Sequencer;
use crate::http::QueryOptions;
use crate::keyhub::{Hook, KeySub};
use crate::kv::KvPair;
use crate::lease::{CallbackId, LostReason, Session, SessionState};
use crate::sync::lock;
use crate::txn::KvOp;

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
}

type LostCallback = Arc<dyn Fn(LockLost) + Send + Sync + 'static>;

/// A state of the key this lock learnt, with the raft index it is current as of
/// and when it was learnt.
#[derive(Debug, Clone)]
struct Known {
    entry: Option<KvPair>,
    as_of: u64,
    seen_at: Instant,
}

struct Holding {
    /// Process-unique id of this holding (key of `Core::held_keys`).
    held_id: u64,
    session: Session,
    sequencer: Sequencer,
    generation: u64,
    token: CancelToken,
    sub: Option<KeySub>,
    _session_hook: Option<HookGuard>,
}

struct Inner {
    value: Vec<u8>,
    holding: Option<Holding>,
    generation: u64,
    known: Option<Known>,
    /// The last other session seen holding the key, and its LockDelay if looked up.
    last_holder: Option<(String, Option<Duration>)>,
    callbacks: Vec<(u64, LostCallback)>,
    next_callback: u64,
    last_lost: Option<LockLost>,
}

pub(crate) struct LockShared {
    client: Client,
    key: String,
    explicit_session: Option<Session>,
    id: u64,
    inner: Mutex<Inner>,
    /// Serialises acquires of this object.
    acquiring: Mutex<()>,
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
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("key", &self.shared.key)
            .field("held", &lock(&self.shared.inner).holding.is_some())
            .finish()
    }
}

static NEXT_LOCK_ID: AtomicU64 = AtomicU64::new(1);

/// Validates a key for a lock, election or guarded write (Go: `missing key`).
pub(crate) fn check_key(key: &str) -> Result<String> {
    let k = key.strip_prefix('/').unwrap_or(key);
    if k.is_empty() {
        return Err(Error::new(ErrorKind::InvalidArgument, "missing key"));
    }
    if k.contains('\0') {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            "invalid key: it contains a NUL byte",
        ));
    }
    Ok(k.to_string())
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
                id: NEXT_LOCK_ID.fetch_add(1, Ordering::Relaxed),
                inner: Mutex::new(Inner {
                    value: options.value,
                    holding: None,
                    generation: 0,
                    known: None,
                    last_holder: None,
                    callbacks: Vec::new(),
                    next_callback: 0,
                    last_lost: None,
                }),
                acquiring: Mutex::new(()),
            }),
        })
    }
}

// ----- in-process queue: one contender per (session, key) talks to Consul -----

struct LocalClaim {
    owner: u64,
    waiters: Vec<Sender<()>>,
}

static LOCAL: Lazy<Mutex<HashMap<(String, String), LocalClaim>>> =
    Lazy::new(|| Mutex::new(HashMap::new()));

/// Claims (session, key) for `owner`, or returns a receiver woken when it is free.
fn try_claim(session: &str, key: &str, owner: u64) -> std::result::Result<(), Receiver<()>> {
    let mut map = lock(&LOCAL);
    let k = (session.to_string(), key.to_string());
    match map.get_mut(&k) {
        Some(c) if c.owner != owner => {
            let (tx, rx) = crossbeam_channel::bounded(1);
            c.waiters.push(tx);
            Err(rx)
        }
        Some(_) => Ok(()),
        None => {
            map.insert(
                k,
                LocalClaim {
                    owner,
                    waiters: Vec::new(),
                },
            );
            Ok(())
        }
    }
}

/// Waits until `owner` is the process's one contender for (session, key).
/// Returns `Ok(false)` at the deadline.
pub(crate) fn take_claim(
    session: &Session,
    key: &str,
    owner: u64,
    deadline: Option<Instant>,
    cancel: Option<&CancelToken>,
    client: &Client,
) -> Result<bool> {
    loop {
        let rx = match try_claim(session.id(), key, owner) {
            Ok(()) => return Ok(true),
            Err(rx) => rx,
        };
        if let Woke::Tick = wait_signals(&rx, deadline, cancel, session, &client.core().closing)? {
            if deadline.is_some_and(|d| d <= Instant::now()) {
                return Ok(false);
            }
        }
    }
}

/// Gives up `owner`'s claim on (session, key), waking the next local contender.
pub(crate) fn release_claim(session: &Session, key: &str, owner: u64) {
    unclaim(session.id(), key, owner)
}

/// Hands `from`'s claim on (session, key) to a new owner (a clean-up), which
/// gives it up when the returned guard drops: local contenders wait until the
/// clean-up is over, so it never undoes their holding.
pub(crate) fn hand_over_claim(session: &str, key: &str, from: u64) -> ClaimGuard {
    let to = NEXT_LOCK_ID.fetch_add(1, Ordering::Relaxed);
    let mut map = lock(&LOCAL);
    let k = (session.to_string(), key.to_string());
    match map.get_mut(&k) {
        Some(c) if c.owner == from => c.owner = to,
        Some(_) => {}
        None => {
            map.insert(
                k,
                LocalClaim {
                    owner: to,
                    waiters: Vec::new(),
                },
            );
        }
    }
    ClaimGuard {
        session: session.to_string(),
        key: key.to_string(),
        owner: to,
    }
}

/// Gives up a claim handed over to a clean-up when dropped.
pub(crate) struct ClaimGuard {
    session: String,
    key: String,
    owner: u64,
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        unclaim(&self.session, &self.key, self.owner);
    }
}

fn unclaim(session: &str, key: &str, owner: u64) {
    let waiters = {
        let mut map = lock(&LOCAL);
        let k = (session.to_string(), key.to_string());
        match map.get(&k) {
            Some(c) if c.owner == owner => map.remove(&k).map(|c| c.waiters),
            _ => None,
        }
    };
    for w in waiters.into_iter().flatten() {
        let _ = w.try_send(());
    }
}

/// What one acquire attempt found.
enum Attempt {
    Acquired(KvPair),
    /// The key changed since our view: read again.
    Stale,
    /// Free, but refused for lock-delay.
    Delayed,
    /// No usable answer (transport error, or a success that does not show our
    /// session): Consul may or may not have given us the key.
    Unknown(Error),
}

/// Backoff when the server keeps refusing a check on a key that a read then
/// shows unchanged: from this...
const STALE_BACKOFF_START: Duration = Duration::from_millis(20);
/// ...up to this.
const STALE_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// How a wait ended.
enum Woke {
    Changed,
    Tick,
}

impl Lock {
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
        g.holding
            .as_ref()
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
    pub fn acquire(&self, timeout: Option<Duration>, cancel: Option<&CancelToken>) -> Result<bool> {
        let sh = &self.shared;
        sh.client.core().check_usable()?;
        let _serial = lock(&sh.acquiring);
        if self.is_held() {
            return Err(Error::new(ErrorKind::Conflict, "Lock already held"));
        }
        let deadline = crate::scope::deadline_after(timeout);
        // Every request below is bounded by what is left of the timeout (a try-once
        // acquire gets the client's request timeout for its one attempt).
        let _scope = crate::scope::deadline(deadline.filter(|_| timeout != Some(Duration::ZERO)));
        let past_deadline = |e: &Error| {
            e.kind() == ErrorKind::Timeout && deadline.is_some_and(|d| d <= Instant::now())
        };
        loop {
            let session = match &sh.explicit_session {
                Some(s) => s.clone(),
                None => match sh.client.default_session() {
                    Ok(s) => s,
                    Err(e) if past_deadline(&e) => return Ok(false),
                    Err(e) => return Err(e),
                },
            };
            if !session.is_valid() {
                if sh.explicit_session.is_some() {
                    return Err(Error::new(
                        ErrorKind::SessionInvalidated,
                        format!("the lock's session {} is lost", session.id()),
                    ));
                }
                continue;
            }
            if !sh.wait_local(&session, deadline, cancel)? {
                return Ok(false);
            }
            let result = sh.acquire_remote(&session, deadline, cancel);
            match result {
                Ok(true) => return Ok(true),
                Err(e)
                    if e.kind() == ErrorKind::SessionInvalidated
                        && sh.explicit_session.is_none()
                        && !session.is_valid() =>
                {
                    // The default session died while we waited: take the new one.
                    unclaim(session.id(), &sh.key, sh.id);
                    continue;
                }
                Err(e) if past_deadline(&e) => {
                    unclaim(session.id(), &sh.key, sh.id);
                    return Ok(false);
                }
                other => {
                    unclaim(session.id(), &sh.key, sh.id);
                    return other;
                }
            }
        }
    }

    /// Tries once: `acquire(Some(Duration::ZERO), None)`.
    pub fn try_acquire(&self) -> Result<bool> {
        self.acquire(Some(Duration::ZERO), None)
    }

    /// Releases the lock (Go's `Unlock`: the key keeps its value and flags and
    /// loses its session; no lock-delay applies). Returns `Ok(false)` if this
    /// `Lock` did not hold it, or Consul says it was no longer ours.
    /// Callbacks are not called for a release.
    pub fn release(&self) -> Result<bool> {
        let sh = &self.shared;
        let (holding, value) = {
            let mut g = lock(&sh.inner);
            let Some(h) = g.holding.take() else {
                return Ok(false);
            };
            g.last_lost = Some(LockLost::Released);
            g.known = None;
            (h, g.value.clone())
        };
        lock(&sh.client.core().held_keys).remove(&holding.held_id);
        let Holding {
            session,
            token,
            sub,
            _session_hook,
            ..
        } = holding;
        drop(sub);
        drop(_session_hook);
        token.cancel();
        let result = sh
            .client
            .txn(&[KvOp::unlock(&sh.key, &value, LOCK_FLAG_VALUE, session.id())]);
        let answered = match &result {
            Ok(_) => true,
            Err(e) => e.kind() == ErrorKind::Conflict && !e.txn_errors().is_empty(),
        };
        if answered {
            unclaim(session.id(), &sh.key, sh.id);
        }
        match result {
            Ok(entries) => {
                if let Some(p) = entries.into_iter().rev().find(|p| p.key == sh.key) {
                    let as_of = p.modify_index;
                    lock(&sh.inner).known = Some(Known {
                        entry: Some(p),
                        as_of,
                        seen_at: Instant::now(),
                    });
                }
                Ok(true)
            }
            Err(e) if e.kind() == ErrorKind::Conflict && !e.txn_errors().is_empty() => {
                log::warn!(
                    "baton lock {}: release found the key no longer ours: {e}",
                    sh.key
                );
                Ok(false)
            }
            Err(e) => {
                // The key may still carry our session: keep trying in the background
                // (local contenders on this session wait for it).
                let claim = hand_over_claim(session.id(), &sh.key, sh.id);
                unlock_later(&sh.client, &sh.key, value, &session, Some(claim));
                Err(e)
            }
        }
    }

    /// Whether the lock is held: acquired, not released, not lost, and the
    /// session's local lease deadline has not passed (checked without network).
    pub fn is_held(&self) -> bool {
        self.shared.held_generation().is_some()
    }

    /// The fencing sequencer of the current holding.
    pub fn sequencer(&self) -> Option<Sequencer> {
        if !self.is_held() {
            return None;
        }
        lock(&self.shared.inner)
            .holding
            .as_ref()
            .map(|h| h.sequencer.clone())
    }

    /// A token cancelled when the current holding ends (already cancelled when
    /// not held), for the holder's work to watch.
    pub fn cancel_token(&self) -> CancelToken {
        let _ = self.is_held();
        match &lock(&self.shared.inner).holding {
            Some(h) => h.token.clone(),
            None => {
                let t = CancelToken::new();
                t.cancel();
                t
            }
        }
    }

    /// Registers a callback run once per lost holding (not for
    /// [`Lock::release`], not after the client is closed), on the client's
    /// dispatcher thread, never under a library lock. A panic in it is caught.
    pub fn on_lost(&self, callback: impl Fn(LockLost) + Send + Sync + 'static) -> CallbackId {
        let mut g = lock(&self.shared.inner);
        let id = g.next_callback;
        g.next_callback += 1;
        g.callbacks.push((id, Arc::new(callback)));
        CallbackId::new(id)
    }

    /// Removes a callback. It may still run once if already queued.
    pub fn remove_callback(&self, id: CallbackId) {
        lock(&self.shared.inner)
            .callbacks
            .retain(|(i, _)| *i != id.get());
    }

    /// Blocks until the current holding ends and returns why; returns at once
    /// (with the last reason, or `Released`) when not held. Errors: `Timeout`
    /// when still held at `timeout`, `Cancelled` when `cancel` fires.
    pub fn wait_lost(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<LockLost> {
        let end = crate::scope::deadline_after(timeout);
        let never = crossbeam_channel::never();
        let cancel_rx = cancel.map_or_else(|| never.clone(), |c| c.receiver());
        loop {
            if self.shared.held_generation().is_none() {
                let g = lock(&self.shared.inner);
                return Ok(g.last_lost.unwrap_or(LockLost::Released));
            }
            let (token, session) = {
                let g = lock(&self.shared.inner);
                match &g.holding {
                    None => continue,
                    Some(h) => (h.token.clone(), h.session.clone()),
                }
            };
            if cancel.is_some_and(|c| c.is_cancelled()) {
                return Err(Error::new(
                    ErrorKind::Cancelled,
                    "wait for lock loss cancelled",
                ));
            }
            let now = Instant::now();
            if end.is_some_and(|e| e <= now) {
                return Err(Error::new(ErrorKind::Timeout, "lock still held at timeout"));
            }
            let mut wake = end;
            if let Some(until) = session.valid_until() {
                wake = Some(wake.map_or(until, |w| w.min(until)));
            }
            let tick = wake.map_or_else(crossbeam_channel::never, crossbeam_channel::at);
            let lost = token.receiver();
            select! {
                recv(lost) -> _ => {}
                recv(cancel_rx) -> _ => {}
                recv(tick) -> _ => {}
            }
        }
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
            LOCK_FLAG_VALUE,
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
            match &g.holding {
                Some(h) => (h.session.clone(), h.generation, h.held_id),
                None => return Err(Error::new(ErrorKind::Conflict, "Lock not held")),
            }
        };
        let result = sh.client.txn(&[
            KvOp::check_session(&sh.key, session.id()),
            KvOp::lock(&sh.key, value, LOCK_FLAG_VALUE, session.id()),
        ]);
        match result {
            Ok(entries) => {
                let pair = entries
                    .into_iter()
                    .rev()
                    .find(|p| p.key == sh.key)
                    .ok_or_else(|| {
                        Error::new(ErrorKind::BadResponse, "txn answer without the key")
                    })?;
                if let Some(h) = lock(&sh.client.core().held_keys).get_mut(&held_id) {
                    h.2 = value.to_vec();
                }
                let mut g = lock(&sh.inner);
                g.value = value.to_vec();
                // Observers in this process see the new value without waiting for a
                // poll (the txn answer carries no Value: it is the one we wrote).
                let mut pair = pair;
                pair.value.get_or_insert_with(|| value.to_vec());
                if let Some(sub) = g.holding.as_ref().and_then(|h| h.sub.as_ref()) {
                    sub.learn(Some(pair.clone()), pair.modify_index);
                }
                Ok(pair)
            }
            Err(e) if e.kind() == ErrorKind::Conflict && !e.txn_errors().is_empty() => {
                sh.lose(generation, LockLost::KeyChanged);
                Err(Error::new(
                    ErrorKind::Conflict,
                    format!("Lock not held: {}", e.message()),
                ))
            }
            Err(e) => Err(e),
        }
    }
}

/// What a failed acquire may keep for the next one. A free key is worth keeping
/// (the next acquire is one check-index txn, which also proves it current); a key
/// held by another session is not: nothing watches it after we return, so the
/// next try would believe a holder that may be long gone.
fn cacheable(k: Known, session: &Session) -> Option<Known> {
    let holder = k.entry.as_ref().and_then(|p| p.session.as_deref());
    holder.map_or(true, |h| h == session.id()).then_some(k)
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
    if p.flags != flags {
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
        if lock(&self.shared.inner).holding.is_some() && !self.shared.client.is_closed() {
            if let Err(e) = self.release() {
                log::warn!(
                    "baton lock {}: release on drop failed: {e}",
                    self.shared.key
                );
            }
        }
    }
}

impl LockShared {
    /// Waits for this object's turn among the process's contenders for the same
    /// (session, key). Returns `Ok(false)` at the deadline.
    fn wait_local(
        &self,
        session: &Session,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<bool> {
        take_claim(session, &self.key, self.id, deadline, cancel, &self.client)
    }

    fn read(&self) -> Result<Known> {
        let (entry, meta) = self
            .client
            .kv()
            .get_with(&self.key, &QueryOptions::default())?;
        let as_of = entry
            .as_ref()
            .map_or(meta.index, |p| p.modify_index.max(meta.index));
        Ok(Known {
            entry,
            as_of,
            seen_at: Instant::now(),
        })
    }

    fn attempt(&self, session: &Session, known: &Known, value: &[u8]) -> Result<Attempt> {
        let check = match &known.entry {
            Some(p) => KvOp::check_index(&self.key, p.modify_index),
            None => KvOp::check_not_exists(&self.key),
        };
        let ops = [
            check,
            KvOp::lock(&self.key, value, LOCK_FLAG_VALUE, session.id()),
        ];
        match self.client.txn(&ops) {
            Ok(entries) => match entries.into_iter().rev().find(|p| p.key == self.key) {
                Some(p) if p.session.as_deref() == Some(session.id()) => Ok(Attempt::Acquired(p)),
                _ => Ok(Attempt::Unknown(Error::new(
                    ErrorKind::BadResponse,
                    format!(
                        "lock txn on {:?} succeeded without returning our session",
                        self.key
                    ),
                ))),
            },
            Err(e) if e.kind() == ErrorKind::Conflict && !e.txn_errors().is_empty() => {
                let texts: Vec<&str> = e.txn_errors().iter().map(|t| t.what.as_str()).collect();
                if texts.iter().any(|t| t.contains("invalid session")) {
                    session.shared.lose(LostReason::Invalidated);
                    return Err(Error::new(
                        ErrorKind::SessionInvalidated,
                        format!("failed to acquire lock: {}", texts.join("; ")),
                    ));
                }
                // The check (op 0) failing means our view was stale. The lock op (op 1)
                // may fail for lock-delay, or because the key is held (a holder our
                // view missed); anything else will not go away by retrying.
                let check_failed = e.txn_errors().iter().any(|t| t.op_index == 0);
                let lock_what: Vec<&str> = e
                    .txn_errors()
                    .iter()
                    .filter(|t| t.op_index != 0)
                    .map(|t| t.what.as_str())
                    .collect();
                if check_failed {
                    Ok(Attempt::Stale)
                } else if lock_what.iter().all(|t| t.contains("lock delay")) {
                    Ok(Attempt::Delayed)
                } else if lock_what.iter().all(|t| t.contains("already held")) {
                    Ok(Attempt::Stale)
                } else {
                    Err(Error::new(
                        ErrorKind::Conflict,
                        format!(
                            "Consul refused the lock on {:?}: {}",
                            self.key,
                            texts.join("; ")
                        ),
                    ))
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::Timeout
                        | ErrorKind::Connection
                        | ErrorKind::Server
                        | ErrorKind::BadResponse
                ) =>
            {
                Ok(Attempt::Unknown(e))
            }
            Err(e) => Err(e),
        }
    }

    /// The retry time after a lock-delay refusal of a key seen free at `free_at`.
    fn delay_retry(&self, free_at: Instant, tries: u32) -> Instant {
        let known = lock(&self.inner).last_holder.as_ref().and_then(|(_, d)| *d);
        let now = Instant::now();
        match known {
            Some(d) if tries == 0 => (free_at + d + DELAY_MARGIN).max(now),
            _ => {
                let step = DELAY_BACKOFF_START
                    .saturating_mul(1 << tries.min(8))
                    .min(DELAY_BACKOFF_MAX);
                now + step
            }
        }
    }

    /// Remembers a holder other than us, looking its LockDelay up once.
    fn note_holder(&self, holder: &str) {
        {
            let g = lock(&self.inner);
            if g.last_holder.as_ref().is_some_and(|(s, _)| s == holder) {
                return;
            }
        }
        let delay = match self.client.sessions().info(holder) {
            Ok(Some(e)) => Some(e.lock_delay()),
            _ => None,
        };
        lock(&self.inner).last_holder = Some((holder.to_string(), delay));
    }

    fn acquire_remote(
        self: &Arc<Self>,
        session: &Session,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<bool> {
        let core = self.client.core().clone();
        let mut known = lock(&self.inner).known.take();
        let mut sub: Option<KeySub> = None;
        let mut retry_at: Option<Instant> = None;
        let mut delay_tries = 0u32;
        let mut stale_tries = 0u32;
        let passed = || deadline.is_some_and(|d| d <= Instant::now());
        loop {
            core.check_usable()?;
            if cancel.is_some_and(|c| c.is_cancelled()) {
                return Err(Error::new(ErrorKind::Cancelled, "lock acquire cancelled"));
            }
            if !session.is_valid() {
                return Err(lost_while_acquiring(session));
            }
            let k = match known.take() {
                Some(k) => k,
                None => self.read()?,
            };
            if let Some(p) = &k.entry {
                if p.flags != LOCK_FLAG_VALUE {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        format!("{LOCK_CONFLICT} (key {:?} has flags {})", self.key, p.flags),
                    ));
                }
            }
            let holder = k.entry.as_ref().and_then(|p| p.session.clone());
            let free = holder.as_deref().map_or(true, |h| h == session.id());
            let now = Instant::now();
            if free && retry_at.map_or(true, |t| t <= now) {
                let value = lock(&self.inner).value.clone();
                let mut reread = true;
                let granted = match self.attempt(session, &k, &value)? {
                    Attempt::Acquired(mut p) => {
                        // Consul's txn answer for a write carries no Value; the hub is
                        // seeded with this entry, so give it the value we wrote.
                        p.value.get_or_insert(value);
                        Some(p)
                    }
                    Attempt::Unknown(e) => match self.learn_outcome(session) {
                        Ok(Some(p)) => Some(p),
                        Ok(None) if e.kind() == ErrorKind::BadResponse => {
                            // The key is not ours: the odd answer changed nothing.
                            stale_tries += 1;
                            None
                        }
                        outcome => {
                            // Not known to be ours and maybe applied late: undo it in the
                            // background, holding back local contenders meanwhile.
                            let claim = hand_over_claim(session.id(), &self.key, self.id);
                            unlock_later(&self.client, &self.key, value, session, Some(claim));
                            return Err(match outcome {
                                Err(read_err) if e.kind() != ErrorKind::Timeout => read_err,
                                _ => e,
                            });
                        }
                    },
                    Attempt::Stale => {
                        stale_tries += 1;
                        None
                    }
                    Attempt::Delayed => {
                        reread = false;
                        stale_tries = 0;
                        retry_at = Some(self.delay_retry(k.seen_at, delay_tries));
                        delay_tries += 1;
                        None
                    }
                };
                if let Some(p) = granted {
                    let generation = self.hold(session, p, sub.take())?;
                    if self.holding_valid(generation) {
                        return Ok(true);
                    }
                    // Lost before we could return it (the session passed its deadline
                    // while the answer was on its way, or the key changed): never report
                    // a holding that is not valid.
                    if !session.is_valid() {
                        return Err(lost_while_acquiring(session));
                    }
                    stale_tries += 1;
                }
                if reread {
                    // Read again, at once the first time; a server that keeps refusing
                    // views it then confirms is retried with a growing pause.
                    retry_at = None;
                    if passed() {
                        return Ok(false);
                    }
                    if stale_tries > 1 {
                        let pause = STALE_BACKOFF_START
                            .saturating_mul(1 << (stale_tries - 2).min(10))
                            .min(STALE_BACKOFF_MAX);
                        let until = Instant::now() + pause;
                        let wake = deadline.map_or(until, |d| d.min(until));
                        let never = crossbeam_channel::never();
                        wait_signals(&never, Some(wake), cancel, session, &core.closing)?;
                    }
                    continue;
                }
            } else if let Some(h) = &holder {
                if h != session.id() {
                    self.note_holder(h);
                    retry_at = None;
                    delay_tries = 0;
                    stale_tries = 0;
                }
            }
            if passed() {
                lock(&self.inner).known = cacheable(k, session);
                return Ok(false);
            }
            // Wait for the key to change, the retry time, or the deadline.
            let s = match &mut sub {
                Some(s) => s,
                None => sub.insert(KeySub::new(
                    &core,
                    &self.key,
                    Some((k.entry.clone(), k.as_of)),
                    None,
                )?),
            };
            if let Some(v) = s.take_new() {
                if v.as_of > k.as_of || v.entry != k.entry {
                    known = Some(Known {
                        entry: v.entry,
                        as_of: v.as_of,
                        seen_at: v.seen_at,
                    });
                    continue;
                }
            }
            let wake = match (deadline, retry_at) {
                (Some(d), Some(r)) => Some(d.min(r)),
                (d, r) => d.or(r),
            };
            match wait_signals(s.changes(), wake, cancel, session, &core.closing)? {
                Woke::Changed => {
                    known = s.take_new().map(|v| Known {
                        entry: v.entry,
                        as_of: v.as_of,
                        seen_at: v.seen_at,
                    });
                    if known.is_none() {
                        known = Some(k);
                    }
                }
                Woke::Tick => {
                    if passed() {
                        lock(&self.inner).known = cacheable(k, session);
                        return Ok(false);
                    }
                    known = Some(k);
                }
            }
        }
    }

    /// After an attempt without a usable answer: reads the key and returns it if
    /// it carries our session (the server did give it to us).
    fn learn_outcome(&self, session: &Session) -> Result<Option<KvPair>> {
        let k = self.read()?;
        Ok(k.entry
            .filter(|p| p.session.as_deref() == Some(session.id()) && p.flags == LOCK_FLAG_VALUE))
    }

    /// The generation of the current holding if it is still valid, ending it
    /// first if its session was found lost.
    fn held_generation(&self) -> Option<u64> {
        let (session, generation) = {
            let g = lock(&self.inner);
            let h = g.holding.as_ref()?;
            (h.session.clone(), h.generation)
        };
        if !session.is_valid() {
            // The session is lost (maybe another thread is still signalling it):
            // end the holding now rather than report it held meanwhile.
            self.lose(generation, session_lost_reason(&session));
            return None;
        }
        let g = lock(&self.inner);
        g.holding
            .as_ref()
            .is_some_and(|h| h.generation == generation)
            .then_some(generation)
    }

    fn holding_valid(&self, generation: u64) -> bool {
        self.held_generation() == Some(generation)
    }

    /// Records a new holding and starts watching it.
    fn hold(self: &Arc<Self>, session: &Session, pair: KvPair, sub: Option<KeySub>) -> Result<u64> {
        drop(sub);
        let core = self.client.core().clone();
        let generation = {
            let mut g = lock(&self.inner);
            g.generation += 1;
            g.generation
        };
        let sequencer = Sequencer {
            key: self.key.clone(),
            session: session.id().to_string(),
            lock_index: pair.lock_index,
            token: pair.modify_index,
        };
        let weak: Weak<LockShared> = Arc::downgrade(self);
        let sid = session.id().to_string();
        let hook_session = Arc::downgrade(&session.shared);
        let value = lock(&self.inner).value.clone();
        let hook: Hook = Arc::new(move |entry: Option<&KvPair>| {
            let ours = entry.is_some_and(|p| p.session.as_deref() == Some(sid.as_str()));
            if ours {
                return;
            }
            let Some(sh) = weak.upgrade() else { return };
            // Tell a released-by-invalidation key from one taken from us.
            let gone = matches!(sh.client.sessions().info(&sid), Ok(None));
            match (gone, hook_session.upgrade()) {
                (true, Some(s)) => s.lose(LostReason::Invalidated),
                _ => sh.lose(generation, LockLost::KeyChanged),
            }
        });
        let as_of = pair.modify_index;
        let key_sub = match KeySub::new(&core, &self.key, Some((Some(pair), as_of)), Some(hook)) {
            Ok(s) => s,
            Err(e) => {
                // Granted but not recorded: give the key back.
                let claim = hand_over_claim(session.id(), &self.key, self.id);
                unlock_later(&self.client, &self.key, value, session, Some(claim));
                return Err(e);
            }
        };
        let weak: Weak<LockShared> = Arc::downgrade(self);
        let s_weak = Arc::downgrade(&session.shared);
        let session_hook = session.cancel_token().on_cancel(move || {
            let (Some(sh), Some(s)) = (weak.upgrade(), s_weak.upgrade()) else {
                return;
            };
            sh.lose(generation, lost_reason_of(s.state()));
        });
        let current = key_sub.view();
        let held_id = NEXT_LOCK_ID.fetch_add(1, Ordering::Relaxed);
        lock(&core.held_keys).insert(
            held_id,
            (
                self.key.clone(),
                session.id().to_string(),
                lock(&self.inner).value.clone(),
            ),
        );
        {
            let mut g = lock(&self.inner);
            g.holding = Some(Holding {
                held_id,
                session: session.clone(),
                sequencer,
                generation,
                token: CancelToken::new(),
                sub: Some(key_sub),
                _session_hook: Some(session_hook),
            });
            g.last_lost = None;
        }
        // The session may have died, or the hub seen the key change, in between.
        if !session.is_valid() {
            self.lose(generation, session_lost_reason(session));
        } else if let Some(v) = current {
            if !v
                .entry
                .as_ref()
                .is_some_and(|p| p.session.as_deref() == Some(session.id()))
            {
                self.lose(generation, LockLost::KeyChanged);
            }
        }
        Ok(generation)
    }

    /// Ends holding `generation` (idempotent), signalling loss: the holding
    /// ends first, then its token and callbacks fire; logging and the
    /// best-effort unlock come after, off this thread.
    pub(crate) fn lose(&self, generation: u64, reason: LockLost) {
        let (holding, callbacks, value) = {
            let mut g = lock(&self.inner);
            match &g.holding {
                Some(h) if h.generation == generation => {}
                _ => return,
            }
            let h = g.holding.take();
            g.last_lost = Some(reason);
            g.known = None;
            let cbs: Vec<LostCallback> = g.callbacks.iter().map(|(_, c)| c.clone()).collect();
            (h, cbs, g.value.clone())
        };
        let Some(h) = holding else { return };
        lock(&self.client.core().held_keys).remove(&h.held_id);
        h.token.cancel();
        unclaim(h.session.id(), &self.key, self.id);
        let core = self.client.core().clone();
        if reason != LockLost::ClientClosed {
            for cb in callbacks {
                core.post(Box::new(move || cb(reason)));
            }
            let key = self.key.clone();
            core.post(Box::new(move || {
                log::warn!("baton lock {key} lost: {reason:?}")
            }));
        }
        if reason == LockLost::SessionLost(LostReason::DeadlineExceeded) {
            // Consul may still think we hold it: release it as soon as we can reach it.
            unlock_later(&self.client, &self.key, value, &h.session, None);
        }
        drop(h);
    }
}

/// The error of an acquire whose session was lost meanwhile.
fn lost_while_acquiring(session: &Session) -> Error {
    Error::new(
        ErrorKind::SessionInvalidated,
        format!("session {} was lost while acquiring the lock", session.id()),
    )
}

/// Why a holding ends when its session is in `state`.
pub(crate) fn lost_reason_of(state: SessionState) -> LockLost {
    match state {
        SessionState::Lost(LostReason::ClientClosed) => LockLost::ClientClosed,
        SessionState::Lost(r) => LockLost::SessionLost(r),
        _ => LockLost::SessionLost(LostReason::Invalidated),
    }
}

fn session_lost_reason(session: &Session) -> LockLost {
    lost_reason_of(session.state())
}

/// Queues an unlock of `key` by `session` on the clean-up thread, retried until
/// Consul answers (an `unlock` only frees the key while `session` holds it), or,
/// once the session is no longer valid, until Consul must have expired it.
/// `claim` (if any) is given up when the task ends.
pub(crate) fn unlock_later(
    client: &Client,
    key: &str,
    value: Vec<u8>,
    session: &Session,
    claim: Option<ClaimGuard>,
) {
    let op = KvOp::unlock(key, &value, LOCK_FLAG_VALUE, session.id());
    let key = key.to_string();
    let mut owed = Owed::new(session);
    client.clean_up(move |c| {
        let _claim = &claim;
        match c.txn(std::slice::from_ref(&op)) {
            Ok(_) => Next::Done,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::Conflict | ErrorKind::PermissionDenied | ErrorKind::Closed
                ) =>
            {
                Next::Done
            }
            Err(e) => {
                log::debug!("baton lock {key}: unlock after loss failed: {e}");
                owed.failed()
            }
        }
    });
}

/// Blocks on `changes` until a message, `wake`, cancel, session loss or client
/// close.
fn wait_signals(
    changes: &Receiver<()>,
    wake: Option<Instant>,
    cancel: Option<&CancelToken>,
    session: &Session,
    closing: &CancelToken,
) -> Result<Woke> {
    let never = crossbeam_channel::never();
    let cancel_rx = cancel.map_or_else(|| never.clone(), |c| c.receiver());
    let lost = session.cancel_token().receiver();
    let closed = closing.receiver();
    let mut until = wake;
    if let Some(v) = session.valid_until() {
        until = Some(until.map_or(v, |w| w.min(v)));
    }
    let tick = until.map_or_else(crossbeam_channel::never, crossbeam_channel::at);
    select! {
        recv(changes) -> _ => Ok(Woke::Changed),
        recv(cancel_rx) -> _ => Err(Error::new(ErrorKind::Cancelled, "lock acquire cancelled")),
        recv(lost) -> _ => Err(Error::new(
            ErrorKind::SessionInvalidated,
            format!("session {} was lost while acquiring the lock", session.id()),
        )),
        recv(closed) -> _ => Err(Error::new(ErrorKind::Closed, "the baton client is closed")),
        recv(tick) -> _ => {
            if !session.is_valid() {
                return Err(Error::new(
                    ErrorKind::SessionInvalidated,
                    format!("session {} passed its lease deadline while acquiring the lock", session.id()),
                ));
            }
            Ok(Woke::Tick)
        }
    }
}
