//! [`LeaderStream`]: an election's leaders as a `Stream`.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_core::Stream;

use super::wake::WakeSlot;
use crate::cancel::HookGuard;
use crate::client::Client;
use crate::election::{LeaderEvent, Observer};
use crate::error::Result;

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
        let slot = WakeSlot::new(false);
        let fire = slot.hook();
        let observer = client.observe_leader_hooked(key, Some(Arc::new(move |_| fire())))?;
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
