//! `baton_lock`: a distributed lock on one key (Go `api.Lock` compatible).

use std::ffi::{c_char, c_void};

use baton::{Lock, LockOptions};

use crate::callback::baton_userdata_free;
use crate::cancel::baton_cancel;
use crate::client::baton_client;
use crate::error::baton_result;
use crate::hold::{baton_hold_lost, baton_lost_callback, free_handle, into_handle, Held};
use crate::session::{baton_lost_reason, baton_session};
use crate::util::{boundary, boundary_value, bytes_arg, copy_bytes_out, handle, null, str_arg};

/// A lock on one key. On the wire it is Go's `api.Lock` (flags
/// `0x2ddccbc058a50c18`), so Go services and baton processes exclude each other.
/// Thread-safe. Freeing a held lock releases it first.
pub struct baton_lock {
    pub(crate) held: Held<Lock>,
}

/// Options for `baton_lock_new`. Start from `baton_lock_options_default()`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct baton_lock_options {
    /// The session to hold the lock with; NULL: the client's default session
    /// (shared, replaced when lost). Read during the call: the lock keeps its own
    /// reference, so the session handle may be freed afterwards.
    pub session: *const baton_session,
    /// The value stored in the key while held (`value_len` bytes; NULL when 0).
    /// Copied during the call.
    pub value: *const u8,
    /// The length of `value`.
    pub value_len: usize,
}

/// The default lock options: the client's default session, an empty value.
#[no_mangle]
pub extern "C" fn baton_lock_options_default() -> baton_lock_options {
    baton_lock_options {
        session: std::ptr::null(),
        value: std::ptr::null(),
        value_len: 0,
    }
}

/// Creates a lock on `key` (not acquired; no request is made). `options` may be
/// NULL. Writes `*lock_out` on success; free it with `baton_lock_free`.
/// `BATON_INVALID_ARGUMENT` for an empty key.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_lock_new(
    client: *const baton_client,
    key: *const c_char,
    options: *const baton_lock_options,
    lock_out: *mut *mut baton_lock,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let key = unsafe { str_arg(key, "key") }?;
        if lock_out.is_null() {
            return Err(null("lock_out"));
        }
        // SAFETY: the caller passes NULL or a valid options struct.
        let o = unsafe { options.as_ref() }
            .copied()
            .unwrap_or_else(|| baton_lock_options_default());
        // SAFETY: the caller guarantees `value_len` readable bytes at `value`.
        let value = unsafe { bytes_arg(o.value, o.value_len, "options.value") }?;
        let mut lo = LockOptions::new().value(value);
        // SAFETY: the caller passes NULL or a live session handle.
        if let Some(s) = unsafe { o.session.as_ref() } {
            lo = lo.session(s.get()?.clone());
        }
        let lock = c.lock_with(key, lo)?;
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe {
            into_handle(
                baton_lock {
                    held: Held::new(lock),
                },
                lock_out,
            )
        };
        Ok(())
    })
}

/// Acquires the lock, waiting up to `timeout_ms` (0 tries once;
/// `BATON_WAIT_FOREVER` waits without limit). `BATON_OK` when held;
/// `BATON_TIMEOUT` when not acquired by then (someone else holds it, or Consul
/// answered but could not decide); `BATON_CONNECTION` when no request of the wait got
/// any answer from Consul (connection refused, unresolvable host, TLS failure,
/// no answer): the message names the address and where it came from;
/// a wait without limit keeps trying and logs a warning instead (see
/// `baton_set_log_callback`);
/// `BATON_CANCELLED` through `cancel` (may be NULL); `BATON_CONFLICT` if this
/// handle holds it already (text `Lock already held`, the code Python and Node
/// report) or the key is used by something other than a lock (Consul's text
/// `Existing key does not match lock use`);
/// `BATON_SESSION_INVALIDATED` if the session given in the options is lost.
/// A key freed by an invalidated session is retried when its lock-delay ends.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_lock_acquire(
    lock: *const baton_lock,
    timeout_ms: u64,
    cancel: *const baton_cancel,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or live handles.
        unsafe { handle(lock, "lock")?.held.acquire(timeout_ms, cancel) }
    })
}

/// Releases the lock: the key keeps its value and loses its session; no
/// lock-delay applies. Lost callbacks are not called for it. `BATON_NOT_HELD`
/// if this handle does not hold it; the last error message says why: never
/// acquired or already released, its client closed, or lost and why (e.g.
/// `release of lock "jobs/a", which is not held: the holding was lost (...)`).
#[no_mangle]
pub unsafe extern "C" fn baton_lock_release(lock: *const baton_lock) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { handle(lock, "lock") }?.held.release()
    })
}

/// Whether this handle holds the lock: acquired, not released, not lost, and
/// its session within its local deadline. False for NULL and in a forked child.
#[no_mangle]
pub unsafe extern "C" fn baton_lock_is_held(lock: *const baton_lock) -> bool {
    boundary_value(false, || {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { lock.as_ref() }.is_some_and(|l| l.held.is_held())
    })
}

/// Copies the lock's value (what it writes to the key; not NUL-terminated) into
/// `buf` of `len` bytes; `*len_out` (if not NULL) gets its length, also with
/// `BATON_BUFFER_TOO_SMALL`. `buf` may be NULL when `len` is 0.
#[no_mangle]
pub unsafe extern "C" fn baton_lock_value(
    lock: *const baton_lock,
    buf: *mut u8,
    len: usize,
    len_out: *mut usize,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let l = unsafe { handle(lock, "lock") }?.held.get()?;
        // SAFETY: the caller guarantees `buf`/`len` and `len_out`.
        unsafe { copy_bytes_out(&l.value(), buf, len, len_out) }
    })
}

/// Sets the value written by the next acquire (and by release). It does not
/// change the key while held; use an election's `proclaim` for that.
#[no_mangle]
pub unsafe extern "C" fn baton_lock_set_value(
    lock: *const baton_lock,
    value: *const u8,
    value_len: usize,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let l = unsafe { handle(lock, "lock") }?.held.get()?;
        // SAFETY: the caller guarantees `value_len` readable bytes at `value`.
        let v = unsafe { bytes_arg(value, value_len, "value") }?;
        l.set_value(v);
        Ok(())
    })
}

/// What a sequencer takes besides its key, NUL included:
/// `<lock_index>:<token>:<session>:<key>` has two 64-bit numbers in decimal (at
/// most 20 digits each), a session ID (always a 36-character UUID), three `:`
/// and the terminating NUL. A buffer of `BATON_SEQUENCER_MAX(strlen(key))`
/// bytes, `key` as given to `baton_lock_new` / `baton_election_new` (a leading
/// `/` is dropped, never added), always holds a sequencer of that lock.
pub const BATON_SEQUENCER_OVERHEAD: usize = 80;
const _: () = assert!(BATON_SEQUENCER_OVERHEAD == 20 + 1 + 20 + 1 + 36 + 1 + 1);

/// Copies the current holding's sequencer, `<lock_index>:<token>:<session>:<key>`,
/// NUL-terminated into `buf` of `len` bytes (`*len_out`, if not NULL, gets its
/// length without the NUL, also with `BATON_BUFFER_TOO_SMALL`), and its fencing
/// token (the acquiring write's raft index, which only grows) into `*token_out`
/// (if not NULL, also with `BATON_BUFFER_TOO_SMALL`). Hand the token to storage
/// that rejects lower ones, or the string to `baton_check_sequencer` /
/// `baton_guarded_put`. `buf = NULL, len = 0` asks only for the length
/// (`BATON_BUFFER_TOO_SMALL`, as `baton_lock_value` does); a buffer of
/// `BATON_SEQUENCER_MAX(strlen(key))` bytes is always large enough (see
/// `BATON_SEQUENCER_OVERHEAD`). `BATON_NOT_HELD` when not held.
#[no_mangle]
pub unsafe extern "C" fn baton_lock_sequencer(
    lock: *const baton_lock,
    buf: *mut c_char,
    len: usize,
    len_out: *mut usize,
    token_out: *mut u64,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle and valid out pointers.
        unsafe {
            handle(lock, "lock")?
                .held
                .sequencer(buf, len, len_out, token_out)
        }
    })
}

/// Registers `callback`, called once when a holding of this lock is lost (key
/// taken or cleared by someone else, session lost); not for a release. See
/// `baton_lost_callback` for the contract. Several callbacks may be registered;
/// they stay registered across holdings until `baton_lock_free`.
#[no_mangle]
pub unsafe extern "C" fn baton_lock_on_lost(
    lock: *const baton_lock,
    callback: baton_lost_callback,
    userdata: *mut c_void,
    userdata_free: baton_userdata_free,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { handle(lock, "lock") }?
            .held
            .on_lost(callback, userdata, userdata_free)
    })
}

/// Blocks until the current holding ends and writes why to `*reason_out` and
/// `*session_reason_out` (each may be NULL); returns at once when not held (with
/// the last reason, or `BATON_HOLD_RELEASED`). `BATON_TIMEOUT` if still held at
/// `timeout_ms`; `BATON_CANCELLED` through `cancel` (may be NULL).
#[no_mangle]
pub unsafe extern "C" fn baton_lock_wait_lost(
    lock: *const baton_lock,
    timeout_ms: u64,
    cancel: *const baton_cancel,
    reason_out: *mut baton_hold_lost,
    session_reason_out: *mut baton_lost_reason,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or live handles and writable out pointers.
        unsafe {
            handle(lock, "lock")?
                .held
                .wait_lost(timeout_ms, cancel, reason_out, session_reason_out)
        }
    })
}

/// Deletes the lock's key if nobody holds it (Go's `Lock.Destroy`), so that an
/// unused lock leaves nothing in the KV store. `BATON_CONFLICT` with
/// `Lock already held` (this handle holds it), `Lock in use` (someone does) or
/// `Existing key does not match lock use`.
#[no_mangle]
pub unsafe extern "C" fn baton_lock_delete_key(lock: *const baton_lock) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let l = unsafe { handle(lock, "lock") }?.held.get()?;
        l.destroy()?;
        Ok(())
    })
}

/// Frees a lock: removes its callbacks (waiting for one running on another
/// thread; `userdata_free` is called for each), then releases the lock if held.
/// May be called from inside the lock's own callback. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn baton_lock_free(lock: *mut baton_lock) {
    boundary_value((), || {
        // SAFETY: NULL or a pointer from baton_lock_new, freed once.
        unsafe { free_handle(lock, |l: &baton_lock| &l.held) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequencer_overhead_bounds_the_longest_sequencer() {
        for key in ["k", "a/b/c", &"x".repeat(1000)] {
            let longest = baton::Sequencer {
                key: key.to_string(),
                session: "adf4238a-882b-9ddc-4a9d-5b6758e4159e".into(),
                lock_index: u64::MAX,
                token: u64::MAX,
            };
            // The string and its NUL fill the bound exactly: nothing longer exists.
            assert_eq!(
                longest.to_string().len() + 1,
                key.len() + BATON_SEQUENCER_OVERHEAD
            );
        }
    }
}
