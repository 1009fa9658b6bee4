//! `RwLock` (the reader or writer side of a read-write lock) and `MultiLock` (a lock on
//! several keys at once), both shaped like `Lock`.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args::opt_value;
use crate::{to_py, Session};

use super::holding::{lifecycle_methods, threading_methods, Holding};
use super::Sequencer;

/// One side (reader or writer) of the read-write lock on a prefix, used like `Lock`:
/// `acquire(blocking=True, timeout=-1)`, `release()`, `locked()`, `with`. Readers hold
/// together; a writer holds alone; a waiting writer holds later readers back (it is not
/// starved). Each acquire queues a contender key of its own under `<prefix>/`, bound to the
/// client's default session. Keep a reference while holding: a garbage-collected `RwLock`
/// releases.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct RwLock {
    pub(crate) inner: Holding<baton::RwLock>,
}

threading_methods! {
    RwLock;
    /// Acquires this side. Returns True once held; False if `blocking` is False and it cannot
    /// be held at once, or when `timeout` seconds pass (-1 or `None`: no limit); the contender
    /// key is then deleted. `cancel` (a `baton.CancelToken`) ends the wait with
    /// `baton.CancelledError`; Ctrl-C interrupts it. Either way nothing is left held or queued.
    acquire;
    /// Releases (deletes the contender key): `baton.NotHeldError` (a `RuntimeError`) if not
    /// held, saying why.
    release;
    /// True while held: not released, not lost, session deadline not passed.
    locked;
}

lifecycle_methods! {
    RwLock, "read-write lock's holding";
    /// Why the last holding ended (`"released"`, `"key_changed"`, `"session_lost"`,
    /// `"client_closed"`), or None while held and before the first acquire.
    lost_reason;
    /// A `baton.CancelToken` cancelled when the current holding ends (already cancelled when
    /// not held).
    cancel_token;
    /// Calls `callback(reason)` once per lost holding, on baton's callback thread, after the
    /// state change (as `Lock.on_lost`). Returns an id for `remove_callback`.
    on_lost;
    /// Removes a callback by the id `on_lost` returned; True if it was registered.
    remove_callback;
    /// Blocks until the holding ends and returns why (at once if not held). Raises
    /// `baton.TimeoutError` after `timeout` seconds (`None`: no limit),
    /// `baton.CancelledError` when `cancel` is cancelled.
    wait_lost;
}

#[pymethods]
impl RwLock {
    /// The prefix (without its trailing `/`).
    #[getter]
    fn prefix(&self) -> String {
        self.inner.prefix().to_string()
    }

    /// `"read"` or `"write"`.
    #[getter]
    fn mode(&self) -> &'static str {
        self.inner.mode().as_str()
    }

    /// The contender key of the current holding, or None when not held.
    #[getter]
    fn key(&self) -> Option<String> {
        self.inner.key()
    }

    /// The fencing sequencer of the current holding (the contender key; its token is the
    /// key's CreateIndex), or None.
    #[getter]
    fn sequencer(&self) -> Option<Sequencer> {
        self.inner.sequencer().map(|inner| Sequencer { inner })
    }

    fn __repr__(&self) -> String {
        format!(
            "baton.RwLock(prefix={:?}, mode={:?}, locked={})",
            self.inner.prefix(),
            self.inner.mode().as_str(),
            self.inner.is_held()
        )
    }
}

/// A lock on several keys at once, all or none, used like `Lock`. An acquire takes every key
/// in one transaction, or none: it never holds part of the set, and it waits (holding
/// nothing) while any key is taken. Loss of any key ends the whole holding.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct MultiLock {
    pub(crate) inner: Holding<baton::MultiLock>,
}

threading_methods! {
    MultiLock;
    /// Acquires every key. Returns True once all are held; False if `blocking` is False and
    /// one is taken, or when `timeout` seconds pass (-1 or `None`: no limit). `cancel` and
    /// Ctrl-C as for `Lock.acquire`. Nothing is held meanwhile, nor left held.
    acquire;
    /// Releases every key: `baton.NotHeldError` (a `RuntimeError`) if not held.
    release;
    /// True while every key is held.
    locked;
}

lifecycle_methods! {
    MultiLock, "multi-key lock's holding";
    /// Why the last holding ended (`"released"`, `"key_changed"`, `"removed"`,
    /// `"session_lost"`, `"client_closed"`), or None while held and before the first acquire.
    lost_reason;
    /// A `baton.CancelToken` cancelled when the current holding ends.
    cancel_token;
    /// Calls `callback(reason)` once per lost holding, on baton's callback thread (as
    /// `Lock.on_lost`). Returns an id for `remove_callback`.
    on_lost;
    /// Removes a callback by the id `on_lost` returned; True if it was registered.
    remove_callback;
    /// Blocks until the holding ends and returns why (at once if not held); `timeout` and
    /// `cancel` as for `Lock.wait_lost`.
    wait_lost;
}

#[pymethods]
impl MultiLock {
    /// The keys, de-duplicated and sorted.
    #[getter]
    fn keys(&self) -> Vec<String> {
        self.inner.keys().to_vec()
    }

    /// The value written to every key on acquire.
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.value())
    }

    /// The fencing sequencer of the first key of the current holding, or None.
    #[getter]
    fn sequencer(&self) -> Option<Sequencer> {
        self.inner.sequencer().map(|inner| Sequencer { inner })
    }

    /// One sequencer per key (in `keys` order) while held; empty otherwise.
    #[getter]
    fn sequencers(&self) -> Vec<Sequencer> {
        self.inner
            .sequencers()
            .into_iter()
            .map(|inner| Sequencer { inner })
            .collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "baton.MultiLock(keys={:?}, locked={})",
            self.inner.keys(),
            self.inner.is_held()
        )
    }
}

#[pymethods]
impl crate::Client {
    /// The reader side of the read-write lock on `prefix` (each call a handle of its own).
    fn read_lock(&self, py: Python<'_>, prefix: &str) -> PyResult<RwLock> {
        let l = self.inner.read_lock(prefix).map_err(|e| to_py(py, e))?;
        Ok(RwLock {
            inner: Holding::new(l),
        })
    }

    /// The writer side of the read-write lock on `prefix`.
    fn write_lock(&self, py: Python<'_>, prefix: &str) -> PyResult<RwLock> {
        let l = self.inner.write_lock(prefix).map_err(|e| to_py(py, e))?;
        Ok(RwLock {
            inner: Holding::new(l),
        })
    }

    /// A lock on all of `keys` at once (at least two different keys); `value` (bytes, or str
    /// stored UTF-8 encoded) is written to each on acquire; `session` defaults to the client's.
    #[pyo3(signature = (keys, *, value=None, session=None, **unknown))]
    fn multi_lock(
        &self,
        py: Python<'_>,
        keys: Vec<String>,
        value: Option<&Bound<'_, PyAny>>,
        session: Option<PyRef<'_, Session>>,
        unknown: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<MultiLock> {
        crate::args::refuse_unknown("multi_lock", unknown, &["value", "session"])?;
        let mut o = baton::MultiLockOptions::new().value(opt_value("value", value)?);
        if let Some(s) = session {
            o = o.session(s.inner.clone());
        }
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let l = self
            .inner
            .multi_lock_with(&refs, o)
            .map_err(|e| to_py(py, e))?;
        Ok(MultiLock {
            inner: Holding::new(l),
        })
    }
}
