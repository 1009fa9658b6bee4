//! Watches of a KV key or prefix. Every subscriber of the same target shares one
//! subscription to the client's key hub, whose poller reads it with the other keys of its
//! group: a watch costs no thread and no connection of its own, so a client watching
//! thousands of prefixes (semaphores, queues, listings) still holds at most
//! `keyhub::MAX_GROUPS` long polls, well under Consul's 200 connections per client.

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
use crate::runtime::keyhub::{KeyHub, RangeHook, RangeNews, RangeSub, Target};
use crate::transport::conn::Conn;

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

/// Called on the key hub's poller thread, outside the watch's locks, when the watched state
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
}

impl WatchShared {
    /// What the key hub tells the target's subscription: a new answer (a change when its
    /// entries differ from the last ones), or a failed poll.
    fn told(&self, news: RangeNews<'_>) {
        let mut d = lock(&self.data);
        let hooks = match news {
            RangeNews::Answer(entries, index) => {
                d.last_error = None;
                d.bad_answer = None;
                let changed = d.current.as_ref().is_none_or(|c| c.entries != entries);
                if changed {
                    d.version += 1;
                    d.current = Some(WatchEvent {
                        index,
                        entries: entries.to_vec(),
                    });
                    d.notify()
                } else {
                    if let Some(c) = &mut d.current {
                        c.index = index;
                    }
                    Vec::new()
                }
            }
            RangeNews::Failed(e) => {
                d.last_error = Some(e.to_string());
                if e.kind() == ErrorKind::BadResponse {
                    let n = d.bad_answer.as_ref().map_or(0, |b| b.0) + 1;
                    d.bad_answer = Some((n, e.to_string()));
                    d.notify()
                } else {
                    Vec::new()
                }
            }
        };
        drop(d);
        call_hooks(hooks);
    }
}

/// The registry's entry for one target: the shared state, the subscriber
/// count and the target's subscription to the key hub (dropped with the entry).
pub(crate) struct WatchSlot {
    shared: Arc<WatchShared>,
    subscribers: usize,
    _range: RangeSub,
}

/// The client's watched targets, each with its one subscription to the key hub.
pub(crate) type Watches = Mutex<HashMap<WatchTarget, WatchSlot>>;

/// A subscription to a watched key or prefix. Dropping the last subscription
/// of a target ends its subscription to the key hub.
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

/// Subscribes to `target`: subscribers of one target share one subscription
/// (`Client::watch`, its public face).
pub(crate) fn subscribe(
    core: &Arc<Conn>,
    hub: &KeyHub,
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
            });
            let range = match &target {
                WatchTarget::Key(k) => Target::Key(k.clone()),
                WatchTarget::Prefix(p) => Target::Prefix(p.clone()),
            };
            let told = shared.clone();
            let hook: RangeHook = Arc::new(move |news| told.told(news));
            let range = RangeSub::new(&core, hub, range, hook)?;
            watches.insert(
                target,
                WatchSlot {
                    shared: shared.clone(),
                    subscribers: 1,
                    _range: range,
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
    /// Also calls `hook` (on the key hub's poller thread) whenever this subscriber's
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
        // Unsubscribes from the hub, outside the registry's lock.
        drop(slot);
    }
}
