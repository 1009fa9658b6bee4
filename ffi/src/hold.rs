//! What locks, semaphores and elections share at the C boundary: acquire with a
//! timeout and cancel, release, "held", lost callbacks and `wait_lost`.

use std::ffi::{c_char, c_void};

use baton::{Election, Hold, HoldLost, Lock, Semaphore};

use crate::callback::{baton_userdata_free, Callbacks, Registration};
use crate::cancel::baton_cancel;
use crate::error::{baton_result, Failure};
use crate::session::baton_lost_reason;
use crate::util::{check_pid, copy_str_out, null, timeout_ms, write_opt};

/// Why a lock, semaphore slot or leadership ended.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum baton_hold_lost {
    /// Released by this process (`baton_*_release`, `baton_election_resign`).
    /// Lost callbacks are not called for it; `wait_lost` reports it.
    BATON_HOLD_RELEASED = 1,
    /// Lock or election: the key no longer carries our session (released,
    /// deleted or taken by someone else).
    BATON_HOLD_KEY_CHANGED = 2,
    /// Semaphore: our contender key is gone, or the `.lock` key no longer lists us.
    BATON_HOLD_REMOVED = 3,
    /// The session holding it was lost; the session reason says why.
    BATON_HOLD_SESSION_LOST = 4,
    /// The client was closed.
    BATON_HOLD_CLIENT_CLOSED = 5,
}

impl baton_hold_lost {
    /// Every reason, in number order.
    pub(crate) const ALL: [baton_hold_lost; 5] = [
        baton_hold_lost::BATON_HOLD_RELEASED,
        baton_hold_lost::BATON_HOLD_KEY_CHANGED,
        baton_hold_lost::BATON_HOLD_REMOVED,
        baton_hold_lost::BATON_HOLD_SESSION_LOST,
        baton_hold_lost::BATON_HOLD_CLIENT_CLOSED,
    ];

    /// The name, NUL-terminated: the core's `LockLost::name` / `SemaphoreLost::name`.
    pub(crate) fn name_nul(self) -> &'static str {
        match self {
            baton_hold_lost::BATON_HOLD_RELEASED => "released\0",
            baton_hold_lost::BATON_HOLD_KEY_CHANGED => "key_changed\0",
            baton_hold_lost::BATON_HOLD_REMOVED => "removed\0",
            baton_hold_lost::BATON_HOLD_SESSION_LOST => "session_lost\0",
            baton_hold_lost::BATON_HOLD_CLIENT_CLOSED => "client_closed\0",
        }
    }
}

/// The name of why a holding ended, the string Python and Node report for it:
/// `"released"`, `"key_changed"`, `"removed"`, `"session_lost"`,
/// `"client_closed"`. A static NUL-terminated string, never freed; `"unknown"`
/// for a number that is not a `baton_hold_lost`. With `BATON_HOLD_SESSION_LOST`,
/// `baton_lost_reason_name` of the session reason says why the session was lost
/// (e.g. `"deadline_exceeded"`).
#[no_mangle]
pub extern "C" fn baton_hold_lost_name(reason: u32) -> *const c_char {
    let name = baton_hold_lost::ALL
        .iter()
        .find(|r| **r as u32 == reason)
        .map_or("unknown\0", |r| r.name_nul());
    name.as_ptr().cast()
}

/// A lost callback of a lock, semaphore or election: `reason` says why;
/// `session_reason` is the session's reason when `reason` is
/// `BATON_HOLD_SESSION_LOST`, else `BATON_LOST_NONE`. It is called at most once
/// per holding and never for a release by this process. The contract of
/// `baton_session_callback` applies: the library's dispatcher thread, no library
/// lock held, may call back into the library (including `_free` of the same
/// handle), never runs after the handle's `_free` returns.
pub type baton_lost_callback = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        reason: baton_hold_lost,
        session_reason: baton_lost_reason,
    ),
>;

pub(crate) type LostFn = unsafe extern "C" fn(*mut c_void, baton_hold_lost, baton_lost_reason);

type Why = (baton_hold_lost, baton_lost_reason);

/// The C pair for a core reason: the reason by its stable name, and the
/// session's reason when the session was lost.
pub(crate) fn why<L: HoldLost>(l: L) -> Why {
    let reason = baton_hold_lost::ALL
        .into_iter()
        .find(|r| r.name_nul().trim_end_matches('\0') == l.name())
        .unwrap_or(baton_hold_lost::BATON_HOLD_KEY_CHANGED);
    let session = l
        .session_reason()
        .map_or(baton_lost_reason::BATON_LOST_NONE, Into::into);
    (reason, session)
}

/// The core object behind a handle: the core's [`Hold`] (the one lifecycle
/// of locks, semaphores and elections), plus the C words for a try-once
/// acquire that found it taken.
pub(crate) trait CHold: Hold + 'static {
    /// Why a try-once acquire failed.
    fn busy(&self) -> String;
}

impl CHold for Lock {
    fn busy(&self) -> String {
        format!("{} is held by another session", self.describe())
    }
}

impl CHold for Election {
    fn busy(&self) -> String {
        format!("{} has another leader", self.describe())
    }
}

impl CHold for Semaphore {
    fn busy(&self) -> String {
        format!("{} has all {} slots taken", self.describe(), self.limit())
    }
}

/// A handle's core object plus what the C side keeps for it.
pub(crate) struct Held<T: CHold> {
    pub(crate) inner: T,
    pid: u32,
    callbacks: Callbacks<LostFn>,
}

impl<T: CHold> Held<T> {
    pub(crate) fn new(inner: T) -> Held<T> {
        Held {
            inner,
            pid: std::process::id(),
            callbacks: Callbacks::new(),
        }
    }

    /// The core object, if this process created it.
    pub(crate) fn get(&self) -> Result<&T, Failure> {
        check_pid(self.pid)?;
        Ok(&self.inner)
    }

    /// Acquire with the C conventions: `BATON_OK` when held, `BATON_TIMEOUT` when
    /// not by the deadline (0 = try once). Acquiring what this handle already
    /// holds is the core's error, kind `Conflict` (`Lock already held`,
    /// `Semaphore already held`): `BATON_CONFLICT`, the code Rust, Python and
    /// Node report for it.
    ///
    /// # Safety
    /// `cancel` is NULL or a live handle.
    pub(crate) unsafe fn acquire(
        &self,
        ms: u64,
        cancel: *const baton_cancel,
    ) -> Result<(), Failure> {
        let h = self.get()?;
        // SAFETY: forwarded caller guarantee.
        let cancel = unsafe { cancel.as_ref() }.map(|c| &c.token);
        if h.acquire(timeout_ms(ms), cancel)? {
            return Ok(());
        }
        let msg = if ms == 0 {
            h.busy()
        } else {
            format!("{} not acquired within {ms} ms", h.describe())
        };
        Err(Failure::new(baton_result::BATON_TIMEOUT, msg))
    }

    /// Release: `BATON_NOT_HELD` when this handle did not hold it, with why
    /// (never acquired or already released, lost and why, client closed).
    pub(crate) fn release(&self) -> Result<(), Failure> {
        let h = self.get()?;
        if h.release()? {
            Ok(())
        } else {
            Err(Failure::new(
                baton_result::BATON_NOT_HELD,
                h.not_held_message(),
            ))
        }
    }

    /// Whether held; false in a forked child.
    pub(crate) fn is_held(&self) -> bool {
        self.get().is_ok_and(|h| h.is_held())
    }

    /// Registers a lost callback.
    pub(crate) fn on_lost(
        &self,
        callback: baton_lost_callback,
        userdata: *mut c_void,
        userdata_free: baton_userdata_free,
    ) -> Result<(), Failure> {
        let Some(cb) = callback else {
            return Err(null("callback"));
        };
        let h = self.get()?;
        let reg = Registration::new(cb, userdata, userdata_free);
        self.callbacks.add(reg, |r| {
            h.on_lost(Box::new(move |lost| {
                let (why, session) = why(lost);
                r.invoke(|cb, ud| {
                    // SAFETY: the caller's function with the documented signature.
                    unsafe { cb(ud, why, session) }
                })
            }))
        });
        Ok(())
    }

    /// Blocks until the holding ends (at once when not held).
    ///
    /// # Safety
    /// `cancel` is NULL or a live handle; `reason_out`, `session_reason_out` NULL or writable.
    pub(crate) unsafe fn wait_lost(
        &self,
        ms: u64,
        cancel: *const baton_cancel,
        reason_out: *mut baton_hold_lost,
        session_reason_out: *mut baton_lost_reason,
    ) -> Result<(), Failure> {
        let h = self.get()?;
        // SAFETY: forwarded caller guarantee.
        let cancel = unsafe { cancel.as_ref() }.map(|c| &c.token);
        let (why, session) = why(h.wait_lost(timeout_ms(ms), cancel)?);
        // SAFETY: forwarded caller guarantee.
        unsafe {
            write_opt(reason_out, why);
            write_opt(session_reason_out, session);
        }
        Ok(())
    }

    /// The sequencer's string form into `buf`, its token into `*token_out`.
    ///
    /// # Safety
    /// As `copy_str_out`; `token_out` NULL or writable.
    pub(crate) unsafe fn sequencer(
        &self,
        buf: *mut c_char,
        len: usize,
        len_out: *mut usize,
        token_out: *mut u64,
    ) -> Result<(), Failure> {
        let h = self.get()?;
        let Some(seq) = h.sequencer() else {
            return Err(Failure::new(
                baton_result::BATON_NOT_HELD,
                format!("{} is not held: there is no sequencer", h.describe()),
            ));
        };
        // SAFETY: forwarded caller guarantee.
        unsafe {
            write_opt(token_out, seq.token);
            copy_str_out(seq.to_string().as_bytes(), buf, len, len_out)
        }
    }

    /// Tears down for `_free`: no callback runs after this returns (except one
    /// running on this very thread, which finishes first). Returns whether the
    /// object may be dropped here (not in a forked child, where it is leaked).
    pub(crate) fn teardown(&self) -> bool {
        if self.pid != std::process::id() {
            return false;
        }
        self.callbacks.clear(|id| self.inner.remove_callback(id));
        true
    }
}

/// Frees a boxed handle made by [`into_handle`].
///
/// # Safety
/// `p` is NULL or a pointer from `into_handle::<H>`, freed once.
pub(crate) unsafe fn free_handle<H, T: CHold>(p: *mut H, held: impl Fn(&H) -> &Held<T>) {
    if p.is_null() {
        return;
    }
    // SAFETY: per the caller, `p` came from Box::into_raw and is freed once.
    let b = unsafe { Box::from_raw(p) };
    if held(&b).teardown() {
        drop(b);
    } else {
        std::mem::forget(b);
    }
}

/// Boxes a handle into `out`.
///
/// # Safety
/// `out` is non-NULL and writable.
pub(crate) unsafe fn into_handle<H>(h: H, out: *mut *mut H) {
    // SAFETY: per the caller.
    unsafe { out.write(Box::into_raw(Box::new(h))) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton::{LockLost, LostReason, SemaphoreLost};
    use std::ffi::CStr;

    fn name(p: *const c_char) -> &'static str {
        // SAFETY: the name functions return static NUL-terminated strings.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap()
    }

    #[test]
    fn hold_lost_names_are_the_core_names() {
        let reasons = [
            LostReason::Invalidated,
            LostReason::DeadlineExceeded,
            LostReason::Destroyed,
            LostReason::ClientClosed,
        ];
        let mut locks = vec![
            LockLost::Released,
            LockLost::KeyChanged,
            LockLost::ClientClosed,
        ];
        let mut sems = vec![
            SemaphoreLost::Released,
            SemaphoreLost::Removed,
            SemaphoreLost::ClientClosed,
        ];
        for r in reasons {
            locks.push(LockLost::SessionLost(r));
            sems.push(SemaphoreLost::SessionLost(r));
            let c: baton_lost_reason = r.into();
            assert_eq!(
                name(crate::session::baton_lost_reason_name(c as u32)),
                r.name()
            );
        }
        let mut seen = std::collections::HashSet::new();
        for l in locks {
            let (reason, session) = why(l);
            assert_eq!(name(baton_hold_lost_name(reason as u32)), l.name());
            if let LockLost::SessionLost(r) = l {
                assert_eq!(
                    name(crate::session::baton_lost_reason_name(session as u32)),
                    r.name()
                );
            }
            seen.insert(reason as u32);
        }
        for l in sems {
            let (reason, session) = why(l);
            assert_eq!(name(baton_hold_lost_name(reason as u32)), l.name());
            assert_eq!(
                session,
                l.session_reason()
                    .map_or(baton_lost_reason::BATON_LOST_NONE, Into::into)
            );
            seen.insert(reason as u32);
        }
        // Every C value is reachable from a core one.
        assert_eq!(seen.len(), baton_hold_lost::ALL.len());
        assert_eq!(name(crate::session::baton_lost_reason_name(0)), "none");
        assert_eq!(name(baton_hold_lost_name(0)), "unknown");
        assert_eq!(name(baton_hold_lost_name(6)), "unknown");
        assert_eq!(name(crate::session::baton_lost_reason_name(5)), "unknown");
    }
}
