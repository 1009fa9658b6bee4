//! Core objects owned by Python objects, dropped with the interpreter detached.
//!
//! Dropping a core `Lock`, `Semaphore`, `Election` or `Client` may wait: a held key is
//! released over the network, a lost slot's give-back waits for the clean-up thread, a
//! client joins its threads. A Python object is freed with the GIL held, and baton's own
//! threads need the GIL too (to log through `logging`, to run callbacks): a drop that waited
//! for one of them while holding the GIL could wait forever (the fault harness found a Python
//! worker stuck so: the clean-up thread held a semaphore's clean-up lock and waited for the
//! GIL, the main thread held the GIL and waited for that lock). So these drops run detached.

use std::ops::Deref;

use pyo3::Python;

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
            // A pyclass field is dropped while its object is freed, attached: detach for it.
            Python::attach(|py| py.detach(move || drop(value)));
        }
    }
}
