//! Local claims: one contender per (session, key) in the process talks to
//! Consul. Several `Lock`s (or `Semaphore`s) of one process on the same key and
//! session queue here instead of racing each other at the server; a clean-up
//! that must not undo a new holding keeps the claim until it is done.
//!
//! A waiting future (`baton::aio`) refused because a sibling held the claim is not
//! parked on a channel here: it registers a hook ([`on_unclaim`]) that every release of a
//! claim under its key (or prefix) fires, since that release may change nothing in Consul
//! (the sibling's try failed) and so would wake nothing else.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver, Sender};
use once_cell::sync::Lazy;

use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;
use crate::runtime::lease::Session;

/// Owners given to handed-over claims (locks count from 1, semaphores from 2^62).
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1 << 63);

struct LocalClaim {
    owner: u64,
    waiters: Vec<Sender<()>>,
}

static LOCAL: Lazy<Mutex<HashMap<(String, String), LocalClaim>>> =
    Lazy::new(|| Mutex::new(HashMap::new()));

/// What a release of a claim calls: quick, never user code beyond a `Waker`.
pub(crate) type UnclaimFn = std::sync::Arc<dyn Fn() + Send + Sync + 'static>;

/// Hooks by the key or prefix they watch: id and hook.
type HookTable = HashMap<String, Vec<(u64, UnclaimFn)>>;

/// The hooks of waiting futures.
static HOOKS: Lazy<Mutex<HookTable>> = Lazy::new(|| Mutex::new(HashMap::new()));
static NEXT_HOOK: AtomicU64 = AtomicU64::new(1);

/// Removes its hook when dropped.
pub(crate) struct UnclaimHook {
    at: String,
    id: u64,
}

impl Drop for UnclaimHook {
    fn drop(&mut self) {
        let mut hooks = lock(&HOOKS);
        if let Some(list) = hooks.get_mut(&self.at) {
            list.retain(|(id, _)| *id != self.id);
            if list.is_empty() {
                hooks.remove(&self.at);
            }
        }
    }
}

/// Calls `hook` whenever a claim on `at`, or on a key under the prefix `at/`, is given up
/// (by any session), until the returned guard drops.
pub(crate) fn on_unclaim(at: &str, hook: UnclaimFn) -> UnclaimHook {
    let at = at.trim_end_matches('/');
    let id = NEXT_HOOK.fetch_add(1, Ordering::Relaxed);
    lock(&HOOKS)
        .entry(at.to_string())
        .or_default()
        .push((id, hook));
    UnclaimHook {
        at: at.to_string(),
        id,
    }
}

/// Fires the hooks of `key` and of every prefix of it that ends before a `/`.
fn fire_unclaim_hooks(key: &str) {
    let due: Vec<UnclaimFn> = {
        let hooks = lock(&HOOKS);
        if hooks.is_empty() {
            return;
        }
        let prefixes = key
            .match_indices('/')
            .map(|(i, _)| &key[..i])
            .chain(std::iter::once(key));
        prefixes
            .filter_map(|p| hooks.get(p))
            .flat_map(|list| list.iter().map(|(_, h)| h.clone()))
            .collect()
    };
    for hook in due {
        hook();
    }
}

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

/// Claims (session, key) for `owner` if nobody else has it now (a loop's call, which
/// must not wait; see `lock::warm`).
pub(crate) fn claim_now(session: &str, key: &str, owner: u64) -> bool {
    let mut map = lock(&LOCAL);
    match map.get(&(session.to_string(), key.to_string())) {
        Some(c) => c.owner == owner,
        None => {
            map.insert(
                (session.to_string(), key.to_string()),
                LocalClaim {
                    owner,
                    waiters: Vec::new(),
                },
            );
            true
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
    closing: &CancelToken,
) -> Result<bool> {
    loop {
        let rx = match try_claim(session.id(), key, owner) {
            Ok(()) => return Ok(true),
            Err(rx) => rx,
        };
        if let Woke::Tick = wait_signals(&rx, deadline, cancel, session, closing)? {
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
    let to = NEXT_OWNER.fetch_add(1, Ordering::Relaxed);
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

/// Gives up `owner`'s claim on (session, key): wakes the next local contender and the
/// waiting futures of the key ([`on_unclaim`]).
pub(crate) fn unclaim(session: &str, key: &str, owner: u64) {
    if give_up(session, key, owner) {
        fire_unclaim_hooks(key);
    }
}

/// [`unclaim`] after a try that Consul refused because the key is held elsewhere: the key's
/// next change wakes the waiting futures, so they are not woken here.
pub(crate) fn unclaim_refused(session: &str, key: &str, owner: u64) {
    give_up(session, key, owner);
}

/// Removes `owner`'s claim and wakes the blocked contenders; whether there was one.
fn give_up(session: &str, key: &str, owner: u64) -> bool {
    let waiters = {
        let mut map = lock(&LOCAL);
        let k = (session.to_string(), key.to_string());
        match map.get(&k) {
            Some(c) if c.owner == owner => map.remove(&k).map(|c| c.waiters),
            _ => None,
        }
    };
    let Some(waiters) = waiters else {
        return false;
    };
    for w in waiters {
        let _ = w.try_send(());
    }
    true
}

/// Backoff when the server keeps refusing a check on a key that a read then
/// shows unchanged: from this...
const STALE_BACKOFF_START: Duration = Duration::from_millis(20);
/// ...up to this.
const STALE_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Before an acquire reads its keys again after the server refused views that
/// a read then confirmed, `stale_tries` times in a row: the first time at once,
/// then a pause growing from [`STALE_BACKOFF_START`] to [`STALE_BACKOFF_MAX`],
/// ended early by `deadline`, `cancel`, the session's loss or the client's close.
pub(crate) fn pause_after_stale(
    stale_tries: u32,
    deadline: Option<Instant>,
    cancel: Option<&CancelToken>,
    session: &Session,
    closing: &CancelToken,
) -> Result<()> {
    if stale_tries <= 1 {
        return Ok(());
    }
    let pause = STALE_BACKOFF_START
        .saturating_mul(1 << (stale_tries - 2).min(10))
        .min(STALE_BACKOFF_MAX);
    let until = Instant::now() + pause;
    let wake = deadline.map_or(until, |d| d.min(until));
    let never = crossbeam_channel::never();
    wait_signals(&never, Some(wake), cancel, session, closing).map(|_| ())
}

/// How a wait ended.
pub(crate) enum Woke {
    Changed,
    Tick,
}

/// Blocks on `changes` until a message, `wake`, cancel, session loss or client
/// close.
pub(crate) fn wait_signals(
    changes: &Receiver<()>,
    wake: Option<Instant>,
    cancel: Option<&CancelToken>,
    session: &Session,
    closing: &CancelToken,
) -> Result<Woke> {
    let mut until = wake;
    if let Some(v) = session.valid_until() {
        until = Some(until.map_or(v, |w| w.min(v)));
    }
    if until.is_some_and(|u| u <= Instant::now()) {
        // Nothing to wait for (a try-once that found a sibling's claim): what the wait would
        // see at once, read without the channels a wait takes from each token. A cancel
        // token keeps its channel as long as it lives, and a pending async acquire, whose
        // token outlives every try, would keep one for nothing (`make bench-scale`).
        // A message or a disconnect, as the select below would take either.
        return if !matches!(
            changes.try_recv(),
            Err(crossbeam_channel::TryRecvError::Empty)
        ) {
            Ok(Woke::Changed)
        } else if cancel.is_some_and(CancelToken::is_cancelled) {
            Err(cancelled())
        } else if session.cancel_token().is_cancelled() {
            Err(lost(session))
        } else if closing.is_cancelled() {
            Err(closed())
        } else {
            ticked(session)
        };
    }
    let never = crossbeam_channel::never();
    let cancel_rx = cancel.map_or_else(|| never.clone(), |c| c.receiver());
    let lost_rx = session.cancel_token().receiver();
    let closed_rx = closing.receiver();
    let tick = until.map_or_else(crossbeam_channel::never, crossbeam_channel::at);
    select! {
        recv(changes) -> _ => Ok(Woke::Changed),
        recv(cancel_rx) -> _ => Err(cancelled()),
        recv(lost_rx) -> _ => Err(lost(session)),
        recv(closed_rx) -> _ => Err(closed()),
        recv(tick) -> _ => ticked(session),
    }
}

fn cancelled() -> Error {
    Error::new(ErrorKind::Cancelled, "lock acquire cancelled")
}

fn lost(session: &Session) -> Error {
    Error::new(
        ErrorKind::SessionInvalidated,
        format!("session {} was lost while acquiring the lock", session.id()),
    )
}

fn closed() -> Error {
    Error::new(ErrorKind::Closed, "the baton client is closed")
}

/// A wait's time is up: a tick, unless it was the session's lease deadline.
fn ticked(session: &Session) -> Result<Woke> {
    if session.is_valid() {
        return Ok(Woke::Tick);
    }
    Err(Error::new(
        ErrorKind::SessionInvalidated,
        format!(
            "session {} passed its lease deadline while acquiring the lock",
            session.id()
        ),
    ))
}
