//! Waking an event loop together with the baton thread its answer wakes.
//!
//! A binding's event loop (Node's libuv loop, an asyncio loop) takes the outcome of a call that
//! a baton thread makes. When the answer takes longer than the loop stays awake, two threads
//! wake one after the other: the baton thread when the answer arrives, then the loop when that
//! thread hands it the outcome. Waking an idle CPU costs tens of microseconds on a virtual
//! machine, and the loop's wake-up then comes on top of every call: a tenth of a call at
//! 0.3 ms, where Rust, whose caller waits on the socket itself, pays one wake-up.
//!
//! [`Arrivals`] is an epoll set that a loop watches like any file descriptor it reads. While a
//! call runs for that loop ([`with_arrivals`]), the connection announces the socket it is about
//! to wait on ([`announce`], from `http`), and the socket is armed in the set for one event.
//! The answer then makes the set readable as it wakes the baton thread: the loop and the thread
//! wake together, and by the time the thread has read the answer and hands the outcome over
//! the loop is awake (or has just gone back to sleep, which is cheap to leave). The loop drains
//! the set ([`Arrivals::drain`]) when it reads ready. Nothing here depends on how long an
//! answer or a wake-up takes.
//!
//! Linux only (epoll); elsewhere [`Arrivals::new`] reports it unsupported and calls run as
//! before.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[cfg(unix)]
use std::os::fd::BorrowedFd;

thread_local! {
    static CURRENT: RefCell<Option<Arc<Arrivals>>> = const { RefCell::new(None) };
}

/// Runs `f` with `arrivals` armed with every socket this thread waits on for an answer.
pub fn with_arrivals<R>(arrivals: Option<&Arc<Arrivals>>, f: impl FnOnce() -> R) -> R {
    let Some(arrivals) = arrivals else { return f() };
    struct Restore(Option<Arc<Arrivals>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = before);
        }
    }
    let _restore = Restore(CURRENT.with(|c| c.borrow_mut().replace(arrivals.clone())));
    f()
}

/// This thread is about to wait on `socket` for an answer: arms it in the [`Arrivals`] of the
/// call it runs, if any.
#[cfg(unix)]
pub(crate) fn announce(socket: BorrowedFd<'_>) {
    if let Some(a) = CURRENT.with(|c| c.borrow().clone()) {
        a.arm(socket);
    }
}

/// An epoll set for one event loop to watch (see the module docs).
#[derive(Debug)]
pub struct Arrivals {
    #[cfg(target_os = "linux")]
    epoll: std::os::fd::OwnedFd,
    armed: AtomicU64,
    drained: AtomicU64,
}

impl Arrivals {
    /// A new, empty set; an error where epoll is missing, or when `BATON_ARRIVALS=0` in the
    /// environment switches the early wake-up off (`make bench-bindings` measures both).
    pub fn new() -> std::io::Result<Arc<Arrivals>> {
        if !crate::sync::env_switch("BATON_ARRIVALS") {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "switched off by BATON_ARRIVALS=0",
            ));
        }
        #[cfg(target_os = "linux")]
        {
            use rustix::event::epoll;
            let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
            Ok(Arc::new(Arrivals {
                epoll,
                armed: AtomicU64::new(0),
                drained: AtomicU64::new(0),
            }))
        }
        #[cfg(not(target_os = "linux"))]
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "waking the loop with the answer needs epoll (Linux)",
        ))
    }

    /// The descriptor for the loop to watch for reading (owned here: the loop must stop
    /// watching it before the last reference to this set is dropped).
    #[cfg(unix)]
    pub fn fd(&self) -> std::os::fd::RawFd {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            self.epoll.as_raw_fd()
        }
        #[cfg(not(target_os = "linux"))]
        -1
    }

    /// Arms `socket` for its next readable event (one event; then it is disarmed until armed
    /// again). A failure only loses the early wake-up: the outcome still comes the usual way.
    #[cfg(unix)]
    fn arm(&self, socket: BorrowedFd<'_>) {
        #[cfg(target_os = "linux")]
        {
            use rustix::event::epoll::{self, EventData, EventFlags};
            let flags = EventFlags::IN | EventFlags::ONESHOT;
            let data = EventData::new_u64(0);
            let armed = match epoll::modify(&self.epoll, socket, data, flags) {
                Err(rustix::io::Errno::NOENT) => epoll::add(&self.epoll, socket, data, flags),
                other => other,
            };
            if armed.is_ok() {
                self.armed.fetch_add(1, Ordering::Relaxed);
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = socket;
    }

    /// Takes the events the set holds (the loop calls it when the set reads ready), without
    /// waiting; how many there were.
    pub fn drain(&self) -> usize {
        #[cfg(target_os = "linux")]
        {
            use rustix::event::epoll;
            let mut events = Vec::with_capacity(8);
            let now = rustix::event::Timespec::default();
            let buffer = rustix::buffer::spare_capacity(&mut events);
            let n = epoll::wait(&self.epoll, buffer, Some(&now))
                .map(|_| events.len())
                .unwrap_or(0);
            self.drained.fetch_add(n as u64, Ordering::Relaxed);
            n
        }
        #[cfg(not(target_os = "linux"))]
        0
    }

    /// How many sockets were armed, and how many of their events the loop drained, so far
    /// (for tests and benchmarks).
    pub fn counts(&self) -> (u64, u64) {
        (
            self.armed.load(Ordering::Relaxed),
            self.drained.load(Ordering::Relaxed),
        )
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    /// A connected pair of sockets: (the one calls wait on, its peer).
    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let a = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (b, _) = listener.accept().expect("accept");
        (a, b)
    }

    /// Drains `set` until it reports an event (a blocking peek on `socket` first makes sure
    /// the bytes are there).
    fn drained_after_arrival(set: &Arrivals, socket: &TcpStream) -> usize {
        assert!(socket.peek(&mut [0u8; 1]).expect("peek") > 0);
        set.drain()
    }

    #[test]
    fn an_announced_socket_makes_the_set_ready_once_per_arming() {
        let set = Arrivals::new().expect("epoll");
        let (sock, mut peer) = pair();
        // Announced outside a call for this set: not armed.
        announce(sock.as_fd());
        peer.write_all(b"1").expect("write");
        assert_eq!(
            drained_after_arrival(&set, &sock),
            0,
            "armed without a call"
        );
        let (sock, mut peer) = pair();
        with_arrivals(Some(&set), || announce(sock.as_fd()));
        peer.write_all(b"2").expect("write");
        assert_eq!(drained_after_arrival(&set, &sock), 1);
        // One event per arming: more bytes wake nobody until the socket is armed again.
        peer.write_all(b"3").expect("write");
        assert_eq!(
            drained_after_arrival(&set, &sock),
            0,
            "fired twice for one arming"
        );
        with_arrivals(Some(&set), || announce(sock.as_fd()));
        assert_eq!(set.drain(), 1, "re-armed with unread bytes, no event");
        assert_eq!(set.counts(), (2, 2));
    }

    #[test]
    fn the_set_is_in_scope_only_inside_its_call() {
        let set = Arrivals::new().expect("epoll");
        let (sock, _peer) = pair();
        with_arrivals(Some(&set), || {
            with_arrivals(None, || announce(sock.as_fd()));
        });
        assert_eq!(
            set.counts().0,
            1,
            "a call without a set dropped the outer one"
        );
        announce(sock.as_fd());
        assert_eq!(set.counts().0, 1, "still armed after the call");
    }
}
