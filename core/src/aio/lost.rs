//! [`Lost`] and [`SessionLost`]: the end of a holding or of a session as a
//! future, for `select!`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::contend::Contend;
use super::wake::{SlotAlarm, WakeSlot};
use crate::client::Client;
use crate::foundations::cancel::{CancelToken, HookGuard};
use crate::foundations::error::{ErrorKind, Result};
use crate::runtime::lease::{LostReason, Session};

/// What ends, seen without blocking.
trait Ending {
    type Output;
    /// The outcome once it has ended (never blocks).
    fn outcome(&self) -> Option<Result<Self::Output>>;
    /// A token cancelled when it ends.
    fn token(&self) -> CancelToken;
    /// The local deadline at which it ends without anyone cancelling anything
    /// (a session's lease running out).
    fn deadline(&self) -> Option<Instant>;
    fn client(&self) -> &Client;
}

/// The waiting shared by both futures: no thread, woken by the token's hook
/// and by an alarm at the deadline.
#[derive(Default)]
struct Waiting {
    slot: Arc<WakeSlot>,
    token_hook: Option<HookGuard>,
    alarm: SlotAlarm,
}

impl Waiting {
    fn poll<E: Ending>(&mut self, what: &E, cx: &mut Context<'_>) -> Poll<Result<E::Output>> {
        loop {
            self.slot.take_fired();
            if let Some(out) = what.outcome() {
                return Poll::Ready(out);
            }
            self.slot.register(cx.waker());
            if self.token_hook.is_none() {
                let fire = self.slot.hook();
                self.token_hook = Some(what.token().on_cancel(move || fire()));
            }
            if let Err(e) = self.alarm.set(&self.slot, what.client(), what.deadline()) {
                return Poll::Ready(Err(e));
            }
            if self.slot.fired() {
                continue;
            }
            return Poll::Pending;
        }
    }
}

/// A zero wait never blocks: the outcome if it has ended, `None` if not.
fn ended_now<T>(wait: Result<T>) -> Option<Result<T>> {
    match wait {
        Err(e) if e.kind() == ErrorKind::Timeout => None,
        other => Some(other),
    }
}

impl<H: Contend> Ending for &H {
    type Output = H::Lost;
    fn outcome(&self) -> Option<Result<H::Lost>> {
        ended_now(self.wait_lost(Some(Duration::ZERO), None))
    }
    fn token(&self) -> CancelToken {
        self.cancel_token()
    }
    fn deadline(&self) -> Option<Instant> {
        // Passing the session's local deadline ends the holding too.
        self.session_now().and_then(|s| s.valid_until())
    }
    fn client(&self) -> &Client {
        Contend::client(*self)
    }
}

/// Resolves when the current holding ends (see [`AsyncHold::lost`](super::AsyncHold::lost)):
/// to why it ended, or at once to why the last one ended if nothing is held.
/// Holds no thread: the holding's cancel token and an alarm at the session's
/// local lease deadline wake the task.
#[must_use = "futures do nothing unless polled"]
pub struct Lost<'a, H: Contend> {
    hold: &'a H,
    waiting: Waiting,
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
            waiting: Waiting::default(),
        }
    }
}

impl<H: Contend> Future for Lost<'_, H> {
    type Output = Result<H::Lost>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.waiting.poll(&this.hold, cx)
    }
}

struct SessionEnd {
    client: Client,
    session: Session,
}

impl Ending for SessionEnd {
    type Output = LostReason;
    fn outcome(&self) -> Option<Result<LostReason>> {
        ended_now(self.session.wait_lost(Some(Duration::ZERO), None))
    }
    fn token(&self) -> CancelToken {
        self.session.cancel_token()
    }
    fn deadline(&self) -> Option<Instant> {
        self.session.valid_until()
    }
    fn client(&self) -> &Client {
        &self.client
    }
}

/// Resolves when a session is lost, to why (see
/// [`AsyncClient::session_lost_async`](super::AsyncClient::session_lost_async)).
/// Holds no thread.
#[must_use = "futures do nothing unless polled"]
pub struct SessionLost {
    end: SessionEnd,
    waiting: Waiting,
}

impl std::fmt::Debug for SessionLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLost")
            .field("session", &self.end.session.id())
            .finish()
    }
}

impl SessionLost {
    pub(crate) fn new(client: &Client, session: &Session) -> Self {
        SessionLost {
            end: SessionEnd {
                client: client.clone(),
                session: session.clone(),
            },
            waiting: Waiting::default(),
        }
    }
}

impl Future for SessionLost {
    type Output = Result<LostReason>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.waiting.poll(&this.end, cx)
    }
}
