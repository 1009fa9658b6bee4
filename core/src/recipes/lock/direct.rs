//! The direct path: a lock's warm acquire or release (`lock::warm`) driven to its end on the
//! calling thread, which polls the loop connection's socket between advances instead of
//! sending the request through ureq.
//!
//! A warm cycle is two requests, each one txn whose answer the core judges anyway; ureq's
//! per-request work (pool checks, timers, header maps, the response builder) was about a third
//! of the client's CPU per cycle on loopback (`docs/src/performance.md`, "The direct path").
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
    // Each hook shuts the connection down (ending the poll); dropped when this returns.
    let _hooks: Vec<_> = match w.exchange().interrupter() {
        Some(shut) => tokens.iter().map(|t| t.on_cancel(shut.clone())).collect(),
        None => Vec::new(),
    };
    // Nothing is written once the time is up (as the ordinary path sends nothing then).
    if Instant::now() >= stop_at {
        return Stopped::Abandon;
    }
    loop {
        // Before advancing: a connection shut down by a hook is not the agent's failure.
        if tokens.iter().any(|t| t.is_cancelled()) {
            return Stopped::Abandon;
        }
        match w.advance() {
            WarmStep::Pending(interest) => {
                let now = Instant::now();
                if now >= stop_at || !w.exchange().wait(interest, stop_at - now) {
                    return Stopped::Abandon;
                }
            }
            WarmStep::Done(r) => {
                w.settled();
                return Stopped::Done(r);
            }
            WarmStep::Resume(r) => return Stopped::Resume(r),
        }
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
