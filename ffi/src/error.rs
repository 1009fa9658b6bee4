//! `baton_result`, its names, and the thread-local last error message.

use std::cell::RefCell;
use std::ffi::c_char;

use baton::ErrorKind;

/// The result of every fallible call. `BATON_OK` is 0; the numbers are stable
/// and never reused: 1xx usage errors, 2xx Consul and transport, 3xx lifecycle,
/// 9xx internal. `baton_result_name` gives each one's name, the same string the
/// Python and Node bindings expose as `code`.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum baton_result {
    /// Success.
    BATON_OK = 0,
    /// A required pointer argument was NULL.
    BATON_NULL_ARGUMENT = 100,
    /// A string argument was not valid UTF-8.
    BATON_INVALID_UTF8 = 101,
    /// An argument or the configuration is invalid, or Consul rejected the request as malformed.
    BATON_INVALID_ARGUMENT = 102,
    /// The caller's buffer is too small; the needed size was reported where the function says.
    BATON_BUFFER_TOO_SMALL = 103,
    /// Release of something not held (locks, semaphores).
    BATON_NOT_HELD = 104,
    /// No longer returned (kept so that numbers are never reused): acquiring what
    /// a handle already holds is `BATON_CONFLICT` (`Lock already held`,
    /// `Semaphore already held`), the core's kind and what Python and Node report.
    BATON_ALREADY_HELD = 105,
    /// The server could not be reached, or the connection broke.
    BATON_CONNECTION = 200,
    /// The call's deadline passed before it finished.
    BATON_TIMEOUT = 201,
    /// Consul answered 403 (ACL denial or unknown token).
    BATON_PERMISSION_DENIED = 202,
    /// The thing asked for does not exist.
    BATON_NOT_FOUND = 203,
    /// A transaction failed, or a key is in use in an incompatible way.
    BATON_CONFLICT = 204,
    /// The session is gone: destroyed, expired, or invalidated.
    BATON_SESSION_INVALIDATED = 205,
    /// Consul answered with another error status (see the last error message).
    BATON_SERVER = 206,
    /// Consul's answer could not be understood.
    BATON_BAD_RESPONSE = 207,
    /// The Consul server is too old for what was asked (the message names the version).
    BATON_UNSUPPORTED = 208,
    /// The call was cancelled through a `baton_cancel`.
    BATON_CANCELLED = 300,
    /// The client was closed.
    BATON_CLOSED = 301,
    /// The handle was created in another process: it cannot be used after `fork()`.
    BATON_FORKED = 302,
    /// A bug in baton: a panic was caught at the C boundary.
    BATON_PANIC = 900,
}

use baton_result::*;

/// Every result, in number order (for tests and tables).
pub(crate) const ALL_RESULTS: [baton_result; 20] = [
    BATON_OK,
    BATON_NULL_ARGUMENT,
    BATON_INVALID_UTF8,
    BATON_INVALID_ARGUMENT,
    BATON_BUFFER_TOO_SMALL,
    BATON_NOT_HELD,
    BATON_ALREADY_HELD,
    BATON_CONNECTION,
    BATON_TIMEOUT,
    BATON_PERMISSION_DENIED,
    BATON_NOT_FOUND,
    BATON_CONFLICT,
    BATON_SESSION_INVALIDATED,
    BATON_SERVER,
    BATON_BAD_RESPONSE,
    BATON_UNSUPPORTED,
    BATON_CANCELLED,
    BATON_CLOSED,
    BATON_FORKED,
    BATON_PANIC,
];

impl baton_result {
    /// The result for a core error kind.
    pub(crate) fn from_kind(kind: ErrorKind) -> baton_result {
        match kind {
            ErrorKind::Connection => BATON_CONNECTION,
            ErrorKind::Timeout => BATON_TIMEOUT,
            ErrorKind::Cancelled => BATON_CANCELLED,
            ErrorKind::PermissionDenied => BATON_PERMISSION_DENIED,
            ErrorKind::NotFound => BATON_NOT_FOUND,
            ErrorKind::InvalidArgument => BATON_INVALID_ARGUMENT,
            ErrorKind::Conflict => BATON_CONFLICT,
            ErrorKind::SessionInvalidated => BATON_SESSION_INVALIDATED,
            ErrorKind::Server => BATON_SERVER,
            ErrorKind::BadResponse => BATON_BAD_RESPONSE,
            ErrorKind::Closed => BATON_CLOSED,
            ErrorKind::Unsupported => BATON_UNSUPPORTED,
            // A kind added to the core later and not yet mapped here.
            _ => BATON_SERVER,
        }
    }

    /// The stable name, NUL-terminated.
    fn name_nul(self) -> &'static str {
        match self {
            BATON_OK => "BATON_OK\0",
            BATON_NULL_ARGUMENT => "BATON_NULL_ARGUMENT\0",
            BATON_INVALID_UTF8 => "BATON_INVALID_UTF8\0",
            BATON_INVALID_ARGUMENT => "BATON_INVALID_ARGUMENT\0",
            BATON_BUFFER_TOO_SMALL => "BATON_BUFFER_TOO_SMALL\0",
            BATON_NOT_HELD => "BATON_NOT_HELD\0",
            BATON_ALREADY_HELD => "BATON_ALREADY_HELD\0",
            BATON_CONNECTION => "BATON_CONNECTION\0",
            BATON_TIMEOUT => "BATON_TIMEOUT\0",
            BATON_PERMISSION_DENIED => "BATON_PERMISSION_DENIED\0",
            BATON_NOT_FOUND => "BATON_NOT_FOUND\0",
            BATON_CONFLICT => "BATON_CONFLICT\0",
            BATON_SESSION_INVALIDATED => "BATON_SESSION_INVALIDATED\0",
            BATON_SERVER => "BATON_SERVER\0",
            BATON_BAD_RESPONSE => "BATON_BAD_RESPONSE\0",
            BATON_UNSUPPORTED => "BATON_UNSUPPORTED\0",
            BATON_CANCELLED => "BATON_CANCELLED\0",
            BATON_CLOSED => "BATON_CLOSED\0",
            BATON_FORKED => "BATON_FORKED\0",
            BATON_PANIC => "BATON_PANIC\0",
        }
    }

    /// The stable name without the NUL, e.g. `"BATON_TIMEOUT"`.
    #[cfg(test)]
    pub(crate) fn name(self) -> &'static str {
        let n = self.name_nul();
        &n[..n.len() - 1]
    }
}

/// A failed call: the result to return and the message for the thread's last error.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: baton_result,
    pub(crate) message: String,
    /// The core error was transient (`baton::Error::is_transient`).
    pub(crate) transient: bool,
}

impl Failure {
    pub(crate) fn new(code: baton_result, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
            transient: false,
        }
    }
}

impl From<baton::Error> for Failure {
    fn from(e: baton::Error) -> Failure {
        let code = if e.kind() == ErrorKind::Closed && e.message().contains("forked process") {
            BATON_FORKED
        } else {
            baton_result::from_kind(e.kind())
        };
        Failure {
            transient: e.is_transient(),
            ..Failure::new(code, e.to_string())
        }
    }
}

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
    static LAST_TRANSIENT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Sets the calling thread's last error message (not transient).
pub(crate) fn set_last_error(message: &str) {
    set_last_failure(message, false);
}

/// Sets the calling thread's last error message and whether it was transient.
pub(crate) fn set_last_failure(message: &str, transient: bool) {
    let _ = LAST_ERROR.try_with(|e| {
        let mut e = e.borrow_mut();
        e.clear();
        e.push_str(message);
    });
    let _ = LAST_TRANSIENT.try_with(|t| t.set(transient));
}

/// Whether the calling thread's last failure was transient: Consul could not be
/// reached or could not serve the request *now* (no raft leader, a refused or
/// reset connection, a request timeout, 429/502/503/504) — worth trying again
/// later — as opposed to a refusal (403, 400, a conflict, a bad argument).
/// baton's own acquires already wait such failures out within their timeout.
/// False when no call on this thread has failed.
#[no_mangle]
pub extern "C" fn baton_last_error_is_transient() -> bool {
    LAST_TRANSIENT.try_with(|t| t.get()).unwrap_or(false)
}

/// The name of a result, e.g. `"BATON_TIMEOUT"` for `BATON_TIMEOUT`: a static
/// NUL-terminated string, never freed. For the results that mirror a core error
/// kind it is the same string as that kind's code in Rust, Python and Node.
/// Returns `"BATON_UNKNOWN"` for a number that is not a `baton_result`.
#[no_mangle]
pub extern "C" fn baton_result_name(result: u32) -> *const c_char {
    let name = ALL_RESULTS
        .iter()
        .find(|r| **r as u32 == result)
        .map_or("BATON_UNKNOWN\0", |r| r.name_nul());
    name.as_ptr().cast()
}

/// Copies the calling thread's last error message (set by the last call on this
/// thread that did not return `BATON_OK`, including Consul's own error text where
/// there is one) into `buf`, truncated to `len - 1` bytes and NUL-terminated.
/// `buf` may be NULL when `len` is 0. Returns the full length of the message in
/// bytes without the NUL, so a return value `>= len` means it was truncated;
/// 0 when no call on this thread has failed.
#[no_mangle]
pub unsafe extern "C" fn baton_last_error_message(buf: *mut c_char, len: usize) -> usize {
    let copy = || {
        LAST_ERROR
            .try_with(|e| {
                let e = e.borrow();
                if !buf.is_null() && len > 0 {
                    // Cut on a UTF-8 character boundary.
                    let mut n = e.len().min(len - 1);
                    while !e.is_char_boundary(n) {
                        n -= 1;
                    }
                    // SAFETY: the caller promises `buf` points to `len` writable bytes;
                    // n + 1 <= len, and a Rust String never overlaps a caller buffer.
                    unsafe {
                        std::ptr::copy_nonoverlapping(e.as_ptr(), buf.cast::<u8>(), n);
                        *buf.add(n) = 0;
                    }
                }
                e.len()
            })
            .unwrap_or(0)
    };
    std::panic::catch_unwind(copy).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn names_match_core_codes_and_numbers_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for r in ALL_RESULTS {
            assert!(seen.insert(r as u32));
            // SAFETY: baton_result_name returns a static NUL-terminated string.
            let s = unsafe { CStr::from_ptr(baton_result_name(r as u32)) };
            assert_eq!(s.to_str().unwrap(), r.name());
        }
        for k in ErrorKind::ALL {
            assert_eq!(baton_result::from_kind(k).name(), k.code());
        }
        // SAFETY: as above.
        let s = unsafe { CStr::from_ptr(baton_result_name(12345)) };
        assert_eq!(s.to_str().unwrap(), "BATON_UNKNOWN");
    }

    #[test]
    fn last_error_truncates_and_reports_full_length() {
        set_last_error("hello wörld");
        let mut buf = [0x7f as c_char; 8];
        // SAFETY: buf has 8 writable bytes.
        let n = unsafe { baton_last_error_message(buf.as_mut_ptr(), buf.len()) };
        assert_eq!(n, "hello wörld".len());
        // SAFETY: the function NUL-terminated buf.
        let s = unsafe { CStr::from_ptr(buf.as_ptr()) };
        assert_eq!(s.to_str().unwrap(), "hello w");
        // SAFETY: NULL with len 0 is allowed.
        let n2 = unsafe { baton_last_error_message(std::ptr::null_mut(), 0) };
        assert_eq!(n2, n);
    }
}
