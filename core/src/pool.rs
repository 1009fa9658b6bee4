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
//!
//! A thread that just finished a call first spins briefly (up to 100 µs, yielding its CPU
//! between looks) for the next one before it parks: a binding's back-to-back calls (a release
//! right after an acquire settled) then skip the futex wake-up, which costs tens of
//! microseconds on the 2-core CI machines (a loopback round trip to Consul costs ~90). It spins
//! only while the gap before its previous call was shorter than that, so an occasional caller
//! costs no spinning.

use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};

/// A call's work, and when it was handed to a thread.
struct Job {
    /// What the call does; what it returns hands the outcome over (see [`Pool::run`]).
    work: Box<dyn FnOnce() -> Deliver + Send + 'static>,
    sent: Instant,
}
type Deliver = Box<dyn FnOnce()>;

/// How long a thread waits for another call before it ends.
const IDLE: Duration = Duration::from_secs(10);

/// How long a thread that just finished a call looks for the next one before it parks.
const SPIN: Duration = Duration::from_micros(100);

#[derive(Default)]
struct State {
    /// Idle threads (id, where to send a job; `None` ends it), the most recently idle last.
    idle: Vec<(u64, Sender<Option<Job>>)>,
    /// Every thread started and not joined yet, by id.
    threads: Vec<(u64, JoinHandle<()>)>,
    next_id: u64,
}

/// What arrives on `rx` before `until` (`Some(None)`: the thread is to end), yielding the CPU
/// between looks; `None` if nothing did.
fn spin_for(rx: &Receiver<Option<Job>>, until: Instant) -> Option<Option<Job>> {
    loop {
        match rx.try_recv() {
            Ok(next) => return Some(next),
            Err(TryRecvError::Disconnected) => return Some(None),
            Err(TryRecvError::Empty) if Instant::now() >= until => return None,
            Err(TryRecvError::Empty) => std::thread::yield_now(),
        }
    }
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

    /// Runs `work` on an idle thread, or on a new one, then the closure it returns, which
    /// hands the outcome to the caller (settles a promise, sends on a channel).
    ///
    /// The thread is back on the idle list before that closure runs, so a caller that makes
    /// its next call as soon as it has the outcome finds this thread (spinning) instead of
    /// starting another.
    pub fn run<W, D>(&'static self, work: W) -> std::io::Result<()>
    where
        W: FnOnce() -> D + Send + 'static,
        D: FnOnce() + 'static,
    {
        let mut job = Job {
            work: Box::new(move || Box::new(work()) as Deliver),
            sent: Instant::now(),
        };
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
        // Whether the gap before the last call was short enough for spinning to have caught it.
        let mut spin = true;
        loop {
            let deliver = (job.work)();
            {
                let mut guard = self.state();
                match guard.as_mut() {
                    Some(st) => st.idle.push((id, tx.clone())),
                    None => {
                        drop(guard);
                        deliver();
                        return;
                    }
                }
            }
            deliver();
            let idle_since = Instant::now();
            if spin {
                if let Some(next) = spin_for(&rx, idle_since + SPIN) {
                    match next {
                        Some(j) => {
                            job = j;
                            continue;
                        }
                        None => return,
                    }
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
            // The gap as the caller made it (not counting this thread's wake-up).
            spin = job.sent.saturating_duration_since(idle_since) < SPIN;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// The name of the thread that ran one job (its outcome handed over as a caller's is).
    fn run_on(pool: &'static Pool) -> String {
        let (tx, rx) = mpsc::channel();
        pool.run(move || {
            let name = std::thread::current().name().map(String::from);
            move || {
                let _ = tx.send(name);
            }
        })
        .expect("run");
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the job ran")
            .expect("a named thread")
    }

    fn threads(pool: &Pool) -> usize {
        pool.state().as_ref().map_or(0, |st| st.threads.len())
    }

    #[test]
    fn back_to_back_calls_reuse_one_spinning_thread() {
        static POOL: Pool = Pool::new("baton-test-reuse");
        for _ in 0..50 {
            assert_eq!(run_on(&POOL), "baton-test-reuse");
        }
        assert_eq!(threads(&POOL), 1, "back-to-back calls started more threads");
        POOL.stop(Instant::now() + Duration::from_secs(10));
        assert_eq!(threads(&POOL), 0, "stop left a thread");
    }

    #[test]
    fn calls_after_a_pause_are_taken_by_the_parked_thread() {
        static POOL: Pool = Pool::new("baton-test-parked");
        run_on(&POOL);
        // Long past SPIN: the thread has parked, and a gap that long switches its spin off.
        std::thread::sleep(SPIN * 50);
        run_on(&POOL);
        run_on(&POOL);
        assert_eq!(threads(&POOL), 1);
        POOL.stop(Instant::now() + Duration::from_secs(10));
        assert_eq!(threads(&POOL), 0, "stop left a thread");
    }

    #[test]
    fn stop_ends_a_thread_that_is_still_spinning() {
        static POOL: Pool = Pool::new("baton-test-stop");
        run_on(&POOL);
        // Stopped within the spin window of the job just done (or after; both must end it).
        POOL.stop(Instant::now() + Duration::from_secs(10));
        assert_eq!(threads(&POOL), 0, "stop left a thread");
        // Later calls start a thread again.
        assert_eq!(run_on(&POOL), "baton-test-stop");
        POOL.stop(Instant::now() + Duration::from_secs(10));
    }

    #[test]
    fn concurrent_waits_get_threads_of_their_own() {
        static POOL: Pool = Pool::new("baton-test-many");
        let (release, gate) = crossbeam_channel::bounded::<()>(0);
        let (started, starts) = mpsc::channel();
        for _ in 0..4 {
            let (gate, started) = (gate.clone(), started.clone());
            POOL.run(move || {
                let _ = started.send(());
                let _ = gate.recv();
                || ()
            })
            .expect("run");
        }
        for _ in 0..4 {
            starts
                .recv_timeout(Duration::from_secs(10))
                .expect("every waiting job started without the others ending");
        }
        assert_eq!(threads(&POOL), 4);
        drop(release);
        POOL.stop(Instant::now() + Duration::from_secs(10));
    }
}
