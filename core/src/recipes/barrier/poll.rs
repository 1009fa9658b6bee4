//! One waiting call's blocking queries on a key or a prefix, and the token that
//! stops them.
//!
//! A barrier's wait starts from a read it made itself (after its own write, for
//! a double barrier's participant) and then blocks on Consul with the index of
//! that read, so no change after the read can be missed and no state older than
//! it can be taken for the current one. (A shared watch of the client would
//! hand a new subscriber the state its long poll last saw, which may predate
//! the caller's read: a key created and deleted in between, within one poll of
//! the shared watch, would then never wake the caller.) The call holds one long
//! poll while it waits, on the caller's own thread.

use std::time::{Duration, Instant};

use crossbeam_channel::select;

use crate::api::kv::KvPair;
use crate::client::Client;
use crate::foundations::cancel::{CancelToken, Linked};
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::runtime::lease::Session;
use crate::runtime::pacing::{next_index, Pacer};
use crate::runtime::ride_out::RideOut;
use crate::transport::http::QueryOptions;

/// The longest one blocking query of a wait may be held by the server
/// (Consul's own default); a wait without a deadline asks again after it.
const LONGEST_WAIT: Duration = Duration::from_secs(300);

/// The blocking queries of one waiting call on one key or prefix.
pub(super) struct Poll<'a> {
    client: &'a Client,
    path: String,
    recurse: bool,
    /// The index to block on: that of the last answer taken.
    index: u64,
    pacer: Pacer,
}

impl<'a> Poll<'a> {
    /// Polls one key.
    pub(super) fn key(client: &'a Client, key: &str) -> Poll<'a> {
        Poll::new(client, key, false)
    }

    /// Polls every key under `prefix`.
    pub(super) fn prefix(client: &'a Client, prefix: &str) -> Poll<'a> {
        Poll::new(client, prefix, true)
    }

    fn new(client: &'a Client, path: &str, recurse: bool) -> Poll<'a> {
        Poll {
            client,
            path: path.to_string(),
            recurse,
            index: 0,
            pacer: Pacer::new(),
        }
    }

    fn fetch(&self, options: &QueryOptions) -> Result<(Vec<KvPair>, u64)> {
        let kv = self.client.kv();
        if self.recurse {
            let (list, meta) = kv.list_with(&self.path, options)?;
            Ok((list, meta.index))
        } else {
            let (entry, meta) = kv.get_with(&self.path, options)?;
            Ok((entry.into_iter().collect(), meta.index))
        }
    }

    /// The state now (not blocking); later waits start from it.
    pub(super) fn read(&mut self, ride: &mut RideOut<'_>) -> Result<Vec<KvPair>> {
        let (entries, index) = ride.run(|| self.fetch(&QueryOptions::default()))?;
        // A read of our own is authoritative: an index lower than the last one
        // (tombstones reaped, a snapshot restored) is taken as it is.
        self.index = index.max(1);
        Ok(entries)
    }

    /// Blocks until Consul reports a change after the last answer taken, and
    /// returns the new state (a wake may be spurious: the caller looks again),
    /// or `None` once `deadline` has passed. `stop` interrupts the poll (its
    /// error is kind `Cancelled`).
    pub(super) fn next(
        &mut self,
        ride: &mut RideOut<'_>,
        deadline: Option<Instant>,
        stop: &CancelToken,
    ) -> Result<Option<Vec<KvPair>>> {
        loop {
            let wait = match deadline {
                None => LONGEST_WAIT,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(None);
                    }
                    left.min(LONGEST_WAIT)
                }
            };
            let sent = self.index;
            let options = QueryOptions {
                index: sent,
                wait: Some(wait),
                cancel: Some(stop.clone()),
                ..Default::default()
            };
            self.pacer.sending();
            let (entries, got) = match ride.run(|| self.fetch(&options)) {
                Ok(answer) => answer,
                Err(e) if e.kind() == ErrorKind::Timeout && passed(deadline) => return Ok(None),
                Err(e) => return Err(e),
            };
            self.index = next_index(sent, got);
            if got != sent {
                return Ok(Some(entries));
            }
            // No change: the wait ended at the server. An answer that came back
            // early without progress (not Consul's behaviour) is paced.
            let pause = self.pacer.after(sent, got, wait);
            if !pause.is_zero() {
                let until =
                    deadline.map_or(Instant::now() + pause, |d| d.min(Instant::now() + pause));
                select! {
                    recv(stop.receiver()) -> _ => {
                        return Err(Error::new(ErrorKind::Cancelled, "barrier wait cancelled"))
                    }
                    recv(crossbeam_channel::at(until)) -> _ => {}
                }
            }
        }
    }
}

/// Whether `deadline` has passed.
pub(super) fn passed(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| d <= Instant::now())
}

/// One token that fires when the caller's cancel token does or, for a call
/// made with a session, when that session is lost: the one thing a wait's
/// requests and pauses listen to.
pub(super) fn stop(cancel: Option<&CancelToken>, session: Option<&Session>) -> Linked {
    CancelToken::any_of(
        cancel
            .cloned()
            .into_iter()
            .chain(session.map(Session::cancel_token)),
    )
}

/// The error of a call that `stop` (or `cancel`, or the loss of `session`)
/// interrupted with `e`, named for what fired: kind `Cancelled` for the caller's
/// token, `SessionInvalidated` for the session. Other errors pass unchanged.
pub(super) fn stopped(
    e: Error,
    what: &str,
    cancel: Option<&CancelToken>,
    session: Option<&Session>,
) -> Error {
    if e.kind() != ErrorKind::Cancelled && e.kind() != ErrorKind::SessionInvalidated {
        return e;
    }
    if cancel.is_some_and(CancelToken::is_cancelled) {
        return Error::new(ErrorKind::Cancelled, format!("{what} cancelled"));
    }
    match session {
        Some(s) if !s.is_valid() => Error::new(
            ErrorKind::SessionInvalidated,
            format!("session {} was lost during {what}", s.id()),
        ),
        _ => e,
    }
}
