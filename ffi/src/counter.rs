//! `baton_counter`: a 64-bit counter in one KV key, changed by check-and-set;
//! `baton_counter_watch`: follow its value.

use std::ffi::c_char;
use std::sync::Mutex;

use baton::{Counter, CounterWatch};

use crate::cancel::baton_cancel;
use crate::client::baton_client;
use crate::error::{baton_result, Failure};
use crate::hold::into_handle;
use crate::util::{boundary, boundary_value, check_pid, handle, null, str_arg, timeout_ms};

/// A counter kept in one KV key (its decimal value; an absent key is 0).
/// Every change but `baton_counter_set` is a read then a check-and-set write,
/// retried when another writer won, so concurrent adds from any number of
/// processes all count, exactly once each. The key is not bound to a session:
/// the value outlives the process. Thread-safe.
pub struct baton_counter {
    counter: Counter,
    pid: u32,
}

impl baton_counter {
    fn get(&self) -> Result<&Counter, Failure> {
        check_pid(self.pid)?;
        Ok(&self.counter)
    }
}

/// Creates a counter in `key` (no request is made). Writes `*counter_out` on
/// success; free it with `baton_counter_free`. `BATON_INVALID_ARGUMENT` for an
/// empty or malformed key.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_counter_new(
    client: *const baton_client,
    key: *const c_char,
    counter_out: *mut *mut baton_counter,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let key = unsafe { str_arg(key, "key") }?;
        if counter_out.is_null() {
            return Err(null("counter_out"));
        }
        let counter = c.counter(key)?;
        let h = baton_counter {
            counter,
            pid: std::process::id(),
        };
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { into_handle(h, counter_out) };
        Ok(())
    })
}

/// Reads the value into `*value_out` (0 when the key is absent; a consistent
/// read) and, if `index_out` is not NULL, the key's ModifyIndex into
/// `*index_out` (0 when absent). `BATON_BAD_RESPONSE` when the key holds
/// something else than a counter value.
#[no_mangle]
pub unsafe extern "C" fn baton_counter_get(
    counter: *const baton_counter,
    value_out: *mut i64,
    index_out: *mut u64,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(counter, "counter") }?.get()?;
        if value_out.is_null() {
            return Err(null("value_out"));
        }
        let (v, index) = c.get_with_index()?;
        // SAFETY: checked non-NULL / NULL-or-writable per the caller.
        unsafe {
            value_out.write(v);
            crate::util::write_opt(index_out, index);
        }
        Ok(())
    })
}

/// Writes `value` whatever the key holds (a plain write): a reset, or the
/// repair of a key that holds something else.
#[no_mangle]
pub unsafe extern "C" fn baton_counter_set(
    counter: *const baton_counter,
    value: i64,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(counter, "counter") }?.get()?;
        c.set(value)?;
        Ok(())
    })
}

/// Adds `delta` atomically; the new value goes to `*value_out` (if not NULL).
/// `delta` 0 only reads. `BATON_INVALID_ARGUMENT` when the sum overflows
/// (nothing written); `BATON_BAD_RESPONSE` when the key holds something else;
/// `BATON_CONFLICT` after 1,000 lost writes in a row (nothing written).
#[no_mangle]
pub unsafe extern "C" fn baton_counter_add(
    counter: *const baton_counter,
    delta: i64,
    value_out: *mut i64,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(counter, "counter") }?.get()?;
        let v = c.add(delta)?;
        // SAFETY: NULL or writable per the caller.
        unsafe { crate::util::write_opt(value_out, v) };
        Ok(())
    })
}

/// Writes `new_value` if the value is `expected`, atomically; `*swapped_out`
/// says whether it did (an absent key is 0, so `expected` 0 creates it).
/// `BATON_BAD_RESPONSE` when the key holds something else.
#[no_mangle]
pub unsafe extern "C" fn baton_counter_compare_and_set(
    counter: *const baton_counter,
    expected: i64,
    new_value: i64,
    swapped_out: *mut bool,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(counter, "counter") }?.get()?;
        if swapped_out.is_null() {
            return Err(null("swapped_out"));
        }
        let swapped = c.compare_and_set(expected, new_value)?;
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { swapped_out.write(swapped) };
        Ok(())
    })
}

/// Frees a counter handle (the key stays). NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn baton_counter_free(counter: *mut baton_counter) {
    boundary_value((), || {
        if counter.is_null() {
            return;
        }
        // SAFETY: a pointer from baton_counter_new, freed once.
        let b = unsafe { Box::from_raw(counter) };
        if b.pid == std::process::id() {
            drop(b);
        } else {
            std::mem::forget(b);
        }
    })
}

/// A watch of a counter's value. Watches of one key on one client share one
/// long poll. Use it from one thread at a time (a second `next` on another
/// thread waits for the first).
pub struct baton_counter_watch {
    watch: Mutex<CounterWatch>,
    pid: u32,
}

/// Starts watching the counter's value. Writes `*watch_out` on success; free
/// it with `baton_counter_watch_free`.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_counter_watch_new(
    counter: *const baton_counter,
    watch_out: *mut *mut baton_counter_watch,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(counter, "counter") }?.get()?;
        if watch_out.is_null() {
            return Err(null("watch_out"));
        }
        let w = c.watch()?;
        let h = baton_counter_watch {
            watch: Mutex::new(w),
            pid: std::process::id(),
        };
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { into_handle(h, watch_out) };
        Ok(())
    })
}

/// Waits up to `timeout_ms` (0 only looks; `BATON_WAIT_FOREVER` no limit) for
/// the next value that differs from the one this watch returned last (the
/// first call: the current value, 0 for an absent key) and writes it to
/// `*value_out`. `BATON_TIMEOUT` when nothing changed in time (`*value_out`
/// untouched); `BATON_CANCELLED` through `cancel` (may be NULL);
/// `BATON_BAD_RESPONSE` once when the key comes to hold something else (the
/// watch goes on); `BATON_CLOSED` when the client closes.
#[no_mangle]
pub unsafe extern "C" fn baton_counter_watch_next(
    watch: *const baton_counter_watch,
    timeout_ms_: u64,
    cancel: *const baton_cancel,
    value_out: *mut i64,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let w = unsafe { handle(watch, "watch") }?;
        check_pid(w.pid)?;
        if value_out.is_null() {
            return Err(null("value_out"));
        }
        // SAFETY: the caller passes NULL or a live cancel handle.
        let cancel = unsafe { cancel.as_ref() }.map(|c| &c.token);
        let mut g = w.watch.lock().unwrap_or_else(|p| p.into_inner());
        match g.next(timeout_ms(timeout_ms_), cancel)? {
            Some(v) => {
                // SAFETY: checked non-NULL; writable per the caller.
                unsafe { value_out.write(v) };
                Ok(())
            }
            None => Err(Failure::new(
                baton_result::BATON_TIMEOUT,
                format!(
                    "counter {:?}: no new value within {timeout_ms_} ms",
                    g.key()
                ),
            )),
        }
    })
}

/// Frees a counter watch (no call may still be using it). NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn baton_counter_watch_free(watch: *mut baton_counter_watch) {
    boundary_value((), || {
        if watch.is_null() {
            return;
        }
        // SAFETY: a pointer from baton_counter_watch_new, freed once.
        let b = unsafe { Box::from_raw(watch) };
        if b.pid == std::process::id() {
            drop(b);
        } else {
            std::mem::forget(b);
        }
    })
}
