//! `Lock`, `Semaphore`, `Election`, `Sequencer` for Python, shaped like `threading`.
//!
//! A blocking call runs the core call on the calling thread, detached from the interpreter.
//! On the main thread it is wired to signals (see `interrupt.rs`): Ctrl-C cancels the core
//! call (the core then gives back what it took meanwhile), a success that came before the
//! signal is given back (`Hold::abandon`), and `KeyboardInterrupt` is raised: nothing is left
//! held. Where that cannot be done (a `cancel=` token on the main thread, or an
//! event loop owning the wakeup fd) the core call runs on a pooled thread while the caller
//! waits detached in 100 ms slices and checks for signals in between.

mod barrier;
mod counter;
mod election;
mod holding;
mod kv;
mod leader_task;
mod lock;
mod membership;
mod rwlock;
mod semaphore;

use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::interrupt::{is_main_thread, Interruptible};
use crate::{float_repr, seconds, to_py, SLICE};

pub(crate) use barrier::{Barrier, DoubleBarrier};
pub(crate) use counter::{Counter, CounterWatch};
pub(crate) use election::{Election, Leader, Observer};
pub(crate) use kv::{txn_op, KvEntry};
pub(crate) use leader_task::LeaderTask;
pub(crate) use lock::Lock;
pub(crate) use membership::{Group, Member, MemberInfo, MembersWatch, MembershipEvent};
pub(crate) use rwlock::{MultiLock, RwLock};
pub(crate) use semaphore::Semaphore;

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

pub(super) fn cancelled_by_user(py: Python<'_>) -> PyErr {
    to_py(
        py,
        baton::Error::new(
            baton::ErrorKind::Cancelled,
            "cancelled through its CancelToken (what it acquired meanwhile was released)",
        ),
    )
}

/// Runs the core call `call` with a cancel token, detached from the interpreter, so that
/// Ctrl-C (any signal whose Python handler raises) interrupts it: the token is cancelled and
/// the handler's exception propagates. If the handler returns instead, the call is made again
/// (so `call` computes its timeouts from a deadline; see [`deadline`]). `user` (a `cancel=`
/// token) cancelled from another thread ends the call with `baton.CancelledError`. For calls
/// whose success holds nothing; an acquire goes through [`acquiring`].
pub(crate) fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    user: Option<baton::CancelToken>,
    call: impl FnMut(&baton::CancelToken) -> baton::Result<T> + Send + 'static,
) -> PyResult<T> {
    run(py, user, call, drop)
}

/// [`interruptible`] for an acquire of `hold`: a success that cannot be delivered (a signal
/// handler raised after the core call returned, or the user's token fired while the result
/// was on its way from the pooled thread) is given back with [`baton::Hold::abandon`] — the
/// one place the synchronous binding gives anything back. A cancel that reaches the core call
/// before it returns needs nothing here: the core then returns `Cancelled` with nothing held.
pub(crate) fn acquiring<H: baton::Hold + 'static>(
    py: Python<'_>,
    user: Option<baton::CancelToken>,
    hold: Arc<H>,
    mut call: impl FnMut(&H, &baton::CancelToken) -> baton::Result<bool> + Send + 'static,
) -> PyResult<bool> {
    let h = Arc::clone(&hold);
    run(
        py,
        user,
        move |c| call(&h, c),
        move |held| {
            if held {
                hold.abandon();
            }
        },
    )
}

/// [`interruptible`], with `unclaimed` given a success nobody will take (run detached).
fn run<T: Send + 'static>(
    py: Python<'_>,
    user: Option<baton::CancelToken>,
    mut call: impl FnMut(&baton::CancelToken) -> baton::Result<T> + Send + 'static,
    unclaimed: impl FnOnce(T) + Send + 'static,
) -> PyResult<T> {
    if !is_main_thread(py) {
        // No signal handler runs on this thread: only the user's token can end the call, and
        // the core call gets it, so a cancel before it returns leaves nothing held.
        let token = user.unwrap_or_default();
        return py.detach(|| call(&token)).map_err(|e| to_py(py, e));
    }
    if user.is_none() {
        while let Some(wired) = Interruptible::begin(py)? {
            let token = wired.token().clone();
            let r = py.detach(|| call(&token));
            drop(wired);
            if token.is_cancelled() {
                // A signal came: its handler runs now.
                if let Err(raised) = py.check_signals() {
                    // The signal came after the core call returned (else it returned
                    // `Cancelled`): a success nobody takes. Given back detached (requests, logs).
                    if let Ok(v) = r {
                        py.detach(|| unclaimed(v));
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
    sliced(py, user, call, unclaimed)
}

/// The fallback of [`interruptible`]: `call` on a pooled thread, the caller waiting detached in
/// [`SLICE`]s and checking for signals in between. The core call gets a token of its own,
/// cancelled when the user's fires or a signal handler raises; a success that raced either
/// (returned before the relay reached the core) goes to `unclaimed`.
fn sliced<T: Send + 'static>(
    py: Python<'_>,
    user: Option<baton::CancelToken>,
    mut call: impl FnMut(&baton::CancelToken) -> baton::Result<T> + Send + 'static,
    unclaimed: impl FnOnce(T) + Send + 'static,
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
                py.detach(|| unclaimed(v));
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
                    unclaimed(v);
                }
            });
            return Err(interrupt);
        }
    }
}

/// `threading`-style (blocking, timeout) → core timeout (`None` = forever). `timeout=None`
/// means the same as -1: no limit (as everywhere else in baton).
pub(super) fn acquire_timeout(blocking: bool, timeout: Option<f64>) -> PyResult<Option<Duration>> {
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
