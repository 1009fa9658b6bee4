//! Core objects owned by Python objects, dropped with the interpreter detached, and the
//! pending exception a drop must not lose.
//!
//! Dropping a core `Lock`, `Semaphore`, `Election` or `Client` may wait: a held key is
//! released over the network, a lost slot's give-back waits for the clean-up thread, a
//! client joins its threads. A Python object is freed with the GIL held, and baton's own
//! threads need the GIL too (to log through `logging`, to run callbacks): a drop that waited
//! for one of them while holding the GIL could wait forever (the fault harness found a Python
//! worker stuck so: the clean-up thread held a semaphore's clean-up lock and waited for the
//! GIL, the main thread held the GIL and waited for that lock). So these drops run detached.
//!
//! A drop often runs while an exception is being raised: `client.semaphore("s", 2).acquire()`
//! frees the temporary semaphore after `acquire` has set its exception and before the
//! interpreter looks at it. The drop logs (a semaphore's own session ends with it, a closing
//! client's sessions end), the `logging` bridge runs Python code on the same thread, and Python
//! code run with an exception pending clears or replaces it: the caller then got `SystemError:
//! error return without exception set` instead of the error. So whatever baton runs attached
//! from a drop or from one of its threads sets the pending exception aside first and puts it
//! back after ([`keep_pending`]).

use std::ops::Deref;

use pyo3::{ffi, Python};

/// Owns `T` for a `#[pyclass]` and drops it with the interpreter detached.
pub(crate) struct Detached<T: Send>(Option<T>);

impl<T: Send> Detached<T> {
    pub(crate) fn new(value: T) -> Detached<T> {
        Detached(Some(value))
    }
}

impl<T: Send> Deref for Detached<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0.as_ref().expect("only taken by drop")
    }
}

impl<T: Send> Drop for Detached<T> {
    fn drop(&mut self) {
        if let Some(value) = self.0.take() {
            // A pyclass field is dropped while its object is freed, attached: detach for it,
            // with the exception being raised (if any) out of reach of what the drop runs.
            Python::attach(|py| keep_pending(py, || py.detach(move || drop(value))));
        }
    }
}

/// The thread's pending exception, set aside; put back when dropped (even by a panic).
struct SetAside {
    ptype: *mut ffi::PyObject,
    pvalue: *mut ffi::PyObject,
    ptraceback: *mut ffi::PyObject,
}

impl Drop for SetAside {
    fn drop(&mut self) {
        if !self.ptype.is_null() {
            // SAFETY: the thread is attached (the `Python` token of `keep_pending` outlives
            // this guard); `PyErr_Restore` steals the three references `PyErr_Fetch` gave us,
            // and replaces (dropping) whatever exception the code in between left set.
            unsafe { ffi::PyErr_Restore(self.ptype, self.pvalue, self.ptraceback) };
        }
    }
}

/// Runs `f` with this thread's pending Python exception (if any) set aside, and puts it back
/// afterwards: Python code that `f` runs (log records, callbacks, reference counts released
/// on re-attaching) sees no exception and cannot clear the one being raised. `f` may detach.
pub(crate) fn keep_pending<R>(_py: Python<'_>, f: impl FnOnce() -> R) -> R {
    let mut saved = SetAside {
        ptype: std::ptr::null_mut(),
        pvalue: std::ptr::null_mut(),
        ptraceback: std::ptr::null_mut(),
    };
    // SAFETY: the thread is attached (`_py`); `PyErr_Fetch` clears the indicator and hands
    // over owned references (all null when nothing is pending), which `SetAside` gives back.
    // (PyErr_Fetch, not `PyErr::take`: that resumes a pending `PanicException` as a panic.)
    unsafe { ffi::PyErr_Fetch(&mut saved.ptype, &mut saved.pvalue, &mut saved.ptraceback) };
    let r = f();
    drop(saved);
    r
}
