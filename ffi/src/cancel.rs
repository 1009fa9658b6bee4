//! `baton_cancel`: cancel blocking calls from another thread.

use baton::CancelToken;

use crate::error::baton_result;
use crate::util::{boundary, boundary_value, handle, null};

/// A cancellation signal: pass it to blocking calls, and call `baton_cancel_cancel`
/// from any thread to make them return `BATON_CANCELLED` promptly. Thread-safe.
/// Once cancelled it stays cancelled; make a new one for the next call.
pub struct baton_cancel {
    pub(crate) token: CancelToken,
}

/// Creates a cancellation signal. Writes `*cancel_out` on success; free it with
/// `baton_cancel_free` (after every call that uses it has returned).
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_cancel_new(cancel_out: *mut *mut baton_cancel) -> baton_result {
    boundary(|| {
        if cancel_out.is_null() {
            return Err(null("cancel_out"));
        }
        let b = Box::new(baton_cancel {
            token: CancelToken::new(),
        });
        // SAFETY: checked non-NULL; the caller guarantees it is writable.
        unsafe { cancel_out.write(Box::into_raw(b)) };
        Ok(())
    })
}

/// Cancels: every blocking call using `cancel`, now or later, returns
/// `BATON_CANCELLED`. Idempotent; callable from any thread.
#[no_mangle]
pub unsafe extern "C" fn baton_cancel_cancel(cancel: *const baton_cancel) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(cancel, "cancel") }?;
        c.token.cancel();
        Ok(())
    })
}

/// Whether `baton_cancel_cancel` was called; false for NULL.
#[no_mangle]
pub unsafe extern "C" fn baton_cancel_is_cancelled(cancel: *const baton_cancel) -> bool {
    boundary_value(false, || {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { cancel.as_ref() }.is_some_and(|c| c.token.is_cancelled())
    })
}

/// Blocks until `cancel` is cancelled or `timeout_ms` passes (0 only looks;
/// `BATON_WAIT_FOREVER` waits without limit): `BATON_OK` when it is cancelled,
/// `BATON_TIMEOUT` when the time passed first. For work that waits on a token
/// it was handed, e.g. a leader task's (`baton_leader_task_fn`).
#[no_mangle]
pub unsafe extern "C" fn baton_cancel_wait(
    cancel: *const baton_cancel,
    timeout_ms: u64,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(cancel, "cancel") }?;
        let cancelled = match crate::util::timeout_ms(timeout_ms) {
            Some(d) => c.token.wait_timeout(d),
            None => {
                // Disconnects (an Err) once the token is cancelled; it never yields a value.
                let _ = c.token.receiver().recv();
                true
            }
        };
        if cancelled {
            Ok(())
        } else {
            Err(crate::error::Failure::new(
                baton_result::BATON_TIMEOUT,
                format!("not cancelled within {timeout_ms} ms"),
            ))
        }
    })
}

/// Frees a cancellation signal. NULL is a no-op. No call may still be using it.
#[no_mangle]
pub unsafe extern "C" fn baton_cancel_free(cancel: *mut baton_cancel) {
    boundary_value((), || {
        if !cancel.is_null() {
            // SAFETY: the caller passes a pointer from baton_cancel_new, freed once.
            drop(unsafe { Box::from_raw(cancel) });
        }
    })
}
