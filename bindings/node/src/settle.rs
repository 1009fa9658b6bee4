//! Promises settled from baton's threads through one thread-safe function per JavaScript
//! thread (environment), made on first use.
//!
//! napi-rs's deferred makes a thread-safe function (a libuv handle, an environment clean-up
//! hook, a mutex) for every promise and tears it down after; profiles of acquire+release
//! cycles showed the JavaScript thread blocking on those locks while the settling thread still
//! held them. Here a call only makes its promise; its outcome goes to the environment's one
//! queue, and the JavaScript thread settles it. The queue keeps the process alive only while
//! promises are pending (it is referenced while their count is above zero), like the
//! per-promise functions did.
//!
//! Each environment also has its [`Turns`] (see `baton::pool`): the baton thread that ran a call
//! stays bound to the environment until the loop's turn that took the outcome is over, so the
//! call that the outcome's continuation makes (a release right after an acquire) finds that
//! thread awake. An outcome taken here (in `call_js`) schedules the turn-over with
//! `setImmediate`: immediates run in the loop's check phase, after the poll phase that ran
//! `call_js` and the promise reactions it queued, that is after every call the continuations
//! made at once.

use std::cell::RefCell;
use std::ffi::c_void;
use std::ptr;
use std::sync::{Arc, Mutex};

use baton::pool::{Ticket, Turns};
use napi::bindgen_prelude::{FromNapiValue, Object, ToNapiValue};
use napi::{sys, Env, Error, JsError, Result, Status};

/// What the JavaScript thread runs for one settled call.
type Settle = Box<dyn FnOnce(sys::napi_env) + Send>;

/// A raw napi handle moved to another thread; only used on the JavaScript thread, or with the
/// thread-safe calls napi allows from any thread.
#[derive(Clone, Copy)]
struct Raw<T>(T);
// SAFETY: napi_threadsafe_function may be called from any thread (that is its purpose); a
// napi_deferred only travels inside a `Settle`, which uses it on the JavaScript thread.
unsafe impl<T> Send for Raw<T> {}

/// One environment's thread-safe function; `None` once the environment is torn down.
struct Queue {
    tsfn: Mutex<Option<Raw<sys::napi_threadsafe_function>>>,
}

/// The queue of this JavaScript thread's environment, its pending promises, its turns, and
/// what schedules a turn-over (`setImmediate` and the native `turnOver` it is given).
struct Local {
    env: sys::napi_env,
    queue: Arc<Queue>,
    pending: usize,
    turns: Arc<Turns>,
    set_immediate: sys::napi_ref,
    turn_over: sys::napi_ref,
    /// The async context (and its resource object) that promises settled from the loop's own
    /// callbacks are settled in (`Deferred::settle_from_loop`); null if it could not be made.
    context: sys::napi_async_context,
    resource: sys::napi_ref,
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

fn check(status: sys::napi_status, what: &str) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::new(
            Status::GenericFailure,
            format!("{what} failed (napi status {status})"),
        ))
    }
}

/// Runs a [`Settle`] on the JavaScript thread (`env` is null while the environment is torn
/// down: the promise is gone, only the box is freed).
unsafe extern "C" fn call_js(
    env: sys::napi_env,
    _js_callback: sys::napi_value,
    _context: *mut c_void,
    data: *mut c_void,
) {
    // SAFETY: `data` is the `Box<Settle>` leaked by `Deferred::settle`, handed over once.
    let settle = unsafe { Box::from_raw(data.cast::<Settle>()) };
    if !env.is_null() {
        settle(env);
    }
}

/// `turnOver()`, run by `setImmediate` on the JavaScript thread: the loop's turn that took
/// outcomes is over (see the module docs).
unsafe extern "C" fn turn_over(
    env: sys::napi_env,
    _info: sys::napi_callback_info,
) -> sys::napi_value {
    LOCAL.with(|l| {
        if let Some(local) = l.borrow().as_ref().filter(|local| local.env == env) {
            local.turns.turn_over();
        }
    });
    ptr::null_mut()
}

/// Schedules `turnOver` with `setImmediate` (on the JavaScript thread of `env`). Failing that,
/// the turn is over at once: the bound thread then parks early, which only costs a wake-up.
fn schedule_turn_over(env: sys::napi_env) {
    let refs = LOCAL.with(|l| {
        l.borrow()
            .as_ref()
            .filter(|local| local.env == env)
            .map(|local| (local.set_immediate, local.turn_over, local.turns.clone()))
    });
    let Some((set_immediate, turn_over, turns)) = refs else {
        return;
    };
    // SAFETY: on the JavaScript thread of `env`, with references made in that env.
    let scheduled = unsafe {
        let (mut f, mut arg, mut global, mut result) = (
            ptr::null_mut(),
            ptr::null_mut(),
            ptr::null_mut(),
            ptr::null_mut(),
        );
        sys::napi_get_reference_value(env, set_immediate, &mut f) == sys::Status::napi_ok
            && sys::napi_get_reference_value(env, turn_over, &mut arg) == sys::Status::napi_ok
            && sys::napi_get_global(env, &mut global) == sys::Status::napi_ok
            && sys::napi_call_function(env, global, f, 1, &arg, &mut result) == sys::Status::napi_ok
    };
    if !scheduled {
        turns.turn_over();
    }
}

/// A strong reference to the global `setImmediate` and to a new native `turnOver`.
fn turn_refs(env: &Env) -> Result<(sys::napi_ref, sys::napi_ref)> {
    let (mut global, mut set_immediate, mut f) =
        (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    let (mut set_ref, mut f_ref) = (ptr::null_mut(), ptr::null_mut());
    let name = "turnOver";
    // SAFETY: on the JavaScript thread with its live env; the names outlive the calls.
    unsafe {
        check(
            sys::napi_get_global(env.raw(), &mut global),
            "napi_get_global",
        )?;
        check(
            sys::napi_get_named_property(
                env.raw(),
                global,
                c"setImmediate".as_ptr(),
                &mut set_immediate,
            ),
            "napi_get_named_property(setImmediate)",
        )?;
        check(
            sys::napi_create_function(
                env.raw(),
                name.as_ptr().cast(),
                name.len() as isize,
                Some(turn_over),
                ptr::null_mut(),
                &mut f,
            ),
            "napi_create_function",
        )?;
        check(
            sys::napi_create_reference(env.raw(), set_immediate, 1, &mut set_ref),
            "napi_create_reference",
        )?;
        check(
            sys::napi_create_reference(env.raw(), f, 1, &mut f_ref),
            "napi_create_reference",
        )?;
    }
    Ok((set_ref, f_ref))
}

/// The turns of `env`'s loop (made with its queue on first use).
pub(crate) fn turns(env: &Env) -> Result<Arc<Turns>> {
    queue(env)?;
    LOCAL.with(|l| {
        l.borrow()
            .as_ref()
            .filter(|local| local.env == env.raw())
            .map(|local| local.turns.clone())
            .ok_or_else(|| Error::from_reason("no baton queue for this environment"))
    })
}

/// The queue of `env`, made on first use.
fn queue(env: &Env) -> Result<Arc<Queue>> {
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        if let Some(local) = l.as_ref().filter(|local| local.env == env.raw()) {
            return Ok(local.queue.clone());
        }
        let (set_immediate, turn_over) = turn_refs(env)?;
        let mut name = ptr::null_mut();
        let text = "baton";
        // SAFETY: called on the JavaScript thread with its live env; `text` outlives the call.
        check(
            unsafe {
                sys::napi_create_string_utf8(
                    env.raw(),
                    text.as_ptr().cast(),
                    text.len() as isize,
                    &mut name,
                )
            },
            "napi_create_string_utf8",
        )?;
        let mut tsfn = ptr::null_mut();
        // SAFETY: as above; no JavaScript function (call_js settles), one owning thread (the
        // environment, released by the clean-up hook below), unlimited queue.
        check(
            unsafe {
                sys::napi_create_threadsafe_function(
                    env.raw(),
                    ptr::null_mut(),
                    ptr::null_mut(),
                    name,
                    0,
                    1,
                    ptr::null_mut(),
                    None,
                    ptr::null_mut(),
                    Some(call_js),
                    &mut tsfn,
                )
            },
            "napi_create_threadsafe_function",
        )?;
        // SAFETY: the function was just made on this thread; unreferenced until a promise is
        // pending.
        check(
            unsafe { sys::napi_unref_threadsafe_function(env.raw(), tsfn) },
            "napi_unref_threadsafe_function",
        )?;
        let queue = Arc::new(Queue {
            tsfn: Mutex::new(Some(Raw(tsfn))),
        });
        let q = queue.clone();
        let (context, resource) = async_context(env.raw(), name);
        let scope = Raw((env.raw(), context, resource));
        env.add_env_cleanup_hook((), move |()| {
            // Settling threads find `None` from now on and free their outcome themselves.
            if let Some(t) = q.tsfn.lock().unwrap_or_else(|p| p.into_inner()).take() {
                // SAFETY: the environment still exists while its clean-up hooks run.
                unsafe {
                    sys::napi_release_threadsafe_function(
                        t.0,
                        sys::ThreadsafeFunctionReleaseMode::abort,
                    )
                };
            }
            let (env, context, resource) = scope.0;
            LOCAL.with(|l| {
                if let Some(local) = l.borrow_mut().as_mut().filter(|local| local.env == env) {
                    local.context = ptr::null_mut();
                }
            });
            if !context.is_null() {
                // SAFETY: made in this environment, which exists while its hooks run; used
                // no more (cleared above).
                unsafe {
                    sys::napi_async_destroy(env, context);
                    sys::napi_delete_reference(env, resource);
                }
            }
        })?;
        *l = Some(Local {
            env: env.raw(),
            queue: queue.clone(),
            pending: 0,
            turns: Turns::new(),
            set_immediate,
            turn_over,
            context,
            resource,
        });
        Ok(queue)
    })
}

/// An async context for `env`, with a resource object kept alive by a reference (nulls if
/// napi refuses: promises are then settled through the queue only).
fn async_context(
    env: sys::napi_env,
    name: sys::napi_value,
) -> (sys::napi_async_context, sys::napi_ref) {
    let (mut resource, mut reference, mut context) =
        (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    // SAFETY: on the JavaScript thread with its live env; `name` is a string of this env.
    unsafe {
        if sys::napi_create_object(env, &mut resource) != sys::Status::napi_ok
            || sys::napi_create_reference(env, resource, 1, &mut reference) != sys::Status::napi_ok
        {
            return (ptr::null_mut(), ptr::null_mut());
        }
        if sys::napi_async_init(env, resource, name, &mut context) != sys::Status::napi_ok {
            sys::napi_delete_reference(env, reference);
            return (ptr::null_mut(), ptr::null_mut());
        }
    }
    (context, reference)
}

/// One more (`true`) or one fewer pending promise on this thread; the queue keeps the process
/// alive while any is pending.
fn count(env: sys::napi_env, more: bool) {
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        let Some(local) = l.as_mut().filter(|local| local.env == env) else {
            return;
        };
        let before = local.pending;
        local.pending = if more {
            before + 1
        } else {
            before.saturating_sub(1)
        };
        let Some(t) = *local.queue.tsfn.lock().unwrap_or_else(|p| p.into_inner()) else {
            return;
        };
        // SAFETY: on the JavaScript thread of `env`, with the environment's live function.
        unsafe {
            if before == 0 && local.pending == 1 {
                sys::napi_ref_threadsafe_function(env, t.0);
            } else if before == 1 && local.pending == 0 {
                sys::napi_unref_threadsafe_function(env, t.0);
            }
        }
    });
}

/// A promise to settle from another thread (once; dropping it unsettled rejects it).
pub(crate) struct Deferred {
    raw: Option<Raw<sys::napi_deferred>>,
    queue: Arc<Queue>,
    turns: Arc<Turns>,
}

/// Makes a promise and the [`Deferred`] that settles it.
pub(crate) fn promise<'e>(env: &'e Env) -> Result<(Deferred, Object<'e>)> {
    let queue = queue(env)?;
    let (mut deferred, mut promise) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: on the JavaScript thread with its live env.
    check(
        unsafe { sys::napi_create_promise(env.raw(), &mut deferred, &mut promise) },
        "napi_create_promise",
    )?;
    count(env.raw(), true);
    // SAFETY: `promise` is the object napi just made in this env.
    let object = unsafe { Object::from_napi_value(env.raw(), promise)? };
    Ok((
        Deferred {
            raw: Some(Raw(deferred)),
            queue,
            turns: turns(env)?,
        },
        object,
    ))
}

/// Rejects `deferred` with `err` (on the JavaScript thread).
unsafe fn reject(env: sys::napi_env, deferred: sys::napi_deferred, err: Error) {
    // SAFETY: the caller is on the JavaScript thread of `env`.
    unsafe {
        let value = JsError::from(err).into_value(env);
        sys::napi_reject_deferred(env, deferred, value);
    }
}

impl Deferred {
    /// The turns of the environment that made the promise.
    pub(crate) fn turns(&self) -> &Arc<Turns> {
        &self.turns
    }

    /// Settles the promise with `outcome` (from any thread): resolved with the value, or
    /// rejected with the error. `ticket`: the outcome's, from a call made with
    /// `Pool::run_for` on this environment's turns.
    pub(crate) fn settle<T: ToNapiValue + Send + 'static>(
        mut self,
        ticket: Option<Ticket>,
        outcome: std::result::Result<T, Error>,
    ) {
        let Some(raw) = self.raw.take() else { return };
        let turns = self.turns.clone();
        let settle: Settle = Box::new(move |env| {
            let raw = raw; // the whole `Raw` (Send), not its pointer field
                           // SAFETY: run by `call_js` on the JavaScript thread of the env that made the promise.
            unsafe {
                match outcome.and_then(|v| T::to_napi_value(env, v)) {
                    Ok(value) => {
                        sys::napi_resolve_deferred(env, raw.0, value);
                    }
                    Err(e) => reject(env, raw.0, e),
                }
            }
            count(env, false);
            if let Some(t) = ticket {
                if turns.took(t) {
                    schedule_turn_over(env);
                }
            }
        });
        let data = Box::into_raw(Box::new(settle)).cast::<c_void>();
        let guard = self.queue.tsfn.lock().unwrap_or_else(|p| p.into_inner());
        let status = match *guard {
            // SAFETY: the function is live while it is in the queue (the clean-up hook takes
            // it out, under this lock, before releasing it).
            Some(t) => unsafe {
                sys::napi_call_threadsafe_function(
                    t.0,
                    data,
                    sys::ThreadsafeFunctionCallMode::nonblocking,
                )
            },
            None => sys::Status::napi_closing,
        };
        drop(guard);
        if status != sys::Status::napi_ok {
            // The environment is gone: nobody awaits the promise; free the outcome here.
            // SAFETY: `data` was not handed to napi.
            drop(unsafe { Box::from_raw(data.cast::<Settle>()) });
        }
    }
}

impl Deferred {
    /// Settles the promise now, on the JavaScript thread, from a libuv callback of its loop (a
    /// warm call's socket or timer: no JavaScript is running). It is settled in a callback
    /// scope of its own, as napi runs a thread-safe function's `call_js`, so its reactions run
    /// (when the scope closes) before the loop goes on, without the queue's wake-up of the
    /// loop: an `eventfd` write, a poll and a read per call. Through the queue when the
    /// environment has no async context, or a scope cannot be opened.
    ///
    /// # Safety
    /// On the JavaScript thread of `env`, the environment that made the promise, in a libuv
    /// callback (not inside a JavaScript call).
    pub(crate) unsafe fn settle_from_loop<T: ToNapiValue + Send + 'static>(
        mut self,
        env: sys::napi_env,
        outcome: std::result::Result<T, Error>,
    ) {
        let scope = LOCAL.with(|l| {
            l.borrow()
                .as_ref()
                .filter(|local| local.env == env && !local.context.is_null())
                .map(|local| (local.context, local.resource))
        });
        let Some((context, resource)) = scope else {
            return self.settle(None, outcome);
        };
        let (mut handles, mut object, mut callback) =
            (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        // SAFETY: the caller's: the JavaScript thread of the env that made the promise and
        // the references, outside JavaScript. The scopes are closed in reverse order.
        unsafe {
            if sys::napi_open_handle_scope(env, &mut handles) != sys::Status::napi_ok {
                return self.settle(None, outcome);
            }
            if sys::napi_get_reference_value(env, resource, &mut object) != sys::Status::napi_ok
                || sys::napi_open_callback_scope(env, object, context, &mut callback)
                    != sys::Status::napi_ok
            {
                sys::napi_close_handle_scope(env, handles);
                return self.settle(None, outcome);
            }
            if let Some(raw) = self.raw.take() {
                match outcome.and_then(|v| T::to_napi_value(env, v)) {
                    Ok(value) => {
                        sys::napi_resolve_deferred(env, raw.0, value);
                    }
                    Err(e) => reject(env, raw.0, e),
                }
                count(env, false);
            }
            // Runs the promise's reactions (the microtask queue) and `process.nextTick`s.
            sys::napi_close_callback_scope(env, callback);
            sys::napi_close_handle_scope(env, handles);
        }
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        if self.raw.is_some() {
            // A call that ended without an outcome (its thread panicked).
            let raw = self.raw.take();
            let d = Deferred {
                raw,
                queue: self.queue.clone(),
                turns: self.turns.clone(),
            };
            d.settle::<()>(
                None,
                Err(Error::from_reason(
                    "baton call thread ended without a result",
                )),
            );
        }
    }
}
