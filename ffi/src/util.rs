//! The panic boundary and argument helpers shared by every entry point.

use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use crate::error::{baton_result, set_last_error, set_last_failure, Failure};

/// Runs `body` as an entry point: a failure sets the thread's last error and
/// returns its code; a panic becomes `BATON_PANIC`.
pub(crate) fn boundary(body: impl FnOnce() -> Result<(), Failure>) -> baton_result {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => baton_result::BATON_OK,
        Ok(Err(f)) => {
            set_last_failure(&f.message, f.transient);
            f.code
        }
        Err(panic) => {
            set_last_error(&format!("panic in baton: {}", panic_message(&*panic)));
            baton_result::BATON_PANIC
        }
    }
}

/// Runs `body` where only a plain value can be returned; a panic gives `default`.
pub(crate) fn boundary_value<T>(default: T, body: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(panic) => {
            set_last_error(&format!("panic in baton: {}", panic_message(&*panic)));
            default
        }
    }
}

/// The text of a caught panic.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".to_string())
}

/// A NULL-checked reference to a handle.
///
/// # Safety
/// `p` is NULL or points to a live `T` for `'a`.
pub(crate) unsafe fn handle<'a, T>(p: *const T, name: &str) -> Result<&'a T, Failure> {
    // SAFETY: the caller guarantees `p` is NULL or valid for 'a.
    unsafe { p.as_ref() }.ok_or_else(|| null(name))
}

/// The failure for a NULL argument.
pub(crate) fn null(name: &str) -> Failure {
    Failure::new(
        baton_result::BATON_NULL_ARGUMENT,
        format!("argument `{name}` is NULL"),
    )
}

/// A required NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string valid for `'a`.
pub(crate) unsafe fn str_arg<'a>(p: *const c_char, name: &str) -> Result<&'a str, Failure> {
    if p.is_null() {
        return Err(null(name));
    }
    // SAFETY: non-NULL, and the caller guarantees NUL termination and lifetime.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str().map_err(|e| {
        Failure::new(
            baton_result::BATON_INVALID_UTF8,
            format!("argument `{name}` is not valid UTF-8: {e}"),
        )
    })
}

/// An optional string argument: NULL gives `None`.
///
/// # Safety
/// As [`str_arg`].
pub(crate) unsafe fn opt_str_arg<'a>(
    p: *const c_char,
    name: &str,
) -> Result<Option<&'a str>, Failure> {
    if p.is_null() {
        Ok(None)
    } else {
        // SAFETY: forwarded caller guarantee.
        unsafe { str_arg(p, name) }.map(Some)
    }
}

/// Timeouts of this length or more mean "no limit" (`Instant + Duration` must not overflow).
const FOREVER_FROM: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// A millisecond timeout: `None` for `BATON_WAIT_FOREVER` and anything at least ten years.
pub(crate) fn timeout_ms(ms: u64) -> Option<Duration> {
    let d = Duration::from_millis(ms);
    (d < FOREVER_FROM).then_some(d)
}

/// Writes `value` to an out-parameter if it is not NULL.
///
/// # Safety
/// `out` is NULL or valid for a write of `T`.
pub(crate) unsafe fn write_opt<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { out.write(value) };
    }
}

/// Copies `bytes` plus a NUL into `buf` of `len` bytes, reporting the string's
/// length (without NUL) through `len_out`; `BATON_BUFFER_TOO_SMALL` if it does not fit.
/// As with `copy_bytes_out`, the size is checked first, so `buf = NULL, len = 0`
/// is a size query (`BATON_BUFFER_TOO_SMALL` with the length in `*len_out`);
/// `buf = NULL` with a large enough `len` is `BATON_NULL_ARGUMENT`.
///
/// # Safety
/// `buf` is NULL or valid for `len` writable bytes; `len_out` NULL or writable.
pub(crate) unsafe fn copy_str_out(
    bytes: &[u8],
    buf: *mut c_char,
    len: usize,
    len_out: *mut usize,
) -> Result<(), Failure> {
    // SAFETY: forwarded caller guarantee.
    unsafe { write_opt(len_out, bytes.len()) };
    if len < bytes.len() + 1 {
        return Err(Failure::new(
            baton_result::BATON_BUFFER_TOO_SMALL,
            format!("buffer of {len} bytes, {} needed", bytes.len() + 1),
        ));
    }
    if buf.is_null() {
        return Err(null("buf"));
    }
    // SAFETY: buf has len >= bytes.len() + 1 writable bytes, distinct from `bytes`.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
        *buf.add(bytes.len()) = 0;
    }
    Ok(())
}

/// The process the library's handles belong to; a handle used in another
/// process (after `fork()`) gives `BATON_FORKED`.
pub(crate) fn check_pid(pid: u32) -> Result<(), Failure> {
    let now = std::process::id();
    if now == pid {
        Ok(())
    } else {
        Err(Failure::new(
            baton_result::BATON_FORKED,
            format!(
                "this handle was created in process {pid} and cannot be used in forked \
                 process {now}; create new handles after fork()"
            ),
        ))
    }
}

/// A caller's `void *userdata`, moved to the dispatcher thread.
#[derive(Clone, Copy)]
pub(crate) struct UserData(pub(crate) *mut c_void);

// SAFETY: the pointer is only handed back to the caller's own callbacks; the
// header documents that they run on another thread, so making the data safe to
// use from there is the caller's side of the contract.
unsafe impl Send for UserData {}
// SAFETY: as above; the library never dereferences it.
unsafe impl Sync for UserData {}

/// A byte-string argument of `len` bytes: NULL is allowed only with `len` 0.
///
/// # Safety
/// `p` is NULL or valid for `len` readable bytes for `'a`.
pub(crate) unsafe fn bytes_arg<'a>(
    p: *const u8,
    len: usize,
    name: &str,
) -> Result<&'a [u8], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Failure::new(
            baton_result::BATON_NULL_ARGUMENT,
            format!("argument `{name}` is NULL but its length is {len}"),
        ));
    }
    // No buffer can be this long; a slice of it would be undefined behaviour (a
    // debug build aborts the process on it), so such a length is refused here.
    if len > isize::MAX as usize {
        return Err(too_long(name, len));
    }
    // SAFETY: non-NULL, at most isize::MAX bytes, and the caller guarantees `len`
    // readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// The failure for a length no buffer can have (over `PTRDIFF_MAX` bytes).
pub(crate) fn too_long(name: &str, len: usize) -> Failure {
    Failure::new(
        baton_result::BATON_INVALID_ARGUMENT,
        format!("argument `{name}` has length {len}, more than any buffer can hold (a negative value cast to size_t?)"),
    )
}

/// Copies `bytes` (no NUL added) into `buf` of `len` bytes, reporting their
/// length through `len_out` (also when the result is `BATON_BUFFER_TOO_SMALL`).
/// `buf` may be NULL when there is nothing to copy.
///
/// # Safety
/// `buf` is NULL or valid for `len` writable bytes; `len_out` NULL or writable.
pub(crate) unsafe fn copy_bytes_out(
    bytes: &[u8],
    buf: *mut u8,
    len: usize,
    len_out: *mut usize,
) -> Result<(), Failure> {
    // SAFETY: forwarded caller guarantee.
    unsafe { write_opt(len_out, bytes.len()) };
    if bytes.len() > len {
        return Err(Failure::new(
            baton_result::BATON_BUFFER_TOO_SMALL,
            format!("buffer of {len} bytes, value has {}", bytes.len()),
        ));
    }
    if !bytes.is_empty() {
        if buf.is_null() {
            return Err(null("buf"));
        }
        // SAFETY: buf has len >= bytes.len() writable bytes per the caller, distinct from bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf, bytes.len()) };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_error() -> String {
        let mut buf = [0 as c_char; 256];
        // SAFETY: buf has 256 writable bytes.
        unsafe { crate::error::baton_last_error_message(buf.as_mut_ptr(), buf.len()) };
        // SAFETY: NUL-terminated by the call above.
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_forced_panic_at_an_entry_point_becomes_baton_panic_with_its_message() {
        let rc = boundary(|| panic!("forced panic at an entry point"));
        assert_eq!(rc, baton_result::BATON_PANIC);
        assert_eq!(
            last_error(),
            "panic in baton: forced panic at an entry point"
        );
        let v = boundary_value(7u32, || panic!("{}", String::from("owned message")));
        assert_eq!(v, 7);
        assert_eq!(last_error(), "panic in baton: owned message");
    }

    #[test]
    fn timeouts_bytes_and_strings_are_checked() {
        assert_eq!(timeout_ms(0), Some(Duration::ZERO));
        assert_eq!(timeout_ms(u64::MAX), None);
        assert_eq!(timeout_ms(u64::MAX - 1), None);
        // SAFETY: NULL with length 0 is allowed; NULL with a length is refused.
        unsafe {
            assert_eq!(bytes_arg(std::ptr::null(), 0, "v").unwrap(), b"");
            let e = bytes_arg(std::ptr::null(), 3, "v").unwrap_err();
            assert_eq!(e.code, baton_result::BATON_NULL_ARGUMENT);
            // A length past isize::MAX is refused before any slice is made.
            let one = [7u8];
            let e = bytes_arg(one.as_ptr(), usize::MAX, "v").unwrap_err();
            assert_eq!(e.code, baton_result::BATON_INVALID_ARGUMENT);
            assert!(e.message.contains("`v` has length"), "{}", e.message);
            let bad = [0xffu8 as c_char, 0];
            let e = str_arg(bad.as_ptr(), "key").unwrap_err();
            assert_eq!(e.code, baton_result::BATON_INVALID_UTF8);
        }
    }
}
