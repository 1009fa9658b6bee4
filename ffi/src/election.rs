//! `baton_election` (campaign, resign, proclaim) and `baton_observer` (follow
//! the leader of a key from any process).

use std::ffi::{c_char, c_void};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use baton::{CancelToken, Election, ElectionOptions, ErrorKind, Leader, LeaderEvent};

use crate::callback::{baton_userdata_free, Registration};
use crate::cancel::baton_cancel;
use crate::client::baton_client;
use crate::error::{baton_result, Failure};
use crate::hold::{baton_hold_lost, baton_lost_callback, free_handle, into_handle, Held};
use crate::session::{baton_lost_reason, baton_session};
use crate::util::{
    boundary, boundary_value, bytes_arg, check_pid, copy_bytes_out, handle, null, str_arg,
};

/// A participant in the leader election on one key (a lock whose value names
/// the leader). Thread-safe. Freeing it while leading resigns.
pub struct baton_election {
    pub(crate) held: Held<Election>,
}

/// The size of `baton_leader.session`: a session ID (36 characters) and its NUL.
pub const BATON_SESSION_ID_SIZE: usize = 37;

/// The leader of an election as read from its key.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct baton_leader {
    /// Whether someone leads; when false the other fields are zero / empty.
    pub has_leader: bool,
    /// The leader's session ID, NUL-terminated.
    pub session: [c_char; BATON_SESSION_ID_SIZE],
    /// The key's LockIndex: changes with every new leader, not with a proclaim.
    pub lock_index: u64,
    /// The key's ModifyIndex: a raft index that only grows (a fencing token).
    pub token: u64,
    /// The leader's value: in an observer callback, valid during the call; from
    /// `baton_election_leader`, the caller's buffer. NULL when empty.
    pub value: *const u8,
    /// The length of the value (also when it did not fit the caller's buffer).
    pub value_len: usize,
}

impl baton_leader {
    fn none() -> baton_leader {
        baton_leader {
            has_leader: false,
            session: [0; BATON_SESSION_ID_SIZE],
            lock_index: 0,
            token: 0,
            value: std::ptr::null(),
            value_len: 0,
        }
    }

    /// The fields of `l`, with `value` not yet pointing anywhere.
    fn of(l: &Leader) -> baton_leader {
        let mut out = baton_leader::none();
        out.has_leader = true;
        for (d, s) in out
            .session
            .iter_mut()
            .zip(l.session.bytes().take(BATON_SESSION_ID_SIZE - 1))
        {
            *d = s as c_char;
        }
        out.lock_index = l.lock_index;
        out.token = l.token;
        out.value_len = l.value.len();
        out
    }
}

/// The flags Go's `api.Lock` (and baton's locks and elections by default) write
/// on a lock key. Consul's leader-election guide, curl and most scripts write 0.
pub const BATON_LOCK_FLAGS: u64 = 0x2ddc_cbc0_58a5_0c18;
// A literal above so cbindgen can write it into the header; the core's value it must be.
const _: () = assert!(BATON_LOCK_FLAGS == baton::LOCK_FLAG_VALUE);

/// Options for `baton_election_new_with`. Start from `baton_election_options_default()`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct baton_election_options {
    /// The session to campaign with; NULL: the client's default session. Read
    /// during the call.
    pub session: *const baton_session,
    /// The flags the leader key is written with: `BATON_LOCK_FLAGS` (Go's
    /// `api.Lock`, the default), or 0 to share the key with clients that follow
    /// Consul's leader-election guide (a plain `?acquire=`). Campaigning on a key
    /// written with other flags is `BATON_CONFLICT` naming the option.
    pub flags: u64,
}

/// The default election options: the client's default session, Go's lock flags.
#[no_mangle]
pub extern "C" fn baton_election_options_default() -> baton_election_options {
    baton_election_options {
        session: std::ptr::null(),
        flags: BATON_LOCK_FLAGS,
    }
}

/// Creates a participant in the election on `key` (no request is made);
/// `session` NULL campaigns with the client's default session. Writes
/// `*election_out`; free it with `baton_election_free`. Same as
/// `baton_election_new_with` with `session` and the default flags.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_election_new(
    client: *const baton_client,
    key: *const c_char,
    session: *const baton_session,
    election_out: *mut *mut baton_election,
) -> baton_result {
    let options = baton_election_options {
        session,
        ..baton_election_options_default()
    };
    // SAFETY: the caller's pointers are passed on under the same contract.
    unsafe { baton_election_new_with(client, key, &options, election_out) }
}

/// Creates a participant in the election on `key` with `options` (NULL: the
/// defaults), no request is made. Writes `*election_out`; free it with
/// `baton_election_free`.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_election_new_with(
    client: *const baton_client,
    key: *const c_char,
    options: *const baton_election_options,
    election_out: *mut *mut baton_election,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let key = unsafe { str_arg(key, "key") }?;
        if election_out.is_null() {
            return Err(null("election_out"));
        }
        // SAFETY: NULL or a valid options struct alive during the call.
        let o = unsafe { options.as_ref() }
            .copied()
            .unwrap_or_else(|| baton_election_options_default());
        let mut eo = ElectionOptions::new().flags(o.flags);
        // SAFETY: the caller passes NULL or a live session handle.
        if let Some(s) = unsafe { o.session.as_ref() } {
            eo = eo.session(s.get()?.clone());
        }
        let e = c.election_with(key, eo)?;
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { into_handle(baton_election { held: Held::new(e) }, election_out) };
        Ok(())
    })
}

/// Campaigns with `value` (what followers read as the leader's identity, e.g.
/// its address) until elected (`BATON_OK`), `timeout_ms` passes (`BATON_TIMEOUT`;
/// 0 tries once; `BATON_WAIT_FOREVER` no limit) or `cancel` (may be NULL) fires
/// (`BATON_CANCELLED`); `BATON_CONNECTION` when no request of the wait got
/// any answer from Consul (connection refused, unresolvable host, TLS failure,
/// no answer): the message names the address and where it came from; as
/// for `baton_lock_acquire`. `BATON_CONFLICT` (`Lock already held`) when already leading.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_election_campaign(
    election: *const baton_election,
    value: *const u8,
    value_len: usize,
    timeout_ms: u64,
    cancel: *const baton_cancel,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let h = unsafe { handle(election, "election") }?;
        // SAFETY: the caller guarantees `value_len` readable bytes at `value`.
        let v = unsafe { bytes_arg(value, value_len, "value") }?;
        let e = h.held.get()?;
        if !e.is_leader() {
            e.lock().set_value(v);
        }
        // SAFETY: the caller passes NULL or a live cancel handle.
        unsafe { h.held.acquire(timeout_ms, cancel) }
    })
}

/// Steps down (releases the key with no lock-delay, so another participant
/// takes over at once). `BATON_NOT_HELD` when not leading; the last error
/// message says why, as for `baton_lock_release` (it names the election's lock).
#[no_mangle]
pub unsafe extern "C" fn baton_election_resign(election: *const baton_election) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { handle(election, "election") }?.held.release()
    })
}

/// Replaces the leader's value while leading, keeping the LockIndex (so
/// sequencers stay valid). `BATON_NOT_HELD` when not leading; `BATON_CONFLICT`
/// if the key turned out to be no longer ours (leadership is then lost).
#[no_mangle]
pub unsafe extern "C" fn baton_election_proclaim(
    election: *const baton_election,
    value: *const u8,
    value_len: usize,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let e = unsafe { handle(election, "election") }?.held.get()?;
        // SAFETY: the caller guarantees `value_len` readable bytes at `value`.
        let v = unsafe { bytes_arg(value, value_len, "value") }?;
        if !e.is_leader() {
            return Err(Failure::new(
                baton_result::BATON_NOT_HELD,
                format!("election {:?}: not the leader, cannot proclaim", e.key()),
            ));
        }
        e.proclaim(v)?;
        Ok(())
    })
}

/// Whether this participant leads. False for NULL and in a forked child.
#[no_mangle]
pub unsafe extern "C" fn baton_election_is_leader(election: *const baton_election) -> bool {
    boundary_value(false, || {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { election.as_ref() }.is_some_and(|e| e.held.is_held())
    })
}

/// The sequencer and fencing token of the current leadership; as `baton_lock_sequencer`.
#[no_mangle]
pub unsafe extern "C" fn baton_election_sequencer(
    election: *const baton_election,
    buf: *mut c_char,
    len: usize,
    len_out: *mut usize,
    token_out: *mut u64,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle and valid out pointers.
        unsafe {
            handle(election, "election")?
                .held
                .sequencer(buf, len, len_out, token_out)
        }
    })
}

/// Registers `callback`, called once when leadership is lost (not for a resign);
/// see `baton_lost_callback`.
#[no_mangle]
pub unsafe extern "C" fn baton_election_on_lost(
    election: *const baton_election,
    callback: baton_lost_callback,
    userdata: *mut c_void,
    userdata_free: baton_userdata_free,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { handle(election, "election") }?
            .held
            .on_lost(callback, userdata, userdata_free)
    })
}

/// Blocks until leadership ends; as `baton_lock_wait_lost`.
#[no_mangle]
pub unsafe extern "C" fn baton_election_wait_lost(
    election: *const baton_election,
    timeout_ms: u64,
    cancel: *const baton_cancel,
    reason_out: *mut baton_hold_lost,
    session_reason_out: *mut baton_lost_reason,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or live handles and writable out pointers.
        unsafe {
            handle(election, "election")?.held.wait_lost(
                timeout_ms,
                cancel,
                reason_out,
                session_reason_out,
            )
        }
    })
}

/// Frees a participant: removes its callbacks (as `baton_lock_free`), then
/// resigns if leading. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn baton_election_free(election: *mut baton_election) {
    boundary_value((), || {
        // SAFETY: NULL or a pointer from baton_election_new, freed once.
        unsafe { free_handle(election, |e: &baton_election| &e.held) }
    })
}

/// Reads the current leader of the election on `key` (one consistent read) into
/// `*leader_out`, copying the value into `value_buf` of `value_buf_len` bytes
/// (`leader_out->value` then points there). `BATON_BUFFER_TOO_SMALL` when the
/// value does not fit (`leader_out->value_len` has its length, the rest is
/// filled). `BATON_CONFLICT` if the key is not an election's.
#[no_mangle]
pub unsafe extern "C" fn baton_election_leader(
    client: *const baton_client,
    key: *const c_char,
    leader_out: *mut baton_leader,
    value_buf: *mut u8,
    value_buf_len: usize,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let key = unsafe { str_arg(key, "key") }?;
        if leader_out.is_null() {
            return Err(null("leader_out"));
        }
        let leader = c.leader(key)?;
        let mut out = leader
            .as_ref()
            .map_or_else(baton_leader::none, baton_leader::of);
        let value = leader.map(|l| l.value).unwrap_or_default();
        // SAFETY: value_buf has value_buf_len writable bytes per the caller.
        let copied =
            unsafe { copy_bytes_out(&value, value_buf, value_buf_len, std::ptr::null_mut()) };
        if copied.is_ok() && !value.is_empty() {
            out.value = value_buf;
        }
        // SAFETY: checked non-NULL; writable per the caller (filled also when too small).
        unsafe { leader_out.write(out) };
        copied
    })
}

/// An observer callback: `leader` describes the new state (`has_leader` false
/// when nobody leads) and `error` is `BATON_OK`; or `leader` is NULL and
/// `error` says what went wrong: `BATON_CONFLICT` (the key is not an
/// election's; observing goes on and reports the next good state) or
/// `BATON_CLOSED` (the client was closed; the last call). `leader` and its
/// value are valid only during the call. It runs on the observer's own library
/// thread; the rest of the `baton_session_callback` contract applies (it may
/// call `baton_observer_free` on its own observer).
pub type baton_observe_callback = Option<
    unsafe extern "C" fn(userdata: *mut c_void, leader: *const baton_leader, error: baton_result),
>;

type ObserveFn = unsafe extern "C" fn(*mut c_void, *const baton_leader, baton_result);

/// Follows the leader of one election key.
pub struct baton_observer {
    stop: CancelToken,
    reg: Arc<Registration<ObserveFn>>,
    thread: Option<JoinHandle<()>>,
    pid: u32,
}

/// Pause after an error before observing again.
const OBSERVE_RETRY: Duration = Duration::from_secs(1);

fn observe_loop(mut obs: baton::Observer, stop: CancelToken, reg: Arc<Registration<ObserveFn>>) {
    loop {
        match obs.next(None, Some(&stop)) {
            Ok(LeaderEvent::Leader(l)) => {
                let mut out = baton_leader::of(&l);
                if !l.value.is_empty() {
                    out.value = l.value.as_ptr();
                }
                // SAFETY: the caller's function; `out` and `l.value` outlive the call.
                reg.invoke(|cb, ud| unsafe { cb(ud, &out, baton_result::BATON_OK) });
            }
            Ok(LeaderEvent::NoLeader) => {
                let out = baton_leader::none();
                // SAFETY: as above.
                reg.invoke(|cb, ud| unsafe { cb(ud, &out, baton_result::BATON_OK) });
            }
            Err(e) if e.kind() == ErrorKind::Cancelled => return,
            Err(e) => {
                let closed = e.kind() == ErrorKind::Closed;
                let code = Failure::from(e).code;
                // SAFETY: the caller's function; a NULL leader is part of the contract.
                reg.invoke(|cb, ud| unsafe { cb(ud, std::ptr::null(), code) });
                if closed || stop.wait_timeout(OBSERVE_RETRY) {
                    return;
                }
            }
        }
    }
}

/// Starts following the election on `key`: `callback` gets the current state
/// first, then every change (a new leader, a new value, nobody), never stepping
/// back to an older state. It runs on a thread of its own (named
/// `baton-observe`). Writes `*observer_out`; stop with `baton_observer_free`.
/// `userdata_free` (may be NULL) is called exactly once, after the last callback;
/// also when this function fails after checking its arguments.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_election_observe(
    client: *const baton_client,
    key: *const c_char,
    callback: baton_observe_callback,
    userdata: *mut c_void,
    userdata_free: baton_userdata_free,
    observer_out: *mut *mut baton_observer,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let key = unsafe { str_arg(key, "key") }?;
        let Some(cb) = callback else {
            return Err(null("callback"));
        };
        if observer_out.is_null() {
            return Err(null("observer_out"));
        }
        let reg = Registration::new(cb, userdata, userdata_free);
        let started = c.observe_leader(key).and_then(|obs| {
            let stop = CancelToken::new();
            let (s2, r2) = (stop.clone(), reg.clone());
            std::thread::Builder::new()
                .name("baton-observe".into())
                .spawn(move || observe_loop(obs, s2, r2))
                .map(|t| (stop, t))
                .map_err(|e| {
                    baton::Error::new(ErrorKind::Server, format!("cannot start a thread: {e}"))
                })
        });
        let (stop, thread) = match started {
            Ok(v) => v,
            Err(e) => {
                reg.deactivate();
                return Err(e.into());
            }
        };
        let o = baton_observer {
            stop,
            reg,
            thread: Some(thread),
            pid: std::process::id(),
        };
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { into_handle(o, observer_out) };
        Ok(())
    })
}

/// Stops an observer: after it returns the callback is not running and never
/// runs again, and `userdata_free` has been called. May be called from inside
/// the observer's own callback (the teardown then finishes when it returns).
/// NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn baton_observer_free(observer: *mut baton_observer) {
    boundary_value((), || {
        if observer.is_null() {
            return;
        }
        // SAFETY: a pointer from baton_election_observe, freed once.
        let mut o = unsafe { Box::from_raw(observer) };
        if check_pid(o.pid).is_err() {
            std::mem::forget(o);
            return;
        }
        o.stop.cancel();
        o.reg.deactivate();
        if let Some(t) = o.thread.take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
            // From inside its own callback the thread ends right after it returns.
        }
    })
}
