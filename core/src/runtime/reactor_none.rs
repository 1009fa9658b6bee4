//! Where `epoll` is missing, no readiness thread: every future of `baton::aio` has its
//! requests made on the step threads (see `reactor.rs`, which Linux builds).

use std::os::fd::BorrowedFd;
use std::task::Waker;

use crate::foundations::cancel::CancelToken;
use crate::foundations::threads::Worker;
use crate::transport::http::Interest;

/// Whether this system has a readiness thread: not here.
pub(crate) const AVAILABLE: bool = false;

/// Never made here.
pub(crate) enum Reactor {}

/// Never made here.
#[derive(Clone, Debug)]
pub(crate) enum ReactorHandle {}

impl Reactor {
    /// Says there is no readiness thread on this system.
    pub(crate) fn start(_closing: &CancelToken) -> std::io::Result<Reactor> {
        Err(std::io::ErrorKind::Unsupported.into())
    }

    pub(crate) fn handle(&self) -> ReactorHandle {
        match *self {}
    }

    pub(crate) fn into_worker(self) -> Worker {
        match self {}
    }
}

impl ReactorHandle {
    pub(crate) fn arm(&self, _: BorrowedFd<'_>, _: Interest, _: &Waker) -> std::io::Result<u64> {
        match *self {}
    }

    pub(crate) fn cancel(&self, _: u64) {
        match *self {}
    }
}
