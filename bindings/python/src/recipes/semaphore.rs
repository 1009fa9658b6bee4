//! `Semaphore`: up to `limit` holders, shaped like `threading.Semaphore`.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::args::not_held;
use crate::cancel::{user_token, CallbackIds, CancelToken};
use crate::{seconds, to_py, Detached};

use super::*;

/// A counting semaphore on a Consul prefix (Go `api.Semaphore` compatible), used like
/// `threading.Semaphore`: `acquire(blocking=True, timeout=-1)`, `release()`, `with`.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Semaphore {
    pub(crate) inner: Detached<Arc<baton::Semaphore>>,
    pub(super) callbacks: CallbackIds,
}

#[pymethods]
impl Semaphore {
    /// Takes a slot; True once held, False when `timeout` seconds pass (-1 or `None`: no
    /// limit) or when non-blocking and full. `cancel` as for `Lock.acquire`.
    #[pyo3(signature = (blocking=true, timeout=-1.0, *, cancel=None))]
    fn acquire(
        &self,
        py: Python<'_>,
        blocking: bool,
        timeout: Option<f64>,
        cancel: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<bool> {
        let d = deadline(acquire_timeout(blocking, timeout)?);
        let (s, u) = (self.inner.clone(), self.inner.clone());
        interruptible(
            py,
            user_token(cancel),
            move |c| s.acquire(left(d), Some(c)),
            move |held| {
                if held {
                    let _ = u.release();
                }
            },
        )
    }

    /// Gives the slot back; `baton.NotHeldError` (a `RuntimeError`) if not held.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let s = self.inner.clone();
        match py.detach(move || s.release()) {
            Ok(true) => Ok(()),
            Ok(false) => Err(not_held(py, self.inner.not_held_message())),
            Err(e) => Err(to_py(py, e)),
        }
    }

    /// True while a slot is held.
    fn locked(&self) -> bool {
        self.inner.is_held()
    }

    /// The prefix.
    #[getter]
    fn prefix(&self) -> String {
        self.inner.prefix().to_string()
    }

    /// The number of slots.
    #[getter]
    fn limit(&self) -> u64 {
        self.inner.limit()
    }

    /// Why the last holding ended (`"released"`, `"key_changed"`, `"removed"`,
    /// `"session_lost"`, `"client_closed"`), or None while held and before the first acquire.
    #[getter]
    fn lost_reason(&self) -> Option<&'static str> {
        self.inner.last_lost().map(|r| r.name())
    }

    /// With `lost_reason == "session_lost"`: why the session was lost, the reason the
    /// session itself reports (`"invalidated"`, `"deadline_exceeded"`, `"destroyed"`); else None.
    #[getter]
    fn lost_session_reason(&self) -> Option<&'static str> {
        self.inner
            .last_lost()
            .and_then(|r| r.session_reason())
            .map(|r| r.name())
    }

    /// A `baton.CancelToken` cancelled when the current holding ends (see `Lock.cancel_token`).
    #[getter]
    fn cancel_token(&self) -> CancelToken {
        CancelToken::watch_only(self.inner.cancel_token(), "semaphore's holding")
    }

    /// Calls `callback(reason)` once per lost holding (`"removed"`, `"session_lost"`), on
    /// baton's callback thread, after the state change (as `Lock.on_lost`; `wait_lost()` may
    /// return before it has run). Returns an id for `remove_callback`.
    fn on_lost(&self, callback: Py<PyAny>) -> PyResult<u64> {
        let cb = register_lost(callback, baton::SemaphoreLost::name)?;
        Ok(self.callbacks.add(self.inner.on_lost(cb)))
    }

    /// Removes a callback by the id `on_lost` returned; True if it was registered.
    fn remove_callback(&self, callback_id: u64) -> bool {
        self.callbacks
            .take(callback_id)
            .map(|id| self.inner.remove_callback(id))
            .is_some()
    }

    /// Blocks until the holding ends and returns why (`"released"`, `"removed"`,
    /// `"session_lost"`, `"client_closed"`; at once if not held). Raises
    /// `baton.TimeoutError` after `timeout` seconds (`None`: no limit),
    /// `baton.CancelledError` when `cancel` is cancelled. It may return before the `on_lost`
    /// callbacks have run.
    #[pyo3(signature = (timeout=None, *, cancel=None))]
    fn wait_lost(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        cancel: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<&'static str> {
        let d = deadline(seconds("timeout", timeout)?);
        let s = self.inner.clone();
        interruptible(
            py,
            user_token(cancel),
            move |c| s.wait_lost(left(d), Some(c)),
            |_| {},
        )
        .map(|r| r.name())
    }

    fn __enter__(&self, py: Python<'_>) -> PyResult<bool> {
        self.acquire(py, true, None, None)
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        if self.inner.is_held() {
            let s = self.inner.clone();
            py.detach(move || s.release()).map_err(|e| to_py(py, e))?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "baton.Semaphore(prefix={:?}, limit={}, locked={})",
            self.inner.prefix(),
            self.inner.limit(),
            self.inner.is_held()
        )
    }
}
