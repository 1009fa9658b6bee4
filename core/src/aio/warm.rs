//! A lock's warm acquire and release as futures that make their one request themselves: the
//! request written and the answer read in the future's own poll, the socket waited on by the
//! client's readiness thread (`runtime::reactor`) in between. The blocking calls drive the same
//! warm calls on their own thread (`lock::direct`), the event loops from their own poll
//! (`lock::warm`); a future has no loop of its own to poll a socket, so the readiness thread
//! wakes its task instead. Without it a try went to a step thread and its outcome came back:
//! two wake-ups per request where this costs one.
//!
//! Anything the one request does not settle goes on as before: the warm call's resume, on a
//! step thread when its request may have been applied, or the ordinary steps.
//!
//! With the `tokio` feature, a future polled inside a tokio runtime waits for its socket on
//! that runtime's own reactor instead of the readiness thread (`aio::socket_wait`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::call::{Call, Driven};
use super::socket_wait::{Readiness, SocketWait};
use super::wake::{SlotAlarm, WakeSlot};
use crate::client::Client;
use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::recipes::lock::warm::WarmStep;
use crate::recipes::lock::warm::{ResumeAcquire, ResumeRelease, WarmAcquire, WarmRelease};

/// A warm call a future drives ([`WarmAcquire`], [`WarmRelease`]).
pub(crate) trait WarmCall: Send + 'static {
    /// What finishes it on a thread when its one request does not.
    type Resume: Send + 'static;
    /// Writes, reads and judges what it can without blocking.
    fn advance(&mut self) -> WarmStep<Self::Resume>;
    /// Its socket, while in flight.
    fn socket(&self) -> Option<std::os::fd::BorrowedFd<'_>>;
    /// How long its request may take.
    fn time_limit(&self) -> Duration;
    /// Gives it up as a warm call: the rest, if any.
    fn abandon(self) -> Option<Self::Resume>;
    /// Counts it as settled by its one request (`Client::direct_calls`).
    fn count_settled(&self);
}

impl WarmCall for WarmAcquire {
    type Resume = ResumeAcquire;
    fn advance(&mut self) -> WarmStep<ResumeAcquire> {
        WarmAcquire::advance(self)
    }
    fn socket(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        WarmAcquire::socket(self)
    }
    fn time_limit(&self) -> Duration {
        WarmAcquire::time_limit(self)
    }
    fn abandon(self) -> Option<ResumeAcquire> {
        WarmAcquire::abandon(self)
    }
    fn count_settled(&self) {
        WarmAcquire::count_settled(self)
    }
}

impl WarmCall for WarmRelease {
    type Resume = ResumeRelease;
    fn advance(&mut self) -> WarmStep<ResumeRelease> {
        WarmRelease::advance(self)
    }
    fn socket(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        WarmRelease::socket(self)
    }
    fn time_limit(&self) -> Duration {
        WarmRelease::time_limit(self)
    }
    fn abandon(self) -> Option<ResumeRelease> {
        Some(WarmRelease::abandon(self))
    }
    fn count_settled(&self) {
        WarmRelease::count_settled(self)
    }
}

/// How a driven warm call ended.
pub(crate) enum Settled<R> {
    /// Its outcome.
    Done(Result<bool>),
    /// The rest, for a step thread or the ordinary steps.
    Resume(R),
}

/// A warm call in flight, driven from a future's poll.
pub(crate) struct Driving<W: WarmCall> {
    /// `None` once settled or given up. Dropped in flight, it gives back what it may have
    /// been granted (its own `Drop`).
    call: Option<W>,
    /// How the task waits for the call's socket.
    wait: SocketWait,
    /// When its request is given up: its time limit from its start.
    until: Instant,
}

impl<W: WarmCall> Driving<W> {
    /// Drives `call` from a future's polls, its socket waited on as `readiness` says
    /// ([`readiness`]).
    pub(crate) fn start(readiness: Readiness, call: W) -> Driving<W> {
        Driving {
            until: Instant::now() + call.time_limit(),
            call: Some(call),
            wait: SocketWait::new(readiness),
        }
    }

    /// When its request is given up, unless answered before.
    pub(crate) fn until(&self) -> Instant {
        self.until
    }

    /// Advances the call; while its socket is not ready, the task is woken (through `cx`)
    /// when it is.
    pub(crate) fn poll_settle(&mut self, cx: &mut Context<'_>) -> Poll<Settled<W::Resume>> {
        // A socket found ready at once is advanced again; past a few such rounds the task
        // yields to its executor rather than spin here.
        for _ in 0..READY_ROUNDS {
            self.wait.forget();
            let Some(call) = self.call.as_mut() else {
                return Poll::Ready(Settled::Done(Err(ended())));
            };
            match call.advance() {
                WarmStep::Pending(interest) => {
                    let armed = match call.socket() {
                        Some(fd) => self.wait.arm(fd, interest, cx),
                        None => Err(std::io::ErrorKind::NotConnected.into()),
                    };
                    match armed {
                        Ok(Poll::Pending) => return Poll::Pending,
                        Ok(Poll::Ready(())) => continue,
                        // The client closed under it: the rest decides what that means.
                        Err(_) => return Poll::Ready(self.give_up()),
                    }
                }
                WarmStep::Done(result) => {
                    call.count_settled();
                    self.call = None;
                    return Poll::Ready(Settled::Done(result));
                }
                WarmStep::Resume(rest) => {
                    self.call = None;
                    return Poll::Ready(Settled::Resume(rest));
                }
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Gives the request up (its time, a cancel, the client's close): the rest of the call.
    pub(crate) fn give_up(&mut self) -> Settled<W::Resume> {
        self.wait.forget();
        match self.call.take().and_then(W::abandon) {
            Some(rest) => Settled::Resume(rest),
            None => Settled::Done(Err(ended())),
        }
    }
}

impl<W: WarmCall> Drop for Driving<W> {
    fn drop(&mut self) {
        // Before the call (and its socket) goes.
        self.wait.forget();
    }
}

/// How many times in one poll a warm call advances on a socket found ready at once.
const READY_ROUNDS: usize = 4;

/// How `client`'s warm calls wait for their sockets ([`Readiness::for_client`]), or `None`
/// when they cannot (closed, a system without `epoll` outside tokio, or `BATON_AIO_WARM=0`):
/// then no warm call is started.
pub(crate) fn readiness(client: &Client) -> Option<Readiness> {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !*ON.get_or_init(|| crate::foundations::sync::env_switch("BATON_AIO_WARM")) {
        // Every try and release on the step threads, as before this path (a bench compares).
        return None;
    }
    Readiness::for_client(client)
}

/// A lock's release driven in the future's own poll (`release_async`), going on on a step
/// thread when its request fails or runs out of time.
pub(crate) struct DrivenRelease {
    state: ReleaseState,
    client: Client,
    slot: Arc<WakeSlot>,
    alarm: SlotAlarm,
}

enum ReleaseState {
    Warm(Box<Driving<WarmRelease>>),
    Rest(Call<bool>),
}

impl DrivenRelease {
    /// `release_async` of a lock whose release `call` is warm.
    pub(crate) fn call(client: &Client, readiness: Readiness, call: WarmRelease) -> Call<bool> {
        let driven = DrivenRelease {
            state: ReleaseState::Warm(Box::new(Driving::start(readiness, call))),
            client: client.clone(),
            slot: WakeSlot::new(false),
            alarm: SlotAlarm::default(),
        };
        Call::driven(client, Box::new(driven))
    }
}

impl Driven<bool> for DrivenRelease {
    fn poll_driven(&mut self, cx: &mut Context<'_>) -> Poll<Result<bool>> {
        loop {
            let d = match &mut self.state {
                ReleaseState::Rest(rest) => return Pin::new(rest).poll(cx),
                ReleaseState::Warm(d) => d,
            };
            let closing = self.client.core().closing.is_cancelled();
            let settled = if closing || Instant::now() >= d.until() {
                d.give_up()
            } else {
                match d.poll_settle(cx) {
                    Poll::Ready(s) => s,
                    Poll::Pending => {
                        // Its time limit wakes the task too.
                        self.slot.register(cx.waker());
                        let until = Some(d.until());
                        if self.alarm.set(&self.slot, &self.client, until).is_ok() {
                            return Poll::Pending;
                        }
                        d.give_up()
                    }
                }
            };
            match settled {
                Settled::Done(result) => return Poll::Ready(result),
                Settled::Resume(rest) => {
                    let rest =
                        Call::start(&self.client, CancelToken::new(), move |_| rest.run(), None);
                    self.state = ReleaseState::Rest(rest);
                }
            }
        }
    }
}

fn ended() -> Error {
    Error::new(ErrorKind::Conflict, "this warm call has already ended")
}
