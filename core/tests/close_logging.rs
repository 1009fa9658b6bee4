//! An orderly `close()` while holding a lock, leading an election and holding a
//! semaphore slot logs no warning: nothing was lost, the client let go (issue
//! "One library in four languages", Messages). Its own test binary: it installs
//! a process-wide logger.

mod common;

use std::sync::Mutex;
use std::time::Duration;

use common::{unique, Fixture};

static RECORDS: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Recorder;

impl log::Log for Recorder {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record<'_>) {
        if r.level() <= log::Level::Warn && r.target().starts_with("baton") {
            RECORDS
                .lock()
                .unwrap()
                .push(format!("{} {}", r.level(), r.args()));
        }
    }
    fn flush(&self) {}
}

static LOGGER: Recorder = Recorder;

#[test]
fn an_orderly_close_while_holding_logs_no_warning() {
    let f = Fixture::start();
    log::set_logger(&LOGGER).unwrap();
    log::set_max_level(log::LevelFilter::Warn);
    let c = f.client();
    let lock = c.lock(&unique("close-lock")).unwrap();
    let election = c.election(&unique("close-election")).unwrap();
    let sem = c.semaphore(&unique("close-sem"), 2).unwrap();
    assert!(lock.acquire(Some(Duration::from_secs(20)), None).unwrap());
    assert!(election
        .campaign(b"me", Some(Duration::from_secs(20)), None)
        .unwrap());
    assert!(sem.acquire(Some(Duration::from_secs(20)), None).unwrap());
    let (tx, rx) = crossbeam_channel::unbounded();
    lock.on_lost(move |r| {
        let _ = tx.send(r);
    });
    assert!(c.close(Duration::from_secs(10)));
    assert!(!lock.is_held() && !election.is_leader() && !sem.is_held());
    drop((lock, election, sem));
    assert!(rx.try_recv().is_err(), "no loss callback for a close");
    let records = RECORDS.lock().unwrap().clone();
    assert!(
        records.is_empty(),
        "warnings on an orderly close: {records:?}"
    );
}
