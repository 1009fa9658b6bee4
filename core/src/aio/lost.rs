//! [`Lost`]: the end of a holding as a future, for `select!`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::contend::Contend;
use super::wake::WakeSlot;
use crate::cancel::HookGuard;
use crate::error::{ErrorKind, Result};
use crate::steps::AlarmGuard;

/// Resolves when the current holding ends (see [`AsyncHold::lost`](super::AsyncHold::lost)):
/// to why it ended, or at once to why the last one ended if nothing is held.
/// Holds no thread: the holding's cancel token and an alarm at the session's
/// local lease deadline wake the task.
#[must_use = "futures do nothing unless polled"]
pub struct Lost<'a, H: Contend> {
    hold: &'a H,
    slot: Arc<WakeSlot>,
    token_hook: Option<HookGuard>,
    alarm: Option<(Instant, AlarmGuard)>,
}

impl<H: Contend> std::fmt::Debug for Lost<'_, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lost")
            .field("what", &self.hold.describe())
            .finish()
    }
}

impl<'a, H: Contend> Lost<'a, H> {
    pub(crate) fn new(hold: &'a H) -> Self {
        Lost {
            hold,
            slot: WakeSlot::new(false),
            token_hook: None,
            alarm: None,
        }
    }
}

impl<H: Contend> Future for Lost<'_, H> {
    type Output = Result<H::Lost>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            this.slot.take_fired();
            // A zero wait never blocks: the reason if the holding has ended.
            match this.hold.wait_lost(Some(Duration::ZERO), None) {
                Err(e) if e.kind() == ErrorKind::Timeout => {}
                other => return Poll::Ready(other),
            }
            this.slot.register(cx.waker());
            if this.token_hook.is_none() {
                let fire = this.slot.hook();
                this.token_hook = Some(this.hold.cancel_token().on_cancel(move || fire()));
            }
            // Passing the session's local deadline ends the holding too, without
            // anyone cancelling anything: look again then.
            match this.hold.session_now().and_then(|s| s.valid_until()) {
                Some(at) if this.alarm.as_ref().is_none_or(|(t, _)| *t != at) => {
                    let fire = this.slot.hook();
                    match this
                        .hold
                        .client()
                        .core()
                        .alarm(at, Box::new(move || fire()))
                    {
                        Ok(g) => this.alarm = Some((at, g)),
                        Err(e) => return Poll::Ready(Err(e)),
                    }
                }
                _ => {}
            }
            if this.slot.fired() {
                continue;
            }
            return Poll::Pending;
        }
    }
}
