//! `LeaderTask`: run a Python callable only while leading an election.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;

use crate::args::value_bytes;
use crate::cancel::{user_token, CancelToken};
use crate::interrupt::{is_main_thread, Interruptible};
use crate::{seconds, to_py, Detached};

use super::election::Leader;
use super::Sequencer;

/// Runs a task while leading the election on a key, and only then (client-go's `RunOrDie`,
/// Curator's `LeaderSelector`): `run(task)` campaigns, calls `task(token)` on the calling
/// thread once elected — `token` (a `baton.CancelToken`) fires the moment leadership is lost
/// or `stop` fires, and the task should return soon after — then resigns and, with
/// `requeue`, campaigns again.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct LeaderTask {
    pub(crate) inner: Detached<Arc<baton::LeaderTask>>,
    pub(crate) requeue: bool,
    /// For the bounds of `baton.aio`'s driven waits.
    pub(crate) client: Detached<baton::Client>,
}

/// A call back into Python from a core callback: exceptions go to `sys.unraisablehook`.
fn call_back(
    cb: &Py<PyAny>,
    args: impl for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyTuple>>,
) {
    let _ = crate::attach_from_thread(|py| {
        let r = args(py).and_then(|a| cb.call1(py, a));
        if let Err(err) = r {
            err.write_unraisable(py, Some(cb.bind(py)));
        }
    });
}

fn callable(py: Python<'_>, name: &str, cb: &Option<Py<PyAny>>) -> PyResult<()> {
    match cb {
        Some(cb) if !cb.bind(py).is_callable() => {
            Err(PyTypeError::new_err(format!("{name} must be callable")))
        }
        _ => Ok(()),
    }
}

/// What a run's task raised: an `Exception` (the task failed; returned by `run` with requeue
/// off) or another `BaseException` (`KeyboardInterrupt`, `SystemExit`: `run` stops and raises it).
#[derive(Default)]
struct Raised {
    failure: Option<PyErr>,
    fatal: Option<PyErr>,
}

#[pymethods]
impl LeaderTask {
    /// Campaigns and runs `task(token)` while leading, until `stop` (a `baton.CancelToken`)
    /// is cancelled — or, with `requeue=False`, for one term. The task runs on this thread;
    /// when it returns (or raises), the candidate resigns if it still leads. A task that
    /// raises an `Exception` ends its term as `"failed"`: with requeue the candidate campaigns
    /// again, without it `run` raises that exception. `KeyboardInterrupt` (Ctrl-C, also while
    /// campaigning) and other `BaseException`s stop `run`, which resigns and raises them.
    /// Errors: a campaign's non-transient error (`baton.ClosedError` when the client closes,
    /// `baton.ConflictError` when `run` already runs on this object).
    #[pyo3(signature = (task, stop=None))]
    fn run(
        &self,
        py: Python<'_>,
        task: Py<PyAny>,
        stop: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<()> {
        if !task.bind(py).is_callable() {
            return Err(PyTypeError::new_err("task must be callable"));
        }
        let raised = Arc::new(Mutex::new(Raised::default()));
        // Cancelled when the task raises a BaseException that is not an Exception.
        let fatal = baton::CancelToken::new();
        let mut sources = vec![fatal.clone()];
        sources.extend(user_token(stop));
        let lt = self.inner.clone();
        let (r2, f2) = (raised.clone(), fatal.clone());
        let call = move |stop: &baton::CancelToken| {
            lt.run(
                |token| {
                    Python::attach(|py| {
                        let t = CancelToken::watch_only(token.clone(), "leadership");
                        match task.call1(py, (t,)) {
                            Ok(_) => Ok(()),
                            Err(e) => {
                                let msg = format!("the leader task raised {e}");
                                let mut g = r2.lock().unwrap_or_else(|p| p.into_inner());
                                if e.is_instance_of::<PyException>(py) {
                                    g.failure = Some(e);
                                } else {
                                    g.fatal = Some(e);
                                    f2.cancel();
                                }
                                Err(baton::Error::new(baton::ErrorKind::Server, msg))
                            }
                        }
                    })
                },
                stop,
            )
        };
        let wired = if is_main_thread(py) {
            Interruptible::begin(py)?
        } else {
            None
        };
        if let Some(w) = &wired {
            sources.push(w.token().clone());
        }
        // One token for `stop=`, Ctrl-C and a fatal exception: no thread of its own.
        let linked = baton::CancelToken::any_of(sources);
        let token = linked.token().clone();
        let r = py.detach(move || {
            let r = call(&token);
            drop(linked);
            r
        });
        drop(wired);
        let mut g = raised.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = g.fatal.take() {
            return Err(e);
        }
        // A signal whose handler raises (Ctrl-C) while campaigning or between terms.
        py.check_signals()?;
        match r {
            Ok(()) => Ok(()),
            Err(e) => match g.failure.take() {
                Some(failure) if !self.requeue => Err(failure),
                _ => Err(to_py(py, e)),
            },
        }
    }

    /// The election's key.
    #[getter]
    fn key(&self) -> String {
        self.inner.key().to_string()
    }

    /// Whether this candidate leads now.
    fn is_leader(&self) -> bool {
        self.inner.is_leader()
    }

    /// The fencing sequencer of the current term (for the task to fence its writes), or None.
    #[getter]
    fn sequencer(&self) -> Option<Sequencer> {
        self.inner
            .election()
            .sequencer()
            .map(|inner| Sequencer { inner })
    }

    fn __repr__(&self) -> String {
        format!(
            "baton.LeaderTask(key={:?}, leader={})",
            self.inner.key(),
            self.inner.is_leader()
        )
    }
}

#[pymethods]
impl crate::Client {
    /// A leader task on the election `key`, campaigning with `value` (bytes or str).
    /// `requeue` (default True): campaign again after a term. `requeue_delay` (seconds,
    /// default 0.5): after its task returned, how long to wait for another candidate to take
    /// over before campaigning again. `on_started_leading()` and `on_stopped_leading(reason)`
    /// (`"returned"`, `"failed"`, `"lost"`, `"stopped"`) run on the thread calling `run`, just
    /// before and after the task; `on_new_leader(leader)` (a `baton.Leader`, or None: nobody
    /// leads) on baton's callback thread while `run` runs. Callback exceptions go to
    /// `sys.unraisablehook`.
    #[pyo3(signature = (key, value, *, requeue=true, requeue_delay=None, on_started_leading=None, on_stopped_leading=None, on_new_leader=None))]
    #[allow(clippy::too_many_arguments)]
    fn leader_task(
        &self,
        py: Python<'_>,
        key: &str,
        value: &Bound<'_, PyAny>,
        requeue: bool,
        requeue_delay: Option<f64>,
        on_started_leading: Option<Py<PyAny>>,
        on_stopped_leading: Option<Py<PyAny>>,
        on_new_leader: Option<Py<PyAny>>,
    ) -> PyResult<LeaderTask> {
        let v = value_bytes("value", value)?;
        callable(py, "on_started_leading", &on_started_leading)?;
        callable(py, "on_stopped_leading", &on_stopped_leading)?;
        callable(py, "on_new_leader", &on_new_leader)?;
        let mut lt = self
            .inner
            .leader_task(key, v)
            .map_err(|e| to_py(py, e))?
            .requeue(requeue);
        if let Some(d) = seconds("requeue_delay", requeue_delay)? {
            lt = lt.requeue_delay(d);
        }
        if let Some(cb) = on_started_leading {
            lt = lt.on_started_leading(move || {
                call_back(&cb, |py| Ok(pyo3::types::PyTuple::empty(py)))
            });
        }
        if let Some(cb) = on_stopped_leading {
            lt = lt.on_stopped_leading(move |why: &baton::StoppedLeading| {
                let name = why.name();
                call_back(&cb, |py| pyo3::types::PyTuple::new(py, [name]))
            });
        }
        if let Some(cb) = on_new_leader {
            lt = lt.on_new_leader(move |leader: Option<baton::Leader>| {
                call_back(&cb, |py| {
                    let arg = match leader {
                        Some(inner) => Py::new(py, Leader { inner })?.into_any(),
                        None => py.None(),
                    };
                    pyo3::types::PyTuple::new(py, [arg])
                })
            });
        }
        Ok(LeaderTask {
            inner: Detached::new(Arc::new(lt)),
            requeue,
            client: Detached::new((*self.inner).clone()),
        })
    }
}
