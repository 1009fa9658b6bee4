//! The native half of `baton.aio`: start a core call — a short blocking one on a pooled
//! baton thread, a waiting one as a driven future that holds no thread (`waits.rs`) — and
//! report its outcome to a Python callback, with a handle to cancel it.
//!
//! `baton/aio.py` turns the callback into an asyncio future (through
//! `loop.call_soon_threadsafe`, or the loop's [`Hub`]), so waits never occupy the event loop
//! nor the default executor's few threads. Cancelling the awaiting task cancels the core
//! call, and the core then gives back what it took meanwhile. An acquire's success that
//! nobody will take — the cancel came after the core call returned, the task was cancelled
//! with the outcome on its way, the event loop is gone — is given back here, in one place
//! for every holding ([`Unclaimed`], through `baton::Hold::abandon`). The `_start_*` methods
//! are all made by one macro ([`starts!`]).

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use baton::pool::{Ticket, Turns};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3::IntoPyObjectExt;

use crate::args::value_bytes;
use crate::recipes::{
    txn_op, Election, KvEntry, Leader, Lock, MultiLock, RwLock, Semaphore, Sequencer,
};
use crate::{seconds, to_py, Client, Session};

/// A core call running on a baton thread (see `baton.aio`). Thread-safe.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Pending {
    cancel: baton::CancelToken,
    unclaimed: Unclaimed,
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

    /// Gives back what the call acquired, which nobody will take (its task was cancelled
    /// after the call succeeded): released on a baton thread, which then calls
    /// `finished()`. False, and `finished` is not called, when there is nothing to give back.
    fn _give_back(&self, finished: Py<PyAny>) -> bool {
        self.unclaimed.give_back_then(move || {
            let _ = crate::attach_from_thread(|py| {
                if let Err(err) = finished.call0(py) {
                    err.write_unraisable(py, Some(finished.bind(py)));
                }
            });
        })
    }
}

/// A holding, for giving it back: [`baton::Hold::abandon`] behind a type every recipe shares.
pub(crate) trait Abandon: Send + Sync {
    fn abandon(&self);
}

impl<H: baton::Hold> Abandon for H {
    fn abandon(&self) {
        baton::Hold::abandon(self)
    }
}

/// What an acquire's success holds until someone takes it: the one place `baton.aio` gives
/// anything back. Armed when the core call returned True, given back at most once: on the
/// call's thread when the cancel came after the core call returned, by
/// [`Pending::_give_back`] when `aio.py` finds the task cancelled with the outcome on its way
/// (or taken by nobody), when the outcome is dropped undelivered (its event loop is gone).
#[derive(Clone, Default)]
pub(crate) struct Unclaimed(Arc<Mutex<Option<Arc<dyn Abandon>>>>);

impl Unclaimed {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Arc<dyn Abandon>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn arm(&self, hold: Arc<dyn Abandon>) {
        *self.slot() = Some(hold);
    }

    /// Gives it back now (requests: on a baton thread only).
    fn give_back(&self) {
        let hold = self.slot().take();
        if let Some(hold) = hold {
            hold.abandon();
        }
    }

    /// Gives it back on a pooled baton thread, then runs `then` there; whether there was
    /// anything to give back (and a thread to do it: without one the holding is left to its
    /// session, and `then` does not run).
    fn give_back_then(&self, then: impl FnOnce() + Send + 'static) -> bool {
        let Some(hold) = self.slot().take() else {
            return false;
        };
        CALLS
            .run(move || {
                hold.abandon();
                then
            })
            .is_ok()
    }
}

pub(crate) type Convert<T> = fn(Python<'_>, T) -> PyResult<Py<PyAny>>;

/// The threads `baton.aio`'s calls that do not wait run on (at most
/// [`baton::pool::CALL_THREADS`]; the waits are driven futures, see `waits.rs`).
static CALLS: baton::pool::Pool =
    baton::pool::Pool::bounded("baton-py-aio", baton::pool::CALL_THREADS);

/// The threads of the rare `baton.aio` acquire that goes on on a thread (see [`start_holding`]).
static WAITS: baton::pool::Pool = baton::pool::Pool::new("baton-py-aio-wait");

/// Ends the idle threads (the `atexit` hook).
pub(crate) fn stop_pool(deadline: std::time::Instant) {
    CALLS.stop(deadline);
    WAITS.stop(deadline);
}

/// Ends the idle threads of `baton.aio`, waiting for them at most 100 ms: called once a
/// client's `close()` has returned, so no baton thread outlives it (a later call of another
/// client starts a thread again).
#[pyfunction]
pub(crate) fn _end_idle_threads(py: Python<'_>) {
    py.detach(|| {
        let deadline = std::time::Instant::now() + Duration::from_millis(100);
        CALLS.stop(deadline);
        WAITS.stop(deadline);
    });
}

/// Where a call's outcome goes: `done(ok, value)` called on the baton thread (attached to
/// the interpreter), or, for `(hub, weakref_to_done)`, `done` called on the event loop's
/// thread by [`Hub::drain`]. The reference is weak so that a pending call does not keep its
/// event loop alive: a loop closed and dropped with the call still pending frees `done`, and
/// the outcome is then given back rather than reported.
enum Target {
    Thread(Py<PyAny>),
    Loop(Weak<HubInner>, Arc<Turns>, Py<PyAny>),
}

/// Runs `call` on a pooled baton thread (see `pool.rs`), then reports `done(True, value)` or
/// `done(False, exception)` as the target says (`done`, or `(hub, done)`). If the token was
/// cancelled by the time `call` succeeded, `done` gets a `CancelledError` (and an acquire's
/// success is given back). An exception raised by `done` goes to `sys.unraisablehook`.
pub(crate) fn start<T: Send + 'static>(
    done: Py<PyAny>,
    call: impl FnOnce(&baton::CancelToken) -> baton::Result<T> + Send + 'static,
    convert: Convert<T>,
) -> PyResult<Pending> {
    launch(&CALLS, done, move |c, _| call(c), convert)
}

/// [`start`] for an acquire of `hold` that goes on on a thread (a warm acquire whose request
/// may have been applied, see `warm.rs`): a success is armed in the call's [`Unclaimed`]. It
/// may wait as long as its timeout: it runs on a pool of its own, unbounded (such waits are
/// rare), never in the way of the bounded calls.
pub(crate) fn start_holding<H: baton::Hold + 'static>(
    done: Py<PyAny>,
    hold: Arc<H>,
    call: impl FnOnce(&baton::CancelToken) -> baton::Result<bool> + Send + 'static,
    convert: Convert<bool>,
) -> PyResult<Pending> {
    launch(
        &WAITS,
        done,
        move |c, unclaimed| {
            let held = call(c)?;
            if held {
                unclaimed.arm(hold);
            }
            Ok(held)
        },
        convert,
    )
}

/// Where `done` says outcomes go (see [`Target`]).
fn target_of(done: &Py<PyAny>) -> PyResult<Target> {
    Python::attach(|py| -> PyResult<Target> {
        let d = done.bind(py);
        if let Ok((hub, callback)) = d.extract::<(Bound<'_, Hub>, Bound<'_, PyAny>)>() {
            if !callback.is_instance_of::<pyo3::types::PyWeakrefReference>() {
                return Err(PyValueError::new_err(
                    "with a hub, done must be a weakref.ref to a callable",
                ));
            }
            let inner = &hub.get().inner;
            return Ok(Target::Loop(
                Arc::downgrade(inner),
                inner.turns.clone(),
                callback.unbind(),
            ));
        }
        if !d.is_callable() {
            return Err(PyValueError::new_err("done must be callable"));
        }
        Ok(Target::Thread(done.clone_ref(py)))
    })
}

/// The outcome of a call whose token was cancelled after the core call returned (before, it
/// returns `Cancelled` with nothing held): the task that awaits it is gone, and what the call
/// took is given back (`now`: on this thread, a baton thread that may make requests;
/// otherwise on a pooled one).
fn unless_cancelled<T>(
    outcome: baton::Result<T>,
    token: &baton::CancelToken,
    unclaimed: &Unclaimed,
    now: bool,
) -> baton::Result<T> {
    match outcome {
        Ok(_) if token.is_cancelled() => {
            if now {
                unclaimed.give_back();
            } else {
                unclaimed.give_back_then(|| ());
            }
            Err(baton::Error::new(
                baton::ErrorKind::Cancelled,
                "cancelled while the call finished",
            ))
        }
        other => other,
    }
}

/// Hands an outcome to its event loop's hub (never blocks: a byte written to a socket).
fn to_loop<T: Send + 'static>(
    hub: Weak<HubInner>,
    ticket: Ticket,
    outcome: baton::Result<T>,
    unclaimed: Unclaimed,
    done: Py<PyAny>,
    convert: Convert<T>,
) {
    let settled = Box::new(Settled {
        outcome: Some(outcome),
        unclaimed,
        done,
        convert,
    });
    // With the hub gone, dropping `settled` gives back.
    if let Some(hub) = hub.upgrade() {
        hub.push(ticket, settled);
    }
}

fn launch<T: Send + 'static>(
    pool: &'static baton::pool::Pool,
    done: Py<PyAny>,
    call: impl FnOnce(&baton::CancelToken, &Unclaimed) -> baton::Result<T> + Send + 'static,
    convert: Convert<T>,
) -> PyResult<Pending> {
    let target = target_of(&done)?;
    let cancel = baton::CancelToken::new();
    let unclaimed = Unclaimed::default();
    let (token, mine) = (cancel.clone(), unclaimed.clone());
    let work = move || {
        let outcome = unless_cancelled(call(&token, &mine), &token, &mine, true);
        (outcome, mine)
    };
    let started = match target {
        Target::Thread(done) => pool.run(move || {
            let (outcome, _) = work();
            move || {
                let _ = crate::attach_from_thread(|py| report(py, &done, outcome, convert));
            }
        }),
        // The thread stays bound to the loop until the turn that takes the outcome is over
        // (see `pool.rs`): a call the awaiting task makes next finds it awake.
        Target::Loop(hub, turns, done) => pool.run_for(&turns, move || {
            let (outcome, mine) = work();
            move |ticket| to_loop(hub, ticket, outcome, mine, done, convert)
        }),
    };
    started.map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread: {e}")))?;
    Ok(Pending { cancel, unclaimed })
}

/// A call that may wait long (an acquire, a wait for a loss), as a future of `baton::aio`
/// driven to its end with no thread of its own (`baton::drive`): `make(token, unclaimed)`
/// builds it; the outcome goes where `done` says, as [`launch`]'s does. The future is first
/// polled here, on the caller's thread (a poll never blocks), then by the baton thread that
/// wakes it; the outcome is handed over without the interpreter (to the loop's hub), or on a
/// pooled thread that takes it (a `done` without a hub).
pub(crate) fn drive<T: Send + 'static, F>(
    done: Py<PyAny>,
    make: impl FnOnce(&baton::CancelToken, &Unclaimed) -> F,
    convert: Convert<T>,
) -> PyResult<Pending>
where
    F: std::future::Future<Output = baton::Result<T>> + Send + 'static,
{
    let target = target_of(&done)?;
    let cancel = baton::CancelToken::new();
    let unclaimed = Unclaimed::default();
    let future = make(&cancel, &unclaimed);
    let (token, mine) = (cancel.clone(), unclaimed.clone());
    // The first poll runs here: let go of the interpreter while it does (a wake on another
    // thread may settle the call at once, and a `done` without a hub takes the interpreter).
    Python::attach(|py| {
        py.detach(|| {
            baton::drive::drive(future, move |outcome| {
                let outcome = unless_cancelled(outcome, &token, &mine, false);
                match target {
                    Target::Thread(done) => {
                        let ran = CALLS.run(move || {
                            move || {
                                let _ = crate::attach_from_thread(|py| {
                                    report(py, &done, outcome, convert)
                                });
                            }
                        });
                        if let Err(e) = ran {
                            log::error!("baton.aio: cannot start a thread to report: {e}");
                        }
                    }
                    Target::Loop(hub, turns, done) => {
                        to_loop(hub, turns.ticket(), outcome, mine, done, convert)
                    }
                }
            })
        })
    });
    Ok(Pending { cancel, unclaimed })
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
struct Settled<T: Send + 'static> {
    outcome: Option<baton::Result<T>>,
    unclaimed: Unclaimed,
    done: Py<PyAny>,
    convert: Convert<T>,
}

/// An outcome the event loop's thread reports.
trait Deliver: Send {
    fn deliver(self: Box<Self>, py: Python<'_>);
}

impl<T: Send + 'static> Deliver for Settled<T> {
    fn deliver(mut self: Box<Self>, py: Python<'_>) {
        // `done` is a weak reference: dead, nobody awaits, and dropping `self` gives back.
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

impl<T: Send + 'static> Drop for Settled<T> {
    /// Never reported (the loop is gone): a success is given back, on a baton thread (never
    /// while holding the interpreter). A failure to start a thread leaves the holding to its
    /// session.
    fn drop(&mut self) {
        if let Some(Ok(_)) = self.outcome.take() {
            self.unclaimed.give_back_then(|| ());
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
    ready: Mutex<Vec<(Ticket, Box<dyn Deliver>)>>,
    writer: UnixStream,
    /// A byte is on its way (or unread): no other until the loop drains.
    woken: AtomicBool,
    /// The loop's turns (see `pool.rs`): outcomes taken by `drain`, turns over by `turn_over`.
    turns: Arc<Turns>,
}

impl HubInner {
    fn push(&self, ticket: Ticket, item: Box<dyn Deliver>) {
        self.ready
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((ticket, item));
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
                turns: Turns::new(),
            }),
            reader,
        })
    }

    /// The socket to watch for readability.
    fn fileno(&self) -> i32 {
        self.reader.as_raw_fd()
    }

    /// Reports every queued outcome (on the event loop's thread). True when the loop is to
    /// call `turn_over()` once the tasks these outcomes woke have run (`baton.aio` schedules
    /// it with `call_soon`, behind their steps).
    fn drain(&self, py: Python<'_>) -> bool {
        let mut buf = [0u8; 64];
        while matches!((&self.reader).read(&mut buf), Ok(n) if n > 0) {}
        // Cleared before the queue is taken: an outcome queued after the take writes anew.
        self.inner.woken.store(false, Ordering::SeqCst);
        let ready =
            std::mem::take(&mut *self.inner.ready.lock().unwrap_or_else(|p| p.into_inner()));
        let mut due = false;
        for (ticket, item) in ready {
            item.deliver(py);
            due |= self.inner.turns.took(ticket);
        }
        due
    }

    /// The loop's turn that took the outcomes drained so far is over: the tasks they woke have
    /// made their next calls (see `pool.rs`).
    fn turn_over(&self) {
        self.inner.turns.turn_over();
    }

    /// Whether this loop took an outcome in a turn that is not over yet: a call made now goes
    /// to the baton thread that delivered it, still awake for it (`baton.aio` polls the loop
    /// only for such calls).
    fn in_turn(&self) -> bool {
        self.inner.turns.in_turn()
    }
}

pub(crate) fn any<T: for<'py> IntoPyObject<'py>>(py: Python<'_>, v: T) -> PyResult<Py<PyAny>> {
    v.into_py_any(py)
}

/// `None` when released; the `NotHeldError` message otherwise.
pub(crate) fn released(py: Python<'_>, not_held: Option<String>) -> PyResult<Py<PyAny>> {
    match not_held {
        None => Ok(py.None()),
        Some(msg) => Err(crate::args::not_held(py, msg)),
    }
}

pub(crate) fn leader_event(py: Python<'_>, ev: baton::LeaderEvent) -> PyResult<Py<PyAny>> {
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
/// detach while they wait), then `done(ok, value)` as for every other call. Nothing to give
/// back.
#[pyfunction]
pub(crate) fn _start_call(done: Py<PyAny>, call: Py<PyAny>) -> PyResult<Pending> {
    start(
        done,
        move |_| Ok(crate::attach_from_thread(|py| call.call0(py))),
        |_, outcome| {
            outcome
                .unwrap_or_else(|| Err(PyRuntimeError::new_err("the interpreter is shutting down")))
        },
    )
}

/// `None` waits forever; a negative or non-finite timeout is refused.
pub(crate) fn timeout(t: Option<f64>) -> PyResult<Option<Duration>> {
    seconds("timeout", t)
}

/// A release for `baton.aio`: `None` when released, the `NotHeldError` message otherwise.
fn release<H: baton::Hold>(hold: &H) -> baton::Result<Option<String>> {
    Ok((!hold.release()?).then(|| hold.not_held_message()))
}

/// Makes the native halves of `baton.aio`'s calls, all of one shape. For each
/// `fn _start_x(&self, args) -> convert [name = value, ...] |token| call;` it makes a method
/// `_start_x(done, args)` that binds the names (errors raise at once), runs `call` on a baton
/// thread ([`start`]) and reports `convert(outcome)` to `done`. `impl A, B { ... }` gives A
/// and B the same methods.
macro_rules! starts {
    ($(impl $($class:ident),+ { $($methods:tt)* })*) => {
        $(starts!(@classes [$($class)+] { $($methods)* });)*
    };
    (@classes [$($class:ident)+] $methods:tt) => {
        $(starts!(@class $class $methods);)+
    };
    (@class $class:ident {$(
        $(#[$($attr:tt)*])*
        fn $name:ident(&$s:ident $($params:tt)*) -> $convert:ident
            [$($var:ident = $val:expr),* $(,)?] |$c:pat_param| $call:expr;
    )*}) => {
        #[pymethods]
        impl $class {$(
            $(#[$($attr)*])*
            fn $name(&$s, done: Py<PyAny> $($params)*) -> PyResult<Pending> {
                $(let $var = $val;)*
                start(done, move |$c: &baton::CancelToken| $call, $convert)
            }
        )*}
    };
}

starts! {
    impl Lock, Semaphore, RwLock, MultiLock {
        /// Native half of `baton.aio.Lock.release` (and `Semaphore`'s, `RwLock`'s,
        /// `MultiLock`'s).
        fn _start_release(&self) -> released [h = self.inner.hold()] |_| release(&*h);
    }

    impl Election {
        /// Native half of `baton.aio.Election.resign`.
        fn _start_resign(&self) -> any [e = self.inner.hold()] |_| e.resign();

        /// Native half of `baton.aio.Election.proclaim`.
        fn _start_proclaim(&self, value: &Bound<'_, PyAny>) -> none
            [v = value_bytes("value", value)?, e = self.inner.hold()] |_| e.proclaim(&v);

        /// Native half of `baton.aio.Election.leader`.
        fn _start_leader(&self) -> leader_opt [e = self.inner.hold()] |_| e.leader();
    }

    // The native halves of `baton.aio.Client`'s requests: each runs on a baton thread, never
    // on the event loop nor in its default executor.
    impl Client {
        fn _start_default_session(&self) -> session
            [c = (*self.inner).clone()] |_| c.default_session().map(|s| (s, c.downgrade()));

        fn _start_kv_get(&self, key: &str) -> kv_value
            [c = (*self.inner).clone(), k = key.to_string()] |_| c.kv().get(&k);

        fn _start_kv_get_entry(&self, key: &str) -> kv_entry
            [c = (*self.inner).clone(), k = key.to_string()] |_| c.kv().get(&k);

        #[pyo3(signature = (done, key, value, flags=0, cas=None))]
        fn _start_kv_put(
            &self,
            key: &str,
            value: &Bound<'_, PyAny>,
            flags: u64,
            cas: Option<u64>,
        ) -> any [
            v = value_bytes("value", value)?,
            c = (*self.inner).clone(),
            k = key.to_string(),
            options = baton::WriteOptions { flags, cas, ..Default::default() },
        ] |_| c.kv().put_with(&k, &v, &options);

        #[pyo3(signature = (done, key, cas=None))]
        fn _start_kv_delete(&self, key: &str, cas: Option<u64>) -> any
            [c = (*self.inner).clone(), k = key.to_string()]
            |_| match cas {
                Some(index) => c.kv().delete_cas(&k, index),
                None => c.kv().delete(&k),
            };

        fn _start_leader(&self, key: &str) -> leader_opt
            [c = (*self.inner).clone(), k = key.to_string()] |_| c.leader(&k);

        fn _start_check_sequencer(&self, sequencer: PyRef<'_, Sequencer>) -> any
            [c = (*self.inner).clone(), s = sequencer.inner.clone()] |_| c.check_sequencer(&s);

        fn _start_guarded_put(
            &self,
            sequencer: PyRef<'_, Sequencer>,
            key: &str,
            value: &Bound<'_, PyAny>,
        ) -> none [
            v = value_bytes("value", value)?,
            c = (*self.inner).clone(),
            s = sequencer.inner.clone(),
            k = key.to_string(),
        ] |_| c.guarded_txn(&s, &[baton::KvOp::set(&k, &v, 0)]).map(|_| ());

        fn _start_guarded_txn(&self, sequencer: PyRef<'_, Sequencer>, ops: Vec<Bound<'_, PyAny>>)
            -> kv_entries [
            ops = ops
                .iter()
                .enumerate()
                .map(|(i, op)| txn_op(i, op))
                .collect::<PyResult<Vec<_>>>()?,
            c = (*self.inner).clone(),
            s = sequencer.inner.clone(),
        ] |_| c.guarded_txn(&s, &ops);

        /// Native half of `baton.aio.Client.create_session` (keywords as `create_session`'s).
        #[pyo3(signature = (done, *, name=None, ttl=crate::args::DEFAULT_TTL, lock_delay=None, behavior="release", node=None, node_checks=None, service_checks=None, **unknown))]
        #[allow(clippy::too_many_arguments)]
        fn _start_create_session(
            &self,
            py: Python<'_>,
            name: Option<String>,
            ttl: Option<f64>,
            lock_delay: Option<f64>,
            behavior: &str,
            node: Option<String>,
            node_checks: Option<Vec<String>>,
            service_checks: Option<Vec<String>>,
            unknown: Option<&Bound<'_, pyo3::types::PyDict>>,
        ) -> session [
            o = {
                crate::args::refuse_unknown(
                    "create_session",
                    unknown,
                    &crate::args::SessionArgs::KEYS,
                )?;
                crate::args::SessionArgs {
                    in_dict: false,
                    name,
                    ttl,
                    lock_delay,
                    behavior: behavior.to_string(),
                    node,
                    node_checks,
                    service_checks,
                }
                .options(py)?
            },
            c = (*self.inner).clone(),
        ] |_| c.create_session(&o).map(|s| (s, c.downgrade()));

        fn _start_adopt_session(&self, session_id: String) -> session
            [c = (*self.inner).clone()] |_| c.adopt_session(&session_id).map(|s| (s, c.downgrade()));
    }

    impl Session {
        /// Native half of `baton.aio`'s `destroy_session`.
        fn _start_destroy(&self) -> none [s = self.inner.clone()] |_| s.destroy();
    }
}

fn session(
    py: Python<'_>,
    (s, client): (baton::Session, baton::WeakClient),
) -> PyResult<Py<PyAny>> {
    any(py, Session::new(s, client))
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
