//! The known path: an uncontended acquire and release of a slot in one txn each, when the
//! semaphore knows what `.lock` holds.
//!
//! Go's `api.Semaphore` takes a slot in steps (write the contender key, list the prefix,
//! CAS `.lock`), and so does baton's full path (`acquire`), which also reads the prefix again
//! to start its watches: some nine requests per uncontended cycle. When the semaphore has
//! seen `.lock` — as it left it after its own release, or as the key hub shows it while a
//! slot is held — a free slot is taken by one txn, `lock` of the contender key with our
//! session and `cas` of `.lock` listing us against the index we saw, and given back by one,
//! `cas` of `.lock` without us and `delete` of the contender key. Consul applies a txn whole
//! or not at all, so the keys are the ones Go writes, in the states Go leaves them in, and a
//! Go holder on the prefix sees nothing new; a txn that fails (someone changed `.lock`) has
//! changed nothing, and the full path goes on as if it had not been tried. An answer lost on
//! the way leaves the outcome unknown, which the full path also settles: its steps are safe to
//! repeat after either txn (a slot we already hold is found listed; a slot we gave back is
//! found gone).
//!
//! Only where txn numbers are exact (Consul 1.6.2 and later): the semaphore's flags, above
//! 2^53, would be rounded by an older server's txn endpoint.

use super::*;
use crate::api::txn::KvOp;
use crate::foundations::compat::TxnNumbers;

/// `.lock` as the semaphore last saw it: its value and `ModifyIndex`.
#[derive(Debug, Clone)]
pub(super) struct KnownLock {
    pub(super) index: u64,
    pub(super) doc: LockDoc,
}

impl Semaphore {
    /// Takes a free slot in one txn if `.lock` is known and has one: `Some(true)` when held,
    /// `None` when the full path must run (nothing known, no free slot seen, the txn refused
    /// or unanswered).
    pub(super) fn acquire_known(
        &self,
        session: &Session,
        contender: &str,
        value: &[u8],
    ) -> Result<Option<bool>> {
        let sh = &self.shared;
        let Some(known) = lock(&sh.inner).known.take() else {
            return Ok(None);
        };
        let sid = session.id();
        if known.doc.limit != sh.limit
            || known.doc.holders.len() as u64 >= sh.limit
            || known.doc.holders.contains_key(sid)
        {
            return Ok(None);
        }
        let lock_key = self.lock_key();
        if sh.client.conn().learn_txn_numbers(&lock_key) != TxnNumbers::Exact {
            return Ok(None);
        }
        if !session.is_valid() {
            return Err(acquire::lost_while_acquiring(session));
        }
        let mut doc = known.doc;
        doc.holders.insert(sid.to_string(), true);
        let encoded = doc.encode();
        let ops = [
            KvOp::lock(contender, value, SEMAPHORE_FLAG_VALUE, sid),
            KvOp::cas(&lock_key, &encoded, SEMAPHORE_FLAG_VALUE, known.index),
        ];
        let entries = match sh.client.conn().txn_direct(&ops) {
            Ok(entries) => entries,
            Err(e) => {
                log::debug!(
                    "baton semaphore {}: the one-txn acquire did not go through ({e}); \
                     taking the slot step by step",
                    sh.prefix
                );
                return Ok(None);
            }
        };
        let ours = entries
            .iter()
            .find(|p| p.key == contender && p.session.as_deref() == Some(sid))
            .cloned();
        let listed = entries.iter().find(|p| p.key == lock_key).cloned();
        let (Some(ours), Some(mut listed)) = (ours, listed) else {
            // An answer without our writes in it: let the full path read what is there.
            return Ok(None);
        };
        // A txn's answer carries no values: `.lock` holds what we wrote.
        listed.value = Some(encoded);
        let seeds = [
            (Some(ours.clone()), ours.modify_index),
            (Some(listed.clone()), listed.modify_index),
        ];
        if self.hold_seeded(session, contender, &lock_key, seeds)? {
            return Ok(Some(true));
        }
        if !session.is_valid() {
            return Err(acquire::lost_while_acquiring(session));
        }
        Err(Error::new(
            ErrorKind::Conflict,
            format!(
                "the semaphore slot on {:?} was removed as it was taken",
                sh.prefix
            ),
        ))
    }
}

impl Shared {
    /// Gives `session`'s slot back in one txn, `.lock` as `seen` (the key hub's view when the
    /// holding ended): `true` when done, `false` when the full give-back must run.
    pub(super) fn release_known(&self, session: &Session, seen: Option<KvPair>) -> bool {
        let Some(seen) = seen.filter(|p| p.flags == SEMAPHORE_FLAG_VALUE) else {
            return false;
        };
        let lock_key = path_join(&self.prefix, ".lock");
        let Ok(mut doc) = LockDoc::decode(&lock_key, seen.value.as_deref(), self.limit) else {
            return false;
        };
        if doc.holders.remove(session.id()).is_none()
            || self.client.conn().learn_txn_numbers(&lock_key) != TxnNumbers::Exact
        {
            return false;
        }
        let contender = path_join(&self.prefix, session.id());
        let ops = [
            KvOp::cas(
                &lock_key,
                &doc.encode(),
                SEMAPHORE_FLAG_VALUE,
                seen.modify_index,
            ),
            KvOp::delete(&contender),
        ];
        match self.client.conn().txn_direct(&ops) {
            Ok(entries) => {
                lock(&self.inner).known =
                    entries
                        .iter()
                        .find(|p| p.key == lock_key)
                        .map(|p| KnownLock {
                            index: p.modify_index,
                            doc,
                        });
                release_claim(session, &contender, self.id);
                true
            }
            Err(e) => {
                log::debug!(
                    "baton semaphore {}: the one-txn release did not go through ({e}); \
                     giving the slot back step by step",
                    self.prefix
                );
                false
            }
        }
    }
}
