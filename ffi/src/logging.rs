//! Where baton's log records go: warnings and errors to standard error until
//! the program routes them to a callback (`baton_set_log_callback`).

use std::ffi::{c_char, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use log::{Level, LevelFilter};

use crate::callback::baton_userdata_free;
use crate::error::{baton_result, Failure};
use crate::util::{boundary, UserData};

/// The level of a log record, most severe first (the numbers of Rust's `log`
/// crate). As `max_level` of `baton_set_log_callback`, the least severe level
/// passed on; `BATON_LOG_OFF` passes none.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum baton_log_level {
    /// Nothing (only as a `max_level`).
    BATON_LOG_OFF = 0,
    /// Something failed and nobody will retry it (e.g. a lock could not be
    /// released on close).
    BATON_LOG_ERROR = 1,
    /// Something the program should hear about: a holding lost, a session
    /// suspect, a wait that cannot reach Consul, a clean-up that failed.
    BATON_LOG_WARN = 2,
    /// Progress worth a line (a session recovered).
    BATON_LOG_INFO = 3,
    /// Details for debugging (a retried request, a watch restarted).
    BATON_LOG_DEBUG = 4,
    /// Everything.
    BATON_LOG_TRACE = 5,
}

impl From<Level> for baton_log_level {
    fn from(l: Level) -> Self {
        match l {
            Level::Error => baton_log_level::BATON_LOG_ERROR,
            Level::Warn => baton_log_level::BATON_LOG_WARN,
            Level::Info => baton_log_level::BATON_LOG_INFO,
            Level::Debug => baton_log_level::BATON_LOG_DEBUG,
            Level::Trace => baton_log_level::BATON_LOG_TRACE,
        }
    }
}

/// The filter for a `max_level` number, `None` when it is not a level.
fn filter(max_level: u32) -> Option<LevelFilter> {
    Some(match max_level {
        0 => LevelFilter::Off,
        1 => LevelFilter::Error,
        2 => LevelFilter::Warn,
        3 => LevelFilter::Info,
        4 => LevelFilter::Debug,
        5 => LevelFilter::Trace,
        _ => return None,
    })
}

/// A log callback: one record of `level` from the part of baton named by
/// `target` (e.g. `"baton::lock::shared"`), with its `message`; both strings are
/// NUL-terminated UTF-8, valid only during the call. Contract:
///
/// * it runs on the thread that logged: one of the library's threads (renewer,
///   dispatcher, watchers) or a thread of the program inside a baton call;
///   never while the library holds a lock of its own;
/// * it may run on several threads at once: make it thread-safe;
/// * it must return quickly and must not block (waiting for a lock the
///   program holds while calling baton, or for I/O that may hang): the thread
///   it runs on may be renewing sessions or signalling a loss. Hand records to
///   a queue when they need slow handling;
/// * it may call back into the library, including `baton_set_log_callback`.
///
/// A panic cannot cross it: it is C.
pub type baton_log_callback = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        level: baton_log_level,
        target: *const c_char,
        message: *const c_char,
    ),
>;

type LogFn = unsafe extern "C" fn(*mut c_void, baton_log_level, *const c_char, *const c_char);

/// A callback set by the program; its `userdata_free` runs when the last
/// reference goes (after its last run).
struct Route {
    callback: LogFn,
    userdata: UserData,
    userdata_free: baton_userdata_free,
}

impl Route {
    fn call(&self, level: Level, target: &str, message: &str) {
        let c = |s: &str| CString::new(s.replace('\0', "\\0")).unwrap_or_default();
        let (target, message) = (c(target), c(message));
        // SAFETY: the caller's function with the documented signature; both
        // strings outlive the call.
        unsafe {
            (self.callback)(
                self.userdata.0,
                level.into(),
                target.as_ptr(),
                message.as_ptr(),
            )
        };
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        if let Some(f) = self.userdata_free.take() {
            // SAFETY: the caller's userdata_free, called once (taken) after the
            // callback's last run: this is the last reference to the route.
            unsafe { f(self.userdata.0) };
        }
    }
}

/// The route in use, kept here too so that replacing it never drops the last
/// reference inside the core's sink lock (`userdata_free` may log or call back).
static CURRENT: Mutex<Option<Arc<Route>>> = Mutex::new(None);

/// Routes baton's log records up to `max_level` (a `baton_log_level`) to
/// `callback` (see `baton_log_callback` for when and where it runs), for the
/// whole process and every client. `callback` NULL restores the default:
/// warnings and errors written to standard error as `baton warn: ...`
/// (`max_level` is then ignored); a callback with `BATON_LOG_OFF` silences
/// baton. The library logs to standard error by default from the first client
/// created on, so that a wrong Consul address or a lost lock is never silent.
///
/// With a callback, `userdata_free` (may be NULL) is called with `userdata` exactly once, after
/// the callback's last run: when a later call replaces it, possibly on the
/// thread of a run still under way, so a run on another thread may end after
/// this function returns. Also when this function fails after checking its
/// arguments. `BATON_INVALID_ARGUMENT` for a `max_level` that is not a
/// `baton_log_level`. With `callback` NULL, `userdata` and `userdata_free` are
/// not used. A program that installed its own Rust `log` logger before
/// (linking baton into a Rust program) keeps it: records go there.
#[no_mangle]
pub unsafe extern "C" fn baton_set_log_callback(
    callback: baton_log_callback,
    userdata: *mut c_void,
    userdata_free: baton_userdata_free,
    max_level: u32,
) -> baton_result {
    boundary(|| {
        let route = callback.map(|callback| {
            Arc::new(Route {
                callback,
                userdata: UserData(userdata),
                userdata_free,
            })
        });
        let max = if route.is_none() {
            Some(LevelFilter::Warn)
        } else {
            filter(max_level)
        };
        let Some(max) = max else {
            // `route` (if any) is dropped here: userdata_free runs.
            return Err(Failure::new(
                baton_result::BATON_INVALID_ARGUMENT,
                format!(
                    "max_level {max_level} is not a baton_log_level (BATON_LOG_OFF = 0 .. \
                     BATON_LOG_TRACE = 5)"
                ),
            ));
        };
        let sink: Option<baton::log_sink::Sink> = route.clone().map(|r| {
            Arc::new(move |level: Level, target: &str, message: &str| {
                // A panic of ours must not unwind into the thread that logged.
                let _ = catch_unwind(AssertUnwindSafe(|| r.call(level, target, message)));
            }) as baton::log_sink::Sink
        });
        let old = {
            let mut current = CURRENT.lock().unwrap_or_else(|p| p.into_inner());
            baton::log_sink::set_sink(sink, max);
            std::mem::replace(&mut *current, route)
        };
        // Outside every lock: the old route's userdata_free runs here unless a
        // run is under way (then right after it).
        drop(old);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_the_log_crate_numbers() {
        for l in [
            Level::Error,
            Level::Warn,
            Level::Info,
            Level::Debug,
            Level::Trace,
        ] {
            let c: baton_log_level = l.into();
            assert_eq!(c as usize, l as usize);
            assert_eq!(filter(c as u32), Some(l.to_level_filter()));
        }
        assert_eq!(filter(0), Some(LevelFilter::Off));
        assert_eq!(filter(6), None);
    }
}
