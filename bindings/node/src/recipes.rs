//! Locks, semaphores, elections, sequencers and guarded writes for Node.
//!
//! Every wait runs on one of baton's threads (see [`on_thread`]) with a core `CancelToken` that
//! `lib/cancel.js` cancels from an `AbortSignal`. The holding lifecycle the three recipe classes
//! share (acquire, release, isHeld, lostReason, waitLost) is written once, in `holding.rs`.
//! 64-bit numbers cross the boundary as decimal strings; `lib/` turns them into BigInt.

use std::sync::{Arc, Mutex};

use baton::aio::AsyncClient;
use napi::bindgen_prelude::{Buffer, Object};
use napi::{Env, Result};
use napi_derive::napi;

use crate::holding::{self, holding_methods, token_of, watched};
use crate::{
    invalid, js_err, lost_notifier, millis, on_thread, NativeCancel, NativeClient, NativeSession,
    OffThread,
};

fn parse_u64(name: &str, text: &str) -> Result<u64> {
    text.parse::<u64>().map_err(|_| {
        invalid(format!(
            "{name} must be an integer between 0 and 2^64-1, got {text:?}"
        ))
    })
}

/// A fencing sequencer, with its 64-bit numbers as decimal strings.
#[napi(object)]
pub struct NativeSequencer {
    /// The lock's key.
    pub key: String,
    /// The session that acquired it.
    pub session: String,
    /// The key's LockIndex after the acquisition.
    pub lock_index: String,
    /// The acquisition's ModifyIndex (monotonic fencing token).
    pub token: String,
}

impl From<baton::Sequencer> for NativeSequencer {
    fn from(s: baton::Sequencer) -> Self {
        NativeSequencer {
            key: s.key,
            session: s.session,
            lock_index: s.lock_index.to_string(),
            token: s.token.to_string(),
        }
    }
}

/// Parses the string form of a sequencer (`<lockIndex>:<token>:<session>:<key>`).
#[napi]
pub fn parse_sequencer(text: String) -> Result<NativeSequencer> {
    baton::Sequencer::parse(&text)
        .map(NativeSequencer::from)
        .map_err(js_err)
}

/// The leader of an election as read from its key.
#[napi(object)]
pub struct NativeLeader {
    /// The value the leader campaigned or proclaimed with.
    pub value: Buffer,
    /// The leader's session.
    pub session: String,
    /// The key's LockIndex (changes with each new leader), decimal.
    pub lock_index: String,
    /// The key's ModifyIndex, decimal.
    pub token: String,
}

impl From<baton::Leader> for NativeLeader {
    fn from(l: baton::Leader) -> Self {
        NativeLeader {
            value: Buffer::from(l.value),
            session: l.session,
            lock_index: l.lock_index.to_string(),
            token: l.token.to_string(),
        }
    }
}

/// One operation of a guarded transaction.
#[napi(object)]
pub struct NativeTxnOp {
    /// Consul's verb: `set`, `cas`, `delete`, `delete-cas`, `delete-tree`, `get`,
    /// `get-or-empty`, `get-tree`, `check-index`, `check-not-exists`, `check-session`,
    /// `lock`, `unlock`.
    pub verb: String,
    /// Key (prefix for the `*-tree` verbs).
    pub key: String,
    /// Value for writes.
    pub value: Option<Buffer>,
    /// Flags (uint64, decimal) for writes.
    pub flags: Option<String>,
    /// Index (uint64, decimal) for `cas`, `delete-cas`, `check-index`.
    pub index: Option<String>,
    /// Session for `lock`, `unlock`, `check-session`.
    pub session: Option<String>,
}

/// A KV entry with its 64-bit numbers as decimal strings.
#[napi(object)]
pub struct NativeKvEntry {
    /// The key.
    pub key: String,
    /// The value, or null when empty.
    pub value: Option<Buffer>,
    /// Flags (uint64), decimal.
    pub flags: String,
    /// The session holding the key's lock, if any.
    pub session: Option<String>,
    /// LockIndex, decimal.
    pub lock_index: String,
    /// CreateIndex, decimal.
    pub create_index: String,
    /// ModifyIndex, decimal.
    pub modify_index: String,
}

impl From<baton::KvPair> for NativeKvEntry {
    fn from(p: baton::KvPair) -> Self {
        NativeKvEntry {
            key: p.key,
            value: p.value.map(Buffer::from),
            flags: p.flags.to_string(),
            session: p.session,
            lock_index: p.lock_index.to_string(),
            create_index: p.create_index.to_string(),
            modify_index: p.modify_index.to_string(),
        }
    }
}

fn verb_of(name: &str) -> Result<baton::KvVerb> {
    baton::KvVerb::parse(name).ok_or_else(|| invalid(format!("unknown transaction verb {name:?}")))
}

fn txn_op(op: NativeTxnOp) -> Result<baton::KvOp> {
    let verb = verb_of(&op.verb)?;
    let mut o = match verb {
        baton::KvVerb::Get => baton::KvOp::get(&op.key),
        _ => baton::KvOp::delete(&op.key),
    };
    o.verb = verb;
    o.value = op.value.map(|b| b.to_vec());
    if let Some(f) = &op.flags {
        o.flags = parse_u64("flags", f)?;
    }
    if let Some(i) = &op.index {
        o.index = parse_u64("index", i)?;
    }
    o.session = op.session;
    Ok(o)
}

/// A lock on one key (see `Lock` in lib/lock.js).
#[napi(js_name = "NativeLock")]
pub struct NativeLock {
    inner: OffThread<Arc<baton::Lock>>,
}

holding_methods!(NativeLock, acquire);

#[napi]
impl NativeLock {
    /// The key.
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.inner.key().to_string()
    }

    /// The value written on acquire.
    #[napi]
    pub fn value(&self) -> Buffer {
        Buffer::from(self.inner.value())
    }

    /// Sets the value written by the next acquire.
    #[napi]
    pub fn set_value(&self, value: Buffer) {
        self.inner.set_value(value.to_vec())
    }

    /// The sequencer of the current holding, or null.
    #[napi]
    pub fn sequencer(&self) -> Option<NativeSequencer> {
        self.inner.sequencer().map(NativeSequencer::from)
    }

    /// Deletes the key if nobody holds it (Go's `Destroy`).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn destroy<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let l = self.inner.clone();
        on_thread(env, move || l.destroy())
    }
}

/// A counting semaphore on a prefix (see `Semaphore` in lib/semaphore.js).
#[napi(js_name = "NativeSemaphore")]
pub struct NativeSemaphore {
    inner: OffThread<Arc<baton::Semaphore>>,
}

holding_methods!(NativeSemaphore, acquire);

#[napi]
impl NativeSemaphore {
    /// The prefix.
    #[napi(getter)]
    pub fn prefix(&self) -> String {
        self.inner.prefix().to_string()
    }

    /// The number of slots, decimal.
    #[napi(getter)]
    pub fn limit(&self) -> String {
        self.inner.limit().to_string()
    }

    /// Deletes the coordination key when no live holder remains.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn destroy<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let s = self.inner.clone();
        on_thread(env, move || s.destroy())
    }
}

/// A participant in a leader election (see `Election` in lib/election.js); `release` resigns.
#[napi(js_name = "NativeElection")]
pub struct NativeElection {
    inner: OffThread<Arc<baton::Election>>,
    client: OffThread<baton::Client>,
}

holding_methods!(NativeElection);

#[napi]
impl NativeElection {
    /// The election's key.
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.inner.key().to_string()
    }

    /// Resolves true once elected, false when `timeoutMs` passes; rejects with
    /// `BATON_CANCELLED` when `cancel` fires (not leader then).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn campaign<'e>(
        &self,
        env: &'e Env,
        value: Buffer,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> Result<Object<'e>> {
        let t = crate::millis("timeoutMs", timeout_ms)?;
        self.inner.lock().set_value(value.to_vec());
        holding::acquire(env, &self.inner, t, holding::token_if(cancel), |_| {})
    }

    /// Replaces the leader's value, keeping the LockIndex.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn proclaim<'e>(&self, env: &'e Env, value: Buffer) -> Result<Object<'e>> {
        let (e, v) = (self.inner.clone(), value.to_vec());
        on_thread(env, move || e.proclaim(&v))
    }

    /// The current leader (one consistent read), or null.
    #[napi(ts_return_type = "Promise<NativeLeader | null>")]
    pub fn leader<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let e = self.inner.clone();
        on_thread(env, move || e.leader().map(|l| l.map(NativeLeader::from)))
    }

    /// A follower of this election's leader changes.
    #[napi]
    pub fn observe(&self) -> Result<NativeObserver> {
        let o = self
            .client
            .observe_leader_stream(self.inner.key())
            .map_err(js_err)?;
        Ok(NativeObserver::new(o))
    }

    /// The sequencer while leading, or null.
    #[napi]
    pub fn sequencer(&self) -> Option<NativeSequencer> {
        self.inner.sequencer().map(NativeSequencer::from)
    }
}

/// Follows an election's leader (see `LeaderObserver` in lib/observer.js): a stream of the
/// core (`baton::aio::LeaderStream`), so a pending `next` holds no thread.
#[napi(js_name = "NativeObserver")]
pub struct NativeObserver {
    key: String,
    inner: OffThread<baton::aio::SharedLeaderStream>,
}

impl NativeObserver {
    fn new(o: baton::aio::LeaderStream) -> NativeObserver {
        NativeObserver {
            key: o.key().to_string(),
            inner: OffThread::new(Arc::new(Mutex::new(Some(o)))),
        }
    }
}

#[napi]
impl NativeObserver {
    /// The key observed.
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.key.clone()
    }

    /// Resolves with the next state (the first call: the current one): a leader, or null
    /// for "no leader". Rejects with `BATON_TIMEOUT` after `timeoutMs` without a change,
    /// `BATON_CLOSED` after `close()`.
    #[napi(ts_return_type = "Promise<NativeLeader | null>")]
    pub fn next<'e>(
        &self,
        env: &'e Env,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> Result<Object<'e>> {
        let t = millis("timeoutMs", timeout_ms)?;
        let next = baton::aio::next_shared(&self.inner, t, &token_of(cancel));
        crate::driven(env, async move {
            Ok(match next?.await? {
                baton::LeaderEvent::Leader(l) => Some(NativeLeader::from(l)),
                baton::LeaderEvent::NoLeader => None,
            })
        })
    }

    /// Stops following: the subscription is dropped (off the JS thread).
    #[napi]
    pub fn close(&self) {
        // A pending `next` is ended by its token, which `lib/observer.js` cancels first; one
        // polled again finds the stream gone and ends with `BATON_CLOSED`. Dropping the stream
        // drops its key-hub subscription, whose last one may join a hub thread: not on the JS
        // thread.
        let stream = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(stream) = stream {
            let _ = crate::CALLS.run(move || {
                drop(stream);
                || {}
            });
        }
    }
}

#[napi]
impl NativeClient {
    /// A lock on `key`; loss notifications go to `onLost(id, ...)`.
    #[napi]
    pub fn lock(
        &self,
        key: String,
        value: Option<Buffer>,
        session: Option<&NativeSession>,
        id: u32,
    ) -> Result<NativeLock> {
        let mut o = baton::LockOptions::new();
        if let Some(v) = value {
            o = o.value(v.to_vec());
        }
        if let Some(s) = session {
            o = o.session(s.inner.clone());
        }
        let l = self.inner.lock_with(&key, o).map_err(js_err)?;
        Ok(NativeLock {
            inner: watched(l, &self.lost, id),
        })
    }

    /// A semaphore with `limit` (decimal) slots on `prefix`.
    #[napi]
    pub fn semaphore(
        &self,
        prefix: String,
        limit: String,
        value: Option<Buffer>,
        session: Option<&NativeSession>,
        id: u32,
    ) -> Result<NativeSemaphore> {
        let limit = parse_u64("limit", &limit)?;
        if limit == 0 {
            return Err(invalid("limit must be positive"));
        }
        let mut o = baton::SemaphoreOptions::new();
        if let Some(v) = value {
            o = o.value(v.to_vec());
        }
        if let Some(s) = session {
            o = o.session(s.inner.clone());
        }
        let s = self
            .inner
            .semaphore_with(&prefix, limit, o)
            .map_err(js_err)?;
        Ok(NativeSemaphore {
            inner: watched(s, &self.lost, id),
        })
    }

    /// An election on `key`; `flags` (a decimal string) as the key is written.
    #[napi]
    pub fn election(
        &self,
        key: String,
        session: Option<&NativeSession>,
        id: u32,
        flags: Option<String>,
    ) -> Result<NativeElection> {
        let mut o = baton::ElectionOptions::new();
        if let Some(s) = session {
            o = o.session(s.inner.clone());
        }
        if let Some(f) = flags {
            o = o.flags(parse_u64("flags", &f)?);
        }
        let e = self.inner.election_with(&key, o).map_err(js_err)?;
        Ok(NativeElection {
            inner: watched(e, &self.lost, id),
            client: OffThread::new(self.inner.clone()),
        })
    }

    /// The current leader of the election on `key`, or null.
    #[napi(ts_return_type = "Promise<NativeLeader | null>")]
    pub fn leader<'e>(&self, env: &'e Env, key: String) -> Result<Object<'e>> {
        let c = self.inner.clone();
        on_thread(env, move || {
            c.leader(&key).map(|l| l.map(NativeLeader::from))
        })
    }

    /// Follows the election on `key`.
    #[napi]
    pub fn observe_leader(&self, key: String) -> Result<NativeObserver> {
        let o = self.inner.observe_leader_stream(&key).map_err(js_err)?;
        Ok(NativeObserver::new(o))
    }

    /// Whether the sequencer (string form) is still current.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn check_sequencer<'e>(&self, env: &'e Env, sequencer: String) -> Result<Object<'e>> {
        let seq = baton::Sequencer::parse(&sequencer).map_err(js_err)?;
        let c = self.inner.clone();
        on_thread(env, move || c.check_sequencer(&seq))
    }

    /// The entry at `key` (value, flags, session, indexes), or null.
    #[napi(ts_return_type = "Promise<NativeKvEntry | null>")]
    pub fn kv_get_entry<'e>(&self, env: &'e Env, key: String) -> Result<Object<'e>> {
        let c = self.inner.clone();
        on_thread(env, move || Ok(c.kv().get(&key)?.map(NativeKvEntry::from)))
    }

    /// Writes `value` at `key` with `flags` (decimal uint64, default 0); with `cas`
    /// (decimal) only if the key's ModifyIndex is `cas` (`"0"`: only if absent). Resolves
    /// whether Consul applied the write.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn kv_put_with<'e>(
        &self,
        env: &'e Env,
        key: String,
        value: Buffer,
        flags: Option<String>,
        cas: Option<String>,
    ) -> Result<Object<'e>> {
        let flags = flags
            .map(|f| parse_u64("flags", &f))
            .transpose()?
            .unwrap_or(0);
        let cas = cas.map(|i| parse_u64("cas", &i)).transpose()?;
        let (c, v) = (self.inner.clone(), value.to_vec());
        on_thread(env, move || {
            let options = baton::WriteOptions {
                flags,
                cas,
                ..Default::default()
            };
            c.kv().put_with(&key, &v, &options)
        })
    }

    /// Deletes `key`; with `cas` (decimal) only if its ModifyIndex is `cas`. Resolves
    /// whether Consul applied it (a missing key counts as deleted).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn kv_delete<'e>(
        &self,
        env: &'e Env,
        key: String,
        cas: Option<String>,
    ) -> Result<Object<'e>> {
        let cas = cas.map(|i| parse_u64("cas", &i)).transpose()?;
        let c = self.inner.clone();
        on_thread(env, move || match cas {
            Some(index) => c.kv().delete_cas(&key, index),
            None => c.kv().delete(&key),
        })
    }

    /// The client's default session (created on first use, replaced once lost).
    #[napi(ts_return_type = "Promise<NativeSession>")]
    pub fn default_session<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let c = self.inner.clone();
        on_thread(env, move || {
            c.default_session()
                .map(|inner| NativeSession::new(inner, &c))
        })
    }

    /// Posts `(id, reason)` to the client's loss function once `session` is lost (at once
    /// if it already is).
    #[napi]
    pub fn watch_session(&self, session: &NativeSession, id: u32) {
        session
            .inner
            .on_lost(lost_notifier(&self.lost, id, baton::LostReason::name));
    }

    /// Runs `ops` in one transaction behind a `check-session` of the sequencer's key.
    #[napi(ts_return_type = "Promise<NativeKvEntry[]>")]
    pub fn guarded_txn<'e>(
        &self,
        env: &'e Env,
        sequencer: String,
        ops: Vec<NativeTxnOp>,
    ) -> Result<Object<'e>> {
        let seq = baton::Sequencer::parse(&sequencer).map_err(js_err)?;
        let ops = ops.into_iter().map(txn_op).collect::<Result<Vec<_>>>()?;
        let c = self.inner.clone();
        on_thread(env, move || {
            c.guarded_txn(&seq, &ops)
                .map(|v| v.into_iter().map(NativeKvEntry::from).collect::<Vec<_>>())
        })
    }
}
