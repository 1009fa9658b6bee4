//! Basic KV calls: get, put, delete.

use std::ffi::c_char;

use baton::{QueryOptions, WriteOptions};

use crate::cancel::baton_cancel;
use crate::client::baton_client;
use crate::error::{baton_result, Failure};
use crate::util::{boundary, bytes_arg, copy_bytes_out, handle, null, str_arg};

/// Reads one key. `*found_out` (required) tells whether it exists. The value is
/// copied into `buf` of `len` bytes (not NUL-terminated; `buf` may be NULL when
/// `len` is 0) and its length written to `*value_len_out` (if not NULL), also
/// when the result is `BATON_BUFFER_TOO_SMALL`. `cancel` (may be NULL) cancels
/// the call from another thread.
#[no_mangle]
pub unsafe extern "C" fn baton_kv_get(
    client: *const baton_client,
    key: *const c_char,
    cancel: *const baton_cancel,
    buf: *mut u8,
    len: usize,
    value_len_out: *mut usize,
    found_out: *mut bool,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let key = unsafe { str_arg(key, "key") }?;
        if found_out.is_null() {
            return Err(null("found_out"));
        }
        // SAFETY: the caller passes NULL or a live cancel handle.
        let pair = unsafe { read_entry(c, key, cancel) }?;
        let value = pair.and_then(|p| p.value.or(Some(Vec::new())));
        // SAFETY: found_out checked non-NULL, writable per the caller.
        unsafe { found_out.write(value.is_some()) };
        let v = value.unwrap_or_default();
        // SAFETY: the caller guarantees `buf`/`len` and `value_len_out`.
        unsafe { copy_bytes_out(&v, buf, len, value_len_out) }
    })
}

/// Writes `value` (`len` bytes, may be NULL when `len` is 0) to `key`.
#[no_mangle]
pub unsafe extern "C" fn baton_kv_put(
    client: *const baton_client,
    key: *const c_char,
    value: *const u8,
    len: usize,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let key = unsafe { str_arg(key, "key") }?;
        // SAFETY: NULL (only with len 0) or `len` readable bytes per the caller.
        let v = unsafe { bytes_arg(value, len, "value") }?;
        if !c.kv().put(key, v)? {
            return Err(Failure::new(
                baton_result::BATON_CONFLICT,
                "Consul did not apply the write",
            ));
        }
        Ok(())
    })
}

/// Deletes `key` (no error if it does not exist).
#[no_mangle]
pub unsafe extern "C" fn baton_kv_delete(
    client: *const baton_client,
    key: *const c_char,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let key = unsafe { str_arg(key, "key") }?;
        c.kv().delete(key)?;
        Ok(())
    })
}

/// The size of `baton_kv_entry.session`: a session ID (36 characters) and its NUL.
pub const BATON_SESSION_ID_BUF: usize = 37;

/// What Consul keeps beside a key's value, filled by `baton_kv_get_entry`: what
/// check-and-set (`baton_kv_put_cas`, `baton_kv_delete_cas`, the
/// `BATON_TXN_CAS`/`BATON_TXN_CHECK_INDEX` ops) needs.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct baton_kv_entry {
    /// The Raft index of the key's last change: the `cas` index of a
    /// check-and-set write that must apply only if nothing changed since this read.
    pub modify_index: u64,
    /// The Raft index at which the key was created.
    pub create_index: u64,
    /// How many times a new holder acquired the key's lock.
    pub lock_index: u64,
    /// The opaque flags stored with the value.
    pub flags: u64,
    /// The ID of the session holding the key's lock, NUL-terminated; `""` when
    /// the key is not locked.
    pub session: [c_char; BATON_SESSION_ID_BUF],
}

/// Like `baton_kv_get`, and also writes the key's indexes, flags and lock holder to
/// `*entry_out` (required; all zero and `session` `""` when the key does not
/// exist), also when the result is `BATON_BUFFER_TOO_SMALL`: a size query
/// (`buf = NULL, len = 0`) returns the entry too, and a second call is a new read
/// (the key may have changed in between). `cancel` (may be NULL) cancels the call
/// from another thread. One request, never blocking on a change.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn baton_kv_get_entry(
    client: *const baton_client,
    key: *const c_char,
    cancel: *const baton_cancel,
    buf: *mut u8,
    len: usize,
    value_len_out: *mut usize,
    entry_out: *mut baton_kv_entry,
    found_out: *mut bool,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let key = unsafe { str_arg(key, "key") }?;
        if entry_out.is_null() {
            return Err(null("entry_out"));
        }
        if found_out.is_null() {
            return Err(null("found_out"));
        }
        // SAFETY: the caller passes NULL or a live cancel handle.
        let pair = unsafe { read_entry(c, key, cancel) }?;
        let mut entry = baton_kv_entry {
            modify_index: 0,
            create_index: 0,
            lock_index: 0,
            flags: 0,
            session: [0; BATON_SESSION_ID_BUF],
        };
        if let Some(p) = &pair {
            entry.modify_index = p.modify_index;
            entry.create_index = p.create_index;
            entry.lock_index = p.lock_index;
            entry.flags = p.flags;
            if let Some(s) = &p.session {
                if s.len() >= BATON_SESSION_ID_BUF || s.as_bytes().contains(&0) {
                    return Err(Failure::new(
                        baton_result::BATON_BAD_RESPONSE,
                        format!(
                            "GET /v1/kv/{key}: the lock holder {:?} is not a session ID",
                            s.escape_debug().take(80).collect::<String>()
                        ),
                    ));
                }
                for (d, b) in entry.session.iter_mut().zip(s.as_bytes()) {
                    *d = *b as c_char;
                }
            }
        }
        // SAFETY: both checked non-NULL, writable per the caller.
        unsafe {
            entry_out.write(entry);
            found_out.write(pair.is_some());
        }
        let v = pair.and_then(|p| p.value).unwrap_or_default();
        // SAFETY: the caller guarantees `buf`/`len` and `value_len_out`.
        unsafe { copy_bytes_out(&v, buf, len, value_len_out) }
    })
}

/// Check-and-set write: stores `value` (`len` bytes, may be NULL when `len` is 0)
/// with `flags` under `key` only if the key's ModifyIndex is `cas` (from
/// `baton_kv_get_entry`); `cas` 0 writes only if the key does not exist yet
/// (Consul's rule). `*applied_out` (required) tells whether Consul applied it:
/// `false` when the index no longer matches (someone wrote in between: read again
/// and retry) or, for 0, when the key exists. Not applied is `BATON_OK`; errors are
/// for what went wrong. Consul stores `flags` as given (a CAS write does not keep
/// the old ones). Does not wait: bounded by the client's request timeout.
#[no_mangle]
pub unsafe extern "C" fn baton_kv_put_cas(
    client: *const baton_client,
    key: *const c_char,
    value: *const u8,
    len: usize,
    flags: u64,
    cas: u64,
    applied_out: *mut bool,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let key = unsafe { str_arg(key, "key") }?;
        // SAFETY: NULL only with 0, else `len` readable bytes per the caller.
        let v = unsafe { bytes_arg(value, len, "value") }?;
        if applied_out.is_null() {
            return Err(null("applied_out"));
        }
        let w = WriteOptions {
            flags,
            cas: Some(cas),
            ..WriteOptions::default()
        };
        let applied = c.kv().put_with(key, v, &w)?;
        // SAFETY: checked non-NULL, writable per the caller.
        unsafe { applied_out.write(applied) };
        Ok(())
    })
}

/// Check-and-set delete: deletes `key` only if its ModifyIndex is `index` (from
/// `baton_kv_get_entry`). `*applied_out` (required) is `false` when the key changed
/// since that read (`BATON_OK`: read again and decide); a key that does not exist
/// counts as deleted (`true`), as Consul answers. Does not wait: bounded by the
/// client's request timeout.
#[no_mangle]
pub unsafe extern "C" fn baton_kv_delete_cas(
    client: *const baton_client,
    key: *const c_char,
    index: u64,
    applied_out: *mut bool,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let key = unsafe { str_arg(key, "key") }?;
        if applied_out.is_null() {
            return Err(null("applied_out"));
        }
        let applied = c.kv().delete_cas(key, index)?;
        // SAFETY: checked non-NULL, writable per the caller.
        unsafe { applied_out.write(applied) };
        Ok(())
    })
}

/// One read of `key` (no blocking), cancellable through `cancel`.
///
/// # Safety
/// `cancel` is NULL or a live cancel handle.
unsafe fn read_entry(
    c: &baton::Client,
    key: &str,
    cancel: *const baton_cancel,
) -> Result<Option<baton::KvPair>, Failure> {
    let q = QueryOptions {
        // SAFETY: per this function's contract.
        cancel: unsafe { cancel.as_ref() }.map(|cn| cn.token.clone()),
        ..QueryOptions::default()
    };
    Ok(c.kv().get_with(key, &q)?.0)
}
