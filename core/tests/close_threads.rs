//! `close()` joins every thread the client started (one test per binary, so
//! no other test's threads are counted).

mod common;

use std::time::Duration;

use baton::SessionOptions;
use common::Fixture;

/// Names of this process's threads.
fn thread_names() -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir("/proc/self/task").expect("procfs") {
        let path = entry.unwrap().path().join("comm");
        if let Ok(n) = std::fs::read_to_string(path) {
            names.push(n.trim().to_string());
        }
    }
    names
}

fn baton_threads() -> usize {
    thread_names()
        .iter()
        .filter(|n| n.starts_with("baton-") && !n.starts_with("baton-devserver"))
        .count()
}

#[test]
fn close_joins_every_thread_even_with_long_polls_in_flight() {
    let f = Fixture::start();
    let before_total = thread_names().len();
    let before = baton_threads();
    let c = f.client();
    assert_eq!(baton_threads(), before, "no threads at client creation");
    let s = c
        .create_session(&SessionOptions::new().ttl(Duration::from_secs(30)))
        .unwrap();
    let (tx, ran) = crossbeam_channel::bounded(1);
    s.on_lost(move |_| {
        let _ = tx.send(());
    });
    let _d = c.default_session().unwrap();
    let mut w1 = c.watch_key("close/a").unwrap();
    let mut w2 = c.watch_prefix("close/").unwrap();
    w1.next(Some(Duration::from_secs(20)), None).unwrap();
    w2.next(Some(Duration::from_secs(20)), None).unwrap();
    // Make the dispatcher start too.
    f.client().sessions().destroy(s.id()).unwrap();
    s.wait_lost(Some(Duration::from_secs(20)), None).unwrap();
    // The callback ran, so the dispatcher thread exists (it starts when the loss is posted).
    ran.recv_timeout(Duration::from_secs(20))
        .expect("the loss callback runs");
    let during = baton_threads();
    eprintln!("threads: before {before_total} total; baton threads while running: {during}");
    // renewer, lease timer, session monitor, dispatcher, and the key hub's poller, which
    // reads both watches
    assert_eq!(during, before + 5, "{:?}", thread_names());
    // Every watch and the monitor are parked in long polls now.
    assert!(
        c.close(Duration::from_secs(10)),
        "everything finished in time"
    );
    assert_eq!(baton_threads(), before, "{:?}", thread_names());
    drop((w1, w2));
    assert!(thread_names().len() <= before_total + 1);
}
