//! The acquire of a [`MultiLock`](super::MultiLock): this process's local
//! claims on every key (so contenders sharing a session queue here, as locks
//! do), then one transaction per try — a check of each key against the view
//! it was judged free on, then a `lock` of each — waiting on the key hub for a
//! change of any key (or a lock-delay's end) between tries.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Known, MultiShared};
use crate::api::kv::KvPair;
use crate::api::txn::KvOp;
use crate::foundations::cancel::CancelToken;
use crate::foundations::compat::{exact_in_f64, through_f64, TxnNumbers, TXN_FLOAT64_BEFORE};
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;
use crate::recipes::lock::{flags_match, LOCK_CONFLICT};
use crate::runtime::claim::{pause_after_stale, take_claim, unclaim, wait_signals, Woke};
use crate::runtime::keyhub::{Hook, KeySub};
use crate::runtime::lease::{LostReason, Session};
use crate::runtime::ride_out::RideOut;
use crate::transport::http::QueryOptions;

/// When the delay of a key's previous holder is unknown, retries after a
/// lock-delay refusal back off from this...
const DELAY_BACKOFF_START: Duration = Duration::from_millis(250);
/// ...up to this (Go's fixed retry time).
const DELAY_BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Added to a known lock-delay, for the server's timer granularity.
const DELAY_MARGIN: Duration = Duration::from_millis(10);

/// What one acquire transaction came to.
enum Attempt {
    /// Every key carries our session: the entries, in the order of the keys.
    Acquired(Vec<KvPair>),
    /// These keys changed since our view (or are held): read them again.
    Stale(Vec<usize>),
    /// Free, but these keys were refused for lock-delay.
    Delayed(Vec<usize>),
    /// No usable answer: Consul may or may not have applied the transaction.
    Unknown(Error),
}

impl MultiShared {
    /// The acquire once this object's turn is taken, inside the call's
    /// deadline scope: the session, the local claims, then Consul.
    pub(super) fn acquire_in_turn(
        self: &Arc<Self>,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<bool> {
        let past_deadline = |e: &Error| {
            e.kind() == ErrorKind::Timeout && deadline.is_some_and(|d| d <= Instant::now())
        };
        let mut ride = RideOut::new(
            self.client.core(),
            "multi-key lock acquire",
            deadline,
            cancel,
        );
        loop {
            let session = match &self.explicit_session {
                Some(s) => s.clone(),
                None => match ride.run(|| self.client.default_session()) {
                    Ok(s) => s,
                    Err(e) if past_deadline(&e) => return Ok(false),
                    Err(e) => return Err(e),
                },
            };
            if !session.is_valid() {
                if self.explicit_session.is_some() {
                    return Err(Error::new(
                        ErrorKind::SessionInvalidated,
                        format!("the multi-key lock's session {} is lost", session.id()),
                    ));
                }
                continue;
            }
            if !self.claim_all(&session, deadline, cancel)? {
                return Ok(false);
            }
            match self.acquire_remote(&session, deadline, cancel) {
                Ok(true) => return Ok(true),
                Err(e)
                    if e.kind() == ErrorKind::SessionInvalidated
                        && self.explicit_session.is_none()
                        && !session.is_valid() =>
                {
                    // The default session died while we waited: take the new one.
                    self.unclaim_all(&session);
                    continue;
                }
                Err(e) if past_deadline(&e) => {
                    self.unclaim_all(&session);
                    return Ok(false);
                }
                other => {
                    self.unclaim_all(&session);
                    return other;
                }
            }
        }
    }

    /// Waits until this object is the process's one contender for every key
    /// on `session`, claiming them in key order (so two multi-key locks of
    /// one process never wait for each other in a circle). `Ok(false)` at the
    /// deadline, with no claim kept.
    fn claim_all(
        &self,
        session: &Session,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<bool> {
        let closing = &self.client.conn().closing;
        for (i, key) in self.keys.iter().enumerate() {
            let taken = take_claim(session, key, self.id, deadline, cancel, closing);
            if !matches!(taken, Ok(true)) {
                for k in &self.keys[..i] {
                    unclaim(session.id(), k, self.id);
                }
                return taken;
            }
        }
        Ok(true)
    }

    /// Gives up this object's claims on every key (those handed over to a
    /// clean-up are not its own any more and stay).
    pub(super) fn unclaim_all(&self, session: &Session) {
        for k in &self.keys {
            unclaim(session.id(), k, self.id);
        }
    }

    /// Acquires the keys on `session` by `deadline`. A transaction whose
    /// outcome stayed unknown may still be applied late: unless the call ends
    /// holding the keys, whatever of them carries the session is unlocked in
    /// the background.
    fn acquire_remote(
        self: &Arc<Self>,
        session: &Session,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<bool> {
        let mut maybe_applied = false;
        let result = self.acquire_remote_inner(session, deadline, cancel, &mut maybe_applied);
        if maybe_applied && !matches!(result, Ok(true)) {
            self.unlock_later(session);
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
        let mut ride =
            RideOut::new(&core, "multi-key lock acquire", deadline, cancel).on_session(session);
        let n = self.keys.len();
        // Warm: the keys as our last release left them, checked by the transaction itself.
        let mut views: Vec<Option<Known>> = {
            let mut g = lock(&self.inner);
            g.retry_at = None;
            match g.warm.take() {
                Some(warm) => warm.into_iter().map(Some).collect(),
                None => vec![None; n],
            }
        };
        let mut subs: Option<Vec<KeySub>> = None;
        // One channel for the changes of every key (each key's hook sends).
        let (tx, rx) = crossbeam_channel::bounded::<()>(1);
        let mut retry_at: Option<Instant> = None;
        let mut delay_tries = 0u32;
        let mut stale_tries = 0u32;
        let passed = || deadline.is_some_and(|d| d <= Instant::now());
        loop {
            core.check_usable()?;
            if cancel.is_some_and(|c| c.is_cancelled()) {
                return Err(Error::new(
                    ErrorKind::Cancelled,
                    "multi-key lock acquire cancelled",
                ));
            }
            if !session.is_valid() {
                return Err(lost_while_acquiring(session));
            }
            for (i, v) in views.iter_mut().enumerate() {
                if v.is_none() {
                    *v = Some(ride.run(|| self.read(i))?);
                }
            }
            let known: Vec<Known> = views.iter().flatten().cloned().collect();
            for k in &known {
                if let Some(p) = &k.entry {
                    if !flags_match(self.flags, p.flags) {
                        return Err(Error::new(
                            ErrorKind::Conflict,
                            format!(
                                "{LOCK_CONFLICT} (key {:?} has flags {}, a multi-key lock writes \
                                 {}: another recipe's key, or data; nothing was written)",
                                p.key, p.flags, self.flags
                            ),
                        ));
                    }
                }
            }
            let elsewhere: Vec<(usize, String)> = known
                .iter()
                .enumerate()
                .filter_map(|(i, k)| {
                    let holder = k.entry.as_ref()?.session.clone()?;
                    (holder != session.id()).then_some((i, holder))
                })
                .collect();
            if elsewhere.is_empty() && retry_at.is_none_or(|t| t <= Instant::now()) {
                let value = lock(&self.inner).value.clone();
                let mut reread = true;
                let granted = match self.attempt(session, &known, &value)? {
                    Attempt::Acquired(entries) => Some(entries),
                    Attempt::Unknown(e) => {
                        // Not known to be ours, and maybe applied late: undone in the
                        // background unless this call ends holding the keys.
                        *maybe_applied |= e.kind() != ErrorKind::BadResponse;
                        views = vec![None; n];
                        match ride.run(|| self.learn_outcome(session, &value)) {
                            Ok(Some(entries)) => Some(entries),
                            Ok(None) if e.kind() == ErrorKind::BadResponse => {
                                stale_tries += 1;
                                None
                            }
                            Ok(None) => {
                                // Consul was unavailable: wait (within the deadline) and
                                // try again; a failure for good ends the call.
                                ride.pause(e)?;
                                None
                            }
                            Err(read_err) => return Err(read_err),
                        }
                    }
                    Attempt::Stale(which) => {
                        stale_tries += 1;
                        for i in which {
                            views[i] = None;
                        }
                        None
                    }
                    Attempt::Delayed(which) => {
                        reread = false;
                        stale_tries = 0;
                        retry_at = Some(self.delay_retry(&known, &which, delay_tries));
                        delay_tries += 1;
                        None
                    }
                };
                if let Some(entries) = granted {
                    let generation = self.hold(session, entries)?;
                    if self.holding_valid(generation) {
                        return Ok(true);
                    }
                    // Lost before we could return it: never report a holding that is
                    // not valid.
                    if !session.is_valid() {
                        return Err(lost_while_acquiring(session));
                    }
                    stale_tries += 1;
                    views = vec![None; n];
                }
                if reread {
                    retry_at = None;
                    if passed() {
                        return Ok(false);
                    }
                    pause_after_stale(stale_tries, deadline, cancel, session, &core.closing)?;
                    continue;
                }
            } else if !elsewhere.is_empty() {
                for (i, holder) in &elsewhere {
                    self.note_holder(*i, holder);
                }
                retry_at = None;
                delay_tries = 0;
                stale_tries = 0;
            }
            if passed() {
                lock(&self.inner).retry_at = retry_at;
                return Ok(false);
            }
            // Wait for a change of any key, the retry time, or the deadline.
            let subs = match &mut subs {
                Some(s) => s,
                None => subs.insert(self.subscribe(&views, &tx)?),
            };
            if take_changes(subs, &mut views) {
                continue;
            }
            let wake = match (deadline, retry_at) {
                (Some(d), Some(r)) => Some(d.min(r)),
                (d, r) => d.or(r),
            };
            match wait_signals(&rx, wake, cancel, session, &core.closing)? {
                Woke::Changed => {
                    take_changes(subs, &mut views);
                }
                Woke::Tick => {
                    if passed() {
                        return Ok(false);
                    }
                }
            }
        }
    }

    /// Every key as the unlock transaction of our clean release answered it (`None` if the
    /// answer misses one): the views a warm acquire checks against without reading.
    pub(super) fn views_after_release(&self, entries: &[KvPair]) -> Option<Vec<Known>> {
        let now = Instant::now();
        self.keys
            .iter()
            .map(|key| {
                let p = entries.iter().rev().find(|p| &p.key == key)?;
                Some(Known {
                    entry: Some(p.clone()),
                    as_of: p.modify_index,
                    seen_at: now,
                })
            })
            .collect()
    }

    /// Reads key `i` (a plain, default-consistency read, as Go's `api.Lock`
    /// makes; the transaction's checks catch a stale one).
    fn read(&self, i: usize) -> Result<Known> {
        let (entry, meta) = self
            .client
            .kv()
            .get_with(&self.keys[i], &QueryOptions::default())?;
        let as_of = entry
            .as_ref()
            .map_or(meta.index, |p| p.modify_index.max(meta.index));
        Ok(Known {
            entry,
            as_of,
            seen_at: Instant::now(),
        })
    }

    /// Subscribes to every key on the client's key hub, seeded with our
    /// views; each key's change wakes `tx`.
    fn subscribe(
        &self,
        views: &[Option<Known>],
        tx: &crossbeam_channel::Sender<()>,
    ) -> Result<Vec<KeySub>> {
        let core = self.client.core();
        let mut subs = Vec::with_capacity(self.keys.len());
        for (key, view) in self.keys.iter().zip(views) {
            let tx = tx.clone();
            let hook: Hook = Arc::new(move |_| {
                let _ = tx.try_send(());
            });
            let seed = view.as_ref().map(|k| (k.entry.clone(), k.as_of));
            subs.push(KeySub::new(
                &core.conn,
                &core.keyhub,
                key,
                seed,
                Some(hook),
            )?);
        }
        Ok(subs)
    }

    /// One acquire transaction on the views `known`: a `check-index` (or
    /// `check-not-exists`) of every key, then a `lock` of every key.
    fn attempt(&self, session: &Session, known: &[Known], value: &[u8]) -> Result<Attempt> {
        let conn = self.client.conn();
        if !exact_in_f64(self.flags) && conn.learn_txn_numbers(&self.keys[0]) == TxnNumbers::Lossy {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "a multi-key lock takes its keys in one transaction, and this Consul \
                     (before {TXN_FLOAT64_BEFORE}) stores the flags of a transaction through a \
                     float64: {} would be stored as {}, which Go's api.Lock does not read as a \
                     lock; upgrade Consul, or give flags below 2^53 (e.g. 0) if no Go client \
                     shares the keys",
                    self.flags,
                    through_f64(self.flags)
                ),
            ));
        }
        let n = self.keys.len();
        let mut ops = Vec::with_capacity(2 * n);
        for (key, k) in self.keys.iter().zip(known) {
            ops.push(match &k.entry {
                Some(p) => KvOp::check_index(key, p.modify_index),
                None => KvOp::check_not_exists(key),
            });
        }
        for key in &self.keys {
            ops.push(KvOp::lock(key, value, self.flags, session.id()));
        }
        match self.client.txn(&ops) {
            Ok(entries) => {
                let mut got = Vec::with_capacity(n);
                for key in &self.keys {
                    match entries.iter().rev().find(|p| &p.key == key) {
                        Some(p) if p.session.as_deref() == Some(session.id()) => {
                            let mut p = p.clone();
                            // The answer to a write carries no Value: it is ours.
                            p.value.get_or_insert_with(|| value.to_vec());
                            got.push(p);
                        }
                        _ => {
                            return Ok(Attempt::Unknown(Error::new(
                                ErrorKind::BadResponse,
                                format!(
                                    "multi-key lock txn succeeded without returning our session \
                                     on {key:?}"
                                ),
                            )))
                        }
                    }
                }
                Ok(Attempt::Acquired(got))
            }
            Err(e) if e.kind() == ErrorKind::Conflict && !e.txn_errors().is_empty() => {
                let texts: Vec<&str> = e.txn_errors().iter().map(|t| t.what.as_str()).collect();
                if texts.iter().any(|t| t.contains("invalid session")) {
                    session.shared.lose(LostReason::Invalidated);
                    return Err(Error::new(
                        ErrorKind::SessionInvalidated,
                        format!("failed to acquire multi-key lock: {}", texts.join("; ")),
                    ));
                }
                // A failed check (ops 0..n) means our view of that key was stale. A
                // lock op (n..2n) fails for lock-delay, or because the key is held (a
                // holder our view missed); anything else will not go away by retrying.
                let stale: Vec<usize> = e
                    .txn_errors()
                    .iter()
                    .filter(|t| t.op_index < n)
                    .map(|t| t.op_index)
                    .collect();
                let locks: Vec<(usize, &str)> = e
                    .txn_errors()
                    .iter()
                    .filter(|t| (n..2 * n).contains(&t.op_index))
                    .map(|t| (t.op_index - n, t.what.as_str()))
                    .collect();
                let held: Vec<usize> = locks
                    .iter()
                    .filter(|(_, t)| t.contains("already held"))
                    .map(|(i, _)| *i)
                    .collect();
                let delayed: Vec<usize> = locks
                    .iter()
                    .filter(|(_, t)| t.contains("lock delay"))
                    .map(|(i, _)| *i)
                    .collect();
                if held.len() + delayed.len() + stale.len() < texts.len() {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        format!(
                            "Consul refused the multi-key lock on {:?}: {}",
                            self.keys,
                            texts.join("; ")
                        ),
                    ));
                }
                if !stale.is_empty() || !held.is_empty() {
                    Ok(Attempt::Stale(stale.into_iter().chain(held).collect()))
                } else {
                    Ok(Attempt::Delayed(delayed))
                }
            }
            Err(e) if outcome_unknown(&e) => Ok(Attempt::Unknown(e)),
            Err(e) => Err(e),
        }
    }

    /// After a transaction without a usable answer: reads every key and
    /// returns the entries if all of them carry our session (the server did
    /// apply it). Keys only some of which are ours are taken again by the next
    /// try (a `lock` by the holding session succeeds), or given back when the
    /// call ends without the holding.
    fn learn_outcome(&self, session: &Session, value: &[u8]) -> Result<Option<Vec<KvPair>>> {
        let mut ours = Vec::with_capacity(self.keys.len());
        for i in 0..self.keys.len() {
            match self.read(i)?.entry {
                Some(mut p)
                    if p.session.as_deref() == Some(session.id()) && p.flags == self.flags =>
                {
                    p.value.get_or_insert_with(|| value.to_vec());
                    ours.push(p);
                }
                _ => return Ok(None),
            }
        }
        Ok(Some(ours))
    }

    /// The retry time after a lock-delay refusal of the keys `which`, seen
    /// free as `known` says: when the last of their previous holders'
    /// LockDelays ends, if all are known and this is the first refusal; else
    /// a growing backoff.
    fn delay_retry(&self, known: &[Known], which: &[usize], tries: u32) -> Instant {
        let now = Instant::now();
        if tries == 0 {
            let g = lock(&self.inner);
            let ends: Option<Vec<Instant>> = which
                .iter()
                .map(|&i| {
                    let d = g.last_holders[i].as_ref().and_then(|(_, d)| *d)?;
                    Some(known[i].seen_at + d + DELAY_MARGIN)
                })
                .collect();
            if let Some(latest) = ends.and_then(|e| e.into_iter().max()) {
                return latest.max(now);
            }
        }
        let step = DELAY_BACKOFF_START
            .saturating_mul(1 << tries.min(8))
            .min(DELAY_BACKOFF_MAX);
        now + step
    }

    /// Remembers a holder of key `i` other than us, looking its LockDelay up
    /// once.
    fn note_holder(&self, i: usize, holder: &str) {
        {
            let g = lock(&self.inner);
            if g.last_holders[i].as_ref().is_some_and(|(s, _)| s == holder) {
                return;
            }
        }
        let delay = match self.client.sessions().info(holder) {
            // Consul caps lock-delays at 60 s.
            Ok(Some(e)) => Some(e.lock_delay().min(Duration::from_secs(60))),
            _ => None,
        };
        lock(&self.inner).last_holders[i] = Some((holder.to_string(), delay));
    }
}

/// Takes the hub's newer views of the keys into `views`; whether any changed.
fn take_changes(subs: &mut [KeySub], views: &mut [Option<Known>]) -> bool {
    let mut changed = false;
    for (s, view) in subs.iter_mut().zip(views.iter_mut()) {
        let Some(v) = s.take_new() else { continue };
        let newer = view
            .as_ref()
            .is_none_or(|k| v.as_of > k.as_of || v.entry != k.entry);
        if newer {
            *view = Some(Known {
                entry: v.entry,
                as_of: v.as_of,
                seen_at: v.seen_at,
            });
            changed = true;
        }
    }
    changed
}

/// Whether a request's failure leaves its outcome unknown (no answer, a
/// server error, an answer that cannot be read): Consul may or may not have
/// applied it.
fn outcome_unknown(e: &Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Timeout | ErrorKind::Connection | ErrorKind::Server | ErrorKind::BadResponse
    )
}

/// The error of an acquire whose session was lost meanwhile.
fn lost_while_acquiring(session: &Session) -> Error {
    Error::new(
        ErrorKind::SessionInvalidated,
        format!(
            "session {} was lost while acquiring the multi-key lock",
            session.id()
        ),
    )
}
