//! A [`MultiLock`](super::MultiLock)'s holding: how it is recorded and
//! watched (one key-hub watch per key, the session's loss), how it ends
//! (released by its owner, or lost), and how its keys are given back — one
//! transaction of `unlock` operations, for the keys that still carry the
//! session.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use super::{MultiHeld, MultiShared, NEXT_MULTI_ID};
use crate::api::kv::KvPair;
use crate::api::txn::KvOp;
use crate::client::{Client, OwedItem, OwedRun};
use crate::foundations::error::{ErrorKind, Result};
use crate::foundations::sync::lock;
use crate::recipes::fence::Sequencer;
use crate::recipes::holding::key_loss_hook;
use crate::recipes::holding::{Held, Holder, Lifecycle, Loss};
use crate::recipes::lock::LockLost;
use crate::runtime::claim::{hand_over_claim, ClaimGuard};
use crate::runtime::cleanup::{Next, Owed};
use crate::runtime::keyhub::KeySub;
use crate::runtime::lease::{LostReason, Session};
use crate::transport::conn::Conn;

impl MultiShared {
    /// What the holding is, in messages: `multi-key lock ["a", "b"]`.
    pub(super) fn what(&self) -> String {
        format!("multi-key lock {:?}", self.keys)
    }

    /// Records a new holding of every key (`entries`, in key order) and
    /// starts watching it.
    pub(super) fn hold(self: &Arc<Self>, session: &Session, entries: Vec<KvPair>) -> Result<u64> {
        let core = self.client.core().clone();
        let generation = lock(&self.inner).life.next_generation();
        // Every key was written by the same raft entry; a key the session held
        // already with the same data keeps its older index, so take the newest.
        let token = entries.iter().map(|p| p.modify_index).max().unwrap_or(0);
        let first = &entries[0];
        let sequencer = Sequencer {
            key: first.key.clone(),
            session: session.id().to_string(),
            lock_index: first.lock_index,
            token,
        };
        let mut subs = Vec::with_capacity(entries.len());
        for p in &entries {
            let hook = key_loss_hook(
                self,
                &self.client.core().conn,
                session,
                generation,
                LockLost::KeyChanged,
            );
            let seed = (Some(p.clone()), p.modify_index);
            match KeySub::watch_holding(&core.conn, &core.keyhub, &p.key, seed, hook) {
                Ok(s) => subs.push(s),
                Err(e) => {
                    // Granted but not recorded: give the keys back.
                    drop(subs);
                    self.unlock_later(session);
                    return Err(e);
                }
            }
        }
        let weak: Weak<MultiShared> = Arc::downgrade(self);
        let s_weak = Arc::downgrade(&session.shared);
        let session_hook = session.cancel_token().on_cancel(move || {
            let (Some(sh), Some(s)) = (weak.upgrade(), s_weak.upgrade()) else {
                return;
            };
            sh.lose(generation, LockLost::of_session(s.state()));
        });
        let current: Vec<_> = subs.iter().map(KeySub::view).collect();
        let value = lock(&self.inner).value.clone();
        let mut held_ids = Vec::with_capacity(entries.len());
        {
            let mut held_keys = lock(&core.held_keys);
            for key in &self.keys {
                let id = NEXT_MULTI_ID.fetch_add(1, Ordering::Relaxed);
                held_keys.insert(
                    id,
                    (
                        key.clone(),
                        session.id().to_string(),
                        value.clone(),
                        self.flags,
                    ),
                );
                held_ids.push(id);
            }
        }
        lock(&self.inner).life.start(
            generation,
            session,
            MultiHeld {
                held_ids,
                sequencer,
                entries,
                _subs: subs,
                _session_hook: Some(session_hook),
            },
        );
        // The session may have died, or the hub seen a key change, in between.
        let ours = |v: &Option<crate::runtime::keyhub::KeyView>| {
            v.as_ref().is_none_or(|v| {
                v.entry
                    .as_ref()
                    .is_some_and(|p| p.session.as_deref() == Some(session.id()))
            })
        };
        if !session.is_valid() {
            self.lose(generation, LockLost::of_session(session.state()));
        } else if !current.iter().all(ours) {
            self.lose(generation, LockLost::KeyChanged);
        }
        Ok(generation)
    }

    pub(super) fn holding_valid(&self, generation: u64) -> bool {
        self.held_generation() == Some(generation)
    }

    /// [`MultiLock::release`](super::MultiLock::release): ends the holding,
    /// then unlocks every key still ours in one transaction.
    pub(super) fn release(&self) -> Result<bool> {
        let Some((session, value)) = self.end_for_release() else {
            return Ok(false);
        };
        match unlock_all(
            self.client.conn(),
            &self.keys,
            &value,
            self.flags,
            session.id(),
        ) {
            Ok((not_ours, entries)) => {
                if not_ours.is_empty() {
                    lock(&self.inner).warm = self.views_after_release(&entries);
                }
                self.unclaim_all(&session);
                if not_ours.is_empty() {
                    Ok(true)
                } else {
                    log::warn!(
                        "baton {}: release found {not_ours:?} no longer ours (the rest was \
                         released)",
                        self.what()
                    );
                    Ok(false)
                }
            }
            Err(e) => {
                // The keys may still carry our session: keep trying in the
                // background until Consul answers (local contenders wait for it).
                self.unlock_later(&session);
                Err(e.prefixed(&format!(
                    "release of {} not confirmed yet (retried in the background until Consul \
                     answers)",
                    self.what()
                )))
            }
        }
    }

    /// The local half of a release: ends the holding (no callbacks) and
    /// returns its session and the value to send back; `None` if not held.
    fn end_for_release(&self) -> Option<(Session, Vec<u8>)> {
        let (holding, value) = {
            let mut g = lock(&self.inner);
            let h = g.life.release()?;
            (h, g.value.clone())
        };
        self.forget_held_keys(&holding.extra.held_ids);
        let Held {
            session,
            token,
            extra,
            ..
        } = holding;
        drop(extra);
        token.cancel();
        Some((session, value))
    }

    fn forget_held_keys(&self, ids: &[u64]) {
        let mut held_keys = lock(&self.client.core().held_keys);
        for id in ids {
            held_keys.remove(id);
        }
    }

    /// Gives the keys back in the background (those still carrying
    /// `session`), holding this object's local claims on them until done, so
    /// that a local contender on the same session is never undone by it.
    pub(super) fn unlock_later(&self, session: &Session) {
        let task = self.unlock_task(session);
        self.client.clean_up(task);
    }

    /// The unlock of every key still carrying `session` as a clean-up task,
    /// retried as [`Owed`] says; recorded as owed from now on (so `close`
    /// makes it too) but not queued: the caller queues it with
    /// `Client::clean_up`. This object's claims pass to the task.
    fn unlock_task(&self, session: &Session) -> impl FnMut(&Client) -> Next + Send + 'static {
        let claims: Vec<ClaimGuard> = self
            .keys
            .iter()
            .map(|k| hand_over_claim(session.id(), k, self.id))
            .collect();
        let keys = self.keys.clone();
        let value = lock(&self.inner).value.clone();
        let flags = self.flags;
        let sid = session.id().to_string();
        let what = self.what();
        let run: OwedRun =
            Arc::new(move |conn: &Conn| unlock_all(conn, &keys, &value, flags, &sid).map(|_| ()));
        let entry = self.client.core().owe(OwedItem::Work {
            key: self.keys.join(", "),
            run: run.clone(),
        });
        let mut owed = Owed::new(session);
        move |c: &Client| {
            let _kept = (&claims, &entry);
            match run(c.conn()) {
                Ok(()) => Next::Done,
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::Conflict | ErrorKind::PermissionDenied | ErrorKind::Closed
                    ) =>
                {
                    Next::Done
                }
                Err(e) => {
                    log::debug!("baton {what}: unlock failed: {e}");
                    owed.failed(&e)
                }
            }
        }
    }
}

/// Unlocks those of `keys` that `session` holds, in one transaction of
/// `unlock` operations (each writing `value` and `flags`, as Go's
/// `Unlock` does). Consul refuses a whole transaction when one `unlock`
/// fails (the key is not the session's), and names every failing operation:
/// those keys are dropped and the rest sent again. Returns the keys that were
/// not the session's, and the entries the transaction that applied answered.
pub(crate) fn unlock_all(
    conn: &Conn,
    keys: &[String],
    value: &[u8],
    flags: u64,
    session: &str,
) -> Result<(Vec<String>, Vec<KvPair>)> {
    let mut left: Vec<&String> = keys.iter().collect();
    let mut not_ours = Vec::new();
    let mut entries = Vec::new();
    while !left.is_empty() {
        let ops: Vec<KvOp> = left
            .iter()
            .map(|k| KvOp::unlock(k, value, flags, session))
            .collect();
        match conn.txn(&ops) {
            Ok(answered) => {
                entries = answered;
                break;
            }
            Err(e) if e.kind() == ErrorKind::Conflict && !e.txn_errors().is_empty() => {
                let mut failed: Vec<usize> = e
                    .txn_errors()
                    .iter()
                    .map(|t| t.op_index)
                    .filter(|&i| i < left.len())
                    .collect();
                if failed.is_empty() {
                    return Err(e);
                }
                failed.sort_unstable();
                failed.dedup();
                for i in failed.into_iter().rev() {
                    not_ours.push(left.remove(i).clone());
                }
            }
            Err(e) => return Err(e),
        }
    }
    not_ours.sort();
    Ok((not_ours, entries))
}

impl Holder for MultiShared {
    type Lost = LockLost;
    type Extra = MultiHeld;
    const NOUN: &'static str = "multi-key lock";

    fn with<T>(&self, f: impl FnOnce(&mut Lifecycle<LockLost, MultiHeld>) -> T) -> T {
        f(&mut lock(&self.inner).life)
    }

    /// Ends holding `generation` (idempotent), signalling loss: the holding
    /// ends first, then its token and callbacks fire; the unlock of the keys
    /// still ours is owed before the signal and queued after it.
    fn lose(&self, generation: u64, reason: LockLost) {
        let ended = {
            let mut g = lock(&self.inner);
            let Some(ended) = g.life.end(generation, reason) else {
                return;
            };
            ended
        };
        let h = &ended.held;
        // Consul freed the keys itself when it dropped the session.
        let session_gone = matches!(
            reason,
            LockLost::ClientClosed
                | LockLost::SessionLost(
                    LostReason::Invalidated | LostReason::Destroyed | LostReason::ClientClosed
                )
        );
        let unlock = (!session_gone).then(|| self.unlock_task(&h.session));
        self.forget_held_keys(&h.extra.held_ids);
        h.token.cancel();
        ended.signal(self.client.core(), &self.what());
        if session_gone {
            self.unclaim_all(&h.session);
        }
        if let Some(task) = unlock {
            self.client.clean_up(task);
        }
    }
}
