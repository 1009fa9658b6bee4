//! Taking a slot once this process's turn has come: the contender entry, the
//! CAS on `.lock`, waiting on the prefix's listing, and recording the holding.

use super::*;
use crate::recipes::lock_delay::LOCK_DELAY_RECHECK;

impl Semaphore {
    pub(super) fn acquire_claimed(
        &self,
        session: &Session,
        contender: &str,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
        kept: bool,
    ) -> Result<bool> {
        let sh = &self.shared;
        let core = sh.client.core();
        // Consul being unavailable for a while (no raft leader, a restarting agent)
        // is waited out within the deadline; every step below is safe to repeat.
        let mut ride =
            RideOut::new(core, "semaphore acquire", deadline, cancel).on_session(session);
        let value = {
            let mut g = lock(&sh.inner);
            g.retry_at = None;
            g.value.clone()
        };
        let contender_opts = WriteOptions {
            flags: SEMAPHORE_FLAG_VALUE,
            acquire: Some(session.id().to_string()),
            ..Default::default()
        };
        let make = |ride: &mut RideOut<'_>| -> Result<()> {
            let made = ride.run(|| {
                if !session.is_valid() {
                    return Err(lost_while_acquiring(session));
                }
                sh.client.kv().put_with(contender, &value, &contender_opts)
            })?;
            if !made {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    "failed to make contender entry: <nil>",
                ));
            }
            Ok(())
        };
        // An async wait's entry is kept from its previous try (checked below).
        if !kept {
            // A free slot in a `.lock` we know: one txn (`known`).
            if let Some(held) = self.acquire_known(session, contender, &value)? {
                return Ok(held);
            }
            make(&mut ride)?;
        }
        let lock_key = self.lock_key();
        let mut watch = sh.client.watch_prefix(&sh.prefix)?;
        let closing = sh.client.core().closing.clone();
        // Our own read first: an answer that cannot be decoded is an error at once,
        // and the listing includes our contender entry.
        let list = || sh.client.kv().list(&sh.prefix);
        let mut fresh: Option<Vec<KvPair>> = Some(ride.run(list)?);
        let ours = |p: &KvPair| p.key == contender && p.session.as_deref() == Some(session.id());
        if kept && !fresh.iter().flatten().any(ours) {
            // The kept entry is gone (deleted by hand, or its session's lock
            // released it): a slot without it would be pruned as a dead holder's.
            make(&mut ride)?;
            fresh = Some(ride.run(list)?);
        }
        // When a dead holder's slot is kept back for its lock-delay: when to look again
        // (the delay ending changes nothing a watch would see).
        let mut look_again: Option<Instant> = None;
        loop {
            let entries = match fresh.take() {
                Some(e) => e,
                None => {
                    let wake = match (deadline, look_again.take()) {
                        (Some(d), Some(l)) => Some(d.min(l)),
                        (d, l) => d.or(l),
                    };
                    match watch_next(&mut watch, wake, cancel, session, &closing)? {
                        Some(ev) => ev,
                        None if deadline.is_some_and(|d| d <= Instant::now()) => return Ok(false),
                        None => ride.run(list)?,
                    }
                }
            };
            let lock_entry = entries.iter().find(|p| p.key == lock_key);
            let (flags, modify_index, raw) = match lock_entry {
                Some(p) => (p.flags, p.modify_index, p.value.as_deref()),
                None => (SEMAPHORE_FLAG_VALUE, 0, None),
            };
            if flags != SEMAPHORE_FLAG_VALUE {
                return Err(Error::new(ErrorKind::Conflict, SEMAPHORE_CONFLICT));
            }
            let mut doc = LockDoc::decode(&lock_key, raw, sh.limit)?;
            if doc.limit != sh.limit {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!(
                        "semaphore limit conflict (lock: {}, local: {})",
                        doc.limit, sh.limit
                    ),
                ));
            }
            let (prefix, sid) = (&sh.prefix, session.id());
            if ride
                .run(|| prune::make_room(&sh.client, prefix, sid, sh.limit, &mut doc, &entries))?
            {
                look_again = Some(Instant::now() + LOCK_DELAY_RECHECK);
            }
            let ours = doc.holders.contains_key(session.id());
            if !ours && doc.holders.len() as u64 >= sh.limit {
                if deadline.is_some_and(|d| d <= Instant::now()) {
                    lock(&sh.inner).retry_at = look_again;
                    return Ok(false);
                }
                continue; // wait for the next change under the prefix
            }
            doc.holders.insert(session.id().to_string(), true);
            let cas = WriteOptions {
                flags: SEMAPHORE_FLAG_VALUE,
                cas: Some(modify_index),
                ..Default::default()
            };
            // A CAS whose answer was lost and that did apply fails when repeated;
            // the re-read then shows our slot taken, and we write again.
            let swapped = ride.run(|| {
                if !session.is_valid() {
                    return Err(lost_while_acquiring(session));
                }
                sh.client.kv().put_with(&lock_key, &doc.encode(), &cas)
            })?;
            if swapped {
                if self.hold(session, contender, &lock_key)? {
                    return Ok(true);
                }
                // Our slot vanished before we could return it: never report a holding
                // that is not valid. The caller gives the slot back.
                if !session.is_valid() {
                    return Err(lost_while_acquiring(session));
                }
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!(
                        "the semaphore slot on {:?} was removed as it was taken",
                        sh.prefix
                    ),
                ));
            }
            // Lost the race for the slot: re-read now.
            fresh = Some(ride.run(list)?);
        }
    }

    /// Records a holding after our `.lock` write and starts watching it.
    /// Returns whether the holding is still valid once recorded.
    pub(super) fn hold(&self, session: &Session, contender: &str, lock_key: &str) -> Result<bool> {
        let sh = &self.shared;
        // Views only move forward: the watches start from a read made after our
        // write, so no poll answer older than it can report our slot missing.
        let (entries, meta) = sh
            .client
            .kv()
            .list_with(&sh.prefix, &crate::transport::http::QueryOptions::default())?;
        let seed_of = |key: &str| {
            let entry = entries.iter().find(|p| p.key == key).cloned();
            let as_of = entry.as_ref().map_or(meta.index, |p| p.modify_index);
            (entry, as_of)
        };
        self.hold_seeded(
            session,
            contender,
            lock_key,
            [seed_of(contender), seed_of(lock_key)],
        )
    }

    /// [`Semaphore::hold`] with the views the watches start from (the contender key's and
    /// `.lock`'s, each with the index it is as of), known without a read: the answer to our
    /// own write (`known`).
    pub(super) fn hold_seeded(
        &self,
        session: &Session,
        contender: &str,
        lock_key: &str,
        seeds: [(Option<KvPair>, u64); 2],
    ) -> Result<bool> {
        let sh = &self.shared;
        let core = sh.client.core().clone();
        let [contender_seed, lock_seed] = seeds;
        let generation = lock(&sh.inner).life.next_generation();
        let sid = session.id().to_string();
        let on_contender: Hook = {
            let weak = Arc::downgrade(sh);
            let sid = sid.clone();
            let hook_session = Arc::downgrade(&session.shared);
            Arc::new(move |e: Option<&KvPair>| {
                if contender_ours(e, &sid) {
                    return;
                }
                let Some(s) = weak.upgrade() else { return };
                // A contender key unlocked because its session was invalidated is a
                // session loss (the reason the session reports), as for a lock.
                let gone = matches!(s.client.sessions().info(&sid), Ok(None));
                match (gone, hook_session.upgrade()) {
                    (true, Some(session)) => session.lose(LostReason::Invalidated),
                    _ => s.lose(generation, SemaphoreLost::Removed),
                }
            })
        };
        let on_lock: Hook = {
            let weak: Weak<Shared> = Arc::downgrade(sh);
            let sid = sid.clone();
            let limit = sh.limit;
            Arc::new(move |e: Option<&KvPair>| {
                if !listed(e, &sid, limit) {
                    if let Some(s) = weak.upgrade() {
                        s.lose(generation, SemaphoreLost::Removed);
                    }
                }
            })
        };
        let subs = vec![
            KeySub::watch_holding(
                &core.conn,
                &core.keyhub,
                contender,
                contender_seed,
                on_contender,
            )?,
            KeySub::watch_holding(&core.conn, &core.keyhub, lock_key, lock_seed, on_lock)?,
        ];
        let weak = Arc::downgrade(sh);
        let s_weak = Arc::downgrade(&session.shared);
        let session_hook = session.cancel_token().on_cancel(move || {
            let (Some(sh), Some(s)) = (weak.upgrade(), s_weak.upgrade()) else {
                return;
            };
            sh.lose(generation, SemaphoreLost::of_session(s.state()));
        });
        let views: Vec<Option<KvPair>> = subs
            .iter()
            .map(|s| s.view().and_then(|v| v.entry))
            .collect();
        lock(&sh.inner).life.start(
            generation,
            session,
            SemaphoreHeld {
                subs,
                _session_hook: Some(session_hook),
            },
        );
        // Re-check now that the holding is recorded: the session may have died, or
        // the views shown our slot gone, in between.
        if !session.is_valid() {
            sh.lose(generation, SemaphoreLost::of_session(session.state()));
        } else if !contender_ours(views[0].as_ref(), &sid)
            || !listed(views[1].as_ref(), &sid, sh.limit)
        {
            sh.lose(generation, SemaphoreLost::Removed);
        }
        Ok(sh.held_generation() == Some(generation))
    }
}

/// The error of an acquire whose session was lost meanwhile.
pub(super) fn lost_while_acquiring(session: &Session) -> Error {
    Error::new(
        ErrorKind::SessionInvalidated,
        format!(
            "session {} was lost while acquiring the semaphore",
            session.id()
        ),
    )
}

/// The next listing from the prefix watch, or `None` at the deadline.
fn watch_next(
    watch: &mut crate::runtime::watch::Watch,
    deadline: Option<Instant>,
    cancel: Option<&CancelToken>,
    session: &Session,
    closing: &CancelToken,
) -> Result<Option<Vec<KvPair>>> {
    // Cancel the wait when the session dies or the client closes, too.
    let linked = CancelToken::any_of(
        [session.cancel_token(), closing.clone()]
            .into_iter()
            .chain(cancel.cloned()),
    );
    let stop = &linked.token;
    let timeout = deadline.map(|d| d.saturating_duration_since(Instant::now()));
    match watch.next_strict(timeout, Some(stop)) {
        Ok(ev) => Ok(Some(ev.entries)),
        Err(e) if e.kind() == ErrorKind::Timeout => Ok(None),
        Err(e) if e.kind() == ErrorKind::Cancelled => {
            if closing.is_cancelled() {
                Err(Error::new(ErrorKind::Closed, "the baton client is closed"))
            } else if !session.is_valid() {
                Err(lost_while_acquiring(session))
            } else {
                Err(Error::new(
                    ErrorKind::Cancelled,
                    "semaphore acquire cancelled",
                ))
            }
        }
        Err(e) => Err(e),
    }
}
