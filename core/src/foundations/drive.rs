//! Runs a future of [`baton::aio`](crate::aio) to its end for a language binding, with no
//! thread of its own. Not part of the Rust API (a Rust program awaits the futures on its own
//! executor): hidden from the docs and free to change; the bindings live in this repository.
//!
//! Python's asyncio and Node have an event loop but no Rust executor, and a waiting call
//! (an acquire of a key someone else holds, a wait for a loss) used to occupy a pooled OS
//! thread each — ten thousand pending acquires were ten thousand threads. Here the future is
//! polled where it is woken instead: first on the calling thread (the loop's, which only
//! starts it: a poll never blocks), then on whichever baton thread wakes it (the key hub on a
//! change, a step thread with a try's answer, the timer at a deadline, a cancelling thread).
//! The core's threads wake tasks outside their locks precisely so that an executor may poll
//! from inside `wake`. The outcome goes to `done`, on the thread of the poll that ended it;
//! `done` must be short and must not block (a binding queues it for its loop).
//!
//! A wake during a poll is never lost and never polls twice at once: the waker marks the task
//! to be polled again, and the thread already polling does so before it lets go.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;

/// Nobody polls the task; a wake polls it.
const IDLE: u8 = 0;
/// A thread is polling it.
const POLLING: u8 = 1;
/// A thread is polling it and a wake came meanwhile: poll again before letting go.
const AGAIN: u8 = 2;
/// It has ended; wakes do nothing.
const DONE: u8 = 3;

type Boxed = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

struct Task {
    state: AtomicU8,
    future: Mutex<Option<Boxed>>,
    /// Settles the call with an error if the future panics (on whichever thread polled it).
    on_panic: Mutex<Option<Box<dyn FnOnce() + Send + 'static>>>,
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {
        run(&self);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        run(self);
    }
}

/// Polls `future` until it ends and hands its outcome to `done`, holding no thread while it
/// waits (see the module's notes). The first poll happens before this returns, on the caller's
/// thread. A panic inside the future ends it with a `BadResponse`-kind error naming the panic,
/// so the caller's promise or future always settles.
pub fn drive<T: Send + 'static>(
    future: impl Future<Output = Result<T>> + Send + 'static,
    done: impl FnOnce(Result<T>) + Send + 'static,
) {
    let done = Arc::new(Mutex::new(Some(done)));
    let settle = done.clone();
    // Boxed on its own: an async block keeps what it captures apart from what it awaits, so
    // awaiting the captured future itself would carry its room twice (an acquire's future is
    // some 580 bytes, and a pending acquire kept 1.2 KiB here; `make bench-scale`).
    let mut future = Box::pin(future);
    let body = async move {
        let outcome = future.as_mut().await;
        if let Some(done) = lock(&settle).take() {
            done(outcome);
        }
    };
    let on_panic = Box::new(move || {
        if let Some(done) = lock(&done).take() {
            done(Err(Error::new(
                ErrorKind::BadResponse,
                "internal error: a baton call panicked (see the log)",
            )));
        }
    });
    let task = Arc::new(Task {
        state: AtomicU8::new(IDLE),
        future: Mutex::new(Some(Box::pin(body))),
        on_panic: Mutex::new(Some(on_panic)),
    });
    run(&task);
}

/// Polls the task unless another thread is polling it (that one polls again).
fn run(task: &Arc<Task>) {
    loop {
        match task
            .state
            .compare_exchange(IDLE, POLLING, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => break,
            Err(DONE) | Err(AGAIN) => return,
            Err(_) => {
                if task
                    .state
                    .compare_exchange(POLLING, AGAIN, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return;
                }
                // It went idle (or done) meanwhile: look again.
            }
        }
    }
    let waker = Waker::from(task.clone());
    let mut cx = Context::from_waker(&waker);
    loop {
        let mut slot = lock(&task.future);
        let Some(future) = slot.as_mut() else {
            task.state.store(DONE, Ordering::Release);
            return;
        };
        task.state.store(POLLING, Ordering::Release);
        match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx))) {
            Ok(Poll::Ready(())) => {
                *slot = None;
                task.state.store(DONE, Ordering::Release);
                lock(&task.on_panic).take();
                return;
            }
            Ok(Poll::Pending) => {}
            Err(_) => {
                log::error!("baton: a driven async call panicked");
                *slot = None;
                task.state.store(DONE, Ordering::Release);
                drop(slot);
                let fail = lock(&task.on_panic).take();
                if let Some(fail) = fail {
                    fail();
                }
                return;
            }
        }
        drop(slot);
        if task
            .state
            .compare_exchange(POLLING, IDLE, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return;
        }
        // Woken during the poll (AGAIN): poll again.
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// A future that is pending until its flag is set, woken by whoever sets it.
    #[derive(Default)]
    struct Gate {
        open: Mutex<(bool, Option<Waker>)>,
    }

    impl Gate {
        fn open(&self) {
            let w = {
                let mut g = lock(&self.open);
                g.0 = true;
                g.1.take()
            };
            if let Some(w) = w {
                w.wake();
            }
        }
        fn wait(self: Arc<Self>) -> impl Future<Output = Result<u32>> {
            std::future::poll_fn(move |cx| {
                let mut g = lock(&self.open);
                if g.0 {
                    Poll::Ready(Ok(7))
                } else {
                    g.1 = Some(cx.waker().clone());
                    Poll::Pending
                }
            })
        }
    }

    #[test]
    fn a_ready_future_settles_before_drive_returns() {
        let (tx, rx) = mpsc::channel();
        drive(async { Ok(5) }, move |r| tx.send(r.unwrap()).unwrap());
        assert_eq!(rx.try_recv().unwrap(), 5);
    }

    #[test]
    fn a_waiting_future_settles_on_the_thread_that_wakes_it() {
        let gate = Arc::new(Gate::default());
        let (tx, rx) = mpsc::channel();
        drive(gate.clone().wait(), move |r| {
            tx.send((r.unwrap(), std::thread::current().name().map(String::from)))
                .unwrap()
        });
        assert!(rx.try_recv().is_err(), "settled before the gate opened");
        let g = gate.clone();
        std::thread::Builder::new()
            .name("opener".into())
            .spawn(move || g.open())
            .unwrap()
            .join()
            .unwrap();
        let (v, on) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!((v, on.as_deref()), (7, Some("opener")));
    }

    #[test]
    fn wakes_from_many_threads_poll_one_at_a_time_and_lose_none() {
        // A future that counts its polls and ends after 2,000 wakes; each poll checks that no
        // other poll is running. Eight threads wake it as fast as they can.
        let wakes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let inside = Arc::new(AtomicU8::new(0));
        let waker_slot: Arc<Mutex<Option<Waker>>> = Arc::default();
        let (w, i, s) = (wakes.clone(), inside.clone(), waker_slot.clone());
        let future = std::future::poll_fn(move |cx| {
            assert_eq!(i.fetch_add(1, Ordering::SeqCst), 0, "two polls at once");
            *lock(&s) = Some(cx.waker().clone());
            let seen = w.load(Ordering::SeqCst);
            i.fetch_sub(1, Ordering::SeqCst);
            if seen >= 2000 {
                Poll::Ready(Ok(seen))
            } else {
                Poll::Pending
            }
        });
        let (tx, rx) = mpsc::channel();
        drive(future, move |r| tx.send(r.unwrap()).unwrap());
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (w, s) = (wakes.clone(), waker_slot.clone());
                std::thread::spawn(move || {
                    for _ in 0..250 {
                        w.fetch_add(1, Ordering::SeqCst);
                        let waker = lock(&s).clone();
                        if let Some(waker) = waker {
                            waker.wake();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // The last wake came after the 2,000th count: some poll saw it.
        assert!(rx.recv_timeout(Duration::from_secs(5)).unwrap() >= 2000);
    }

    #[test]
    fn a_panicking_future_still_settles_with_an_error() {
        let (tx, rx) = mpsc::channel::<Result<()>>();
        drive(
            async {
                if std::hint::black_box(true) {
                    panic!("boom");
                }
                Ok(())
            },
            move |r| tx.send(r).unwrap(),
        );
        let err = rx.try_recv().unwrap().unwrap_err();
        assert!(err.to_string().contains("panicked"), "{err}");
    }
}
