//! `Counter` (an integer in one key, changed atomically) and `CounterWatch`.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;

use crate::cancel::{user_token, CancelToken};
use crate::{seconds, to_py, Detached};

use super::{deadline, interruptible, left};

/// A counter kept in one key (an absent key is 0): `get`, `set`, `add`, `compare_and_set`,
/// `increment`, `decrement`, each atomic across every process (a read, then a check-and-set
/// write, retried when another writer came first), and `watch()`.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Counter {
    pub(crate) inner: Detached<Arc<baton::Counter>>,
}

#[pymethods]
impl Counter {
    /// The key.
    #[getter]
    fn key(&self) -> String {
        self.inner.key().to_string()
    }

    /// The current value (0 when the key is absent; a consistent read).
    fn get(&self, py: Python<'_>) -> PyResult<i64> {
        let c = self.inner.clone();
        py.detach(move || c.get()).map_err(|e| to_py(py, e))
    }

    /// `(value, modify_index)` (`(0, 0)` when the key is absent), for a check-and-set of
    /// one's own (`kv_put(..., cas=modify_index)`).
    fn get_with_index(&self, py: Python<'_>) -> PyResult<(i64, u64)> {
        let c = self.inner.clone();
        py.detach(move || c.get_with_index())
            .map_err(|e| to_py(py, e))
    }

    /// Writes `value` whatever the key holds.
    fn set(&self, py: Python<'_>, value: i64) -> PyResult<()> {
        let c = self.inner.clone();
        py.detach(move || c.set(value)).map_err(|e| to_py(py, e))
    }

    /// Adds `delta` atomically; returns the new value. `baton.InvalidArgumentError` if the sum
    /// overflows a 64-bit signed integer (nothing is written).
    fn add(&self, py: Python<'_>, delta: i64) -> PyResult<i64> {
        let c = self.inner.clone();
        py.detach(move || c.add(delta)).map_err(|e| to_py(py, e))
    }

    /// `add(1)`.
    fn increment(&self, py: Python<'_>) -> PyResult<i64> {
        self.add(py, 1)
    }

    /// `add(-1)`.
    fn decrement(&self, py: Python<'_>) -> PyResult<i64> {
        self.add(py, -1)
    }

    /// Writes `new` if the value is `expected`, atomically; returns whether it did.
    fn compare_and_set(&self, py: Python<'_>, expected: i64, new: i64) -> PyResult<bool> {
        let c = self.inner.clone();
        py.detach(move || c.compare_and_set(expected, new))
            .map_err(|e| to_py(py, e))
    }

    /// A watch of the value: an iterator of the values it takes (the current one first),
    /// with `next(timeout=)`.
    fn watch(&self, py: Python<'_>) -> PyResult<CounterWatch> {
        let w = self.inner.watch().map_err(|e| to_py(py, e))?;
        Ok(CounterWatch {
            inner: Detached::new(Arc::new(Mutex::new(Some(w)))),
        })
    }

    fn __repr__(&self) -> String {
        format!("baton.Counter(key={:?})", self.inner.key())
    }
}

/// The values a counter takes (see `Counter.watch`): `next(timeout=)`, or a `for` loop that
/// never ends by itself. A value is reported when it differs from the last one reported;
/// values written in quick succession may be seen as the latest only.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct CounterWatch {
    pub(crate) inner: Detached<Arc<Mutex<Option<baton::CounterWatch>>>>,
}

#[pymethods]
impl CounterWatch {
    /// The next value (the first call: the current one); None when `timeout` seconds pass
    /// with no change (`None`: no limit). `cancel` ends it with `baton.CancelledError`;
    /// Ctrl-C interrupts it; `baton.ClosedError` after `close()`.
    #[pyo3(signature = (timeout=None, *, cancel=None))]
    fn next(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        cancel: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<Option<i64>> {
        let d = deadline(seconds("timeout", timeout)?);
        let w = self.inner.clone();
        interruptible(py, user_token(cancel), move |c| {
            let mut g = w.lock().unwrap_or_else(|p| p.into_inner());
            match g.as_mut() {
                Some(w) => w.next(left(d), Some(c)),
                None => Err(closed("counter watch")),
            }
        })
    }

    /// Stops the watch (its long poll ends with the last watch of the key).
    fn close(&self, py: Python<'_>) {
        let w = self.inner.clone();
        py.detach(move || drop(w.lock().unwrap_or_else(|p| p.into_inner()).take()));
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<i64>> {
        self.next(py, None, None)
    }
}

/// The `Closed` error of a watch used after its `close()`.
pub(crate) fn closed(what: &str) -> baton::Error {
    baton::Error::new(baton::ErrorKind::Closed, format!("{what} closed"))
}

#[pymethods]
impl crate::Client {
    /// A counter kept in `key` (nothing is sent: an absent key is a counter at 0).
    fn counter(&self, py: Python<'_>, key: &str) -> PyResult<Counter> {
        let c = self.inner.counter(key).map_err(|e| to_py(py, e))?;
        Ok(Counter {
            inner: Detached::new(Arc::new(c)),
        })
    }
}
