//! The callback contract shared by every handle: a C function pointer, its
//! `userdata` and an optional `userdata_free`, never run after the handle's
//! `_free` returns, and freeable from inside its own run.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;

use baton::CallbackId;

use crate::util::UserData;

/// Frees a callback's `userdata`; called exactly once, after the callback's last run.
pub type baton_userdata_free = Option<unsafe extern "C" fn(userdata: *mut c_void)>;

/// One registered callback of type `F` (a C function pointer), shared by the
/// handle and the closure the core runs.
pub(crate) struct Registration<F> {
    state: Mutex<RegState<F>>,
    idle: Condvar,
}

struct RegState<F> {
    active: bool,
    running_on: Option<ThreadId>,
    callback: F,
    userdata: UserData,
    userdata_free: baton_userdata_free,
}

impl<F: Copy> Registration<F> {
    pub(crate) fn new(
        callback: F,
        userdata: *mut c_void,
        userdata_free: baton_userdata_free,
    ) -> Arc<Registration<F>> {
        Arc::new(Registration {
            state: Mutex::new(RegState {
                active: true,
                running_on: None,
                callback,
                userdata: UserData(userdata),
                userdata_free,
            }),
            idle: Condvar::new(),
        })
    }

    fn state(&self) -> MutexGuard<'_, RegState<F>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `call(callback, userdata)` unless the registration was removed. No
    /// library lock is held during the call; a panic of ours inside `call` is
    /// caught (the C function itself cannot unwind).
    pub(crate) fn invoke(&self, call: impl FnOnce(F, *mut c_void)) {
        let (cb, ud) = {
            let mut st = self.state();
            if !st.active {
                return;
            }
            st.running_on = Some(std::thread::current().id());
            (st.callback, st.userdata)
        };
        let _ = catch_unwind(AssertUnwindSafe(|| call(cb, ud.0)));
        let free_now = {
            let mut st = self.state();
            st.running_on = None;
            self.idle.notify_all();
            // Freed from inside the callback: finish the teardown here.
            if st.active {
                None
            } else {
                st.userdata_free.take()
            }
        };
        if let Some(f) = free_now {
            // SAFETY: the caller's userdata_free, called once (taken out of the state).
            unsafe { f(ud.0) };
        }
    }

    /// Stops further runs; waits for a running one unless that is this thread's
    /// (then `invoke` frees the userdata when the callback returns).
    pub(crate) fn deactivate(&self) {
        let mut st = self.state();
        st.active = false;
        let me = std::thread::current().id();
        if st.running_on == Some(me) {
            return;
        }
        while st.running_on.is_some() {
            st = self.idle.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        let f = st.userdata_free.take();
        let ud = st.userdata;
        drop(st);
        if let Some(f) = f {
            // SAFETY: the caller's userdata_free, called once (taken out of the state).
            unsafe { f(ud.0) };
        }
    }
}

/// The callbacks registered on one handle, with the core's id of each.
pub(crate) struct Callbacks<F> {
    regs: Mutex<Vec<(CallbackId, Arc<Registration<F>>)>>,
}

impl<F: Copy> Callbacks<F> {
    pub(crate) fn new() -> Callbacks<F> {
        Callbacks {
            regs: Mutex::new(Vec::new()),
        }
    }

    /// Registers `reg` with the core through `register` (which gets a clone to
    /// move into the core's closure), keeping the id for [`Callbacks::clear`].
    pub(crate) fn add(
        &self,
        reg: Arc<Registration<F>>,
        register: impl FnOnce(Arc<Registration<F>>) -> CallbackId,
    ) {
        // Held across the registration so that a concurrent `clear` sees it.
        let mut regs = self.regs.lock().unwrap_or_else(|p| p.into_inner());
        let id = register(reg.clone());
        regs.push((id, reg));
    }

    /// Removes every callback from the core (`remove`) and deactivates it:
    /// afterwards none is running (except on this very thread) or will run.
    pub(crate) fn clear(&self, remove: impl Fn(CallbackId)) {
        let regs = std::mem::take(&mut *self.regs.lock().unwrap_or_else(|p| p.into_inner()));
        for (id, reg) in regs {
            remove(id);
            reg.deactivate();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static FREED: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn count_free(_: *mut c_void) {
        FREED.fetch_add(1, Ordering::SeqCst);
    }

    unsafe extern "C" fn nop(_: *mut c_void) {}

    #[test]
    fn a_panic_inside_a_run_is_caught_and_the_registration_still_tears_down() {
        type F = unsafe extern "C" fn(*mut c_void);
        let reg: Arc<Registration<F>> =
            Registration::new(nop, std::ptr::null_mut(), Some(count_free));
        let before = FREED.load(Ordering::SeqCst);
        // Our side of a callback boundary panics: it must not unwind out of invoke,
        // and the registration must not be left "running" (deactivate would hang).
        reg.invoke(|_, _| panic!("forced panic at a callback boundary"));
        let mut ran = false;
        reg.invoke(|_, _| ran = true);
        assert!(ran, "the registration keeps working after a caught panic");
        reg.deactivate();
        assert_eq!(FREED.load(Ordering::SeqCst), before + 1);
        let mut after = false;
        reg.invoke(|_, _| after = true);
        assert!(!after, "no run after deactivate");
    }
}
