//! The acquire of a [`RwLock`](super::RwLock) — its contender key created in
//! one transaction, then the queue under the prefix judged on every change of
//! it (a blocking query) — and its holding: recorded and watched on the key
//! hub, ended by a release or a loss, its key deleted.

use std::sync::{Arc, Weak};
use std::time::Instant;

use super::{contender_key, may_hold, Contender, RwHeld, RwMode, RwShared, RW_LOCK_FLAG_VALUE};
use crate::api::kv::KvPair;
use crate::api::txn::KvOp;
use crate::client::OwedRun;
use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;
use crate::recipes::fence::Sequencer;
use crate::recipes::holding::key_loss_hook;
use crate::recipes::holding::{Holder, Lifecycle, Loss};
use crate::recipes::lock::LockLost;
use crate::recipes::lock_delay::{under_lock_delay, LOCK_DELAY_RECHECK};
use crate::runtime::keyhub::KeySub;
use crate::runtime::lease::{LostReason, Session};
use crate::runtime::ride_out::RideOut;
use crate::runtime::watch::Watch;
use crate::transport::conn::Conn;

/// A contender's place in the queue: its mode, CreateIndex and key.
type Place<'a> = (RwMode, (u64, &'a str));

/// The text of the error for a key under the prefix that is not a contender.
const RW_CONFLICT: &str = "Existing key does not match lock use";

impl RwShared {
    /// What the holding is, in messages: `write lock "cfg"`.
    pub(super) fn what(&self) -> String {
        format!("{} lock {:?}", self.mode, self.dir)
    }

    /// The acquire inside the call's deadline scope: the session, then the
    /// contender key and the queue. `left` names a contender key that may
    /// exist and must be deleted unless the call ends holding; one it names
    /// on entry (kept by an async wait's last try) is used again while its
    /// session lives.
    pub(super) fn acquire_in_turn(
        self: &Arc<Self>,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
        left: &mut Option<Contender>,
    ) -> Result<bool> {
        let past_deadline = |e: &Error| {
            e.kind() == ErrorKind::Timeout && deadline.is_some_and(|d| d <= Instant::now())
        };
        let core = self.client.core().clone();
        loop {
            let mut ride = RideOut::new(&core, "read-write lock acquire", deadline, cancel);
            let session = match ride.run(|| self.client.default_session()) {
                Ok(s) => s,
                Err(e) if past_deadline(&e) => return Ok(false),
                Err(e) => return Err(e),
            };
            if !session.is_valid() {
                continue;
            }
            match self.acquire_on(&session, deadline, cancel, left) {
                Err(e) if e.kind() == ErrorKind::SessionInvalidated && !session.is_valid() => {
                    // The default session died while we waited: its key is
                    // dead, queue again with the new one.
                    if let Some(c) = left.take() {
                        self.remove_contender(&c.key, &c.session);
                    }
                    continue;
                }
                Err(e) if past_deadline(&e) => return Ok(false),
                other => return other,
            }
        }
    }

    fn acquire_on(
        self: &Arc<Self>,
        session: &Session,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
        left: &mut Option<Contender>,
    ) -> Result<bool> {
        let core = self.client.core().clone();
        let mut ride =
            RideOut::new(&core, "read-write lock acquire", deadline, cancel).on_session(session);
        let list_prefix = format!("{}/", self.dir);
        // A key kept from an async wait's last try, when still of this session.
        if let Some(c) = left.take_if(|c| c.session.id() != session.id()) {
            self.remove_contender(&c.key, &c.session);
        }
        let value = self.mode.as_str().as_bytes();
        let (key, created) = loop {
            if let Some(c) = left.as_ref() {
                break (c.key.clone(), c.created);
            }
            let key = contender_key(&self.dir, session);
            *left = Some(Contender {
                key: key.clone(),
                session: session.clone(),
                created: None,
            });
            let ops = [
                KvOp::check_not_exists(&key),
                KvOp::lock(&key, value, RW_LOCK_FLAG_VALUE, session.id()),
            ];
            match ride.run(|| {
                if !session.is_valid() {
                    return Err(lost_while_acquiring(session));
                }
                self.client.conn().txn(&ops)
            }) {
                Ok(entries) => {
                    let created = entries
                        .into_iter()
                        .find(|p| p.key == key)
                        .map(|p| p.create_index);
                    if let Some(c) = left.as_mut() {
                        c.created = created;
                    }
                    break (key, created);
                }
                // The name is taken (a repeated process id on a shared session):
                // try the next one.
                Err(e) if e.kind() == ErrorKind::Conflict && !e.txn_errors().is_empty() => {
                    *left = None;
                }
                Err(e) => return Err(e),
            }
        };
        let closing = core.closing.clone();
        let list = || self.client.kv().list(&list_prefix);
        // The queue as the client's watch of the prefix last saw it, when that is
        // after our key was placed (an async wait's later tries, woken by that
        // watch: no request, however many wait); else a read of our own.
        let watched = created.and_then(|c| {
            self.client
                .watched_prefix(&list_prefix)
                .filter(|ev| ev.index >= c)
        });
        let mut fresh: Option<Vec<KvPair>> = Some(match watched {
            Some(ev) => ev.entries,
            None => ride.run(list)?,
        });
        // Watched from the first wait on: its first answer is no older than
        // the read above, and answers from before our key are only wake-ups.
        let mut watch: Option<Watch> = None;
        // When a dead holder's key is kept back for its lock-delay: when to look
        // again (the delay ending changes nothing the watch would see).
        let mut look_again: Option<Instant> = None;
        *lock(&self.retry_at) = None;
        loop {
            let entries = match fresh.take() {
                Some(e) => e,
                None => {
                    let watch = match &mut watch {
                        Some(w) => w,
                        None => watch.insert(self.client.watch_prefix(&list_prefix)?),
                    };
                    let wake = match (deadline, look_again.take()) {
                        (Some(d), Some(l)) => Some(d.min(l)),
                        (d, l) => d.or(l),
                    };
                    match watch_next(watch, wake, cancel, session, &closing)? {
                        Some((index, entries)) if created.is_some_and(|c| index >= c) => entries,
                        // An answer from before our key existed: only a wake-up.
                        Some(_) => ride.run(list)?,
                        None if deadline.is_some_and(|d| d <= Instant::now()) => return Ok(false),
                        // Time to look at a lock-delay again.
                        None => ride.run(list)?,
                    }
                }
            };
            let Some(mine) = entries.iter().find(|p| p.key == key) else {
                // Our key is gone: confirm with a fresh read before judging.
                let again = ride.run(list)?;
                if again.iter().any(|p| p.key == key) {
                    fresh = Some(again);
                    continue;
                }
                if !session.is_valid() {
                    return Err(lost_while_acquiring(session));
                }
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("the contender key {key:?} was deleted while it waited"),
                ));
            };
            if mine.session.as_deref() != Some(session.id()) {
                return Err(lost_while_acquiring(session));
            }
            let (queue, kept) = self.queue(&entries, session, mine.create_index)?;
            look_again = kept.then(|| Instant::now() + LOCK_DELAY_RECHECK);
            let me = (self.mode, (mine.create_index, mine.key.as_str()));
            if may_hold(me, &queue) {
                let mine = mine.clone();
                if self.hold(session, mine)? {
                    *left = None;
                    return Ok(true);
                }
                if !session.is_valid() {
                    return Err(lost_while_acquiring(session));
                }
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("the contender key {key:?} was removed as it was granted"),
                ));
            }
            if deadline.is_some_and(|d| d <= Instant::now()) {
                *lock(&self.retry_at) = look_again;
                return Ok(false);
            }
        }
    }

    /// The contenders in `entries` that hold a place (mode and queue position each),
    /// and whether one of them is a dead holder's kept back for its lock-delay.
    /// A contender whose session is gone (Consul cleared it) keeps its place while
    /// Consul holds its key back for the session's lock-delay — its holder may not
    /// have learnt of the loss yet, and a writer behind it must not go ahead of
    /// that — and is skipped and deleted (check-and-set, best effort) after.
    /// Any other key is a `Conflict`.
    ///
    /// Only contenders ahead of ours (CreateIndex below `mine`) can keep it waiting: a
    /// dead one behind it is neither asked about nor pruned here (the contenders that
    /// come after it do that).
    fn queue<'a>(
        &self,
        entries: &'a [KvPair],
        session: &Session,
        mine: u64,
    ) -> Result<(Vec<Place<'a>>, bool)> {
        let mut queue = Vec::with_capacity(entries.len());
        let mut kept = false;
        for p in entries {
            let mode = RwMode::parse(p.value.as_deref().unwrap_or_default());
            let Some(mode) = mode.filter(|_| p.flags == RW_LOCK_FLAG_VALUE) else {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!(
                        "{RW_CONFLICT} (key {:?} under the read-write lock prefix {:?} is not a \
                         contender: flags {}, a read-write lock writes {RW_LOCK_FLAG_VALUE} \
                         and a value of read or write)",
                        p.key, self.dir, p.flags
                    ),
                ));
            };
            if p.session.is_none() {
                if p.create_index > mine {
                    continue;
                }
                if p.lock_index > 0 && under_lock_delay(&self.client, &p.key, session.id())? {
                    kept = true;
                    queue.push((mode, (p.create_index, p.key.as_str())));
                    continue;
                }
                let ops = [KvOp::delete_cas(&p.key, p.modify_index)];
                if let Err(e) = self.client.conn().txn(&ops) {
                    log::debug!(
                        "baton {}: pruning dead contender {:?}: {e}",
                        self.what(),
                        p.key
                    );
                }
                continue;
            }
            queue.push((mode, (p.create_index, p.key.as_str())));
        }
        Ok((queue, kept))
    }

    /// Records a holding of contender `entry` and starts watching it.
    /// Returns whether it is still valid once recorded.
    fn hold(self: &Arc<Self>, session: &Session, entry: KvPair) -> Result<bool> {
        let core = self.client.core().clone();
        let generation = lock(&self.life).next_generation();
        let sequencer = Sequencer {
            key: entry.key.clone(),
            session: session.id().to_string(),
            lock_index: entry.lock_index,
            token: entry.create_index,
        };
        let hook = key_loss_hook(
            self,
            &self.client.core().conn,
            session,
            generation,
            LockLost::KeyChanged,
        );
        let seed = (Some(entry.clone()), entry.modify_index);
        let sub = KeySub::watch_holding(&core.conn, &core.keyhub, &entry.key, seed, hook)?;
        let weak: Weak<RwShared> = Arc::downgrade(self);
        let s_weak = Arc::downgrade(&session.shared);
        let session_hook = session.cancel_token().on_cancel(move || {
            let (Some(sh), Some(s)) = (weak.upgrade(), s_weak.upgrade()) else {
                return;
            };
            sh.lose(generation, LockLost::of_session(s.state()));
        });
        let current = sub.view();
        lock(&self.life).start(
            generation,
            session,
            RwHeld {
                key: entry.key.clone(),
                sequencer,
                _sub: sub,
                _session_hook: Some(session_hook),
            },
        );
        // The session may have died, or the hub seen the key change, in between.
        let ours = current.as_ref().is_none_or(|v| {
            v.entry
                .as_ref()
                .is_some_and(|p| p.session.as_deref() == Some(session.id()))
        });
        if !session.is_valid() {
            self.lose(generation, LockLost::of_session(session.state()));
        } else if !ours {
            self.lose(generation, LockLost::KeyChanged);
        }
        Ok(self.held_generation() == Some(generation))
    }

    /// [`RwLock::release`](super::RwLock::release): ends the holding, then
    /// deletes the contender key if it is still ours.
    pub(super) fn release(&self) -> Result<bool> {
        let Some(held) = lock(&self.life).release() else {
            return Ok(false);
        };
        held.token.cancel();
        let key = held.extra.key.clone();
        let session = held.session.clone();
        drop(held);
        let ops = [KvOp::check_session(&key, session.id()), KvOp::delete(&key)];
        match self.client.conn().txn(&ops) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::Conflict && !e.txn_errors().is_empty() => {
                log::warn!(
                    "baton {}: release found {key:?} no longer ours",
                    self.what()
                );
                self.remove_contender(&key, &session);
                Ok(false)
            }
            Err(e) => {
                self.remove_later(&key, &session);
                Err(e.prefixed(&format!(
                    "release of {} not confirmed yet (retried in the background until Consul \
                     answers)",
                    self.what()
                )))
            }
        }
    }

    /// Deletes contender `key` now (the key is ours alone by its name, so a
    /// plain delete), or in the background if Consul does not answer.
    pub(super) fn remove_contender(&self, key: &str, session: &Session) {
        if let Err(e) = delete_key(self.client.conn(), key) {
            log::debug!("baton {}: deleting {key:?}: {e}", self.what());
            self.remove_later(key, session);
        }
    }

    /// The delete of contender `key` as owed work: retried in the background
    /// until Consul answers, and made by `close`.
    fn remove_later(&self, key: &str, session: &Session) {
        let k = key.to_string();
        let run: OwedRun = Arc::new(move |conn: &Conn| delete_key(conn, &k));
        self.client
            .owe_work(session, key.to_string(), run, self.what(), ());
    }
}

fn delete_key(conn: &Conn, key: &str) -> Result<()> {
    conn.txn(&[KvOp::delete(key)]).map(|_| ())
}

impl Holder for RwShared {
    type Lost = LockLost;
    type Extra = RwHeld;
    const NOUN: &'static str = "read-write lock";

    fn with<T>(&self, f: impl FnOnce(&mut Lifecycle<LockLost, RwHeld>) -> T) -> T {
        f(&mut lock(&self.life))
    }

    /// Ends holding `generation` (idempotent), signalling loss. A key whose
    /// session Consul ended (it released the key) stays: it keeps its place in
    /// the queue for the session's lock-delay, as a lock's key is held back, and
    /// the next contender prunes it after. Any other key is deleted in the
    /// background (a key still carrying a session we gave up on would block the
    /// queue until that session expires).
    fn lose(&self, generation: u64, reason: LockLost) {
        let Some(ended) = lock(&self.life).end(generation, reason) else {
            return;
        };
        let h = &ended.held;
        ended.signal(self.client.core(), &self.what());
        let released_by_consul = matches!(
            reason,
            LockLost::SessionLost(LostReason::Invalidated | LostReason::Destroyed)
        );
        if reason != LockLost::ClientClosed && !released_by_consul {
            self.remove_later(&h.extra.key, &h.session);
        }
    }
}

/// The error of an acquire whose session was lost meanwhile.
fn lost_while_acquiring(session: &Session) -> Error {
    Error::new(
        ErrorKind::SessionInvalidated,
        format!(
            "session {} was lost while acquiring the read-write lock",
            session.id()
        ),
    )
}

/// The next answer of the prefix watch (its index and entries), or `None`
/// at the deadline. The session's loss, the client's close and `cancel`
/// end the wait as errors.
fn watch_next(
    watch: &mut Watch,
    deadline: Option<Instant>,
    cancel: Option<&CancelToken>,
    session: &Session,
    closing: &CancelToken,
) -> Result<Option<(u64, Vec<KvPair>)>> {
    let linked = CancelToken::any_of(
        [session.cancel_token(), closing.clone()]
            .into_iter()
            .chain(cancel.cloned()),
    );
    let stop = &linked.token;
    let timeout = deadline.map(|d| d.saturating_duration_since(Instant::now()));
    match watch.next_strict(timeout, Some(stop)) {
        Ok(ev) => Ok(Some((ev.index, ev.entries))),
        Err(e) if e.kind() == ErrorKind::Timeout => Ok(None),
        Err(e) if e.kind() == ErrorKind::Cancelled => {
            if closing.is_cancelled() {
                Err(Error::new(ErrorKind::Closed, "the baton client is closed"))
            } else if !session.is_valid() {
                Err(lost_while_acquiring(session))
            } else {
                Err(Error::new(
                    ErrorKind::Cancelled,
                    "read-write lock acquire cancelled",
                ))
            }
        }
        Err(e) => Err(e),
    }
}
