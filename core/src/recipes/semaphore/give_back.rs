//! Giving a semaphore slot back: Go's `Release` steps, now, in the background
//! after a loss, or for a lost holding before the next acquire.

use std::sync::Arc;

use super::*;
use crate::api::kv::Kv;
use crate::client::{OwedGuard, OwedItem, OwedRun};
use crate::runtime::claim::{hand_over_claim, release_claim, ClaimGuard};
use crate::transport::conn::Conn;

impl Shared {
    /// Gives back the slot of a lost holding, if one is pending (Go's `Release`
    /// steps), then frees the local claim. Errors leave it pending.
    pub(super) fn give_back_lost_slot(&self) -> Result<()> {
        let _cleaning = lock(&self.cleaning);
        let Some(session) = lock(&self.inner).unreleased.clone() else {
            return Ok(());
        };
        let contender = path_join(&self.prefix, session.id());
        let result = give_back(self.client.kv(), &self.prefix, self.limit, session.id());
        let gone = !session.is_valid()
            && result
                .as_ref()
                .is_err_and(|e| e.kind() == ErrorKind::SessionInvalidated);
        if result.is_ok() || gone {
            let mut g = lock(&self.inner);
            if g.unreleased
                .as_ref()
                .is_some_and(|s| s.id() == session.id())
            {
                g.unreleased = None;
            }
            drop(g);
            release_claim(&session, &contender, self.id);
            return Ok(());
        }
        result
    }

    /// Before a new acquire with `session`: a pending give-back of a lost
    /// holding of the same session is dropped (the acquire takes the slot over,
    /// keeping the local claim); one of another session goes on in the background.
    pub(super) fn forget_lost_slot(self: &Arc<Self>, session: &Session) {
        let _cleaning = lock(&self.cleaning);
        let Some(old) = lock(&self.inner).unreleased.take() else {
            return;
        };
        if old.id() != session.id() {
            let contender = path_join(&self.prefix, old.id());
            let claim = hand_over_claim(old.id(), &contender, self.id);
            give_back_later(self, &old, claim);
        }
    }
}

/// Go's `Release` steps for session `sid`: remove it from `.lock` by CAS, then
/// delete its contender key.
pub(super) fn give_back(kv: Kv<'_>, prefix: &str, limit: u64, sid: &str) -> Result<()> {
    let lock_key = path_join(prefix, ".lock");
    loop {
        let current = kv.get(&lock_key)?;
        let (raw, index) = match &current {
            Some(p) => (p.value.as_deref(), p.modify_index),
            None => (None, 0),
        };
        let mut doc = LockDoc::decode(&lock_key, raw, limit)?;
        if doc.holders.remove(sid).is_none() {
            break;
        }
        let ok = kv.put_with(
            &lock_key,
            &doc.encode(),
            &WriteOptions {
                flags: SEMAPHORE_FLAG_VALUE,
                cas: Some(index),
                ..Default::default()
            },
        )?;
        if ok {
            break;
        }
    }
    kv.delete(&path_join(prefix, sid))?;
    Ok(())
}

/// Gives the slot of `session` back now (`listed`: `.lock` may list it; else
/// only its contender entry is removed); if that fails, keeps trying in the
/// background, holding back local contenders of the session meanwhile.
pub(super) fn give_back_now(sh: &Arc<Shared>, session: &Session, listed: bool) -> Result<()> {
    let contender = path_join(&sh.prefix, session.id());
    let result = if listed {
        give_back(sh.client.kv(), &sh.prefix, sh.limit, session.id())
    } else {
        sh.client.kv().delete(&contender).map(|_| ())
    };
    if result.is_ok() {
        release_claim(session, &contender, sh.id);
    } else {
        let claim = hand_over_claim(session.id(), &contender, sh.id);
        give_back_later(sh, session, claim);
    }
    result
}

/// Gives the slot of `session` back on the clean-up thread, retried as
/// [`Owed`] says;
/// `claim` is freed when the task ends.
pub(super) fn give_back_later(sh: &Arc<Shared>, session: &Session, claim: ClaimGuard) {
    let (key, run) = give_back_work(sh, session);
    let what = format!("semaphore {}: giving a slot back", sh.prefix);
    sh.client.owe_work(session, key, run, what, claim);
}

/// The give-back of `session`'s slot as work owed to Consul: the clean-up
/// thread makes it, and until it is done (the guard drops) `close` knows it
/// is owed and makes it too.
pub(super) fn owe_give_back(sh: &Shared, session: &Session) -> (OwedRun, OwedGuard) {
    let (key, run) = give_back_work(sh, session);
    let guard = sh.client.core().owe(OwedItem::Work {
        key,
        run: run.clone(),
    });
    (run, guard)
}

/// The give-back of `session`'s slot, and the key it is named by.
fn give_back_work(sh: &Shared, session: &Session) -> (String, OwedRun) {
    let (prefix, limit) = (sh.prefix.clone(), sh.limit);
    let sid = session.id().to_string();
    let key = path_join(&prefix, &sid);
    let run: OwedRun = Arc::new(move |conn: &Conn| give_back(Kv { conn }, &prefix, limit, &sid));
    (key, run)
}
