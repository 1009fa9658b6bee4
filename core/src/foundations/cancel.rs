//! `CancelToken`: cancel blocking calls from any thread.

use std::fmt;
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender};

use crate::foundations::sync::lock;

type Hook = Box<dyn FnOnce() + Send + 'static>;

struct State {
    cancelled: bool,
    /// The channel behind [`CancelToken::receiver`], made when first asked for (most tokens
    /// only ever run hooks: a pending async call's): the sender is dropped on cancel, which
    /// disconnects every receiver at once.
    channel: Option<(Option<Sender<()>>, Receiver<()>)>,
    hooks: Vec<(u64, Hook)>,
    next_hook: u64,
}

struct Inner {
    state: Mutex<State>,
}

/// A cancellation signal that can be shared between threads.
///
/// Clone it freely; all clones are the same token. Pass it to blocking calls
/// ([`QueryOptions::cancel`](crate::QueryOptions), [`Session::wait_lost`](crate::Session::wait_lost), ...)
/// and call [`CancelToken::cancel`] from any thread: the call returns promptly
/// with [`ErrorKind::Cancelled`](crate::ErrorKind::Cancelled), even while an HTTP
/// long poll is in flight.
///
/// A session also hands out a token that is cancelled when the session is lost
/// ([`Session::cancel_token`](crate::Session::cancel_token)), for the holder's work to watch.
#[derive(Clone)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl Default for CancelToken {
    fn default() -> Self {
        CancelToken::new()
    }
}

impl CancelToken {
    /// A new, not yet cancelled token.
    pub fn new() -> CancelToken {
        CancelToken {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    cancelled: false,
                    channel: None,
                    hooks: Vec::new(),
                    next_hook: 0,
                }),
            }),
        }
    }

    /// Cancels the token. Idempotent; callable from any thread.
    pub fn cancel(&self) {
        let hooks = {
            let mut st = lock(&self.inner.state);
            if st.cancelled {
                return;
            }
            st.cancelled = true;
            if let Some((sender, _)) = &mut st.channel {
                sender.take();
            }
            std::mem::take(&mut st.hooks)
        };
        for (_, hook) in hooks {
            hook();
        }
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        lock(&self.inner.state).cancelled
    }

    /// A receiver that disconnects when the token is cancelled, for use in
    /// `crossbeam_channel::select!` (a `recv` on it returns `Err` once cancelled;
    /// it never yields a value).
    pub fn receiver(&self) -> Receiver<()> {
        let mut st = lock(&self.inner.state);
        let cancelled = st.cancelled;
        let (_, receiver) = st.channel.get_or_insert_with(|| {
            let (sender, receiver) = crossbeam_channel::bounded(0);
            // Made after the cancel: disconnected from the start.
            ((!cancelled).then_some(sender), receiver)
        });
        receiver.clone()
    }

    /// Blocks until the token is cancelled or `timeout` passes; returns whether
    /// it was cancelled.
    pub fn wait_timeout(&self, timeout: std::time::Duration) -> bool {
        let _ = self.receiver().recv_timeout(timeout);
        self.is_cancelled()
    }

    /// Runs `hook` when the token is cancelled (at once if it already is).
    /// The hook runs on the cancelling thread; keep it short.
    pub(crate) fn on_cancel(&self, hook: impl FnOnce() + Send + 'static) -> HookGuard {
        let mut st = lock(&self.inner.state);
        if st.cancelled {
            drop(st);
            hook();
            return HookGuard { token: None, id: 0 };
        }
        let id = st.next_hook;
        st.next_hook += 1;
        st.hooks.push((id, Box::new(hook)));
        HookGuard {
            token: Some(self.clone()),
            id,
        }
    }
}

impl CancelToken {
    /// A future that resolves once the token is cancelled (at once if it already is),
    /// for async code: `select!` a leader task's work against its token, say. It holds
    /// no thread: the cancel wakes the task.
    pub fn cancelled(&self) -> Cancelled {
        Cancelled {
            token: self.clone(),
            waker: Arc::default(),
            hook: None,
        }
    }
}

/// The future of [`CancelToken::cancelled`].
#[must_use = "futures do nothing unless polled"]
pub struct Cancelled {
    token: CancelToken,
    waker: Arc<Mutex<Option<std::task::Waker>>>,
    hook: Option<HookGuard>,
}

impl fmt::Debug for Cancelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cancelled")
            .field("token", &self.token)
            .finish()
    }
}

impl std::future::Future for Cancelled {
    type Output = ();

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        let this = self.get_mut();
        // The waker first: a cancel after it is in place wakes the task.
        *lock(&this.waker) = Some(cx.waker().clone());
        if this.hook.is_none() {
            let waker = Arc::downgrade(&this.waker);
            this.hook = Some(this.token.on_cancel(move || {
                let w = waker.upgrade().and_then(|w| lock(&w).take());
                if let Some(w) = w {
                    w.wake();
                }
            }));
        }
        if this.token.is_cancelled() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    }
}

/// A token cancelled when any of its sources is (see [`CancelToken::any_of`]); the links
/// to the sources go when it drops (cancelling a source later no longer cancels it).
pub struct Linked {
    pub(crate) token: CancelToken,
    _links: Vec<HookGuard>,
}

impl fmt::Debug for Linked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Linked")
            .field("token", &self.token)
            .finish()
    }
}

impl Linked {
    /// The linked token: pass it to the call that must end when any source is cancelled.
    pub fn token(&self) -> &CancelToken {
        &self.token
    }
}

impl CancelToken {
    /// A token cancelled as soon as any of `sources` is (at once if one already is),
    /// for as long as the returned [`Linked`] lives: the one token a wait listens to when
    /// a caller's cancel, a session's loss and the client's close must all end it. No
    /// thread: each source cancels it from its own `cancel`.
    pub fn any_of(sources: impl IntoIterator<Item = CancelToken>) -> Linked {
        let token = CancelToken::new();
        let _links = sources
            .into_iter()
            .map(|source| {
                let t = token.clone();
                source.on_cancel(move || t.cancel())
            })
            .collect();
        Linked { token, _links }
    }
}

/// Removes a cancel hook when dropped.
pub(crate) struct HookGuard {
    token: Option<CancelToken>,
    id: u64,
}

impl Drop for HookGuard {
    fn drop(&mut self) {
        if let Some(t) = &self.token {
            lock(&t.inner.state).hooks.retain(|(id, _)| *id != self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn cancel_disconnects_receivers_and_runs_hooks_once() {
        let t = CancelToken::new();
        let r = t.receiver();
        let n = Arc::new(AtomicUsize::new(0));
        let n2 = n.clone();
        let _g = t.on_cancel(move || {
            n2.fetch_add(1, Ordering::SeqCst);
        });
        let n3 = n.clone();
        let g2 = t.on_cancel(move || {
            n3.fetch_add(100, Ordering::SeqCst);
        });
        drop(g2);
        assert!(r.try_recv().is_err());
        assert!(!t.is_cancelled());
        let t2 = t.clone();
        std::thread::spawn(move || t2.cancel()).join().unwrap();
        assert!(t.is_cancelled());
        assert!(r.recv().is_err());
        t.cancel();
        assert_eq!(n.load(Ordering::SeqCst), 1);
        assert!(t.wait_timeout(Duration::from_secs(5)));
        let n4 = n.clone();
        let _g = t.on_cancel(move || {
            n4.fetch_add(10, Ordering::SeqCst);
        });
        assert_eq!(n.load(Ordering::SeqCst), 11);
    }

    #[test]
    fn a_receiver_asked_for_after_the_cancel_is_disconnected() {
        let t = CancelToken::new();
        t.cancel();
        assert!(t.receiver().recv_timeout(Duration::from_secs(5)).is_err());
        assert!(t.wait_timeout(Duration::from_secs(5)));
        let fresh = CancelToken::new();
        assert!(!fresh.wait_timeout(Duration::from_millis(10)));
    }
}
