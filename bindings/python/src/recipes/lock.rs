//! `Lock`: a Consul lock shaped like `threading.Lock`.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args::{not_held, value_bytes};
use crate::cancel::{user_token, CallbackIds, CancelToken};
use crate::{seconds, to_py, Detached};

use super::*;

/// A distributed lock on one Consul key (Go `api.Lock` compatible), used like
/// `threading.Lock`: `acquire(blocking=True, timeout=-1)`, `release()`, `locked()`, and
/// `with client.lock("key"):`. Loss is signalled by `on_lost`, `wait_lost()`, `locked()` and
/// `cancel_token`. Keep a reference while holding: a `Lock` that is garbage-collected
/// releases its key.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Lock {
    pub(crate) inner: Detached<Arc<baton::Lock>>,
    pub(super) callbacks: CallbackIds,
}

#[pymethods]
impl Lock {
    /// Acquires the lock. Returns True once held; False if `blocking` is False and it is
    /// taken, or when `timeout` seconds pass (-1 or `None`: no limit). `cancel` (a
    /// `baton.CancelToken`) cancelled from another thread ends the wait with
    /// `baton.CancelledError`. Ctrl-C interrupts the wait. Either way nothing is left held.
    #[pyo3(signature = (blocking=true, timeout=-1.0, *, cancel=None))]
    fn acquire(
        &self,
        py: Python<'_>,
        blocking: bool,
        timeout: Option<f64>,
        cancel: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<bool> {
        let d = deadline(acquire_timeout(blocking, timeout)?);
        let (l, u) = (self.inner.clone(), self.inner.clone());
        interruptible(
            py,
            user_token(cancel),
            move |c| l.acquire(left(d), Some(c)),
            move |held| {
                if held {
                    let _ = u.release();
                }
            },
        )
    }

    /// Releases the lock (the next holder pays no lock-delay). Raises `baton.NotHeldError`
    /// (a `RuntimeError`, like `threading.Lock`'s) if it is not held: never acquired,
    /// released, or lost (the message says which).
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let l = self.inner.clone();
        match py.detach(move || l.release()) {
            Ok(true) => Ok(()),
            Ok(false) => Err(not_held(py, self.inner.not_held_message())),
            Err(e) => Err(to_py(py, e)),
        }
    }

    /// True while held: not released, not lost, session deadline not passed.
    fn locked(&self) -> bool {
        self.inner.is_held()
    }

    /// The key.
    #[getter]
    fn key(&self) -> String {
        self.inner.key().to_string()
    }

    /// The value written on acquire (settable before acquiring: bytes, or str stored UTF-8
    /// encoded).
    #[getter]
    fn get_value<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.value())
    }

    #[setter]
    fn set_value(&self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.inner.set_value(value_bytes("value", value)?);
        Ok(())
    }

    /// The fencing sequencer of the current holding, or None.
    #[getter]
    fn sequencer(&self) -> Option<Sequencer> {
        self.inner.sequencer().map(|inner| Sequencer { inner })
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

    /// A `baton.CancelToken` cancelled when the current holding ends (already cancelled when
    /// not held): pass it as `cancel=` to other waits, or watch it from the work.
    #[getter]
    fn cancel_token(&self) -> CancelToken {
        CancelToken::watch_only(self.inner.cancel_token(), "lock's holding")
    }

    /// Calls `callback(reason)` once per lost holding (`"key_changed"`, `"session_lost"`),
    /// on baton's callback thread (the dispatcher), after the state change: `locked()` is
    /// already False and `cancel_token` cancelled. It is not ordered with `wait_lost()`: a
    /// `wait_lost()` may return before the callback has run. Exceptions go to
    /// `sys.unraisablehook`. Returns an id for `remove_callback`.
    fn on_lost(&self, callback: Py<PyAny>) -> PyResult<u64> {
        let cb = register_lost(callback, baton::LockLost::name)?;
        Ok(self.callbacks.add(self.inner.on_lost(cb)))
    }

    /// Removes a callback by the id `on_lost` returned; True if it was registered. A call
    /// already on its way may still run once.
    fn remove_callback(&self, callback_id: u64) -> bool {
        self.callbacks
            .take(callback_id)
            .map(|id| self.inner.remove_callback(id))
            .is_some()
    }

    /// Blocks until the holding ends and returns why (at once if not held). Raises
    /// `baton.TimeoutError` after `timeout` seconds (`None`: no limit), `baton.CancelledError`
    /// when `cancel` is cancelled. It may return before the `on_lost` callbacks have run.
    #[pyo3(signature = (timeout=None, *, cancel=None))]
    fn wait_lost(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        cancel: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<&'static str> {
        let d = deadline(seconds("timeout", timeout)?);
        let l = self.inner.clone();
        interruptible(
            py,
            user_token(cancel),
            move |c| l.wait_lost(left(d), Some(c)),
            |_| {},
        )
        .map(|r| r.name())
    }

    /// Deletes the key if nobody holds it (Go's `Destroy`).
    fn destroy(&self, py: Python<'_>) -> PyResult<()> {
        let l = self.inner.clone();
        py.detach(move || l.destroy()).map_err(|e| to_py(py, e))
    }

    fn __enter__(&self, py: Python<'_>) -> PyResult<bool> {
        self.acquire(py, true, None, None)
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        if self.inner.is_held() {
            let l = self.inner.clone();
            py.detach(move || l.release()).map_err(|e| to_py(py, e))?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "baton.Lock(key={:?}, locked={})",
            self.inner.key(),
            self.inner.is_held()
        )
    }
}
