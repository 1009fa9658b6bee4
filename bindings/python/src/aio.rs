//! The native half of `baton.aio`: start a blocking core call on a baton thread
//! and report its outcome to a Python callback, with a handle to cancel it.
//!
//! `baton/aio.py` turns the callback into an asyncio future (through
//! `loop.call_soon_threadsafe`), so waits never occupy the event loop nor the
//! default executor's few threads. Cancelling the awaiting task cancels the
//! core call; an acquisition that succeeded while the cancel was on its way is
//! undone here (or, if the cancel came later still, by `aio.py`).

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3::IntoPyObjectExt;

use crate::args::value_bytes;
use crate::recipes::{txn_op, Election, KvEntry, Leader, Lock, Observer, Semaphore, Sequencer};
use crate::{seconds, to_py, Client, Session};

/// A core call running on a baton thread (see `baton.aio`). Thread-safe.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Pending {
    cancel: baton::CancelToken,
}

#[pymethods]
impl Pending {
    /// Cancels the call: it ends with `baton.CancelledError`, and whatever it
    /// acquired meanwhile is released.
    fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Whether `cancel()` was called.
    fn cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }
}

type Convert<T> = fn(Python<'_>, T) -> PyResult<Py<PyAny>>;

/// The threads `baton.aio` calls run on.
static CALLS: baton::pool::Pool = baton::pool::Pool::new("baton-py-aio");

/// Ends the idle threads (the `atexit` hook).
pub(crate) fn stop_pool(deadline: std::time::Instant) {
    CALLS.stop(deadline);
}

/// Where a call's outcome goes: `done(ok, value)` called on the baton thread (attached to
/// the interpreter), or, for `(hub, weakref_to_done)`, `done` called on the event loop's
/// thread by [`Hub::drain`]. The reference is weak so that a pending call does not keep its
/// event loop alive: a loop closed and dropped with the call still pending frees `done`, and
/// the outcome is then undone rather than reported.
enum Target {
    Thread(Py<PyAny>),
    Loop(Weak<HubInner>, Py<PyAny>),
}

/// Runs `call` on a pooled baton thread (see `pool.rs`), then reports `done(True, value)` or
/// `done(False, exception)` as the target says (`done`, or `(hub, done)`). If the token was
/// cancelled by the time `call` succeeded, `undo` gets the value and `done` a
/// `CancelledError`; an outcome nobody will take (its event loop and hub gone) is undone too.
/// An exception raised by `done` goes to `sys.unraisablehook`.
fn start<T: Send + 'static, U: FnOnce(T) + Send + 'static>(
    done: Py<PyAny>,
    call: impl FnOnce(&baton::CancelToken) -> baton::Result<T> + Send + 'static,
    undo: U,
    convert: Convert<T>,
) -> PyResult<Pending> {
    let target = Python::attach(|py| -> PyResult<Target> {
        let d = done.bind(py);
        if let Ok((hub, callback)) = d.extract::<(Bound<'_, Hub>, Bound<'_, PyAny>)>() {
            if !callback.is_instance_of::<pyo3::types::PyWeakrefReference>() {
                return Err(PyValueError::new_err(
                    "with a hub, done must be a weakref.ref to a callable",
                ));
            }
            return Ok(Target::Loop(
                Arc::downgrade(&hub.get().inner),
                callback.unbind(),
            ));
        }
        if !d.is_callable() {
            return Err(PyValueError::new_err("done must be callable"));
        }
        Ok(Target::Thread(done.clone_ref(py)))
    })?;
    let cancel = baton::CancelToken::new();
    let token = cancel.clone();
    CALLS
        .run(move || {
            let (outcome, undo) = match call(&token) {
                Ok(v) if token.is_cancelled() => {
                    undo(v);
                    let e = baton::Error::new(
                        baton::ErrorKind::Cancelled,
                        "cancelled while the call finished",
                    );
                    (Err(e), None)
                }
                other => (other, Some(undo)),
            };
            move || match target {
                Target::Thread(done) => {
                    let _ = crate::attach_from_thread(|py| report(py, &done, outcome, convert));
                }
                Target::Loop(hub, done) => {
                    let settled = Box::new(Settled {
                        outcome: Some(outcome),
                        undo,
                        done,
                        convert,
                    });
                    // With the hub gone, dropping `settled` undoes it.
                    if let Some(hub) = hub.upgrade() {
                        hub.push(settled);
                    }
                }
            }
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread: {e}")))?;
    Ok(Pending { cancel })
}

/// Calls `done(ok, value)` with `outcome` converted.
fn report<T>(py: Python<'_>, done: &Py<PyAny>, outcome: baton::Result<T>, convert: Convert<T>) {
    let (ok, value) = match outcome.map_err(|e| to_py(py, e)) {
        Ok(v) => match convert(py, v) {
            Ok(obj) => (true, obj),
            Err(e) => (false, e.into_value(py).into_any()),
        },
        Err(e) => (false, e.into_value(py).into_any()),
    };
    if let Err(err) = done.call1(py, (ok, value)) {
        err.write_unraisable(py, Some(done.bind(py)));
    }
}

/// A call's outcome waiting in a [`Hub`] for its event loop (`done`: a weak reference).
struct Settled<T: Send + 'static, U: FnOnce(T) + Send + 'static> {
    outcome: Option<baton::Result<T>>,
    undo: Option<U>,
    done: Py<PyAny>,
    convert: Convert<T>,
}

/// An outcome the event loop's thread reports.
trait Deliver: Send {
    fn deliver(self: Box<Self>, py: Python<'_>);
}

impl<T: Send + 'static, U: FnOnce(T) + Send + 'static> Deliver for Settled<T, U> {
    fn deliver(mut self: Box<Self>, py: Python<'_>) {
        // `done` is a weak reference: dead, nobody awaits, and dropping `self` undoes.
        let Ok(done) = self.done.call0(py) else {
            return;
        };
        if done.is_none(py) {
            return;
        }
        if let Some(outcome) = self.outcome.take() {
            report(py, &done, outcome, self.convert);
        }
    }
}

impl<T: Send + 'static, U: FnOnce(T) + Send + 'static> Drop for Settled<T, U> {
    /// Never reported (the loop is gone): a success is undone, on a baton thread (never
    /// while holding the interpreter).
    fn drop(&mut self) {
        if let (Some(Ok(v)), Some(undo)) = (self.outcome.take(), self.undo.take()) {
            // `Settled` is only dropped unreported where nothing awaits; a failure to start a
            // thread leaves the holding to its session.
            let _ = CALLS.run(move || {
                undo(v);
                || ()
            });
        }
    }
}

/// The meeting point of one event loop and the baton threads working for it (see
/// `baton.aio`): a thread queues an outcome here and writes a byte to a socket the loop
/// watches (`loop.add_reader(hub.fileno(), hub.drain)`), once until the loop drains. No baton
/// thread takes the interpreter to report an outcome, so the loop may poll without sleeping
/// (`baton.aio`'s spin) and a thread never waits for it.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Hub {
    inner: Arc<HubInner>,
    reader: UnixStream,
}

struct HubInner {
    ready: Mutex<Vec<Box<dyn Deliver>>>,
    writer: UnixStream,
    /// A byte is on its way (or unread): no other until the loop drains.
    woken: AtomicBool,
}

impl HubInner {
    fn push(&self, item: Box<dyn Deliver>) {
        self.ready
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(item);
        if !self.woken.swap(true, Ordering::SeqCst) {
            // Non-blocking; a full socket already has bytes for the loop to read.
            let _ = (&self.writer).write(&[1]);
        }
    }
}

#[pymethods]
impl Hub {
    #[new]
    fn new() -> PyResult<Self> {
        let io =
            |e: std::io::Error| PyRuntimeError::new_err(format!("cannot make a socket pair: {e}"));
        let (reader, writer) = UnixStream::pair().map_err(io)?;
        reader.set_nonblocking(true).map_err(io)?;
        writer.set_nonblocking(true).map_err(io)?;
        Ok(Hub {
            inner: Arc::new(HubInner {
                ready: Mutex::new(Vec::new()),
                writer,
                woken: AtomicBool::new(false),
            }),
            reader,
        })
    }

    /// The socket to watch for readability.
    fn fileno(&self) -> i32 {
        self.reader.as_raw_fd()
    }

    /// Reports every queued outcome (on the event loop's thread).
    fn drain(&self, py: Python<'_>) {
        let mut buf = [0u8; 64];
        while matches!((&self.reader).read(&mut buf), Ok(n) if n > 0) {}
        // Cleared before the queue is taken: an outcome queued after the take writes anew.
        self.inner.woken.store(false, Ordering::SeqCst);
        let ready =
            std::mem::take(&mut *self.inner.ready.lock().unwrap_or_else(|p| p.into_inner()));
        for item in ready {
            item.deliver(py);
        }
    }
}

fn any<T: for<'py> IntoPyObject<'py>>(py: Python<'_>, v: T) -> PyResult<Py<PyAny>> {
    v.into_py_any(py)
}

/// `None` when released; the `NotHeldError` message otherwise.
fn released(py: Python<'_>, not_held: Option<String>) -> PyResult<Py<PyAny>> {
    match not_held {
        None => Ok(py.None()),
        Some(msg) => Err(crate::args::not_held(py, msg)),
    }
}

fn leader_event(py: Python<'_>, ev: baton::LeaderEvent) -> PyResult<Py<PyAny>> {
    match ev {
        baton::LeaderEvent::Leader(inner) => any(py, Leader { inner }),
        baton::LeaderEvent::NoLeader => Ok(py.None()),
    }
}

fn leader_opt(py: Python<'_>, l: Option<baton::Leader>) -> PyResult<Py<PyAny>> {
    match l {
        Some(inner) => any(py, Leader { inner }),
        None => Ok(py.None()),
    }
}

/// Native half of `baton.aio`'s short synchronous calls (the `Agent` methods, `close`): runs
/// `call()` on a pooled baton thread, attached to the interpreter (the synchronous methods
/// detach while they wait), then `done(ok, value)` as for every other call. Nothing to undo.
#[pyfunction]
pub(crate) fn _start_call(done: Py<PyAny>, call: Py<PyAny>) -> PyResult<Pending> {
    start(
        done,
        move |_| Ok(crate::attach_from_thread(|py| call.call0(py))),
        |_| {},
        |_, outcome| {
            outcome
                .unwrap_or_else(|| Err(PyRuntimeError::new_err("the interpreter is shutting down")))
        },
    )
}

/// `None` waits forever; a negative or non-finite timeout is refused.
fn timeout(t: Option<f64>) -> PyResult<Option<Duration>> {
    seconds("timeout", t)
}

#[pymethods]
impl Lock {
    /// Native half of `baton.aio.Lock.acquire`.
    #[pyo3(signature = (done, timeout=None))]
    fn _start_acquire(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
        let t = self::timeout(timeout)?;
        let (l, u) = (self.inner.clone(), self.inner.clone());
        start(
            done,
            move |c| l.acquire(t, Some(c)),
            move |held| {
                if held {
                    let _ = u.release();
                }
            },
            any,
        )
    }

    /// Native half of `baton.aio.Lock.release`.
    fn _start_release(&self, done: Py<PyAny>) -> PyResult<Pending> {
        let l = self.inner.clone();
        start(
            done,
            move |_| {
                if l.release()? {
                    return Ok(None);
                }
                Ok(Some(l.not_held_message()))
            },
            |_| {},
            released,
        )
    }

    /// Native half of `baton.aio.Lock.wait_lost`.
    #[pyo3(signature = (done, timeout=None))]
    fn _start_wait_lost(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
        let t = self::timeout(timeout)?;
        let l = self.inner.clone();
        start(
            done,
            move |c| l.wait_lost(t, Some(c)).map(|r| r.name()),
            |_| {},
            any,
        )
    }
}

#[pymethods]
impl Semaphore {
    /// Native half of `baton.aio.Semaphore.acquire`.
    #[pyo3(signature = (done, timeout=None))]
    fn _start_acquire(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
        let t = self::timeout(timeout)?;
        let (s, u) = (self.inner.clone(), self.inner.clone());
        start(
            done,
            move |c| s.acquire(t, Some(c)),
            move |held| {
                if held {
                    let _ = u.release();
                }
            },
            any,
        )
    }

    /// Native half of `baton.aio.Semaphore.release`.
    fn _start_release(&self, done: Py<PyAny>) -> PyResult<Pending> {
        let s = self.inner.clone();
        start(
            done,
            move |_| {
                if s.release()? {
                    return Ok(None);
                }
                Ok(Some(s.not_held_message()))
            },
            |_| {},
            released,
        )
    }

    /// Native half of `baton.aio.Semaphore.wait_lost`.
    #[pyo3(signature = (done, timeout=None))]
    fn _start_wait_lost(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
        let t = self::timeout(timeout)?;
        let s = self.inner.clone();
        start(
            done,
            move |c| s.wait_lost(t, Some(c)).map(|r| r.name()),
            |_| {},
            any,
        )
    }
}

#[pymethods]
impl Election {
    /// Native half of `baton.aio.Election.campaign`.
    #[pyo3(signature = (done, value, timeout=None))]
    fn _start_campaign(
        &self,
        done: Py<PyAny>,
        value: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Pending> {
        let value = value_bytes("value", value)?;
        let t = self::timeout(timeout)?;
        let (e, u) = (self.inner.clone(), self.inner.clone());
        start(
            done,
            move |c| e.campaign(&value, t, Some(c)),
            move |won| {
                if won {
                    let _ = u.resign();
                }
            },
            any,
        )
    }

    /// Native half of `baton.aio.Election.resign`.
    fn _start_resign(&self, done: Py<PyAny>) -> PyResult<Pending> {
        let e = self.inner.clone();
        start(done, move |_| e.resign(), |_| {}, any)
    }

    /// Native half of `baton.aio.Election.proclaim`.
    fn _start_proclaim(&self, done: Py<PyAny>, value: &Bound<'_, PyAny>) -> PyResult<Pending> {
        let value = value_bytes("value", value)?;
        let e = self.inner.clone();
        start(
            done,
            move |_| e.proclaim(&value),
            |_| {},
            |py, ()| Ok(py.None()),
        )
    }

    /// Native half of `baton.aio.Election.leader`.
    fn _start_leader(&self, done: Py<PyAny>) -> PyResult<Pending> {
        let e = self.inner.clone();
        start(done, move |_| e.leader(), |_| {}, leader_opt)
    }

    /// Native half of `baton.aio.Election.wait_lost`.
    #[pyo3(signature = (done, timeout=None))]
    fn _start_wait_lost(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
        let t = self::timeout(timeout)?;
        let e = self.inner.clone();
        start(
            done,
            move |c| e.wait_lost(t, Some(c)).map(|r| r.name()),
            |_| {},
            any,
        )
    }
}

#[pymethods]
impl Observer {
    /// Native half of `baton.aio`'s `async for` over `Election.observe()`.
    #[pyo3(signature = (done, timeout=None))]
    fn _start_next(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
        let t = self::timeout(timeout)?;
        let o = self.inner.clone();
        start(
            done,
            move |c| {
                let mut g = o.lock().unwrap_or_else(|p| p.into_inner());
                g.next(t, Some(c))
            },
            |_| {},
            leader_event,
        )
    }
}

fn session(py: Python<'_>, s: baton::Session) -> PyResult<Py<PyAny>> {
    any(py, Session::new(s))
}

fn kv_entry(py: Python<'_>, v: Option<baton::KvPair>) -> PyResult<Py<PyAny>> {
    match v {
        Some(p) => any(py, crate::recipes::KvEntry::new(p)),
        None => Ok(py.None()),
    }
}

fn kv_value(py: Python<'_>, v: Option<baton::KvPair>) -> PyResult<Py<PyAny>> {
    match v {
        Some(p) => Ok(PyBytes::new(py, p.value.as_deref().unwrap_or_default())
            .into_any()
            .unbind()),
        None => Ok(py.None()),
    }
}

fn kv_entries(py: Python<'_>, v: Vec<baton::KvPair>) -> PyResult<Py<PyAny>> {
    any(py, v.into_iter().map(KvEntry::new).collect::<Vec<_>>())
}

fn none(py: Python<'_>, _: ()) -> PyResult<Py<PyAny>> {
    Ok(py.None())
}

/// The native halves of `baton.aio.Client`'s requests: each runs on a baton thread, never on
/// the event loop nor in its default executor.
#[pymethods]
impl Client {
    fn _start_default_session(&self, done: Py<PyAny>) -> PyResult<Pending> {
        let c = (*self.inner).clone();
        start(done, move |_| c.default_session(), |_| {}, session)
    }

    fn _start_kv_get(&self, done: Py<PyAny>, key: &str) -> PyResult<Pending> {
        let (c, k) = ((*self.inner).clone(), key.to_string());
        start(done, move |_| c.kv().get(&k), |_| {}, kv_value)
    }

    fn _start_kv_get_entry(&self, done: Py<PyAny>, key: &str) -> PyResult<Pending> {
        let (c, k) = ((*self.inner).clone(), key.to_string());
        start(done, move |_| c.kv().get(&k), |_| {}, kv_entry)
    }

    #[pyo3(signature = (done, key, value, flags=0, cas=None))]
    fn _start_kv_put(
        &self,
        done: Py<PyAny>,
        key: &str,
        value: &Bound<'_, PyAny>,
        flags: u64,
        cas: Option<u64>,
    ) -> PyResult<Pending> {
        let v = value_bytes("value", value)?;
        let (c, k) = ((*self.inner).clone(), key.to_string());
        let options = baton::WriteOptions {
            flags,
            cas,
            ..Default::default()
        };
        start(
            done,
            move |_| c.kv().put_with(&k, &v, &options),
            |_| {},
            any,
        )
    }

    #[pyo3(signature = (done, key, cas=None))]
    fn _start_kv_delete(&self, done: Py<PyAny>, key: &str, cas: Option<u64>) -> PyResult<Pending> {
        let (c, k) = ((*self.inner).clone(), key.to_string());
        start(
            done,
            move |_| match cas {
                Some(index) => c.kv().delete_cas(&k, index),
                None => c.kv().delete(&k),
            },
            |_| {},
            any,
        )
    }

    fn _start_leader(&self, done: Py<PyAny>, key: &str) -> PyResult<Pending> {
        let (c, k) = ((*self.inner).clone(), key.to_string());
        start(done, move |_| c.leader(&k), |_| {}, leader_opt)
    }

    fn _start_check_sequencer(
        &self,
        done: Py<PyAny>,
        sequencer: PyRef<'_, Sequencer>,
    ) -> PyResult<Pending> {
        let (c, s) = ((*self.inner).clone(), sequencer.inner.clone());
        start(done, move |_| c.check_sequencer(&s), |_| {}, any)
    }

    fn _start_guarded_put(
        &self,
        done: Py<PyAny>,
        sequencer: PyRef<'_, Sequencer>,
        key: &str,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Pending> {
        let v = value_bytes("value", value)?;
        let (c, s, k) = (
            (*self.inner).clone(),
            sequencer.inner.clone(),
            key.to_string(),
        );
        start(
            done,
            move |_| {
                c.guarded_txn(&s, &[baton::KvOp::set(&k, &v, 0)])
                    .map(|_| ())
            },
            |_| {},
            none,
        )
    }

    fn _start_guarded_txn(
        &self,
        done: Py<PyAny>,
        sequencer: PyRef<'_, Sequencer>,
        ops: Vec<Bound<'_, PyAny>>,
    ) -> PyResult<Pending> {
        let ops = ops
            .iter()
            .enumerate()
            .map(|(i, op)| txn_op(i, op))
            .collect::<PyResult<Vec<_>>>()?;
        let (c, s) = ((*self.inner).clone(), sequencer.inner.clone());
        start(done, move |_| c.guarded_txn(&s, &ops), |_| {}, kv_entries)
    }

    /// Native half of `baton.aio.Client.create_session` (keywords as `create_session`'s).
    #[pyo3(signature = (done, *, name=None, ttl=crate::args::DEFAULT_TTL, lock_delay=None, behavior="release", node=None, node_checks=None, service_checks=None))]
    #[allow(clippy::too_many_arguments)]
    fn _start_create_session(
        &self,
        py: Python<'_>,
        done: Py<PyAny>,
        name: Option<String>,
        ttl: Option<f64>,
        lock_delay: Option<f64>,
        behavior: &str,
        node: Option<String>,
        node_checks: Option<Vec<String>>,
        service_checks: Option<Vec<String>>,
    ) -> PyResult<Pending> {
        let o = crate::args::SessionArgs {
            in_dict: false,
            name,
            ttl,
            lock_delay,
            behavior: behavior.to_string(),
            node,
            node_checks,
            service_checks,
        }
        .options(py)?;
        let c = (*self.inner).clone();
        start(done, move |_| c.create_session(&o), |_| {}, session)
    }

    fn _start_adopt_session(&self, done: Py<PyAny>, session_id: String) -> PyResult<Pending> {
        let c = (*self.inner).clone();
        start(done, move |_| c.adopt_session(&session_id), |_| {}, session)
    }
}

#[pymethods]
impl Session {
    /// Native half of `baton.aio`'s `wait_session_lost`.
    #[pyo3(signature = (done, timeout=None))]
    fn _start_wait_lost(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
        let t = self::timeout(timeout)?;
        let s = self.inner.clone();
        start(
            done,
            move |c| s.wait_lost(t, Some(c)).map(|r| r.name()),
            |_| {},
            any,
        )
    }

    /// Native half of `baton.aio`'s `destroy_session`.
    fn _start_destroy(&self, done: Py<PyAny>) -> PyResult<Pending> {
        let s = self.inner.clone();
        start(done, move |_| s.destroy(), |_| {}, none)
    }
}
