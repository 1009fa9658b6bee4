//! `baton_rwlock`: one side (reader or writer) of a read-write lock on a prefix.

use std::ffi::{c_char, c_void};

use baton::{Hold, RwLock, RwMode};

use crate::callback::baton_userdata_free;
use crate::cancel::baton_cancel;
use crate::client::baton_client;
use crate::error::{baton_result, Failure};
use crate::hold::{baton_hold_lost, baton_lost_callback, free_handle, into_handle, CHold, Held};
use crate::session::baton_lost_reason;
use crate::util::{boundary, boundary_value, handle, null, str_arg};

/// `baton_rwlock_new`'s mode: the reader side (shared with other readers).
pub const BATON_RW_READ: u32 = 1;
/// `baton_rwlock_new`'s mode: the writer side (exclusive).
pub const BATON_RW_WRITE: u32 = 2;

impl CHold for RwLock {
    fn busy(&self) -> String {
        format!(
            "{} is held or waited for by a conflicting contender",
            self.describe()
        )
    }
}

/// One side of the read-write lock on a prefix: readers share it, a writer
/// holds it alone, and contenders are served in the order they arrived (a
/// writer waiting behind readers is not overtaken by later readers). Each
/// acquire creates its own contender key `<prefix>/<name>` valued `read` or
/// `write`, bound to the client's default session. Thread-safe. Freeing a held
/// handle releases it.
pub struct baton_rwlock {
    pub(crate) held: Held<RwLock>,
}

/// Creates a handle of the read-write lock on `prefix` in `mode`
/// (`BATON_RW_READ` or `BATON_RW_WRITE`); not acquired, no request is made.
/// Writes `*rwlock_out` on success; free it with `baton_rwlock_free`.
/// `BATON_INVALID_ARGUMENT` for an empty prefix or another mode.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_rwlock_new(
    client: *const baton_client,
    prefix: *const c_char,
    mode: u32,
    rwlock_out: *mut *mut baton_rwlock,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let prefix = unsafe { str_arg(prefix, "prefix") }?;
        if rwlock_out.is_null() {
            return Err(null("rwlock_out"));
        }
        let mode = match mode {
            BATON_RW_READ => RwMode::Read,
            BATON_RW_WRITE => RwMode::Write,
            other => {
                return Err(Failure::new(
                    baton_result::BATON_INVALID_ARGUMENT,
                    format!("mode {other} is neither BATON_RW_READ (1) nor BATON_RW_WRITE (2)"),
                ))
            }
        };
        let l = c.rw_lock(prefix, mode)?;
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { into_handle(baton_rwlock { held: Held::new(l) }, rwlock_out) };
        Ok(())
    })
}

/// Acquires this side, waiting up to `timeout_ms` (0 tries once;
/// `BATON_WAIT_FOREVER` waits without limit): a reader once no writer that
/// arrived before it waits or holds, a writer once every earlier contender has
/// left. `BATON_OK` when held; `BATON_TIMEOUT` when not by then (its contender
/// key is removed again); `BATON_CANCELLED` through `cancel` (may be NULL);
/// `BATON_CONFLICT` when this handle holds it already (`Lock already held`) or
/// the prefix holds keys that are not a read-write lock's;
/// `BATON_CONNECTION` as for `baton_lock_acquire`.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_rwlock_acquire(
    rwlock: *const baton_rwlock,
    timeout_ms: u64,
    cancel: *const baton_cancel,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or live handles.
        unsafe { handle(rwlock, "rwlock")?.held.acquire(timeout_ms, cancel) }
    })
}

/// Releases it (deletes this handle's contender key). `BATON_NOT_HELD` if this
/// handle does not hold it; the last error message says why, as for
/// `baton_lock_release`.
#[no_mangle]
pub unsafe extern "C" fn baton_rwlock_release(rwlock: *const baton_rwlock) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { handle(rwlock, "rwlock") }?.held.release()
    })
}

/// Whether this handle holds its side: acquired, not released, not lost, and
/// its session within its local deadline. False for NULL and in a forked child.
#[no_mangle]
pub unsafe extern "C" fn baton_rwlock_is_held(rwlock: *const baton_rwlock) -> bool {
    boundary_value(false, || {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { rwlock.as_ref() }.is_some_and(|l| l.held.is_held())
    })
}

/// The current holding's sequencer (of its contender key) and fencing token;
/// as `baton_lock_sequencer`, except that the contender key is longer than the
/// prefix: ask for the length with `buf = NULL, len = 0`. `BATON_NOT_HELD`
/// when not held.
#[no_mangle]
pub unsafe extern "C" fn baton_rwlock_sequencer(
    rwlock: *const baton_rwlock,
    buf: *mut c_char,
    len: usize,
    len_out: *mut usize,
    token_out: *mut u64,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle and valid out pointers.
        unsafe {
            handle(rwlock, "rwlock")?
                .held
                .sequencer(buf, len, len_out, token_out)
        }
    })
}

/// Registers `callback`, called once when a holding is lost (contender key
/// deleted or no longer ours: `BATON_HOLD_KEY_CHANGED`; or the session was
/// lost); not for a release. See `baton_lost_callback` for the contract.
#[no_mangle]
pub unsafe extern "C" fn baton_rwlock_on_lost(
    rwlock: *const baton_rwlock,
    callback: baton_lost_callback,
    userdata: *mut c_void,
    userdata_free: baton_userdata_free,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { handle(rwlock, "rwlock") }?
            .held
            .on_lost(callback, userdata, userdata_free)
    })
}

/// Blocks until the current holding ends; as `baton_lock_wait_lost`.
#[no_mangle]
pub unsafe extern "C" fn baton_rwlock_wait_lost(
    rwlock: *const baton_rwlock,
    timeout_ms: u64,
    cancel: *const baton_cancel,
    reason_out: *mut baton_hold_lost,
    session_reason_out: *mut baton_lost_reason,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or live handles and writable out pointers.
        unsafe {
            handle(rwlock, "rwlock")?.held.wait_lost(
                timeout_ms,
                cancel,
                reason_out,
                session_reason_out,
            )
        }
    })
}

/// Frees a read-write lock handle: removes its callbacks (as
/// `baton_lock_free`), then releases it if held. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn baton_rwlock_free(rwlock: *mut baton_rwlock) {
    boundary_value((), || {
        // SAFETY: NULL or a pointer from baton_rwlock_new, freed once.
        unsafe { free_handle(rwlock, |l: &baton_rwlock| &l.held) }
    })
}
