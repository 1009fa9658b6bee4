//! `consul_baton._native`: the Python face of the baton core. Thin on purpose: every class wraps a
//! core object, every blocking call releases the GIL (and Ctrl-C interrupts it: see
//! `interrupt.rs`), callbacks from core threads attach to the interpreter safely and send their
//! exceptions to `sys.unraisablehook`. The Python package (`python/consul_baton/`) adds the exception
//! hierarchy, `consul_baton.aio` and type stubs.

mod agent;
mod aio;
mod aio_recipes;
mod aio_start;
mod args;
mod cancel;
mod detached;
mod devserver;
mod interrupt;
mod loop_conn;
mod metrics;
mod recipes;
mod waits;
mod warm;

use detached::Detached;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyOverflowError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

/// How long a blocking call stays detached from the interpreter before it re-attaches to
/// check for signals (Ctrl-C).
const SLICE: Duration = Duration::from_millis(100);

/// Baton threads inside the interpreter right now (see [`attach_from_thread`]).
static ATTACHED: AtomicUsize = AtomicUsize::new(0);
/// Set by the `atexit` hook: no baton thread enters the interpreter any more.
static EXITING: AtomicBool = AtomicBool::new(false);

/// Runs `f` attached to the interpreter from one of baton's threads (callbacks, log
/// records, `baton.aio` results); `None` once the interpreter is exiting. Python code in
/// `f` may hand the GIL to another thread; if finalization began meanwhile, CPython ends
/// the thread when it asks for the GIL back and the process aborts. So the `atexit` hook
/// ([`at_exit`]) stops new entries and waits for these sections before finalization.
pub(crate) fn attach_from_thread<R>(f: impl FnOnce(Python<'_>) -> R) -> Option<R> {
    ATTACHED.fetch_add(1, Ordering::SeqCst);
    let r = if EXITING.load(Ordering::SeqCst) {
        None
    } else {
        // The thread may be one that is attached already (a drop logging on the thread that
        // frees a baton object): an exception it is raising must survive `f`.
        Python::try_attach(|py| detached::keep_pending(py, || f(py)))
    };
    ATTACHED.fetch_sub(1, Ordering::SeqCst);
    r
}

/// The `atexit` hook: no more callbacks or log records from baton's threads; waits (up
/// to 5 s, detached from the interpreter) for those in progress.
#[pyfunction]
fn at_exit(py: Python<'_>) {
    EXITING.store(true, Ordering::SeqCst);
    py.detach(|| {
        interrupt::stop();
        let end = Instant::now() + Duration::from_secs(1);
        recipes::stop_pool(end);
        aio::stop_pool(end);
        let end = Instant::now() + Duration::from_secs(5);
        while ATTACHED.load(Ordering::SeqCst) > 0 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// Turns a core error into the matching `baton` exception (see `python/baton/_errors.py`).
fn to_py(py: Python<'_>, e: baton::Error) -> PyErr {
    let class = match e.kind() {
        baton::ErrorKind::Connection => "ConnectionError",
        baton::ErrorKind::Timeout => "TimeoutError",
        baton::ErrorKind::Cancelled => "CancelledError",
        baton::ErrorKind::PermissionDenied => "PermissionDeniedError",
        baton::ErrorKind::NotFound => "NotFoundError",
        baton::ErrorKind::InvalidArgument => "InvalidArgumentError",
        baton::ErrorKind::Conflict => "ConflictError",
        baton::ErrorKind::SessionInvalidated => "SessionLostError",
        baton::ErrorKind::Closed => "ClosedError",
        baton::ErrorKind::Unsupported => "UnsupportedError",
        _ => "ServerError",
    };
    let build = || -> PyResult<PyErr> {
        let module = py.import("consul_baton._errors")?;
        let exc = module.getattr(class)?.call1((e.to_string(),))?;
        exc.setattr("code", e.code())?;
        exc.setattr("status", e.status())?;
        exc.setattr("server_text", e.server_text())?;
        exc.setattr("endpoint", e.endpoint())?;
        exc.setattr("url", e.url())?;
        exc.setattr("transient", e.is_transient())?;
        Ok(PyErr::from_value(exc))
    };
    build().unwrap_or_else(|err| err)
}

/// The longest duration any parameter accepts, in seconds: `threading.TIMEOUT_MAX` on 64-bit
/// Linux (`i64::MAX` nanoseconds, about 292 years). `threading.Lock().acquire(timeout=t)` and
/// `time.sleep(t)` raise `OverflowError` beyond it; so does baton. Any `Instant` on a supported
/// platform can have it added without overflowing, which the core relies on (it computes
/// `Instant::now() + timeout`).
pub(crate) const MAX_SECONDS: f64 = 9_223_372_036.0;

/// Python's `repr` of a float (`1e+20`, `inf`, `nan`, `-0.5`), for error messages.
pub(crate) fn float_repr(v: f64) -> String {
    Python::attach(|py| {
        pyo3::types::PyFloat::new(py, v)
            .repr()
            .map(|r| r.to_string())
    })
    .unwrap_or_else(|_| v.to_string())
}

/// A number of seconds from Python → `Duration` (`None` stays `None`). Like CPython's
/// `threading` and `time.sleep`: NaN and negative values raise `ValueError`; values above
/// [`MAX_SECONDS`] (infinity included) raise `OverflowError`. Both name the parameter.
pub(crate) fn seconds(name: &str, v: Option<f64>) -> PyResult<Option<Duration>> {
    let Some(s) = v else { return Ok(None) };
    if s.is_nan() {
        return Err(PyValueError::new_err(format!(
            "{name} must be a number of seconds, got nan"
        )));
    }
    if s < 0.0 {
        return Err(PyValueError::new_err(format!(
            "{name} must be a non-negative number of seconds, got {}",
            float_repr(s)
        )));
    }
    let too_large = || {
        PyOverflowError::new_err(format!(
            "{name} must be at most {MAX_SECONDS} seconds (about 292 years), got {}",
            float_repr(s)
        ))
    };
    if s > MAX_SECONDS {
        return Err(too_large());
    }
    let d = Duration::try_from_secs_f64(s).map_err(|_| too_large())?;
    // The core adds timeouts to `Instant::now()`; that must not overflow (a panic there
    // would end a baton thread or surface as `PanicException`).
    if Instant::now().checked_add(d).is_none() {
        return Err(too_large());
    }
    Ok(Some(d))
}

/// A connection to Consul (or the dev server), configured from the `CONSUL_*` environment
/// variables, with keyword arguments taking precedence. Weakly referenceable (the
/// `consul_baton.prometheus` collector holds its client weakly).
#[pyclass(frozen, weakref, module = "consul_baton._native")]
pub(crate) struct Client {
    pub(crate) inner: Detached<baton::Client>,
    /// Keeps the signal thread for main-thread calls while the client is open.
    open: interrupt::OpenClient,
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (address=None, *, token=None, token_file=None, datacenter=None, request_timeout=None, default_session=None, **unknown))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        address: Option<String>,
        token: Option<String>,
        token_file: Option<String>,
        datacenter: Option<String>,
        request_timeout: Option<f64>,
        default_session: Option<&Bound<'_, PyDict>>,
        unknown: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Client> {
        args::refuse_unknown(
            "Client",
            unknown,
            &[
                "address",
                "token",
                "token_file",
                "datacenter",
                "request_timeout",
                "default_session",
            ],
        )?;
        let mut b = baton::ClientBuilder::from_env();
        if let Some(a) = address {
            if a.is_empty() {
                return Err(PyValueError::new_err("address must not be empty"));
            }
            b = b.address(a);
        }
        if let Some(t) = token {
            b = b.token(t);
        }
        if let Some(f) = token_file {
            b = b.token_file(f);
        }
        if let Some(dc) = datacenter {
            b = b.datacenter(dc);
        }
        if let Some(t) = seconds("request_timeout", request_timeout)? {
            b = b.request_timeout(t);
        }
        if let Some(d) = default_session {
            b = b.default_session(args::SessionArgs::from_dict(d)?.options(py)?);
        }
        let inner = b.build().map_err(|e| to_py(py, e))?;
        Ok(Client {
            inner: Detached::new(inner),
            open: interrupt::OpenClient::new(),
        })
    }

    /// The address requests go to (`http://host:port`).
    #[getter]
    fn address(&self) -> String {
        self.inner.address().to_string()
    }

    /// The client's shared session, created on first use and replaced after it is lost.
    fn default_session(&self, py: Python<'_>) -> PyResult<Session> {
        let c = self.inner.clone();
        let s = py
            .detach(|| c.default_session())
            .map_err(|e| to_py(py, e))?;
        Ok(Session::new(s, c.downgrade()))
    }

    /// Creates a session of its own, renewed in the background until destroyed. Durations in
    /// seconds: `ttl` defaults to 15 (`ttl=None`: no TTL, asked for explicitly; `ttl=0` is
    /// refused with `baton.InvalidArgumentError`), `lock_delay` to
    /// Consul's (15). `node_checks` (default Consul's `['serfHealth']`, `[]` for none) and
    /// `service_checks` bind it to health checks: it is invalidated when one turns critical.
    #[pyo3(signature = (*, name=None, ttl=args::DEFAULT_TTL, lock_delay=None, behavior="release", node=None, node_checks=None, service_checks=None, **unknown))]
    #[allow(clippy::too_many_arguments)]
    fn create_session(
        &self,
        py: Python<'_>,
        name: Option<String>,
        ttl: Option<f64>,
        lock_delay: Option<f64>,
        behavior: &str,
        node: Option<String>,
        node_checks: Option<Vec<String>>,
        service_checks: Option<Vec<String>>,
        unknown: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Session> {
        args::refuse_unknown("create_session", unknown, &args::SessionArgs::KEYS)?;
        let o = args::SessionArgs {
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
        let c = self.inner.clone();
        let s = py
            .detach(|| c.create_session(&o))
            .map_err(|e| to_py(py, e))?;
        Ok(Session::new(s, c.downgrade()))
    }

    /// The value stored at `key`, or None when the key does not exist.
    fn kv_get<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let (c, k) = (self.inner.clone(), key.to_string());
        let got = py
            .detach(move || c.kv().get(&k))
            .map_err(|e| to_py(py, e))?;
        Ok(got.map(|p| PyBytes::new(py, p.value.as_deref().unwrap_or_default())))
    }

    /// The entry at `key` (value, flags, session, indexes), or None when it does not exist.
    fn kv_get_entry(&self, py: Python<'_>, key: &str) -> PyResult<Option<recipes::KvEntry>> {
        let (c, k) = (self.inner.clone(), key.to_string());
        let got = py
            .detach(move || c.kv().get(&k))
            .map_err(|e| to_py(py, e))?;
        Ok(got.map(recipes::KvEntry::new))
    }

    /// Writes `value` (bytes, or str stored UTF-8 encoded) at `key` with `flags`. With `cas`
    /// the write happens only if the key's ModifyIndex is `cas` (0: only if it does not
    /// exist). Returns whether Consul applied it.
    #[pyo3(signature = (key, value, *, flags=0, cas=None))]
    fn kv_put(
        &self,
        py: Python<'_>,
        key: &str,
        value: &Bound<'_, PyAny>,
        flags: u64,
        cas: Option<u64>,
    ) -> PyResult<bool> {
        let v = args::value_bytes("value", value)?;
        let (c, k) = (self.inner.clone(), key.to_string());
        let options = baton::WriteOptions {
            flags,
            cas,
            ..Default::default()
        };
        py.detach(move || c.kv().put_with(&k, &v, &options))
            .map_err(|e| to_py(py, e))
    }

    /// Deletes `key` (a missing key is not an error). With `cas` only if its ModifyIndex is
    /// `cas`. Returns whether Consul applied it.
    #[pyo3(signature = (key, *, cas=None))]
    fn kv_delete(&self, py: Python<'_>, key: &str, cas: Option<u64>) -> PyResult<bool> {
        let (c, k) = (self.inner.clone(), key.to_string());
        py.detach(move || match cas {
            Some(index) => c.kv().delete_cas(&k, index),
            None => c.kv().delete(&k),
        })
        .map_err(|e| to_py(py, e))
    }

    /// Destroys the sessions this client created and stops its threads. Returns whether
    /// everything finished within `timeout` seconds (`None`: no limit).
    #[pyo3(signature = (timeout=5.0))]
    fn close(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let t = seconds("timeout", Some(timeout.unwrap_or(MAX_SECONDS)))?.unwrap_or_default();
        let c = self.inner.clone();
        let done = py.detach(move || c.close(t));
        // Its last client closed, the signal thread ends (detached: its join needs no GIL).
        py.detach(|| self.open.closed());
        Ok(done)
    }

    /// Whether `close()` has run.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py, Some(5.0))?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("baton.Client(address={:?})", self.inner.address())
    }
}

/// A Consul session renewed in the background. Loss is signalled by `on_lost` callbacks,
/// `wait_lost()`, and `is_valid()` turning false at the local lease deadline.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Session {
    pub(crate) inner: Detached<baton::Session>,
    /// The client that made or adopted it, whose timer wakes `baton.aio`'s wait for its loss
    /// (weak: a session object does not keep its client open).
    pub(crate) client: baton::WeakClient,
    callbacks: cancel::CallbackIds,
}

impl Session {
    pub(crate) fn new(inner: baton::Session, client: baton::WeakClient) -> Session {
        Session {
            inner: Detached::new(inner),
            client,
            callbacks: cancel::CallbackIds::default(),
        }
    }
}

#[pymethods]
impl Session {
    /// The session ID.
    #[getter]
    fn id(&self) -> String {
        self.inner.id().to_string()
    }

    /// True while the session is held (its local lease deadline has not passed and no loss
    /// was seen).
    fn is_valid(&self) -> bool {
        self.inner.is_valid()
    }

    /// Seconds left until the session's local lease deadline: how long its holdings can still
    /// be trusted without another successful renew ("is there enough lease left to start this
    /// job?"). The deadline is the send time of the last successful renew + TTL - a margin
    /// (TTL/10, at most 2 s) and moves forward with each renew. `0.0` once the session is lost
    /// or the deadline has passed; `None` for a session without a TTL that is not lost.
    fn time_left(&self) -> Option<f64> {
        // The deadline first: a renew landing in between only makes the answer smaller.
        let until = self.inner.valid_until();
        if !self.inner.is_valid() {
            return Some(0.0);
        }
        until.map(|u| u.saturating_duration_since(Instant::now()).as_secs_f64())
    }

    /// `"held"`, `"suspect"` (a renew failed; not lost yet) or `"lost:<reason>"`.
    #[getter]
    fn state(&self) -> String {
        match self.inner.state() {
            baton::SessionState::Held => "held".into(),
            baton::SessionState::Suspect => "suspect".into(),
            baton::SessionState::Lost(r) => format!("lost:{}", r.name()),
        }
    }

    /// Blocks until the session is lost and returns the reason (`"invalidated"`,
    /// `"deadline_exceeded"`, `"destroyed"`, `"client_closed"`). With a `timeout` in seconds
    /// (`None`: no limit), raises `baton.TimeoutError` when it passes first; `cancel` (a
    /// `baton.CancelToken`) ends it with `baton.CancelledError`. Ctrl-C interrupts the wait.
    /// It may return before the `on_lost` callbacks have run (they run on another thread).
    #[pyo3(signature = (timeout=None, *, cancel=None))]
    fn wait_lost(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        cancel: Option<PyRef<'_, cancel::CancelToken>>,
    ) -> PyResult<&'static str> {
        let d = recipes::deadline(seconds("timeout", timeout)?);
        let s = self.inner.clone();
        recipes::interruptible(py, cancel::user_token(cancel), move |c| {
            s.wait_lost(recipes::left(d), Some(c))
        })
        .map(|r| r.name())
    }

    /// The session's TTL in seconds as Consul last reported it; `None` for no TTL.
    #[getter]
    fn ttl(&self) -> Option<f64> {
        self.inner.ttl().map(|t| t.as_secs_f64())
    }

    /// The local lease deadline as a `time.monotonic()` value (seconds): past it, the
    /// session's holdings cannot be trusted without another successful renew. It moves
    /// forward with each renew; `None` for a session without a TTL. See `time_left()`.
    fn valid_until(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        let Some(until) = self.inner.valid_until() else {
            return Ok(None);
        };
        // Instant and time.monotonic() share CLOCK_MONOTONIC on Linux; measure the offset
        // instead of relying on it.
        let now_py: f64 = py.import("time")?.call_method0("monotonic")?.extract()?;
        let now = Instant::now();
        Ok(Some(if until >= now {
            now_py + (until - now).as_secs_f64()
        } else {
            now_py - (now - until).as_secs_f64()
        }))
    }

    /// A `baton.CancelToken` cancelled when the session is lost (for work to watch, or to
    /// pass as `cancel=`); baton cancels it, Python cannot.
    #[getter]
    fn cancel_token(&self) -> cancel::CancelToken {
        cancel::CancelToken::watch_only(self.inner.cancel_token(), "session")
    }

    /// Calls `callback(reason)` once when the session is lost. It runs on baton's callback
    /// thread (the dispatcher), after the state change: `is_valid()` is already False and
    /// `cancel_token` cancelled. It is not ordered with `wait_lost()`: a `wait_lost()` may
    /// return before the callback has run. Exceptions it raises go to `sys.unraisablehook`.
    /// Returns an id for `remove_callback`.
    fn on_lost(&self, callback: Py<PyAny>) -> PyResult<u64> {
        let cb = cancel::lost_callback(callback, baton::LostReason::name)?;
        Ok(self.callbacks.add(self.inner.on_lost(cb)))
    }

    /// Removes a callback `on_lost` registered (by the id it returned); True if it was
    /// registered. A call already on its way may still run once.
    fn remove_callback(&self, callback_id: u64) -> bool {
        match self.callbacks.take(callback_id) {
            Some(id) => {
                self.inner.remove_callback(id);
                true
            }
            None => false,
        }
    }

    /// Destroys the session now (its keys are released or deleted; lock-delay applies).
    fn destroy(&self, py: Python<'_>) -> PyResult<()> {
        let s = self.inner.clone();
        py.detach(move || s.destroy()).map_err(|e| to_py(py, e))
    }

    fn __repr__(&self) -> String {
        format!(
            "baton.Session(id={:?}, state={:?})",
            self.inner.id(),
            self.state()
        )
    }
}

/// Forwards the core's `log` records to Python's `logging` under the `baton` logger.
struct PyLogger;

impl log::Log for PyLogger {
    /// baton's own records only: the HTTP stack's debug records (several per request, on
    /// every baton thread) would each take the GIL for nothing.
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target().starts_with("baton")
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = match record.level() {
            log::Level::Error => 40,
            log::Level::Warn => 30,
            log::Level::Info => 20,
            log::Level::Debug => 10,
            log::Level::Trace => 5,
        };
        let msg = record.args().to_string();
        let _ = attach_from_thread(|py| -> PyResult<()> {
            let logger = py
                .import("logging")?
                .call_method1("getLogger", ("baton",))?;
            if logger.call_method1("isEnabledFor", (level,))?.is_truthy()? {
                let kwargs = PyDict::new(py);
                kwargs.set_item("stacklevel", 1)?;
                logger.call_method("log", (level, "%s", msg), Some(&kwargs))?;
            }
            Ok(())
        });
    }

    fn flush(&self) {}
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    if log::set_boxed_logger(Box::new(PyLogger)).is_ok() {
        log::set_max_level(log::LevelFilter::Debug);
    }
    m.add_class::<Client>()?;
    m.add_class::<waits::LeaderEvents>()?;
    m.add_class::<Session>()?;
    m.add_class::<cancel::CancelToken>()?;
    m.add_class::<agent::Agent>()?;
    m.add_class::<recipes::Lock>()?;
    m.add_class::<recipes::Semaphore>()?;
    m.add_class::<recipes::Election>()?;
    m.add_class::<recipes::Observer>()?;
    m.add_class::<recipes::Leader>()?;
    m.add_class::<recipes::Sequencer>()?;
    m.add_class::<recipes::KvEntry>()?;
    m.add_class::<recipes::RwLock>()?;
    m.add_class::<recipes::MultiLock>()?;
    m.add_class::<recipes::LeaderTask>()?;
    m.add_class::<recipes::Group>()?;
    m.add_class::<recipes::Member>()?;
    m.add_class::<recipes::MemberInfo>()?;
    m.add_class::<recipes::MembersWatch>()?;
    m.add_class::<recipes::MembershipEvent>()?;
    m.add_class::<recipes::Barrier>()?;
    m.add_class::<recipes::DoubleBarrier>()?;
    m.add_class::<recipes::Counter>()?;
    m.add_class::<recipes::CounterWatch>()?;
    m.add_class::<aio_recipes::LeaderTerms>()?;
    m.add_class::<aio_recipes::Term>()?;
    m.add_class::<aio::Pending>()?;
    m.add_class::<aio::Hub>()?;
    m.add_class::<warm::WarmCall>()?;
    m.add_class::<loop_conn::LoopConn>()?;
    m.add_function(wrap_pyfunction!(loop_conn::wake_now, m)?)?;
    m.add_function(wrap_pyfunction!(aio_start::begin, m)?)?;
    m.add_function(wrap_pyfunction!(aio::_start_call, m)?)?;
    m.add_function(wrap_pyfunction!(aio::_end_idle_threads, m)?)?;
    m.add_function(wrap_pyfunction!(devserver::devserver_main, m)?)?;
    m.add_function(wrap_pyfunction!(metrics::_metric_defs, m)?)?;
    let hook = wrap_pyfunction!(at_exit, m)?;
    m.py().import("atexit")?.call_method1("register", (hook,))?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
