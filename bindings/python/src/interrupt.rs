//! Signals (Ctrl-C) for blocking calls that run on the main thread itself.
//!
//! A blocking call runs its core call on the calling thread, detached from the interpreter.
//! Python runs signal handlers on the main thread only, between bytecodes, so a call blocked
//! there must be ended for a handler to run. CPython's C-level handler writes a byte to the
//! *wakeup fd* (`signal.set_wakeup_fd`) for every signal with a Python handler, and so does
//! `_thread.interrupt_main()`. While such a call runs, [`Interruptible`] makes one end of a
//! socket pair the wakeup fd; a thread of ours ("baton-py-signals") reads the other end and
//! cancels the call's token. The call returns (the core gives back what an acquire took
//! meanwhile; `recipes::acquiring` gives back a success that came just before), the handler
//! runs, and if it raises (`KeyboardInterrupt`), so does the call. The
//! previous wakeup fd (none, in a program without an event loop) is put back after each call.
//!
//! When the wakeup fd is already taken (an event loop runs in the main thread) the caller
//! falls back to the pooled thread and the 100 ms slices of checking for signals.
//!
//! The signal thread runs while a client is open or a call uses it: closing the last client
//! joins it, and the next such call starts it again.

use std::cell::Cell;
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;

thread_local! {
    /// Whether this is the interpreter's main thread (where signal handlers run), once known.
    static MAIN: Cell<Option<bool>> = const { Cell::new(None) };
}

/// Whether the calling thread is Python's main thread.
pub(crate) fn is_main_thread(py: Python<'_>) -> bool {
    if let Some(m) = MAIN.with(Cell::get) {
        return m;
    }
    let main = (|| -> PyResult<bool> {
        let threading = py.import("threading")?;
        let me: u64 = threading.call_method0("get_ident")?.extract()?;
        let main: u64 = threading
            .call_method0("main_thread")?
            .getattr("ident")?
            .extract()?;
        Ok(me == main)
    })()
    .unwrap_or(false);
    MAIN.with(|m| m.set(Some(main)));
    main
}

/// The token of the main-thread call in progress, cancelled by the signal thread.
static CURRENT: Mutex<Option<baton::CancelToken>> = Mutex::new(None);

fn current() -> std::sync::MutexGuard<'static, Option<baton::CancelToken>> {
    CURRENT.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(unix)]
mod watcher {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::sync::Mutex;
    use std::thread::JoinHandle;

    /// The wakeup end and the signal thread.
    struct Watcher {
        wakeup: UnixStream,
        thread: JoinHandle<()>,
    }

    /// Who needs the signal thread: it runs while a client is open or a call uses its wakeup
    /// fd, and is joined when neither is left (so no baton thread outlives the last
    /// `close()`), to be started again by the next call.
    #[derive(Default)]
    struct Users {
        watcher: Option<Watcher>,
        clients: usize,
        calls: usize,
        /// Set at exit: no more signal thread.
        exiting: bool,
    }

    static USERS: Mutex<Users> = Mutex::new(Users {
        watcher: None,
        clients: 0,
        calls: 0,
        exiting: false,
    });

    fn users() -> std::sync::MutexGuard<'static, Users> {
        USERS.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn start() -> Option<Watcher> {
        let (wakeup, mut read) = UnixStream::pair().ok()?;
        // CPython requires a non-blocking wakeup fd (its signal handler must not block).
        wakeup.set_nonblocking(true).ok()?;
        let thread = std::thread::Builder::new()
            .name("baton-py-signals".into())
            .spawn(move || {
                let mut buf = [0u8; 64];
                // Ends when the other end is shut down.
                while matches!(read.read(&mut buf), Ok(n) if n > 0) {
                    if let Some(t) = super::current().as_ref() {
                        t.cancel();
                    }
                }
            })
            .ok()?;
        Some(Watcher { wakeup, thread })
    }

    /// Ends and joins a signal thread no one needs any more (with no lock held).
    fn end(w: Option<Watcher>) {
        if let Some(w) = w {
            let _ = w.wakeup.shutdown(std::net::Shutdown::Both);
            let _ = w.thread.join();
        }
    }

    /// The thread, if nothing needs it any more: taken out to be ended.
    fn idle(u: &mut Users) -> Option<Watcher> {
        if u.calls == 0 && (u.clients == 0 || u.exiting) {
            u.watcher.take()
        } else {
            None
        }
    }

    /// A call begins: the wakeup fd to set, the signal thread started if it is not running
    /// (`None`: at exit, or it could not be). The fd stays open until [`call_ended`].
    pub(super) fn call_began() -> Option<i32> {
        let mut u = users();
        if u.exiting {
            return None;
        }
        if u.watcher.is_none() {
            u.watcher = start();
        }
        let fd = u.watcher.as_ref()?.wakeup.as_raw_fd();
        u.calls += 1;
        Some(fd)
    }

    /// A call that [`call_began`] no longer uses the wakeup fd.
    pub(super) fn call_ended() {
        let w = {
            let mut u = users();
            u.calls = u.calls.saturating_sub(1);
            idle(&mut u)
        };
        end(w);
    }

    /// A client was made.
    pub(crate) fn client_opened() {
        users().clients += 1;
    }

    /// A client was closed (or dropped unclosed): the signal thread ends with the last one.
    pub(crate) fn client_closed() {
        let w = {
            let mut u = users();
            u.clients = u.clients.saturating_sub(1);
            idle(&mut u)
        };
        end(w);
    }

    /// Ends and joins the signal thread for good (the `atexit` hook).
    pub(crate) fn stop() {
        let w = {
            let mut u = users();
            u.exiting = true;
            idle(&mut u)
        };
        end(w);
    }
}

#[cfg(unix)]
pub(crate) use watcher::{client_closed, client_opened, stop};

/// No signal thread off Unix.
#[cfg(not(unix))]
pub(crate) fn stop() {}
#[cfg(not(unix))]
pub(crate) fn client_opened() {}
#[cfg(not(unix))]
pub(crate) fn client_closed() {}

/// Counts a client for the signal thread's life ([`client_opened`]) until it is closed or
/// dropped, once.
pub(crate) struct OpenClient(std::sync::atomic::AtomicBool);

impl OpenClient {
    pub(crate) fn new() -> OpenClient {
        client_opened();
        OpenClient(std::sync::atomic::AtomicBool::new(true))
    }

    /// The client is closed (a second call does nothing).
    pub(crate) fn closed(&self) {
        if self.0.swap(false, std::sync::atomic::Ordering::SeqCst) {
            client_closed();
        }
    }
}

impl Drop for OpenClient {
    fn drop(&mut self) {
        self.closed();
    }
}

/// `signal.set_wakeup_fd(fd, warn_on_full_buffer=False)`: the previous wakeup fd.
///
/// Two of these run around every main-thread blocking call, so the function and its keyword
/// arguments are looked up and built once. (CPython's `PySignal_SetWakeupFd` would skip the
/// Python call, but it is outside the limited API and not exported by every build.)
fn set_wakeup_fd(py: Python<'_>, fd: i32) -> PyResult<i32> {
    static SET_WAKEUP_FD: PyOnceLock<(Py<PyAny>, Py<PyDict>)> = PyOnceLock::new();
    let (f, kwargs) = SET_WAKEUP_FD.get_or_try_init(py, || -> PyResult<_> {
        let f = py.import("signal")?.getattr("set_wakeup_fd")?.unbind();
        let kwargs = PyDict::new(py);
        kwargs.set_item("warn_on_full_buffer", false)?;
        Ok((f, kwargs.unbind()))
    })?;
    f.bind(py).call((fd,), Some(kwargs.bind(py)))?.extract()
}

/// A main-thread call wired to signals: made by [`Interruptible::begin`], ended by drop (which
/// puts the previous wakeup fd back).
pub(crate) struct Interruptible<'py> {
    py: Python<'py>,
    token: baton::CancelToken,
}

impl<'py> Interruptible<'py> {
    /// Wires a new token to signals, or `None` when the wakeup fd is taken or cannot be set (the
    /// caller then uses the fallback). Errors are a signal handler's exception (a signal that
    /// arrived before the call).
    pub(crate) fn begin(py: Python<'py>) -> PyResult<Option<Interruptible<'py>>> {
        #[cfg(unix)]
        {
            let Some(fd) = watcher::call_began() else {
                return Ok(None);
            };
            let token = baton::CancelToken::new();
            *current() = Some(token.clone());
            match set_wakeup_fd(py, fd) {
                Ok(-1) => {}
                Ok(other) => {
                    // Someone else's (an event loop's): leave it in place.
                    let _ = set_wakeup_fd(py, other);
                    *current() = None;
                    watcher::call_ended();
                    return Ok(None);
                }
                Err(_) => {
                    *current() = None;
                    watcher::call_ended();
                    return Ok(None);
                }
            }
            let call = Interruptible { py, token };
            // A signal that came before the wakeup fd was ours.
            py.check_signals()?;
            Ok(Some(call))
        }
        #[cfg(not(unix))]
        {
            let _ = py;
            Ok(None)
        }
    }

    /// The call's token.
    pub(crate) fn token(&self) -> &baton::CancelToken {
        &self.token
    }
}

impl Drop for Interruptible<'_> {
    fn drop(&mut self) {
        // The wakeup fd is put back before the signal thread may end and close it.
        let _ = set_wakeup_fd(self.py, -1);
        *current() = None;
        #[cfg(unix)]
        watcher::call_ended();
    }
}
