//! The inside of a [`Lock`](super::Lock): the acquire loop against Consul, the
//! recording of a holding, and its end.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::wire::{flags_match, is_lock_flags};
use super::*;
use crate::client::OwedItem;
use crate::foundations::compat::TxnNumbers;
use crate::recipes::holding::key_loss_hook;
use crate::runtime::claim::{
    hand_over_claim, pause_after_stale, take_claim, unclaim, wait_signals, ClaimGuard, Woke,
};
use crate::runtime::cleanup::{Next, Owed};
use crate::runtime::ride_out::RideOut;

/// What one acquire attempt found.
pub(super) enum Attempt {
    Acquired(KvPair),
    /// The key changed since our view: read again.
    Stale,
    /// Free, but refused for lock-delay.
    Delayed,
    /// No usable answer (transport error, or a success that does not show our
    /// session): Consul may or may not have given us the key.
    Unknown(Error),
}

impl LockShared {
    /// Waits for this object's turn among the process's contenders for the same
    /// (session, key). Returns `Ok(false)` at the deadline.
    pub(super) fn wait_local(
        &self,
        session: &Session,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<bool> {
        take_claim(
            session,
            &self.key,
            self.id,
            deadline,
            cancel,
            &self.client.conn().closing,
        )
    }

    /// Gives the key back in the background: an unlock by `session` of a
    /// grant this object will not keep (see [`unlock_task`]); `claim` holds
    /// back the session's other local contenders until it is done.
    pub(super) fn unlock_later(&self, value: Vec<u8>, session: &Session, claim: ClaimGuard) {
        let task = unlock_task(
            &self.client,
            &self.key,
            value,
            self.flags,
            session,
            Some(claim),
        );
        self.client.clean_up(task);
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
        // A lock txn on a server that rounds its numbers would store the lock
        // flag rounded, where Go's api.Lock reads it: learn first, and write as
        // Go does (flags in the query string) unless the txn is known exact.
        if self.client.conn().learn_txn_numbers(&self.key) != TxnNumbers::Exact {
            return self.attempt_by_put(session, value);
        }
        let ops = self.attempt_ops(session, known, value);
        let result = self.client.txn(&ops);
        self.judge_attempt(session, known, value, result)
    }

    /// The lock txn of an attempt on the view `known`: `check-index` (or
    /// `check-not-exists`), then `lock`.
    pub(super) fn attempt_ops(&self, session: &Session, known: &Known, value: &[u8]) -> [KvOp; 2] {
        let check = match &known.entry {
            Some(p) => KvOp::check_index(&self.key, p.modify_index),
            None => KvOp::check_not_exists(&self.key),
        };
        [
            check,
            KvOp::lock(&self.key, value, self.flags, session.id()),
        ]
    }

    /// What the answer to [`LockShared::attempt_ops`]'s txn says (no request; an
    /// invalid session is marked lost).
    pub(super) fn judge_attempt(
        &self,
        session: &Session,
        known: &Known,
        value: &[u8],
        result: Result<Vec<KvPair>>,
    ) -> Result<Attempt> {
        match result {
            Ok(entries) => match entries.into_iter().rev().find(|p| p.key == self.key) {
                Some(mut p) if p.session.as_deref() == Some(session.id()) => {
                    // A re-acquire of a key we hold with the same value is a no-op that
                    // keeps the ModifyIndex the check just proved, but Consul 1.6.0-1.7.x
                    // answered a txn with the new raft index anyway (GH-7832).
                    if let Some(k) = &known.entry {
                        if k.session == p.session
                            && k.lock_index == p.lock_index
                            && k.flags == p.flags
                            && k.value.as_deref().unwrap_or_default() == value
                        {
                            p.modify_index = k.modify_index;
                        }
                    }
                    Ok(Attempt::Acquired(p))
                }
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
            Err(e) if outcome_unknown(&e) => Ok(Attempt::Unknown(e)),
            Err(e) => Err(e),
        }
    }

    /// An attempt on a server that rounds txn numbers (before Consul 1.6.2): as
    /// Go's `api.Lock` does it, a `PUT ?acquire=` with the flags in the query
    /// string, then a read for the entry (its LockIndex and ModifyIndex).
    fn attempt_by_put(&self, session: &Session, value: &[u8]) -> Result<Attempt> {
        let acquired = match self
            .client
            .kv()
            .acquire(&self.key, value, session.id(), self.flags)
        {
            Ok(a) => a,
            Err(e)
                if e.server_text()
                    .is_some_and(|t| t.contains("invalid session")) =>
            {
                session.shared.lose(LostReason::Invalidated);
                return Err(Error::new(
                    ErrorKind::SessionInvalidated,
                    format!("failed to acquire lock: {}", e.message()),
                ));
            }
            Err(e) if outcome_unknown(&e) => return Ok(Attempt::Unknown(e)),
            Err(e) => return Err(e),
        };
        let k = match self.read() {
            Ok(k) => k,
            Err(e) if acquired => return Ok(Attempt::Unknown(e)),
            Err(e) => return Err(e),
        };
        let holder = k.entry.as_ref().and_then(|p| p.session.as_deref());
        if holder == Some(session.id()) {
            return Ok(Attempt::Acquired(k.entry.expect("held entry")));
        }
        if acquired || holder.is_some() {
            // Granted and lost already, or refused because someone holds it.
            Ok(Attempt::Stale)
        } else {
            // Refused on a free key: lock-delay (a PUT answers plain `false`).
            Ok(Attempt::Delayed)
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
            // Consul refuses lock-delays over 60 s (`MaxLockDelay`); a larger one
            // from a confused server would park this waiter for centuries.
            Ok(Some(e)) => Some(e.lock_delay().min(Duration::from_secs(60))),
            _ => None,
        };
        lock(&self.inner).last_holder = Some((holder.to_string(), delay));
    }

    /// Acquires the key on `session` by `deadline`. An attempt whose outcome
    /// stayed unknown (no answer, or a transient failure) and was not found
    /// applied may still be applied late: unless the call ends holding the key,
    /// such a key is unlocked in the background.
    /// `maybe_applied`: an earlier attempt of this call (a loop's warm one, see `warm`) may
    /// have been granted unseen; unless this call ends holding the key, it is given back.
    pub(super) fn acquire_remote(
        self: &Arc<Self>,
        session: &Session,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
        maybe_applied: bool,
    ) -> Result<bool> {
        let mut maybe_applied = maybe_applied;
        let result = self.acquire_remote_inner(session, deadline, cancel, &mut maybe_applied);
        if maybe_applied && !matches!(result, Ok(true)) {
            let value = lock(&self.inner).value.clone();
            let claim = hand_over_claim(session.id(), &self.key, self.id);
            self.unlock_later(value, session, claim);
        }
        result
    }

    fn acquire_remote_inner(
        self: &Arc<Self>,
        session: &Session,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
        maybe_applied: &mut bool,
    ) -> Result<bool> {
        let core = self.client.core().clone();
        let mut ride = RideOut::new(&core, "lock acquire", deadline, cancel).on_session(session);
        let mut known = {
            let mut g = lock(&self.inner);
            g.retry_at = None;
            g.known.take()
        };
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
                None => ride.run(|| self.read())?,
            };
            if let Some(p) = &k.entry {
                if self.flags == LOCK_FLAG_VALUE
                    && p.flags != LOCK_FLAG_VALUE
                    && is_lock_flags(p.flags)
                {
                    // Written by a lock txn on a Consul before 1.6.2 and never repaired:
                    // this server rounds txn numbers; our acquire rewrites the flags.
                    self.client.core().learned.learn_lossy();
                }
                if !flags_match(self.flags, p.flags) {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        foreign_flags(&self.key, p.flags, self.flags),
                    ));
                }
            }
            let holder = k.entry.as_ref().and_then(|p| p.session.clone());
            let free = holder.as_deref().is_none_or(|h| h == session.id());
            let now = Instant::now();
            if free && retry_at.is_none_or(|t| t <= now) {
                // Never a request on a session known to be lost (the read above
                // may have waited out an unavailable Consul meanwhile).
                if !session.is_valid() {
                    return Err(lost_while_acquiring(session));
                }
                let value = lock(&self.inner).value.clone();
                let mut reread = true;
                let granted = match self.attempt(session, &k, &value)? {
                    Attempt::Acquired(mut p) => {
                        // Consul's txn answer for a write carries no Value; the hub is
                        // seeded with this entry, so give it the value we wrote.
                        p.value.get_or_insert(value);
                        Some(p)
                    }
                    Attempt::Unknown(e) => {
                        // Not known to be ours, and maybe applied late: undone in the
                        // background unless this call ends holding the key.
                        *maybe_applied |= e.kind() != ErrorKind::BadResponse;
                        match ride.run(|| self.learn_outcome(session)) {
                            Ok(Some(p)) => Some(p),
                            Ok(None) if e.kind() == ErrorKind::BadResponse => {
                                // The key is not ours: the odd answer changed nothing.
                                stale_tries += 1;
                                None
                            }
                            Ok(None) => {
                                // Consul was unavailable: wait (within the deadline)
                                // and try again; a failure for good ends the call.
                                ride.pause(e)?;
                                None
                            }
                            Err(read_err) => return Err(read_err),
                        }
                    }
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
                    pause_after_stale(stale_tries, deadline, cancel, session, &core.closing)?;
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
                let mut g = lock(&self.inner);
                g.known = cacheable(k, session);
                g.retry_at = retry_at;
                return Ok(false);
            }
            // Wait for the key to change, the retry time, or the deadline.
            let s = match &mut sub {
                Some(s) => s,
                None => sub.insert(KeySub::new(
                    &core.conn,
                    &core.keyhub,
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
        let Some(p) = k.entry.filter(|p| {
            p.session.as_deref() == Some(session.id()) && flags_match(self.flags, p.flags)
        }) else {
            return Ok(None);
        };
        if p.flags == self.flags {
            return Ok(Some(p));
        }
        // Ours, but written with rounded flags by a txn whose answer we missed:
        // rewrite them while we hold it, as Go would see a foreign key.
        self.client.core().learned.learn_lossy();
        let value = p.value.clone().unwrap_or_default();
        if !self
            .client
            .kv()
            .acquire(&self.key, &value, session.id(), self.flags)?
        {
            return Ok(None);
        }
        Ok(self
            .read()?
            .entry
            .filter(|p| p.session.as_deref() == Some(session.id()) && p.flags == self.flags))
    }

    /// The local half of a release: ends the holding (callbacks are not called) and
    /// returns its session and the value to send back; `None` if nothing was held.
    pub(super) fn end_for_release(&self) -> Option<(Session, Vec<u8>)> {
        let (holding, value) = {
            let mut g = lock(&self.inner);
            let h = g.life.release()?;
            g.known = None;
            (h, g.value.clone())
        };
        lock(&self.client.core().held_keys).remove(&holding.extra.held_id);
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

    /// What a release's unlock came to (see [`Lock::release`]): the key's entry is
    /// kept for the next acquire; an unconfirmed unlock goes on in the background.
    pub(super) fn released(
        &self,
        session: &Session,
        value: Vec<u8>,
        result: Result<Unlocked>,
    ) -> Result<bool> {
        if result.is_ok() {
            unclaim(session.id(), &self.key, self.id);
        }
        match result {
            Ok(Unlocked::Released(entry)) => {
                if let Some(p) = entry {
                    let as_of = p.modify_index;
                    lock(&self.inner).known = Some(Known {
                        entry: Some(p),
                        as_of,
                        seen_at: Instant::now(),
                    });
                }
                Ok(true)
            }
            Ok(Unlocked::NotHeld(what)) => {
                log::warn!(
                    "baton lock {}: release found the key no longer ours: {what}",
                    self.key
                );
                Ok(false)
            }
            Err(e) => {
                // The key may still carry our session: keep trying in the background
                // until Consul answers (local contenders on this session wait for it).
                let claim = hand_over_claim(session.id(), &self.key, self.id);
                self.unlock_later(value, session, claim);
                Err(e.prefixed(&format!(
                    "release of {:?} not confirmed yet (retried in the background until Consul answers)",
                    self.key
                )))
            }
        }
    }

    pub(super) fn holding_valid(&self, generation: u64) -> bool {
        self.held_generation() == Some(generation)
    }

    /// Records a new holding and starts watching it.
    pub(super) fn hold(
        self: &Arc<Self>,
        session: &Session,
        pair: KvPair,
        sub: Option<KeySub>,
    ) -> Result<u64> {
        drop(sub);
        let core = self.client.core().clone();
        let generation = lock(&self.inner).life.next_generation();
        let sequencer = Sequencer {
            key: self.key.clone(),
            session: session.id().to_string(),
            lock_index: pair.lock_index,
            token: pair.modify_index,
        };
        let value = lock(&self.inner).value.clone();
        let hook = key_loss_hook(self, &core.conn, session, generation, LockLost::KeyChanged);
        let as_of = pair.modify_index;
        let key_sub = match KeySub::watch_holding(
            &core.conn,
            &core.keyhub,
            &self.key,
            (Some(pair), as_of),
            hook,
        ) {
            Ok(s) => s,
            Err(e) => {
                // Granted but not recorded: give the key back.
                let claim = hand_over_claim(session.id(), &self.key, self.id);
                self.unlock_later(value, session, claim);
                return Err(e);
            }
        };
        let weak: Weak<LockShared> = Arc::downgrade(self);
        let s_weak = Arc::downgrade(&session.shared);
        let session_hook = session.cancel_token().on_cancel(move || {
            let (Some(sh), Some(s)) = (weak.upgrade(), s_weak.upgrade()) else {
                return;
            };
            sh.lose(generation, LockLost::of_session(s.state()));
        });
        let current = key_sub.view();
        let held_id = NEXT_LOCK_ID.fetch_add(1, Ordering::Relaxed);
        lock(&core.held_keys).insert(
            held_id,
            (
                self.key.clone(),
                session.id().to_string(),
                lock(&self.inner).value.clone(),
                self.flags,
            ),
        );
        lock(&self.inner).life.start(
            generation,
            session,
            LockHeld {
                held_id,
                sequencer,
                sub: Some(key_sub),
                _session_hook: Some(session_hook),
            },
        );
        // The session may have died, or the hub seen the key change, in between.
        if !session.is_valid() {
            self.lose(generation, LockLost::of_session(session.state()));
        } else if let Some(v) = current {
            if v.entry
                .as_ref()
                .is_none_or(|p| p.session.as_deref() != Some(session.id()))
            {
                self.lose(generation, LockLost::KeyChanged);
            }
        }
        Ok(generation)
    }
}

impl Holder for LockShared {
    type Lost = LockLost;
    type Extra = LockHeld;
    const NOUN: &'static str = "lock";

    fn with<T>(&self, f: impl FnOnce(&mut Lifecycle<LockLost, LockHeld>) -> T) -> T {
        f(&mut lock(&self.inner).life)
    }

    /// Ends holding `generation` (idempotent), signalling loss: the holding
    /// ends first, then its token and callbacks fire; logging and the
    /// best-effort unlock come after, off this thread.
    fn lose(&self, generation: u64, reason: LockLost) {
        let (ended, value) = {
            let mut g = lock(&self.inner);
            let Some(ended) = g.life.end(generation, reason) else {
                return;
            };
            g.known = None;
            (ended, g.value.clone())
        };
        let h = &ended.held;
        // Consul may still think we hold it: release it as soon as we can
        // reach it. Owed before anyone hears of the loss (a `close` that
        // follows the signal finds it), queued after.
        let unlock = (reason == LockLost::SessionLost(LostReason::DeadlineExceeded))
            .then(|| unlock_task(&self.client, &self.key, value, self.flags, &h.session, None));
        lock(&self.client.core().held_keys).remove(&h.extra.held_id);
        h.token.cancel();
        ended.signal(self.client.core(), &format!("lock {}", self.key));
        // After the signals: giving the claim up wakes sibling futures, which may be polled
        // on this thread (`baton::drive`), and nothing may stand before a loss signal.
        unclaim(h.session.id(), &self.key, self.id);
        if let Some(task) = unlock {
            self.client.clean_up(task);
        }
    }
}

/// Whether an acquire request's failure leaves its outcome unknown (no
/// answer, a server error, an answer that cannot be read): Consul may or may
/// not have applied it.
fn outcome_unknown(e: &Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Timeout | ErrorKind::Connection | ErrorKind::Server | ErrorKind::BadResponse
    )
}

/// The message for a key whose flags are not this lock's: what wrote it, and
/// what to do.
pub(crate) fn foreign_flags(key: &str, have: u64, want: u64) -> String {
    let what = if have == 0 {
        "written as Consul's leader-election guide, curl, py-consul and most scripts \
         write a lock key; to share the key with such clients, give the lock or election \
         the option flags = 0 (Rust `flags(0)`, Python `flags=0`, Node `{ flags: 0 }`, C \
         `baton_election_options.flags = 0`), \
         or use another key"
            .to_string()
    } else if is_lock_flags(have) {
        format!(
            "a lock key of Go's api.Lock (and baton's default); this lock writes flags \
             {want}: create it with the default flags to share the key"
        )
    } else {
        "not a lock key (a semaphore's, or other data): use another key".to_string()
    };
    format!("{LOCK_CONFLICT} (key {key:?} has flags {have}: {what})")
}

/// The error of an acquire whose session was lost meanwhile.
fn lost_while_acquiring(session: &Session) -> Error {
    Error::new(
        ErrorKind::SessionInvalidated,
        format!("session {} was lost while acquiring the lock", session.id()),
    )
}

/// The unlock of `key` by `session` (an `unlock` only frees the key while
/// `session` holds it) as a clean-up task, retried as [`Owed`] says: through
/// any outage until Consul answers. It is recorded as owed from now on (so
/// `close` knows it) but not queued: the caller queues it with
/// `Client::clean_up` — a loss after it has signalled (queueing may start
/// the clean-up thread, which no signal waits for). `claim` (if any) is
/// given up when the task ends.
fn unlock_task(
    client: &Client,
    key: &str,
    value: Vec<u8>,
    flags: u64,
    session: &Session,
    claim: Option<ClaimGuard>,
) -> impl FnMut(&Client) -> Next + Send + 'static {
    let key = key.to_string();
    let sid = session.id().to_string();
    let mut owed = Owed::new(session);
    let entry = client.core().owe(OwedItem::Unlock((
        key.clone(),
        sid.clone(),
        value.clone(),
        flags,
    )));
    move |c| {
        let _claim = &claim;
        let _entry = &entry;
        match super::wire::unlock(c, &key, &value, &sid, flags) {
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
                owed.failed(&e)
            }
        }
    }
}
