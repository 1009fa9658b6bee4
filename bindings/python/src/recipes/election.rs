//! `Election`, `Leader` and `Observer`: leader election and observing the leader.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args::value_bytes;
use crate::cancel::{user_token, CancelToken};
use crate::{seconds, to_py, Detached};

use super::holding::{lifecycle_methods, Holding};
use super::{acquire_timeout, deadline, interruptible, left, Sequencer};

/// The leader as read from the election key.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Leader {
    pub(crate) inner: baton::Leader,
}

#[pymethods]
impl Leader {
    /// The value the leader campaigned or proclaimed with.
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.value)
    }
    /// The leader's session.
    #[getter]
    fn session(&self) -> String {
        self.inner.session.clone()
    }
    /// The key's LockIndex (changes with each new leader).
    #[getter]
    fn lock_index(&self) -> u64 {
        self.inner.lock_index
    }
    /// The key's ModifyIndex.
    #[getter]
    fn token(&self) -> u64 {
        self.inner.token
    }
    fn __repr__(&self) -> String {
        format!(
            "baton.Leader(value={:?}, session={:?}, lock_index={})",
            String::from_utf8_lossy(&self.inner.value),
            self.inner.session,
            self.inner.lock_index
        )
    }
}

/// A participant in the leader election on one key.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Election {
    pub(crate) inner: Holding<baton::Election>,
    pub(crate) client: Detached<baton::Client>,
}

lifecycle_methods! {
    Election, "leadership";
    /// Why the last leadership ended (`"released"`, `"key_changed"`, `"removed"`,
    /// `"session_lost"`, `"client_closed"`), or None while held and before the first acquire.
    lost_reason;
    /// A `baton.CancelToken` cancelled when leadership ends (already cancelled when not
    /// leading).
    cancel_token;
    /// Calls `callback(reason)` when leadership is lost, on baton's callback thread, after
    /// the state change (as `Lock.on_lost`; `wait_lost()` may return before it has run).
    /// Returns an id for `remove_callback`.
    on_lost;
    /// Removes a callback by the id `on_lost` returned; True if it was registered.
    remove_callback;
    /// Blocks until leadership ends; returns why. `timeout` in seconds (`None`: no limit)
    /// raises `baton.TimeoutError`; `cancel` raises `baton.CancelledError`. It may return
    /// before the `on_lost` callbacks have run.
    wait_lost;
}

#[pymethods]
impl Election {
    /// Campaigns with `value` (bytes, or str stored UTF-8 encoded) until elected (True) or
    /// `timeout` seconds pass (False; `None` or -1: no limit). `cancel` (a
    /// `baton.CancelToken`) ends it with `baton.CancelledError`; Ctrl-C interrupts it.
    #[pyo3(signature = (value, timeout=None, *, cancel=None))]
    fn campaign(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        timeout: Option<f64>,
        cancel: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<bool> {
        let value = value_bytes("value", value)?;
        let timeout = acquire_timeout(true, timeout)?;
        self.inner
            .acquire_with(py, timeout, cancel, move |e, t, c| {
                e.campaign(&value, t, Some(c))
            })
    }

    /// Steps down; False if not leader.
    fn resign(&self, py: Python<'_>) -> PyResult<bool> {
        let e = self.inner.hold();
        py.detach(move || e.resign()).map_err(|e| to_py(py, e))
    }

    /// Replaces the leader's value (bytes or str), keeping the LockIndex. ConflictError if
    /// not leader.
    fn proclaim(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let value = value_bytes("value", value)?;
        let e = self.inner.hold();
        py.detach(move || e.proclaim(&value))
            .map_err(|e| to_py(py, e))
    }

    /// True while this participant leads.
    fn is_leader(&self) -> bool {
        self.inner.is_leader()
    }

    /// The current leader, or None.
    fn leader(&self, py: Python<'_>) -> PyResult<Option<Leader>> {
        let e = self.inner.hold();
        py.detach(move || e.leader())
            .map(|l| l.map(|inner| Leader { inner }))
            .map_err(|e| to_py(py, e))
    }

    /// An iterator over leader changes: yields a `Leader`, or None for "no leader", and never
    /// ends by itself (a `for` loop keeps receiving changes across failovers). The first item
    /// is the current state.
    fn observe(&self, py: Python<'_>) -> PyResult<Observer> {
        let c = self.client.clone();
        let key = self.inner.key().to_string();
        let obs = py
            .detach(move || c.observe_leader(&key))
            .map_err(|e| to_py(py, e))?;
        Ok(Observer {
            inner: Detached::new(Arc::new(std::sync::Mutex::new(obs))),
        })
    }

    /// The fencing sequencer while leading.
    #[getter]
    fn sequencer(&self) -> Option<Sequencer> {
        self.inner.sequencer().map(|inner| Sequencer { inner })
    }

    fn __repr__(&self) -> String {
        format!(
            "baton.Election(key={:?}, leader={})",
            self.inner.key(),
            self.inner.is_leader()
        )
    }
}

/// Iterator over an election's leader changes (see `Election.observe`).
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Observer {
    pub(crate) inner: Detached<Arc<std::sync::Mutex<baton::Observer>>>,
}

#[pymethods]
impl Observer {
    /// Waits for the next change; `timeout` in seconds (`None`: no limit) raises
    /// `baton.TimeoutError`; `cancel` (a `baton.CancelToken`) raises `baton.CancelledError`.
    #[pyo3(signature = (timeout=None, *, cancel=None))]
    fn next(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        cancel: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<Option<Leader>> {
        let d = deadline(seconds("timeout", timeout)?);
        let o = self.inner.clone();
        let ev = interruptible(py, user_token(cancel), move |c| {
            let mut g = o.lock().unwrap_or_else(|p| p.into_inner());
            g.next(left(d), Some(c))
        })?;
        Ok(match ev {
            baton::LeaderEvent::Leader(inner) => Some(Leader { inner }),
            baton::LeaderEvent::NoLeader => None,
        })
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Never ends: "no leader" is yielded as `None`. (pyo3 ends an iteration when
    /// `__next__` returns a Rust `None`, so the Python `None` goes out as an object.)
    fn __next__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(match self.next(py, None, None)? {
            Some(leader) => Py::new(py, leader)?.into_any(),
            None => py.None(),
        })
    }
}
