//! Reused named threads for the language bindings' waiting calls (Python's `baton.aio` and
//! the rare sync call that cannot run on its caller's thread; every waiting call of the Node
//! addon, which must never park libuv's pool). Not part of the Rust API: hidden from the docs
//! and free to change; the bindings live in this repository and move with it.
//!
//! A call takes an idle thread, or starts a new one when none is idle, so waiting calls never
//! queue behind each other (a thousand pending acquires are a thousand threads), but
//! back-to-back calls reuse one thread instead of paying a thread start each. The most recently
//! idle thread is taken first; a thread idle for ten seconds ends. Finished threads are joined by
//! the next call, and [`Pool::stop`] (the binding's exit hook) ends and joins the idle ones.

use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// How long a thread waits for another call before it ends.
const IDLE: Duration = Duration::from_secs(10);

#[derive(Default)]
struct State {
    /// Idle threads (id, where to send a job; `None` ends it), the most recently idle last.
    idle: Vec<(u64, Sender<Option<Job>>)>,
    /// Every thread started and not joined yet, by id.
    threads: Vec<(u64, JoinHandle<()>)>,
    next_id: u64,
}

/// A set of reusable named threads.
pub struct Pool {
    name: &'static str,
    state: Mutex<Option<State>>,
}

impl Pool {
    pub const fn new(name: &'static str) -> Pool {
        Pool {
            name,
            state: Mutex::new(None),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Option<State>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `job` on an idle thread, or on a new one.
    pub fn run(&'static self, job: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        let mut job: Job = Box::new(job);
        let mut guard = self.state();
        let st = guard.get_or_insert_with(State::default);
        // Join the threads that ended (idle too long) since the last call.
        let (done, live): (Vec<_>, Vec<_>) = std::mem::take(&mut st.threads)
            .into_iter()
            .partition(|(_, h)| h.is_finished());
        st.threads = live;
        for (_, h) in done {
            let _ = h.join();
        }
        while let Some((_, tx)) = st.idle.pop() {
            // An idle thread takes itself off the list (under this lock) before it stops
            // receiving, so the send only fails if it ended some other way.
            match tx.send(Some(job)) {
                Ok(()) => return Ok(()),
                Err(e) => job = e.into_inner().expect("sent a job"),
            }
        }
        let id = st.next_id;
        st.next_id += 1;
        let (tx, rx) = crossbeam_channel::bounded::<Option<Job>>(1);
        let handle = std::thread::Builder::new()
            .name(self.name.into())
            .spawn(move || self.work(id, job, tx, rx))?;
        st.threads.push((id, handle));
        Ok(())
    }

    fn work(
        &'static self,
        id: u64,
        mut job: Job,
        tx: Sender<Option<Job>>,
        rx: Receiver<Option<Job>>,
    ) {
        loop {
            job();
            {
                let mut guard = self.state();
                match guard.as_mut() {
                    Some(st) => st.idle.push((id, tx.clone())),
                    None => return,
                }
            }
            job = match rx.recv_timeout(IDLE) {
                Ok(Some(j)) => j,
                Ok(None) | Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => {
                    let mut guard = self.state();
                    let Some(st) = guard.as_mut() else { return };
                    if let Some(i) = st.idle.iter().position(|(i, _)| *i == id) {
                        st.idle.remove(i);
                        return;
                    }
                    drop(guard);
                    // Taken off the list by a call whose job is on its way.
                    match rx.recv() {
                        Ok(Some(j)) => j,
                        Ok(None) | Err(_) => return,
                    }
                }
            };
        }
    }

    /// Ends the idle threads and joins them (waiting until `deadline` at most); busy threads
    /// are left to finish their call. Later calls start threads again.
    pub fn stop(&self, deadline: Instant) {
        let ending = {
            let mut guard = self.state();
            let Some(st) = guard.as_mut() else { return };
            let ids: Vec<u64> = st
                .idle
                .drain(..)
                .filter_map(|(id, tx)| tx.send(None).ok().map(|()| id))
                .collect();
            let (ending, busy): (Vec<_>, Vec<_>) = std::mem::take(&mut st.threads)
                .into_iter()
                .partition(|(id, h)| ids.contains(id) || h.is_finished());
            st.threads = busy;
            ending
        };
        for (_, h) in ending {
            while !h.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            if h.is_finished() {
                let _ = h.join();
            }
        }
    }
}
