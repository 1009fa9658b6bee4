//! Whether Consul answers, shared by every call of a client (see `ride_out`).

use crate::foundations::cancel::CancelToken;

/// Whether Consul answers: set troubled by a transient failure, and back by the
/// next real answer (any thread's), which also wakes every call waiting out the
/// outage (`ride_out`), so they retry at once instead of at their next pause.
#[derive(Default)]
pub(crate) struct Availability {
    troubled: std::sync::atomic::AtomicBool,
    back: std::sync::Mutex<CancelToken>,
    probing: std::sync::atomic::AtomicBool,
}

/// The right to send the client's one probe of an unavailable Consul, given
/// back when dropped.
pub(crate) struct ProbeSlot<'a>(&'a Availability);

impl Drop for ProbeSlot<'_> {
    fn drop(&mut self) {
        self.0
            .probing
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Availability {
    /// The probe slot, if no other call holds it.
    pub(crate) fn try_probe(&self) -> Option<ProbeSlot<'_>> {
        use std::sync::atomic::Ordering;
        self.probing
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .ok()
            .map(|_| ProbeSlot(self))
    }

    pub(super) fn saw(&self, transient_failure: bool) {
        use std::sync::atomic::Ordering;
        if transient_failure {
            self.troubled.store(true, Ordering::SeqCst);
        } else if self.troubled.load(Ordering::Relaxed)
            && self.troubled.swap(false, Ordering::SeqCst)
        {
            let fired = std::mem::take(&mut *crate::foundations::sync::lock(&self.back));
            fired.cancel();
        }
    }

    /// A token cancelled at the next answer after a transient failure.
    pub(crate) fn next_answer(&self) -> CancelToken {
        crate::foundations::sync::lock(&self.back).clone()
    }
}
