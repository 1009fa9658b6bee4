//! Reused named threads for the language bindings' waiting calls (Python's `baton.aio` and
//! the rare sync call that cannot run on its caller's thread; every waiting call of the Node
//! addon, which must never park libuv's pool). Not part of the Rust API: hidden from the docs
//! and free to change; the bindings live in this repository and move with it.
//!
//! A call takes an idle thread, or starts a new one when none is idle; back-to-back calls reuse
//! one thread instead of paying a thread start each. The most recently idle thread is taken
//! first; a thread idle for ten seconds ends. Finished threads are joined by the next call, and
//! [`Pool::stop`] (the binding's exit hook) ends and joins the idle ones. A pool made with
//! [`Pool::bounded`] runs at most that many threads: a call made while all of them are busy
//! waits in a queue for the first one free. That is for pools whose calls never wait long (the
//! waits of Node and asyncio are futures driven without a thread, see [`crate::foundations::drive`]): ten
//! thousand releases at once then cost a few threads and connections, not ten thousand (past
//! Consul's 200 connections per client the agent answers 429 to everything). A pool of calls
//! that wait (Python's interruptible blocking calls, one per caller thread) stays unbounded.
//!
//! A call made with [`Pool::run_for`] belongs to a caller that takes outcomes on a thread of
//! its own, an event loop ([`Turns`]: a Node environment, an asyncio loop). The thread that ran
//! such a call stays bound to its caller while the caller takes the outcome: after handing the
//! outcome over it looks for the next call (yielding its CPU between looks) until the caller
//! says the turn of its loop that took the outcome is over ([`Turns::turn_over`]: by then every
//! call that the outcome's continuation makes has been made). A continuation that makes its
//! next call at once (a release right after an acquire settled) then finds this thread awake
//! instead of paying a futex wake-up, however long the loop took to wake up for the outcome;
//! a caller that makes no call lets the thread park as soon as its turn is over. Nothing here
//! depends on how long a request or a wake-up takes. Only a guard bounds the wait: a loop that
//! has not ended the turn within [`BOUND_MAX`] (it runs other work) finds the thread parked.
//! A call made with [`Pool::run`] (no caller loop) parks its thread as soon as it is done.
//! `BATON_POOL_BIND=0` in the environment makes [`Pool::run_for`] behave as [`Pool::run`]
//! (threads never stay bound: `make bench-bindings` measures both).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

/// A call's work and, for [`Pool::run_for`], its caller's turns.
struct Job {
    /// What the call does; what it returns hands the outcome over (see [`Pool::run`]).
    work: Box<dyn FnOnce() -> Deliver + Send + 'static>,
    turns: Option<Arc<Turns>>,
}
/// Hands an outcome over, given its ticket (see [`Turns::took`]).
type Deliver = Box<dyn FnOnce(Ticket)>;

/// The most threads a language binding's pool of calls that never wait long runs (see
/// [`Pool::bounded`]): with the key hub's polls, the client's other threads and Consul's limit
/// of 200 connections per client in view.
pub const CALL_THREADS: usize = 8;

/// How long a thread waits for another call before it ends.
const IDLE: Duration = Duration::from_secs(10);

/// The longest a thread stays bound to a caller whose turn is not over: a guard against a loop
/// busy with other work, not a tuning knob (a turn that takes an outcome normally ends within
/// the loop's wake-up and the continuation's few microseconds of work).
pub const BOUND_MAX: Duration = Duration::from_millis(1);

/// Which outcome handed to a caller's loop this is (0 for a call without [`Turns`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ticket(u64);

/// The turns of one caller's event loop, as far as the pool needs them: outcomes handed over
/// (numbered), taken ([`Turns::took`], on the loop's thread), and the turns that took them
/// over ([`Turns::turn_over`], on the loop's thread, once the calls made by their
/// continuations have been made). Shared by the caller's calls.
#[derive(Debug, Default)]
pub struct Turns {
    /// The last ticket handed out.
    issued: AtomicU64,
    /// The highest ticket whose outcome the loop has taken.
    taken: AtomicU64,
    /// The highest ticket whose turn is over.
    over: AtomicU64,
}

impl Turns {
    /// The turns of a new caller loop, nothing handed over yet.
    pub fn new() -> Arc<Turns> {
        Arc::new(Turns::default())
    }

    /// A ticket for an outcome handed to the loop by something other than a pool thread (a
    /// driven future, see [`crate::foundations::drive`]): no thread waits for its turn to end.
    pub fn ticket(&self) -> Ticket {
        self.issue()
    }

    fn issue(&self) -> Ticket {
        Ticket(self.issued.fetch_add(1, Ordering::SeqCst) + 1)
    }

    /// The loop has taken the outcome of `ticket` (called on the loop's thread as the outcome
    /// is reported). Whether the loop should end the turn with [`Turns::turn_over`] (false when
    /// a turn-over is already due: the caller schedules one per turn).
    pub fn took(&self, ticket: Ticket) -> bool {
        let before = self.taken.fetch_max(ticket.0, Ordering::SeqCst);
        before <= self.over.load(Ordering::SeqCst)
    }

    /// The turn that took the outcomes so far is over: the calls their continuations make have
    /// been made (called on the loop's thread, after the continuations ran).
    pub fn turn_over(&self) {
        self.over
            .fetch_max(self.taken.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    /// Whether the turn that takes `ticket` is over.
    fn is_over(&self, ticket: Ticket) -> bool {
        self.over.load(Ordering::SeqCst) >= ticket.0
    }

    /// Whether an outcome has been taken in a turn that is not over yet.
    pub fn in_turn(&self) -> bool {
        self.taken.load(Ordering::SeqCst) > self.over.load(Ordering::SeqCst)
    }
}

#[derive(Default)]
struct State {
    /// Idle threads (id, where to send a job; `None` ends it), the most recently idle last.
    idle: Vec<(u64, Sender<Option<Job>>)>,
    /// Calls made while the most threads were busy, oldest first (see [`Pool::bounded`]).
    queue: std::collections::VecDeque<Job>,
    /// Every thread started and not joined yet, by id.
    threads: Vec<(u64, JoinHandle<()>)>,
    next_id: u64,
}

/// What arrives on `rx` while the turn of `turns` that takes `ticket` is not over (and for
/// `bound_max` at most), yielding the CPU between looks (`Some(None)`: the thread is to end);
/// `None` if nothing did.
fn bound_for(
    rx: &Receiver<Option<Job>>,
    turns: &Turns,
    ticket: Ticket,
    bound_max: Duration,
) -> Option<Option<Job>> {
    crate::foundations::sync::look_for(rx, Instant::now() + bound_max, || turns.is_over(ticket))
        .map(Option::flatten)
}

/// Whether threads stay bound to their caller's loop (`BATON_POOL_BIND=0`: never), read once.
fn binding_enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| crate::foundations::sync::env_switch("BATON_POOL_BIND"))
}

/// A set of reusable named threads.
pub struct Pool {
    name: &'static str,
    /// The most threads it runs at once.
    max: usize,
    state: Mutex<Option<State>>,
    /// See [`BOUND_MAX`].
    bound_max: Duration,
    /// How many times a thread parked (waited for a call without looking), for tests.
    parks: AtomicU64,
}

impl Pool {
    /// A pool whose threads are named `name`, none started yet.
    pub const fn new(name: &'static str) -> Pool {
        Pool::with_bound_max(name, BOUND_MAX)
    }

    /// A pool of at most `max` threads (at least one): calls beyond wait for a free one.
    pub const fn bounded(name: &'static str, max: usize) -> Pool {
        let mut pool = Pool::new(name);
        pool.max = if max == 0 { 1 } else { max };
        pool
    }

    /// A pool whose threads stay bound to a caller at most `bound_max` (tests).
    pub const fn with_bound_max(name: &'static str, bound_max: Duration) -> Pool {
        Pool {
            name,
            max: usize::MAX,
            state: Mutex::new(None),
            bound_max,
            parks: AtomicU64::new(0),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Option<State>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `work` on an idle thread, or on a new one, then the closure it returns, which
    /// hands the outcome to the caller (sends on a channel, calls a callback). The thread
    /// parks as soon as it is done.
    pub fn run<W, D>(&'static self, work: W) -> std::io::Result<()>
    where
        W: FnOnce() -> D + Send + 'static,
        D: FnOnce() + 'static,
    {
        self.start(Job {
            work: Box::new(move || {
                let deliver = work();
                Box::new(move |_: Ticket| deliver()) as Deliver
            }),
            turns: None,
        })
    }

    /// [`Pool::run`] for a caller whose loop takes the outcome: the closure `work` returns
    /// gets the outcome's [`Ticket`], which the loop passes to [`Turns::took`] as it takes
    /// it. The thread is back on the idle list before that closure runs and stays bound to
    /// the caller until that turn is over (see the module docs), so a call the continuation
    /// makes finds it awake.
    pub fn run_for<W, D>(&'static self, turns: &Arc<Turns>, work: W) -> std::io::Result<()>
    where
        W: FnOnce() -> D + Send + 'static,
        D: FnOnce(Ticket) + 'static,
    {
        self.start(Job {
            work: Box::new(move || Box::new(work()) as Deliver),
            turns: Some(turns.clone()),
        })
    }

    fn start(&'static self, mut job: Job) -> std::io::Result<()> {
        if !binding_enabled() {
            job.turns = None;
        }
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
        if st.threads.len() >= self.max {
            // Every thread is busy: the first one done takes it (see `work`).
            st.queue.push_back(job);
            return Ok(());
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
            let deliver = (job.work)();
            let turns = job.turns.take();
            let ticket = turns.as_ref().map_or(Ticket(0), |t| t.issue());
            let queued = {
                let mut guard = self.state();
                match guard.as_mut() {
                    // A call waiting for a free thread goes first.
                    Some(st) => match st.queue.pop_front() {
                        Some(next) => Some(next),
                        None => {
                            st.idle.push((id, tx.clone()));
                            None
                        }
                    },
                    None => {
                        drop(guard);
                        deliver(ticket);
                        return;
                    }
                }
            };
            deliver(ticket);
            if let Some(next) = queued {
                job = next;
                continue;
            }
            if let Some(turns) = turns {
                if let Some(next) = bound_for(&rx, &turns, ticket, self.bound_max) {
                    match next {
                        Some(j) => {
                            job = j;
                            continue;
                        }
                        None => return,
                    }
                }
            }
            self.parks.fetch_add(1, Ordering::Relaxed);
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
    fn back_to_back_calls_reuse_one_thread() {
        static POOL: Pool = Pool::new("baton-test-reuse");
        for _ in 0..50 {
            assert_eq!(run_on(&POOL), "baton-test-reuse");
        }
        assert_eq!(threads(&POOL), 1, "back-to-back calls started more threads");
        POOL.stop(Instant::now() + Duration::from_secs(10));
        assert_eq!(threads(&POOL), 0, "stop left a thread");
    }

    /// Runs one job for `turns` on `pool`; the name of its thread and the outcome's ticket.
    fn run_for_on(pool: &'static Pool, turns: &Arc<Turns>) -> (String, Ticket) {
        let (tx, rx) = mpsc::channel();
        pool.run_for(turns, move || {
            let name = std::thread::current().name().map(String::from);
            move |ticket| {
                let _ = tx.send((name, ticket));
            }
        })
        .expect("run");
        let (name, ticket) = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the job ran");
        (name.expect("a named thread"), ticket)
    }

    /// Waits until `pool`'s threads parked `n` times in all (10 s at most).
    fn wait_parks(pool: &Pool, n: u64) -> bool {
        let end = Instant::now() + Duration::from_secs(10);
        while pool.parks.load(Ordering::Relaxed) < n {
            if Instant::now() >= end {
                return false;
            }
            std::thread::yield_now();
        }
        true
    }

    #[test]
    fn a_call_made_in_the_turn_finds_the_bound_thread_awake() {
        // The guard is out of reach: only the turn (or a call) ends the thread's wait.
        static POOL: Pool = Pool::with_bound_max("baton-test-bound", Duration::from_secs(60));
        let turns = Turns::new();
        let (_, first) = run_for_on(&POOL, &turns);
        assert!(
            turns.took(first),
            "the first outcome of a turn asks for a turn-over"
        );
        assert!(turns.in_turn());
        // A slow continuation (a loop that takes long to wake up and run it): however long,
        // its call finds the thread that delivered the outcome still looking.
        std::thread::sleep(Duration::from_millis(20));
        let (_, second) = run_for_on(&POOL, &turns);
        assert!(second > first);
        assert_eq!(
            POOL.parks.load(Ordering::Relaxed),
            0,
            "the bound thread parked before its caller's turn was over"
        );
        assert!(!turns.took(second), "a turn-over is already due");
        turns.turn_over();
        assert!(!turns.in_turn());
        assert!(
            wait_parks(&POOL, 1),
            "the thread did not park once the turn was over"
        );
        assert_eq!(threads(&POOL), 1);
        POOL.stop(Instant::now() + Duration::from_secs(10));
        assert_eq!(threads(&POOL), 0, "stop left a thread");
    }

    #[test]
    fn a_turn_over_without_a_call_lets_the_thread_park() {
        static POOL: Pool = Pool::with_bound_max("baton-test-over", Duration::from_secs(60));
        let turns = Turns::new();
        let (_, ticket) = run_for_on(&POOL, &turns);
        turns.took(ticket);
        turns.turn_over();
        assert!(
            wait_parks(&POOL, 1),
            "the thread did not park once the turn was over"
        );
        // The parked thread takes the next call.
        let (name, _) = run_for_on(&POOL, &turns);
        assert_eq!(name, "baton-test-over");
        assert_eq!(threads(&POOL), 1);
        POOL.stop(Instant::now() + Duration::from_secs(10));
        assert_eq!(threads(&POOL), 0, "stop left a thread");
    }

    #[test]
    fn a_turn_that_never_ends_parks_the_thread_at_the_guard() {
        static POOL: Pool = Pool::with_bound_max("baton-test-guard", Duration::from_millis(1));
        let turns = Turns::new();
        let (_, ticket) = run_for_on(&POOL, &turns);
        turns.took(ticket);
        // No turn-over: the guard ends the wait.
        assert!(
            wait_parks(&POOL, 1),
            "the thread stayed bound past its guard"
        );
        POOL.stop(Instant::now() + Duration::from_secs(10));
        assert_eq!(threads(&POOL), 0, "stop left a thread");
    }

    #[test]
    fn a_call_without_turns_parks_its_thread_when_done() {
        static POOL: Pool = Pool::new("baton-test-parked");
        run_on(&POOL);
        assert!(wait_parks(&POOL, 1), "the thread did not park");
        run_on(&POOL);
        run_on(&POOL);
        assert_eq!(threads(&POOL), 1);
        POOL.stop(Instant::now() + Duration::from_secs(10));
        assert_eq!(threads(&POOL), 0, "stop left a thread");
    }

    #[test]
    fn stop_ends_a_thread_that_is_still_bound() {
        static POOL: Pool = Pool::with_bound_max("baton-test-stop", Duration::from_secs(60));
        let turns = Turns::new();
        let (_, ticket) = run_for_on(&POOL, &turns);
        turns.took(ticket);
        // Stopped while the thread waits for its caller's turn to end.
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

    #[test]
    fn a_bounded_pool_queues_calls_beyond_its_threads_and_runs_every_one() {
        static POOL: Pool = Pool::bounded("baton-test-cap", 2);
        let (release, gate) = crossbeam_channel::bounded::<()>(0);
        let (started, starts) = mpsc::channel();
        let (finished, done) = mpsc::channel();
        for i in 0..10 {
            let (gate, started, finished) = (gate.clone(), started.clone(), finished.clone());
            POOL.run(move || {
                let _ = started.send(i);
                let _ = gate.recv();
                move || {
                    let _ = finished.send(i);
                }
            })
            .expect("run");
        }
        // Two run; the other eight wait for them.
        for _ in 0..2 {
            starts
                .recv_timeout(Duration::from_secs(10))
                .expect("a call started");
        }
        assert!(
            starts.recv_timeout(Duration::from_millis(200)).is_err(),
            "a third thread ran"
        );
        assert_eq!(threads(&POOL), 2);
        drop(release);
        let mut all: Vec<i32> = (0..10)
            .map(|_| {
                done.recv_timeout(Duration::from_secs(10))
                    .expect("every call ran")
            })
            .collect();
        all.sort();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        assert_eq!(threads(&POOL), 2, "no more threads than the bound");
        POOL.stop(Instant::now() + Duration::from_secs(10));
    }
}
