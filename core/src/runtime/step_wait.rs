//! [`StepWait`]: a waiting call cut into short blocking steps, so that the async
//! layer can make it with no thread of its own (`aio::waits`): each step runs on a
//! step thread; between steps the future waits for a change Consul reports (a hub
//! or watch hook), its deadline, a cancel or the client's close.

use crate::foundations::cancel::CancelToken;
use crate::foundations::error::Result;

/// The state of one waiting call (a barrier's wait, a double barrier's enter or
/// leave) between its steps. Every method blocks on requests and runs on a step
/// thread, never on an executor's.
pub(crate) trait StepWait: Send + 'static {
    /// What the call returns.
    type Out: Send + 'static;
    /// One look, and the writes it calls for: `Ok(Some(out))` when the call is
    /// over, `Ok(None)` to wait for the next change and look again. `cancel`
    /// fires when the call is cancelled or dropped; requests listen to it.
    fn step(&mut self, cancel: &CancelToken) -> Result<Option<Self::Out>>;
    /// The deadline passed while waiting: what the call returns then (it may
    /// make requests, each bounded by the request timeout: a withdrawal).
    fn timed_out(&mut self) -> Result<Self::Out>;
    /// The call ended without an outcome (an error, a cancel, the future
    /// dropped): undo what the steps left (a registered participant key).
    fn abandon(&mut self) {}
}
