//! `Lock`, `Semaphore`, `Election`, `Sequencer` for Python, shaped like `threading`.
//!
//! A blocking call runs the core call on the calling thread, detached from the interpreter.
//! On the main thread it is wired to signals (see `interrupt.rs`): Ctrl-C cancels the core
//! call, an acquisition that raced the cancel is undone, and `KeyboardInterrupt` is raised:
//! nothing is left held. Where that cannot be done (a `cancel=` token on the main thread, or an
//! event loop owning the wakeup fd) the core call runs on a pooled thread while the caller
//! waits detached in 100 ms slices and checks for signals in between.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args::{not_held, opt_value, value_bytes};
use crate::cancel::{user_token, CallbackIds, CancelToken};
use crate::interrupt::{is_main_thread, Interruptible};
use crate::{float_repr, seconds, to_py, Detached, Session, SLICE};

/// The threads of the fallback path of [`interruptible`].
static CALLS: baton::pool::Pool = baton::pool::Pool::new("baton-py-call");

/// Ends the idle threads of the fallback path (the `atexit` hook).
pub(crate) fn stop_pool(deadline: Instant) {
    CALLS.stop(deadline);
}

/// The deadline of a timeout (`None`: no limit), for calls that may be restarted.
pub(crate) fn deadline(timeout: Option<Duration>) -> Option<Instant> {
    timeout.map(|t| Instant::now() + t)
}

/// What is left until `deadline` (`None`: no limit).
pub(crate) fn left(deadline: Option<Instant>) -> Option<Duration> {
    deadline.map(|d| d.saturating_duration_since(Instant::now()))
}

fn cancelled_by_user(py: Python<'_>) -> PyErr {
    to_py(
        py,
        baton::Error::new(
            baton::ErrorKind::Cancelled,
            "cancelled through its CancelToken (what it acquired meanwhile was released)",
        ),
    )
}

/// Runs the core call `call` with a cancel token, detached from the interpreter, so that
/// Ctrl-C (any signal whose Python handler raises) interrupts it: the token is cancelled,
/// `undo` gets a result that raced the cancel, and the handler's exception propagates. If
/// the handler returns instead, the call is made again (so `call` computes its timeouts from
/// a deadline; see [`deadline`]). `user` (a `cancel=` token) cancelled from another thread
/// ends the call with `baton.CancelledError`, and a success that raced it is undone.
pub(crate) fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    user: Option<baton::CancelToken>,
    mut call: impl FnMut(&baton::CancelToken) -> baton::Result<T> + Send + 'static,
    undo: impl FnOnce(T) + Send + 'static,
) -> PyResult<T> {
    if !is_main_thread(py) {
        // No signal handler runs on this thread: only the user's token can end the call.
        let token = user.clone().unwrap_or_default();
        let r = py.detach(|| call(&token));
        return match r {
            Ok(v) if user.as_ref().is_some_and(|u| u.is_cancelled()) => {
                py.detach(|| undo(v));
                Err(cancelled_by_user(py))
            }
            r => r.map_err(|e| to_py(py, e)),
        };
    }
    if user.is_none() {
        while let Some(wired) = Interruptible::begin(py)? {
            let token = wired.token().clone();
            let r = py.detach(|| call(&token));
            drop(wired);
            if token.is_cancelled() {
                // A signal came: its handler runs now.
                if let Err(raised) = py.check_signals() {
                    if let Ok(v) = r {
                        // Undoing makes requests (and may log): not while attached.
                        py.detach(|| undo(v));
                    }
                    return Err(raised);
                }
                if matches!(&r, Err(e) if e.kind() == baton::ErrorKind::Cancelled) {
                    continue;
                }
            }
            return r.map_err(|e| to_py(py, e));
        }
    }
    sliced(py, user, call, undo)
}

/// The fallback of [`interruptible`]: `call` on a pooled thread, the caller waiting detached in
/// [`SLICE`]s and checking for signals in between.
fn sliced<T: Send + 'static>(
    py: Python<'_>,
    user: Option<baton::CancelToken>,
    mut call: impl FnMut(&baton::CancelToken) -> baton::Result<T> + Send + 'static,
    undo: impl FnOnce(T) + Send + 'static,
) -> PyResult<T> {
    use crossbeam_channel::RecvTimeoutError;
    let cancel = baton::CancelToken::new();
    let (tx, rx) = crossbeam_channel::bounded(1);
    let token = cancel.clone();
    CALLS
        .run(move || {
            let outcome = call(&token);
            move || {
                let _ = tx.send(outcome);
            }
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread: {e}")))?;
    // Watched until it fires (then the call's own token is cancelled).
    let mut watch = user.as_ref().map(|u| u.receiver());
    loop {
        // `None`: the user's token fired.
        let got = py.detach(|| match &watch {
            Some(user_rx) => crossbeam_channel::select! {
                recv(rx) -> r => Some(r.map_err(|_| RecvTimeoutError::Disconnected)),
                recv(user_rx) -> _ => None,
                default(SLICE) => Some(Err(RecvTimeoutError::Timeout)),
            },
            None => Some(rx.recv_timeout(SLICE)),
        });
        match got {
            None => {
                cancel.cancel();
                watch = None;
                continue;
            }
            Some(Ok(Ok(v))) if user.as_ref().is_some_and(|u| u.is_cancelled()) => {
                py.detach(|| undo(v));
                return Err(cancelled_by_user(py));
            }
            Some(Ok(r)) => return r.map_err(|e| to_py(py, e)),
            Some(Err(RecvTimeoutError::Disconnected)) => {
                return Err(PyRuntimeError::new_err(
                    "baton call thread ended without a result",
                ))
            }
            Some(Err(RecvTimeoutError::Timeout)) => {}
        }
        if let Err(interrupt) = py.check_signals() {
            cancel.cancel();
            py.detach(|| {
                if let Ok(Ok(v)) = rx.recv() {
                    undo(v);
                }
            });
            return Err(interrupt);
        }
    }
}

/// `threading`-style (blocking, timeout) → core timeout (`None` = forever). `timeout=None`
/// means the same as -1: no limit (as everywhere else in baton).
fn acquire_timeout(blocking: bool, timeout: Option<f64>) -> PyResult<Option<Duration>> {
    let timeout = timeout.unwrap_or(-1.0);
    if !blocking {
        if timeout != -1.0 {
            return Err(PyValueError::new_err(
                "can't specify a timeout for a non-blocking call",
            ));
        }
        return Ok(Some(Duration::ZERO));
    }
    if timeout == -1.0 {
        return Ok(None);
    }
    if timeout < 0.0 {
        return Err(PyValueError::new_err(format!(
            "timeout must be a non-negative number of seconds or -1, got {}",
            float_repr(timeout)
        )));
    }
    seconds("timeout", Some(timeout))
}

/// Proof of one acquisition: key, session, LockIndex and a monotonic fencing `token`.
/// `str(seq)` is a stable form that `Sequencer.parse` reads back.
#[pyclass(frozen, module = "consul_baton._native")]
#[derive(Clone)]
pub(crate) struct Sequencer {
    pub(crate) inner: baton::Sequencer,
}

#[pymethods]
impl Sequencer {
    /// The lock's key.
    #[getter]
    fn key(&self) -> String {
        self.inner.key.clone()
    }
    /// The session that acquired it.
    #[getter]
    fn session(&self) -> String {
        self.inner.session.clone()
    }
    /// The key's LockIndex after the acquisition.
    #[getter]
    fn lock_index(&self) -> u64 {
        self.inner.lock_index
    }
    /// The acquisition's ModifyIndex: grows with every new holder, even across deletes.
    #[getter]
    fn token(&self) -> u64 {
        self.inner.token
    }
    /// Parses the string form.
    #[staticmethod]
    fn parse(py: Python<'_>, text: &str) -> PyResult<Sequencer> {
        baton::Sequencer::parse(text)
            .map(|inner| Sequencer { inner })
            .map_err(|e| to_py(py, e))
    }
    fn __str__(&self) -> String {
        self.inner.to_string()
    }
    fn __repr__(&self) -> String {
        format!("baton.Sequencer({:?})", self.inner.to_string())
    }
    fn __eq__(&self, other: &Sequencer) -> bool {
        self.inner == other.inner
    }
}

fn register_lost<R: Copy + Send + 'static>(
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

/// A distributed lock on one Consul key (Go `api.Lock` compatible), used like
/// `threading.Lock`: `acquire(blocking=True, timeout=-1)`, `release()`, `locked()`, and
/// `with client.lock("key"):`. Loss is signalled by `on_lost`, `wait_lost()`, `locked()` and
/// `cancel_token`. Keep a reference while holding: a `Lock` that is garbage-collected
/// releases its key.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Lock {
    pub(crate) inner: Detached<Arc<baton::Lock>>,
    callbacks: CallbackIds,
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

/// A counting semaphore on a Consul prefix (Go `api.Semaphore` compatible), used like
/// `threading.Semaphore`: `acquire(blocking=True, timeout=-1)`, `release()`, `with`.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Semaphore {
    pub(crate) inner: Detached<Arc<baton::Semaphore>>,
    callbacks: CallbackIds,
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
    pub(crate) inner: Detached<Arc<baton::Election>>,
    client: Detached<baton::Client>,
    callbacks: CallbackIds,
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
        let d = deadline(acquire_timeout(true, timeout)?);
        let (e, u) = (self.inner.clone(), self.inner.clone());
        interruptible(
            py,
            user_token(cancel),
            move |c| e.campaign(&value, left(d), Some(c)),
            move |won| {
                if won {
                    let _ = u.resign();
                }
            },
        )
    }

    /// Steps down; False if not leader.
    fn resign(&self, py: Python<'_>) -> PyResult<bool> {
        let e = self.inner.clone();
        py.detach(move || e.resign()).map_err(|e| to_py(py, e))
    }

    /// Replaces the leader's value (bytes or str), keeping the LockIndex. ConflictError if
    /// not leader.
    fn proclaim(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let value = value_bytes("value", value)?;
        let e = self.inner.clone();
        py.detach(move || e.proclaim(&value))
            .map_err(|e| to_py(py, e))
    }

    /// True while this participant leads.
    fn is_leader(&self) -> bool {
        self.inner.is_leader()
    }

    /// The current leader, or None.
    fn leader(&self, py: Python<'_>) -> PyResult<Option<Leader>> {
        let e = self.inner.clone();
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

    /// Why the last leadership ended (`"released"`, `"key_changed"`, `"removed"`,
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

    /// A `baton.CancelToken` cancelled when leadership ends (already cancelled when not
    /// leading).
    #[getter]
    fn cancel_token(&self) -> CancelToken {
        CancelToken::watch_only(self.inner.cancel_token(), "leadership")
    }

    /// Calls `callback(reason)` when leadership is lost, on baton's callback thread, after
    /// the state change (as `Lock.on_lost`; `wait_lost()` may return before it has run).
    /// Returns an id for `remove_callback`.
    fn on_lost(&self, callback: Py<PyAny>) -> PyResult<u64> {
        let cb = register_lost(callback, baton::LockLost::name)?;
        Ok(self.callbacks.add(self.inner.on_lost(cb)))
    }

    /// Removes a callback by the id `on_lost` returned; True if it was registered.
    fn remove_callback(&self, callback_id: u64) -> bool {
        self.callbacks
            .take(callback_id)
            .map(|id| self.inner.remove_callback(id))
            .is_some()
    }

    /// Blocks until leadership ends; returns why. `timeout` in seconds (`None`: no limit)
    /// raises `baton.TimeoutError`; `cancel` raises `baton.CancelledError`. It may return
    /// before the `on_lost` callbacks have run.
    #[pyo3(signature = (timeout=None, *, cancel=None))]
    fn wait_lost(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        cancel: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<&'static str> {
        let d = deadline(seconds("timeout", timeout)?);
        let e = self.inner.clone();
        interruptible(
            py,
            user_token(cancel),
            move |c| e.wait_lost(left(d), Some(c)),
            |_| {},
        )
        .map(|r| r.name())
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
        let ev = interruptible(
            py,
            user_token(cancel),
            move |c| {
                let mut g = o.lock().unwrap_or_else(|p| p.into_inner());
                g.next(left(d), Some(c))
            },
            |_| {},
        )?;
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

/// One KV entry, as read or as a transaction returned it.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct KvEntry {
    inner: baton::KvPair,
}

#[pymethods]
impl KvEntry {
    /// The key.
    #[getter]
    fn key(&self) -> String {
        self.inner.key.clone()
    }
    /// The value (None for writes: Consul returns values only for reads).
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.inner.value.as_deref().map(|v| PyBytes::new(py, v))
    }
    /// The flags (uint64).
    #[getter]
    fn flags(&self) -> u64 {
        self.inner.flags
    }
    /// The session holding the key's lock, or None.
    #[getter]
    fn session(&self) -> Option<String> {
        self.inner.session.clone()
    }
    /// LockIndex.
    #[getter]
    fn lock_index(&self) -> u64 {
        self.inner.lock_index
    }
    /// CreateIndex.
    #[getter]
    fn create_index(&self) -> u64 {
        self.inner.create_index
    }
    /// ModifyIndex.
    #[getter]
    fn modify_index(&self) -> u64 {
        self.inner.modify_index
    }
    fn __repr__(&self) -> String {
        format!(
            "baton.KvEntry(key={:?}, modify_index={})",
            self.inner.key, self.inner.modify_index
        )
    }
}

/// One operation of `guarded_txn`: a dict `{"verb": "set", "key": ..., "value": ...,
/// "flags": 0, "index": 0, "session": ...}` (Node's `TxnOp`; verbs as Consul's).
pub(crate) fn txn_op(i: usize, op: &Bound<'_, PyAny>) -> PyResult<baton::KvOp> {
    let d = op
        .cast::<pyo3::types::PyDict>()
        .map_err(|_| PyTypeError::new_err(format!("ops[{i}] must be a dict")))?;
    const KEYS: [&str; 6] = ["verb", "key", "value", "flags", "index", "session"];
    for k in d.keys() {
        let k: String = k.extract()?;
        if !KEYS.contains(&k.as_str()) {
            return Err(PyTypeError::new_err(format!(
                "ops[{i}] has an unknown key {k:?} (known: {})",
                KEYS.join(", ")
            )));
        }
    }
    let field = |k: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
        Ok(d.get_item(k)?.filter(|v| !v.is_none()))
    };
    let verb: String = field("verb")?
        .ok_or_else(|| PyValueError::new_err(format!("ops[{i}] needs a \"verb\"")))?
        .extract()?;
    let verb = baton::KvVerb::parse(&verb).ok_or_else(|| {
        let all: Vec<_> = baton::KvVerb::ALL.iter().map(|v| v.as_str()).collect();
        PyValueError::new_err(format!(
            "ops[{i}]: unknown verb {verb:?} (one of {})",
            all.join(", ")
        ))
    })?;
    let key: String = field("key")?
        .ok_or_else(|| PyValueError::new_err(format!("ops[{i}] needs a \"key\"")))?
        .extract()?;
    let value = match field("value")? {
        Some(v) => Some(value_bytes(&format!("ops[{i}][\"value\"]"), &v)?),
        None => None,
    };
    Ok(baton::KvOp {
        verb,
        key,
        value,
        flags: field("flags")?
            .map(|v| v.extract())
            .transpose()?
            .unwrap_or(0),
        index: field("index")?
            .map(|v| v.extract())
            .transpose()?
            .unwrap_or(0),
        session: field("session")?.map(|v| v.extract()).transpose()?,
    })
}

#[pymethods]
impl crate::Client {
    /// A lock on `key`; `value` (bytes, or str stored UTF-8 encoded) is written on acquire;
    /// `session` defaults to the client's.
    #[pyo3(signature = (key, *, value=None, session=None))]
    fn lock(
        &self,
        py: Python<'_>,
        key: &str,
        value: Option<&Bound<'_, PyAny>>,
        session: Option<PyRef<'_, Session>>,
    ) -> PyResult<Lock> {
        let mut o = baton::LockOptions::new().value(opt_value("value", value)?);
        if let Some(s) = session {
            o = o.session(s.inner.clone());
        }
        let l = self.inner.lock_with(key, o).map_err(|e| to_py(py, e))?;
        Ok(Lock {
            inner: Detached::new(Arc::new(l)),
            callbacks: CallbackIds::default(),
        })
    }

    /// A semaphore with `limit` slots on `prefix`; `value` as for `lock`.
    #[pyo3(signature = (prefix, limit, *, value=None, session=None))]
    fn semaphore(
        &self,
        py: Python<'_>,
        prefix: &str,
        limit: i64,
        value: Option<&Bound<'_, PyAny>>,
        session: Option<PyRef<'_, Session>>,
    ) -> PyResult<Semaphore> {
        if limit <= 0 {
            return Err(PyValueError::new_err(format!(
                "limit must be a positive integer, got {limit}"
            )));
        }
        let mut o = baton::SemaphoreOptions::new().value(opt_value("value", value)?);
        if let Some(s) = session {
            o = o.session(s.inner.clone());
        }
        let s = self
            .inner
            .semaphore_with(prefix, limit as u64, o)
            .map_err(|e| to_py(py, e))?;
        Ok(Semaphore {
            inner: Detached::new(Arc::new(s)),
            callbacks: CallbackIds::default(),
        })
    }

    /// An election on `key`; `flags` as Consul's guide writes the key (0) to
    /// campaign alongside such clients (default: Go's api.Lock flag).
    #[pyo3(signature = (key, *, session=None, flags=None))]
    fn election(
        &self,
        py: Python<'_>,
        key: &str,
        session: Option<PyRef<'_, Session>>,
        flags: Option<u64>,
    ) -> PyResult<Election> {
        let mut o = baton::ElectionOptions::new();
        if let Some(s) = session {
            o = o.session(s.inner.clone());
        }
        if let Some(f) = flags {
            o = o.flags(f);
        }
        let e = self.inner.election_with(key, o).map_err(|e| to_py(py, e))?;
        Ok(Election {
            inner: Detached::new(Arc::new(e)),
            client: Detached::new((*self.inner).clone()),
            callbacks: CallbackIds::default(),
        })
    }

    /// The current leader of the election on `key` (one consistent read), or None.
    fn leader(&self, py: Python<'_>, key: &str) -> PyResult<Option<Leader>> {
        let (c, k) = (self.inner.clone(), key.to_string());
        py.detach(move || c.leader(&k))
            .map(|l| l.map(|inner| Leader { inner }))
            .map_err(|e| to_py(py, e))
    }

    /// Whether `sequencer` is still current (one consistent read).
    fn check_sequencer(&self, py: Python<'_>, sequencer: PyRef<'_, Sequencer>) -> PyResult<bool> {
        let (c, s) = (self.inner.clone(), sequencer.inner.clone());
        py.detach(move || c.check_sequencer(&s))
            .map_err(|e| to_py(py, e))
    }

    /// Writes `value` (bytes or str) to `key` only while `sequencer`'s session still holds its
    /// lock (a transaction behind `check-session`); a stale holder gets `ConflictError`.
    fn guarded_put(
        &self,
        py: Python<'_>,
        sequencer: PyRef<'_, Sequencer>,
        key: &str,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let value = value_bytes("value", value)?;
        let (c, s, k) = (self.inner.clone(), sequencer.inner.clone(), key.to_string());
        py.detach(move || c.guarded_txn(&s, &[baton::KvOp::set(&k, &value, 0)]))
            .map(|_| ())
            .map_err(|e| to_py(py, e))
    }

    /// Runs `ops` (dicts: `verb`, `key`, optional `value`, `flags`, `index`, `session`) in one
    /// transaction behind a `check-session` of `sequencer`'s key: a stale holder gets
    /// `ConflictError` (message `stale sequencer ...`) and nothing is written. Returns the
    /// entries Consul reported, as `KvEntry`s.
    fn guarded_txn(
        &self,
        py: Python<'_>,
        sequencer: PyRef<'_, Sequencer>,
        ops: Vec<Bound<'_, PyAny>>,
    ) -> PyResult<Vec<KvEntry>> {
        let ops = ops
            .iter()
            .enumerate()
            .map(|(i, op)| txn_op(i, op))
            .collect::<PyResult<Vec<_>>>()?;
        let (c, s) = (self.inner.clone(), sequencer.inner.clone());
        py.detach(move || c.guarded_txn(&s, &ops))
            .map(|v| v.into_iter().map(|inner| KvEntry { inner }).collect())
            .map_err(|e| to_py(py, e))
    }
}

/// Public constructors for `aio.rs`.
impl KvEntry {
    pub(crate) fn new(inner: baton::KvPair) -> KvEntry {
        KvEntry { inner }
    }
}
