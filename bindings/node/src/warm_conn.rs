//! The agent connections this thread's loop watches for warm calls (`warm.rs`): one `uv_poll_t`
//! per connection, on a duplicate of its socket that is the loop's own, made on the first warm
//! call on that connection and kept between calls. A call then costs no handle of its own: a
//! poll handle made, started, stopped and closed per call cost libuv seven `epoll_ctl`s and an
//! `ioctl` per request (`strace`).
//!
//! Between calls the handle keeps watching for reading, unreferenced (it keeps no loop alive).
//! It turning readable then means the connection is not this loop's to wait on any more: a
//! baton thread's request is answered on it, the agent closed it, or baton dropped it (the core
//! shuts down a connection it drops, so the duplicate sees its end). The handle is then closed,
//! and a later warm call on the connection makes a new one. The duplicate is what makes keeping
//! the handle safe: baton closing its own descriptor, and the number going to another socket,
//! cannot reach the loop's registration. At most [`IDLE_CONNS`] idle ones are kept, and the
//! environment's clean-up closes them all (a worker thread's loop must close with no handle
//! open).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::ptr;

use napi::sys;

/// `UV_POLL` in libuv's `uv_handle_type`; `UV_READABLE` in its `uv_poll_event`.
const UV_POLL: c_int = 8;
const UV_READABLE: c_int = 1;

/// Idle connections kept watched, at most (the oldest goes first).
const IDLE_CONNS: usize = 4;

extern "C" {
    fn uv_handle_size(kind: c_int) -> usize;
    fn uv_poll_init(event_loop: *mut sys::uv_loop_s, handle: *mut c_void, fd: c_int) -> c_int;
    fn uv_poll_start(
        handle: *mut c_void,
        events: c_int,
        cb: unsafe extern "C" fn(*mut c_void, c_int, c_int),
    ) -> c_int;
    fn uv_poll_stop(handle: *mut c_void) -> c_int;
    fn uv_close(handle: *mut c_void, cb: unsafe extern "C" fn(*mut c_void));
    fn uv_ref(handle: *mut c_void);
    fn uv_unref(handle: *mut c_void);
    fn dup(fd: c_int) -> c_int;
    fn close(fd: c_int) -> c_int;
}

/// What a watched connection's readiness is for: the warm call waiting on it.
pub(crate) type OnReady = unsafe fn(*mut c_void);

/// One watched connection. Its handle's `data` field points to it; it is freed when the handle
/// is closed.
pub(crate) struct Conn {
    poll: *mut c_void,
    /// The loop's own duplicate of the connection's socket.
    fd: c_int,
    /// The connection's id (`baton::warm`'s `conn_id`).
    id: u64,
    /// The call waiting on it, and what to run for it when the socket is ready (null / None
    /// between calls).
    waiter: *mut c_void,
    on_ready: Option<OnReady>,
    /// The events the handle watches now.
    events: c_int,
}

thread_local! {
    /// This thread's watched connections.
    static CONNS: RefCell<Vec<*mut Conn>> = const { RefCell::new(Vec::new()) };
    /// How many have been made on this thread (for the tests: `warmConnStats`).
    static MADE: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// The environment whose clean-up hook closes them (null: none registered yet).
    static HOOKED: std::cell::Cell<sys::napi_env> = const { std::cell::Cell::new(ptr::null_mut()) };
}

fn layout() -> Layout {
    // SAFETY: a plain query of libuv's handle size.
    let size = unsafe { uv_handle_size(UV_POLL) };
    Layout::from_size_align(size.max(std::mem::size_of::<*mut c_void>()), 16)
        .expect("a libuv handle layout")
}

/// The watched connection `id` (socket `fd`) for a warm call on `env`'s loop, made on its
/// first call here; `None` when it cannot be watched (the call then goes on on a thread).
///
/// # Safety
/// On the JavaScript thread of `env`, whose loop is `event_loop`.
pub(crate) unsafe fn get(
    env: sys::napi_env,
    event_loop: *mut sys::uv_loop_s,
    id: u64,
    fd: c_int,
) -> Option<*mut Conn> {
    if let Some(c) = CONNS.with(|cs| {
        cs.borrow()
            .iter()
            // SAFETY: the registry holds live connections only.
            .find(|c| unsafe { (***c).id } == id)
            .copied()
    }) {
        return Some(c);
    }
    let idle: Vec<*mut Conn> = CONNS.with(|cs| {
        cs.borrow()
            .iter()
            // SAFETY: as above.
            .filter(|c| unsafe { (***c).waiter.is_null() })
            .copied()
            .collect()
    });
    if idle.len() >= IDLE_CONNS {
        // SAFETY: a live, idle connection of this thread.
        unsafe { let_go(idle[0]) };
    }
    // SAFETY: `fd` is the call's open socket; the duplicate is ours until `on_closed`.
    let own = unsafe { dup(fd) };
    if own < 0 {
        return None;
    }
    // SAFETY: a non-zero size.
    let poll = unsafe { alloc_zeroed(layout()) }.cast::<c_void>();
    // SAFETY: `poll` is a zeroed allocation of a poll handle's size, initialised here on the
    // loop's own thread. If it cannot be made, libuv registered nothing: it is freed here.
    if poll.is_null() || unsafe { uv_poll_init(event_loop, poll, own) } != 0 {
        if !poll.is_null() {
            // SAFETY: allocated above with this layout, never handed to libuv.
            unsafe { dealloc(poll.cast(), layout()) };
        }
        // SAFETY: our duplicate, used by nothing else.
        unsafe { close(own) };
        return None;
    }
    let conn = Box::into_raw(Box::new(Conn {
        poll,
        fd: own,
        id,
        waiter: ptr::null_mut(),
        on_ready: None,
        events: 0,
    }));
    // SAFETY: the handle's first field is `data`, as in every libuv handle; the connection
    // lives until the handle is closed.
    unsafe { *poll.cast::<*mut Conn>() = conn };
    CONNS.with(|cs| cs.borrow_mut().push(conn));
    MADE.with(|m| m.set(m.get().wrapping_add(1)));
    if HOOKED.with(std::cell::Cell::get).is_null() {
        // SAFETY: on the JavaScript thread with its live env.
        if unsafe { sys::napi_add_env_cleanup_hook(env, Some(on_env_gone), ptr::null_mut()) }
            == sys::Status::napi_ok
        {
            HOOKED.with(|h| h.set(env));
        }
    }
    Some(conn)
}

/// Makes `conn` wait for `events` for `waiter` (`on_ready(waiter)` when ready); false if the
/// handle could not be started.
///
/// # Safety
/// On the loop's thread, with `conn` live and `waiter` live until [`release`].
pub(crate) unsafe fn wait(
    conn: *mut Conn,
    waiter: *mut c_void,
    on_ready: OnReady,
    events: c_int,
) -> bool {
    // SAFETY: the caller's.
    let c = unsafe { &mut *conn };
    if c.waiter.is_null() {
        // SAFETY: a live handle: it keeps the loop alive while a call waits on it.
        unsafe { uv_ref(c.poll) };
    }
    c.waiter = waiter;
    c.on_ready = Some(on_ready);
    if c.events != events {
        c.events = events;
        // SAFETY: a live handle, started on its loop's thread.
        if unsafe { uv_poll_start(c.poll, events, on_conn_ready) } != 0 {
            return false;
        }
    }
    true
}

/// The call waiting on `conn` no longer does: the handle goes back to watching for reading,
/// unreferenced.
///
/// # Safety
/// On the loop's thread, with `conn` live.
pub(crate) unsafe fn release(conn: *mut Conn) {
    // SAFETY: the caller's.
    let c = unsafe { &mut *conn };
    if c.waiter.is_null() {
        return;
    }
    c.waiter = ptr::null_mut();
    c.on_ready = None;
    if c.events != UV_READABLE {
        c.events = UV_READABLE;
        // SAFETY: a live handle. Should it fail, the handle is let go.
        if unsafe { uv_poll_start(c.poll, UV_READABLE, on_conn_ready) } != 0 {
            // SAFETY: the caller's.
            unsafe { let_go(conn) };
            return;
        }
    }
    // SAFETY: a live handle.
    unsafe { uv_unref(c.poll) };
}

/// Stops watching `conn` and closes its handle (the connection is freed once closed).
///
/// # Safety
/// On the loop's thread, with `conn` live and no call waiting on it.
unsafe fn let_go(conn: *mut Conn) {
    CONNS.with(|cs| cs.borrow_mut().retain(|c| *c != conn));
    // SAFETY: the caller's; the handle is live until closed here.
    unsafe {
        uv_poll_stop((*conn).poll);
        uv_close((*conn).poll, on_closed);
    }
}

/// This thread's watched connections now, and how many were ever made on it.
pub(crate) fn stats() -> (u32, u32) {
    let watched = CONNS.with(|cs| u32::try_from(cs.borrow().len()).unwrap_or(u32::MAX));
    (watched, MADE.with(std::cell::Cell::get))
}

unsafe extern "C" fn on_conn_ready(handle: *mut c_void, _status: c_int, _events: c_int) {
    // SAFETY: `data` holds the live connection (freed only once the handle is closed).
    let conn = unsafe { *handle.cast::<*mut Conn>() };
    // SAFETY: as above.
    let (waiter, on_ready) = unsafe { ((*conn).waiter, (*conn).on_ready) };
    match on_ready {
        // SAFETY: the waiter is live while it is registered (`release` unregisters it). An
        // error status is seen by the call's own read or write.
        Some(f) if !waiter.is_null() => unsafe { f(waiter) },
        // Not this loop's to wait on any more (see the module docs).
        // SAFETY: a live connection with no call waiting.
        _ => unsafe { let_go(conn) },
    }
}

unsafe extern "C" fn on_closed(handle: *mut c_void) {
    // SAFETY: libuv calls this once, after the handle is closed: the connection and the
    // handle are ours to free, and the duplicate ours to close.
    unsafe {
        let conn = Box::from_raw(*handle.cast::<*mut Conn>());
        close(conn.fd);
        dealloc(handle.cast(), layout());
    }
}

/// The environment is torn down: every watched connection's handle is closed (a call still
/// waiting on one has been ended by its own clean-up hook first, or is ended with the loop).
unsafe extern "C" fn on_env_gone(_arg: *mut c_void) {
    HOOKED.with(|h| h.set(ptr::null_mut()));
    let all: Vec<*mut Conn> = CONNS.with(|cs| cs.borrow().clone());
    for conn in all {
        // SAFETY: live connections of this thread, on its loop's thread.
        unsafe { let_go(conn) };
    }
}
