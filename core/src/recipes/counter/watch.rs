//! `CounterWatch`: the values a counter takes, from the client's shared key watch.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::runtime::watch::{Watch, WatchEvent};

use super::value;

/// What a watch last handed out: a value, or a key that held something else.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Value(i64),
    NotACounter(Option<Vec<u8>>),
}

/// A watch of a [`Counter`](super::Counter)'s value, from [`Counter::watch`](super::Counter::watch).
///
/// It rides on the client's key watch ([`Client::watch_key`](crate::Client::watch_key)):
/// one blocking query per watched key and client, however many `CounterWatch`es share
/// it, retried with backoff when Consul cannot be reached. [`next`](CounterWatch::next)
/// hands out values, not writes: a write that leaves the number as it was (the same
/// value written again with other flags, a key holding `0` deleted) is not reported,
/// and a caller that is slower than the writers sees the latest value, not each one
/// in between.
///
/// Dropping the last watch of a key on a client stops its long poll.
pub struct CounterWatch {
    client: crate::client::Client,
    watch: Watch,
    key: Arc<str>,
    /// What the last `next` returned (`None`: nothing yet, or the poll failed since).
    last: Option<Seen>,
}

impl fmt::Debug for CounterWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CounterWatch")
            .field("key", &self.key)
            .field("last", &self.last)
            .finish()
    }
}

impl CounterWatch {
    pub(super) fn new(client: crate::client::Client, watch: Watch, key: Arc<str>) -> CounterWatch {
        CounterWatch {
            client,
            watch,
            key,
            last: None,
        }
    }

    /// The counter's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The next value of the counter that differs from the one this watch returned
    /// last; the first call returns the current value as soon as the watch has read it
    /// (0 for an absent key).
    ///
    /// Returns `Ok(None)` when `timeout` passes without a change (`None` waits for
    /// ever, `Some(Duration::ZERO)` only looks), and an error of kind `Cancelled` when
    /// `cancel` fires (also when it already has), promptly even while the long poll is
    /// in flight; `Closed` when the client closes.
    ///
    /// A key that comes to hold something else than a counter value is reported once,
    /// as the `BadResponse` error [`Counter::get`](super::Counter::get) gives, as is an
    /// answer from Consul that cannot be decoded; the watch goes on, and the next
    /// valid value is returned even if it equals the one before the error. Failed
    /// polls (Consul unreachable) are retried in the background, not returned: bound
    /// the wait with `timeout`.
    pub fn next(
        &mut self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<Option<i64>> {
        let deadline = crate::foundations::scope::deadline_after(timeout);
        loop {
            if cancel.is_some_and(CancelToken::is_cancelled) {
                return Err(self.cancelled());
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let event = match self.watch.next_strict(left, cancel) {
                Ok(event) => event,
                Err(e) if e.kind() == ErrorKind::Timeout => return Ok(None),
                Err(e) if e.kind() == ErrorKind::Cancelled => return Err(self.cancelled()),
                Err(e) => {
                    if e.kind() == ErrorKind::BadResponse {
                        self.last = None;
                    }
                    return Err(e);
                }
            };
            if let Some(result) = self.take(&event) {
                return result.map(Some);
            }
        }
    }

    /// What `next` hands out for a watch answer: `None` when the value is the one
    /// handed out last.
    fn take(&mut self, event: &WatchEvent) -> Option<Result<i64>> {
        let (seen, result) = self.read(event);
        if self.last.as_ref() == Some(&seen) {
            return None;
        }
        self.last = Some(seen);
        Some(result)
    }

    /// The client it rides on.
    pub(crate) fn client(&self) -> &crate::client::Client {
        &self.client
    }

    /// [`CounterWatch::next`] without blocking, for the async layer: the next value, or
    /// `Pending` with the task woken by the next change of the key. Errors as `next`'s
    /// (`Closed` once the client closes; the caller is woken by the close itself).
    pub(crate) fn poll_value(&mut self, cx: &mut Context<'_>) -> Poll<Result<i64>> {
        loop {
            match self.watch.poll_next(cx, true) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => {
                    if e.kind() == ErrorKind::BadResponse {
                        self.last = None;
                    }
                    return Poll::Ready(Err(e));
                }
                Poll::Ready(Ok(event)) => {
                    if let Some(result) = self.take(&event) {
                        return Poll::Ready(result);
                    }
                }
            }
        }
    }

    /// The counter's state in a watch answer (zero or one entry: a key watch), and what
    /// `next` returns for it: the value, or the error `get` gives for what the key holds.
    fn read(&self, event: &WatchEvent) -> (Seen, Result<i64>) {
        let Some(entry) = event.entries.first() else {
            return (Seen::Value(0), Ok(0));
        };
        match value::parse(&self.key, entry.value.as_deref()) {
            Ok(v) => (Seen::Value(v), Ok(v)),
            Err(e) => (Seen::NotACounter(entry.value.clone()), Err(e)),
        }
    }

    fn cancelled(&self) -> Error {
        Error::new(
            ErrorKind::Cancelled,
            format!("watch of counter {:?} cancelled", self.key),
        )
    }
}
