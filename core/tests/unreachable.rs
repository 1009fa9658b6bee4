//! Issue 31 item 2: an unreachable Consul is not contention. A timed acquire,
//! semaphore wait or campaign in which no request got an answer ends with a
//! `Connection` error naming the address; an untimed one warns within about a
//! second. Its own test binary: it installs a process-wide logger.

mod common;

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use baton::{CancelToken, Client, ErrorKind};
use common::{unique, Fixture};

/// A port on loopback where nothing listens (bound, then closed).
fn closed_port_address() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    addr
}

fn client_at(addr: &str) -> Client {
    Client::builder().address(addr).build().unwrap()
}

const TWO_S: Option<Duration> = Some(Duration::from_secs(2));

fn assert_unreachable(what: &str, r: baton::Result<bool>, addr: &str) {
    let e = match r {
        Ok(v) => panic!("{what}: Ok({v}) against {addr}, where nothing answers"),
        Err(e) => e,
    };
    assert_eq!(e.kind(), ErrorKind::Connection, "{what}: {e}");
    let text = e.to_string();
    assert!(text.contains(addr), "{what}: the address is named: {text}");
    assert!(
        text.contains("configured address"),
        "{what}: where the address came from: {text}"
    );
    assert!(text.contains("no answer from Consul"), "{what}: {text}");
    assert!(e.message().starts_with(what), "named for the call: {text}");
    assert!(e.is_transient(), "transient as its causes are: {text}");
}

#[test]
fn a_timed_acquire_semaphore_and_campaign_on_a_closed_port_fail_naming_the_address() {
    let addr = closed_port_address();
    let c = client_at(&addr);
    assert_unreachable(
        "lock acquire",
        c.lock("a").unwrap().acquire(TWO_S, None),
        &addr,
    );
    assert_unreachable(
        "semaphore acquire",
        c.semaphore("s", 2).unwrap().acquire(TWO_S, None),
        &addr,
    );
    assert_unreachable(
        "campaign",
        c.election("e").unwrap().campaign(b"me", TWO_S, None),
        &addr,
    );
    // A try-once acquire says the same (it always did).
    let e = c.lock("a").unwrap().try_acquire().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(c.close(Duration::from_secs(5)));
}

#[test]
fn an_unresolvable_host_fails_the_same_way() {
    let addr = "baton-test-host.invalid:8500";
    let c = client_at(addr);
    let e = c.lock("a").unwrap().acquire(TWO_S, None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.to_string().contains(addr), "{e}");
}

#[test]
fn no_answer_within_the_request_timeout_is_unreachable_too() {
    let f = Fixture::start();
    let Some(dev) = f.dev("pauses the server") else {
        return;
    };
    let c = f
        .builder()
        .request_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    // The session create the paused server holds is applied when it resumes,
    // after the client gave up on it: the client never learns that session's
    // ID, and it expires by its TTL (a create is not idempotent at Consul).
    f.sessions_may_remain("a create held by the paused server is applied after the client gave up");
    dev.pause();
    let r = c
        .lock(&unique("unreach-paused"))
        .unwrap()
        .acquire(TWO_S, None);
    dev.resume();
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.to_string().contains(&f.addr), "{e}");
    assert!(c.close(Duration::from_secs(5)));
}

#[test]
fn contention_and_a_leaderless_cluster_still_mean_not_acquired() {
    let f = Fixture::start();
    let key = unique("unreach-contended");
    let holder = f.client();
    let held = holder.lock(&key).unwrap();
    assert!(held.acquire(TWO_S, None).unwrap());
    let other = f.client();
    let waiting = other.lock(&key).unwrap();
    assert!(!waiting
        .acquire(Some(Duration::from_millis(300)), None)
        .unwrap());
    // Consul answers "no cluster leader" throughout: it answered, it could not
    // decide; riding that out still ends as "not acquired".
    let Some(dev) = f.dev("a no-leader window") else {
        return;
    };
    let fresh = f.client();
    dev.set_leader(false);
    let r = fresh
        .lock(&unique("unreach-leaderless"))
        .unwrap()
        .acquire(Some(Duration::from_millis(600)), None);
    dev.set_leader(true);
    assert!(matches!(r, Ok(false)), "{r:?}");
}

/// Collects baton's warnings, and wakes whoever waits for one.
struct Warnings {
    seen: Mutex<Vec<(Instant, String)>>,
    added: Condvar,
}

impl log::Log for Warnings {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record<'_>) {
        if r.level() <= log::Level::Warn && r.target().starts_with("baton") {
            self.seen
                .lock()
                .unwrap()
                .push((Instant::now(), r.args().to_string()));
            self.added.notify_all();
        }
    }
    fn flush(&self) {}
}

static WARNINGS: Warnings = Warnings {
    seen: Mutex::new(Vec::new()),
    added: Condvar::new(),
};

#[test]
fn an_untimed_acquire_says_so_at_warn_level_within_about_a_second() {
    log::set_logger(&WARNINGS).unwrap();
    log::set_max_level(log::LevelFilter::Warn);
    let addr = closed_port_address();
    let c = client_at(&addr);
    let lock = Arc::new(c.lock("untimed").unwrap());
    let cancel = CancelToken::new();
    let started = Instant::now();
    let waiter = {
        let (lock, cancel) = (lock.clone(), cancel.clone());
        std::thread::spawn(move || lock.acquire(None, Some(&cancel)))
    };
    let (seen, timeout) = WARNINGS
        .added
        .wait_timeout_while(
            WARNINGS.seen.lock().unwrap(),
            Duration::from_secs(20),
            |seen| !seen.iter().any(|(_, m)| m.contains("lock acquire")),
        )
        .unwrap();
    assert!(!timeout.timed_out(), "no warning in 20 s");
    let warned = seen
        .iter()
        .find(|(_, m)| m.contains("lock acquire"))
        .cloned()
        .expect("found");
    drop(seen);
    cancel.cancel();
    let e = waiter.join().unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled, "{e}");
    let after = warned.0 - started;
    assert!(
        after < Duration::from_secs(3),
        "warned {after:?} after the first failure (about a second expected): {}",
        warned.1
    );
    assert!(warned.1.contains(&addr), "names the address: {}", warned.1);
    assert!(c.close(Duration::from_secs(5)));
}
