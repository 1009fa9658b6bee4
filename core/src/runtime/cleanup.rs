//! The clean-up thread: best-effort requests that follow a loss (unlock a key a
//! lost lease may still hold at Consul, give back a semaphore slot, undo an
//! acquire whose answer never came), on a thread of their own.
//!
//! A loss signal never waits on I/O (DESIGN §2): the holding ends and its
//! signals fire first; whatever must still be said to Consul is queued here,
//! where a dead connection delays nothing but other clean-ups. A task is
//! retried until it reports that it is done (or gives up by its own rule); its
//! requests are interrupted by `close`, which joins this thread.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver, Sender};

use crate::foundations::cancel::CancelToken;
use crate::foundations::error::Error;
use crate::foundations::threads::Worker;
use crate::runtime::lease::Session;

/// What a task wants after one run.
pub(crate) enum Next {
    /// Finished (done, or nothing left worth trying).
    Done,
    /// Consul answered, but the task must try again after this long.
    RetryAfter(Duration),
    /// Not yet for a local reason (e.g. it waits for other clean-ups): look
    /// again after this long. Says nothing of Consul's state.
    Wait(Duration),
    /// Consul could not be reached or cannot serve now (a transient failure,
    /// see [`Error::is_transient`](crate::Error::is_transient)): try again once it
    /// answers. While any task is in this state, the thread sends one probe
    /// at a time (the longest-waiting task, every [`PROBE_MIN`] doubling to
    /// [`PROBE_MAX`]), and runs every task at once when a probe gets an answer.
    Unavailable,
}

/// First pause between probes of an unavailable Consul...
pub(crate) const PROBE_MIN: Duration = Duration::from_millis(100);
/// ...doubling up to this: a key whose release failed during an outage is
/// free within about this long of Consul answering again.
pub(crate) const PROBE_MAX: Duration = Duration::from_millis(250);

/// One clean-up: runs on the clean-up thread. `None`: whatever it worked for
/// is gone (its client was dropped; that client's close cleaned up what it
/// could), so it is dropped too.
pub(crate) type Task = Box<dyn FnMut() -> Option<Next> + Send + 'static>;

struct Queued {
    at: Instant,
    seq: u64,
    task: Task,
}

impl PartialEq for Queued {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Queued {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// Handle to the clean-up thread `baton-cleanup`.
#[derive(Debug)]
pub(crate) struct Cleanup {
    tx: Sender<Task>,
    pub(crate) worker: Worker,
}

impl Cleanup {
    pub(crate) fn start(closing: CancelToken) -> std::io::Result<Cleanup> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let worker = Worker::spawn("baton-cleanup", move || run(rx, closing))?;
        Ok(Cleanup { tx, worker })
    }

    pub(crate) fn post(&self, task: Task) {
        let _ = self.tx.send(task);
    }
}

/// A clean-up owed on behalf of a session (an unlock, a slot to give back):
/// how long it is retried. While Consul cannot answer (a transient failure)
/// it is retried until it does, however long that takes: Consul restarts
/// its session timers when a new raft leader is elected, so a session whose
/// local deadline passed during an outage may still hold keys afterwards.
/// When Consul answers with another failure, it is retried while the
/// session is valid, then for 2×TTL (by then Consul has expired it and freed
/// what it held), with a backoff of 100 ms doubling to 2 s. While any owed
/// task of a session is pending, the session counts it
/// (`SessionShared::owed`), so that it is destroyed only after them.
pub(crate) struct Owed {
    session: Session,
    give_up: Option<Instant>,
    tries: u32,
}

impl Owed {
    pub(crate) fn new(session: &Session) -> Owed {
        session.shared.owed.fetch_add(1, Ordering::SeqCst);
        Owed {
            session: session.clone(),
            give_up: None,
            tries: 0,
        }
    }

    /// After a try that failed with `err`: when to try again, or `Done` to stop.
    pub(crate) fn failed(&mut self, err: &Error) -> Next {
        if err.is_transient() {
            return Next::Unavailable;
        }
        if !self.session.is_valid() {
            let ttl = self.session.ttl().unwrap_or(Duration::from_secs(15));
            let end = *self.give_up.get_or_insert_with(|| Instant::now() + 2 * ttl);
            if Instant::now() >= end {
                return Next::Done;
            }
        }
        self.tries += 1;
        Next::RetryAfter(
            Duration::from_millis(100)
                .saturating_mul(1 << self.tries.min(5))
                .min(Duration::from_secs(2)),
        )
    }
}

impl Drop for Owed {
    fn drop(&mut self) {
        self.session.shared.owed.fetch_sub(1, Ordering::SeqCst);
    }
}

fn run(rx: Receiver<Task>, closing: CancelToken) {
    // Every request made here can be interrupted by close.
    let _scope = crate::foundations::scope::cancel_with(closing.clone());
    let closed = closing.receiver();
    let mut heap: BinaryHeap<Reverse<Queued>> = BinaryHeap::new();
    let mut seq = 0u64;
    // While Consul is unavailable: when the next probe goes, and the pause after it.
    let mut outage: Option<(Instant, Duration)> = None;
    loop {
        let timer = match (heap.peek(), &outage) {
            (None, _) => crossbeam_channel::never(),
            (Some(_), Some((probe, _))) => crossbeam_channel::at(*probe),
            (Some(Reverse(q)), None) => crossbeam_channel::at(q.at),
        };
        select! {
            recv(rx) -> msg => match msg {
                Ok(task) => {
                    seq += 1;
                    heap.push(Reverse(Queued { at: Instant::now(), seq, task }));
                }
                Err(_) => return,
            },
            recv(closed) -> _ => return,
            recv(timer) -> _ => {}
        }
        loop {
            if closing.is_cancelled() {
                return;
            }
            let now = Instant::now();
            let due = match &outage {
                // One probe at a time: the task that has waited longest.
                Some((probe, _)) => {
                    *probe <= now && heap.peek().is_some_and(|Reverse(q)| q.at <= now)
                }
                None => heap.peek().is_some_and(|Reverse(q)| q.at <= now),
            };
            if !due {
                break;
            }
            let Reverse(mut q) = heap.pop().expect("peeked");
            // A task's own client may be the last clone it holds while it runs:
            // dropping it closes the client, which joins this thread (a join of
            // oneself returns at once).
            let Some(next) = (q.task)() else {
                continue;
            };
            let now = Instant::now();
            let again = match next {
                Next::Done => {
                    outage = None;
                    None
                }
                Next::RetryAfter(d) => {
                    outage = None;
                    Some(now + d)
                }
                Next::Wait(d) => Some(now + d),
                Next::Unavailable => {
                    let pause = outage.map_or(PROBE_MIN, |(_, p)| (p * 2).min(PROBE_MAX));
                    outage = Some((now + pause, pause));
                    // Keeps its place: it is the first to probe again.
                    Some(q.at)
                }
            };
            if let Some(at) = again {
                if at != q.at {
                    seq += 1;
                    q.at = at;
                    q.seq = seq;
                }
                heap.push(Reverse(q));
            }
        }
    }
}
