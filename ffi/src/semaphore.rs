//! `baton_semaphore`: at most `limit` holders under one prefix (Go `api.Semaphore` compatible).

use std::ffi::{c_char, c_void};

use baton::{Semaphore, SemaphoreOptions};

use crate::callback::baton_userdata_free;
use crate::cancel::baton_cancel;
use crate::client::baton_client;
use crate::error::{baton_result, Failure};
use crate::hold::{baton_hold_lost, baton_lost_callback, free_handle, into_handle, Held};
use crate::session::{baton_lost_reason, baton_session};
use crate::util::{boundary, boundary_value, bytes_arg, handle, null, str_arg};

/// A counting semaphore: contender keys `<prefix>/<session>` plus a `<prefix>/.lock`
/// key holding `{"Limit","Holders"}`, updated by check-and-set, exactly as Go's
/// `api.Semaphore` does. Thread-safe. Freeing a held semaphore releases its slot.
pub struct baton_semaphore {
    pub(crate) held: Held<Semaphore>,
}

/// Options for `baton_semaphore_new`. Start from `baton_semaphore_options_default()`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct baton_semaphore_options {
    /// The session to contend with; NULL: a session of the semaphore's own
    /// (behavior delete, so a dead holder's contender key disappears; destroyed
    /// when the semaphore is freed), as Go's `api.Semaphore` does. A session
    /// holds at most one slot of a given semaphore: semaphores given the same
    /// session take turns in it. Read during the call.
    pub session: *const baton_session,
    /// The value of this holder's contender key (`value_len` bytes; NULL when 0).
    pub value: *const u8,
    /// The length of `value`.
    pub value_len: usize,
}

/// The default semaphore options: a session of the semaphore's own, an empty value.
#[no_mangle]
pub extern "C" fn baton_semaphore_options_default() -> baton_semaphore_options {
    baton_semaphore_options {
        session: std::ptr::null(),
        value: std::ptr::null(),
        value_len: 0,
    }
}

/// Creates a semaphore of `limit` slots (1 or more) under `prefix` (not acquired;
/// no request is made). `options` may be NULL. Writes `*semaphore_out` on success;
/// free it with `baton_semaphore_free`. `BATON_INVALID_ARGUMENT` for an empty
/// prefix or a zero limit.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_semaphore_new(
    client: *const baton_client,
    prefix: *const c_char,
    limit: u32,
    options: *const baton_semaphore_options,
    semaphore_out: *mut *mut baton_semaphore,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let prefix = unsafe { str_arg(prefix, "prefix") }?;
        if semaphore_out.is_null() {
            return Err(null("semaphore_out"));
        }
        if limit == 0 {
            return Err(Failure::new(
                baton_result::BATON_INVALID_ARGUMENT,
                "semaphore limit must be 1 or more",
            ));
        }
        // SAFETY: the caller passes NULL or a valid options struct.
        let o = unsafe { options.as_ref() }
            .copied()
            .unwrap_or_else(|| baton_semaphore_options_default());
        // SAFETY: the caller guarantees `value_len` readable bytes at `value`.
        let value = unsafe { bytes_arg(o.value, o.value_len, "options.value") }?;
        let mut so = SemaphoreOptions::new().value(value);
        // SAFETY: the caller passes NULL or a live session handle.
        if let Some(s) = unsafe { o.session.as_ref() } {
            so = so.session(s.get()?.clone());
        }
        let sem = c.semaphore_with(prefix, u64::from(limit), so)?;
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe {
            into_handle(
                baton_semaphore {
                    held: Held::new(sem),
                },
                semaphore_out,
            )
        };
        Ok(())
    })
}

/// Takes a slot, waiting up to `timeout_ms` (0 tries once; `BATON_WAIT_FOREVER`
/// waits without limit). `BATON_OK` when held; `BATON_TIMEOUT` when all slots
/// stayed taken (the contender key is removed again); `BATON_CONNECTION` when no request of the wait got
/// any answer from Consul (connection refused, unresolvable host, TLS failure,
/// no answer): the message names the address and where it came from;
/// as for `baton_lock_acquire`; `BATON_CANCELLED` through
/// `cancel` (may be NULL); `BATON_CONFLICT` when this handle holds a slot
/// already (`Semaphore already held`), when the stored limit differs (`semaphore limit conflict (lock: N, local: M)`) or the keys are
/// not a semaphore's.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_semaphore_acquire(
    semaphore: *const baton_semaphore,
    timeout_ms: u64,
    cancel: *const baton_cancel,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or live handles.
        unsafe {
            handle(semaphore, "semaphore")?
                .held
                .acquire(timeout_ms, cancel)
        }
    })
}

/// Gives the slot back (removes us from `.lock` and deletes our contender key).
/// `BATON_NOT_HELD` if this handle holds no slot; the last error message says
/// why, as for `baton_lock_release`.
#[no_mangle]
pub unsafe extern "C" fn baton_semaphore_release(
    semaphore: *const baton_semaphore,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { handle(semaphore, "semaphore") }?.held.release()
    })
}

/// Whether this handle holds a slot. False for NULL and in a forked child.
#[no_mangle]
pub unsafe extern "C" fn baton_semaphore_is_held(semaphore: *const baton_semaphore) -> bool {
    boundary_value(false, || {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { semaphore.as_ref() }.is_some_and(|s| s.held.is_held())
    })
}

/// Registers `callback`, called once when a held slot is lost (`BATON_HOLD_REMOVED`:
/// our contender key or our entry in `.lock` was removed; or the session was
/// lost); not for a release. See `baton_lost_callback` for the contract.
#[no_mangle]
pub unsafe extern "C" fn baton_semaphore_on_lost(
    semaphore: *const baton_semaphore,
    callback: baton_lost_callback,
    userdata: *mut c_void,
    userdata_free: baton_userdata_free,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { handle(semaphore, "semaphore") }?
            .held
            .on_lost(callback, userdata, userdata_free)
    })
}

/// Blocks until the held slot is lost or released; as `baton_lock_wait_lost`.
#[no_mangle]
pub unsafe extern "C" fn baton_semaphore_wait_lost(
    semaphore: *const baton_semaphore,
    timeout_ms: u64,
    cancel: *const baton_cancel,
    reason_out: *mut baton_hold_lost,
    session_reason_out: *mut baton_lost_reason,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or live handles and writable out pointers.
        unsafe {
            handle(semaphore, "semaphore")?.held.wait_lost(
                timeout_ms,
                cancel,
                reason_out,
                session_reason_out,
            )
        }
    })
}

/// Deletes `<prefix>/.lock` when no live holder remains (Go's `Semaphore.Destroy`).
/// `BATON_CONFLICT` with `Semaphore already held`, `Semaphore in use`, or the flags conflict.
#[no_mangle]
pub unsafe extern "C" fn baton_semaphore_delete_key(
    semaphore: *const baton_semaphore,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let s = unsafe { handle(semaphore, "semaphore") }?.held.get()?;
        s.destroy()?;
        Ok(())
    })
}

/// Frees a semaphore: removes its callbacks (as `baton_lock_free`), then
/// releases the slot if held. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn baton_semaphore_free(semaphore: *mut baton_semaphore) {
    boundary_value((), || {
        // SAFETY: NULL or a pointer from baton_semaphore_new, freed once.
        unsafe { free_handle(semaphore, |s: &baton_semaphore| &s.held) }
    })
}
