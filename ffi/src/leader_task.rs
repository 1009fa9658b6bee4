//! `baton_leader_task`: run a C function only while leading an election; its
//! token fires the moment leadership ends.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use baton::{ElectionOptions, ErrorKind, Leader, LeaderTask, StoppedLeading};

use crate::callback::{baton_userdata_free, Registration};
use crate::cancel::baton_cancel;
use crate::client::baton_client;
use crate::election::{baton_leader, BATON_LOCK_FLAGS, BATON_SESSION_ID_SIZE};
use crate::error::{baton_result, Failure, ALL_RESULTS};
use crate::hold::{into_handle, why};
use crate::session::{baton_lost_reason, baton_session};
use crate::util::{
    boundary, boundary_value, bytes_arg, check_pid, copy_str_out, handle, null, str_arg,
    timeout_ms, write_opt,
};

/// Why a leader's term ended (`baton_stopped_leading.reason`). A term ends only
/// once the task has returned.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum baton_stop_reason {
    /// The task returned 0; leadership was given back (resigned).
    BATON_STOP_RETURNED = 1,
    /// The task returned another value (`task_result`); leadership was given back.
    BATON_STOP_FAILED = 2,
    /// Leadership ended under the task (`lost` says why): its token fired then,
    /// and the term ended when the task returned.
    BATON_STOP_LOST = 3,
    /// `stop` fired: the task's token fired, and leadership was given back once
    /// the task returned.
    BATON_STOP_STOPPED = 4,
}

/// The name of a `baton_stop_reason`, as Python and Node report it:
/// `"returned"`, `"failed"`, `"lost"`, `"stopped"`; `"unknown"` for another
/// number. A static NUL-terminated string, never freed.
#[no_mangle]
pub extern "C" fn baton_stop_reason_name(reason: u32) -> *const c_char {
    let s: &'static str = match reason {
        1 => "returned\0",
        2 => "failed\0",
        3 => "lost\0",
        4 => "stopped\0",
        _ => "unknown\0",
    };
    s.as_ptr().cast()
}

/// Why a term ended, as `baton_leader_stopped_callback` reports it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct baton_stopped_leading {
    /// What ended the term.
    pub reason: baton_stop_reason,
    /// With `BATON_STOP_FAILED`, the value the task returned; else 0.
    pub task_result: c_int,
    /// With `BATON_STOP_LOST`, why leadership ended (a `baton_hold_lost`
    /// value; `baton_hold_lost_name` names it); else 0.
    pub lost: u32,
    /// With `BATON_STOP_LOST` for a lost session, why the session was lost;
    /// else `BATON_LOST_NONE`.
    pub session_reason: baton_lost_reason,
}

/// Called on the thread running `baton_leader_task_run` each time this
/// candidate is elected, just before the task starts.
pub type baton_leader_started_callback = Option<unsafe extern "C" fn(userdata: *mut c_void)>;

/// Called on the thread running `baton_leader_task_run` each time a term ends,
/// after the task returned and leadership was given back; `stopped` is valid
/// during the call. Never called for a candidate that was not elected.
pub type baton_leader_stopped_callback =
    Option<unsafe extern "C" fn(userdata: *mut c_void, stopped: *const baton_stopped_leading)>;

/// Called on the client's dispatcher thread while `baton_leader_task_run`
/// runs: first with the current leader (`has_leader` false: nobody leads),
/// then at every change, in order, including this candidate's own terms.
/// `leader` and its value are valid during the call. None runs after `run`
/// returns.
pub type baton_new_leader_callback =
    Option<unsafe extern "C" fn(userdata: *mut c_void, leader: *const baton_leader)>;

/// The task: runs on the thread calling `baton_leader_task_run` while this
/// candidate leads. `token` fires the moment leadership ends or `stop` fires:
/// poll it (`baton_cancel_is_cancelled`), wait on it (`baton_cancel_wait`) or
/// pass it to blocking calls as their cancel, and return soon after it fires.
/// `token` belongs to the library and is valid during the call only (never
/// free it). Return 0 (`BATON_OK`) when the work is done (or the token fired);
/// any other value fails the term (`BATON_STOP_FAILED`). Return a
/// `baton_result` (e.g. one a call of the task returned): with requeue off,
/// `baton_leader_task_run` returns it.
pub type baton_leader_task_fn =
    Option<unsafe extern "C" fn(token: *const baton_cancel, userdata: *mut c_void) -> c_int>;

/// Options for `baton_leader_task_new`. Start from
/// `baton_leader_task_options_default()`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct baton_leader_task_options {
    /// The session to campaign with; NULL: the client's default session. Read
    /// during the call.
    pub session: *const baton_session,
    /// The flags of the leader key: `BATON_LOCK_FLAGS` (the default) or 0, as
    /// `baton_election_options.flags`.
    pub flags: u64,
    /// Whether to campaign again after a term ends (default true). With false,
    /// `baton_leader_task_run` returns after one term.
    pub requeue: bool,
    /// How long, after its task returned and it resigned, this candidate waits
    /// for another one to take over before campaigning again (default 500 ms;
    /// ends as soon as another leader is seen). Not after a loss.
    pub requeue_delay_ms: u64,
    /// Called before each task start (may be NULL).
    pub on_started: baton_leader_started_callback,
    /// Called after each term (may be NULL).
    pub on_stopped: baton_leader_stopped_callback,
    /// Called for each leader seen while running (may be NULL).
    pub on_new_leader: baton_new_leader_callback,
    /// Passed to the three callbacks.
    pub userdata: *mut c_void,
    /// Frees `userdata` (may be NULL): called once, by `baton_leader_task_free`
    /// (not when `baton_leader_task_new` fails).
    pub userdata_free: baton_userdata_free,
}

/// The default options: the client's default session, Go's lock flags,
/// requeue on with 500 ms, no callbacks.
#[no_mangle]
pub extern "C" fn baton_leader_task_options_default() -> baton_leader_task_options {
    baton_leader_task_options {
        session: std::ptr::null(),
        flags: BATON_LOCK_FLAGS,
        requeue: true,
        requeue_delay_ms: baton::DEFAULT_REQUEUE_DELAY.as_millis() as u64,
        on_started: None,
        on_stopped: None,
        on_new_leader: None,
        userdata: std::ptr::null_mut(),
        userdata_free: None,
    }
}

type Cbs = (
    baton_leader_started_callback,
    baton_leader_stopped_callback,
    baton_new_leader_callback,
);

/// Runs a task while leading an election, and only then (client-go's
/// `RunOrDie` with Curator's `autoRequeue`): campaign, run the task with a
/// token that fires the moment leadership ends, resign when it returns,
/// campaign again. Thread-safe; one `run` at a time.
pub struct baton_leader_task {
    task: LeaderTask,
    reg: Arc<Registration<Cbs>>,
    /// The last failed task's return value.
    last_failure: Arc<AtomicI32>,
    /// The message of the error made for the last failed task.
    failure_message: Mutex<Option<String>>,
    pid: u32,
}

fn leader_of(l: &Leader) -> baton_leader {
    let mut session = [0 as c_char; BATON_SESSION_ID_SIZE];
    for (d, s) in session
        .iter_mut()
        .zip(l.session.bytes().take(BATON_SESSION_ID_SIZE - 1))
    {
        *d = s as c_char;
    }
    baton_leader {
        has_leader: true,
        session,
        lock_index: l.lock_index,
        token: l.token,
        value: if l.value.is_empty() {
            std::ptr::null()
        } else {
            l.value.as_ptr()
        },
        value_len: l.value.len(),
    }
}

fn stopped_of(s: &StoppedLeading, task_result: c_int) -> baton_stopped_leading {
    let mut out = baton_stopped_leading {
        reason: baton_stop_reason::BATON_STOP_RETURNED,
        task_result: 0,
        lost: 0,
        session_reason: baton_lost_reason::BATON_LOST_NONE,
    };
    match s {
        StoppedLeading::Returned => {}
        StoppedLeading::Failed(_) => {
            out.reason = baton_stop_reason::BATON_STOP_FAILED;
            out.task_result = task_result;
        }
        StoppedLeading::Lost(l) => {
            let (r, sr) = why(*l);
            out.reason = baton_stop_reason::BATON_STOP_LOST;
            out.lost = r as u32;
            out.session_reason = sr;
        }
        _ => out.reason = baton_stop_reason::BATON_STOP_STOPPED,
    }
    out
}

/// Creates a leader task on the election `key`, campaigning with `value`
/// (`value_len` bytes; NULL when 0: what followers read as the leader's
/// identity). `options` may be NULL. No request is made. Writes
/// `*leader_task_out` on success; free it with `baton_leader_task_free`.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_leader_task_new(
    client: *const baton_client,
    key: *const c_char,
    value: *const u8,
    value_len: usize,
    options: *const baton_leader_task_options,
    leader_task_out: *mut *mut baton_leader_task,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let key = unsafe { str_arg(key, "key") }?;
        // SAFETY: the caller guarantees `value_len` readable bytes at `value`.
        let value = unsafe { bytes_arg(value, value_len, "value") }?;
        if leader_task_out.is_null() {
            return Err(null("leader_task_out"));
        }
        // SAFETY: the caller passes NULL or a valid options struct.
        let o = unsafe { options.as_ref() }
            .copied()
            .unwrap_or_else(|| baton_leader_task_options_default());
        let delay = timeout_ms(o.requeue_delay_ms).ok_or_else(|| {
            Failure::new(
                baton_result::BATON_INVALID_ARGUMENT,
                format!(
                    "options.requeue_delay_ms {} is too long (ten years or more)",
                    o.requeue_delay_ms
                ),
            )
        })?;
        let mut eo = ElectionOptions::new().flags(o.flags);
        // SAFETY: the caller passes NULL or a live session handle.
        if let Some(s) = unsafe { o.session.as_ref() } {
            eo = eo.session(s.get()?.clone());
        }
        let election = c.election_with(key, eo)?;
        let reg = Registration::new(
            (o.on_started, o.on_stopped, o.on_new_leader),
            o.userdata,
            o.userdata_free,
        );
        let last_failure = Arc::new(AtomicI32::new(0));
        let mut task = LeaderTask::new(election, value)
            .requeue(o.requeue)
            .requeue_delay(delay);
        if o.on_started.is_some() {
            let r = reg.clone();
            task = task.on_started_leading(move || {
                r.invoke(|cbs, ud| {
                    if let Some(f) = cbs.0 {
                        // SAFETY: the caller's function with the documented signature.
                        unsafe { f(ud) }
                    }
                })
            });
        }
        if o.on_stopped.is_some() {
            let r = reg.clone();
            let lf = last_failure.clone();
            task = task.on_stopped_leading(move |s| {
                let info = stopped_of(s, lf.load(Ordering::SeqCst));
                r.invoke(|cbs, ud| {
                    if let Some(f) = cbs.1 {
                        // SAFETY: the caller's function; `info` outlives the call.
                        unsafe { f(ud, &info) }
                    }
                })
            });
        }
        if o.on_new_leader.is_some() {
            let r = reg.clone();
            task = task.on_new_leader(move |l| {
                let info = l.as_ref().map_or_else(none_leader, leader_of);
                r.invoke(|cbs, ud| {
                    if let Some(f) = cbs.2 {
                        // SAFETY: the caller's function; `info` and its value outlive the call.
                        unsafe { f(ud, &info) }
                    }
                })
            });
        }
        let h = baton_leader_task {
            task,
            reg,
            last_failure,
            failure_message: Mutex::new(None),
            pid: std::process::id(),
        };
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { into_handle(h, leader_task_out) };
        Ok(())
    })
}

fn none_leader() -> baton_leader {
    baton_leader {
        has_leader: false,
        session: [0; BATON_SESSION_ID_SIZE],
        lock_index: 0,
        token: 0,
        value: std::ptr::null(),
        value_len: 0,
    }
}

/// Campaigns and runs `task_fn(token, userdata)` while leading, until `stop`
/// (may be NULL: until the client closes) fires, or, with requeue off, for one
/// term. When the task returns, the candidate resigns if it still leads.
///
/// `BATON_OK` when `stop` fires (while campaigning: at once, nothing held;
/// while leading: once the task returned and leadership was given back), or
/// after the one term with requeue off when the task returned 0 or leadership
/// was lost. With requeue off and a task that returned another value: that
/// value when it is a `baton_result`, else `BATON_INVALID_ARGUMENT` (the
/// message gives the value). A campaign's lasting error ends the loop:
/// `BATON_CLOSED`, `BATON_CONFLICT` (the key is not an election's, or `run` is
/// already running on this task), `BATON_SESSION_INVALIDATED` (an explicit
/// session was lost), `BATON_PERMISSION_DENIED`; transient ones are retried.
#[no_mangle]
pub unsafe extern "C" fn baton_leader_task_run(
    leader_task: *const baton_leader_task,
    task_fn: baton_leader_task_fn,
    userdata: *mut c_void,
    stop: *const baton_cancel,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let t = unsafe { handle(leader_task, "leader_task") }?;
        check_pid(t.pid)?;
        let Some(f) = task_fn else {
            return Err(null("task_fn"));
        };
        // SAFETY: the caller passes NULL or a live cancel handle.
        let stop = unsafe { stop.as_ref() }
            .map(|c| c.token.clone())
            .unwrap_or_default();
        let key = t.task.key().to_string();
        let result = t.task.run(
            |tok| {
                let token = baton_cancel { token: tok.clone() };
                // SAFETY: the caller's function with the documented signature;
                // `token` outlives the call.
                let r = unsafe { f(&token, userdata) };
                if r == 0 {
                    return Ok(());
                }
                t.last_failure.store(r, Ordering::SeqCst);
                let msg = format!("leader task {key:?}: the task returned {r}");
                *t.failure_message.lock().unwrap_or_else(|p| p.into_inner()) = Some(msg.clone());
                Err(baton::Error::new(ErrorKind::Server, msg))
            },
            &stop,
        );
        match result {
            Ok(()) => Ok(()),
            Err(e) => {
                let ours = t
                    .failure_message
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_deref()
                    == Some(e.message());
                if !ours {
                    return Err(e.into());
                }
                let r = t.last_failure.load(Ordering::SeqCst);
                let code = ALL_RESULTS
                    .iter()
                    .copied()
                    .find(|c| *c != baton_result::BATON_OK && *c as u32 as i64 == i64::from(r));
                Err(match code {
                    Some(code) => Failure::new(code, e.message()),
                    None => Failure::new(
                        baton_result::BATON_INVALID_ARGUMENT,
                        format!("{}, which is not a baton_result", e.message()),
                    ),
                })
            }
        }
    })
}

/// Whether this candidate leads now. False for NULL and in a forked child.
#[no_mangle]
pub unsafe extern "C" fn baton_leader_task_is_leader(
    leader_task: *const baton_leader_task,
) -> bool {
    boundary_value(false, || {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { leader_task.as_ref() }
            .is_some_and(|t| t.pid == std::process::id() && t.task.is_leader())
    })
}

/// The current term's sequencer and fencing token, for the task to fence its
/// writes; as `baton_election_sequencer`. `BATON_NOT_HELD` when not leading.
#[no_mangle]
pub unsafe extern "C" fn baton_leader_task_sequencer(
    leader_task: *const baton_leader_task,
    buf: *mut c_char,
    len: usize,
    len_out: *mut usize,
    token_out: *mut u64,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let t = unsafe { handle(leader_task, "leader_task") }?;
        check_pid(t.pid)?;
        let Some(seq) = t.task.election().sequencer() else {
            return Err(Failure::new(
                baton_result::BATON_NOT_HELD,
                format!(
                    "leader task {:?} does not lead: there is no sequencer",
                    t.task.key()
                ),
            ));
        };
        // SAFETY: the caller guarantees `buf`/`len`, `len_out` and `token_out`.
        unsafe {
            write_opt(token_out, seq.token);
            copy_str_out(seq.to_string().as_bytes(), buf, len, len_out)
        }
    })
}

/// Frees a leader task (no `baton_leader_task_run` may still be running on
/// it): its callbacks never run again and `userdata_free` is called. NULL is a
/// no-op.
#[no_mangle]
pub unsafe extern "C" fn baton_leader_task_free(leader_task: *mut baton_leader_task) {
    boundary_value((), || {
        if leader_task.is_null() {
            return;
        }
        // SAFETY: a pointer from baton_leader_task_new, freed once.
        let b = unsafe { Box::from_raw(leader_task) };
        if b.pid != std::process::id() {
            std::mem::forget(b);
            return;
        }
        b.reg.deactivate();
        drop(b);
    })
}
