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
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver, Sender};

use crate::cancel::CancelToken;
use crate::client::{Client, WeakClient};
use crate::lease::Session;
use crate::threads::Worker;

/// What a task wants after one run.
pub(crate) enum Next {
    /// Finished (done, or nothing left worth trying).
    Done,
    /// Run again after this long.
    RetryAfter(Duration),
}

/// One clean-up: runs on the clean-up thread with a live client.
pub(crate) type Task = Box<dyn FnMut(&Client) -> Next + Send + 'static>;

struct Queued {
    at: Instant,
    seq: u64,
    client: WeakClient,
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
    tx: Sender<(WeakClient, Task)>,
    pub(crate) worker: Worker,
}

impl Cleanup {
    pub(crate) fn start(closing: CancelToken) -> std::io::Result<Cleanup> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let worker = Worker::spawn("baton-cleanup", move || run(rx, closing))?;
        Ok(Cleanup { tx, worker })
    }

    pub(crate) fn post(&self, client: WeakClient, task: Task) {
        let _ = self.tx.send((client, task));
    }
}

/// How long a clean-up owed on behalf of a session keeps being retried: while
/// the session is valid (what it holds stays held otherwise), then for 2×TTL
/// (by then Consul has expired it and freed what it held), with a backoff of
/// 100 ms doubling to 2 s.
pub(crate) struct Owed {
    session: Session,
    give_up: Option<Instant>,
    tries: u32,
}

impl Owed {
    pub(crate) fn new(session: &Session) -> Owed {
        Owed {
            session: session.clone(),
            give_up: None,
            tries: 0,
        }
    }

    /// After a failed try: when to try again, or `Done` to stop.
    pub(crate) fn failed(&mut self) -> Next {
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

fn run(rx: Receiver<(WeakClient, Task)>, closing: CancelToken) {
    // Every request made here can be interrupted by close.
    let _scope = crate::scope::cancel_with(closing.clone());
    let closed = closing.receiver();
    let mut heap: BinaryHeap<Reverse<Queued>> = BinaryHeap::new();
    let mut seq = 0u64;
    loop {
        let timer = match heap.peek() {
            Some(Reverse(q)) => crossbeam_channel::at(q.at),
            None => crossbeam_channel::never(),
        };
        select! {
            recv(rx) -> msg => match msg {
                Ok((client, task)) => {
                    seq += 1;
                    heap.push(Reverse(Queued { at: Instant::now(), seq, client, task }));
                }
                Err(_) => return,
            },
            recv(closed) -> _ => return,
            recv(timer) -> _ => {}
        }
        while heap.peek().is_some_and(|Reverse(q)| q.at <= Instant::now()) {
            if closing.is_cancelled() {
                return;
            }
            let Reverse(mut q) = heap.pop().expect("peeked");
            let Some(client) = q.client.upgrade() else {
                continue; // the client is gone; its close cleaned up what it could
            };
            let next = (q.task)(&client);
            // The last clone may be this one: dropping it closes the client, which
            // joins this thread (a join of oneself returns at once).
            drop(client);
            if let Next::RetryAfter(d) = next {
                seq += 1;
                q.at = Instant::now() + d;
                q.seq = seq;
                heap.push(Reverse(q));
            }
        }
    }
}
