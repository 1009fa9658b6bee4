//! `baton.CancelToken` (the core's `CancelToken` for Python), the `on_lost` callbacks and the
//! ids `on_lost` returns.
//!
//! A token made in Python (`baton.CancelToken()`) is passed as `cancel=` to a blocking call
//! and cancelled from any other thread: the call ends with `baton.CancelledError`, and what
//! it acquired meanwhile is released. The tokens of holdings and sessions
//! (`Lock.cancel_token`, `Session.cancel_token`, ...) are cancelled by baton when the holding
//! or session ends; Python code only watches them (their `cancel()` is refused, as cancelling
//! one would tell baton the holding had ended).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::{seconds, SLICE};

/// A cancellation signal shared between threads (`threading.Event`-shaped: `cancel()` sets
/// it, `cancelled()` reads it, `wait(timeout)` blocks until it is set).
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct CancelToken {
    pub(crate) inner: baton::CancelToken,
    /// What cancels it, when baton does (a holding's or session's token); `None` for a token
    /// made in Python.
    owner: Option<&'static str>,
}

impl CancelToken {
    /// A token baton cancels when `owner` ends; Python only watches it.
    pub(crate) fn watch_only(inner: baton::CancelToken, owner: &'static str) -> CancelToken {
        CancelToken {
            inner,
            owner: Some(owner),
        }
    }
}

#[pymethods]
impl CancelToken {
    /// A new token, not cancelled.
    #[new]
    fn new() -> CancelToken {
        CancelToken {
            inner: baton::CancelToken::new(),
            owner: None,
        }
    }

    /// Cancels every call it was passed to (`cancel=`), from any thread. Idempotent.
    /// A holding's or session's token cannot be cancelled by hand (`TypeError`): release the
    /// holding, or destroy the session, instead.
    fn cancel(&self) -> PyResult<()> {
        if let Some(owner) = self.owner {
            return Err(PyTypeError::new_err(format!(
                "this token is cancelled by baton when the {owner} ends; it cannot be cancelled by hand \
                 (make a baton.CancelToken() to cancel calls)"
            )));
        }
        self.inner.cancel();
        Ok(())
    }

    /// Whether it is cancelled.
    fn cancelled(&self) -> bool {
        self.inner.is_cancelled()
    }

    /// Blocks until cancelled (True) or `timeout` seconds pass (False; `None` waits without
    /// limit), like `threading.Event.wait`. The GIL is released; Ctrl-C interrupts the wait.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let end = seconds("timeout", timeout)?.and_then(|t| Instant::now().checked_add(t));
        loop {
            let slice = match end {
                Some(e) => e.saturating_duration_since(Instant::now()).min(SLICE),
                None => SLICE,
            };
            let t = self.inner.clone();
            if py.detach(move || t.wait_timeout(slice)) {
                return Ok(true);
            }
            if end.is_some_and(|e| Instant::now() >= e) {
                return Ok(false);
            }
            py.check_signals()?;
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "baton.CancelToken(cancelled={})",
            if self.inner.is_cancelled() {
                "True"
            } else {
                "False"
            }
        )
    }
}

/// The ids `on_lost` hands to Python (small integers), mapped to the core's `CallbackId`s,
/// for `remove_callback`.
#[derive(Default)]
pub(crate) struct CallbackIds {
    inner: Mutex<(u64, HashMap<u64, baton::CallbackId>)>,
}

impl CallbackIds {
    /// Records `id`; returns the number Python gets.
    pub(crate) fn add(&self, id: baton::CallbackId) -> u64 {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.0 += 1;
        let n = g.0;
        g.1.insert(n, id);
        n
    }

    /// Forgets `n`; its core id if it was known.
    pub(crate) fn take(&self, n: u64) -> Option<baton::CallbackId> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.1.remove(&n)
    }
}

/// `callback(reason)` as a core loss callback (`name` gives the reason's Python string): run
/// from baton's dispatcher, attached to the interpreter (never one that is shutting down),
/// its exceptions sent to `sys.unraisablehook`. `TypeError` if it is not callable.
pub(crate) fn lost_callback<R: Send + 'static>(
    callback: Py<PyAny>,
    name: fn(R) -> &'static str,
) -> PyResult<impl Fn(R) + Send + Sync + 'static> {
    let ok = Python::attach(|py| callback.bind(py).is_callable());
    if !ok {
        return Err(PyTypeError::new_err("callback must be callable"));
    }
    let callback = Arc::new(callback);
    Ok(move |reason: R| {
        let cb = callback.clone();
        let _ = crate::attach_from_thread(|py| {
            if let Err(err) = cb.call1(py, (name(reason),)) {
                err.write_unraisable(py, Some(cb.bind(py)));
            }
        });
    })
}

/// The token of a `cancel=` argument.
pub(crate) fn user_token(cancel: Option<PyRef<'_, CancelToken>>) -> Option<baton::CancelToken> {
    cancel.map(|c| c.inner.clone())
}
