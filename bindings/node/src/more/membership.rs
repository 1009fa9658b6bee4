//! Group membership for Node: groups, members and their watch.

use super::*;

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
    pub(super) inner: baton::Group,
    pub(super) lost: Arc<LostFn>,
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
    pub(super) inner: OffThread<SharedMembersWatch>,
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
    pub(super) inner: OffThread<Arc<baton::Member>>,
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
