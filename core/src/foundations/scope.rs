//! The call scope: limits every request made by the calling thread while a
//! call with a deadline (an acquire with a timeout) is running.
//!
//! A recipe call makes several requests (session create, read, transaction,
//! session lookup); each must be bounded by what is left of the caller's
//! deadline, not by the client's `request_timeout`. Rather than threading a
//! deadline through every low-level function, the call enters a scope on its
//! own thread and [`Client::send`](crate::Client) shortens each request to the
//! time left. Scopes nest; the earliest deadline wins. The clean-up thread
//! also uses a scope, to make its requests interruptible by `close`.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};

#[derive(Clone, Default)]
struct Scope {
    deadline: Option<Instant>,
    cancel: Option<CancelToken>,
    /// `close` making owed work: requests pass the closed check.
    finishing: bool,
}

thread_local! {
    static CURRENT: RefCell<Scope> = RefCell::new(Scope::default());
    /// The reach records of the calls running on this thread (innermost last).
    static REACH: RefCell<Vec<Reach>> = const { RefCell::new(Vec::new()) };
}

/// What the requests of one call (and of the calls it makes) learned about
/// reaching Consul: whether any got an answer, and the last failure that got
/// none (connection refused or reset, name not resolved, TLS failure, no
/// answer in time).
#[derive(Default)]
struct Reach {
    answered: bool,
    unanswered: u32,
    last_failure: Option<String>,
}

/// Ends a reach record when dropped (see [`track_reach`]).
pub(crate) struct ReachGuard {
    depth: usize,
}

impl Drop for ReachGuard {
    fn drop(&mut self) {
        REACH.with(|r| r.borrow_mut().truncate(self.depth));
    }
}

/// Starts recording whether the calling thread's requests reach Consul, until
/// the guard drops: a waiting call (an acquire) tells "someone else holds it"
/// from "nothing answered at all" by it.
pub(crate) fn track_reach() -> ReachGuard {
    REACH.with(|r| {
        let mut r = r.borrow_mut();
        let depth = r.len();
        r.push(Reach::default());
        ReachGuard { depth }
    })
}

/// Records one request's outcome in every open reach record of this thread:
/// `None` when the server answered (any status), else the failure's text.
pub(crate) fn note_reach(failure: Option<&dyn std::fmt::Display>) {
    REACH.with(|r| {
        let mut r = r.borrow_mut();
        if r.is_empty() {
            return;
        }
        let text = failure.map(|f| f.to_string());
        for rec in r.iter_mut() {
            match &text {
                None => rec.answered = true,
                Some(t) => {
                    rec.unanswered += 1;
                    rec.last_failure = Some(t.clone());
                }
            }
        }
    })
}

impl ReachGuard {
    /// When requests were made under this guard and none got an answer: how
    /// many, and the last failure.
    pub(crate) fn unreached(&self) -> Option<(u32, String)> {
        REACH.with(|r| {
            let r = r.borrow();
            let rec = r.get(self.depth)?;
            if rec.answered {
                return None;
            }
            rec.last_failure.clone().map(|f| (rec.unanswered, f))
        })
    }
}

/// Restores the previous scope when dropped.
pub(crate) struct ScopeGuard {
    previous: Option<Scope>,
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        if let Some(p) = self.previous.take() {
            CURRENT.with(|c| *c.borrow_mut() = p);
        }
    }
}

/// Bounds the calling thread's requests by `deadline` until the guard drops
/// (`None` leaves the current bound as it is).
pub(crate) fn deadline(deadline: Option<Instant>) -> ScopeGuard {
    enter(|s| {
        if let Some(d) = deadline {
            s.deadline = Some(s.deadline.map_or(d, |old| old.min(d)));
        }
    })
}

/// Lets the calling thread's requests through a closed client until the
/// guard drops: `close` itself making the work still owed to Consul.
pub(crate) fn finishing() -> ScopeGuard {
    enter(|s| s.finishing = true)
}

/// Whether the calling thread is making `close`'s owed work ([`finishing`]).
pub(crate) fn is_finishing() -> bool {
    CURRENT.with(|c| c.borrow().finishing)
}

/// The deadline of the calling thread's scope (`Some(None)`: none) when a request may run
/// outside the transport's ordinary path (a lock's direct path): `None` when the scope has a
/// cancel token or is making `close`'s owed work, whose requests take the ordinary path.
pub(crate) fn plain_deadline() -> Option<Option<Instant>> {
    CURRENT.with(|c| {
        let s = c.borrow();
        (s.cancel.is_none() && !s.finishing).then_some(s.deadline)
    })
}

/// Makes the calling thread's requests interruptible by `cancel` until the
/// guard drops. Such requests cannot share pooled connections, so this is for
/// rare requests (clean-up), not for the hot path.
pub(crate) fn cancel_with(cancel: CancelToken) -> ScopeGuard {
    enter(|s| s.cancel = Some(cancel))
}

fn enter(change: impl FnOnce(&mut Scope)) -> ScopeGuard {
    CURRENT.with(|c| {
        let mut cur = c.borrow_mut();
        let previous = cur.clone();
        change(&mut cur);
        ScopeGuard {
            previous: Some(previous),
        }
    })
}

/// What the current scope imposes on one request: the time left (an error
/// when none is) and the cancel token.
pub(crate) fn limits(endpoint: &str) -> Result<(Option<Duration>, Option<CancelToken>)> {
    CURRENT.with(|c| {
        let s = c.borrow();
        let left = match s.deadline {
            None => None,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(Error::new(
                        ErrorKind::Timeout,
                        "the call's deadline passed before this request could be sent",
                    )
                    .with_endpoint(endpoint.to_string()));
                }
                Some(left)
            }
        };
        Ok((left, s.cancel.clone()))
    })
}

/// The instant `timeout` from now; `None` for no timeout, and for one too large
/// to represent (it would end after the machine does: wait without one).
pub(crate) fn deadline_after(timeout: Option<Duration>) -> Option<Instant> {
    timeout.and_then(|t| Instant::now().checked_add(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_nest_and_restore() {
        assert!(limits("x").unwrap().0.is_none());
        let far = Instant::now() + Duration::from_secs(100);
        {
            let _a = deadline(Some(far));
            let left = limits("x").unwrap().0.unwrap();
            assert!(left > Duration::from_secs(90));
            {
                let _b = deadline(Some(Instant::now() + Duration::from_secs(10)));
                assert!(limits("x").unwrap().0.unwrap() <= Duration::from_secs(10));
                // A later deadline does not widen the bound.
                let _c = deadline(Some(far + Duration::from_secs(100)));
                assert!(limits("x").unwrap().0.unwrap() <= Duration::from_secs(10));
            }
            assert!(limits("x").unwrap().0.unwrap() > Duration::from_secs(90));
            let _d = deadline(Some(Instant::now()));
            let e = limits("PUT /v1/txn").unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Timeout);
        }
        assert!(limits("x").unwrap().0.is_none());
    }

    #[test]
    fn reach_records_nest_and_see_answers_of_inner_calls() {
        note_reach(Some(&"ignored: nothing tracks"));
        let outer = track_reach();
        assert_eq!(outer.unreached(), None, "no request yet");
        note_reach(Some(&"refused"));
        {
            let inner = track_reach();
            note_reach(Some(&"reset"));
            assert_eq!(inner.unreached(), Some((1, "reset".to_string())));
        }
        assert_eq!(outer.unreached(), Some((2, "reset".to_string())));
        {
            let inner = track_reach();
            note_reach(None);
            assert_eq!(inner.unreached(), None);
        }
        assert_eq!(outer.unreached(), None, "an inner call's answer counts");
    }
}
