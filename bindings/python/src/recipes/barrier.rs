//! `Barrier` (a gate raised and lowered on one key) and `DoubleBarrier` (a round of `count`
//! participants entering and leaving together).

use std::sync::Arc;

use pyo3::prelude::*;

use crate::cancel::{user_token, CancelToken};
use crate::{seconds, to_py, Detached, Session};

use super::{deadline, interruptible, left, run};

/// A barrier on one key: `hold()` raises it, `release()` lowers it (any process may), and
/// `wait()` blocks until it is down. Raised with `hold()` the key is not bound to a session
/// (it stays up until someone releases it); `hold(session=s)` binds it to `s`, so it falls
/// when the session ends.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Barrier {
    pub(crate) inner: Detached<Arc<baton::Barrier>>,
}

#[pymethods]
impl Barrier {
    /// The barrier's key.
    #[getter]
    fn key(&self) -> String {
        self.inner.key().to_string()
    }

    /// Raises the barrier: True when this call raised it, False when it was already up. With
    /// `session` (a `baton.Session`) the key is bound to it and falls when the session ends.
    #[pyo3(signature = (*, session=None))]
    fn hold(&self, py: Python<'_>, session: Option<PyRef<'_, Session>>) -> PyResult<bool> {
        let b = self.inner.clone();
        let s = session.map(|s| (*s.inner).clone());
        py.detach(move || match s {
            Some(s) => b.hold_with_session(&s),
            None => b.hold(),
        })
        .map_err(|e| to_py(py, e))
    }

    /// Lowers the barrier: True when this call lowered a raised barrier, False when it was
    /// not up.
    fn release(&self, py: Python<'_>) -> PyResult<bool> {
        let b = self.inner.clone();
        py.detach(move || b.release()).map_err(|e| to_py(py, e))
    }

    /// Whether the barrier is up now (one read).
    fn is_held(&self, py: Python<'_>) -> PyResult<bool> {
        let b = self.inner.clone();
        py.detach(move || b.is_held()).map_err(|e| to_py(py, e))
    }

    /// Blocks until the barrier is down: True (at once if it is not up), False when `timeout`
    /// seconds pass first (`None`: no limit; 0 looks once). `cancel` (a `baton.CancelToken`)
    /// ends it with `baton.CancelledError`; Ctrl-C interrupts it.
    #[pyo3(signature = (timeout=None, *, cancel=None))]
    fn wait(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        cancel: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<bool> {
        let d = deadline(seconds("timeout", timeout)?);
        let b = self.inner.clone();
        interruptible(py, user_token(cancel), move |c| b.wait(left(d), Some(c)))
    }

    fn __repr__(&self) -> String {
        format!("baton.Barrier(key={:?})", self.inner.key())
    }
}

/// A double barrier of `count` participants on a prefix: `enter()` waits until `count`
/// participants are there, `leave()` until all of them have left. `with` enters on entry and
/// leaves on exit. A handle is one participant; it may enter again after leaving.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct DoubleBarrier {
    pub(crate) inner: Detached<Arc<baton::DoubleBarrier>>,
}

impl DoubleBarrier {
    fn do_enter(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        cancel: Option<baton::CancelToken>,
    ) -> PyResult<bool> {
        let d = deadline(seconds("timeout", timeout)?);
        let b = self.inner.clone();
        let back = self.inner.clone();
        // An enter that succeeded after Ctrl-C (or a cancel on its way) is left again at once.
        run(
            py,
            cancel,
            move |c| b.enter(left(d), Some(c)),
            move |entered| {
                if entered {
                    let _ = back.leave(Some(std::time::Duration::ZERO), None);
                }
            },
        )
    }

    fn do_leave(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        cancel: Option<baton::CancelToken>,
    ) -> PyResult<bool> {
        let d = deadline(seconds("timeout", timeout)?);
        let b = self.inner.clone();
        interruptible(py, cancel, move |c| b.leave(left(d), Some(c)))
    }
}

#[pymethods]
impl DoubleBarrier {
    /// The prefix (without a trailing `/`).
    #[getter]
    fn prefix(&self) -> String {
        self.inner.prefix().to_string()
    }

    /// The number of participants a round waits for.
    #[getter]
    fn count(&self) -> usize {
        self.inner.count()
    }

    /// Whether this participant has entered and not yet left.
    fn is_entered(&self) -> bool {
        self.inner.is_entered()
    }

    /// Registers this participant and waits until a round of `count` that counts it opens:
    /// True once entered, False when `timeout` seconds pass first (`None`: no limit; nothing
    /// is left behind). `cancel` ends it with `baton.CancelledError`; Ctrl-C interrupts it.
    /// `baton.ConflictError` when already entered.
    #[pyo3(signature = (timeout=None, *, cancel=None))]
    fn enter(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        cancel: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<bool> {
        self.do_enter(py, timeout, user_token(cancel))
    }

    /// Leaves (the participant's key is removed first), then waits until every participant of
    /// the round has left: True then, False when `timeout` seconds pass first (it has left
    /// either way). `baton.ConflictError` when not entered.
    #[pyo3(signature = (timeout=None, *, cancel=None))]
    fn leave(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        cancel: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<bool> {
        self.do_leave(py, timeout, user_token(cancel))
    }

    fn __enter__(slf: PyRef<'_, Self>, py: Python<'_>) -> PyResult<Py<Self>> {
        slf.do_enter(py, None, None)?;
        Ok(slf.into())
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        if self.inner.is_entered() {
            self.do_leave(py, None, None)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "baton.DoubleBarrier(prefix={:?}, count={}, entered={})",
            self.inner.prefix(),
            self.inner.count(),
            self.inner.is_entered()
        )
    }
}

#[pymethods]
impl crate::Client {
    /// A barrier on `key` (nothing is written until `hold()`).
    fn barrier(&self, py: Python<'_>, key: &str) -> PyResult<Barrier> {
        let b = self.inner.barrier(key).map_err(|e| to_py(py, e))?;
        Ok(Barrier {
            inner: Detached::new(Arc::new(b)),
        })
    }

    /// A double barrier of `count` participants on `prefix` (1 to 126); participants use
    /// `session`, by default the client's.
    #[pyo3(signature = (prefix, count, *, session=None))]
    fn double_barrier(
        &self,
        py: Python<'_>,
        prefix: &str,
        count: usize,
        session: Option<PyRef<'_, Session>>,
    ) -> PyResult<DoubleBarrier> {
        let b = match session {
            Some(s) => self
                .inner
                .double_barrier_with_session(prefix, count, (*s.inner).clone()),
            None => self.inner.double_barrier(prefix, count),
        }
        .map_err(|e| to_py(py, e))?;
        Ok(DoubleBarrier {
            inner: Detached::new(Arc::new(b)),
        })
    }
}
