//! The direct path: a lock's warm acquire or release (`lock::warm`) driven to its end on the
//! calling thread, which polls an idle connection's socket between advances instead of
//! going through the blocking path's steps.
//!
//! A warm cycle is two requests, each one txn whose answer the core judges anyway; the
//! per-request work of a general HTTP client was about a third of the client's CPU per cycle
//! on loopback when baton sent through ureq (`docs/src/performance.md`, "The direct path").
//! So a blocking acquire or release (Rust, C, Python's sync API; the event loops drive the
//! same calls themselves) tries this first. Anything a warm call does not settle goes on as
//! the blocking path from where it stopped, the same code a loop's resumed call runs.
//!
//! What the ordinary path gives a request, this one gives too: the request timeout and the
//! call's deadline bound it, and the caller's cancel token and the client's close interrupt
//! it (their hooks shut the connection down, which ends the poll). A request interrupted or
//! out of time is abandoned as a loop abandons one: the blocking path then knows whether it
//! may have been granted unseen, and gives the key back if it was not the call's to keep.

use std::time::Instant;

use super::warm::{Driven, WarmAcquire, WarmRelease, WarmStep};
use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::transport::http::exchange::{drive_here, Drive, Exchange};
use crate::transport::http::Interest;

/// How a driven call stopped.
enum Stopped<R> {
    /// Settled by its request.
    Done(Result<bool>),
    /// Not settled by it: the blocking path goes on from here.
    Resume(R),
    /// Out of time or interrupted, still in flight: the caller abandons it.
    Abandon,
}

/// Advances `w`, polling its socket in between, until it settles or resumes, or until
/// `deadline` (or the request timeout) passes or a token in `tokens` is cancelled.
fn drive<W: Driven>(
    w: &mut W,
    deadline: Option<Instant>,
    tokens: &[&CancelToken],
) -> Stopped<W::Resume> {
    let limit = Instant::now() + w.time_limit();
    let stop_at = deadline.map_or(limit, |d| d.min(limit));
    match drive_here(&mut Stepping(w), stop_at, tokens) {
        Some(WarmStep::Done(r)) => {
            w.settled();
            Stopped::Done(r)
        }
        Some(WarmStep::Resume(r)) => Stopped::Resume(r),
        // `Stepping` never gives a pending step.
        Some(WarmStep::Pending(_)) | None => Stopped::Abandon,
    }
}

/// A warm call as the transport's driver sees it.
struct Stepping<'a, W>(&'a mut W);

impl<W: Driven> Drive for Stepping<'_, W> {
    type Out = WarmStep<W::Resume>;
    fn step(&mut self) -> std::result::Result<Self::Out, Interest> {
        match self.0.advance() {
            WarmStep::Pending(interest) => Err(interest),
            done => Ok(done),
        }
    }
    fn exchange(&self) -> &Exchange {
        self.0.exchange()
    }
}

/// A warm acquire driven here: `bound` (the deadline of the call's scope) bounds its request,
/// and the rest of the call, if any, runs here with the call's own `deadline` and `cancel`.
pub(super) fn acquire(
    mut w: WarmAcquire,
    bound: Option<Instant>,
    deadline: Option<Instant>,
    cancel: Option<&CancelToken>,
) -> Result<bool> {
    let closing = w.closing();
    let tokens: Vec<&CancelToken> = std::iter::once(&closing).chain(cancel).collect();
    match drive(&mut w, bound, &tokens) {
        Stopped::Done(r) => r,
        Stopped::Resume(r) => r.continue_here(deadline, cancel),
        Stopped::Abandon => match w.abandon() {
            Some(r) => r.continue_here(deadline, cancel),
            None => Err(Error::new(
                ErrorKind::InvalidArgument,
                "this warm acquire has already ended",
            )),
        },
    }
}

/// A warm release driven here; its unlock goes on through the ordinary path if its request
/// does not settle it.
pub(super) fn release(mut w: WarmRelease, deadline: Option<Instant>) -> Result<bool> {
    let closing = w.closing();
    match drive(&mut w, deadline, &[&closing]) {
        Stopped::Done(r) => r,
        Stopped::Resume(r) => r.run(),
        Stopped::Abandon => w.abandon().run(),
    }
}
