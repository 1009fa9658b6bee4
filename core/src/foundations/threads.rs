//! Named background threads that can be joined with a deadline.

use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::Receiver;

/// A named thread started by a client, joinable with a deadline.
#[derive(Debug)]
pub(crate) struct Worker {
    name: String,
    handle: Option<JoinHandle<()>>,
    /// Disconnects when the thread's body returns.
    done: Receiver<()>,
}

impl Worker {
    /// Spawns `body` on a thread called `name`.
    pub(crate) fn spawn(
        name: &str,
        body: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<Worker> {
        let (tx, rx) = crossbeam_channel::bounded::<()>(0);
        let (started_tx, started_rx) = crossbeam_channel::bounded::<()>(1);
        let handle = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let _done = tx;
                let _ = started_tx.send(());
                body();
            })?;
        // The thread has its name once it runs: callers can count on it.
        let _ = started_rx.recv();
        Ok(Worker {
            name: name.to_string(),
            handle: Some(handle),
            done: rx,
        })
    }

    /// Whether this is the calling thread.
    pub(crate) fn is_current(&self) -> bool {
        self.handle
            .as_ref()
            .is_some_and(|h| h.thread().id() == std::thread::current().id())
    }

    /// Joins the thread if it finishes before `deadline`; returns whether it did.
    /// Joining oneself returns `true` without waiting (the thread is about to end).
    pub(crate) fn join_until(&mut self, deadline: Instant) -> bool {
        if self.handle.is_none() {
            return true;
        }
        if self.is_current() {
            return true;
        }
        let timeout = deadline.saturating_duration_since(Instant::now());
        match self.done.recv_timeout(timeout) {
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) | Ok(()) => {
                if let Some(h) = self.handle.take() {
                    if h.join().is_err() {
                        log::error!("baton thread {} panicked", self.name);
                    }
                }
                true
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                log::warn!("baton thread {} did not stop in time", self.name);
                false
            }
        }
    }
}
