//! The warm path for Node: a lock's acquire or release whose one request the event loop writes
//! and reads itself (`baton::warm`, `docs/src/performance.md`), instead of a baton thread that
//! blocks on it and then hands the outcome over.
//!
//! N-API has no way to watch a descriptor, so this uses libuv, which Node exports to addons
//! (`napi_get_uv_event_loop`): the `uv_poll_t` of the call's connection (`warm_conn.rs`: one
//! per connection, kept between calls), for what the call waits for, and a `uv_timer_t` for its
//! time (the call's timeout or the client's request timeout, the smaller). Both run on the loop's thread, and the promise settles through the environment's
//! queue (`settle.rs`), as every other call's does. A call the warm path did not settle (a
//! stale view, lock-delay, an error, a broken connection, its time) goes on on a baton thread
//! from where it stopped (`on_thread`'s pool). A cancel token is looked at when the socket or
//! the timer fires: an abort then waits for the answer (at most the request's time), and a
//! success that raced it is handed back by JavaScript (`lib/cancel.js`), as for a thread call.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ffi::{c_int, c_void};
use std::ptr;
use std::time::{Duration, Instant};

use baton::warm::{Interest, ResumeAcquire, ResumeRelease, WarmAcquire, WarmRelease, WarmStep};
use baton::Hold;
use napi::bindgen_prelude::Object;
use napi::{sys, Env, Result};

use crate::settle::{self, Deferred};
use crate::warm_conn::{self, Conn};
use crate::{js_err, run_settling};

/// `UV_TIMER` in libuv's `uv_handle_type`.
const UV_TIMER: c_int = 13;
/// `UV_READABLE` and `UV_WRITABLE` in libuv's `uv_poll_event`.
const UV_READABLE: c_int = 1;
const UV_WRITABLE: c_int = 2;

extern "C" {
    fn uv_handle_size(kind: c_int) -> usize;
    fn uv_timer_init(event_loop: *mut sys::uv_loop_s, handle: *mut c_void) -> c_int;
    fn uv_timer_start(
        handle: *mut c_void,
        cb: unsafe extern "C" fn(*mut c_void),
        timeout: u64,
        repeat: u64,
    ) -> c_int;
    fn uv_timer_stop(handle: *mut c_void) -> c_int;
    fn uv_close(handle: *mut c_void, cb: unsafe extern "C" fn(*mut c_void));
}

/// Which holders have warm calls: locks (a semaphore's, an election's, a read-write lock's and a
/// multi-key lock's calls go through the core's futures or a call thread).
pub(crate) trait Warm: Hold {
    /// A warm acquire, or `None` (then a thread call).
    fn warm_acquire(&self) -> Option<WarmAcquire> {
        None
    }
    /// A warm release, or `None` (then a thread call).
    fn warm_release(&self) -> Option<WarmRelease> {
        None
    }
    /// After a thread call (on that thread): opens the client's loop connection if it can have
    /// one and has none, so that the next calls can be warm.
    fn open_loop_conn(&self) {}
}

impl Warm for baton::Lock {
    fn warm_acquire(&self) -> Option<WarmAcquire> {
        baton::Lock::warm_acquire(self)
    }
    fn warm_release(&self) -> Option<WarmRelease> {
        baton::Lock::warm_release(self)
    }
    fn open_loop_conn(&self) {
        if self.wants_loop_conn() {
            // A failure costs only the warm path; the next thread call tries again.
            let _ = baton::Lock::open_loop_conn(self);
        }
    }
}
impl Warm for baton::Semaphore {}
impl Warm for baton::Election {}
impl Warm for baton::RwLock {}
impl Warm for baton::MultiLock {}

thread_local! {
    /// Warm calls in flight on this thread's loop.
    static IN_FLIGHT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// How many warm calls are in flight on this thread's loop.
pub(crate) fn in_flight() -> u32 {
    IN_FLIGHT.with(std::cell::Cell::get)
}

/// A warm call and what comes after it.
enum Call {
    Acquire(Box<WarmAcquire>),
    Release(Box<WarmRelease>),
}

/// One warm call on the loop: its connection's handle (while it waits on it) and its timer point
/// to it; it is freed when the timer is closed (at once when it has none).
struct Task {
    call: Option<Call>,
    deferred: Option<Deferred>,
    /// The watched connection it runs on (see `warm_conn.rs`).
    conn: *mut Conn,
    timer: *mut c_void,
    timeout: Option<Duration>,
    begun: Instant,
    /// The caller's cancel token, if it gave one.
    token: Option<baton::CancelToken>,
    /// The environment whose clean-up hook ends the call if the environment goes first (a
    /// worker thread terminated with the call in flight); null when no hook is registered.
    env: sys::napi_env,
    /// The environment that made the promise (its JavaScript thread is the loop's).
    js_env: sys::napi_env,
}

fn timer_layout() -> Layout {
    // SAFETY: a plain query of libuv's handle sizes.
    let size = unsafe { uv_handle_size(UV_TIMER) };
    Layout::from_size_align(size.max(std::mem::size_of::<*mut c_void>()), 16)
        .expect("a libuv handle layout")
}

/// Starts `call` on `env`'s loop; the returned promise settles with its outcome.
fn start<'e>(
    env: &'e Env,
    call: Call,
    timeout: Option<Duration>,
    token: Option<baton::CancelToken>,
) -> Result<Object<'e>> {
    let (deferred, promise) = settle::promise(env)?;
    let mut event_loop = ptr::null_mut();
    // SAFETY: on the JavaScript thread with its live env.
    let status = unsafe { sys::napi_get_uv_event_loop(env.raw(), &mut event_loop) };
    if status != sys::Status::napi_ok || event_loop.is_null() {
        return Err(napi::Error::from_reason(format!(
            "napi_get_uv_event_loop failed (napi status {status})"
        )));
    }
    let (fd, conn_id, limit) = match &call {
        Call::Acquire(w) => (w.fd(), w.conn_id(), w.time_limit()),
        Call::Release(w) => (w.fd(), w.conn_id(), w.time_limit()),
    };
    let limit = match timeout {
        Some(t) if !t.is_zero() => t.min(limit),
        _ => limit,
    };
    let task = Box::into_raw(Box::new(Task {
        call: Some(call),
        deferred: Some(deferred),
        conn: ptr::null_mut(),
        timer: ptr::null_mut(),
        timeout,
        begun: Instant::now(),
        token,
        env: ptr::null_mut(),
        js_env: env.raw(),
    }));
    // SAFETY: on the loop's own thread, with its live env. A connection that cannot be
    // watched registered nothing with the loop: the call goes on on a thread. The timer is a
    // zeroed allocation of its handle's size (checked for null first), initialised here; its
    // first field (`data`, as in every libuv handle) is set to the task, which lives until the
    // timer is closed.
    unsafe {
        let Some(conn) = warm_conn::get(env.raw(), event_loop, conn_id, fd) else {
            let mut task = Box::from_raw(task);
            resume(&mut task);
            return Ok(promise);
        };
        (*task).conn = conn;
        IN_FLIGHT.with(|n| n.set(n.get() + 1));
        if sys::napi_add_env_cleanup_hook(env.raw(), Some(on_env_gone), task.cast())
            == sys::Status::napi_ok
        {
            (*task).env = env.raw();
        }
        let timer = alloc_zeroed(timer_layout()).cast::<c_void>();
        if !timer.is_null() && uv_timer_init(event_loop, timer) == 0 {
            *timer.cast::<*mut Task>() = task;
            (*task).timer = timer;
            let ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX).max(1);
            uv_timer_start(timer, on_time, ms, 0);
        } else if !timer.is_null() {
            dealloc(timer.cast(), timer_layout());
        }
        step(task, false);
    }
    Ok(promise)
}

/// Advances the task's call and acts on where it stands. `from_loop`: called from a libuv
/// callback (the socket is ready), where a settled promise is settled at once; else from
/// JavaScript (the call's start), where it goes through the environment's queue.
///
/// # Safety
/// On the loop's thread, with `task` live (not finished).
unsafe fn step(task: *mut Task, from_loop: bool) {
    // SAFETY: the caller's.
    let t = unsafe { &mut *task };
    if t.token
        .as_ref()
        .is_some_and(baton::CancelToken::is_cancelled)
    {
        // SAFETY: the caller's.
        unsafe { give_up(task) };
        return;
    }
    // What the call settled with: settled once the task is finished (its connection released
    // and its timer closed), since settling may run JavaScript that makes the next call on
    // the same connection at once.
    let mut settled = None;
    let pending = match t.call.as_mut() {
        Some(Call::Acquire(w)) => match w.advance() {
            WarmStep::Pending(i) => Some(i),
            WarmStep::Done(r) => {
                settled = Some(r);
                None
            }
            WarmStep::Resume(r) => {
                run_rest(t, Rest::Acquire(r));
                None
            }
        },
        Some(Call::Release(w)) => match w.advance() {
            WarmStep::Pending(i) => Some(i),
            WarmStep::Done(r) => {
                settled = Some(r);
                None
            }
            WarmStep::Resume(r) => {
                run_rest(t, Rest::Release(r));
                None
            }
        },
        None => None,
    };
    if let Some(i) = pending {
        let events = match i {
            Interest::Read => UV_READABLE,
            Interest::Write => UV_WRITABLE,
        };
        // SAFETY: the task's connection is live while the task is; the task stays registered
        // until `finish` releases it.
        if !unsafe { warm_conn::wait(t.conn, task.cast(), on_ready, events) } {
            // SAFETY: the caller's.
            unsafe { give_up(task) };
        }
        return;
    }
    t.call = None;
    let (deferred, env) = (t.deferred.take(), t.js_env);
    // SAFETY: the caller's; nothing touches the task after this.
    unsafe { finish(task) };
    if let (Some(d), Some(outcome)) = (deferred, settled) {
        if from_loop {
            // SAFETY: on the loop's thread in a libuv callback, with the env that made the
            // promise (a task whose env is gone has no deferred any more).
            unsafe { d.settle_from_loop(env, outcome.map_err(js_err)) };
        } else {
            d.settle(None, outcome.map_err(js_err));
        }
    }
}

/// The rest of a call, for a thread.
enum Rest {
    Acquire(ResumeAcquire),
    Release(ResumeRelease),
}

/// Settles the task's promise with `outcome` (through the environment's queue).
fn settle_now(t: &mut Task, outcome: baton::Result<bool>) {
    t.call = None;
    if let Some(d) = t.deferred.take() {
        d.settle(None, outcome.map_err(js_err));
    }
}

/// Hands the rest of the call to a baton thread, which settles the promise.
fn run_rest(t: &mut Task, rest: Rest) {
    t.call = None;
    let Some(d) = t.deferred.take() else { return };
    let left = t.timeout.map(|total| {
        let left = total.saturating_sub(t.begun.elapsed());
        // A deadline already passed stays passed (zero would mean "try once").
        if total.is_zero() {
            left
        } else {
            left.max(Duration::from_micros(1))
        }
    });
    let token = t.token.clone();
    // Nothing owed by the warm request: the acquire starts over as a wait that holds no thread.
    let rest = match rest {
        Rest::Acquire(r) if !r.maybe_applied() => {
            let lock = r.into_restart();
            crate::drive_settling(d, async move {
                crate::holding::acquire_with(&lock, left, token).await
            });
            return;
        }
        other => other,
    };
    // If no thread can start, the deferred is dropped unsettled, which rejects it.
    let _ = match rest {
        Rest::Acquire(r) => {
            crate::run_settling_on(&crate::WAITS, d, move || r.run(left, token.as_ref()))
        }
        Rest::Release(r) => run_settling(d, move || r.run()),
    };
}

/// Gives the call up as a warm one (its time ran out, its token fired, the poll failed).
///
/// # Safety
/// On the loop's thread, with `task` live.
unsafe fn give_up(task: *mut Task) {
    // SAFETY: the caller's.
    unsafe { resume(&mut *task) };
    // SAFETY: the caller's; nothing touches the task after this.
    unsafe { finish(task) };
}

fn resume(t: &mut Task) {
    match t.call.take() {
        Some(Call::Acquire(w)) => match (*w).abandon() {
            Some(r) => run_rest(t, Rest::Acquire(r)),
            None => settle_now(
                t,
                Err(baton::Error::new(
                    baton::ErrorKind::Cancelled,
                    "the warm acquire had already ended",
                )),
            ),
        },
        Some(Call::Release(w)) => run_rest(t, Rest::Release((*w).abandon())),
        None => {}
    }
}

/// Lets the task's connection go back to waiting for the next call, and closes its timer
/// (whose close frees the task; with no timer it is freed here).
///
/// # Safety
/// On the loop's thread, with `task` live; called once per task.
unsafe fn finish(task: *mut Task) {
    // SAFETY: the caller's.
    let t = unsafe { &mut *task };
    IN_FLIGHT.with(|n| n.set(n.get().saturating_sub(1)));
    // SAFETY: the connection and the timer are live (not closed) until released and closed
    // here; the hook was registered with this task as its argument.
    unsafe {
        if !t.env.is_null() {
            sys::napi_remove_env_cleanup_hook(t.env, Some(on_env_gone), task.cast());
        }
        warm_conn::release(t.conn);
        if t.timer.is_null() {
            drop(Box::from_raw(task));
        } else {
            uv_timer_stop(t.timer);
            uv_close(t.timer, on_closed_timer);
        }
    }
}

/// The task's connection is ready.
///
/// # Safety
/// `task` is a live task waiting on its connection, on the loop's thread.
unsafe fn on_ready(task: *mut c_void) {
    // SAFETY: the caller's. An error status is seen by the call's own read or write.
    unsafe { step(task.cast(), true) };
}

/// The environment is torn down with the call in flight: the call is dropped (what it may
/// have been granted is given back in the background; its promise is gone with the
/// environment) and its handles are closed, so that the loop can close.
unsafe extern "C" fn on_env_gone(task: *mut c_void) {
    let task = task.cast::<Task>();
    // SAFETY: registered with the live task, removed when it finishes; run on the loop's
    // thread. The hook is not removed again (it is running).
    unsafe {
        (*task).env = ptr::null_mut();
        (*task).call = None;
        drop((*task).deferred.take());
        finish(task);
    }
}

unsafe extern "C" fn on_time(handle: *mut c_void) {
    // SAFETY: as in `on_ready`.
    unsafe { give_up(*handle.cast::<*mut Task>()) };
}

unsafe extern "C" fn on_closed_timer(handle: *mut c_void) {
    // SAFETY: libuv calls this once, after the timer is closed; `data` holds the task, whose
    // last handle it was.
    unsafe {
        let task = *handle.cast::<*mut Task>();
        dealloc(handle.cast(), timer_layout());
        drop(Box::from_raw(task));
    }
}

/// `acquire(timeoutMs, cancel)` of a holder: warm when it can be, else on a thread (which
/// then opens the loop connection for the next calls).
pub(crate) fn acquire<'e, H: Warm + baton::aio::Contend + Send + Sync>(
    env: &'e Env,
    holder: &std::sync::Arc<H>,
    timeout: Option<Duration>,
    token: Option<baton::CancelToken>,
) -> Result<Object<'e>> {
    if !token.as_ref().is_some_and(baton::CancelToken::is_cancelled) {
        if let Some(w) = holder.warm_acquire() {
            return start(env, Call::Acquire(Box::new(w)), timeout, token);
        }
    }
    crate::holding::acquire(env, holder, timeout, token, H::open_loop_conn)
}

/// `release()` of a holder: warm when it can be, else on a thread.
pub(crate) fn release<'e, H: Warm + 'static>(
    env: &'e Env,
    holder: &std::sync::Arc<H>,
) -> Result<Object<'e>> {
    if let Some(w) = holder.warm_release() {
        return start(env, Call::Release(Box::new(w)), None, None);
    }
    let h = holder.clone();
    crate::on_thread(env, move || {
        let released = h.release();
        h.open_loop_conn();
        released
    })
}
