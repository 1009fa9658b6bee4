//! The contender of `make bench-loss`: another process that wants the holders' keys.
//!
//! `bench-loss-contender ADDR HOLD_MS KEY...`
//!
//! Connects straight to the server at ADDR (no proxy: the holders' faults do not hit it) and,
//! for each KEY on a thread of its own, forever: acquires the lock (waiting as long as it
//! takes), prints `ACQ <key> <CLOCK_MONOTONIC ns>` the moment it holds it, holds it HOLD_MS,
//! releases it, then waits until another session holds the key again before contending anew
//! (so the holder can take it back between episodes). Prints `READY` once its session exists.
//! The driver kills it when done.

#![allow(unsafe_code)] // clock_gettime, to share CLOCK_MONOTONIC with the other processes

use std::io::Write;
use std::thread;
use std::time::Duration;

use baton::{Client, LockOptions, SessionOptions};

/// CLOCK_MONOTONIC now, in nanoseconds.
fn mono_now_ns() -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
    i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
}

fn die(msg: &str) -> ! {
    eprintln!("bench-loss-contender: {msg}");
    std::process::exit(2);
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        die("usage: bench-loss-contender ADDR HOLD_MS KEY...");
    }
    let hold = Duration::from_millis(
        args[2]
            .parse()
            .unwrap_or_else(|_| die("HOLD_MS must be a number")),
    );
    let client = Client::builder()
        .address(args[1].as_str())
        .build()
        .unwrap_or_else(|e| die(&format!("client: {e}")));
    // A long TTL: a server pause of a few seconds must not cost the contender its session.
    let session = client
        .create_session(
            &SessionOptions::new()
                .name("bench-loss-contender")
                .ttl(Duration::from_secs(30))
                .lock_delay(Duration::ZERO),
        )
        .unwrap_or_else(|e| die(&format!("session: {e}")));
    let mut threads = Vec::new();
    for key in &args[3..] {
        let (client, session, key) = (client.clone(), session.clone(), key.clone());
        threads.push(thread::spawn(move || {
            contend(&client, &session, &key, hold)
        }));
    }
    say("READY");
    for t in threads {
        let _ = t.join();
    }
}

fn contend(client: &Client, session: &baton::Session, key: &str, hold: Duration) {
    let lock = client
        .lock_with(key, LockOptions::new().session(session.clone()))
        .unwrap_or_else(|e| die(&format!("lock {key}: {e}")));
    loop {
        match lock.acquire(None, None) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                eprintln!("bench-loss-contender: acquire {key}: {e} (retrying)");
                thread::sleep(Duration::from_millis(100));
                continue;
            }
        }
        say(&format!("ACQ {key} {}", mono_now_ns()));
        thread::sleep(hold);
        if let Err(e) = lock.release() {
            eprintln!("bench-loss-contender: release {key}: {e}");
        }
        // Let the holder take it back before contending again.
        loop {
            match client.kv().get(key) {
                Ok(Some(p)) if p.session.as_deref().is_some_and(|s| s != session.id()) => break,
                Ok(_) => thread::sleep(Duration::from_millis(10)),
                Err(e) => {
                    eprintln!("bench-loss-contender: get {key}: {e} (retrying)");
                    thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }
}
