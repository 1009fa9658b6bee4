//! [`AsyncBarrier`] and [`AsyncDoubleBarrier`].

use std::time::Duration;

use super::super::call::Call;
use super::super::Waiting;
use super::stepped::{on_key, on_prefix, stepped};
use crate::foundations::cancel::CancelToken;
use crate::recipes::barrier::{Barrier, DoubleBarrier};

/// A [`Barrier`]'s calls as futures.
pub trait AsyncBarrier {
    /// [`Barrier::hold`] as a future.
    fn hold_async(&self) -> Call<bool>;
    /// [`Barrier::release`] as a future.
    fn release_async(&self) -> Call<bool>;
    /// [`Barrier::is_held`] as a future.
    fn is_held_async(&self) -> Call<bool>;
    /// [`Barrier::wait`] as a future that holds no thread while it waits: `Ok(true)` once
    /// the barrier is down, `Ok(false)` at `timeout` (`None`: no limit; zero: one look);
    /// kind `Cancelled` when `cancel` fires or the future is dropped, `Closed` when the
    /// client closes. It looks again at every change of the key the client's key hub
    /// reports; a barrier lowered and raised again between two looks may not release it
    /// (as for the blocking wait, within one blocking query).
    fn wait_async(&self, timeout: Option<Duration>, cancel: &CancelToken) -> Waiting<bool>;
}

impl AsyncBarrier for Barrier {
    fn hold_async(&self) -> Call<bool> {
        Call::with(self.shared_client(), self.clone(), Barrier::hold)
    }
    fn release_async(&self) -> Call<bool> {
        Call::with(self.shared_client(), self.clone(), Barrier::release)
    }
    fn is_held_async(&self) -> Call<bool> {
        Call::with(self.shared_client(), self.clone(), Barrier::is_held)
    }
    fn wait_async(&self, timeout: Option<Duration>, cancel: &CancelToken) -> Waiting<bool> {
        let client = self.shared_client();
        stepped(
            client,
            "barrier wait",
            on_key(client, self.key()),
            self.wait_steps(timeout),
            timeout,
            cancel,
        )
    }
}

/// A [`DoubleBarrier`]'s `enter` and `leave` as futures that hold no thread while they
/// wait (a change under the prefix wakes them). Their outcomes, errors and clean-up are
/// the blocking calls': a timed-out or cancelled `enter` — or one whose future is
/// dropped — leaves no participant key behind. One `enter` or `leave` of a handle runs
/// at a time (another fails with kind `Conflict`).
pub trait AsyncDoubleBarrier {
    /// [`DoubleBarrier::enter`] as a future.
    fn enter_async(&self, timeout: Option<Duration>, cancel: &CancelToken) -> Waiting<bool>;
    /// [`DoubleBarrier::leave`] as a future.
    fn leave_async(&self, timeout: Option<Duration>, cancel: &CancelToken) -> Waiting<bool>;
}

impl AsyncDoubleBarrier for DoubleBarrier {
    fn enter_async(&self, timeout: Option<Duration>, cancel: &CancelToken) -> Waiting<bool> {
        let client = self.shared_client();
        match self.enter_steps(timeout, cancel) {
            Ok((steps, stop)) => stepped(
                client,
                "double barrier enter",
                on_prefix(client, &self.listing()),
                steps,
                timeout,
                &stop,
            ),
            Err(e) => Box::pin(std::future::ready(Err(e))),
        }
    }
    fn leave_async(&self, timeout: Option<Duration>, cancel: &CancelToken) -> Waiting<bool> {
        let client = self.shared_client();
        match self.leave_steps(timeout) {
            Ok(steps) => stepped(
                client,
                "double barrier leave",
                on_prefix(client, &self.listing()),
                steps,
                timeout,
                cancel,
            ),
            Err(e) => Box::pin(std::future::ready(Err(e))),
        }
    }
}
