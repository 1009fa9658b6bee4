//! `Group`, `Member`, `MemberInfo`, `MembersWatch` and `MembershipEvent`: group membership.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args::{opt_value, value_bytes};
use crate::cancel::{user_token, CancelToken};
use crate::{seconds, to_py, Detached, Session};

use super::counter::closed;
use super::{deadline, interruptible, left};

/// One live member of a group, as read from Consul.
#[pyclass(frozen, module = "consul_baton._native")]
#[derive(Clone)]
pub(crate) struct MemberInfo {
    pub(crate) inner: baton::MemberInfo,
}

#[pymethods]
impl MemberInfo {
    /// The member's id (the last segment of its key).
    #[getter]
    fn id(&self) -> String {
        self.inner.id.clone()
    }
    /// The value it joined with (or last set with `Member.update_value`).
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.value)
    }
    /// The session its key is acquired with.
    #[getter]
    fn session(&self) -> String {
        self.inner.session.clone()
    }
    /// The raft index at which its key was created (joining order).
    #[getter]
    fn create_index(&self) -> u64 {
        self.inner.create_index
    }
    /// The raft index of its key's last change.
    #[getter]
    fn modify_index(&self) -> u64 {
        self.inner.modify_index
    }
    fn __eq__(&self, other: &MemberInfo) -> bool {
        self.inner == other.inner
    }
    fn __repr__(&self) -> String {
        format!(
            "baton.MemberInfo(id={:?}, value={:?}, session={:?})",
            self.inner.id,
            String::from_utf8_lossy(&self.inner.value),
            self.inner.session
        )
    }
}

/// One change of a group, as `MembersWatch` reports it. `kind` is `"snapshot"` (the first
/// event: `members` holds the members then, sorted by id), `"joined"` or `"updated"`
/// (`member` holds the member, `id` its id) or `"left"` (`id` only).
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct MembershipEvent {
    kind: &'static str,
    id: Option<String>,
    member: Option<MemberInfo>,
    members: Option<Vec<MemberInfo>>,
}

impl MembershipEvent {
    pub(crate) fn new(ev: baton::MembershipEvent) -> MembershipEvent {
        let info = |inner| MemberInfo { inner };
        match ev {
            baton::MembershipEvent::Snapshot(all) => MembershipEvent {
                kind: "snapshot",
                id: None,
                member: None,
                members: Some(all.into_iter().map(info).collect()),
            },
            baton::MembershipEvent::Joined(m) => MembershipEvent {
                kind: "joined",
                id: Some(m.id.clone()),
                member: Some(info(m)),
                members: None,
            },
            baton::MembershipEvent::Updated(m) => MembershipEvent {
                kind: "updated",
                id: Some(m.id.clone()),
                member: Some(info(m)),
                members: None,
            },
            baton::MembershipEvent::Left(id) => MembershipEvent {
                kind: "left",
                id: Some(id),
                member: None,
                members: None,
            },
            // A kind added to the core later.
            #[allow(unreachable_patterns)]
            _ => MembershipEvent {
                kind: "unknown",
                id: None,
                member: None,
                members: None,
            },
        }
    }
}

#[pymethods]
impl MembershipEvent {
    /// `"snapshot"`, `"joined"`, `"left"` or `"updated"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind
    }
    /// The member's id (None for a snapshot).
    #[getter]
    fn id(&self) -> Option<String> {
        self.id.clone()
    }
    /// The member that joined or was updated (None otherwise).
    #[getter]
    fn member(&self) -> Option<MemberInfo> {
        self.member.clone()
    }
    /// The members of a snapshot (None otherwise).
    #[getter]
    fn members(&self) -> Option<Vec<MemberInfo>> {
        self.members.clone()
    }
    fn __repr__(&self) -> String {
        match (&self.members, &self.id) {
            (Some(all), _) => format!(
                "baton.MembershipEvent(kind='snapshot', members={:?})",
                all.iter().map(|m| m.inner.id.as_str()).collect::<Vec<_>>()
            ),
            (None, Some(id)) => format!("baton.MembershipEvent(kind={:?}, id={id:?})", self.kind),
            (None, None) => format!("baton.MembershipEvent(kind={:?})", self.kind),
        }
    }
}

/// A group of members under one prefix: `join(id, value)` makes this process a member
/// (a `Member`), `members()` lists the live members, `watch()` follows joins and leaves.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Group {
    pub(crate) inner: Detached<Arc<baton::Group>>,
    pub(crate) client: baton::WeakClient,
}

#[pymethods]
impl Group {
    /// The prefix (member keys are `<prefix>/<id>`).
    #[getter]
    fn prefix(&self) -> String {
        self.inner.prefix().to_string()
    }

    /// Joins as member `id` with `value` (bytes, or str stored UTF-8 encoded), under `session`
    /// (default: the client's): the key `<prefix>/<id>` is acquired with it. The membership
    /// lasts until `leave()`, the `Member` is garbage-collected, or the session ends.
    /// `baton.ConflictError` when the id is taken by a live session.
    #[pyo3(signature = (id, value=None, *, session=None))]
    fn join(
        &self,
        py: Python<'_>,
        id: &str,
        value: Option<&Bound<'_, PyAny>>,
        session: Option<PyRef<'_, Session>>,
    ) -> PyResult<Member> {
        let v = opt_value("value", value)?;
        let (g, id) = (self.inner.clone(), id.to_string());
        let s = session.map(|s| (*s.inner).clone());
        let m = py
            .detach(move || match s {
                Some(s) => g.join_with_session(&id, &v, &s),
                None => g.join(&id, &v),
            })
            .map_err(|e| to_py(py, e))?;
        Ok(Member::new(m, self.client.clone()))
    }

    /// The live members, sorted by id (a list of `MemberInfo`).
    fn members(&self, py: Python<'_>) -> PyResult<Vec<MemberInfo>> {
        let g = self.inner.clone();
        py.detach(move || g.members())
            .map(|all| all.into_iter().map(|inner| MemberInfo { inner }).collect())
            .map_err(|e| to_py(py, e))
    }

    /// A watch of the group: the first event is a snapshot of the members, the next ones each
    /// join, leave and value change (an iterator, with `next(timeout=)`).
    fn watch(&self, py: Python<'_>) -> PyResult<MembersWatch> {
        let w = self.inner.watch().map_err(|e| to_py(py, e))?;
        Ok(MembersWatch {
            inner: Detached::new(Arc::new(Mutex::new(Some(w)))),
        })
    }

    fn __repr__(&self) -> String {
        format!("baton.Group(prefix={:?})", self.inner.prefix())
    }
}

/// This process's membership of a group (from `Group.join`), until `leave()`, loss of its
/// key or session, or garbage collection. `with group.join(...) as member:` leaves on exit.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Member {
    pub(crate) inner: Detached<Arc<baton::Member>>,
    client: baton::WeakClient,
}

impl Member {
    pub(crate) fn new(m: baton::Member, client: baton::WeakClient) -> Member {
        Member {
            inner: Detached::new(Arc::new(m)),
            client,
        }
    }
}

#[pymethods]
impl Member {
    /// The member's id.
    #[getter]
    fn id(&self) -> String {
        self.inner.id().to_string()
    }

    /// The member's key (`<prefix>/<id>`).
    #[getter]
    fn key(&self) -> String {
        self.inner.key().to_string()
    }

    /// The session the member's key is acquired with.
    #[getter]
    fn session(&self) -> Session {
        Session::new(self.inner.session().clone(), self.client.clone())
    }

    /// True while a member: not left, not lost, session valid.
    fn is_member(&self) -> bool {
        self.inner.is_member()
    }

    /// Why the membership ended (`"left"`, `"key_changed"`, `"session_lost"`), or None while
    /// it lasts.
    #[getter]
    fn lost_reason(&self) -> Option<&'static str> {
        self.inner.lost().map(baton::MemberLost::name)
    }

    /// With `lost_reason == "session_lost"`: why the session was lost; else None.
    #[getter]
    fn lost_session_reason(&self) -> Option<&'static str> {
        match self.inner.lost() {
            Some(baton::MemberLost::SessionLost(r)) => Some(r.name()),
            _ => None,
        }
    }

    /// A `baton.CancelToken` cancelled when the membership ends.
    #[getter]
    fn cancel_token(&self) -> CancelToken {
        CancelToken::watch_only(self.inner.cancel_token(), "membership")
    }

    /// Blocks until the membership ends and returns why. `baton.TimeoutError` after `timeout`
    /// seconds (`None`: no limit), `baton.CancelledError` when `cancel` is cancelled; Ctrl-C
    /// interrupts it.
    #[pyo3(signature = (timeout=None, *, cancel=None))]
    fn wait_lost(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        cancel: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<&'static str> {
        let d = deadline(seconds("timeout", timeout)?);
        let m = self.inner.clone();
        interruptible(py, user_token(cancel), move |c| {
            m.wait_lost(left(d), Some(c))
        })
        .map(baton::MemberLost::name)
    }

    /// Replaces the member's value (bytes or str); `baton.ConflictError` when no longer a
    /// member.
    fn update_value(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let v = value_bytes("value", value)?;
        let m = self.inner.clone();
        py.detach(move || m.update_value(&v))
            .map_err(|e| to_py(py, e))
    }

    /// Leaves the group (the member key is deleted): True when it left now, False when it was
    /// no longer a member.
    fn leave(&self, py: Python<'_>) -> PyResult<bool> {
        let m = self.inner.clone();
        py.detach(move || m.leave()).map_err(|e| to_py(py, e))
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.leave(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "baton.Member(id={:?}, member={})",
            self.inner.id(),
            self.inner.is_member()
        )
    }
}

/// A watch of a group's members (see `Group.watch`): `next(timeout=)`, or a `for` loop that
/// never ends by itself, yielding `MembershipEvent`s.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct MembersWatch {
    pub(crate) inner: Detached<Arc<Mutex<Option<baton::MembersWatch>>>>,
}

#[pymethods]
impl MembersWatch {
    /// The next event (the first call: the snapshot); None when `timeout` seconds pass with
    /// nothing new (`None`: no limit). `cancel` ends it with `baton.CancelledError`; Ctrl-C
    /// interrupts it; `baton.ClosedError` after `close()`.
    #[pyo3(signature = (timeout=None, *, cancel=None))]
    fn next(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        cancel: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<Option<MembershipEvent>> {
        let d = deadline(seconds("timeout", timeout)?);
        let w = self.inner.clone();
        interruptible(py, user_token(cancel), move |c| {
            let mut g = w.lock().unwrap_or_else(|p| p.into_inner());
            match g.as_mut() {
                Some(w) => w.next(left(d), Some(c)),
                None => Err(closed("members watch")),
            }
        })
        .map(|ev| ev.map(MembershipEvent::new))
    }

    /// The members as this watch last reported them (None before the snapshot).
    fn members(&self, py: Python<'_>) -> Option<Vec<MemberInfo>> {
        let w = self.inner.clone();
        py.detach(move || {
            let g = w.lock().unwrap_or_else(|p| p.into_inner());
            g.as_ref().and_then(|w| w.members())
        })
        .map(|all| all.into_iter().map(|inner| MemberInfo { inner }).collect())
    }

    /// Stops the watch.
    fn close(&self, py: Python<'_>) {
        let w = self.inner.clone();
        py.detach(move || drop(w.lock().unwrap_or_else(|p| p.into_inner()).take()));
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<MembershipEvent>> {
        self.next(py, None, None)
    }
}

#[pymethods]
impl crate::Client {
    /// The group of members under `prefix`.
    fn group(&self, py: Python<'_>, prefix: &str) -> PyResult<Group> {
        let g = self.inner.group(prefix).map_err(|e| to_py(py, e))?;
        Ok(Group {
            inner: Detached::new(Arc::new(g)),
            client: self.inner.downgrade(),
        })
    }
}
