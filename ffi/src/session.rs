//! `baton_session`: managed sessions, their invalidation callbacks and `wait_lost`.

use std::ffi::{c_char, c_void, CString};

use baton::{Behavior, LostReason, Session, SessionEvent, SessionOptions};

use crate::callback::{baton_userdata_free, Callbacks, Registration};

use crate::cancel::baton_cancel;
use crate::client::baton_client;
use crate::error::{baton_result, Failure};
use crate::util::{
    boundary, boundary_value, check_pid, copy_str_out, handle, null, opt_str_arg, timeout_ms,
    write_opt,
};

/// A managed session: renewed in the background, watched for invalidation.
/// Thread-safe. Freeing it does not destroy the session at Consul (the client
/// does that on close); `baton_session_destroy` does.
pub struct baton_session {
    session: Session,
    pid: u32,
    regs: Callbacks<SessionFn>,
}

impl baton_session {
    pub(crate) fn get(&self) -> Result<&Session, Failure> {
        check_pid(self.pid)?;
        Ok(&self.session)
    }
}

/// The `ttl_ms` of a session without a TTL (the same value as
/// `BATON_WAIT_FOREVER`). Nothing expires such a session while its node is
/// alive and its health checks pass: a process that crashes or hangs keeps its
/// locks, semaphore slots and leadership until the node leaves the cluster,
/// one of the session's checks fails, or someone destroys the session
/// (`baton_client_destroy_session_id`). Only for sessions bound to health
/// checks that fail when the process dies (`baton_session_create_with_checks`);
/// `baton_session_time_left_ms` reports `BATON_WAIT_FOREVER` for them.
pub const BATON_NO_TTL: u64 = u64::MAX;
const _: () = assert!(BATON_NO_TTL == crate::BATON_WAIT_FOREVER);

/// Session behavior when it is invalidated: release its locks (Consul's default).
pub const BATON_BEHAVIOR_RELEASE: u32 = 0;
/// Session behavior when it is invalidated: delete the keys it holds.
pub const BATON_BEHAVIOR_DELETE: u32 = 1;

/// Options for `baton_session_create`. Start from `baton_session_options_default()`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct baton_session_options {
    /// The session name (NULL: none). NUL-terminated UTF-8, read during the call.
    pub name: *const c_char,
    /// The TTL in milliseconds. Consul accepts 10 s to 24 h. Default 15000.
    /// 0 is refused (`BATON_INVALID_ARGUMENT` naming the field): Consul would
    /// read it as "no TTL". `BATON_NO_TTL` asks for a session without a TTL.
    pub ttl_ms: u64,
    /// The lock delay in milliseconds; 0 means no delay. Default 15000 (Consul's).
    pub lock_delay_ms: u64,
    /// `BATON_BEHAVIOR_RELEASE` (default) or `BATON_BEHAVIOR_DELETE`.
    pub behavior: u32,
}

/// The default session options: no name, TTL 15 s, lock delay 15 s, release.
#[no_mangle]
pub extern "C" fn baton_session_options_default() -> baton_session_options {
    baton_session_options {
        name: std::ptr::null(),
        ttl_ms: 15_000,
        lock_delay_ms: 15_000,
        behavior: BATON_BEHAVIOR_RELEASE,
    }
}

/// What happened to a session.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum baton_event_kind {
    /// A renew failed; the session may still be valid until its deadline.
    BATON_EVENT_SUSPECT = 1,
    /// A renew succeeded again after `BATON_EVENT_SUSPECT`.
    BATON_EVENT_RECOVERED = 2,
    /// The session is lost (delivered at most once); see `reason`.
    BATON_EVENT_LOST = 3,
}

/// Why a session was lost.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum baton_lost_reason {
    /// Not lost (events other than `BATON_EVENT_LOST`).
    BATON_LOST_NONE = 0,
    /// Consul no longer has it: destroyed elsewhere, TTL expired, check failed.
    BATON_LOST_INVALIDATED = 1,
    /// The local lease deadline passed without a successful renew.
    BATON_LOST_DEADLINE_EXCEEDED = 2,
    /// This process destroyed it (`baton_session_destroy`).
    BATON_LOST_DESTROYED = 3,
    /// The client was closed.
    BATON_LOST_CLIENT_CLOSED = 4,
}

impl From<LostReason> for baton_lost_reason {
    fn from(r: LostReason) -> Self {
        match r {
            LostReason::Invalidated => baton_lost_reason::BATON_LOST_INVALIDATED,
            LostReason::DeadlineExceeded => baton_lost_reason::BATON_LOST_DEADLINE_EXCEEDED,
            LostReason::Destroyed => baton_lost_reason::BATON_LOST_DESTROYED,
            LostReason::ClientClosed => baton_lost_reason::BATON_LOST_CLIENT_CLOSED,
        }
    }
}

impl baton_lost_reason {
    /// Every reason, in number order.
    pub(crate) const ALL: [baton_lost_reason; 5] = [
        baton_lost_reason::BATON_LOST_NONE,
        baton_lost_reason::BATON_LOST_INVALIDATED,
        baton_lost_reason::BATON_LOST_DEADLINE_EXCEEDED,
        baton_lost_reason::BATON_LOST_DESTROYED,
        baton_lost_reason::BATON_LOST_CLIENT_CLOSED,
    ];

    /// The name, NUL-terminated: the core's `LostReason::name`, `"none"` for
    /// `BATON_LOST_NONE`.
    pub(crate) fn name_nul(self) -> &'static str {
        match self {
            baton_lost_reason::BATON_LOST_NONE => "none\0",
            baton_lost_reason::BATON_LOST_INVALIDATED => "invalidated\0",
            baton_lost_reason::BATON_LOST_DEADLINE_EXCEEDED => "deadline_exceeded\0",
            baton_lost_reason::BATON_LOST_DESTROYED => "destroyed\0",
            baton_lost_reason::BATON_LOST_CLIENT_CLOSED => "client_closed\0",
        }
    }
}

/// The name of a session's lost reason, the string Python and Node report for
/// it: `"invalidated"`, `"deadline_exceeded"`, `"destroyed"`, `"client_closed"`,
/// and `"none"` for `BATON_LOST_NONE`. A static NUL-terminated string, never
/// freed; `"unknown"` for a number that is not a `baton_lost_reason`.
#[no_mangle]
pub extern "C" fn baton_lost_reason_name(reason: u32) -> *const c_char {
    let name = baton_lost_reason::ALL
        .iter()
        .find(|r| **r as u32 == reason)
        .map_or("unknown\0", |r| r.name_nul());
    name.as_ptr().cast()
}

/// An event given to a `baton_session_callback`; valid only during the call.
#[repr(C)]
#[derive(Debug)]
pub struct baton_event {
    /// What happened.
    pub kind: baton_event_kind,
    /// Why the session was lost (`BATON_LOST_NONE` unless `kind` is `BATON_EVENT_LOST`).
    pub reason: baton_lost_reason,
    /// The session ID, NUL-terminated; valid only during the call.
    pub session_id: *const c_char,
}

/// A session event callback. Contract:
///
/// * it runs on the library's dispatcher thread (one per client), never on the
///   caller's thread and never while the library holds an internal lock;
/// * it may call back into the library, including `baton_session_free` of the
///   session it is called for (the handle is then torn down, and `userdata_free`
///   called, once the callback returns); it must not close or free the client;
/// * it should return quickly: it delays the client's other callbacks;
/// * once `baton_session_free` (or `baton_client_close`) has returned it is not
///   running and never runs again, and `userdata_free` has been called exactly once
///   (`baton_session_free` from inside the callback: right after it returns).
///
/// A panic cannot cross it: it is C.
pub type baton_session_callback =
    Option<unsafe extern "C" fn(userdata: *mut c_void, event: *const baton_event)>;

/// A session callback as stored in its registration.
type SessionFn = unsafe extern "C" fn(*mut c_void, *const baton_event);

/// Runs one registered callback for `event`.
fn deliver(reg: &Registration<SessionFn>, event: &SessionEvent, session_id: &str) {
    let (kind, reason) = match event {
        SessionEvent::Suspect => (
            baton_event_kind::BATON_EVENT_SUSPECT,
            baton_lost_reason::BATON_LOST_NONE,
        ),
        SessionEvent::Recovered => (
            baton_event_kind::BATON_EVENT_RECOVERED,
            baton_lost_reason::BATON_LOST_NONE,
        ),
        SessionEvent::Lost(r) => (baton_event_kind::BATON_EVENT_LOST, (*r).into()),
    };
    let id = CString::new(session_id).unwrap_or_default();
    let ev = baton_event {
        kind,
        reason,
        session_id: id.as_ptr(),
    };
    reg.invoke(|cb, ud| {
        // SAFETY: `cb` is the caller's function with the documented signature; `ev`
        // and `id` outlive the call.
        unsafe { cb(ud, &ev) }
    });
}

/// The core's session options from a C options struct (NULL: the defaults).
///
/// # Safety
/// `options` is NULL or points to a valid `baton_session_options` whose `name` is
/// NULL or a NUL-terminated string, all alive during the call.
pub(crate) unsafe fn core_options(
    options: *const baton_session_options,
) -> Result<SessionOptions, Failure> {
    // SAFETY: forwarded caller guarantee.
    unsafe { core_options_named(options, "options", SessionOptions::new()) }
}

/// As [`core_options`], starting from `base` (whose name a NULL `name` keeps), with
/// messages naming the fields `<prefix>.ttl_ms`, `<prefix>.behavior`, ...
///
/// # Safety
/// As [`core_options`].
pub(crate) unsafe fn core_options_named(
    options: *const baton_session_options,
    prefix: &str,
    base: SessionOptions,
) -> Result<SessionOptions, Failure> {
    // SAFETY: the caller passes NULL or a valid options struct.
    let o = match unsafe { options.as_ref() } {
        Some(o) => *o,
        None => baton_session_options_default(),
    };
    let mut so = base;
    // SAFETY: NULL or a NUL-terminated string alive during the call.
    if let Some(n) = unsafe { opt_str_arg(o.name, &format!("{prefix}.name")) }? {
        so = so.name(n);
    }
    let too_long = |what: &str| {
        Failure::new(
            baton_result::BATON_INVALID_ARGUMENT,
            format!("{prefix}.{what} must be less than ten years"),
        )
    };
    so = match o.ttl_ms {
        0 => {
            return Err(Failure::new(
                baton_result::BATON_INVALID_ARGUMENT,
                format!(
                    "{prefix}.ttl_ms is 0: a session TTL must be positive (Consul would create \
                     a session that never expires, keeping its locks after a crash); use \
                     BATON_NO_TTL for a session without a TTL"
                ),
            ))
        }
        BATON_NO_TTL => so.without_ttl(),
        ms => so.ttl(timeout_ms(ms).ok_or_else(|| too_long("ttl_ms"))?),
    };
    so = so.lock_delay(timeout_ms(o.lock_delay_ms).ok_or_else(|| too_long("lock_delay_ms"))?);
    so = so.behavior(match o.behavior {
        BATON_BEHAVIOR_RELEASE => Behavior::Release,
        BATON_BEHAVIOR_DELETE => Behavior::Delete,
        other => {
            return Err(Failure::new(
                baton_result::BATON_INVALID_ARGUMENT,
                format!(
                    "{prefix}.behavior {other} is not a BATON_BEHAVIOR_* value \
                     (BATON_BEHAVIOR_RELEASE or BATON_BEHAVIOR_DELETE)"
                ),
            ))
        }
    });
    Ok(so)
}

pub(crate) fn new_handle(session: Session, out: *mut *mut baton_session) {
    let h = Box::new(baton_session {
        session,
        pid: std::process::id(),
        regs: Callbacks::new(),
    });
    // SAFETY: callers checked `out` for NULL; the C caller guarantees it is writable.
    unsafe { out.write(Box::into_raw(h)) };
}

/// Creates a managed session with `options` (NULL: `baton_session_options_default()`):
/// renewed in the background at about TTL/3, watched for invalidation, destroyed
/// when the client is closed. Writes `*session_out` on success; free it with
/// `baton_session_free`. `BATON_INVALID_ARGUMENT` for an unknown behavior or a
/// TTL Consul rejects (with Consul's text in the last error message).
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_session_create(
    client: *const baton_client,
    options: *const baton_session_options,
    session_out: *mut *mut baton_session,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        if session_out.is_null() {
            return Err(null("session_out"));
        }
        // SAFETY: the caller passes NULL or a valid options struct.
        let so = unsafe { core_options(options) }?;
        let s = c.create_session(&so)?;
        new_handle(s, session_out);
        Ok(())
    })
}

/// Gets the client's shared default session (name "baton", TTL 15 s), creating
/// it on first use and replacing it once lost. Each call gives a new handle to
/// free with `baton_session_free`; handles to the same session share its state.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_client_default_session(
    client: *const baton_client,
    session_out: *mut *mut baton_session,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        if session_out.is_null() {
            return Err(null("session_out"));
        }
        let s = c.default_session()?;
        new_handle(s, session_out);
        Ok(())
    })
}

/// Copies the session ID (36 characters) NUL-terminated into `buf` of `len`
/// bytes (37 or more). `*len_out` (if not NULL) gets the length without the NUL,
/// also when the result is `BATON_BUFFER_TOO_SMALL`; `buf = NULL, len = 0` asks
/// only for the length (`BATON_BUFFER_TOO_SMALL`, as `baton_kv_get` does).
#[no_mangle]
pub unsafe extern "C" fn baton_session_id(
    session: *const baton_session,
    buf: *mut c_char,
    len: usize,
    len_out: *mut usize,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let s = unsafe { handle(session, "session") }?.get()?;
        // SAFETY: the caller guarantees `buf`/`len` and `len_out`.
        unsafe { copy_str_out(s.id().as_bytes(), buf, len, len_out) }
    })
}

/// Whether the session can still be trusted: not lost and before its local
/// deadline. False for NULL and in a forked child.
#[no_mangle]
pub unsafe extern "C" fn baton_session_is_valid(session: *const baton_session) -> bool {
    boundary_value(false, || {
        // SAFETY: the caller passes NULL or a live handle.
        match unsafe { session.as_ref() } {
            Some(s) => s.get().is_ok_and(|s| s.is_valid()),
            None => false,
        }
    })
}

/// Writes to `*ms_out` the time left until the session's local lease deadline, in
/// whole milliseconds (rounded down): how long its holdings can still be trusted
/// without another successful renew ("is there enough lease left to start this
/// job?"). The deadline is the send time of the last successful renew + TTL − a
/// margin (TTL/10, at most 2 s) and moves forward with each renew. 0 once the
/// session is lost or the deadline has passed; `BATON_WAIT_FOREVER` for a session
/// without a TTL (it has no local deadline) that is not lost.
#[no_mangle]
pub unsafe extern "C" fn baton_session_time_left_ms(
    session: *const baton_session,
    ms_out: *mut u64,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let s = unsafe { handle(session, "session") }?.get()?;
        if ms_out.is_null() {
            return Err(null("ms_out"));
        }
        let ms = match time_left(s) {
            None => crate::BATON_WAIT_FOREVER,
            // A finite time never reads as "no deadline".
            Some(d) => u64::try_from(d.as_millis())
                .unwrap_or(u64::MAX)
                .min(crate::BATON_WAIT_FOREVER - 1),
        };
        // SAFETY: checked non-NULL; the caller guarantees it is writable.
        unsafe { ms_out.write(ms) };
        Ok(())
    })
}

/// The time left until `s`'s local deadline: zero once lost, `None` without a TTL.
fn time_left(s: &Session) -> Option<std::time::Duration> {
    // The deadline first: a renew landing in between only makes the answer smaller.
    let until = s.valid_until();
    if !s.is_valid() {
        return Some(std::time::Duration::ZERO);
    }
    until.map(|u| u.saturating_duration_since(std::time::Instant::now()))
}

/// Blocks until the session is lost (`BATON_OK`, reason in `*reason_out` if not
/// NULL), `timeout_ms` passes (`BATON_TIMEOUT`; 0 checks once,
/// `BATON_WAIT_FOREVER` has no limit) or `cancel` (may be NULL) is cancelled
/// (`BATON_CANCELLED`).
#[no_mangle]
pub unsafe extern "C" fn baton_session_wait_lost(
    session: *const baton_session,
    timeout_ms_: u64,
    cancel: *const baton_cancel,
    reason_out: *mut baton_lost_reason,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let s = unsafe { handle(session, "session") }?.get()?;
        // SAFETY: the caller passes NULL or a live cancel handle.
        let cancel = unsafe { cancel.as_ref() }.map(|c| &c.token);
        let r = s.wait_lost(timeout_ms(timeout_ms_), cancel)?;
        // SAFETY: NULL or writable, per the caller.
        unsafe { write_opt(reason_out, r.into()) };
        Ok(())
    })
}

/// Destroys the session at Consul (its locks are released, lock-delay applies)
/// and stops renewing it. Its callbacks are not called for this. The handle
/// must still be freed.
#[no_mangle]
pub unsafe extern "C" fn baton_session_destroy(session: *const baton_session) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let s = unsafe { handle(session, "session") }?.get()?;
        s.destroy()?;
        Ok(())
    })
}

/// Registers `callback` for the session's events (suspect, recovered, lost);
/// see `baton_session_callback` for the contract. If the session is already
/// lost (other than by `baton_session_destroy` or client close), the callback gets
/// that event once. `userdata_free` (may be NULL) is called with `userdata`
/// exactly once, after the callback's last run; also when this function fails
/// after checking its arguments. Several callbacks may be registered on one handle.
#[no_mangle]
pub unsafe extern "C" fn baton_session_on_event(
    session: *const baton_session,
    callback: baton_session_callback,
    userdata: *mut c_void,
    userdata_free: baton_userdata_free,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let h = unsafe { handle(session, "session") }?;
        let Some(cb) = callback else {
            return Err(null("callback"));
        };
        let s = h.get()?;
        let reg = Registration::new(cb, userdata, userdata_free);
        let id = s.id().to_string();
        h.regs
            .add(reg, |r| s.on_event(move |e| deliver(&r, e, &id)));
        Ok(())
    })
}

/// Frees a session handle: removes its callbacks, waiting for one that is
/// running on another thread, and calls their `userdata_free`. May be called from
/// inside one of its own callbacks. Does not destroy the session at Consul.
/// NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn baton_session_free(session: *mut baton_session) {
    boundary_value((), || {
        if session.is_null() {
            return;
        }
        // SAFETY: the caller passes a pointer from a session constructor, freed once.
        let b = unsafe { Box::from_raw(session) };
        if b.pid != std::process::id() {
            std::mem::forget(b);
            return;
        }
        b.regs.clear(|id| b.session.remove_callback(id));
    })
}
