//! `RwLock`: many readers or one writer on a prefix, in arrival order, so a
//! waiting writer is not starved by a stream of readers.
//!
//! See [`RwLock`] for the protocol and `docs/src/guide/rwlock.md` for the
//! wire format. The acquire, the holding and the give-back live in
//! `acquire.rs`.

mod acquire;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::client::Client;
use crate::foundations::cancel::{CancelToken, HookGuard};
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::{lock, Turnstile};
use crate::recipes::fence::Sequencer;
use crate::recipes::holding::{hold_lifecycle, Hold, Holder, Lifecycle, Settling};
use crate::recipes::lock::LockLost;
use crate::runtime::keyhub::KeySub;
use crate::runtime::lease::Session;

/// The flags of every contender key of a read-write lock (`rwlock` in
/// ASCII, as a big-endian number): what tells its contenders from other keys
/// under the prefix, which make an acquire a `Conflict` rather than being
/// overwritten or ignored. It is below 2^53, so a Consul before 1.6.2, which
/// passes a transaction's numbers through a float, keeps it exact.
pub const RW_LOCK_FLAG_VALUE: u64 = 0x7277_6c6f_636b;

/// Which side of a read-write lock a handle takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RwMode {
    /// Shared: any number of readers hold at once, while no writer that
    /// arrived before them is waiting or holding.
    Read,
    /// Exclusive: one writer holds, alone, once every contender that arrived
    /// before it has left.
    Write,
}

impl RwMode {
    /// The value of a contender key of this mode: `read` or `write`, which
    /// is all other contenders need to know about it.
    pub fn as_str(self) -> &'static str {
        match self {
            RwMode::Read => "read",
            RwMode::Write => "write",
        }
    }

    /// The mode a contender key's value names, if any (`None` for anything
    /// but `read` and `write`).
    pub fn parse(value: &[u8]) -> Option<RwMode> {
        match value {
            b"read" => Some(RwMode::Read),
            b"write" => Some(RwMode::Write),
            _ => None,
        }
    }
}

impl fmt::Display for RwMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a read-write lock keeps with a holding.
pub(crate) struct RwHeld {
    /// The contender key this holding is bound to.
    key: String,
    sequencer: Sequencer,
    /// A change of the key that is not ours ends the holding.
    _sub: KeySub,
    _session_hook: Option<HookGuard>,
}

pub(crate) struct RwShared {
    client: Client,
    /// The prefix, without a trailing `/`; contender keys are `<dir>/<name>`.
    dir: String,
    mode: RwMode,
    life: Mutex<Lifecycle<LockLost, RwHeld>>,
    /// Serialises acquires of this object.
    acquiring: Turnstile,
    /// The contender key an async wait keeps between its tries (`aio`), until
    /// a try holds with it or the wait ends ([`RwLock::end_wait`]).
    kept: Mutex<Option<Contender>>,
    /// When the last acquire, which found a dead holder's key kept back for its
    /// lock-delay, should look again (the async wait's retry time).
    retry_at: Mutex<Option<std::time::Instant>>,
}

/// A contender key of ours that may exist: deleted unless a holding takes it.
pub(crate) struct Contender {
    key: String,
    session: Session,
    /// Its CreateIndex (its place in the queue), once Consul told it.
    created: Option<u64>,
}

/// Process-wide counter naming contender keys (with the session and the
/// process id, so two handles never share a key).
static NEXT_CONTENDER: AtomicU64 = AtomicU64::new(1);

/// One side (reader or writer) of a read-write lock on a prefix: readers
/// share it, a writer holds it alone, and contenders are served in the
/// order they arrived, so a writer waiting behind readers is not overtaken
/// by readers that come after it.
///
/// Use it where many processes read a shared resource and a few change it
/// (a configuration several workers load, a cache one process rebuilds):
/// readers do not exclude each other, as they would with a plain
/// [`Lock`](crate::Lock). It is Curator's `InterProcessReadWriteLock`,
/// etcd's `RWMutex` and Redisson's `RReadWriteLock` on Consul.
///
/// Each acquire creates its own contender key under the prefix, bound to the
/// client's default session and valued `read` or `write`, in one transaction
/// (`check-not-exists`, then `lock`); the key's CreateIndex is its place in
/// the queue. A reader holds once no writer has an earlier place; a writer
/// holds once no contender at all has. Until then the acquire waits on a
/// blocking query of the prefix. The key is deleted on release, and by an
/// acquire that times out or is cancelled (in the background, and by
/// [`Client::close`], when Consul does not answer).
///
/// Loss — the contender key deleted or no longer carrying the session, the
/// session invalidated or past its local deadline — ends the holding as for
/// a [`Lock`](crate::Lock): [`RwLock::is_held`] turns false, callbacks run
/// once, waiters and the holding's cancel token wake.
///
/// Dropping a held `RwLock` releases it.
pub struct RwLock {
    shared: Arc<RwShared>,
    /// A handle of the async layer's step threads: its drop gives back nothing.
    view: bool,
}

impl fmt::Debug for RwLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwLock")
            .field("prefix", &self.shared.dir)
            .field("mode", &self.shared.mode)
            .field("held", &lock(&self.shared.life).held().is_some())
            .finish()
    }
}

impl Client {
    /// The reader side of the read-write lock on `prefix` (see [`RwLock`]);
    /// each call is an independent handle with its own contender key.
    ///
    /// Errors: kind `InvalidArgument` for an empty or malformed prefix.
    pub fn read_lock(&self, prefix: &str) -> Result<RwLock> {
        self.rw_lock(prefix, RwMode::Read)
    }

    /// The writer side of the read-write lock on `prefix` (see [`RwLock`]).
    ///
    /// Errors: kind `InvalidArgument` for an empty or malformed prefix.
    pub fn write_lock(&self, prefix: &str) -> Result<RwLock> {
        self.rw_lock(prefix, RwMode::Write)
    }

    /// A handle of the read-write lock on `prefix` in `mode` (what
    /// [`Client::read_lock`] and [`Client::write_lock`] make), for code that
    /// picks the side at run time.
    pub fn rw_lock(&self, prefix: &str, mode: RwMode) -> Result<RwLock> {
        self.core().check_usable()?;
        let p = crate::foundations::keys::nonempty_prefix("read-write lock prefix", prefix)?;
        let dir = p.trim_end_matches('/');
        if dir.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("invalid read-write lock prefix {prefix:?}: it names no key"),
            ));
        }
        Ok(RwLock {
            shared: Arc::new(RwShared {
                client: self.clone(),
                dir: dir.to_string(),
                mode,
                life: Mutex::new(Lifecycle::new(
                    &self.core().transport.metrics,
                    crate::foundations::metrics::Recipe::RwLock,
                )),
                acquiring: Turnstile::default(),
                kept: Mutex::new(None),
                retry_at: Mutex::new(None),
            }),
            view: false,
        })
    }
}

impl RwLock {
    /// The prefix, without its trailing `/`: contender keys live under
    /// `<prefix>/`.
    pub fn prefix(&self) -> &str {
        &self.shared.dir
    }

    /// Whether this handle reads or writes.
    pub fn mode(&self) -> RwMode {
        self.shared.mode
    }

    /// The contender key of the current holding (`None` when not held), for
    /// logs and for fencing by hand.
    pub fn key(&self) -> Option<String> {
        if !self.is_held() {
            return None;
        }
        lock(&self.shared.life).held().map(|h| h.extra.key.clone())
    }

    /// The session of the current holding.
    pub fn session(&self) -> Option<Session> {
        lock(&self.shared.life).held().map(|h| h.session.clone())
    }

    /// Acquires this side, waiting up to `timeout` (`None` waits forever,
    /// `Some(Duration::ZERO)` looks once). Returns `Ok(true)` when held,
    /// `Ok(false)` when the timeout passed first — with the contender key
    /// deleted, so nothing is left waiting in the queue.
    ///
    /// Errors: kind `Conflict` if a key under the prefix is not a contender
    /// of a read-write lock (other flags, or a value other than `read` or
    /// `write`), or this handle is already held (`Lock already held`);
    /// `Cancelled` when `cancel` fires (nothing is held, the key is
    /// deleted); `Closed` when the client closes; transport errors as they
    /// come. The loss of the default session while waiting starts over with
    /// the new one (at the back of the queue).
    pub fn acquire(&self, timeout: Option<Duration>, cancel: Option<&CancelToken>) -> Result<bool> {
        self.acquire_keeping(timeout, cancel, false)
    }

    /// The acquire; with `keep`, a contender key that did not get its turn is
    /// kept for the next try of an async wait instead of deleted.
    fn acquire_keeping(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
        keep: bool,
    ) -> Result<bool> {
        let settling = Settling::start(crate::foundations::metrics::Recipe::RwLock);
        let mut left: Option<Contender> = None;
        let result = self.acquire_unjudged(timeout, cancel, &mut left, keep);
        if !matches!(result, Ok(true)) {
            if let Some(c) = left {
                self.shared.remove_contender(&c.key, &c.session);
            }
        }
        let core = self.shared.client.core();
        settling.settle(
            core,
            "read-write lock acquire",
            (timeout, cancel),
            result,
            || self.abandon(),
        )
    }

    fn acquire_unjudged(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
        left: &mut Option<Contender>,
        keep: bool,
    ) -> Result<bool> {
        let sh = &self.shared;
        sh.client.core().check_usable()?;
        let _serial = sh.acquiring.enter();
        if keep {
            *left = lock(&sh.kept).take();
        }
        if self.is_held() {
            return Err(Error::new(ErrorKind::Conflict, "Lock already held"));
        }
        let deadline = crate::foundations::scope::deadline_after(timeout);
        let _scope = crate::foundations::scope::deadline(
            deadline.filter(|_| timeout != Some(Duration::ZERO)),
        );
        let result = sh.acquire_in_turn(deadline, cancel, left);
        if keep && matches!(result, Ok(false)) {
            *lock(&sh.kept) = left.take();
        }
        result
    }

    /// Another handle on this side whose drop gives back nothing: the async
    /// API's step threads act through it while the future borrows `self`.
    pub(crate) fn view(&self) -> RwLock {
        RwLock {
            shared: self.shared.clone(),
            view: true,
        }
    }

    /// The client it talks through.
    pub(crate) fn shared_client(&self) -> &Client {
        &self.shared.client
    }

    /// Calls `hook` when anything under the prefix changes (a contender gone
    /// or come), until the returned watch drops.
    pub(crate) fn watch_changes(
        &self,
        hook: crate::runtime::watch::ChangeHook,
    ) -> Result<crate::runtime::watch::Watch> {
        let watch = self
            .shared
            .client
            .watch_prefix(&format!("{}/", self.shared.dir))?;
        watch.on_change(hook);
        Ok(watch)
    }

    /// One try of an async wait: [`RwLock::try_acquire`] with `cancel`, except
    /// that a contender key that did not get its turn stays in the queue for
    /// the next try, until [`RwLock::end_wait`].
    pub(crate) fn try_keeping(&self, cancel: &CancelToken) -> Result<bool> {
        self.acquire_keeping(Some(Duration::ZERO), Some(cancel), true)
    }

    /// When a try that found a dead holder's key kept back for its lock-delay
    /// should look again, if the last try was such.
    pub(crate) fn retry_hint(&self) -> Option<std::time::Instant> {
        *lock(&self.shared.retry_at)
    }

    /// The session of the holding, else that of the contender key an async
    /// wait keeps (its loss ends the wait's current try).
    pub(crate) fn session_now(&self) -> Option<Session> {
        self.session()
            .or_else(|| lock(&self.shared.kept).as_ref().map(|c| c.session.clone()))
    }

    /// Ends an async wait: deletes the contender key it kept, if any.
    pub(crate) fn end_wait(&self) {
        let sh = &self.shared;
        let _serial = sh.acquiring.enter();
        if let Some(c) = lock(&sh.kept).take() {
            sh.remove_contender(&c.key, &c.session);
        }
    }

    /// Looks once: `acquire(Some(Duration::ZERO), None)`.
    pub fn try_acquire(&self) -> Result<bool> {
        self.acquire(Some(Duration::ZERO), None)
    }

    /// Releases: deletes the contender key if it still carries our session
    /// (one transaction, `check-session` then `delete`), letting the next
    /// contenders in. Returns `Ok(false)` if this handle did not hold, or
    /// the key was no longer ours (it is deleted all the same). Callbacks
    /// are not called for a release.
    ///
    /// The holding ends at once, whatever Consul answers; if the request
    /// fails, the error says so and the delete goes on in the background
    /// until Consul answers ([`Client::close`] makes it too).
    pub fn release(&self) -> Result<bool> {
        self.shared.release()
    }

    /// Whether this side is held: acquired, not released, not lost, and the
    /// session's local lease deadline not passed (checked without network).
    pub fn is_held(&self) -> bool {
        self.shared.is_held()
    }

    /// Why the last holding ended (`None` while held or before the first
    /// acquire): a lock's reasons, `KeyChanged` when the contender key was
    /// deleted or rewritten by someone else.
    pub fn last_lost(&self) -> Option<LockLost> {
        Holder::last_lost(&*self.shared)
    }

    /// Why [`RwLock::release`] found nothing to release, in words.
    pub fn not_held_message(&self) -> String {
        Holder::not_held_message(&*self.shared, &self.shared.what())
    }

    /// The fencing sequencer of the current holding: the contender key, the
    /// session, its LockIndex (1: each key is locked once) and as `token`
    /// the key's CreateIndex — the raft index that placed it in the queue,
    /// so later holdings of either side carry larger tokens than earlier
    /// ones they had to wait for. [`Client::check_sequencer`] and
    /// [`Client::guarded_txn`] check the contender key. Readers holding at
    /// once have different tokens: fence writes, not reads, with it.
    pub fn sequencer(&self) -> Option<Sequencer> {
        if !self.is_held() {
            return None;
        }
        lock(&self.shared.life)
            .held()
            .map(|h| h.extra.sequencer.clone())
    }

    crate::recipes::holding::holder_methods!(RwLock, LockLost);
}

impl Hold for RwLock {
    hold_lifecycle!(LockLost);
    fn acquire(&self, timeout: Option<Duration>, cancel: Option<&CancelToken>) -> Result<bool> {
        RwLock::acquire(self, timeout, cancel)
    }
    fn release(&self) -> Result<bool> {
        RwLock::release(self)
    }
    fn is_held(&self) -> bool {
        RwLock::is_held(self)
    }
    fn sequencer(&self) -> Option<Sequencer> {
        RwLock::sequencer(self)
    }
    fn describe(&self) -> String {
        self.shared.what()
    }
}

impl Drop for RwLock {
    fn drop(&mut self) {
        if !self.view && lock(&self.shared.life).held().is_some() && !self.shared.client.is_closed()
        {
            if let Err(e) = self.release() {
                log::warn!("baton {}: release on drop failed: {e}", self.shared.what());
            }
        }
        if !self.view {
            if let Some(c) = lock(&self.shared.kept).take() {
                self.shared.remove_contender(&c.key, &c.session);
            }
        }
    }
}

/// The name of a new contender key under `dir` for `session`: unique per
/// session, process and acquire.
fn contender_key(dir: &str, session: &Session) -> String {
    let n = NEXT_CONTENDER.fetch_add(1, Ordering::Relaxed);
    format!("{dir}/{}.{}.{n}", session.id(), std::process::id())
}

/// Whether contender `mine` (its mode and queue position) may hold, given
/// the live contenders `others` (mode and position each; `mine` may be among
/// them): a reader once no writer is ahead of it, a writer once nobody is.
pub(crate) fn may_hold(mine: (RwMode, (u64, &str)), others: &[(RwMode, (u64, &str))]) -> bool {
    let (mode, pos) = mine;
    others.iter().all(|(m, p)| {
        *p >= pos
            || match mode {
                RwMode::Read => *m == RwMode::Read,
                RwMode::Write => false,
            }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_share_and_writers_wait_their_turn() {
        use RwMode::{Read, Write};
        let q = [
            (Read, (5, "a")),
            (Read, (6, "b")),
            (Write, (7, "c")),
            (Read, (8, "d")),
        ];
        assert!(may_hold(q[0], &q));
        assert!(may_hold(q[1], &q));
        assert!(!may_hold(q[2], &q), "a writer waits for earlier readers");
        assert!(
            !may_hold(q[3], &q),
            "a reader waits behind a waiting writer"
        );
        assert!(may_hold(q[2], &q[2..]));
        assert!(!may_hold(q[3], &q[2..]));
        assert!(may_hold(q[3], &q[3..]));
    }

    #[test]
    fn mode_values_round_trip() {
        for m in [RwMode::Read, RwMode::Write] {
            assert_eq!(RwMode::parse(m.as_str().as_bytes()), Some(m));
        }
        assert_eq!(RwMode::parse(b"READ"), None);
    }
}
