//! `Semaphore`: up to `limit` holders, shaped like `threading.Semaphore`.

use pyo3::prelude::*;

use super::holding::{lifecycle_methods, threading_methods, Holding};

/// A counting semaphore on a Consul prefix (Go `api.Semaphore` compatible), used like
/// `threading.Semaphore`: `acquire(blocking=True, timeout=-1)`, `release()`, `with`.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Semaphore {
    pub(crate) inner: Holding<baton::Semaphore>,
}

threading_methods! {
    Semaphore;
    /// Takes a slot; True once held, False when `timeout` seconds pass (-1 or `None`: no
    /// limit) or when non-blocking and full. `cancel` as for `Lock.acquire`.
    acquire;
    /// Gives the slot back; `baton.NotHeldError` (a `RuntimeError`) if not held.
    release;
    /// True while a slot is held.
    locked;
}

lifecycle_methods! {
    Semaphore, "semaphore's holding";
    /// Why the last holding ended (`"released"`, `"key_changed"`, `"removed"`,
    /// `"session_lost"`, `"client_closed"`), or None while held and before the first acquire.
    lost_reason;
    /// A `baton.CancelToken` cancelled when the current holding ends (see `Lock.cancel_token`).
    cancel_token;
    /// Calls `callback(reason)` once per lost holding (`"removed"`, `"session_lost"`), on
    /// baton's callback thread, after the state change (as `Lock.on_lost`; `wait_lost()` may
    /// return before it has run). Returns an id for `remove_callback`.
    on_lost;
    /// Removes a callback by the id `on_lost` returned; True if it was registered.
    remove_callback;
    /// Blocks until the holding ends and returns why (`"released"`, `"removed"`,
    /// `"session_lost"`, `"client_closed"`; at once if not held). Raises
    /// `baton.TimeoutError` after `timeout` seconds (`None`: no limit),
    /// `baton.CancelledError` when `cancel` is cancelled. It may return before the `on_lost`
    /// callbacks have run.
    wait_lost;
}

#[pymethods]
impl Semaphore {
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

    fn __repr__(&self) -> String {
        format!(
            "baton.Semaphore(prefix={:?}, limit={}, locked={})",
            self.inner.prefix(),
            self.inner.limit(),
            self.inner.is_held()
        )
    }
}
