//! Blocking-query watches on a KV key or prefix. Every subscriber of the same
//! target shares one watcher thread and one long poll.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver, Sender};

use crate::api::kv::KvPair;
use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;
use crate::foundations::threads::Worker;
use crate::transport::conn::Conn;
use crate::transport::http::QueryOptions;

/// How long one poll of a watch may block at the server.
const WATCH_WAIT: Duration = Duration::from_secs(300);

/// The index to send with the next blocking query, after a query sent with
/// `prev` returned `got` (consul-semantics §6.5): if the index went backwards,
/// start over with 0 (a non-blocking read); otherwise use it, but never below 1.
pub fn next_index(prev: u64, got: u64) -> u64 {
    if got < prev {
        0
    } else {
        got.max(1)
    }
}

/// Backoff for retrying failed polls: the first retry after a success goes at
/// once, then 100 ms doubling to 5 s.
///
/// A long poll is most often cut by the server closing its connections (an
/// agent restart, a leader change): the state may have changed under the
/// poll, and a holder must learn that before anyone else acts on it, so the
/// first retry does not wait. A server that is down costs one refused connect
/// more.
#[derive(Debug)]
pub(crate) struct Backoff(Option<Duration>);

impl Backoff {
    pub(crate) fn new() -> Backoff {
        Backoff(None)
    }
    pub(crate) fn reset(&mut self) {
        self.0 = None;
    }
    pub(crate) fn next(&mut self) -> Duration {
        let next = match self.0 {
            None => Duration::ZERO,
            Some(d) if d.is_zero() => Duration::from_millis(100),
            Some(d) => (d * 2).min(Duration::from_secs(5)),
        };
        self.0 = Some(next);
        next
    }
}

/// Paces a blocking-query loop against answers that make no progress early.
///
/// Consul holds a blocking query until the index passes the one sent or the
/// wait ends, and never answers index 0 (consul-semantics §6.5). A server or
/// proxy that answers at once without progress (the same or a lower index, or
/// none at all, read as 0) would have a client poll it in a tight loop;
/// Consul's guidance is for clients to rate-limit. The first such answer in a
/// row costs nothing (an index that went backwards is read afresh at once),
/// later ones pause with [`Backoff`] (100 ms doubling to 5 s). An answer with
/// progress, or one that came only after half the wait (a plain timeout),
/// resets it; so against a real Consul it never pauses.
#[derive(Debug)]
pub(crate) struct Pacer {
    started: Instant,
    backoff: Backoff,
}

impl Pacer {
    pub(crate) fn new() -> Pacer {
        Pacer {
            started: Instant::now(),
            backoff: Backoff::new(),
        }
    }

    /// Notes that a poll is being sent now.
    pub(crate) fn sending(&mut self) {
        self.started = Instant::now();
    }

    /// The pause before the next poll, after an answer with index `got` to a
    /// poll sent with index `sent` (0: not blocking) that could block `wait`.
    pub(crate) fn after(&mut self, sent: u64, got: u64, wait: Duration) -> Duration {
        let early = self.started.elapsed() < wait / 2;
        if got == 0 || (got <= sent && early) {
            self.backoff.next()
        } else {
            self.backoff.reset();
            Duration::ZERO
        }
    }
}

/// What a watch looks at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WatchTarget {
    /// One key.
    Key(String),
    /// Every key starting with a prefix.
    Prefix(String),
}

/// One observed state of a watched target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchEvent {
    /// The `X-Consul-Index` of the answer.
    pub index: u64,
    /// The entries: zero or one for a key watch, all matches for a prefix watch.
    pub entries: Vec<KvPair>,
}

struct Data {
    version: u64,
    current: Option<WatchEvent>,
    last_error: Option<String>,
    /// The last answer that could not be decoded (numbered), which retrying
    /// will not fix: subscribers that asked for it get it as an error.
    bad_answer: Option<(u64, String)>,
    subscribers: Vec<(u64, Sender<()>)>,
    /// Subscribers that are told by a call instead (the async API's wakers).
    hooks: Vec<(u64, ChangeHook)>,
    next_sub: u64,
}

/// Called on the watch thread, outside its locks, when the watched state
/// changes: must be quick (wake a task).
pub(crate) type ChangeHook = Arc<dyn Fn() + Send + Sync + 'static>;

impl Data {
    /// Tells the channel subscribers now; returns the hooks to call once the
    /// data's lock is given up.
    fn notify(&self) -> Vec<ChangeHook> {
        for (_, tx) in &self.subscribers {
            let _ = tx.try_send(());
        }
        self.hooks.iter().map(|(_, h)| h.clone()).collect()
    }
}

fn call_hooks(hooks: Vec<ChangeHook>) {
    for h in hooks {
        h();
    }
}

struct WatchShared {
    target: WatchTarget,
    data: Mutex<Data>,
    stop: CancelToken,
}

/// The registry's entry for one target: the shared state, the subscriber
/// count and the watcher thread.
pub(crate) struct WatchSlot {
    shared: Arc<WatchShared>,
    subscribers: usize,
    pub(crate) worker: Worker,
}

impl WatchSlot {
    pub(crate) fn stop(&self) {
        self.shared.stop.cancel();
    }
}

/// The client's watched targets, each with its one long poll.
pub(crate) type Watches = Mutex<HashMap<WatchTarget, WatchSlot>>;

/// A subscription to a watched key or prefix. Dropping the last subscription
/// of a target stops its watcher thread.
pub struct Watch {
    core: Arc<Conn>,
    watches: Arc<Watches>,
    shared: Arc<WatchShared>,
    sub: u64,
    notify: Receiver<()>,
    seen: u64,
    seen_bad: u64,
    /// The waker of the task polling this watch ([`Watch::poll_next`]), told by
    /// a change hook registered on its first poll.
    waker: Option<Arc<Mutex<Option<Waker>>>>,
}

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch")
            .field("target", &self.shared.target)
            .field("seen", &self.seen)
            .finish()
    }
}

/// The latest state the client's watch of `target` has seen, if it is watched
/// (no subscription is made and no request sent).
pub(crate) fn watched(registry: &Watches, target: &WatchTarget) -> Option<WatchEvent> {
    let shared = lock(registry).get(target).map(|slot| slot.shared.clone())?;
    let current = lock(&shared.data).current.clone();
    current
}

/// Subscribes to `target`: subscribers of one target share one long poll
/// (`Client::watch`, its public face).
pub(crate) fn subscribe(
    core: &Arc<Conn>,
    registry: &Arc<Watches>,
    target: WatchTarget,
) -> Result<Watch> {
    let core = core.clone();
    core.check_usable()?;
    let mut watches = lock(registry);
    core.check_usable()?;
    let shared = match watches.get_mut(&target) {
        Some(slot) => {
            slot.subscribers += 1;
            slot.shared.clone()
        }
        None => {
            let shared = Arc::new(WatchShared {
                target: target.clone(),
                data: Mutex::new(Data {
                    version: 0,
                    current: None,
                    last_error: None,
                    bad_answer: None,
                    subscribers: Vec::new(),
                    hooks: Vec::new(),
                    next_sub: 0,
                }),
                stop: CancelToken::new(),
            });
            let (c, s) = (core.clone(), shared.clone());
            let worker = Worker::spawn("baton-watch", move || run(c, s)).map_err(|e| {
                Error::new(ErrorKind::Connection, format!("cannot start a thread: {e}"))
            })?;
            watches.insert(
                target,
                WatchSlot {
                    shared: shared.clone(),
                    subscribers: 1,
                    worker,
                },
            );
            shared
        }
    };
    drop(watches);
    let (tx, rx) = crossbeam_channel::bounded(1);
    let sub = {
        let mut d = lock(&shared.data);
        let id = d.next_sub;
        d.next_sub += 1;
        d.subscribers.push((id, tx));
        id
    };
    Ok(Watch {
        core,
        watches: registry.clone(),
        shared,
        sub,
        notify: rx,
        seen: 0,
        seen_bad: 0,
        waker: None,
    })
}

impl Watch {
    /// Also calls `hook` (on the watch thread) whenever this subscriber's
    /// channel is told of a change, until the watch drops; at once if the
    /// watch already has a state this subscriber has not taken.
    pub(crate) fn on_change(&self, hook: ChangeHook) {
        let pending = {
            let mut d = lock(&self.shared.data);
            d.hooks.push((self.sub, hook.clone()));
            d.version > self.seen
        };
        if pending {
            hook();
        }
    }

    /// The target of this watch.
    pub fn target(&self) -> &WatchTarget {
        &self.shared.target
    }

    /// Number of subscribers currently sharing this watch's long poll.
    pub fn subscribers(&self) -> usize {
        lock(&self.watches)
            .get(&self.shared.target)
            .map_or(0, |s| s.subscribers)
    }

    /// The latest state seen by the watcher, if any (does not block).
    pub fn current(&self) -> Option<WatchEvent> {
        lock(&self.shared.data).current.clone()
    }

    /// The last error of the watcher's polls (cleared by the next success).
    pub fn last_error(&self) -> Option<String> {
        lock(&self.shared.data).last_error.clone()
    }

    /// Blocks until the watched state differs from the one this subscriber saw
    /// last (the first call returns the current state), `timeout` passes (error
    /// kind `Timeout`), or `cancel` is cancelled (kind `Cancelled`). Returns
    /// promptly on cancel even while the shared long poll is in flight. Errors
    /// of the polls are retried with backoff, not returned.
    pub fn next(
        &mut self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<WatchEvent> {
        self.next_inner(timeout, cancel, false)
    }

    /// Like [`Watch::next`], but an answer of the server that cannot be decoded
    /// (bad base64, a number out of range, invalid UTF-8) is returned as a
    /// `BadResponse` error instead of being retried in silence.
    pub(crate) fn next_strict(
        &mut self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<WatchEvent> {
        self.next_inner(timeout, cancel, true)
    }

    fn next_inner(
        &mut self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
        strict: bool,
    ) -> Result<WatchEvent> {
        let end = crate::foundations::scope::deadline_after(timeout);
        let never = crossbeam_channel::never();
        let cancel_rx = cancel
            .map(|c| c.receiver())
            .unwrap_or_else(|| never.clone());
        let closing = self.core.closing.receiver();
        loop {
            self.core.check_usable()?;
            if let Some(r) = self.take_new(strict) {
                return r;
            }
            if cancel.is_some_and(|c| c.is_cancelled()) {
                return Err(Error::new(ErrorKind::Cancelled, "watch cancelled"));
            }
            let tick = match end {
                Some(e) if e <= Instant::now() => {
                    return Err(Error::new(
                        ErrorKind::Timeout,
                        "no change before the timeout",
                    ))
                }
                Some(e) => crossbeam_channel::at(e),
                None => crossbeam_channel::never(),
            };
            select! {
                recv(self.notify) -> _ => {}
                recv(cancel_rx) -> _ => {}
                recv(closing) -> _ => {}
                recv(tick) -> _ => {}
            }
        }
    }
}

impl Watch {
    /// A state this subscriber has not taken yet, if any (or, with `strict`, an
    /// answer that could not be decoded, as an error).
    fn take_new(&mut self, strict: bool) -> Option<Result<WatchEvent>> {
        let d = lock(&self.shared.data);
        if d.version > self.seen {
            if let Some(ev) = &d.current {
                self.seen = d.version;
                return Some(Ok(ev.clone()));
            }
        }
        if let (true, Some((n, msg))) = (strict, &d.bad_answer) {
            if *n > self.seen_bad {
                self.seen_bad = *n;
                return Some(Err(Error::new(ErrorKind::BadResponse, msg.clone())));
            }
        }
        None
    }

    /// [`Watch::next`] without blocking, for a future: the next state this
    /// subscriber has not taken, else `Pending` with the task woken by the next
    /// change (`strict`: see [`Watch::next_strict`]). Errors: `Closed` once the
    /// client closes (the caller arranges to be woken by the close).
    pub(crate) fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
        strict: bool,
    ) -> Poll<Result<WatchEvent>> {
        if let Err(e) = self.core.check_usable() {
            return Poll::Ready(Err(e));
        }
        let slot = match &self.waker {
            Some(w) => Arc::clone(w),
            None => {
                let w: Arc<Mutex<Option<Waker>>> = Arc::default();
                let hook_slot = Arc::downgrade(&w);
                self.waker = Some(Arc::clone(&w));
                *lock(&w) = Some(cx.waker().clone());
                self.on_change(Arc::new(move || {
                    let waker = hook_slot.upgrade().and_then(|s| lock(&s).take());
                    if let Some(waker) = waker {
                        waker.wake();
                    }
                }));
                w
            }
        };
        // The waker first: a change after it is in place wakes the task, one
        // before it is taken below.
        *lock(&slot) = Some(cx.waker().clone());
        match self.take_new(strict) {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        {
            let mut d = lock(&self.shared.data);
            d.subscribers.retain(|(id, _)| *id != self.sub);
            d.hooks.retain(|(id, _)| *id != self.sub);
        }
        let slot = {
            let mut watches = lock(&self.watches);
            match watches.get_mut(&self.shared.target) {
                Some(slot) if Arc::ptr_eq(&slot.shared, &self.shared) => {
                    slot.subscribers -= 1;
                    if slot.subscribers == 0 {
                        watches.remove(&self.shared.target)
                    } else {
                        None
                    }
                }
                _ => None,
            }
        };
        if let Some(mut slot) = slot {
            slot.stop();
            slot.worker
                .join_until(Instant::now() + Duration::from_secs(5));
        }
    }
}

fn run(core: Arc<Conn>, shared: Arc<WatchShared>) {
    let mut index = 0u64;
    let mut backoff = Backoff::new();
    let mut pacer = Pacer::new();
    loop {
        if shared.stop.is_cancelled() || core.closing.is_cancelled() {
            return;
        }
        let (key, recurse) = match &shared.target {
            WatchTarget::Key(k) => (k, false),
            WatchTarget::Prefix(p) => (p, true),
        };
        let opts = if index == 0 {
            QueryOptions::default()
        } else {
            QueryOptions::blocking(index, WATCH_WAIT)
        };
        pacer.sending();
        let result = crate::api::kv::read(key, recurse, &opts, |req| {
            // Stopping the watch interrupts its poll.
            let mut req = req.clone();
            req.cancel = Some(shared.stop.clone());
            core.transport.send_on(&req, Some(&core.closing))
        });
        if shared.stop.is_cancelled() || core.closing.is_cancelled() {
            return;
        }
        match result {
            Ok((entries, meta)) => {
                backoff.reset();
                let pause = pacer.after(index, meta.index, WATCH_WAIT);
                index = next_index(index, meta.index);
                let mut d = lock(&shared.data);
                d.last_error = None;
                d.bad_answer = None;
                let changed = d.current.as_ref().is_none_or(|c| c.entries != entries);
                let mut hooks = Vec::new();
                if changed {
                    d.version += 1;
                    d.current = Some(WatchEvent {
                        index: meta.index,
                        entries,
                    });
                    hooks = d.notify();
                } else if let Some(c) = &mut d.current {
                    c.index = meta.index;
                }
                drop(d);
                call_hooks(hooks);
                if !pause.is_zero() {
                    let (stop, closing) = (shared.stop.receiver(), core.closing.receiver());
                    select! {
                        recv(stop) -> _ => return,
                        recv(closing) -> _ => return,
                        default(pause) => {}
                    }
                }
            }
            Err(e) => {
                let mut d = lock(&shared.data);
                d.last_error = Some(e.to_string());
                if e.kind() == ErrorKind::BadResponse {
                    if d.bad_answer.is_none() {
                        log::warn!("baton watch {:?}: {e}", shared.target);
                    }
                    let n = d.bad_answer.as_ref().map_or(0, |b| b.0) + 1;
                    d.bad_answer = Some((n, e.to_string()));
                    let hooks = d.notify();
                    drop(d);
                    call_hooks(hooks);
                } else {
                    log::debug!("baton watch {:?}: {e}", shared.target);
                    drop(d);
                }
                index = 0;
                let wait = backoff.next();
                let stop = shared.stop.receiver();
                let closing = core.closing.receiver();
                // Consul answering any thread again ends the pause.
                let back = core.transport.availability.next_answer().receiver();
                select! {
                    recv(stop) -> _ => return,
                    recv(closing) -> _ => return,
                    recv(back) -> _ => {}
                    default(wait) => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_rules() {
        assert_eq!(next_index(0, 0), 1);
        assert_eq!(next_index(0, 5), 5);
        assert_eq!(next_index(5, 5), 5);
        assert_eq!(next_index(5, 9), 9);
        assert_eq!(next_index(9, 3), 0);
        assert_eq!(next_index(1, 0), 0);
    }

    #[test]
    fn the_pacer_pauses_only_on_early_answers_without_progress() {
        let wait = Duration::from_secs(300);
        let mut p = Pacer::new();
        // Progress, and a plain timeout (no progress after the whole wait): no pause.
        p.sending();
        assert_eq!(p.after(0, 5, wait), Duration::ZERO);
        p.sending();
        assert_eq!(p.after(5, 9, wait), Duration::ZERO);
        p.started = Instant::now() - wait;
        assert_eq!(p.after(9, 9, wait), Duration::ZERO);
        // Early answers without progress: the first is free, then 100 ms doubling.
        for (sent, got) in [(9, 9), (9, 0), (0, 0), (9, 3)] {
            let mut p = Pacer::new();
            p.sending();
            assert_eq!(p.after(sent, got, wait), Duration::ZERO);
            assert_eq!(p.after(sent, got, wait), Duration::from_millis(100));
            assert_eq!(p.after(sent, got, wait), Duration::from_millis(200));
            // Progress resets it.
            assert_eq!(p.after(sent, sent + 1, wait), Duration::ZERO);
            assert_eq!(p.after(sent, got, wait), Duration::ZERO);
        }
    }

    #[test]
    fn backoff_retries_at_once_then_doubles_to_a_cap() {
        let mut b = Backoff::new();
        assert_eq!(b.next(), Duration::ZERO);
        assert_eq!(b.next(), Duration::from_millis(100));
        assert_eq!(b.next(), Duration::from_millis(200));
        for _ in 0..10 {
            b.next();
        }
        assert_eq!(b.next(), Duration::from_secs(5));
        b.reset();
        assert_eq!(b.next(), Duration::ZERO);
        assert_eq!(b.next(), Duration::from_millis(100));
    }
}
