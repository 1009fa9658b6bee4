//! `MultiLock`: several KV keys held at once, all or none, each in Go's
//! `api.Lock` format, taken in one Consul transaction.
//!
//! See [`MultiLock`] for the protocol and `docs/src/guide/multilock.md` for
//! the wire format.

mod acquire;
mod holding;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::api::kv::KvPair;
use crate::api::txn::MAX_TXN_OPS;
use crate::client::Client;
use crate::foundations::cancel::{CancelToken, HookGuard};
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::{lock, Turnstile};
use crate::recipes::fence::Sequencer;
use crate::recipes::holding::{hold_lifecycle, Hold, Holder, Lifecycle, Settling};
use crate::recipes::lock::{LockLost, LOCK_FLAG_VALUE};
use crate::runtime::keyhub::KeySub;
use crate::runtime::lease::Session;

/// The most keys one [`MultiLock`] may name: its acquire is one transaction
/// of two operations per key (a `check-index` or `check-not-exists`, then a
/// `lock`), and Consul allows [`MAX_TXN_OPS`] operations per transaction
/// (since 1.14.0; half as many before, where more than 32 keys is refused by
/// the server and reported as `Unsupported`).
pub const MULTI_LOCK_MAX_KEYS: usize = MAX_TXN_OPS / 2;

/// Options of a [`MultiLock`]: the same choices as a [`Lock`](crate::Lock)'s
/// [`LockOptions`](crate::LockOptions), applied to every key.
#[derive(Debug, Clone, Default)]
pub struct MultiLockOptions {
    value: Vec<u8>,
    session: Option<Session>,
    flags: Option<u64>,
}

impl MultiLockOptions {
    /// Default options: an empty value, the client's default session, Go's
    /// lock flag.
    pub fn new() -> MultiLockOptions {
        MultiLockOptions::default()
    }

    /// The value written to every key on acquire and sent again on release
    /// (Go's `api.Lock` resends its value the same way), so readers of any one
    /// key can tell who holds it.
    pub fn value(mut self, value: impl Into<Vec<u8>>) -> Self {
        self.value = value.into();
        self
    }

    /// Hold the keys with this session instead of the client's default one
    /// (its loss then ends the holding without a replacement session).
    pub fn session(mut self, session: Session) -> Self {
        self.session = Some(session);
        self
    }

    /// The flags every key is written with, and that an existing key must
    /// carry to be taken. The default, Go's [`LOCK_FLAG_VALUE`], is what makes
    /// a Go `api.Lock` or a baton [`Lock`](crate::Lock) on any one of the keys
    /// and this multi-key lock exclude each other; `0` shares keys with
    /// scripts that write lock keys without flags.
    pub fn flags(mut self, flags: u64) -> Self {
        self.flags = Some(flags);
        self
    }
}

/// What a multi-key lock keeps with a holding.
pub(crate) struct MultiHeld {
    /// Process-unique ids of the keys in `Core::held_keys` (so `close`
    /// releases them before destroying the session).
    held_ids: Vec<u64>,
    sequencer: Sequencer,
    /// The entries the acquire wrote, in the order of the keys.
    entries: Vec<KvPair>,
    /// One watch per key; a change that is not ours ends the holding.
    _subs: Vec<KeySub>,
    _session_hook: Option<HookGuard>,
}

struct Inner {
    value: Vec<u8>,
    life: Lifecycle<LockLost, MultiHeld>,
    /// The last other session seen holding each key, and its LockDelay if
    /// looked up (for the retry after a lock-delay refusal).
    last_holders: Vec<Option<(String, Option<Duration>)>>,
    /// Every key as our last clean release left it (the unlock transaction's answer): the
    /// next acquire's transaction is checked against these views without reading the keys
    /// first, so a warm acquire is one request. Taken by that acquire.
    warm: Option<Vec<Known>>,
    /// When a try that found every key free but was refused for lock-delay may try again,
    /// if the last try ended so (for a future's wait: `aio`).
    retry_at: Option<Instant>,
}

pub(crate) struct MultiShared {
    client: Client,
    /// Checked, de-duplicated and sorted.
    keys: Vec<String>,
    explicit_session: Option<Session>,
    flags: u64,
    /// The owner of this object's local claims (see `runtime::claim`).
    id: u64,
    inner: Mutex<Inner>,
    /// Serialises acquires of this object.
    acquiring: Turnstile,
}

/// Claim owners of multi-key locks: apart from locks' (counted from 1),
/// semaphores' (from 2^62) and handed-over claims' (from 2^63).
static NEXT_MULTI_ID: AtomicU64 = AtomicU64::new(1 << 61);

/// Several keys held together: acquired all at once or not at all, in one
/// Consul transaction, and lost together.
///
/// Use it where a piece of work needs more than one resource at a time (a
/// transfer between two accounts, a job that needs two machines). Taking
/// single locks one after another (Curator's `InterProcessMultiLock`,
/// Redisson's `RMultiLock`) can leave a process holding some of them while it
/// waits for the rest; here the transaction either takes every key or none,
/// so there is never a partial holding and no acquisition order to agree on.
///
/// On the wire each key is written exactly as Go's `api.Lock` writes its key
/// (the lock's value, flags [`LOCK_FLAG_VALUE`], the session), so a Go
/// `api.Lock` or a baton [`Lock`](crate::Lock) on any one of the keys and a
/// `MultiLock` exclude each other. The acquire transaction puts a
/// `check-index` (or `check-not-exists`) of each key in front of the `lock`
/// operations, so a key with foreign flags is never overwritten: it is a
/// `Conflict`, as for a lock.
///
/// While any key is held elsewhere (or refused for lock-delay), an acquire
/// waits on the client's key hub for a change of any of its keys (or the
/// end of the lock-delay) and tries again, holding nothing meanwhile.
///
/// Loss of any key (its session changed or cleared, the key deleted or
/// rewritten by someone else, the session invalidated or past its local
/// deadline) ends the whole holding, as for a [`Lock`](crate::Lock):
/// [`MultiLock::is_held`] turns false, callbacks run once, waiters and the
/// holding's cancel token wake, and the keys still carrying the session are
/// released in the background.
///
/// Dropping a held `MultiLock` releases it.
pub struct MultiLock {
    shared: Arc<MultiShared>,
    /// A handle of the async API's step threads (`view`): its drop gives nothing back.
    view: bool,
}

impl fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLock")
            .field("keys", &self.shared.keys)
            .field("held", &lock(&self.shared.inner).life.held().is_some())
            .finish()
    }
}

/// The keys of a multi-key lock, checked by the key rule, de-duplicated and
/// sorted; an `InvalidArgument` error naming the problem otherwise.
fn check_keys(keys: &[&str]) -> Result<Vec<String>> {
    if keys.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            "a multi-key lock needs at least one key, got none",
        ));
    }
    let mut checked = Vec::with_capacity(keys.len());
    for k in keys {
        checked.push(crate::foundations::keys::key(k)?.to_string());
    }
    checked.sort();
    checked.dedup();
    if checked.len() == 1 && keys.len() > 1 {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "a multi-key lock needs at least two different keys, got {} naming only {:?} \
                 (use Client::lock for one key)",
                keys.len(),
                checked[0]
            ),
        ));
    }
    if checked.len() > MULTI_LOCK_MAX_KEYS {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "a multi-key lock holds at most {MULTI_LOCK_MAX_KEYS} keys (its acquire is one \
                 transaction of two operations per key, and Consul allows {MAX_TXN_OPS}), got \
                 {}",
                checked.len()
            ),
        ));
    }
    Ok(checked)
}

impl Client {
    /// A lock on all of `keys` at once, held with the client's default
    /// session and an empty value (see [`MultiLock`]). The keys follow the
    /// key rule of every API; duplicates are dropped and the rest sorted.
    ///
    /// Errors: kind `InvalidArgument` for no keys, a list whose keys are all
    /// the same one, more than [`MULTI_LOCK_MAX_KEYS`] keys, or a bad key.
    pub fn multi_lock(&self, keys: &[&str]) -> Result<MultiLock> {
        self.multi_lock_with(keys, MultiLockOptions::new())
    }

    /// [`Client::multi_lock`] with options (value, session, flags).
    pub fn multi_lock_with(&self, keys: &[&str], options: MultiLockOptions) -> Result<MultiLock> {
        self.core().check_usable()?;
        let keys = check_keys(keys)?;
        let n = keys.len();
        Ok(MultiLock {
            shared: Arc::new(MultiShared {
                client: self.clone(),
                keys,
                explicit_session: options.session,
                flags: options.flags.unwrap_or(LOCK_FLAG_VALUE),
                id: NEXT_MULTI_ID.fetch_add(1, Ordering::Relaxed),
                inner: Mutex::new(Inner {
                    value: options.value,
                    life: Lifecycle::new(
                        &self.core().transport.metrics,
                        crate::foundations::metrics::Recipe::MultiLock,
                    ),
                    last_holders: vec![None; n],
                    warm: None,
                    retry_at: None,
                }),
                acquiring: Turnstile::default(),
            }),
            view: false,
        })
    }
}

impl MultiLock {
    /// Another handle on this multi-key lock whose drop releases nothing: the async API's
    /// step threads act through it while the future borrows `self`.
    pub(crate) fn view(&self) -> MultiLock {
        MultiLock {
            shared: self.shared.clone(),
            view: true,
        }
    }

    /// When a try refused for lock-delay (every key free) may try again, if the last try
    /// ended so.
    pub(crate) fn retry_hint(&self) -> Option<Instant> {
        lock(&self.shared.inner).retry_at
    }

    pub(crate) fn shared_client(&self) -> &Client {
        &self.shared.client
    }

    /// The keys, de-duplicated and sorted (the order of the transaction's
    /// operations).
    pub fn keys(&self) -> &[String] {
        &self.shared.keys
    }

    /// The value written to every key by the next acquire (and resent on
    /// release).
    pub fn value(&self) -> Vec<u8> {
        lock(&self.shared.inner).value.clone()
    }

    /// The session of the current holding, or the one the next acquire will
    /// use if it was given in the options.
    pub fn session(&self) -> Option<Session> {
        let g = lock(&self.shared.inner);
        g.life
            .held()
            .map(|h| h.session.clone())
            .or_else(|| self.shared.explicit_session.clone())
    }

    /// Acquires every key, waiting up to `timeout` (`None` waits forever,
    /// `Some(Duration::ZERO)` tries once). Returns `Ok(true)` when all are
    /// held, `Ok(false)` when the timeout passed first — holding none.
    ///
    /// Errors: kind `Conflict` if a key exists with other flags (text
    /// `Existing key does not match lock use`) or this object is already held
    /// (`Lock already held`); `Cancelled` when `cancel` fires; `Closed` when
    /// the client closes; `SessionInvalidated` when an explicitly given
    /// session is lost (the default session is replaced instead);
    /// `Unsupported` on a Consul before 1.6.2 with flags above 2^53 (such a
    /// server rounds them in a transaction), or more than 32 keys before
    /// Consul 1.14; transport errors as they come.
    ///
    /// Cancelled means nothing is held: if `cancel` fires before this
    /// returns, the answer is `Cancelled`, and a transaction that may have
    /// been applied meanwhile is undone.
    pub fn acquire(&self, timeout: Option<Duration>, cancel: Option<&CancelToken>) -> Result<bool> {
        let settling = Settling::start(crate::foundations::metrics::Recipe::MultiLock);
        let result = self.acquire_unjudged(timeout, cancel);
        let core = self.shared.client.core();
        settling.settle(
            core,
            "multi-key lock acquire",
            (timeout, cancel),
            result,
            || self.abandon(),
        )
    }

    fn acquire_unjudged(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<bool> {
        let sh = &self.shared;
        sh.client.core().check_usable()?;
        let _serial = sh.acquiring.enter();
        if self.is_held() {
            return Err(Error::new(ErrorKind::Conflict, "Lock already held"));
        }
        let deadline = crate::foundations::scope::deadline_after(timeout);
        // Every request is bounded by what is left of the timeout (a try-once
        // acquire gets the client's request timeout for its one attempt).
        let _scope = crate::foundations::scope::deadline(
            deadline.filter(|_| timeout != Some(Duration::ZERO)),
        );
        sh.acquire_in_turn(deadline, cancel)
    }

    /// Tries once: `acquire(Some(Duration::ZERO), None)`.
    pub fn try_acquire(&self) -> Result<bool> {
        self.acquire(Some(Duration::ZERO), None)
    }

    /// Releases every key in one transaction of `unlock` operations (each key
    /// keeps its value and flags and loses its session; no lock-delay
    /// applies). Returns `Ok(false)` if this object did not hold the keys, or
    /// Consul says some of them were no longer ours (the others are released
    /// all the same). Callbacks are not called for a release.
    ///
    /// The holding ends at once, whatever Consul answers. If the request
    /// fails, the error says so and the release goes on in the background
    /// until Consul answers, and [`Client::close`] makes it too.
    pub fn release(&self) -> Result<bool> {
        self.shared.release()
    }

    /// Whether every key is held: acquired, not released, not lost, and the
    /// session's local lease deadline not passed (checked without network).
    pub fn is_held(&self) -> bool {
        self.shared.is_held()
    }

    /// Why the last holding ended (`None` while held or before the first
    /// acquire). The reasons are a lock's: `KeyChanged` when any one key
    /// stopped carrying our session.
    pub fn last_lost(&self) -> Option<LockLost> {
        Holder::last_lost(&*self.shared)
    }

    /// Why [`MultiLock::release`] found nothing to release, in words (the
    /// text the bindings' not-held errors carry).
    pub fn not_held_message(&self) -> String {
        Holder::not_held_message(&*self.shared, &self.describe_keys())
    }

    fn describe_keys(&self) -> String {
        format!("multi-key lock {:?}", self.shared.keys)
    }

    /// The fencing sequencer of the current holding, for the first key (in
    /// sorted order): its `token` is the ModifyIndex of the acquiring
    /// transaction, which every key shares (one raft write), so it orders
    /// holdings of the whole set; [`Client::check_sequencer`] and
    /// [`Client::guarded_txn`] check that first key. [`MultiLock::sequencers`]
    /// gives one per key.
    pub fn sequencer(&self) -> Option<Sequencer> {
        if !self.is_held() {
            return None;
        }
        lock(&self.shared.inner)
            .life
            .held()
            .map(|h| h.extra.sequencer.clone())
    }

    /// One sequencer per key of the current holding (the order of
    /// [`MultiLock::keys`]), for storage that fences on a particular key. They
    /// are read from the entries the acquire wrote.
    pub fn sequencers(&self) -> Vec<Sequencer> {
        if !self.is_held() {
            return Vec::new();
        }
        let g = lock(&self.shared.inner);
        let Some(h) = g.life.held() else {
            return Vec::new();
        };
        h.extra
            .entries
            .iter()
            .map(|p| Sequencer {
                key: p.key.clone(),
                session: h.session.id().to_string(),
                lock_index: p.lock_index,
                token: h.extra.sequencer.token,
            })
            .collect()
    }

    crate::recipes::holding::holder_methods!(MultiLock, LockLost);
}

impl Hold for MultiLock {
    hold_lifecycle!(LockLost);
    fn acquire(&self, timeout: Option<Duration>, cancel: Option<&CancelToken>) -> Result<bool> {
        MultiLock::acquire(self, timeout, cancel)
    }
    fn release(&self) -> Result<bool> {
        MultiLock::release(self)
    }
    fn is_held(&self) -> bool {
        MultiLock::is_held(self)
    }
    fn sequencer(&self) -> Option<Sequencer> {
        MultiLock::sequencer(self)
    }
    fn describe(&self) -> String {
        self.describe_keys()
    }
}

impl Drop for MultiLock {
    fn drop(&mut self) {
        if !self.view
            && lock(&self.shared.inner).life.held().is_some()
            && !self.shared.client.is_closed()
        {
            if let Err(e) = self.release() {
                log::warn!(
                    "baton multi-key lock {:?}: release on drop failed: {e}",
                    self.shared.keys
                );
            }
        }
    }
}

/// A state of one key learnt by a read or the key hub: the entry, the raft
/// index it is current as of, and when it was learnt.
#[derive(Debug, Clone)]
pub(crate) struct Known {
    entry: Option<KvPair>,
    as_of: u64,
    seen_at: Instant,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked_deduplicated_and_sorted() {
        assert_eq!(
            check_keys(&["b", "/a", "b", "c"]).unwrap(),
            vec!["a".to_string(), "b".into(), "c".into()]
        );
        let e = check_keys(&[]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("none"), "{e}");
        let e = check_keys(&["a", "/a", "a"]).unwrap_err();
        assert!(e.to_string().contains("two different keys"), "{e}");
        let many: Vec<String> = (0..=MULTI_LOCK_MAX_KEYS).map(|i| format!("k{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let e = check_keys(&refs).unwrap_err();
        assert!(e.to_string().contains("at most 64 keys"), "{e}");
        assert!(check_keys(&refs[..MULTI_LOCK_MAX_KEYS]).is_ok());
        assert!(check_keys(&["a", "//b"]).is_err());
    }
}
