//! The read-write lock, the multi-key lock, the leader task, group membership, the barriers and
//! the counter for Node.
//!
//! As in `recipes.rs`: a call that does not wait runs on one of baton's call threads
//! ([`on_thread`]); a call that waits (an acquire, a wait for a loss, a barrier wait, a watch's
//! next event, a campaign) is a future of `baton::aio` driven with no thread of its own
//! ([`crate::driven`]). The two locks share the holding lifecycle of `holding.rs`. 64-bit
//! numbers (a counter's value) cross as decimal strings; `lib/` turns them into BigInt.
//!
//! One file per recipe: `locks.rs` (read-write and multi-key), `barrier.rs`, `counter.rs`,
//! `membership.rs`, `leader_task.rs`; the client's factory methods are here.

mod barrier;
mod counter;
mod leader_task;
mod locks;
mod membership;

pub use barrier::*;
pub use counter::*;
pub use leader_task::*;
pub use locks::*;
pub use membership::*;

use std::sync::{Arc, Mutex, Weak};

use baton::aio::{
    AsyncBarrier, AsyncDoubleBarrier, AsyncLeaderTask, AsyncMember, Bounded, LeaderTerms,
    SharedCounterWatch, SharedMembersWatch, Term,
};
use napi::bindgen_prelude::{Buffer, Object};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::{Env, Result};
use napi_derive::napi;

use crate::holding::{holding_methods, token_of, watched};
use crate::recipes::{NativeLeader, NativeSequencer};
use crate::{
    driven, invalid, js_err, millis, on_thread, LostFn, NativeCancel, NativeClient, NativeSession,
    OffThread,
};

fn parse_i64(name: &str, text: &str) -> Result<i64> {
    text.parse::<i64>().map_err(|_| {
        invalid(format!(
            "{name} must be an integer between -2^63 and 2^63-1, got {text:?}"
        ))
    })
}

/// Drops what a watch holds on a call thread (its last subscription may join a thread).
fn close_shared<T: Send + 'static>(shared: &Arc<Mutex<Option<T>>>) {
    let taken = shared.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(w) = taken {
        let _ = crate::CALLS.run(move || {
            drop(w);
            || {}
        });
    }
}

/// Options of a leader task the core keeps (the JS callbacks stay in lib/leader_task.js).
#[napi(object)]
pub struct NativeLeaderTaskOptions {
    /// Campaign again after a term (default true).
    pub requeue: Option<bool>,
    /// The hand-over wait after a term the task ended, in milliseconds.
    pub requeue_delay_ms: Option<f64>,
}

#[napi]
impl NativeClient {
    /// The reader (`write` false) or writer side of the read-write lock on `prefix`.
    #[napi]
    pub fn rw_lock(&self, prefix: String, write: bool, id: u32) -> Result<NativeRwLock> {
        let l = if write {
            self.inner.write_lock(&prefix)
        } else {
            self.inner.read_lock(&prefix)
        }
        .map_err(js_err)?;
        Ok(NativeRwLock {
            inner: watched(l, &self.lost, id),
        })
    }

    /// A lock on all of `keys` at once.
    #[napi]
    pub fn multi_lock(
        &self,
        keys: Vec<String>,
        value: Option<Buffer>,
        session: Option<&NativeSession>,
        id: u32,
    ) -> Result<NativeMultiLock> {
        let mut o = baton::MultiLockOptions::new();
        if let Some(v) = value {
            o = o.value(v.to_vec());
        }
        if let Some(s) = session {
            o = o.session(s.inner.clone());
        }
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let l = self.inner.multi_lock_with(&refs, o).map_err(js_err)?;
        Ok(NativeMultiLock {
            inner: watched(l, &self.lost, id),
        })
    }

    /// A leader task on `key`, campaigning with `value`.
    #[napi]
    pub fn leader_task(
        &self,
        key: String,
        value: Buffer,
        options: Option<NativeLeaderTaskOptions>,
    ) -> Result<NativeLeaderTask> {
        let mut t = self
            .inner
            .leader_task(&key, value.to_vec())
            .map_err(js_err)?;
        if let Some(o) = options {
            if let Some(r) = o.requeue {
                t = t.requeue(r);
            }
            if let Some(d) = millis("requeueDelayMs", o.requeue_delay_ms)? {
                t = t.requeue_delay(d);
            }
        }
        let stopped = Arc::new(Mutex::new(None));
        let slot = stopped.clone();
        t = t.on_stopped_leading(move |s| {
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(StoppedInfo::from(s));
        });
        Ok(NativeLeaderTask {
            inner: OffThread::new(Arc::new(t)),
            client: OffThread::new(self.inner.clone()),
            stopped,
        })
    }

    /// The group on `prefix`.
    #[napi]
    pub fn group(&self, prefix: String) -> Result<NativeGroup> {
        Ok(NativeGroup {
            inner: self.inner.group(&prefix).map_err(js_err)?,
            lost: self.lost.clone(),
        })
    }

    /// A barrier on `key`.
    #[napi]
    pub fn barrier(&self, key: String) -> Result<NativeBarrier> {
        Ok(NativeBarrier {
            inner: self.inner.barrier(&key).map_err(js_err)?,
        })
    }

    /// A double barrier of `count` participants on `prefix` (with `session` when given).
    #[napi]
    pub fn double_barrier(
        &self,
        prefix: String,
        count: u32,
        session: Option<&NativeSession>,
    ) -> Result<NativeDoubleBarrier> {
        let n = usize::try_from(count).map_err(|_| invalid("count is too large"))?;
        let b = match session {
            Some(s) => self
                .inner
                .double_barrier_with_session(&prefix, n, s.inner.clone()),
            None => self.inner.double_barrier(&prefix, n),
        }
        .map_err(js_err)?;
        Ok(NativeDoubleBarrier {
            inner: OffThread::new(Arc::new(b)),
        })
    }

    /// A counter in `key`.
    #[napi]
    pub fn counter(&self, key: String) -> Result<NativeCounter> {
        Ok(NativeCounter {
            inner: self.inner.counter(&key).map_err(js_err)?,
        })
    }
}
