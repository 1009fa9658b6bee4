//! `Lock`: a Consul lock shaped like `threading.Lock`.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args::value_bytes;
use crate::to_py;

use super::holding::{lifecycle_methods, threading_methods, Holding};
use super::Sequencer;

/// A distributed lock on one Consul key (Go `api.Lock` compatible), used like
/// `threading.Lock`: `acquire(blocking=True, timeout=-1)`, `release()`, `locked()`, and
/// `with client.lock("key"):`. Loss is signalled by `on_lost`, `wait_lost()`, `locked()` and
/// `cancel_token`. Keep a reference while holding: a `Lock` that is garbage-collected
/// releases its key.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Lock {
    pub(crate) inner: Holding<baton::Lock>,
}

threading_methods! {
    Lock;
    /// Acquires the lock. Returns True once held; False if `blocking` is False and it is
    /// taken, or when `timeout` seconds pass (-1 or `None`: no limit). `cancel` (a
    /// `baton.CancelToken`) cancelled from another thread ends the wait with
    /// `baton.CancelledError`. Ctrl-C interrupts the wait. Either way nothing is left held.
    acquire;
    /// Releases the lock (the next holder pays no lock-delay). Raises `baton.NotHeldError`
    /// (a `RuntimeError`, like `threading.Lock`'s) if it is not held: never acquired,
    /// released, or lost (the message says which).
    release;
    /// True while held: not released, not lost, session deadline not passed.
    locked;
}

lifecycle_methods! {
    Lock, "lock's holding";
    /// Why the last holding ended (`"released"`, `"key_changed"`, `"removed"`,
    /// `"session_lost"`, `"client_closed"`), or None while held and before the first acquire.
    lost_reason;
    /// A `baton.CancelToken` cancelled when the current holding ends (already cancelled when
    /// not held): pass it as `cancel=` to other waits, or watch it from the work.
    cancel_token;
    /// Calls `callback(reason)` once per lost holding (`"key_changed"`, `"session_lost"`),
    /// on baton's callback thread (the dispatcher), after the state change: `locked()` is
    /// already False and `cancel_token` cancelled. It is not ordered with `wait_lost()`: a
    /// `wait_lost()` may return before the callback has run. Exceptions go to
    /// `sys.unraisablehook`. Returns an id for `remove_callback`.
    on_lost;
    /// Removes a callback by the id `on_lost` returned; True if it was registered. A call
    /// already on its way may still run once.
    remove_callback;
    /// Blocks until the holding ends and returns why (at once if not held). Raises
    /// `baton.TimeoutError` after `timeout` seconds (`None`: no limit), `baton.CancelledError`
    /// when `cancel` is cancelled. It may return before the `on_lost` callbacks have run.
    wait_lost;
}

#[pymethods]
impl Lock {
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

    /// Deletes the key if nobody holds it (Go's `Destroy`).
    fn destroy(&self, py: Python<'_>) -> PyResult<()> {
        let l = self.inner.hold();
        py.detach(move || l.destroy()).map_err(|e| to_py(py, e))
    }

    fn __repr__(&self) -> String {
        format!(
            "baton.Lock(key={:?}, locked={})",
            self.inner.key(),
            self.inner.is_held()
        )
    }
}
