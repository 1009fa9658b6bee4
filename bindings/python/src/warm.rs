//! Native half of `baton.aio`'s warm path: a lock's acquire or release whose one request the
//! event loop writes and reads itself (`baton::warm`, `docs/src/performance.md`). The loop
//! polls the call's connection (`LoopConn`, which steps the call) for what the step says; a
//! call the warm path did not settle goes on on a baton thread (`_start_resume`), as every
//! cold call does.

use std::sync::{Arc, Mutex};

use baton::warm::{Interest, ResumeAcquire, ResumeRelease, WarmAcquire, WarmRelease, WarmStep};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::aio::{any, released, start, start_holding, timeout, Pending};
use crate::aio_start;
use crate::recipes::Lock;
use crate::to_py;

/// Where a warm call stands.
enum State {
    Acquire(Box<WarmAcquire>),
    Release(Box<WarmRelease>),
    ResumeAcquire(ResumeAcquire),
    ResumeRelease(ResumeRelease),
    Over,
}

/// A step's answers: poll for reading, poll for writing, settled (the value beside it), go on
/// on a baton thread (`_start_resume`).
pub(crate) const READ: u8 = 0;
pub(crate) const WRITE: u8 = 1;
pub(crate) const DONE: u8 = 2;
pub(crate) const RESUME: u8 = 3;

/// One warm lock call of `baton.aio` (made and started by `Lock._aio_acquire` / `_aio_release`).
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct WarmCall {
    state: Mutex<State>,
    lock: Arc<baton::Lock>,
    fd: i32,
    /// Which connection `fd` belongs to (`baton::warm`'s `conn_id`).
    conn: u64,
    /// Seconds its request may take (the client's request timeout).
    limit: f64,
}

fn interest(i: Interest) -> u8 {
    match i {
        Interest::Read => READ,
        Interest::Write => WRITE,
    }
}

impl WarmCall {
    fn new(lock: Arc<baton::Lock>, state: State) -> Self {
        let (fd, conn, limit) = match &state {
            State::Acquire(w) => (w.fd(), w.conn_id(), w.time_limit()),
            State::Release(w) => (w.fd(), w.conn_id(), w.time_limit()),
            _ => (-1, 0, std::time::Duration::ZERO),
        };
        WarmCall {
            state: Mutex::new(state),
            lock,
            fd,
            conn,
            limit: limit.as_secs_f64(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes, reads and judges what it can without blocking: `(READ, None)` poll for
    /// reading, `(WRITE, None)` for writing, `(DONE, value)` settled, `(RESUME, None)` call
    /// `_start_resume`. Errs with what the call raises. `LoopConn` drives it.
    pub(crate) fn step(&self, py: Python<'_>) -> PyResult<(u8, Py<PyAny>)> {
        let mut state = self.state();
        let none = || py.None();
        match &mut *state {
            State::Acquire(w) => match w.advance() {
                WarmStep::Pending(i) => Ok((interest(i), none())),
                WarmStep::Done(r) => {
                    *state = State::Over;
                    Ok((DONE, any(py, r.map_err(|e| to_py(py, e))?)?))
                }
                WarmStep::Resume(r) => {
                    *state = State::ResumeAcquire(r);
                    Ok((RESUME, none()))
                }
            },
            State::Release(w) => match w.advance() {
                WarmStep::Pending(i) => Ok((interest(i), none())),
                WarmStep::Done(r) => {
                    *state = State::Over;
                    let ok = r.map_err(|e| to_py(py, e))?;
                    let not_held = (!ok).then(|| baton::Hold::not_held_message(&*self.lock));
                    Ok((DONE, released(py, not_held)?))
                }
                WarmStep::Resume(r) => {
                    *state = State::ResumeRelease(r);
                    Ok((RESUME, none()))
                }
            },
            State::ResumeAcquire(_) | State::ResumeRelease(_) => Ok((RESUME, none())),
            State::Over => Err(PyRuntimeError::new_err("this warm call has ended")),
        }
    }
}

#[pymethods]
impl WarmCall {
    /// The socket to poll.
    fn fileno(&self) -> i32 {
        self.fd
    }

    /// Which connection `fileno()` belongs to: unique in the process, so the loop can keep a
    /// duplicate of a connection's socket registered between calls and tell it from a later
    /// connection given the same descriptor number. A connection baton drops is shut down
    /// (the duplicate turns readable).
    #[getter]
    pub(crate) fn conn_id(&self) -> u64 {
        self.conn
    }

    /// Seconds its request may take before the loop gives it up (`abandon`).
    #[getter]
    pub(crate) fn time_limit(&self) -> f64 {
        self.limit
    }

    /// Gives the call up as a warm one (its time ran out): `_start_resume` finishes it.
    fn abandon(&self) {
        let mut state = self.state();
        *state = match std::mem::replace(&mut *state, State::Over) {
            State::Acquire(w) => match (*w).abandon() {
                Some(r) => State::ResumeAcquire(r),
                None => State::Over,
            },
            State::Release(w) => State::ResumeRelease((*w).abandon()),
            other => other,
        };
    }

    /// Drops the call in flight (its task was cancelled): what it may have acquired is given
    /// back, and a release goes on, in the background.
    fn drop_call(&self) {
        *self.state() = State::Over;
    }

    /// Native half of the rest of a call `advance` or `abandon` handed over, reported to
    /// `done` as `_start_acquire` / `_start_release` do: a release, or an acquire whose warm
    /// request may have been applied, on a baton thread; any other acquire starts over as a
    /// wait that holds no thread.
    #[pyo3(signature = (done, timeout=None))]
    fn _start_resume(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
        let t = self::timeout(timeout)?;
        match std::mem::replace(&mut *self.state(), State::Over) {
            // The warm request may have been applied: settle that first, on a thread.
            State::ResumeAcquire(r) if r.maybe_applied() => {
                start_holding(done, self.lock.clone(), move |c| r.run(t, Some(c)), any)
            }
            // Nothing owed: the acquire starts over as a wait that holds no thread.
            State::ResumeAcquire(r) => {
                let _view = r.into_restart();
                crate::waits::acquire(done, self.lock.clone(), t)
            }
            State::ResumeRelease(r) => {
                let lock = self.lock.clone();
                start(
                    done,
                    move |_| {
                        let ok = r.run()?;
                        Ok((!ok).then(|| baton::Hold::not_held_message(&*lock)))
                    },
                    released,
                )
            }
            _ => Err(PyRuntimeError::new_err(
                "this warm call has nothing to resume",
            )),
        }
    }
}

#[pymethods]
impl Lock {
    /// `baton.aio`'s acquire, started: a warm one written by the running loop when it can be
    /// (`aio_start::Started` says what came of it). `timeout` is checked as `_start_acquire`
    /// checks it (a bad one raises). A RuntimeError outside a running loop.
    #[pyo3(signature = (timeout=None))]
    fn _aio_acquire<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<aio_start::Started<'py>> {
        self::timeout(timeout)?;
        aio_start::start(py, || self.warm_acquire(), timeout)
    }

    /// `baton.aio`'s release, started as `_aio_acquire` starts an acquire.
    fn _aio_release<'py>(&self, py: Python<'py>) -> PyResult<aio_start::Started<'py>> {
        aio_start::start(
            py,
            || {
                let lock = self.inner.hold();
                let w = lock.warm_release()?;
                Some(WarmCall::new(lock, State::Release(Box::new(w))))
            },
            None,
        )
    }

    /// Whether the client could make warm calls but has no loop connection open (then
    /// `_open_loop_conn` on a baton thread).
    fn _wants_loop_conn(&self) -> bool {
        self.inner.hold().wants_loop_conn()
    }

    /// Opens the client's loop connection (blocking: on a baton thread).
    fn _open_loop_conn(&self, py: Python<'_>) -> PyResult<()> {
        let lock = self.inner.hold();
        py.detach(move || lock.open_loop_conn())
            .map_err(|e| to_py(py, e))
    }
}

impl Lock {
    fn warm_acquire(&self) -> Option<WarmCall> {
        let lock = self.inner.hold();
        let w = lock.warm_acquire()?;
        Some(WarmCall::new(lock, State::Acquire(Box::new(w))))
    }
}
