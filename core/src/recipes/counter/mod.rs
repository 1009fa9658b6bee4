//! `Counter`: a shared `i64` in one KV key, changed only by check-and-set writes.
//!
//! See [`Counter`] for the wire format and the protocol.

mod retry;
mod value;
mod watch;

pub use watch::CounterWatch;

use std::fmt;
use std::sync::Arc;

use crate::api::kv::{KvPair, WriteOptions};
use crate::client::Client;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::transport::http::{Consistency, QueryOptions};

/// A shared integer kept in one Consul KV key: atomic [`add`](Counter::add),
/// [`compare_and_set`](Counter::compare_and_set), [`get`](Counter::get),
/// [`set`](Counter::set) and a [`watch`](Counter::watch) of its value. It is the
/// recipe Curator calls `SharedCount` / `DistributedAtomicLong`: sequence numbers,
/// totals several processes add to, a configuration generation everyone follows.
///
/// **Wire format**, so any client can share the key: the value is the decimal ASCII
/// text of an `i64` (`42`, `-7`), exactly what `consul kv get` prints; an absent key
/// reads as 0. baton writes the canonical form with flags 0; reading ignores flags and
/// accepts surrounding ASCII whitespace, a `+` sign and leading zeros. A value that is
/// not such an integer (empty, `abc`, out of range) is an error of kind
/// [`BadResponse`](ErrorKind::BadResponse) naming the key and showing the value: it is
/// never taken as 0, since counting on from 0 would overwrite someone else's data.
///
/// **Protocol.** Every change but [`set`](Counter::set) is a read (`GET`, which gives
/// the value and its `ModifyIndex`) followed by `PUT ?cas=<ModifyIndex>`, or `?cas=0`
/// when the key was absent (create only). Consul applies such a write only if nobody
/// wrote the key in between, through its Raft log, so the outcome is linearizable and
/// no increment is ever lost; a write that lost is read again and retried.
///
/// What it is not: the key is not bound to a session, so the value survives the
/// process that wrote it (and must be deleted by hand when no longer wanted); writes
/// are not fenced by a lock; and every writer of a hot counter contends on one key,
/// paying a retry (two more requests) for each write it loses.
///
/// Cheap to clone (a client handle and the key); `Send` and `Sync`. Every request is
/// bounded by the client's request timeout.
#[derive(Clone)]
pub struct Counter {
    client: Client,
    key: Arc<str>,
}

impl fmt::Debug for Counter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Counter").field("key", &self.key).finish()
    }
}

impl Client {
    /// A counter kept in `key` (nothing is sent: an absent key is a counter at 0).
    ///
    /// The key follows the one key rule of every API (one leading `/` is dropped); an
    /// empty key, one still beginning with `/`, or one with a NUL byte is refused with
    /// [`ErrorKind::InvalidArgument`] naming the problem. Fails with `Closed` on a
    /// closed client.
    pub fn counter(&self, key: &str) -> Result<Counter> {
        self.core().check_usable()?;
        let key = crate::foundations::keys::key(key)?;
        Ok(Counter {
            client: self.clone(),
            key: key.into(),
        })
    }
}

impl Counter {
    /// The client it talks through.
    pub(crate) fn shared_client(&self) -> &Client {
        &self.client
    }

    /// The key (after the key rule: without a leading `/`).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The current value (0 when the key is absent).
    ///
    /// A consistent read (`?consistent`): the leader confirms it still leads before
    /// answering, so the value is never older than a write that already returned.
    /// Errors: `BadResponse` if the key holds something else than a counter value.
    pub fn get(&self) -> Result<i64> {
        Ok(self.get_with_index()?.0)
    }

    /// The current value and the key's `ModifyIndex` (`(0, 0)` when the key is absent),
    /// read as [`get`](Counter::get) does.
    ///
    /// For a caller building its own check-and-set on the key: the index is the
    /// `cas` to send ([`WriteOptions::cas`]) so that the write applies only if the
    /// key is still as read (0: only if it is still absent).
    pub fn get_with_index(&self) -> Result<(i64, u64)> {
        let entry = self.read(Consistency::Consistent)?;
        value::decode(&self.key, entry.as_ref())
    }

    /// Writes `value` whatever the key holds (a plain `PUT`, flags 0): the way to
    /// reset a counter, or to repair a key that holds something else.
    pub fn set(&self, value: i64) -> Result<()> {
        self.client.kv().put(&self.key, &value::encode(value))?;
        Ok(())
    }

    /// Writes `new` if the value is `expected`, atomically; returns whether it did.
    ///
    /// An absent key is 0, so `compare_and_set(0, n)` on an absent key creates it
    /// (`?cas=0`: only if nobody created it meanwhile). When the check-and-set write
    /// loses to another writer, the key is read again: if it still holds `expected`
    /// (someone wrote the same value) the write is retried, otherwise the answer is
    /// `Ok(false)`. The read is consistent (see [`get`](Counter::get)), so `false`
    /// means the value really differed.
    ///
    /// Errors: `BadResponse` if the key holds something else than a counter value;
    /// `Conflict` after 1,000 lost writes in a row (see [`add`](Counter::add)).
    pub fn compare_and_set(&self, expected: i64, new: i64) -> Result<bool> {
        let outcome = self.update("compare_and_set", Consistency::Consistent, |current| {
            Ok((current == expected).then_some(new))
        })?;
        Ok(outcome.is_some())
    }

    /// Adds `delta` atomically and returns the new value.
    ///
    /// A read, then a check-and-set write of the sum; when the write loses to another
    /// writer, it is retried from a fresh read after a short random pause (below 1 ms,
    /// the bound doubling with each loss up to 32 ms), so concurrent adds from any
    /// number of processes all count, exactly once each. After 1,000 lost writes in a
    /// row it gives up with [`ErrorKind::Conflict`]; nothing of this call was written.
    ///
    /// `add(0)` only reads (a consistent read, as [`get`](Counter::get)).
    ///
    /// Errors: `InvalidArgument` if the sum overflows an `i64` (nothing is written);
    /// `BadResponse` if the key holds something else than a counter value (nothing is
    /// written); transport errors as they come. An error after a write was sent (a
    /// timeout, a broken connection) leaves it unknown whether the add applied, as
    /// with any request.
    pub fn add(&self, delta: i64) -> Result<i64> {
        if delta == 0 {
            return self.get();
        }
        let key = &self.key;
        let outcome = self.update("add", Consistency::Default, |current| {
            current.checked_add(delta).map(Some).ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "counter {key:?}: adding {delta} to {current} overflows a 64-bit \
                         signed integer; nothing was written"
                    ),
                )
            })
        })?;
        // Always `Some`: add's step never declines to write.
        Ok(outcome.unwrap_or_default())
    }

    /// `add(1)`.
    pub fn increment(&self) -> Result<i64> {
        self.add(1)
    }

    /// `add(-1)`.
    pub fn decrement(&self) -> Result<i64> {
        self.add(-1)
    }

    /// Watches the value: see [`CounterWatch::next`]. Watches of the same key on one
    /// client share one long poll.
    pub fn watch(&self) -> Result<CounterWatch> {
        Ok(CounterWatch::new(
            self.client.clone(),
            self.client.watch_key(&self.key)?,
            self.key.clone(),
        ))
    }

    /// The key's entry, read with `consistency`.
    fn read(&self, consistency: Consistency) -> Result<Option<KvPair>> {
        let options = QueryOptions::default().with_consistency(consistency);
        Ok(self.client.kv().get_with(&self.key, &options)?.0)
    }

    /// The read-then-check-and-set loop of every change: `next` maps the current value
    /// to the value to write (`None`: write nothing, return `None`). Returns the value
    /// written. Every read uses `consistency`.
    fn update(
        &self,
        what: &str,
        consistency: Consistency,
        mut next: impl FnMut(i64) -> Result<Option<i64>>,
    ) -> Result<Option<i64>> {
        for lost in 0..retry::MAX_ATTEMPTS {
            if lost > 0 {
                std::thread::sleep(retry::pause(lost));
                self.client.core().check_usable()?;
            }
            let entry = self.read(consistency)?;
            let (current, index) = value::decode(&self.key, entry.as_ref())?;
            let Some(new) = next(current)? else {
                return Ok(None);
            };
            let options = WriteOptions {
                cas: Some(index),
                ..WriteOptions::default()
            };
            if self
                .client
                .kv()
                .put_with(&self.key, &value::encode(new), &options)?
            {
                return Ok(Some(new));
            }
        }
        Err(Error::new(
            ErrorKind::Conflict,
            format!(
                "counter {:?}: {what} gave up after {} check-and-set writes in a row lost \
                 to other writers of the key; nothing of this call was written",
                self.key,
                retry::MAX_ATTEMPTS
            ),
        ))
    }
}
