//! `Lock`, `Semaphore`, `Election`, `Sequencer` for Python, shaped like `threading`.
//!
//! A blocking acquire runs the core call on a short-lived helper thread with a core
//! `CancelToken`, while the calling thread waits detached from the interpreter in
//! 100 ms slices and checks for signals in between. Ctrl-C cancels the token, waits
//! for the helper to finish, undoes an acquisition that raced the cancel, and then
//! raises `KeyboardInterrupt`: nothing is left held.

use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::{float_repr, seconds, to_py, Detached, Session, SLICE};

/// Runs `call` on a helper thread with a cancel token; waits interruptibly. On a Python
/// exception (Ctrl-C) the token is cancelled, `undo` runs on a successful late result,
/// and the exception propagates.
pub(crate) fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    call: impl FnOnce(baton::CancelToken) -> baton::Result<T> + Send + 'static,
    undo: impl FnOnce(T) + Send + 'static,
) -> PyResult<T> {
    let cancel = baton::CancelToken::new();
    let (tx, rx) = crossbeam_channel::bounded(1);
    let token = cancel.clone();
    std::thread::Builder::new()
        .name("baton-py-call".into())
        .spawn(move || {
            let _ = tx.send(call(token));
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread: {e}")))?;
    loop {
        let got = py.detach(|| rx.recv_timeout(SLICE));
        match got {
            Ok(r) => return r.map_err(|e| to_py(py, e)),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                return Err(PyRuntimeError::new_err(
                    "baton call thread ended without a result",
                ))
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
        }
        if let Err(interrupt) = py.check_signals() {
            cancel.cancel();
            if let Ok(Ok(v)) = py.detach(|| rx.recv()) {
                undo(v);
            }
            return Err(interrupt);
        }
    }
}

/// `threading`-style (blocking, timeout) → core timeout (`None` = forever).
fn acquire_timeout(blocking: bool, timeout: f64) -> PyResult<Option<Duration>> {
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

fn check_key(kind: &str, key: &str) -> PyResult<()> {
    if key.trim_start_matches('/').is_empty() {
        return Err(PyValueError::new_err(format!("{kind} must not be empty")));
    }
    Ok(())
}

/// Proof of one acquisition: key, session, LockIndex and a monotonic fencing `token`.
/// `str(seq)` is a stable form that `Sequencer.parse` reads back.
#[pyclass(frozen, module = "baton._native")]
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
/// `with client.lock("key"):`. Loss is signalled by `on_lost`, `wait_lost()` and `locked()`.
/// Keep a reference while holding: a `Lock` that is garbage-collected releases its key.
#[pyclass(frozen, module = "baton._native")]
pub(crate) struct Lock {
    pub(crate) inner: Detached<Arc<baton::Lock>>,
}

#[pymethods]
impl Lock {
    /// Acquires the lock. Returns True once held; False if `blocking` is False and it is
    /// taken, or when `timeout` seconds pass. Ctrl-C interrupts the wait.
    #[pyo3(signature = (blocking=true, timeout=-1.0))]
    fn acquire(&self, py: Python<'_>, blocking: bool, timeout: f64) -> PyResult<bool> {
        let t = acquire_timeout(blocking, timeout)?;
        let (l, u) = (self.inner.clone(), self.inner.clone());
        interruptible(
            py,
            move |c| l.acquire(t, Some(&c)),
            move |held| {
                if held {
                    let _ = u.release();
                }
            },
        )
    }

    /// Releases the lock (the next holder pays no lock-delay). Raises RuntimeError if
    /// it is not held, like `threading.Lock`.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let l = self.inner.clone();
        match py.detach(move || l.release()) {
            Ok(true) => Ok(()),
            Ok(false) => Err(PyRuntimeError::new_err("release unlocked lock")),
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

    /// The value written on acquire (settable before acquiring).
    #[getter]
    fn get_value<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.value())
    }

    #[setter]
    fn set_value(&self, value: Vec<u8>) {
        self.inner.set_value(value)
    }

    /// The fencing sequencer of the current holding, or None.
    #[getter]
    fn sequencer(&self) -> Option<Sequencer> {
        self.inner.sequencer().map(|inner| Sequencer { inner })
    }

    /// Calls `callback(reason)` once per lost holding (`"key_changed"`, `"session_lost"`),
    /// on baton's callback thread; exceptions go to `sys.unraisablehook`.
    fn on_lost(&self, callback: Py<PyAny>) -> PyResult<()> {
        self.inner
            .on_lost(register_lost(callback, baton::LockLost::name)?);
        Ok(())
    }

    /// Blocks until the holding ends and returns why (at once if not held). Raises
    /// `baton.TimeoutError` after `timeout` seconds.
    #[pyo3(signature = (timeout=None))]
    fn wait_lost(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<&'static str> {
        let t = seconds("timeout", timeout)?;
        let l = self.inner.clone();
        interruptible(py, move |c| l.wait_lost(t, Some(&c)), |_| {}).map(|r| r.name())
    }

    /// Deletes the key if nobody holds it (Go's `Destroy`).
    fn destroy(&self, py: Python<'_>) -> PyResult<()> {
        let l = self.inner.clone();
        py.detach(move || l.destroy()).map_err(|e| to_py(py, e))
    }

    fn __enter__(&self, py: Python<'_>) -> PyResult<bool> {
        self.acquire(py, true, -1.0)
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
#[pyclass(frozen, module = "baton._native")]
pub(crate) struct Semaphore {
    pub(crate) inner: Detached<Arc<baton::Semaphore>>,
}

#[pymethods]
impl Semaphore {
    /// Takes a slot; True once held, False at the timeout / when non-blocking and full.
    #[pyo3(signature = (blocking=true, timeout=-1.0))]
    fn acquire(&self, py: Python<'_>, blocking: bool, timeout: f64) -> PyResult<bool> {
        let t = acquire_timeout(blocking, timeout)?;
        let (s, u) = (self.inner.clone(), self.inner.clone());
        interruptible(
            py,
            move |c| s.acquire(t, Some(&c)),
            move |held| {
                if held {
                    let _ = u.release();
                }
            },
        )
    }

    /// Gives the slot back; RuntimeError if not held.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let s = self.inner.clone();
        match py.detach(move || s.release()) {
            Ok(true) => Ok(()),
            Ok(false) => Err(PyRuntimeError::new_err("release of an unheld semaphore")),
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

    /// Calls `callback(reason)` once per lost holding (`"removed"`, `"session_lost"`).
    fn on_lost(&self, callback: Py<PyAny>) -> PyResult<()> {
        self.inner
            .on_lost(register_lost(callback, baton::SemaphoreLost::name)?);
        Ok(())
    }

    fn __enter__(&self, py: Python<'_>) -> PyResult<bool> {
        self.acquire(py, true, -1.0)
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
#[pyclass(frozen, module = "baton._native")]
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
#[pyclass(frozen, module = "baton._native")]
pub(crate) struct Election {
    pub(crate) inner: Detached<Arc<baton::Election>>,
    client: Detached<baton::Client>,
}

#[pymethods]
impl Election {
    /// Campaigns with `value` until elected (True) or `timeout` seconds pass (False).
    #[pyo3(signature = (value, timeout=None))]
    fn campaign(&self, py: Python<'_>, value: Vec<u8>, timeout: Option<f64>) -> PyResult<bool> {
        let t = seconds("timeout", timeout)?;
        let (e, u) = (self.inner.clone(), self.inner.clone());
        interruptible(
            py,
            move |c| e.campaign(&value, t, Some(&c)),
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

    /// Replaces the leader's value, keeping the LockIndex. ConflictError if not leader.
    fn proclaim(&self, py: Python<'_>, value: Vec<u8>) -> PyResult<()> {
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

    /// Calls `callback(reason)` when leadership is lost.
    fn on_lost(&self, callback: Py<PyAny>) -> PyResult<()> {
        self.inner
            .on_lost(register_lost(callback, baton::LockLost::name)?);
        Ok(())
    }

    /// Blocks until leadership ends; returns why.
    #[pyo3(signature = (timeout=None))]
    fn wait_lost(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<&'static str> {
        let t = seconds("timeout", timeout)?;
        let e = self.inner.clone();
        interruptible(py, move |c| e.wait_lost(t, Some(&c)), |_| {}).map(|r| r.name())
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
#[pyclass(frozen, module = "baton._native")]
pub(crate) struct Observer {
    pub(crate) inner: Detached<Arc<std::sync::Mutex<baton::Observer>>>,
}

#[pymethods]
impl Observer {
    /// Waits for the next change; `timeout` in seconds raises `baton.TimeoutError`.
    #[pyo3(signature = (timeout=None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Leader>> {
        let t = seconds("timeout", timeout)?;
        let o = self.inner.clone();
        let ev = interruptible(
            py,
            move |c| {
                let mut g = o.lock().unwrap_or_else(|p| p.into_inner());
                g.next(t, Some(&c))
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
        Ok(match self.next(py, None)? {
            Some(leader) => Py::new(py, leader)?.into_any(),
            None => py.None(),
        })
    }
}

#[pymethods]
impl crate::Client {
    /// A lock on `key`; `value` is written on acquire; `session` defaults to the client's.
    #[pyo3(signature = (key, *, value=Vec::new(), session=None))]
    fn lock(
        &self,
        py: Python<'_>,
        key: &str,
        value: Vec<u8>,
        session: Option<PyRef<'_, Session>>,
    ) -> PyResult<Lock> {
        check_key("key", key)?;
        let mut o = baton::LockOptions::new().value(value);
        if let Some(s) = session {
            o = o.session(s.inner.clone());
        }
        let l = self.inner.lock_with(key, o).map_err(|e| to_py(py, e))?;
        Ok(Lock {
            inner: Detached::new(Arc::new(l)),
        })
    }

    /// A semaphore with `limit` slots on `prefix`.
    #[pyo3(signature = (prefix, limit, *, value=Vec::new(), session=None))]
    fn semaphore(
        &self,
        py: Python<'_>,
        prefix: &str,
        limit: i64,
        value: Vec<u8>,
        session: Option<PyRef<'_, Session>>,
    ) -> PyResult<Semaphore> {
        check_key("prefix", prefix)?;
        if limit <= 0 {
            return Err(PyValueError::new_err(format!(
                "limit must be a positive integer, got {limit}"
            )));
        }
        let mut o = baton::SemaphoreOptions::new().value(value);
        if let Some(s) = session {
            o = o.session(s.inner.clone());
        }
        let s = self
            .inner
            .semaphore_with(prefix, limit as u64, o)
            .map_err(|e| to_py(py, e))?;
        Ok(Semaphore {
            inner: Detached::new(Arc::new(s)),
        })
    }

    /// An election on `key`.
    #[pyo3(signature = (key, *, session=None))]
    fn election(
        &self,
        py: Python<'_>,
        key: &str,
        session: Option<PyRef<'_, Session>>,
    ) -> PyResult<Election> {
        check_key("key", key)?;
        let mut o = baton::ElectionOptions::new();
        if let Some(s) = session {
            o = o.session(s.inner.clone());
        }
        let e = self.inner.election_with(key, o).map_err(|e| to_py(py, e))?;
        Ok(Election {
            inner: Detached::new(Arc::new(e)),
            client: Detached::new((*self.inner).clone()),
        })
    }

    /// Whether `sequencer` is still current (one consistent read).
    fn check_sequencer(&self, py: Python<'_>, sequencer: PyRef<'_, Sequencer>) -> PyResult<bool> {
        let (c, s) = (self.inner.clone(), sequencer.inner.clone());
        py.detach(move || c.check_sequencer(&s))
            .map_err(|e| to_py(py, e))
    }

    /// Writes `value` to `key` only while `sequencer`'s session still holds its lock
    /// (a transaction behind `check-session`); a stale holder gets `ConflictError`.
    fn guarded_put(
        &self,
        py: Python<'_>,
        sequencer: PyRef<'_, Sequencer>,
        key: &str,
        value: Vec<u8>,
    ) -> PyResult<()> {
        check_key("key", key)?;
        let (c, s, k) = (self.inner.clone(), sequencer.inner.clone(), key.to_string());
        py.detach(move || c.guarded_txn(&s, &[baton::KvOp::set(&k, &value, 0)]))
            .map(|_| ())
            .map_err(|e| to_py(py, e))
    }
}
