//! `Member`: one process's membership of a group, from join to leave or loss.

use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::select;

use crate::api::kv::KvPair;
use crate::api::txn::KvOp;
use crate::client::{Client, OwedRun};
use crate::foundations::cancel::{CancelToken, HookGuard};
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;
use crate::runtime::keyhub::{Hook, KeySub};
use crate::runtime::lease::{LostReason, Session, SessionState};
use crate::transport::conn::Conn;

use super::MEMBER_FLAG_VALUE;

/// Why a membership ended: what [`Member::wait_lost`] and [`Member::lost`]
/// report, so a process can tell leaving on purpose from being dropped out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemberLost {
    /// This process left ([`Member::leave`], or the handle was dropped).
    Left,
    /// The member key no longer carries our session: deleted or released by
    /// someone else (or by Consul, for a session that ended meanwhile).
    KeyChanged,
    /// The member's session was lost (destroyed, expired, invalidated by a
    /// failed check, or the client closed): Consul released or deleted the key.
    SessionLost(LostReason),
}

impl MemberLost {
    /// A stable lowercase name: `"left"`, `"key_changed"`, `"session_lost"`
    /// (for logs and, later, the bindings).
    pub fn name(self) -> &'static str {
        match self {
            MemberLost::Left => "left",
            MemberLost::KeyChanged => "key_changed",
            MemberLost::SessionLost(_) => "session_lost",
        }
    }
}

struct State {
    ended: Option<MemberLost>,
    /// The hub's watch of the member key (kept until the handle drops).
    sub: Option<KeySub>,
    session_hook: Option<HookGuard>,
}

struct Shared {
    client: Client,
    id: String,
    key: String,
    session: Session,
    /// Cancelled when the membership ends, for whatever reason.
    token: CancelToken,
    state: Mutex<State>,
}

/// One membership of a group: the key `<prefix>/<id>` acquired with a
/// session; get one from [`Group::join`](super::Group::join).
///
/// The membership lasts until [`Member::leave`], until the handle is dropped
/// (which leaves, like a lock's drop releases it), or until it is lost: its
/// session ends or its key stops carrying the session. Loss is signalled by
/// [`Member::cancel_token`] and [`Member::wait_lost`], so work that only
/// makes sense while a member (serving as a pool's worker) can stop.
pub struct Member {
    shared: Arc<Shared>,
    /// A handle of the async layer's step threads: its drop leaves nothing.
    view: bool,
}

impl fmt::Debug for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Member")
            .field("key", &self.shared.key)
            .field("session", &self.shared.session.id())
            .field("lost", &self.lost())
            .finish()
    }
}

impl Member {
    /// Records a fresh membership (`pair`: the key as the join wrote it) and
    /// starts watching its key and its session.
    pub(super) fn start(
        client: &Client,
        id: &str,
        key: String,
        session: Session,
        pair: KvPair,
    ) -> Result<Member> {
        let shared = Arc::new(Shared {
            client: client.clone(),
            id: id.to_string(),
            key,
            session,
            token: CancelToken::new(),
            state: Mutex::new(State {
                ended: None,
                sub: None,
                session_hook: None,
            }),
        });
        let member = Member {
            shared,
            view: false,
        };
        let sh = &member.shared;
        let core = client.core().clone();
        let as_of = pair.modify_index;
        let sub = KeySub::watch_holding(
            &core.conn,
            &core.keyhub,
            &sh.key,
            (Some(pair), as_of),
            key_hook(Arc::downgrade(sh)),
        );
        // On an error the member drops, and its drop leaves.
        let sub = sub?;
        let weak = Arc::downgrade(sh);
        let session_hook = sh.session.cancel_token().on_cancel(move || {
            if let Some(sh) = weak.upgrade() {
                let reason = match sh.session.state() {
                    SessionState::Lost(r) => r,
                    _ => LostReason::Invalidated,
                };
                sh.end(MemberLost::SessionLost(reason));
            }
        });
        {
            let mut st = lock(&sh.state);
            st.sub = Some(sub);
            st.session_hook = Some(session_hook);
        }
        Ok(member)
    }

    /// The member's id (the last segment of its key).
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// The member's key: `<prefix>/<id>`.
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// The session the member's key is acquired with.
    pub fn session(&self) -> &Session {
        &self.shared.session
    }

    /// Another handle on this membership whose drop leaves nothing: the async
    /// API's step threads act through it while the future borrows `self`.
    pub(crate) fn view(&self) -> Member {
        Member {
            shared: Arc::clone(&self.shared),
            view: true,
        }
    }

    /// The client it talks through.
    pub(crate) fn shared_client(&self) -> &Client {
        &self.shared.client
    }

    /// Whether this is still a member: not left, not lost, session valid.
    pub fn is_member(&self) -> bool {
        lock(&self.shared.state).ended.is_none() && self.shared.session.is_valid()
    }

    /// Why the membership ended, `None` while it lasts.
    pub fn lost(&self) -> Option<MemberLost> {
        lock(&self.shared.state).ended
    }

    /// A token cancelled when the membership ends (left, key changed,
    /// session lost), for work that must stop with it.
    pub fn cancel_token(&self) -> CancelToken {
        self.shared.token.clone()
    }

    /// Blocks until the membership ends and returns why; an error of kind
    /// `Timeout` when `timeout` passes first (`None` waits for as long as it
    /// takes), `Cancelled` when `cancel` fires first.
    pub fn wait_lost(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<MemberLost> {
        let end = crate::foundations::scope::deadline_after(timeout);
        let lost = self.shared.token.receiver();
        let never = crossbeam_channel::never();
        let cancel_rx = cancel.map(|c| c.receiver()).unwrap_or(never);
        loop {
            if let Some(r) = self.lost() {
                return Ok(r);
            }
            if cancel.is_some_and(CancelToken::is_cancelled) {
                return Err(Error::new(
                    ErrorKind::Cancelled,
                    "wait for membership loss cancelled",
                ));
            }
            let tick = match end {
                Some(e) if e <= Instant::now() => {
                    return Err(Error::new(
                        ErrorKind::Timeout,
                        format!("still a member as {:?} at timeout", self.shared.id),
                    ))
                }
                Some(e) => crossbeam_channel::at(e),
                None => crossbeam_channel::never(),
            };
            select! {
                recv(lost) -> _ => {}
                recv(cancel_rx) -> _ => {}
                recv(tick) -> _ => {}
            }
        }
    }

    /// Replaces the member's value (what [`Group::members`](super::Group::members)
    /// lists), in a transaction that first checks the key still carries the
    /// member's session, so a lost member never writes (or re-creates) it.
    ///
    /// Errors: kind `Conflict` when this is no longer a member (the
    /// membership then ends as [`MemberLost::KeyChanged`] if it had not);
    /// `Closed`, `Connection`.
    pub fn update_value(&self, value: &[u8]) -> Result<()> {
        let sh = &self.shared;
        sh.client.core().check_usable()?;
        if let Some(r) = self.lost() {
            return Err(not_member(&sh.id, r));
        }
        let sid = sh.session.id();
        let ops = [
            KvOp::check_session(&sh.key, sid),
            KvOp::lock(&sh.key, value, MEMBER_FLAG_VALUE, sid),
        ];
        match sh.client.txn(&ops) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == ErrorKind::Conflict && !e.txn_errors().is_empty() => {
                sh.end(MemberLost::KeyChanged);
                Err(not_member(
                    &sh.id,
                    self.lost().unwrap_or(MemberLost::KeyChanged),
                ))
            }
            Err(e) => Err(e),
        }
    }

    /// Leaves the group: the membership ends ([`MemberLost::Left`]) and the
    /// member key is deleted, in a transaction that checks it still carries
    /// the member's session (so a key someone else has since taken stays).
    /// `Ok(true)` when it left now; `Ok(false)` when it was no longer a member
    /// (left before, or lost). Should the delete fail (Consul unreachable),
    /// the error says so and the delete goes on in the background until
    /// Consul confirms it ([`Client::close`] makes it too); the member has
    /// left either way.
    pub fn leave(&self) -> Result<bool> {
        let sh = &self.shared;
        if !sh.end(MemberLost::Left) {
            return Ok(false);
        }
        if sh.client.is_closed() {
            return Ok(true);
        }
        match remove(sh.client.conn(), &sh.key, sh.session.id()) {
            Ok(()) => Ok(true),
            Err(e) => {
                sh.remove_later();
                Err(e.prefixed(&format!(
                    "leaving as {:?} not confirmed yet (retried in the background)",
                    sh.id
                )))
            }
        }
    }
}

impl Shared {
    /// Ends the membership (idempotent): `true` if this call ended it.
    fn end(&self, reason: MemberLost) -> bool {
        {
            let mut st = lock(&self.state);
            if st.ended.is_some() {
                return false;
            }
            st.ended = Some(reason);
        }
        self.token.cancel();
        if reason != MemberLost::Left {
            let (id, key) = (self.id.clone(), self.key.clone());
            self.client.core().post(Box::new(move || {
                log::warn!("baton group member {id:?} ({key}) lost: {}", reason.name())
            }));
        }
        true
    }

    /// Deletes the member key on the clean-up thread, retried until Consul
    /// confirms it; owed to Consul meanwhile, so [`Client::close`] makes it too.
    fn remove_later(&self) {
        if self.client.is_closed() {
            return;
        }
        let (key, sid) = (self.key.clone(), self.session.id().to_string());
        let run: OwedRun = Arc::new(move |conn: &Conn| remove(conn, &key, &sid));
        let what = format!("group membership: removing member key {:?}", self.key);
        self.client
            .owe_work(&self.session, self.key.clone(), run, what, ());
    }
}

/// Deletes `key` if it still carries session `sid` (a failed check is done:
/// the key is not ours to delete).
fn remove(conn: &Conn, key: &str, sid: &str) -> Result<()> {
    let ops = [KvOp::check_session(key, sid), KvOp::delete(key)];
    match conn.txn(&ops) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::Conflict && !e.txn_errors().is_empty() => Ok(()),
        Err(e) => Err(e),
    }
}

/// The hub's hook on the member key: runs on the hub thread on each change.
fn key_hook(weak: Weak<Shared>) -> Hook {
    Arc::new(move |entry: Option<&KvPair>| {
        let Some(sh) = weak.upgrade() else { return };
        let sid = sh.session.id();
        if entry.is_some_and(|p| p.session.as_deref() == Some(sid)) {
            return;
        }
        if lock(&sh.state).ended.is_some() {
            return;
        }
        // Tell a key released or deleted because the session ended (the
        // session monitor may not know yet) from one changed by someone else.
        // One request, bounded by GONE_PROBE_TIMEOUT (an unanswered one is a key change).
        if crate::api::session_api::gone(sh.client.conn(), sid) {
            sh.session.shared.lose(LostReason::Invalidated);
            sh.end(MemberLost::SessionLost(LostReason::Invalidated));
        } else {
            sh.end(MemberLost::KeyChanged);
        }
    })
}

fn not_member(id: &str, r: MemberLost) -> Error {
    Error::new(
        ErrorKind::Conflict,
        format!("no longer a member as {id:?} ({})", r.name()),
    )
}

impl Drop for Member {
    fn drop(&mut self) {
        if self.view {
            return;
        }
        let sh = &self.shared;
        if sh.end(MemberLost::Left) && !sh.client.is_closed() {
            if let Err(e) = remove(sh.client.conn(), &sh.key, sh.session.id()) {
                log::debug!("baton group member {:?}: leaving on drop: {e}", sh.id);
                sh.remove_later();
            }
        }
        let mut st = lock(&sh.state);
        st.sub = None;
        st.session_hook = None;
    }
}
