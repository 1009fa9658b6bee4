//! `baton_barrier` (one key: wait while it is up) and `baton_double_barrier`
//! (enter together, leave together).

use std::ffi::c_char;

use baton::{Barrier, DoubleBarrier};

use crate::cancel::baton_cancel;
use crate::client::baton_client;
use crate::error::{baton_result, Failure};
use crate::hold::into_handle;
use crate::session::baton_session;
use crate::util::{
    boundary, boundary_value, check_pid, handle, null, str_arg, timeout_ms, write_opt,
};

/// A barrier on one KV key: while the key is there, `baton_barrier_wait`
/// blocks; once it is removed every waiter goes on. Any process may raise or
/// lower it (the key carries no owner). Thread-safe; freeing it leaves the key
/// as it is.
pub struct baton_barrier {
    barrier: Barrier,
    pid: u32,
}

impl baton_barrier {
    fn get(&self) -> Result<&Barrier, Failure> {
        check_pid(self.pid)?;
        Ok(&self.barrier)
    }
}

/// Creates a barrier on `key` (nothing is written until `baton_barrier_hold`).
/// Writes `*barrier_out` on success; free it with `baton_barrier_free`.
/// `BATON_INVALID_ARGUMENT` for an empty or malformed key.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_barrier_new(
    client: *const baton_client,
    key: *const c_char,
    barrier_out: *mut *mut baton_barrier,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let key = unsafe { str_arg(key, "key") }?;
        if barrier_out.is_null() {
            return Err(null("barrier_out"));
        }
        let b = c.barrier(key)?;
        let h = baton_barrier {
            barrier: b,
            pid: std::process::id(),
        };
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { into_handle(h, barrier_out) };
        Ok(())
    })
}

/// Raises the barrier: creates its key unless it exists. `*raised_out` (if not
/// NULL) says whether this call raised it (false: it was up already).
/// `session` NULL writes a plain key, which stays up until someone releases it
/// whatever happens to this process; a session binds the key to it, so the
/// barrier falls when the session ends (`BATON_CONFLICT` naming the lock-delay
/// while a previous session's lock-delay holds the key back;
/// `BATON_SESSION_INVALIDATED` for a lost session).
#[no_mangle]
pub unsafe extern "C" fn baton_barrier_hold(
    barrier: *const baton_barrier,
    session: *const baton_session,
    raised_out: *mut bool,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let b = unsafe { handle(barrier, "barrier") }?.get()?;
        // SAFETY: the caller passes NULL or a live session handle.
        let raised = match unsafe { session.as_ref() } {
            Some(s) => b.hold_with_session(s.get()?)?,
            None => b.hold()?,
        };
        // SAFETY: NULL or writable per the caller.
        unsafe { write_opt(raised_out, raised) };
        Ok(())
    })
}

/// Lowers the barrier: deletes its key (check-and-set, so a barrier raised
/// again meanwhile is not taken down unseen). `*lowered_out` (if not NULL)
/// says whether this call lowered a raised barrier (false: it was not up).
#[no_mangle]
pub unsafe extern "C" fn baton_barrier_release(
    barrier: *const baton_barrier,
    lowered_out: *mut bool,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let b = unsafe { handle(barrier, "barrier") }?.get()?;
        let lowered = b.release()?;
        // SAFETY: NULL or writable per the caller.
        unsafe { write_opt(lowered_out, lowered) };
        Ok(())
    })
}

/// Whether the barrier is up now (one read of the key), into `*held_out`.
#[no_mangle]
pub unsafe extern "C" fn baton_barrier_is_held(
    barrier: *const baton_barrier,
    held_out: *mut bool,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let b = unsafe { handle(barrier, "barrier") }?.get()?;
        if held_out.is_null() {
            return Err(null("held_out"));
        }
        let held = b.is_held()?;
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { held_out.write(held) };
        Ok(())
    })
}

/// Blocks until the barrier is down: `BATON_OK` at once if it is not up, else
/// as soon as Consul reports it released (or fallen, for a session-bound
/// hold). `BATON_TIMEOUT` when still up at `timeout_ms` (0 looks once;
/// `BATON_WAIT_FOREVER` no limit); `BATON_CANCELLED` through `cancel` (may be
/// NULL); `BATON_CONNECTION` when no request of the wait got an answer.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_barrier_wait(
    barrier: *const baton_barrier,
    timeout_ms_: u64,
    cancel: *const baton_cancel,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let b = unsafe { handle(barrier, "barrier") }?.get()?;
        // SAFETY: the caller passes NULL or a live cancel handle.
        let cancel = unsafe { cancel.as_ref() }.map(|c| &c.token);
        if b.wait(timeout_ms(timeout_ms_), cancel)? {
            Ok(())
        } else {
            Err(Failure::new(
                baton_result::BATON_TIMEOUT,
                format!("barrier {:?} still up after {timeout_ms_} ms", b.key()),
            ))
        }
    })
}

/// Frees a barrier handle; the key stays as it is. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn baton_barrier_free(barrier: *mut baton_barrier) {
    boundary_value((), || {
        if barrier.is_null() {
            return;
        }
        // SAFETY: a pointer from baton_barrier_new, freed once.
        let b = unsafe { Box::from_raw(barrier) };
        if b.pid == std::process::id() {
            drop(b);
        } else {
            std::mem::forget(b);
        }
    })
}

/// One participant of a double barrier of `count` participants on a prefix:
/// `baton_double_barrier_enter` returns once `count` participants are there,
/// `baton_double_barrier_leave` once all of them have left. Each participant
/// key is bound to a session, so a dead participant stops counting. A handle
/// enters, leaves, then may enter again. Thread-safe; freeing a handle that
/// entered and has not left removes its key without waiting.
pub struct baton_double_barrier {
    barrier: DoubleBarrier,
    pid: u32,
}

impl baton_double_barrier {
    fn get(&self) -> Result<&DoubleBarrier, Failure> {
        check_pid(self.pid)?;
        Ok(&self.barrier)
    }
}

/// Creates a participant of the double barrier of `count` participants (1 to
/// 126) on `prefix`, registered under `session` (NULL: the client's default
/// session); no request is made. Writes `*double_barrier_out` on success; free
/// it with `baton_double_barrier_free`. `BATON_INVALID_ARGUMENT` for an empty
/// prefix or a count out of range.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_double_barrier_new(
    client: *const baton_client,
    prefix: *const c_char,
    count: usize,
    session: *const baton_session,
    double_barrier_out: *mut *mut baton_double_barrier,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let prefix = unsafe { str_arg(prefix, "prefix") }?;
        if double_barrier_out.is_null() {
            return Err(null("double_barrier_out"));
        }
        // SAFETY: the caller passes NULL or a live session handle.
        let b = match unsafe { session.as_ref() } {
            Some(s) => c.double_barrier_with_session(prefix, count, s.get()?.clone())?,
            None => c.double_barrier(prefix, count)?,
        };
        let h = baton_double_barrier {
            barrier: b,
            pid: std::process::id(),
        };
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { into_handle(h, double_barrier_out) };
        Ok(())
    })
}

/// Registers this participant and waits until a round of `count`
/// participants that counts it opens: `BATON_OK` once entered;
/// `BATON_TIMEOUT` at `timeout_ms` (0: enters only if this participant
/// completes a round; `BATON_WAIT_FOREVER` no limit), leaving nothing behind;
/// `BATON_CANCELLED` through `cancel` (may be NULL); `BATON_CONFLICT` when
/// this handle entered already, or the prefix holds another count's round.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_double_barrier_enter(
    double_barrier: *const baton_double_barrier,
    timeout_ms_: u64,
    cancel: *const baton_cancel,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let b = unsafe { handle(double_barrier, "double_barrier") }?.get()?;
        // SAFETY: the caller passes NULL or a live cancel handle.
        let cancel = unsafe { cancel.as_ref() }.map(|c| &c.token);
        if b.enter(timeout_ms(timeout_ms_), cancel)? {
            Ok(())
        } else {
            Err(Failure::new(
                baton_result::BATON_TIMEOUT,
                format!(
                    "double barrier {:?}: {} participants not there within {timeout_ms_} ms",
                    b.prefix(),
                    b.count()
                ),
            ))
        }
    })
}

/// Leaves: removes this participant's key, then waits until every participant
/// of its round has left. `BATON_OK` then; `BATON_TIMEOUT` at `timeout_ms`
/// (this participant has left either way); `BATON_CANCELLED` through
/// `cancel`; `BATON_CONFLICT` when this handle has not entered.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_double_barrier_leave(
    double_barrier: *const baton_double_barrier,
    timeout_ms_: u64,
    cancel: *const baton_cancel,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let b = unsafe { handle(double_barrier, "double_barrier") }?.get()?;
        // SAFETY: the caller passes NULL or a live cancel handle.
        let cancel = unsafe { cancel.as_ref() }.map(|c| &c.token);
        if b.leave(timeout_ms(timeout_ms_), cancel)? {
            Ok(())
        } else {
            Err(Failure::new(
                baton_result::BATON_TIMEOUT,
                format!(
                    "double barrier {:?}: others of the round still there after {timeout_ms_} ms",
                    b.prefix()
                ),
            ))
        }
    })
}

/// Whether this handle has entered and not yet left. False for NULL.
#[no_mangle]
pub unsafe extern "C" fn baton_double_barrier_is_entered(
    double_barrier: *const baton_double_barrier,
) -> bool {
    boundary_value(false, || {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { double_barrier.as_ref() }
            .and_then(|b| b.get().ok())
            .is_some_and(DoubleBarrier::is_entered)
    })
}

/// Frees a participant; one that entered and has not left has its key removed
/// (without waiting for the others). NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn baton_double_barrier_free(double_barrier: *mut baton_double_barrier) {
    boundary_value((), || {
        if double_barrier.is_null() {
            return;
        }
        // SAFETY: a pointer from baton_double_barrier_new, freed once.
        let b = unsafe { Box::from_raw(double_barrier) };
        if b.pid == std::process::id() {
            drop(b);
        } else {
            std::mem::forget(b);
        }
    })
}
