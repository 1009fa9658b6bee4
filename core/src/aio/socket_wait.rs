//! How a future that makes its own request (`aio::warm`) waits for its socket between polls.
//!
//! Two ways, chosen per call:
//! * on the executor's own reactor, when the future is polled inside a tokio runtime with I/O
//!   and the crate's `tokio` feature is on: the socket is registered with tokio for the length
//!   of one wait, so the answer wakes the task straight from the runtime's own `epoll`;
//! * otherwise on the client's readiness thread (`runtime::reactor`), which costs each answer
//!   one more wake-up (the kernel wakes that thread, which wakes the task's thread).
//!
//! Tokio is given a copy of the socket's descriptor (`dup`), never the call's own: the copy is
//! tokio's to deregister and close, so a connection the call hands back to the pool or closes
//! stays the call's. The copy lives for one wait and is dropped before the call reads again.

use std::os::fd::BorrowedFd;
use std::task::{Context, Poll};

use crate::client::Client;
use crate::runtime::reactor::ReactorHandle;
use crate::transport::http::Interest;

/// Where a warm call's socket is waited on.
pub(crate) enum Readiness {
    /// The client's readiness thread.
    Thread(ReactorHandle),
    /// The client's readiness thread, not asked for yet: it starts when a call first waits on
    /// it. A client whose warm calls are all driven elsewhere (the event loops of the Python
    /// and Node bindings) or answered before they wait never starts it (`make bench-scale`
    /// counts the threads).
    Unstarted(Client),
    /// The tokio runtime that polls the future; the readiness thread when the future is polled
    /// elsewhere or that runtime has no I/O (decided when it first waits: a future made
    /// outside the runtime that polls it still waits on that runtime's reactor).
    #[cfg(all(feature = "tokio", unix))]
    Tokio(Client),
}

impl Readiness {
    /// The way `client`'s warm calls wait: tokio's reactor when the future is polled inside a
    /// tokio runtime with I/O (see the module docs), else the readiness thread, started when a
    /// call first waits; `None` when neither can be had (the client closed, no `epoll` on this
    /// system).
    pub(crate) fn for_client(client: &Client) -> Option<Readiness> {
        #[cfg(all(feature = "tokio", unix))]
        if tokio_wait::wanted(client) {
            return Some(Readiness::Tokio(client.clone()));
        }
        if !crate::runtime::reactor::AVAILABLE || client.core().closing.is_cancelled() {
            return None;
        }
        Some(Readiness::Unstarted(client.clone()))
    }
}

/// One warm call's wait on its socket.
pub(crate) struct SocketWait {
    readiness: Readiness,
    /// The readiness thread's registration the task waits on, if any.
    token: Option<u64>,
    /// Tokio's registration the task waits on, if any.
    #[cfg(all(feature = "tokio", unix))]
    tokio: Option<tokio_wait::Registered>,
}

impl SocketWait {
    /// Waits the way `readiness` says.
    pub(crate) fn new(readiness: Readiness) -> SocketWait {
        SocketWait {
            readiness,
            token: None,
            #[cfg(all(feature = "tokio", unix))]
            tokio: None,
        }
    }

    /// Has the task of `cx` woken once `fd` is ready for `interest` (or hung up, or the client
    /// closes): `Pending` when it waits, `Ready` when the socket is ready already (the call
    /// advances again). Fails when nothing can wait for it (the client closed): the caller then
    /// gives its request up.
    pub(crate) fn arm(
        &mut self,
        fd: BorrowedFd<'_>,
        interest: Interest,
        cx: &mut Context<'_>,
    ) -> std::io::Result<Poll<()>> {
        self.forget();
        #[cfg(all(feature = "tokio", unix))]
        if let Readiness::Tokio(client) = &self.readiness {
            if let Some((registered, ready)) = tokio_wait::register(client, fd, interest, cx) {
                self.tokio = Some(registered);
                return Ok(ready);
            }
            // Not polled inside a tokio runtime with I/O: this call goes on with the thread.
            self.readiness = Readiness::Unstarted(client.clone());
        }
        if let Readiness::Unstarted(client) = &self.readiness {
            let thread = client.core().reactor().map_err(std::io::Error::other)?;
            self.readiness = Readiness::Thread(thread);
        }
        let thread = self
            .thread()
            .ok_or_else(|| std::io::Error::other("no readiness thread"))?;
        self.token = Some(thread.arm(fd, interest, cx.waker())?);
        Ok(Poll::Pending)
    }

    /// The readiness thread, when this call waits on it.
    fn thread(&self) -> Option<&ReactorHandle> {
        match &self.readiness {
            Readiness::Thread(r) => Some(r),
            Readiness::Unstarted(_) => None,
            #[cfg(all(feature = "tokio", unix))]
            Readiness::Tokio(_) => None,
        }
    }

    /// Ends the current wait, before the call touches its socket again: a tokio registration
    /// is removed, a wake-up the readiness thread still owes is dropped.
    pub(crate) fn forget(&mut self) {
        #[cfg(all(feature = "tokio", unix))]
        {
            self.tokio = None;
        }
        if let (Some(t), Some(r)) = (self.token.take(), self.thread()) {
            r.cancel(t);
        }
    }
}

impl Drop for SocketWait {
    fn drop(&mut self) {
        self.forget();
    }
}

#[cfg(all(feature = "tokio", unix))]
mod tokio_wait {
    //! The tokio half of [`super::SocketWait`].

    use std::os::fd::{BorrowedFd, OwnedFd};
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::atomic::Ordering;
    use std::task::{Context, Poll};

    use crate::client::Client;
    use crate::foundations::cancel::HookGuard;
    use crate::transport::http::Interest;

    /// A copy of the call's socket (`dup`: the same connection under a descriptor of its
    /// own) registered with the polling runtime for one wait, and the client's close hooked
    /// to wake the task (nothing else would while it waits on tokio). The copy is tokio's to
    /// deregister and close; the call's own descriptor is never handed over.
    pub(super) struct Registered {
        _socket: Dup,
        _closing: HookGuard,
    }

    /// The copy, as the tokio stream of the client's kind of connection.
    enum Dup {
        Tcp(tokio::net::TcpStream),
        Unix(tokio::net::UnixStream),
    }

    impl Dup {
        fn poll_ready(
            &self,
            interest: Interest,
            cx: &mut Context<'_>,
        ) -> Poll<std::io::Result<()>> {
            match (self, interest) {
                (Dup::Tcp(s), Interest::Read) => s.poll_read_ready(cx),
                (Dup::Tcp(s), Interest::Write) => s.poll_write_ready(cx),
                (Dup::Unix(s), Interest::Read) => s.poll_read_ready(cx),
                (Dup::Unix(s), Interest::Write) => s.poll_write_ready(cx),
            }
        }
    }

    /// Whether `client`'s warm calls should try tokio when they wait (`register` then looks
    /// for the runtime polling them): the client has not found a runtime without I/O, and
    /// `BATON_AIO_TOKIO=0` does not turn it off (a bench compares).
    pub(super) fn wanted(client: &Client) -> bool {
        static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *ON.get_or_init(|| crate::foundations::sync::env_switch("BATON_AIO_TOKIO"))
            && !client.core().tokio_io_off.load(Ordering::Relaxed)
    }

    /// Registers a copy of `fd` with the runtime polling this task and asks it for
    /// `interest`: the registration and whether the socket is ready already; `None` when
    /// there is no such runtime with I/O or it refuses (the caller waits on the readiness
    /// thread instead).
    pub(super) fn register(
        client: &Client,
        fd: BorrowedFd<'_>,
        interest: Interest,
        cx: &mut Context<'_>,
    ) -> Option<(Registered, Poll<()>)> {
        if tokio::runtime::Handle::try_current().is_err() {
            return None;
        }
        let copy: OwnedFd = fd.try_clone_to_owned().ok()?;
        let unix = client.core().transport.over_unix();
        // Tokio panics rather than failing when its runtime was built without I/O, and offers
        // no way to ask first; that panic is caught once per client, which then waits on its
        // readiness thread. (The socket is non-blocking, as tokio requires: the engine's
        // connections are.)
        let made = catch_unwind(AssertUnwindSafe(move || {
            if unix {
                tokio::net::UnixStream::from_std(copy.into()).map(Dup::Unix)
            } else {
                tokio::net::TcpStream::from_std(copy.into()).map(Dup::Tcp)
            }
        }));
        let socket = match made {
            Ok(Ok(socket)) => socket,
            Ok(Err(e)) => {
                log::debug!(
                    "baton: tokio did not take a socket ({e}); the readiness thread waits on it"
                );
                return None;
            }
            Err(_) => {
                client.core().tokio_io_off.store(true, Ordering::Relaxed);
                log::warn!(
                    "baton: this tokio runtime has no I/O (build it with `enable_io`); the \
                     client's futures wait on a readiness thread of their own instead"
                );
                return None;
            }
        };
        let ready = match socket.poll_ready(interest, cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(())) => Poll::Ready(()),
            // The runtime is shutting down: this wait goes to the readiness thread.
            Poll::Ready(Err(_)) => return None,
        };
        let waker = cx.waker().clone();
        let closing = client.core().closing.on_cancel(move || waker.wake());
        Some((
            Registered {
                _socket: socket,
                _closing: closing,
            },
            ready,
        ))
    }
}
