//! `baton_multilock`: one lock on several keys at once, all or none.

use std::ffi::{c_char, c_void};

use baton::{Hold, MultiLock, MultiLockOptions};

use crate::agent::str_list;
use crate::callback::baton_userdata_free;
use crate::cancel::baton_cancel;
use crate::client::baton_client;
use crate::election::BATON_LOCK_FLAGS;
use crate::error::{baton_result, Failure};
use crate::hold::{baton_hold_lost, baton_lost_callback, free_handle, into_handle, CHold, Held};
use crate::session::{baton_lost_reason, baton_session};
use crate::util::{boundary, boundary_value, bytes_arg, copy_str_out, handle, null, write_opt};

impl CHold for MultiLock {
    fn busy(&self) -> String {
        format!("{} has a key held by another session", self.describe())
    }
}

/// A lock on a set of keys, taken in one transaction: all of them or none.
/// Every key is written in Go's `api.Lock` format, so a `baton_lock` (or a Go
/// `api.Lock`) on any one key excludes it. Thread-safe. Freeing a held
/// multi-key lock releases it.
pub struct baton_multilock {
    pub(crate) held: Held<MultiLock>,
}

/// Options for `baton_multilock_new`. Start from `baton_multilock_options_default()`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct baton_multilock_options {
    /// The session to hold the keys with; NULL: the client's default session.
    /// Read during the call.
    pub session: *const baton_session,
    /// The value written to every key while held (`value_len` bytes; NULL when
    /// 0). Copied during the call.
    pub value: *const u8,
    /// The length of `value`.
    pub value_len: usize,
    /// The flags every key is written with and an existing key must carry:
    /// `BATON_LOCK_FLAGS` (the default: excludes `baton_lock` and Go's
    /// `api.Lock` on the same key), or 0 for keys written without flags.
    pub flags: u64,
}

/// The default multi-key lock options: the client's default session, an empty
/// value, `BATON_LOCK_FLAGS`.
#[no_mangle]
pub extern "C" fn baton_multilock_options_default() -> baton_multilock_options {
    baton_multilock_options {
        session: std::ptr::null(),
        value: std::ptr::null(),
        value_len: 0,
        flags: BATON_LOCK_FLAGS,
    }
}

/// Creates a lock on the `keys_len` keys of `keys` (duplicates are dropped,
/// the rest sorted; not acquired, no request is made). `options` may be NULL.
/// Writes `*multilock_out` on success; free it with `baton_multilock_free`.
/// `BATON_INVALID_ARGUMENT` for no keys, an empty or malformed key, or more
/// than Consul's transaction allows (64 keys).
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_multilock_new(
    client: *const baton_client,
    keys: *const *const c_char,
    keys_len: usize,
    options: *const baton_multilock_options,
    multilock_out: *mut *mut baton_multilock,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        if keys.is_null() {
            return Err(null("keys"));
        }
        // SAFETY: the caller guarantees `keys_len` readable string pointers at `keys`.
        let list = unsafe { str_list(keys, keys_len, "keys") }?;
        if multilock_out.is_null() {
            return Err(null("multilock_out"));
        }
        // SAFETY: the caller passes NULL or a valid options struct.
        let o = unsafe { options.as_ref() }
            .copied()
            .unwrap_or_else(|| baton_multilock_options_default());
        // SAFETY: the caller guarantees `value_len` readable bytes at `value`.
        let value = unsafe { bytes_arg(o.value, o.value_len, "options.value") }?;
        let mut mo = MultiLockOptions::new().value(value).flags(o.flags);
        // SAFETY: the caller passes NULL or a live session handle.
        if let Some(s) = unsafe { o.session.as_ref() } {
            mo = mo.session(s.get()?.clone());
        }
        let refs: Vec<&str> = list.iter().map(String::as_str).collect();
        let m = c.multi_lock_with(&refs, mo)?;
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { into_handle(baton_multilock { held: Held::new(m) }, multilock_out) };
        Ok(())
    })
}

/// Acquires every key, waiting up to `timeout_ms` (0 tries once;
/// `BATON_WAIT_FOREVER` waits without limit). `BATON_OK` when all are held;
/// `BATON_TIMEOUT` when not by then, holding none of them; `BATON_CANCELLED`
/// through `cancel` (may be NULL), holding none; `BATON_CONFLICT` when this
/// handle holds them already (`Lock already held`) or a key is used by
/// something other than a lock with these flags; `BATON_CONNECTION` as for
/// `baton_lock_acquire`.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_multilock_acquire(
    multilock: *const baton_multilock,
    timeout_ms: u64,
    cancel: *const baton_cancel,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or live handles.
        unsafe {
            handle(multilock, "multilock")?
                .held
                .acquire(timeout_ms, cancel)
        }
    })
}

/// Releases every key in one transaction (no lock-delay applies).
/// `BATON_NOT_HELD` if this handle does not hold them; the last error message
/// says why, as for `baton_lock_release`.
#[no_mangle]
pub unsafe extern "C" fn baton_multilock_release(
    multilock: *const baton_multilock,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { handle(multilock, "multilock") }?.held.release()
    })
}

/// Whether this handle holds every key. False for NULL and in a forked child.
#[no_mangle]
pub unsafe extern "C" fn baton_multilock_is_held(multilock: *const baton_multilock) -> bool {
    boundary_value(false, || {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { multilock.as_ref() }.is_some_and(|m| m.held.is_held())
    })
}

/// The number of distinct keys (after dropping duplicates); 0 for NULL.
#[no_mangle]
pub unsafe extern "C" fn baton_multilock_key_count(multilock: *const baton_multilock) -> usize {
    boundary_value(0, || {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { multilock.as_ref() }.map_or(0, |m| m.held.inner.keys().len())
    })
}

/// Copies key number `index` (in sorted order, the order of the transaction),
/// NUL-terminated, into `buf` of `len` bytes; `*len_out` (if not NULL) gets
/// its length without the NUL, also with `BATON_BUFFER_TOO_SMALL`.
/// `BATON_INVALID_ARGUMENT` for an index past `baton_multilock_key_count`.
#[no_mangle]
pub unsafe extern "C" fn baton_multilock_key(
    multilock: *const baton_multilock,
    index: usize,
    buf: *mut c_char,
    len: usize,
    len_out: *mut usize,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let m = unsafe { handle(multilock, "multilock") }?.held.get()?;
        let Some(k) = m.keys().get(index) else {
            return Err(bad_index(index, m.keys().len()));
        };
        // SAFETY: the caller guarantees `buf`/`len` and `len_out`.
        unsafe { copy_str_out(k.as_bytes(), buf, len, len_out) }
    })
}

fn bad_index(index: usize, n: usize) -> Failure {
    Failure::new(
        baton_result::BATON_INVALID_ARGUMENT,
        format!("index {index} is past the {n} keys of the multi-key lock"),
    )
}

/// The current holding's sequencer for its first key (in sorted order) and
/// its fencing token, which every key shares (one raft write); as
/// `baton_lock_sequencer`. A buffer of `BATON_SEQUENCER_MAX(strlen(key))`
/// bytes for the longest key always fits. `BATON_NOT_HELD` when not held.
#[no_mangle]
pub unsafe extern "C" fn baton_multilock_sequencer(
    multilock: *const baton_multilock,
    buf: *mut c_char,
    len: usize,
    len_out: *mut usize,
    token_out: *mut u64,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle and valid out pointers.
        unsafe {
            handle(multilock, "multilock")?
                .held
                .sequencer(buf, len, len_out, token_out)
        }
    })
}

/// The current holding's sequencer for key number `index` (the order of
/// `baton_multilock_key`), for storage that fences on that key; as
/// `baton_multilock_sequencer`. `BATON_NOT_HELD` when not held;
/// `BATON_INVALID_ARGUMENT` for an index past the keys.
#[no_mangle]
pub unsafe extern "C" fn baton_multilock_sequencer_at(
    multilock: *const baton_multilock,
    index: usize,
    buf: *mut c_char,
    len: usize,
    len_out: *mut usize,
    token_out: *mut u64,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let m = unsafe { handle(multilock, "multilock") }?.held.get()?;
        let n = m.keys().len();
        if index >= n {
            return Err(bad_index(index, n));
        }
        let seqs = m.sequencers();
        let Some(seq) = seqs.get(index) else {
            return Err(Failure::new(
                baton_result::BATON_NOT_HELD,
                format!("{} is not held: there is no sequencer", m.describe()),
            ));
        };
        // SAFETY: the caller guarantees `buf`/`len`, `len_out` and `token_out`.
        unsafe {
            write_opt(token_out, seq.token);
            copy_str_out(seq.to_string().as_bytes(), buf, len, len_out)
        }
    })
}

/// Registers `callback`, called once when a holding is lost (any one key no
/// longer ours: `BATON_HOLD_KEY_CHANGED`; or the session was lost); not for a
/// release. See `baton_lost_callback` for the contract.
#[no_mangle]
pub unsafe extern "C" fn baton_multilock_on_lost(
    multilock: *const baton_multilock,
    callback: baton_lost_callback,
    userdata: *mut c_void,
    userdata_free: baton_userdata_free,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { handle(multilock, "multilock") }?
            .held
            .on_lost(callback, userdata, userdata_free)
    })
}

/// Blocks until the current holding ends; as `baton_lock_wait_lost`.
#[no_mangle]
pub unsafe extern "C" fn baton_multilock_wait_lost(
    multilock: *const baton_multilock,
    timeout_ms: u64,
    cancel: *const baton_cancel,
    reason_out: *mut baton_hold_lost,
    session_reason_out: *mut baton_lost_reason,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or live handles and writable out pointers.
        unsafe {
            handle(multilock, "multilock")?.held.wait_lost(
                timeout_ms,
                cancel,
                reason_out,
                session_reason_out,
            )
        }
    })
}

/// Frees a multi-key lock: removes its callbacks (as `baton_lock_free`), then
/// releases the keys if held. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn baton_multilock_free(multilock: *mut baton_multilock) {
    boundary_value((), || {
        // SAFETY: NULL or a pointer from baton_multilock_new, freed once.
        unsafe { free_handle(multilock, |m: &baton_multilock| &m.held) }
    })
}
