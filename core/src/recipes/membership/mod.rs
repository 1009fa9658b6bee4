//! Group membership: processes join a group under a KV prefix with a value
//! bound to their session, list the live members, and watch them come and go.
//!
//! Curator's `GroupMember` and etcd's lease-bound keys on Consul: a member is
//! the key `<prefix>/<id>` acquired with the member's session, so it leaves
//! the group when its process dies (Consul ends the session) as well as when
//! it leaves on purpose. The book's "Group membership" page gives the wire
//! format.

use std::fmt;

use crate::api::kv::KvPair;
use crate::api::txn::KvOp;
use crate::client::Client;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::runtime::lease::Session;

mod member;
mod watch;

pub use member::{Member, MemberLost};
pub use watch::{MembersWatch, MembershipEvent};

/// The flags every member key is written with, so that a member key can be
/// told from other keys under the prefix (and from a lock's or semaphore's
/// keys): [`Group::members`] only lists keys with these flags. "member" in ASCII, below
/// 2^53, so that a Consul before 1.6.2 (which stores a transaction's numbers through a
/// float64) keeps it exact: a join is one transaction on every version.
pub const MEMBER_FLAG_VALUE: u64 = 0x6d65_6d62_6572;

/// The longest member id, in bytes (a key path segment; Consul keys are short).
pub const MEMBER_ID_MAX: usize = 256;

/// One live member of a group, as read from Consul.
///
/// What [`Group::members`] lists and [`MembersWatch`] reports: enough to
/// reach a member (its value) and to tell one membership from the next (a
/// member id that leaves and joins again comes back with another session or
/// `create_index`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberInfo {
    /// The member's id: the last segment of its key.
    pub id: String,
    /// The value the member joined with (or last set with
    /// [`Member::update_value`]), as given.
    pub value: Vec<u8>,
    /// The session the member's key is acquired with.
    pub session: String,
    /// The raft index at which the member's key was created: members sorted
    /// by it are in joining order.
    pub create_index: u64,
    /// The raft index of the key's last change.
    pub modify_index: u64,
}

/// A group of members under one KV prefix; get one from [`Client::group`].
///
/// A handle to read the group ([`Group::members`], [`Group::watch`]) and to
/// join it ([`Group::join`]); it holds no state at Consul itself, so any
/// number of handles, in any processes, may share one prefix.
#[derive(Clone)]
pub struct Group {
    client: Client,
    prefix: String,
}

impl fmt::Debug for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Group")
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl Client {
    /// The group membership recipe on `prefix` (one trailing `/` is dropped):
    /// members are the keys `<prefix>/<id>`, each acquired with its member's
    /// session, so a group lists exactly the processes alive in it.
    ///
    /// Errors: kind `InvalidArgument` for an empty or invalid prefix;
    /// `Closed` for a closed client. Nothing is sent to Consul.
    pub fn group(&self, prefix: &str) -> Result<Group> {
        self.core().check_usable()?;
        let p = crate::foundations::keys::nonempty_prefix("prefix", prefix)?.trim_end_matches('/');
        if p.is_empty() {
            return Err(Error::new(ErrorKind::InvalidArgument, "missing prefix"));
        }
        Ok(Group {
            client: self.clone(),
            prefix: p.to_string(),
        })
    }
}

/// Checks a member id: one key segment, so `<prefix>/<id>` names one key.
fn check_id(id: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("invalid member id {id:?}: {why}"),
        ))
    };
    if id.is_empty() {
        return bad("it is empty");
    }
    if id.len() > MEMBER_ID_MAX {
        return bad(&format!("it is longer than {MEMBER_ID_MAX} bytes"));
    }
    if id.contains('/') {
        return bad("it contains '/' (an id is one key segment)");
    }
    if id == "." || id == ".." {
        return bad("'.' and '..' are not ids (HTTP paths clean them away)");
    }
    if id.chars().any(char::is_control) {
        return bad("it contains a control character");
    }
    Ok(())
}

impl Group {
    /// The client it talks through.
    pub(crate) fn shared_client(&self) -> &Client {
        &self.client
    }

    /// The prefix (without a trailing `/`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The key of member `id`: `<prefix>/<id>`.
    pub fn member_key(&self, id: &str) -> String {
        format!("{}/{id}", self.prefix)
    }

    /// The prefix every member key starts with: `<prefix>/`.
    fn listing(&self) -> String {
        format!("{}/", self.prefix)
    }

    /// Joins the group as member `id` with `value`, under the client's
    /// default session: the key `<prefix>/<id>` is acquired with it, and the
    /// member stays until [`Member::leave`], its drop, or the session's end.
    ///
    /// Errors: kind `InvalidArgument` for an invalid id (empty, longer than
    /// [`MEMBER_ID_MAX`], containing `/` or a control character); `Conflict`
    /// when the id is taken by a live session — another's, or this one's (one
    /// session is one member per id), naming the session — or when Consul
    /// refuses the key for a while after its last holder's session ended
    /// (that session's lock-delay); `SessionInvalidated`, `Closed`,
    /// `Connection`.
    pub fn join(&self, id: &str, value: &[u8]) -> Result<Member> {
        check_id(id)?;
        let session = self.client.default_session()?;
        self.join_with_session(id, value, &session)
    }

    /// Like [`Group::join`], under `session` instead of the client's default
    /// session: for example a session of behaviour `delete`, so a dead
    /// member's key is deleted rather than left behind, or one bound to a
    /// service's health check, so a member leaves when its service fails.
    pub fn join_with_session(&self, id: &str, value: &[u8], session: &Session) -> Result<Member> {
        check_id(id)?;
        self.client.core().check_usable()?;
        if !session.is_valid() {
            return Err(Error::new(
                ErrorKind::SessionInvalidated,
                format!("cannot join as {id:?}: session {} is lost", session.id()),
            ));
        }
        let key = self.member_key(id);
        let kv = self.client.kv();
        // Acquire only a key that is free, as just read: a plain acquire would
        // also succeed on a key our own session holds (another member handle).
        let guard = match kv.get(&key)? {
            None => KvOp::check_not_exists(&key),
            Some(p) => {
                if let Some(holder) = &p.session {
                    return Err(taken(id, &key, holder, session.id()));
                }
                KvOp::check_index(&key, p.modify_index)
            }
        };
        let ops = [
            guard,
            KvOp::lock(&key, value, MEMBER_FLAG_VALUE, session.id()),
        ];
        let pair = match self.client.txn(&ops) {
            Ok(mut entries) => entries.pop(),
            Err(e) if e.kind() == ErrorKind::Conflict && !e.txn_errors().is_empty() => {
                // Taken meanwhile, or refused during a lock-delay: say which.
                return Err(match kv.get(&key)?.and_then(|p| p.session) {
                    Some(holder) => taken(id, &key, &holder, session.id()),
                    None => Error::new(
                        ErrorKind::Conflict,
                        format!(
                            "could not join as {id:?}: Consul refused key {key:?} (changed \
                             meanwhile, or within the lock-delay of its last holder's session)"
                        ),
                    ),
                });
            }
            Err(e) => return Err(e),
        };
        let pair = match pair {
            Some(p) => p,
            None => match kv.get(&key)? {
                Some(p) if p.session.as_deref() == Some(session.id()) => p,
                _ => {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        format!("member key {key:?} changed just after joining"),
                    ))
                }
            },
        };
        Member::start(&self.client, id, key, session.clone(), pair)
    }

    /// The live members, sorted by id: the keys `<prefix>/<id>` written as
    /// member keys ([`MEMBER_FLAG_VALUE`]) that carry a session. A key left
    /// behind without a session (its member's session ended with behaviour
    /// `release`, the default) is not a member; deeper keys
    /// (`<prefix>/a/b`) and keys with other flags are ignored.
    ///
    /// Errors: `Closed`, `Connection` and the like of a KV read.
    pub fn members(&self) -> Result<Vec<MemberInfo>> {
        self.client.core().check_usable()?;
        let entries = self.client.kv().list(&self.listing())?;
        Ok(live_members(&self.prefix, &entries))
    }

    /// Watches the group: the first [`MembersWatch::next`] returns the
    /// current members, later ones each join, leave and value change seen
    /// (on the client's shared watch of the prefix).
    ///
    /// Errors: `Closed`.
    pub fn watch(&self) -> Result<MembersWatch> {
        let w = self.client.watch_prefix(&self.listing())?;
        Ok(MembersWatch::new(
            self.client.clone(),
            self.prefix.clone(),
            w,
        ))
    }
}

fn taken(id: &str, key: &str, holder: &str, ours: &str) -> Error {
    let whose = if holder == ours {
        format!("this member's own session {holder} (it already joined as {id:?})")
    } else {
        format!("live session {holder}")
    };
    Error::new(
        ErrorKind::Conflict,
        format!("member id {id:?} is taken: key {key:?} is held by {whose}"),
    )
}

/// The live members among `entries` (a listing of `<prefix>/`), sorted by id.
pub(crate) fn live_members(prefix: &str, entries: &[KvPair]) -> Vec<MemberInfo> {
    let mut out: Vec<MemberInfo> = entries
        .iter()
        .filter_map(|p| member_of(prefix, p))
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// `p` as a member of the group on `prefix`, if it is one.
fn member_of(prefix: &str, p: &KvPair) -> Option<MemberInfo> {
    let id = p.key.strip_prefix(prefix)?.strip_prefix('/')?;
    if id.is_empty() || id.contains('/') || p.flags != MEMBER_FLAG_VALUE {
        return None;
    }
    let session = p.session.clone()?;
    Some(MemberInfo {
        id: id.to_string(),
        value: p.value.clone().unwrap_or_default(),
        session,
        create_index: p.create_index,
        modify_index: p.modify_index,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(key: &str, session: Option<&str>, flags: u64) -> KvPair {
        KvPair {
            key: key.into(),
            value: Some(b"v".to_vec()),
            flags,
            session: session.map(str::to_string),
            lock_index: 1,
            create_index: 5,
            modify_index: 6,
        }
    }

    #[test]
    fn only_direct_session_bound_member_keys_are_members() {
        let entries = [
            pair("g/b", Some("s2"), MEMBER_FLAG_VALUE),
            pair("g/a", Some("s1"), MEMBER_FLAG_VALUE),
            pair("g/released", None, MEMBER_FLAG_VALUE),
            pair("g/other", Some("s3"), 0),
            pair("g/a/deeper", Some("s1"), MEMBER_FLAG_VALUE),
            pair("gg/x", Some("s1"), MEMBER_FLAG_VALUE),
        ];
        let ids: Vec<_> = live_members("g", &entries)
            .into_iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(ids, ["a", "b"]);
    }

    #[test]
    fn ids_are_one_segment() {
        assert!(check_id("worker-1").is_ok());
        for bad in ["", "a/b", ".", "..", "a\nb"] {
            assert_eq!(
                check_id(bad).unwrap_err().kind(),
                ErrorKind::InvalidArgument
            );
        }
        assert!(check_id(&"x".repeat(MEMBER_ID_MAX + 1)).is_err());
    }
}
