//! [`LeaderStream`]: an election's leaders as a `Stream`.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;

use super::bounded::Bounded;
use super::wake::WakeSlot;
use crate::client::Client;
use crate::foundations::cancel::{CancelToken, HookGuard};
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;
use crate::recipes::election::{LeaderEvent, Observer};

/// Follows an election as a [`Stream`] of [`LeaderEvent`]s: the current state
/// first, then every change, never an older state after a newer one (as
/// [`Observer::next`]). Shares the client's key hub; holds no thread. After the
/// client closes it yields one `Closed` error and ends.
pub struct LeaderStream {
    observer: Observer,
    slot: Arc<WakeSlot>,
    _closing: HookGuard,
    ended: bool,
}

impl std::fmt::Debug for LeaderStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderStream")
            .field("key", &self.observer.key())
            .field("ended", &self.ended)
            .finish()
    }
}

impl LeaderStream {
    pub(crate) fn new(client: &Client, key: &str) -> Result<LeaderStream> {
        Self::following(client, key, false)
    }

    /// A stream that also reports each newer term (see [`Observer::reporting_each_term`]).
    pub(crate) fn following(client: &Client, key: &str, each_term: bool) -> Result<LeaderStream> {
        let slot = WakeSlot::new(false);
        let fire = slot.hook();
        let mut observer = client.observe_leader_hooked(key, Some(Arc::new(move |_| fire())))?;
        if each_term {
            observer = observer.reporting_each_term();
        }
        let fire = slot.hook();
        let closing = client.core().closing.on_cancel(move || fire());
        Ok(LeaderStream {
            observer,
            slot,
            _closing: closing,
            ended: false,
        })
    }

    /// The key observed.
    pub fn key(&self) -> &str {
        self.observer.key()
    }

    /// See [`Observer::taken_over_since`].
    pub(crate) fn taken_over_since(&self, term: u64) -> bool {
        self.observer.taken_over_since(term)
    }
}

impl Stream for LeaderStream {
    type Item = Result<LeaderEvent>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        // The waker first: a change after it is in place wakes the task, one
        // before it is seen by the look below.
        this.slot.register(cx.waker());
        this.slot.take_fired();
        match this.observer.take_event() {
            Ok(Some(event)) => Poll::Ready(Some(Ok(event))),
            Ok(None) => Poll::Pending,
            Err(e) => {
                this.ended = true;
                Poll::Ready(Some(Err(e)))
            }
        }
    }
}

/// A [`LeaderStream`] shared by a language binding's observer object and its pending calls:
/// `None` once the observer is closed.
pub type SharedLeaderStream = Arc<Mutex<Option<LeaderStream>>>;

/// The next event of a shared stream, bounded as [`Observer::next`] is: `Timeout` when
/// nothing changed by `timeout` (`None`: no limit), `Cancelled` when `cancel` fires, `Closed`
/// once the stream is closed (taken out) or its client is. The stream is locked only while
/// the future is polled.
pub fn next_shared(
    stream: &SharedLeaderStream,
    timeout: Option<Duration>,
    cancel: &CancelToken,
) -> Result<Bounded<impl Future<Output = Result<LeaderEvent>> + Send + 'static>> {
    let closed = || Error::new(ErrorKind::Closed, "the observer was closed");
    let client = match lock(stream).as_ref() {
        Some(s) => s.observer.client().clone(),
        None => return Err(closed()),
    };
    let stream = Arc::clone(stream);
    let next = std::future::poll_fn(move |cx| {
        let mut g = lock(&stream);
        let Some(s) = g.as_mut() else {
            return Poll::Ready(Err(closed()));
        };
        match Pin::new(s).poll_next(cx) {
            Poll::Ready(Some(r)) => Poll::Ready(r),
            Poll::Ready(None) => Poll::Ready(Err(Error::new(
                ErrorKind::Closed,
                "the baton client is closed",
            ))),
            Poll::Pending => Poll::Pending,
        }
    });
    Ok(Bounded::new(
        &client,
        next,
        timeout,
        Some(cancel),
        "no leader change before the timeout",
        "observe cancelled",
    ))
}
