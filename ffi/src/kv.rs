//! Basic KV calls: get, put, delete.

use std::ffi::c_char;

use baton::QueryOptions;

use crate::cancel::baton_cancel;
use crate::client::baton_client;
use crate::error::{baton_result, Failure};
use crate::util::{boundary, copy_bytes_out, handle, null, str_arg};

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
        let mut q = QueryOptions::default();
        // SAFETY: the caller passes NULL or a live cancel handle.
        if let Some(cn) = unsafe { cancel.as_ref() } {
            q.cancel = Some(cn.token.clone());
        }
        let (pair, _) = c.kv().get_with(key, &q)?;
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
        let v: &[u8] = if len == 0 {
            &[]
        } else if value.is_null() {
            return Err(null("value"));
        } else {
            // SAFETY: non-NULL and `len` readable bytes per the caller.
            unsafe { std::slice::from_raw_parts(value, len) }
        };
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
