//! The holding lifecycle of `Lock`, `Semaphore` and `Election`, written once over
//! [`baton::Hold`]: [`Holding`] does the work (is held, the loss reasons, the cancel token,
//! the `on_lost` callbacks and their ids, `wait_lost`, a release that raises `NotHeldError`
//! with the core's words, acquiring with nothing left held on Ctrl-C), and two macros make
//! the pyo3 methods of each class from it: [`lifecycle_methods!`] for the three,
//! [`threading_methods!`] for the `threading`-shaped two. A class passes only what is its
//! own: its docstrings and the name of what its cancel token watches.

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;

use baton::{Hold, HoldLost};

use crate::args::not_held;
use crate::cancel::{lost_callback, user_token, CallbackIds, CancelToken};
use crate::{seconds, to_py, Detached};

use super::{acquire_timeout, acquiring, deadline, interruptible, left};

/// A core holding owned by a Python object, with the ids its `on_lost` handed out.
pub(crate) struct Holding<H: Hold + 'static> {
    inner: Detached<Arc<H>>,
    callbacks: CallbackIds,
}

impl<H: Hold + 'static> Deref for Holding<H> {
    type Target = H;

    fn deref(&self) -> &H {
        &self.inner
    }
}

impl<H: Hold + 'static> Holding<H> {
    pub(crate) fn new(inner: H) -> Self {
        Holding {
            inner: Detached::new(Arc::new(inner)),
            callbacks: CallbackIds::default(),
        }
    }

    /// The core object, for a call that outlives the borrow (on another thread).
    pub(crate) fn hold(&self) -> Arc<H> {
        Arc::clone(&self.inner)
    }

    /// `threading`-style acquire: `Hold::acquire` under `(blocking, timeout)` and `cancel`.
    pub(crate) fn acquire(
        &self,
        py: Python<'_>,
        blocking: bool,
        timeout: Option<f64>,
        cancel: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<bool> {
        self.acquire_with(
            py,
            acquire_timeout(blocking, timeout)?,
            cancel,
            |h, t, c| h.acquire(t, Some(c)),
        )
    }

    /// Acquires with `call(hold, time left, token)` (which may be made again: see
    /// [`interruptible`]), interruptible by Ctrl-C and `cancel`, nothing left held either way.
    pub(crate) fn acquire_with(
        &self,
        py: Python<'_>,
        timeout: Option<Duration>,
        cancel: Option<PyRef<'_, CancelToken>>,
        mut call: impl FnMut(&H, Option<Duration>, &baton::CancelToken) -> baton::Result<bool>
            + Send
            + 'static,
    ) -> PyResult<bool> {
        let d = deadline(timeout);
        acquiring(py, user_token(cancel), self.hold(), move |h, c| {
            call(h, left(d), c)
        })
    }

    /// Releases; `NotHeldError` saying why when not held.
    pub(crate) fn release(&self, py: Python<'_>) -> PyResult<()> {
        let h = self.hold();
        match py.detach(move || h.release()) {
            Ok(true) => Ok(()),
            Ok(false) => Err(not_held(py, self.inner.not_held_message())),
            Err(e) => Err(to_py(py, e)),
        }
    }

    /// `__exit__`: releases if held; never swallows the block's exception.
    pub(crate) fn exit(&self, py: Python<'_>) -> PyResult<bool> {
        if self.inner.is_held() {
            let h = self.hold();
            py.detach(move || h.release()).map_err(|e| to_py(py, e))?;
        }
        Ok(false)
    }

    pub(crate) fn lost_reason(&self) -> Option<&'static str> {
        self.inner.last_lost().map(HoldLost::name)
    }

    pub(crate) fn lost_session_reason(&self) -> Option<&'static str> {
        self.inner
            .last_lost()
            .and_then(HoldLost::session_reason)
            .map(|r| r.name())
    }

    /// The holding's token, which Python only watches (`owner` names it in the refusal).
    pub(crate) fn cancel_token(&self, owner: &'static str) -> CancelToken {
        CancelToken::watch_only(self.inner.cancel_token(), owner)
    }

    /// Registers `callback(reason)` (run on the dispatcher, exceptions to
    /// `sys.unraisablehook`); the id Python gets.
    pub(crate) fn on_lost(&self, callback: Py<PyAny>) -> PyResult<u64> {
        let cb = lost_callback(callback, <H::Lost as HoldLost>::name)?;
        Ok(self.callbacks.add(self.inner.on_lost(Box::new(cb))))
    }

    pub(crate) fn remove_callback(&self, callback_id: u64) -> bool {
        self.callbacks
            .take(callback_id)
            .map(|id| self.inner.remove_callback(id))
            .is_some()
    }

    pub(crate) fn wait_lost(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        cancel: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<&'static str> {
        let d = deadline(seconds("timeout", timeout)?);
        let h = self.hold();
        interruptible(py, user_token(cancel), move |c| {
            h.wait_lost(left(d), Some(c))
        })
        .map(HoldLost::name)
    }
}

/// The lifecycle methods of a class whose `inner` is a [`Holding`]: `lost_reason`,
/// `lost_session_reason`, `cancel_token` (watching `$owner`), `on_lost`, `remove_callback`,
/// `wait_lost`, each with the class's docstring (given before its name, in this order).
macro_rules! lifecycle_methods {
    (
        $class:ident, $owner:literal;
        $(#[doc = $lost_reason:literal])* lost_reason;
        $(#[doc = $cancel_token:literal])* cancel_token;
        $(#[doc = $on_lost:literal])* on_lost;
        $(#[doc = $remove_callback:literal])* remove_callback;
        $(#[doc = $wait_lost:literal])* wait_lost;
    ) => {
        #[pymethods]
        impl $class {
            $(#[doc = $lost_reason])*
            #[getter]
            fn lost_reason(&self) -> Option<&'static str> {
                self.inner.lost_reason()
            }

            /// With `lost_reason == "session_lost"`: why the session was lost, the reason the
            /// session itself reports (`"invalidated"`, `"deadline_exceeded"`, `"destroyed"`); else None.
            #[getter]
            fn lost_session_reason(&self) -> Option<&'static str> {
                self.inner.lost_session_reason()
            }

            $(#[doc = $cancel_token])*
            #[getter]
            fn cancel_token(&self) -> $crate::cancel::CancelToken {
                self.inner.cancel_token($owner)
            }

            $(#[doc = $on_lost])*
            fn on_lost(&self, callback: Py<PyAny>) -> PyResult<u64> {
                self.inner.on_lost(callback)
            }

            $(#[doc = $remove_callback])*
            fn remove_callback(&self, callback_id: u64) -> bool {
                self.inner.remove_callback(callback_id)
            }

            $(#[doc = $wait_lost])*
            #[pyo3(signature = (timeout=None, *, cancel=None))]
            fn wait_lost(
                &self,
                py: Python<'_>,
                timeout: Option<f64>,
                cancel: Option<PyRef<'_, $crate::cancel::CancelToken>>,
            ) -> PyResult<&'static str> {
                self.inner.wait_lost(py, timeout, cancel)
            }
        }
    };
}

/// The `threading`-shaped methods of a class whose `inner` is a [`Holding`]: `acquire`,
/// `release`, `locked`, `with`, each with the class's docstring (given before its name).
macro_rules! threading_methods {
    (
        $class:ident;
        $(#[doc = $acquire:literal])* acquire;
        $(#[doc = $release:literal])* release;
        $(#[doc = $locked:literal])* locked;
    ) => {
        #[pymethods]
        impl $class {
            $(#[doc = $acquire])*
            #[pyo3(signature = (blocking=true, timeout=-1.0, *, cancel=None))]
            fn acquire(
                &self,
                py: Python<'_>,
                blocking: bool,
                timeout: Option<f64>,
                cancel: Option<PyRef<'_, $crate::cancel::CancelToken>>,
            ) -> PyResult<bool> {
                self.inner.acquire(py, blocking, timeout, cancel)
            }

            $(#[doc = $release])*
            fn release(&self, py: Python<'_>) -> PyResult<()> {
                self.inner.release(py)
            }

            $(#[doc = $locked])*
            fn locked(&self) -> bool {
                self.inner.is_held()
            }

            fn __enter__(&self, py: Python<'_>) -> PyResult<bool> {
                self.inner.acquire(py, true, None, None)
            }

            #[pyo3(signature = (*_args))]
            fn __exit__(
                &self,
                py: Python<'_>,
                _args: &Bound<'_, pyo3::types::PyTuple>,
            ) -> PyResult<bool> {
                self.inner.exit(py)
            }
        }
    };
}

pub(crate) use {lifecycle_methods, threading_methods};
