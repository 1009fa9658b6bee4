//! Item 3 of "A holding never lies": a logger that blocks (Python's `logging`
//! bridge waits for the GIL) never sits between a session's loss and the end
//! of its holdings. Its own test binary: it installs a process-wide logger.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use baton::{LockOptions, SessionOptions};
use common::{unique, Fixture};

/// Blocks every warning until released, like a logger waiting for a lock
/// another thread holds.
struct BlockingLogger {
    open: AtomicBool,
}

static LOGGER: BlockingLogger = BlockingLogger {
    open: AtomicBool::new(false),
};

impl log::Log for BlockingLogger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record<'_>) {
        if r.level() <= log::Level::Warn {
            while !self.open.load(Ordering::SeqCst) {
                std::thread::park_timeout(Duration::from_millis(5));
            }
        }
    }
    fn flush(&self) {}
}

/// Opens the logger when dropped, also when an assertion fails (the threads
/// blocked in it must finish for the client and server to shut down).
struct OpenOnDrop;

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        LOGGER.open.store(true, Ordering::SeqCst);
    }
}

#[test]
fn a_blocked_logger_does_not_delay_the_end_of_a_holding() {
    let f = Fixture::start();
    let Some(dev) = f.dev("invalidates a session") else {
        return;
    };
    log::set_logger(&LOGGER).unwrap();
    log::set_max_level(log::LevelFilter::Warn);
    let c = f.client();
    let session = c
        .create_session(&SessionOptions::new().ttl(Duration::from_secs(10)))
        .unwrap();
    let lock = c
        .lock_with(
            &unique("logger"),
            LockOptions::new().session(session.clone()),
        )
        .unwrap();
    let sem = c
        .semaphore_with(
            &unique("logger-sem"),
            1,
            baton::SemaphoreOptions::new().session(session.clone()),
        )
        .unwrap();
    assert!(lock.acquire(Some(Duration::from_secs(20)), None).unwrap());
    assert!(sem.acquire(Some(Duration::from_secs(20)), None).unwrap());
    let token = lock.cancel_token();
    // Declared last, dropped first: opens the logger before the rest unwinds.
    let _open = OpenOnDrop;
    // The session monitor notices and declares the session lost; its warning
    // blocks in the logger from then on.
    assert!(dev.invalidate_session(session.id()));
    session
        .wait_lost(Some(Duration::from_secs(20)), None)
        .unwrap();
    assert!(!lock.is_held(), "lock held after its session was lost");
    assert!(!sem.is_held(), "semaphore held after its session was lost");
    assert!(lock.sequencer().is_none());
    lock.wait_lost(Some(Duration::from_secs(20)), None).unwrap();
    assert!(
        token.wait_timeout(Duration::from_secs(20)),
        "the holding's cancel token fired while the logger was blocked"
    );
    drop(_open);
    c.close(Duration::from_secs(5));
}
