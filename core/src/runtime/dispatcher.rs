//! The dispatcher: the one thread per client that runs user callbacks.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crossbeam_channel::{select, Receiver, Sender};

use crate::foundations::cancel::CancelToken;
use crate::foundations::threads::Worker;

/// A queued callback invocation.
pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

/// Runs callbacks in order on the thread `baton-dispatch`, never while a
/// library lock is held, and never once the client is closing.
#[derive(Debug)]
pub(crate) struct Dispatcher {
    tx: Sender<Job>,
    pub(crate) worker: Worker,
}

impl Dispatcher {
    pub(crate) fn start(closing: CancelToken) -> std::io::Result<Dispatcher> {
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        let worker = Worker::spawn("baton-dispatch", move || run(rx, closing))?;
        Ok(Dispatcher { tx, worker })
    }

    /// Queues a job; dropped silently if the dispatcher has stopped.
    pub(crate) fn post(&self, job: Job) {
        let _ = self.tx.send(job);
    }
}

fn run(rx: Receiver<Job>, closing: CancelToken) {
    let closed = closing.receiver();
    loop {
        select! {
            recv(rx) -> job => {
                let Ok(job) = job else { return };
                if closing.is_cancelled() {
                    return;
                }
                if let Err(panic) = catch_unwind(AssertUnwindSafe(job)) {
                    let msg = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "non-string panic".to_string());
                    log::error!("baton callback panicked: {msg}");
                }
            }
            recv(closed) -> _ => return,
        }
    }
}
