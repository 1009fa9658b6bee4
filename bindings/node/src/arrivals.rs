//! The event loop watches the environment's arrival set (`baton::arrival`): a call's answer
//! wakes the loop together with the baton thread that reads it, instead of the thread waking the
//! loop once it has the outcome.
//!
//! N-API has no way to watch a descriptor, so this uses libuv (which Node exports to addons
//! through `napi_get_uv_event_loop`): a `uv_poll_t` on the set's epoll descriptor, unreferenced
//! (it never keeps the process alive), whose callback drains the set. The handle is stopped and
//! closed by the environment's clean-up hook; its close callback frees it and drops the set.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::Arc;

use baton::arrival::Arrivals;
use napi::{sys, Env};

/// `UV_POLL` in libuv's `uv_handle_type`.
const UV_POLL: c_int = 8;
/// `UV_READABLE` in libuv's `uv_poll_event`.
const UV_READABLE: c_int = 1;

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
    fn uv_unref(handle: *mut c_void);
}

/// The memory of a `uv_poll_t`, whose first field (`data`, as in every libuv handle) points to
/// the boxed set.
fn layout() -> Layout {
    // SAFETY: a plain query of libuv's handle sizes.
    let size = unsafe { uv_handle_size(UV_POLL) };
    Layout::from_size_align(size.max(std::mem::size_of::<*mut c_void>()), 16)
        .expect("a uv_poll_t layout")
}

unsafe extern "C" fn on_readable(handle: *mut c_void, _status: c_int, _events: c_int) {
    // SAFETY: `data` holds the `Box<Arc<Arrivals>>` set by `watch` until the close callback.
    let arrivals = unsafe { &*(*handle.cast::<*mut Arc<Arrivals>>()) };
    arrivals.drain();
}

unsafe extern "C" fn on_closed(handle: *mut c_void) {
    // SAFETY: the handle was allocated with `layout()` by `watch`, and `data` holds the box it
    // leaked; libuv is done with the handle once this runs.
    unsafe {
        drop(Box::from_raw(*handle.cast::<*mut Arc<Arrivals>>()));
        dealloc(handle.cast(), layout());
    }
}

/// Watches `arrivals` on `env`'s loop until the environment is torn down. Failing that, calls
/// only lose the early wake-up.
pub(crate) fn watch(env: &Env, arrivals: Arc<Arrivals>) -> napi::Result<()> {
    let mut event_loop = ptr::null_mut();
    // SAFETY: on the JavaScript thread with its live env.
    let status = unsafe { sys::napi_get_uv_event_loop(env.raw(), &mut event_loop) };
    if status != sys::Status::napi_ok || event_loop.is_null() {
        return Err(napi::Error::from_reason(format!(
            "napi_get_uv_event_loop failed (napi status {status})"
        )));
    }
    let layout = layout();
    // SAFETY: a non-zero size.
    let handle = unsafe { alloc_zeroed(layout) }.cast::<c_void>();
    if handle.is_null() {
        return Err(napi::Error::from_reason("cannot allocate a uv_poll_t"));
    }
    let fd = arrivals.fd();
    let data = Box::into_raw(Box::new(arrivals));
    // SAFETY: `handle` is a zeroed allocation of a uv_poll_t's size, initialised here on the
    // loop's own thread; `data` is the handle's first field. On failure nothing was registered
    // with the loop and both are freed here.
    unsafe {
        if uv_poll_init(event_loop, handle, fd) != 0 {
            drop(Box::from_raw(data));
            dealloc(handle.cast(), layout);
            return Err(napi::Error::from_reason("uv_poll_init failed"));
        }
        *handle.cast::<*mut Arc<Arrivals>>() = data;
        uv_unref(handle);
        if uv_poll_start(handle, UV_READABLE, on_readable) != 0 {
            uv_close(handle, on_closed);
            return Err(napi::Error::from_reason("uv_poll_start failed"));
        }
    }
    let handle = Handle(handle);
    env.add_env_cleanup_hook(handle, |h| {
        // SAFETY: run on the loop's thread while the environment is torn down; the handle is
        // live (only this hook closes it).
        unsafe {
            uv_poll_stop(h.0);
            uv_close(h.0, on_closed);
        }
    })?;
    Ok(())
}

/// A libuv handle pointer carried into the clean-up hook.
struct Handle(*mut c_void);
// SAFETY: only used on the loop's thread (the clean-up hook runs there).
unsafe impl Send for Handle {}
