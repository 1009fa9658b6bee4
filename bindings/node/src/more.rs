//! The read-write lock, the multi-key lock, the leader task, group membership, the barriers and
//! the counter for Node.
//!
//! As in `recipes.rs`: a call that does not wait runs on one of baton's call threads
//! ([`on_thread`]); a call that waits (an acquire, a wait for a loss, a barrier wait, a watch's
//! next event, a campaign) is a future of `baton::aio` driven with no thread of its own
//! ([`crate::driven`]). The two locks share the holding lifecycle of `holding.rs`. 64-bit
//! numbers (a counter's value) cross as decimal strings; `lib/` turns them into BigInt.

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

/// One side (reader or writer) of a read-write lock (see `RwLock` in lib/rwlock.js).
#[napi(js_name = "NativeRwLock")]
pub struct NativeRwLock {
    inner: OffThread<Arc<baton::RwLock>>,
}

holding_methods!(NativeRwLock, acquire);

#[napi]
impl NativeRwLock {
    /// The prefix (without a trailing `/`).
    #[napi(getter)]
    pub fn prefix(&self) -> String {
        self.inner.prefix().to_string()
    }

    /// `read` or `write`.
    #[napi(getter)]
    pub fn mode(&self) -> &'static str {
        self.inner.mode().as_str()
    }

    /// The contender key of the current holding, or null.
    #[napi]
    pub fn key(&self) -> Option<String> {
        self.inner.key()
    }

    /// The sequencer of the current holding, or null.
    #[napi]
    pub fn sequencer(&self) -> Option<NativeSequencer> {
        self.inner.sequencer().map(NativeSequencer::from)
    }
}

/// A lock on several keys at once (see `MultiLock` in lib/multilock.js).
#[napi(js_name = "NativeMultiLock")]
pub struct NativeMultiLock {
    inner: OffThread<Arc<baton::MultiLock>>,
}

holding_methods!(NativeMultiLock, acquire);

#[napi]
impl NativeMultiLock {
    /// The keys, sorted, without duplicates.
    #[napi(getter)]
    pub fn keys(&self) -> Vec<String> {
        self.inner.keys().to_vec()
    }

    /// The value written to every key on acquire.
    #[napi]
    pub fn value(&self) -> Buffer {
        Buffer::from(self.inner.value())
    }

    /// The sequencer of the first key's holding, or null.
    #[napi]
    pub fn sequencer(&self) -> Option<NativeSequencer> {
        self.inner.sequencer().map(NativeSequencer::from)
    }

    /// One sequencer per key (in `keys` order) while held, else empty.
    #[napi]
    pub fn sequencers(&self) -> Vec<NativeSequencer> {
        self.inner
            .sequencers()
            .into_iter()
            .map(NativeSequencer::from)
            .collect()
    }
}

/// A barrier on one key (see `Barrier` in lib/barrier.js).
#[napi(js_name = "NativeBarrier")]
pub struct NativeBarrier {
    inner: baton::Barrier,
}

#[napi]
impl NativeBarrier {
    /// The barrier's key.
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.inner.key().to_string()
    }

    /// Raises the barrier (bound to `session` when given); resolves whether this call raised it.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn hold<'e>(&self, env: &'e Env, session: Option<&NativeSession>) -> Result<Object<'e>> {
        let b = self.inner.clone();
        let s = session.map(|s| s.inner.clone());
        on_thread(env, move || match s {
            Some(s) => b.hold_with_session(&s),
            None => b.hold(),
        })
    }

    /// Lowers the barrier; resolves whether it was up.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let b = self.inner.clone();
        on_thread(env, move || b.release())
    }

    /// Whether the barrier is up (one read).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn is_held<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let b = self.inner.clone();
        on_thread(env, move || b.is_held())
    }

    /// Resolves true once the barrier is down, false when `timeoutMs` passes first; rejects
    /// with `BATON_CANCELLED` when `cancel` fires.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn wait<'e>(
        &self,
        env: &'e Env,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> Result<Object<'e>> {
        let t = millis("timeoutMs", timeout_ms)?;
        driven(env, self.inner.wait_async(t, &token_of(cancel)))
    }
}

/// A double barrier (see `DoubleBarrier` in lib/barrier.js).
#[napi(js_name = "NativeDoubleBarrier")]
pub struct NativeDoubleBarrier {
    inner: OffThread<Arc<baton::DoubleBarrier>>,
}

#[napi]
impl NativeDoubleBarrier {
    /// The prefix (without a trailing `/`).
    #[napi(getter)]
    pub fn prefix(&self) -> String {
        self.inner.prefix().to_string()
    }

    /// The number of participants a round waits for.
    #[napi(getter)]
    pub fn count(&self) -> u32 {
        u32::try_from(self.inner.count()).unwrap_or(u32::MAX)
    }

    /// Whether this handle has entered and not yet left.
    #[napi]
    pub fn is_entered(&self) -> bool {
        self.inner.is_entered()
    }

    /// Resolves true once a round that counts this participant opens, false at the timeout.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn enter<'e>(
        &self,
        env: &'e Env,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> Result<Object<'e>> {
        let t = millis("timeoutMs", timeout_ms)?;
        driven(env, self.inner.enter_async(t, &token_of(cancel)))
    }

    /// Leaves; resolves true once every participant of the round has left, false at the
    /// timeout (this one has left either way).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn leave<'e>(
        &self,
        env: &'e Env,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> Result<Object<'e>> {
        let t = millis("timeoutMs", timeout_ms)?;
        driven(env, self.inner.leave_async(t, &token_of(cancel)))
    }
}

/// A counter in one key (see `Counter` in lib/counter.js); values are decimal strings.
#[napi(js_name = "NativeCounter")]
pub struct NativeCounter {
    inner: baton::Counter,
}

#[napi]
impl NativeCounter {
    /// The key.
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.inner.key().to_string()
    }

    /// The current value (0 for an absent key), decimal.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn get<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let c = self.inner.clone();
        on_thread(env, move || c.get().map(|v| v.to_string()))
    }

    /// Writes `value` (decimal) whatever the key holds.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn set<'e>(&self, env: &'e Env, value: String) -> Result<Object<'e>> {
        let v = parse_i64("value", &value)?;
        let c = self.inner.clone();
        on_thread(env, move || c.set(v))
    }

    /// Adds `delta` (decimal) atomically; resolves with the new value, decimal.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn add<'e>(&self, env: &'e Env, delta: String) -> Result<Object<'e>> {
        let d = parse_i64("delta", &delta)?;
        let c = self.inner.clone();
        on_thread(env, move || c.add(d).map(|v| v.to_string()))
    }

    /// Writes `next` if the value is `expected` (both decimal); resolves whether it did.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn compare_and_set<'e>(
        &self,
        env: &'e Env,
        expected: String,
        next: String,
    ) -> Result<Object<'e>> {
        let (e, n) = (parse_i64("expected", &expected)?, parse_i64("next", &next)?);
        let c = self.inner.clone();
        on_thread(env, move || c.compare_and_set(e, n))
    }

    /// A watch of the value.
    #[napi]
    pub fn watch(&self) -> Result<NativeCounterWatch> {
        let w = self.inner.watch().map_err(js_err)?;
        Ok(NativeCounterWatch {
            inner: OffThread::new(Arc::new(Mutex::new(Some(w)))),
        })
    }
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

/// A watch of a counter (see `CounterWatch` in lib/counter.js).
#[napi(js_name = "NativeCounterWatch")]
pub struct NativeCounterWatch {
    inner: OffThread<SharedCounterWatch>,
}

#[napi]
impl NativeCounterWatch {
    /// Resolves with the next value that differs from the last one (the first call: the
    /// current value), decimal; null when `timeoutMs` passes without a change. Rejects with
    /// `BATON_CANCELLED` when `cancel` fires, `BATON_CLOSED` after `close()`.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn next<'e>(
        &self,
        env: &'e Env,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> Result<Object<'e>> {
        let t = millis("timeoutMs", timeout_ms)?;
        let next = baton::aio::counter_next_shared(&self.inner, t, &token_of(cancel));
        driven(env, async move { Ok(next.await?.map(|v| v.to_string())) })
    }

    /// Stops watching (the subscription is dropped off the JS thread).
    #[napi]
    pub fn close(&self) {
        close_shared(&self.inner);
    }
}

/// One member of a group as read from Consul.
#[napi(object)]
pub struct NativeMemberInfo {
    /// The member's id.
    pub id: String,
    /// Its value.
    pub value: Buffer,
    /// The session its key is acquired with.
    pub session: String,
    /// CreateIndex of its key, decimal.
    pub create_index: String,
    /// ModifyIndex of its key, decimal.
    pub modify_index: String,
}

impl From<baton::MemberInfo> for NativeMemberInfo {
    fn from(m: baton::MemberInfo) -> Self {
        NativeMemberInfo {
            id: m.id,
            value: Buffer::from(m.value),
            session: m.session,
            create_index: m.create_index.to_string(),
            modify_index: m.modify_index.to_string(),
        }
    }
}

/// One event of a membership watch: `type` is `snapshot` (with `members`), `joined` or
/// `updated` (with `member`), `left` (with `id`).
#[napi(object)]
pub struct NativeMembershipEvent {
    /// `snapshot`, `joined`, `left` or `updated`.
    #[napi(js_name = "type")]
    pub kind: String,
    /// The members (snapshot).
    pub members: Option<Vec<NativeMemberInfo>>,
    /// The member (joined, updated).
    pub member: Option<NativeMemberInfo>,
    /// The id that left (left).
    pub id: Option<String>,
}

impl From<baton::MembershipEvent> for NativeMembershipEvent {
    fn from(e: baton::MembershipEvent) -> Self {
        let mut out = NativeMembershipEvent {
            kind: String::new(),
            members: None,
            member: None,
            id: None,
        };
        match e {
            baton::MembershipEvent::Snapshot(all) => {
                out.kind = "snapshot".into();
                out.members = Some(all.into_iter().map(NativeMemberInfo::from).collect());
            }
            baton::MembershipEvent::Joined(m) => {
                out.kind = "joined".into();
                out.member = Some(m.into());
            }
            baton::MembershipEvent::Left(id) => {
                out.kind = "left".into();
                out.id = Some(id);
            }
            baton::MembershipEvent::Updated(m) => {
                out.kind = "updated".into();
                out.member = Some(m.into());
            }
            #[allow(unreachable_patterns)]
            _ => out.kind = "unknown".into(),
        }
        out
    }
}

/// A group of members under one prefix (see `Group` in lib/group.js).
#[napi(js_name = "NativeGroup")]
pub struct NativeGroup {
    inner: baton::Group,
    lost: Arc<LostFn>,
}

#[napi]
impl NativeGroup {
    /// The prefix (without a trailing `/`).
    #[napi(getter)]
    pub fn prefix(&self) -> String {
        self.inner.prefix().to_string()
    }

    /// Joins as `id` with `value` (under `session` when given); the member's loss is posted
    /// to the client's loss function as `(lostId, reason)`.
    #[napi(ts_return_type = "Promise<NativeMember>")]
    pub fn join<'e>(
        &self,
        env: &'e Env,
        id: String,
        value: Buffer,
        session: Option<&NativeSession>,
        lost_id: u32,
    ) -> Result<Object<'e>> {
        let (g, v, lost) = (self.inner.clone(), value.to_vec(), self.lost.clone());
        let s = session.map(|s| s.inner.clone());
        on_thread(env, move || {
            let m = match s {
                Some(s) => g.join_with_session(&id, &v, &s)?,
                None => g.join(&id, &v)?,
            };
            Ok(NativeMember::new(m, lost, lost_id))
        })
    }

    /// The live members, sorted by id.
    #[napi(ts_return_type = "Promise<NativeMemberInfo[]>")]
    pub fn members<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let g = self.inner.clone();
        on_thread(env, move || {
            Ok(g.members()?
                .into_iter()
                .map(NativeMemberInfo::from)
                .collect::<Vec<_>>())
        })
    }

    /// A watch of the members.
    #[napi]
    pub fn watch(&self) -> Result<NativeMembersWatch> {
        let w = self.inner.watch().map_err(js_err)?;
        Ok(NativeMembersWatch {
            inner: OffThread::new(Arc::new(Mutex::new(Some(w)))),
        })
    }
}

/// A watch of a group's members (see `MembersWatch` in lib/group.js).
#[napi(js_name = "NativeMembersWatch")]
pub struct NativeMembersWatch {
    inner: OffThread<SharedMembersWatch>,
}

#[napi]
impl NativeMembersWatch {
    /// Resolves with the next event (the first: the snapshot); null when `timeoutMs` passes
    /// with nothing new. Rejects with `BATON_CANCELLED` when `cancel` fires, `BATON_CLOSED`
    /// after `close()`.
    #[napi(ts_return_type = "Promise<NativeMembershipEvent | null>")]
    pub fn next<'e>(
        &self,
        env: &'e Env,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> Result<Object<'e>> {
        let t = millis("timeoutMs", timeout_ms)?;
        let next = baton::aio::members_next_shared(&self.inner, t, &token_of(cancel));
        driven(env, async move {
            Ok(next.await?.map(NativeMembershipEvent::from))
        })
    }

    /// Stops watching (the subscription is dropped off the JS thread).
    #[napi]
    pub fn close(&self) {
        close_shared(&self.inner);
    }
}

/// A membership of a group (see `Member` in lib/group.js).
#[napi(js_name = "NativeMember")]
pub struct NativeMember {
    inner: OffThread<Arc<baton::Member>>,
}

impl NativeMember {
    /// Keeps `member`, its loss posted to `lost` as `(id, reason)` by a wait that holds no
    /// thread and no reference on the event loop (`AsyncMember::lost_within`, driven).
    fn new(member: baton::Member, lost: Arc<LostFn>, id: u32) -> Self {
        let member = Arc::new(member);
        let weak: Weak<baton::Member> = Arc::downgrade(&member);
        let ended = member.lost_within(None, &baton::CancelToken::new());
        baton::drive::drive(ended, move |outcome| {
            let reason = match outcome {
                Ok(r) => r.name(),
                Err(_) => match weak.upgrade().and_then(|m| m.lost()) {
                    Some(r) => r.name(),
                    None => return,
                },
            };
            lost.call(
                (id, reason.to_string()).into(),
                ThreadsafeFunctionCallMode::NonBlocking,
            );
        });
        NativeMember {
            inner: OffThread::new(member),
        }
    }
}

#[napi]
impl NativeMember {
    /// The member's id.
    #[napi(getter)]
    pub fn id(&self) -> String {
        self.inner.id().to_string()
    }

    /// The member's key (`<prefix>/<id>`).
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.inner.key().to_string()
    }

    /// The session its key is acquired with.
    #[napi(getter)]
    pub fn session_id(&self) -> String {
        self.inner.session().id().to_string()
    }

    /// Whether still a member (local check).
    #[napi]
    pub fn is_member(&self) -> bool {
        self.inner.is_member()
    }

    /// Why the membership ended (`left`, `key_changed`, `session_lost`), or null.
    #[napi]
    pub fn lost_reason(&self) -> Option<&'static str> {
        self.inner.lost().map(baton::MemberLost::name)
    }

    /// With `session_lost`: why the session was lost.
    #[napi]
    pub fn lost_session_reason(&self) -> Option<&'static str> {
        match self.inner.lost() {
            Some(baton::MemberLost::SessionLost(r)) => Some(r.name()),
            _ => None,
        }
    }

    /// Resolves with why the membership ended; rejects with `BATON_TIMEOUT` while still a
    /// member at `timeoutMs`, `BATON_CANCELLED` when `cancel` fires.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn wait_lost<'e>(
        &self,
        env: &'e Env,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> Result<Object<'e>> {
        let t = millis("timeoutMs", timeout_ms)?;
        let wait = self.inner.lost_within(t, &token_of(cancel));
        driven(env, async move { wait.await.map(baton::MemberLost::name) })
    }

    /// Replaces the member's value.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn update_value<'e>(&self, env: &'e Env, value: Buffer) -> Result<Object<'e>> {
        let (m, v) = (self.inner.clone(), value.to_vec());
        on_thread(env, move || m.update_value(&v))
    }

    /// Leaves the group; resolves false if no longer a member.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn leave<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let m = self.inner.clone();
        on_thread(env, move || m.leave())
    }
}

/// A leader task (see `LeaderTask` in lib/leader_task.js): the campaign and the end of each
/// term are the core's (`next_term_async`, `Term::finish_async`); the JavaScript task runs
/// between them, and its callbacks are called by lib/leader_task.js on the JS thread.
#[napi(js_name = "NativeLeaderTask")]
pub struct NativeLeaderTask {
    inner: OffThread<Arc<baton::LeaderTask>>,
    client: OffThread<baton::Client>,
    /// Why the last term ended, as the core's `on_stopped_leading` said.
    stopped: Arc<Mutex<Option<StoppedInfo>>>,
}

/// Why a term ended: `returned`, `failed`, `lost` (with the loss's reason), `stopped`.
#[napi(object)]
pub struct StoppedInfo {
    /// `returned`, `failed`, `lost` or `stopped`.
    pub reason: String,
    /// With `lost`: why leadership ended (`key_changed`, `session_lost`, ...).
    pub lost_reason: Option<String>,
}

impl From<&baton::StoppedLeading> for StoppedInfo {
    fn from(s: &baton::StoppedLeading) -> Self {
        StoppedInfo {
            reason: s.name().to_string(),
            lost_reason: match s {
                baton::StoppedLeading::Lost(l) => Some(l.name().to_string()),
                _ => None,
            },
        }
    }
}

#[napi]
impl NativeLeaderTask {
    /// The election's key.
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.inner.key().to_string()
    }

    /// Whether this candidate leads now.
    #[napi]
    pub fn is_leader(&self) -> bool {
        self.inner.is_leader()
    }

    /// Why the election's last holding ended (`key_changed`, `session_lost`, ...), or null.
    #[napi]
    pub fn lost_reason(&self) -> Option<&'static str> {
        crate::holding::lost_reason(self.inner.election())
    }

    /// The sequencer while leading, or null.
    #[napi]
    pub fn sequencer(&self) -> Option<NativeSequencer> {
        self.inner.election().sequencer().map(NativeSequencer::from)
    }

    /// The current leader (one consistent read), or null.
    #[napi(ts_return_type = "Promise<NativeLeader | null>")]
    pub fn leader<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let t = self.inner.clone();
        on_thread(env, move || {
            t.election().leader().map(|l| l.map(NativeLeader::from))
        })
    }

    /// Why the last term ended (set by its `finish`), or null; taken: a second call returns
    /// null until another term ends.
    #[napi]
    pub fn take_stopped(&self) -> Option<StoppedInfo> {
        self.stopped
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

#[napi]
impl NativeLeaderTask {
    /// Starts a run, one term at a time, ended by `stop`; throws `BATON_CONFLICT` when a run
    /// of this task is under way.
    #[napi]
    pub fn terms(&self, stop: &NativeCancel) -> Result<NativeLeaderTerms> {
        let terms = self.inner.terms(&stop.inner).map_err(js_err)?;
        Ok(NativeLeaderTerms {
            inner: OffThread::new(Arc::new(Mutex::new(Some(terms)))),
            client: OffThread::new(self.client.clone()),
        })
    }
}

/// A run of a leader task, one term at a time (`baton::aio::LeaderTerms`).
#[napi(js_name = "NativeLeaderTerms")]
pub struct NativeLeaderTerms {
    inner: OffThread<Arc<Mutex<Option<LeaderTerms>>>>,
    client: OffThread<baton::Client>,
}

#[napi]
impl NativeLeaderTerms {
    /// Waits for the next term (after a term the task ended: the hand-over wait; then the
    /// campaign): resolves with the term, or null once the run is over (`stop` fired, or the
    /// last term ended it). Holds no thread while it waits.
    #[napi(ts_return_type = "Promise<NativeTerm | null>")]
    pub fn next_term<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let next = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(LeaderTerms::next_term);
        let Some(next) = next else {
            return driven(env, async { Ok(None::<NativeTerm>) });
        };
        let client = self.client.clone();
        driven(env, async move {
            Ok(next.await?.map(|term| NativeTerm {
                token: term.token(),
                term: Mutex::new(Some(term)),
                client: OffThread::new(client),
            }))
        })
    }

    /// Ends the run (a leadership still held is given back, off the JS thread).
    #[napi]
    pub fn end(&self) {
        close_shared(&self.inner);
    }
}

/// One term of a leader task: the task runs while it lasts.
#[napi(js_name = "NativeTerm")]
pub struct NativeTerm {
    term: Mutex<Option<Term>>,
    token: baton::CancelToken,
    client: OffThread<baton::Client>,
}

#[napi]
impl NativeTerm {
    /// Whether the term's token has fired (leadership lost, or `stop`).
    #[napi]
    pub fn is_over(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Resolves true the moment the term's token fires (leadership lost, or `stop`); rejects
    /// with `BATON_CANCELLED` when `cancel` fires first (the task returned). Holds no thread.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn ended<'e>(&self, env: &'e Env, cancel: &NativeCancel) -> Result<Object<'e>> {
        let over = Bounded::new(
            &self.client,
            std::future::pending::<baton::Result<bool>>(),
            None,
            Some(&self.token),
            "",
            "term over",
        );
        let over = async move {
            match over.await {
                Err(e) if e.kind() == baton::ErrorKind::Cancelled => Ok(true),
                other => other,
            }
        };
        let waited = Bounded::new(
            &self.client,
            over,
            None,
            Some(&cancel.inner),
            "",
            "the task returned first",
        );
        driven(env, waited)
    }

    /// Ends the term with the task's outcome (`failed`: its error's message; null when it
    /// returned): resigns if still leading, runs `on_stopped_leading`; resolves true when
    /// `nextTerm` should be called again, false when the run is over; rejects when the task
    /// failed and requeue is off (lib/leader_task.js rethrows the task's own error then).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn finish<'e>(&self, env: &'e Env, failed: Option<String>) -> Result<Object<'e>> {
        let term = self
            .term
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| invalid("this term is already finished"))?;
        let outcome = match failed {
            Some(m) => Err(baton::Error::new(
                baton::ErrorKind::Server,
                format!("the leader task failed: {m}"),
            )),
            None => Ok(()),
        };
        driven(env, term.finish(outcome))
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
