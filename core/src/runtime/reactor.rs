//! Socket readiness for baton's futures (`baton::aio`). A future that writes its own request
//! and reads its own answer (a warm lock acquire or release, `aio::warm`) registers the
//! socket here with its task's waker when the socket is not ready yet; one thread waits on
//! every such socket in one `epoll` and wakes each task whose socket became ready.
//!
//! Why a thread of its own rather than the step threads: registering is an `epoll_ctl` made
//! on the task's own thread, seen at once by the waiting `epoll_wait` without waking it, so a
//! request costs the task one wake-up (its answer came), where a step thread costs two (the
//! thread woken for the work, the task woken for the outcome). Each registration is one shot
//! and carries a token of its own: a connection goes back to the pool after its answer, and a
//! late wake-up for an old token finds no waker instead of another task's.
//!
//! The thread starts with the client's first warm future and stops when the client closes,
//! waking every task still registered (their futures see the client closed).

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;

use rustix::event::epoll::{self, CreateFlags, EventData, EventFlags};
use rustix::event::{eventfd, EventfdFlags};
use rustix::io::Errno;

use crate::foundations::cancel::{CancelToken, HookGuard};
use crate::foundations::sync::lock;
use crate::foundations::threads::Worker;
use crate::transport::http::Interest;

/// Whether this system has a readiness thread (`reactor_none.rs` says no).
pub(crate) const AVAILABLE: bool = true;

/// The token of the stop signal (the client closing).
const STOP: u64 = 0;

struct Shared {
    epoll: OwnedFd,
    /// Written when the client closes: ends the thread's wait.
    stop: OwnedFd,
    /// The task to wake for each registration still waiting.
    wakers: Mutex<HashMap<u64, Waker>>,
    next: AtomicU64,
    stopped: AtomicBool,
}

/// The readiness thread of one client (see the module docs).
pub(crate) struct Reactor {
    shared: Arc<Shared>,
    worker: Worker,
    _closing: HookGuard,
}

/// What a future registers its socket with.
#[derive(Clone)]
pub(crate) struct ReactorHandle(Arc<Shared>);

impl Reactor {
    /// Starts the thread; it stops when `closing` fires.
    pub(crate) fn start(closing: &CancelToken) -> std::io::Result<Reactor> {
        let epoll = epoll::create(CreateFlags::CLOEXEC)?;
        let stop = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        epoll::add(&epoll, &stop, EventData::new_u64(STOP), EventFlags::IN)?;
        let shared = Arc::new(Shared {
            epoll,
            stop,
            wakers: Mutex::new(HashMap::new()),
            next: AtomicU64::new(STOP + 1),
            stopped: AtomicBool::new(false),
        });
        let s = shared.clone();
        let worker = Worker::spawn("baton-reactor", move || run(&s))?;
        let s = shared.clone();
        let hook = closing.on_cancel(move || {
            let _ = rustix::io::write(&s.stop, &1u64.to_ne_bytes());
        });
        Ok(Reactor {
            shared,
            worker,
            _closing: hook,
        })
    }

    /// A handle to register sockets with.
    pub(crate) fn handle(&self) -> ReactorHandle {
        ReactorHandle(self.shared.clone())
    }

    /// The thread, for `close` to join (it stops once the client's closing token fires).
    pub(crate) fn into_worker(self) -> Worker {
        self.worker
    }
}

impl ReactorHandle {
    /// Wakes `waker` once `fd` is ready for `interest` (or hung up, or the client closed):
    /// the registration's token, for [`ReactorHandle::cancel`]. Fails once the client has
    /// closed (the caller then gives its request up).
    pub(crate) fn arm(
        &self,
        fd: BorrowedFd<'_>,
        interest: Interest,
        waker: &Waker,
    ) -> std::io::Result<u64> {
        let s = &self.0;
        let token = s.next.fetch_add(1, Ordering::Relaxed);
        lock(&s.wakers).insert(token, waker.clone());
        // Checked after the waker is in: a stop that came before it is seen here, one after
        // it wakes the task.
        if s.stopped.load(Ordering::SeqCst) {
            lock(&s.wakers).remove(&token);
            return Err(std::io::Error::other("the baton client is closed"));
        }
        let flags = EventFlags::ONESHOT
            | EventFlags::RDHUP
            | match interest {
                Interest::Read => EventFlags::IN,
                Interest::Write => EventFlags::OUT,
            };
        let data = EventData::new_u64(token);
        let armed = match epoll::modify(&s.epoll, fd, data, flags) {
            Err(Errno::NOENT) => epoll::add(&s.epoll, fd, data, flags),
            other => other,
        };
        if let Err(e) = armed {
            lock(&s.wakers).remove(&token);
            return Err(e.into());
        }
        Ok(token)
    }

    /// Forgets a registration whose socket the future no longer waits on: a wake-up for it
    /// is dropped. The socket's one-shot entry stays in the `epoll` until it fires or the
    /// socket closes (another registration of the same socket replaces it).
    pub(crate) fn cancel(&self, token: u64) {
        lock(&self.0.wakers).remove(&token);
    }
}

fn run(s: &Shared) {
    let mut events: Vec<epoll::Event> = Vec::with_capacity(64);
    loop {
        events.clear();
        match epoll::wait(&s.epoll, rustix::buffer::spare_capacity(&mut events), None) {
            Ok(_) => {}
            Err(Errno::INTR) => continue,
            Err(e) => {
                log::error!(
                    "baton: the reactor's epoll failed ({e}); its futures go on without it"
                );
                break;
            }
        }
        let mut stop = false;
        let ready: Vec<Waker> = {
            let mut wakers = lock(&s.wakers);
            events
                .iter()
                .filter_map(|ev| match ev.data.u64() {
                    STOP => {
                        stop = true;
                        None
                    }
                    token => wakers.remove(&token),
                })
                .collect()
        };
        // Outside the lock: an executor may poll the task from inside `wake`.
        for w in ready {
            w.wake();
        }
        if stop {
            break;
        }
    }
    s.stopped.store(true, Ordering::SeqCst);
    let left: Vec<Waker> = lock(&s.wakers).drain().map(|(_, w)| w).collect();
    for w in left {
        w.wake();
    }
}

impl std::fmt::Debug for ReactorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReactorHandle")
            .field("epoll", &self.0.epoll.as_fd())
            .finish_non_exhaustive()
    }
}
