//! The start of `baton.aio`'s warm lock calls in one native step (`Lock._aio_acquire`,
//! `_aio_release`): find the running loop and its hub, make the warm call, find the loop's
//! registration of the call's connection, make the future, set the deadline and write the
//! request. `baton.aio`'s `Lock.acquire` and `release` then await the future
//! (`_loop._warm_outcome`).
//!
//! Why native: done in Python these were four functions per request on the path from one
//! answer to the next request (the loop and hub lookups, the warm call's driver, the future
//! and the deadline); native, an asyncio lock cycle went from 180.5k to 175.8k instructions
//! (`make bench-instructions`). What happens seldom stays in Python: a connection the loop has
//! not registered yet (`_loop._warm` registers it), and the hub of a loop seen for the first
//! time (`_loop._hub`).

use std::cell::RefCell;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyWeakrefReference};

use crate::loop_conn::LoopConn;
use crate::warm::WarmCall;

/// What `_aio_acquire` / `_aio_release` return: `(fut, call, conn, begun)`.
///
/// - All None: no warm call (the loop has no hub, or the lock cannot make one): the call
///   goes the cold way, on a baton thread.
/// - `call` alone: a warm call on a connection this loop has not registered yet:
///   `_loop._warm` registers it and drives the call.
/// - All set: the call was started on `conn` at loop time `begun`; `fut` gets `(state,
///   value)` (`LoopConn.start`).
pub(crate) type Started<'py> = (
    Option<Bound<'py, PyAny>>,
    Option<Bound<'py, WarmCall>>,
    Option<Bound<'py, LoopConn>>,
    f64,
);

/// A loop and its hub (None: it has none), both weakly.
type LoopAndHub = (Py<PyWeakrefReference>, Option<Py<PyWeakrefReference>>);

thread_local! {
    /// The loop this thread last started a warm call on, and its hub: no loop or hub is kept
    /// alive here. A thread runs one loop at a time.
    static LAST_HUB: RefCell<Option<LoopAndHub>> = const { RefCell::new(None) };
}

/// The running loop (`asyncio.get_running_loop()`: a RuntimeError outside one).
fn running_loop(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    static GET: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    GET.get_or_try_init(py, || -> PyResult<_> {
        Ok(py.import("asyncio")?.getattr("get_running_loop")?.unbind())
    })?
    .bind(py)
    .call0()
}

/// `loop_`'s hub (`_loop._hub`), or None when it has none.
fn loop_hub<'py>(loop_: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = loop_.py();
    let cached = LAST_HUB.with_borrow(|last| {
        let (loop_ref, hub_ref) = last.as_ref()?;
        if !loop_ref.bind(py).upgrade().is_some_and(|l| l.is(loop_)) {
            return None;
        }
        match hub_ref {
            None => Some(None),
            // A hub that is gone is looked up again.
            Some(h) => h.bind(py).upgrade().map(Some),
        }
    });
    if let Some(hub) = cached {
        return Ok(hub);
    }
    static HUB: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let hub = HUB
        .get_or_try_init(py, || -> PyResult<_> {
            Ok(py.import("consul_baton._loop")?.getattr("_hub")?.unbind())
        })?
        .bind(py)
        .call1((loop_,))?;
    let hub = (!hub.is_none()).then_some(hub);
    let loop_ref = PyWeakrefReference::new(loop_)?.unbind();
    let hub_ref = match &hub {
        Some(h) => Some(PyWeakrefReference::new(h)?.unbind()),
        None => None,
    };
    LAST_HUB.with_borrow_mut(|last| *last = Some((loop_ref, hub_ref)));
    Ok(hub)
}

/// Starts the warm call `make` makes, if there is one, on the running loop (see `Started`).
/// `timeout`: the caller's, in seconds (None: none), already checked.
pub(crate) fn start<'py>(
    py: Python<'py>,
    make: impl FnOnce() -> Option<WarmCall>,
    timeout: Option<f64>,
) -> PyResult<Started<'py>> {
    let loop_ = running_loop(py)?;
    let Some(hub) = loop_hub(&loop_)? else {
        return Ok((None, None, None, 0.0));
    };
    let Some(call) = make() else {
        return Ok((None, None, None, 0.0));
    };
    let call = Bound::new(py, call)?;
    let conns = hub.getattr(intern!(py, "conns"))?.cast_into::<PyDict>()?;
    let conn = match conns.get_item(call.get().conn_id())? {
        Some(conn_ref) => conn_ref.call0()?.cast_into::<LoopConn>().ok(),
        None => None,
    };
    let Some(conn) = conn else {
        return Ok((None, Some(call), None, 0.0));
    };
    let (fut, begun) = begin(&loop_, &hub, &call, &conn, timeout)?;
    Ok((Some(fut), Some(call), Some(conn), begun))
}

/// Starts warm `call` on `conn`, `loop_`'s registration of its connection (`hub` is the
/// loop's): makes its future, sets its deadline (the hub's timer armed if it is the earliest)
/// and writes the request. Returns the future and the loop time it began at. Also
/// `_native._warm_begin`, for `_loop._warm` once it has registered the connection.
#[pyfunction(name = "_warm_begin")]
#[pyo3(signature = (loop_, hub, call, conn, timeout=None))]
pub(crate) fn begin<'py>(
    loop_: &Bound<'py, PyAny>,
    hub: &Bound<'py, PyAny>,
    call: &Bound<'py, WarmCall>,
    conn: &Bound<'py, LoopConn>,
    timeout: Option<f64>,
) -> PyResult<(Bound<'py, PyAny>, f64)> {
    let py = loop_.py();
    let fut = loop_.call_method0(intern!(py, "create_future"))?;
    let mut limit = call.get().time_limit();
    if let Some(t) = timeout {
        if 0.0 < t && t < limit {
            limit = t;
        }
    }
    let begun: f64 = loop_.call_method0(intern!(py, "time"))?.extract()?;
    let deadline = begun + limit;
    let timer_at: f64 = hub.getattr(intern!(py, "timer_at"))?.extract()?;
    if deadline < timer_at {
        hub.call_method1(intern!(py, "_arm"), (deadline,))?;
    }
    LoopConn::start(conn, call.clone().unbind(), fut.clone().unbind(), deadline)?;
    Ok((fut, begun))
}
