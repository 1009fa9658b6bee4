//! The threads behind baton's futures (`baton::aio`): a few named threads that
//! run the short blocking pieces of a non-blocking call (one try of an acquire,
//! one KV request), and one timer thread that wakes a waiting future at its
//! deadline or retry time.
//!
//! A future that waits (an acquire on a key someone else holds) holds no thread:
//! it is woken by the key hub, a watch, a cancel token or an alarm here, and
//! only then queues its next try. So ten thousand pending acquires cost the
//! same few threads as one. The threads start on first use, at most
//! [`MAX_STEPPERS`] of them (a step waits for an idle one rather than start
//! more), and are joined by the client's `close`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver, Sender};

use crate::foundations::cancel::CancelToken;
use crate::foundations::sync::lock;
use crate::foundations::threads::Worker;

/// A piece of blocking work of a non-blocking call. It returns whether it woke
/// a task that has since taken its outcome (see [`bound`]): the thread then
/// looks for that task's next step for a moment before it parks.
pub(crate) type StepJob = Box<dyn FnOnce() -> bool + Send + 'static>;
/// What an alarm does when it goes off, on the timer thread: wake a task
/// (quick, never user code beyond a `Waker`).
pub(crate) type Alarm = Box<dyn FnOnce() + Send + 'static>;

/// The most step threads a client runs.
pub(crate) const MAX_STEPPERS: usize = 8;

/// How long a step thread that delivered an outcome waits for the task to take
/// it (the executor's wake-up), at most.
pub(crate) const BOUND_MAX: Duration = Duration::from_millis(1);

/// How long a step thread whose task took its outcome looks for that task's
/// next step (issued in the same poll: a release after an acquire) before it
/// parks.
const FOLLOW: Duration = Duration::from_micros(30);

/// Whether a step thread stays with the task it woke until the task took the
/// outcome, then looks for its next step for [`FOLLOW`]: a task's back-to-back
/// calls then skip the wake-up of a parked step thread (tens of microseconds
/// on a small VM, where a loopback round trip to Consul costs ~100).
/// `BATON_STEP_BIND=0` turns it off (`make bench-async` compares both).
pub(crate) fn bound() -> bool {
    static BOUND: OnceLock<bool> = OnceLock::new();
    *BOUND.get_or_init(|| crate::foundations::sync::env_switch("BATON_STEP_BIND"))
}

/// The step threads and the timer of one client.
pub(crate) struct Steps {
    tx: Sender<StepJob>,
    rx: Receiver<StepJob>,
    idle: Arc<AtomicUsize>,
    /// Step threads standing by for the task they just woke ([`standing_by`]).
    standby: Arc<AtomicUsize>,
    workers: Vec<Worker>,
    closing: CancelToken,
    timer: Arc<TimerShared>,
    timer_worker: Worker,
    /// The readiness thread of the futures that drive their own requests, started with
    /// the first ([`Steps::reactor`]).
    reactor: Option<super::reactor::Reactor>,
}

impl Steps {
    pub(crate) fn start(closing: CancelToken) -> std::io::Result<Steps> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let (wake, wake_rx) = crossbeam_channel::bounded(1);
        let timer = Arc::new(TimerShared {
            state: Mutex::new(TimerState::default()),
            wake,
        });
        let (t, c) = (timer.clone(), closing.clone());
        let timer_worker = Worker::spawn("baton-timer", move || run_timer(t, wake_rx, c))?;
        Ok(Steps {
            tx,
            rx,
            idle: Arc::new(AtomicUsize::new(0)),
            standby: Arc::new(AtomicUsize::new(0)),
            workers: Vec::new(),
            closing,
            timer,
            timer_worker,
            reactor: None,
        })
    }

    /// Queues `job` on a step thread, starting one if none is idle and fewer
    /// than [`MAX_STEPPERS`] run. A job queued as the client closes is dropped
    /// unrun: whatever it completes must complete on drop too.
    ///
    /// A thread standing by for its task ([`standing_by`]: it has just woken the
    /// task and waits for it to take the outcome, then looks for its next step)
    /// counts as one that takes the next job: a task's back-to-back steps (an
    /// acquire's outcome taken, its release issued in the same poll) then start no
    /// thread each, while a burst that queues more jobs than threads stand by still
    /// starts threads.
    pub(crate) fn run(&mut self, job: StepJob) -> std::io::Result<()> {
        let standing = self.standby.load(Ordering::Acquire);
        let busy = self.idle.load(Ordering::Acquire) == 0 && self.rx.len() >= standing;
        if busy && self.workers.len() < MAX_STEPPERS {
            let name = format!("baton-step-{}", self.workers.len());
            let (rx, idle, closing) = (self.rx.clone(), self.idle.clone(), self.closing.clone());
            let standby = self.standby.clone();
            match Worker::spawn(&name, move || run_steps(rx, idle, standby, closing)) {
                Ok(w) => self.workers.push(w),
                // Threads already running take the job in turn.
                Err(e) if !self.workers.is_empty() => {
                    log::warn!("baton: cannot start another step thread: {e}")
                }
                Err(e) => return Err(e),
            }
        }
        let _ = self.tx.send(job);
        Ok(())
    }

    /// Calls `alarm` on the timer thread at `at` unless the guard drops first.
    pub(crate) fn alarm(&self, at: Instant, alarm: Alarm) -> AlarmGuard {
        let id = {
            let mut st = lock(&self.timer.state);
            let id = st.next;
            st.next += 1;
            let earliest = st.heap.peek().is_none_or(|Reverse((t, _))| at < *t);
            st.heap.push(Reverse((at, id)));
            st.alarms.insert(id, alarm);
            if earliest {
                let _ = self.timer.wake.try_send(());
            }
            id
        };
        AlarmGuard {
            timer: Arc::downgrade(&self.timer),
            id,
        }
    }

    /// The step threads and the timer, for `close` to join.
    pub(crate) fn into_workers(self) -> Vec<Worker> {
        let mut all = self.workers;
        all.push(self.timer_worker);
        all.extend(self.reactor.map(super::reactor::Reactor::into_worker));
        all
    }

    /// The readiness thread (started on first use; see `runtime::reactor`).
    pub(crate) fn reactor(&mut self) -> std::io::Result<super::reactor::ReactorHandle> {
        if let Some(r) = &self.reactor {
            return Ok(r.handle());
        }
        let r = super::reactor::Reactor::start(&self.closing)?;
        Ok(self.reactor.insert(r).handle())
    }
}

thread_local! {
    /// On a step thread: its client's count of threads standing by.
    static STANDBY: std::cell::RefCell<Option<Arc<AtomicUsize>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `wait` (a step thread waiting for the task it woke to take the outcome)
/// counted as standing by, so that the task's next step starts no new thread
/// ([`Steps::run`]). Off a step thread it just runs `wait`.
pub(crate) fn standing_by<R>(wait: impl FnOnce() -> R) -> R {
    let counter = STANDBY.with(|s| s.borrow().clone());
    if let Some(c) = &counter {
        c.fetch_add(1, Ordering::AcqRel);
    }
    let r = wait();
    if let Some(c) = &counter {
        c.fetch_sub(1, Ordering::AcqRel);
    }
    r
}

fn run_steps(
    rx: Receiver<StepJob>,
    idle: Arc<AtomicUsize>,
    standby: Arc<AtomicUsize>,
    closing: CancelToken,
) {
    STANDBY.with(|s| *s.borrow_mut() = Some(standby));
    let closed = closing.receiver();
    let mut follow: Option<Instant> = None;
    loop {
        let job = match follow.take().and_then(|until| {
            standing_by(|| crate::foundations::sync::look_for(&rx, until, || false))
        }) {
            Some(job) => job,
            None => {
                idle.fetch_add(1, Ordering::AcqRel);
                let got = select! {
                    recv(rx) -> job => job.ok(),
                    recv(closed) -> _ => None,
                };
                idle.fetch_sub(1, Ordering::AcqRel);
                got
            }
        };
        let Some(job) = job else { return };
        if closing.is_cancelled() {
            return;
        }
        match catch_unwind(AssertUnwindSafe(job)) {
            Ok(true) => follow = Some(Instant::now() + FOLLOW),
            Ok(false) => {}
            Err(_) => log::error!("baton: a step of an async call panicked"),
        }
    }
}

#[derive(Default)]
struct TimerState {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    alarms: HashMap<u64, Alarm>,
    next: u64,
}

struct TimerShared {
    state: Mutex<TimerState>,
    /// Wakes the timer thread when an alarm earlier than all others is set.
    wake: Sender<()>,
}

/// Cancels its alarm when dropped.
pub(crate) struct AlarmGuard {
    timer: Weak<TimerShared>,
    id: u64,
}

impl Drop for AlarmGuard {
    fn drop(&mut self) {
        if let Some(t) = self.timer.upgrade() {
            let mut st = lock(&t.state);
            st.alarms.remove(&self.id);
            // The heap entry stays until its time (without its alarm it does
            // nothing) until such entries outnumber the live ones: then they go,
            // so the heap follows the alarms set, not those set over the longest
            // timeout (one pass per as many drops as there are live alarms).
            if st.heap.len() > 2 * st.alarms.len() + 64 {
                let TimerState { heap, alarms, .. } = &mut *st;
                heap.retain(|Reverse((_, id))| alarms.contains_key(id));
            }
        }
    }
}

fn run_timer(timer: Arc<TimerShared>, wake: Receiver<()>, closing: CancelToken) {
    let closed = closing.receiver();
    loop {
        let (due, next) = {
            let mut st = lock(&timer.state);
            let now = Instant::now();
            let mut due = Vec::new();
            while let Some(Reverse((t, id))) = st.heap.peek().copied() {
                if t > now {
                    break;
                }
                st.heap.pop();
                if let Some(a) = st.alarms.remove(&id) {
                    due.push(a);
                }
            }
            (due, st.heap.peek().map(|Reverse((t, _))| *t))
        };
        // Outside the lock: an alarm wakes a task, whose executor may run code.
        for alarm in due {
            if catch_unwind(AssertUnwindSafe(alarm)).is_err() {
                log::error!("baton: a timer alarm panicked");
            }
        }
        let tick = next.map_or_else(crossbeam_channel::never, crossbeam_channel::at);
        select! {
            recv(wake) -> _ => {}
            recv(tick) -> _ => {}
            recv(closed) -> _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_alarms_do_not_pile_up_until_their_time() {
        let steps = Steps::start(CancelToken::new()).expect("timer thread");
        let far = Instant::now() + Duration::from_secs(3600);
        let kept: Vec<AlarmGuard> = (0..10).map(|_| steps.alarm(far, Box::new(|| {}))).collect();
        for _ in 0..10_000 {
            drop(steps.alarm(far, Box::new(|| {})));
        }
        let heap = lock(&steps.timer.state).heap.len();
        assert!(
            heap <= 2 * kept.len() + 65,
            "{heap} heap entries for {} alarms",
            kept.len()
        );
        let (fired_tx, fired_rx) = crossbeam_channel::bounded(1);
        let _soon = steps.alarm(
            Instant::now(),
            Box::new(move || {
                let _ = fired_tx.send(());
            }),
        );
        assert!(
            fired_rx.recv_timeout(Duration::from_secs(10)).is_ok(),
            "a live alarm did not fire after the pruning"
        );
        steps.closing.cancel();
        for mut w in steps.into_workers() {
            assert!(w.join_until(Instant::now() + Duration::from_secs(10)));
        }
    }
}
