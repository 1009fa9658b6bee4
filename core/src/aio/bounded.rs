//! [`Bounded`]: a future ended by a deadline or a cancel token too, for the language bindings
//! whose waiting calls take both (a `wait_lost(timeout)`, an observer's `next(timeout)`) the way
//! their blocking twins do. A Rust program uses its executor's timer and `select!` instead.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::wake::{SlotAlarm, WakeSlot};
use crate::client::Client;
use crate::foundations::cancel::{CancelToken, HookGuard};
use crate::foundations::error::{Error, ErrorKind, Result};

/// Resolves to the inner future's outcome, or to a `Timeout` error at the deadline, or to a
/// `Cancelled` error when the token fires, whichever comes first. Holds no thread: the
/// client's timer and the token's hook wake the task. Dropping it drops the inner future.
#[must_use = "futures do nothing unless polled"]
pub struct Bounded<F> {
    inner: Pin<Box<F>>,
    client: Client,
    deadline: Option<Instant>,
    cancel: Option<CancelToken>,
    /// The errors to end with, by kind: the caller's words ("lock still held at timeout").
    timeout_error: Option<Error>,
    cancelled_error: Option<Error>,
    slot: Arc<WakeSlot>,
    hook: Option<HookGuard>,
    alarm: SlotAlarm,
}

impl<F> std::fmt::Debug for Bounded<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bounded")
            .field("deadline", &self.deadline)
            .finish()
    }
}

impl<T, F: Future<Output = Result<T>>> Bounded<F> {
    /// Bounds `inner` by `timeout` (`None`: no limit; zero: one look) and `cancel`, ending with
    /// `Timeout` (message `on_timeout`) or `Cancelled` (message `on_cancel`).
    pub fn new(
        client: &Client,
        inner: F,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
        on_timeout: impl Into<String>,
        on_cancel: impl Into<String>,
    ) -> Self {
        Bounded {
            inner: Box::pin(inner),
            client: client.clone(),
            deadline: crate::foundations::scope::deadline_after(timeout),
            cancel: cancel.cloned(),
            timeout_error: Some(Error::new(ErrorKind::Timeout, on_timeout.into())),
            cancelled_error: Some(Error::new(ErrorKind::Cancelled, on_cancel.into())),
            slot: WakeSlot::new(false),
            hook: None,
            alarm: SlotAlarm::default(),
        }
    }

    fn end(slot: &mut Option<Error>) -> Poll<Result<T>> {
        Poll::Ready(Err(slot.take().unwrap_or_else(|| {
            Error::new(ErrorKind::Cancelled, "polled after it ended")
        })))
    }
}

impl<T, F: Future<Output = Result<T>>> Future for Bounded<F> {
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        // Every field is Unpin (the inner future is boxed).
        let this = self.get_mut();
        this.slot.register(cx.waker());
        this.slot.take_fired();
        if let Poll::Ready(out) = this.inner.as_mut().poll(cx) {
            return Poll::Ready(out);
        }
        if this.cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
            return Self::end(&mut this.cancelled_error);
        }
        if this.deadline.is_some_and(|d| d <= Instant::now()) {
            return Self::end(&mut this.timeout_error);
        }
        if this.hook.is_none() {
            if let Some(c) = &this.cancel {
                let fire = this.slot.hook();
                this.hook = Some(c.on_cancel(move || fire()));
            }
        }
        if let Err(e) = this.alarm.set(&this.slot, &this.client, this.deadline) {
            return Poll::Ready(Err(e));
        }
        if this.slot.fired() {
            // The token fired or the alarm rang while the hooks were put in place.
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}
