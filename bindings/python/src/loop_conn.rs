//! The event loop's end of an agent connection that `baton.aio`'s warm calls use
//! (`_loop._Conn` subclasses it): the call in flight on it, the future that gets its outcome,
//! and the step a readiness of its socket takes.
//!
//! Why native: this is the path every warm answer takes (the reader callback, the call's step,
//! the future's result and the awaiting task's wake-up), four Python functions per request
//! before; native, an asyncio lock cycle went from 186.3k to 180.5k instructions
//! (`make bench-instructions`). What happens seldom (a
//! call that must wait to write, a readiness with no call in flight) is left to the loop's hub
//! in Python (`_write_interest`, `_let_go`).

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::PyAttributeError;
use pyo3::gc::PyVisit;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PyTuple, PyType};
use pyo3::PyTraverseError;

use crate::warm::{WarmCall, READ, WRITE};

/// The call in flight on a connection (all None between calls).
struct Slot {
    call: Option<Py<WarmCall>>,
    fut: Option<Py<PyAny>>,
    /// The loop time the call is given up at.
    deadline: f64,
    /// Whether the loop also polls the socket for writing (the call waits to write).
    writing: bool,
}

/// One agent connection as a loop's warm calls use it: a duplicate of its socket (`fd`, the
/// loop's own), registered with the loop for reading from the first warm call on it until the
/// hub lets it go. See `_loop._Conn`.
#[pyclass(frozen, subclass, weakref, module = "consul_baton._native")]
pub(crate) struct LoopConn {
    id: u64,
    fd: AtomicI32,
    slot: Mutex<Slot>,
    /// The loop's hub (`_loop._LoopHub`): does what this does not (see the module docs).
    hub: Py<PyAny>,
    /// The task running on a loop, or None (`_loop._running_task`).
    running: Py<PyAny>,
}

impl LoopConn {
    fn slot(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Advances the call in flight as far as it goes without blocking. `from_loop`: this is a
    /// callback of the loop (not a task's step), so a settled call's task may take its step
    /// right here (`_wake_now`).
    fn advance(slf: &Bound<'_, Self>, from_loop: bool) -> PyResult<()> {
        let py = slf.py();
        let this = slf.get();
        let (call, fut) = {
            let s = this.slot();
            match (&s.call, &s.fut) {
                (Some(call), Some(fut)) => (call.clone_ref(py), fut.clone_ref(py)),
                // A readiness reported before the call ended.
                _ => return Ok(()),
            }
        };
        let fut = fut.bind(py);
        if fut.call_method0(intern!(py, "done"))?.is_truthy()? {
            // Cancelled.
            return Self::finish(slf);
        }
        match call.get().step(py) {
            Err(e) => {
                Self::finish(slf)?;
                fut.call_method1(intern!(py, "set_exception"), (e.into_value(py),))?;
            }
            Ok((READ, _)) => {
                if this.slot().writing {
                    Self::stop_writing(slf)?;
                }
            }
            Ok((WRITE, _)) => {
                let begins = !std::mem::replace(&mut this.slot().writing, true);
                if begins {
                    this.hub
                        .call_method1(py, intern!(py, "_write_interest"), (slf, true))?;
                }
            }
            Ok((state, value)) => {
                Self::finish(slf)?;
                let outcome = (state, value).into_pyobject(py)?.into_any();
                if from_loop {
                    wake_now(fut, outcome, this.running.bind(py))?;
                } else {
                    fut.call_method1(intern!(py, "set_result"), (outcome,))?;
                }
            }
        }
        Ok(())
    }

    fn stop_writing(slf: &Bound<'_, Self>) -> PyResult<()> {
        slf.get().slot().writing = false;
        let py = slf.py();
        slf.get()
            .hub
            .call_method1(py, intern!(py, "_write_interest"), (slf, false))?;
        Ok(())
    }
}

#[pymethods]
impl LoopConn {
    /// Connection `conn_id`'s duplicate `fd`, for the loop whose hub is `hub`; `running`
    /// gives the task running on a loop (None: none).
    #[new]
    fn new(conn_id: u64, fd: i32, hub: Py<PyAny>, running: Py<PyAny>) -> Self {
        LoopConn {
            id: conn_id,
            fd: AtomicI32::new(fd),
            slot: Mutex::new(Slot {
                call: None,
                fut: None,
                deadline: f64::INFINITY,
                writing: false,
            }),
            hub,
            running,
        }
    }

    /// Which connection this is (`WarmCall.conn_id`).
    #[getter]
    fn id(&self) -> u64 {
        self.id
    }

    /// The duplicate of its socket; -1 once closed.
    #[getter]
    fn fd(&self) -> i32 {
        self.fd.load(Ordering::Relaxed)
    }

    /// Takes the duplicate to close it (`fd` is -1 from now on): -1 if already taken.
    fn _take_fd(&self) -> i32 {
        self.fd.swap(-1, Ordering::Relaxed)
    }

    /// The warm call in flight on it, or None.
    #[getter]
    fn call(&self, py: Python<'_>) -> Option<Py<WarmCall>> {
        self.slot().call.as_ref().map(|c| c.clone_ref(py))
    }

    /// What gets the call's outcome, or None.
    #[getter]
    fn fut(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.slot().fut.as_ref().map(|f| f.clone_ref(py))
    }

    /// The loop time the call in flight is given up at.
    #[getter]
    fn deadline(&self) -> f64 {
        self.slot().deadline
    }

    /// Whether the loop also polls it for writing.
    #[getter]
    fn writing(&self) -> bool {
        self.slot().writing
    }

    /// Starts warm `call` on it: `fut` gets `(state, value)` when it has settled (`DONE`) or
    /// needs a baton thread (`RESUME`: its time, loop time `deadline`, ran out; the hub's
    /// timer sees to that). Called from the awaiting task's step, so `fut` is set as usual.
    pub(crate) fn start(
        slf: &Bound<'_, Self>,
        call: Py<WarmCall>,
        fut: Py<PyAny>,
        deadline: f64,
    ) -> PyResult<()> {
        {
            let mut s = slf.get().slot();
            s.call = Some(call);
            s.fut = Some(fut);
            s.deadline = deadline;
        }
        Self::advance(slf, false)
    }

    /// The loop's reader callback.
    fn readable(slf: &Bound<'_, Self>) -> PyResult<()> {
        if slf.get().slot().call.is_none() {
            // No call of this loop is using it: another thread's request is answered on it,
            // the agent closed it, or baton dropped it (and shut it down). The hub lets it go.
            let py = slf.py();
            slf.get()
                .hub
                .call_method1(py, intern!(py, "_let_go"), (slf,))?;
            return Ok(());
        }
        Self::advance(slf, true)
    }

    /// The loop's writer callback (while `writing`).
    fn writable(slf: &Bound<'_, Self>) -> PyResult<()> {
        Self::advance(slf, false)
    }

    /// The references the garbage collector follows: a call's future holds its loop, whose
    /// registration of this connection holds it, so a loop dropped unclosed with a call in
    /// flight is a cycle through here.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.hub)?;
        visit.call(&self.running)?;
        // Never taken while the collector can run (no Python is called holding it); if it
        // were, what it guards is left unvisited: kept, not freed.
        if let Ok(s) = self.slot.try_lock() {
            visit.call(&s.call)?;
            visit.call(&s.fut)?;
        }
        Ok(())
    }

    /// Breaks such a cycle: the call in flight and its future are let go.
    fn __clear__(&self) {
        if let Ok(mut s) = self.slot.try_lock() {
            s.call = None;
            s.fut = None;
        }
    }

    /// The call in flight no longer uses it (it stays registered for the next).
    fn finish(slf: &Bound<'_, Self>) -> PyResult<()> {
        let writing = {
            let mut s = slf.get().slot();
            s.call = None;
            s.fut = None;
            s.writing
        };
        if writing {
            Self::stop_writing(slf)?;
        }
        Ok(())
    }

    /// `finish` if `call` is the call in flight (its await was cancelled).
    fn drop_call(slf: &Bound<'_, Self>, call: &Bound<'_, WarmCall>) -> PyResult<()> {
        let ours = slf
            .get()
            .slot()
            .call
            .as_ref()
            .is_some_and(|c| c.as_ptr() == call.as_ptr());
        if ours {
            Self::finish(slf)?;
        }
        Ok(())
    }
}

/// Sets `fut`'s result to `value` and runs the step of the task awaiting it at once, in the
/// loop callback that settled it, instead of in the loop's next turn. `fut` is a warm call's
/// own (`_loop._warm_outcome` awaits it and nobody else sees it), so its one done-callback is that
/// task's wake-up. Only from a loop callback: never from inside a task's step.
///
/// The next turn would be a whole pass of the loop (a poll of the selector and the bookkeeping
/// around it) between an answer and the code awaiting it, on the path every answer takes: a
/// lock cycle went from 222.8k to 186.3k instructions without it (`make bench-instructions`).
/// Any other shape of done-callbacks (a loop whose futures keep them elsewhere) is left to
/// `set_result`, and so is a callback run while a task is running (`running(loop)` is not
/// None: a loop re-entered from inside a task, as `nest_asyncio` does): a task cannot step
/// inside another's.
#[pyfunction(name = "_wake_now")]
pub(crate) fn wake_now(
    fut: &Bound<'_, PyAny>,
    value: Bound<'_, PyAny>,
    running: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let py = fut.py();
    if let Some((callback, context)) = lone_wakeup(fut, running)? {
        let removed: usize = fut
            .call_method1(intern!(py, "remove_done_callback"), (&callback,))?
            .extract()?;
        if removed == 1 {
            fut.call_method1(intern!(py, "set_result"), (value,))?;
            context.call_method1(intern!(py, "run"), (callback, fut))?;
            return Ok(());
        }
    }
    fut.call_method1(intern!(py, "set_result"), (value,))?;
    Ok(())
}

/// `fut`'s one done-callback and the context it runs in, when it has exactly one (as a
/// `contextvars.Context`) and no task is running on its loop; None otherwise.
fn lone_wakeup<'py>(
    fut: &Bound<'py, PyAny>,
    running: &Bound<'py, PyAny>,
) -> PyResult<Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
    static CONTEXT: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let py = fut.py();
    let callbacks = match fut.getattr(intern!(py, "_callbacks")) {
        Ok(callbacks) => callbacks,
        Err(e) if e.is_instance_of::<PyAttributeError>(py) => return Ok(None),
        Err(e) => return Err(e),
    };
    let Ok(callbacks) = callbacks.cast::<PyList>() else {
        return Ok(None);
    };
    if callbacks.len() != 1 {
        return Ok(None);
    }
    let Ok(pair) = callbacks.get_item(0)?.cast_into::<PyTuple>() else {
        return Ok(None);
    };
    if pair.len() != 2 {
        return Ok(None);
    }
    let context = pair.get_item(1)?;
    if !context.is_instance(CONTEXT.import(py, "contextvars", "Context")?)? {
        return Ok(None);
    }
    let running_loop = fut.call_method0(intern!(py, "get_loop"))?;
    if !running.call1((running_loop,))?.is_none() {
        return Ok(None);
    }
    Ok(Some((pair.get_item(0)?, context)))
}
