//! The Rust holder of `make bench-loss` (bench/loss/run.py drives it; the C, Python and Node
//! holders beside this file speak the same protocol).
//!
//! `bench-loss-holder ADDR KEY TTL_MS LOCK_DELAY_MS SIGNAL_TIMEOUT_MS`
//!
//! Prints `READY` once connected to ADDR (its own fault proxy). Then, for each `acquire` line
//! on stdin: creates a session (TTL_MS, LOCK_DELAY_MS), acquires KEY with it, starts watching
//! the four loss signals and prints `HELD`; the driver then cuts it off. Once the holding is
//! lost it prints `RESULT {json}` with CLOCK_MONOTONIC nanoseconds of the acquire, the local
//! lease deadline and each signal (null: missing SIGNAL_TIMEOUT_MS after the deadline):
//!
//! * `is_held` — the first `Lock::is_held()` false, polled every ~1 ms;
//! * `callback` — the `Lock::on_lost` callback;
//! * `wait_lost` — `Lock::wait_lost` returning in a thread blocked in it;
//! * `token` — the holding's `Lock::cancel_token()` firing, watched by a thread.
//!
//! The deadline is `Session::valid_until()` read after the loss (final by then). `quit` or
//! the end of stdin closes the client and exits 0; any failure exits non-zero.

#![allow(unsafe_code)] // clock_gettime, to share CLOCK_MONOTONIC with the other processes

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use baton::{CancelToken, Client, LockOptions, SessionOptions};

/// CLOCK_MONOTONIC now, in nanoseconds (the clock `Instant` reads on Linux).
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

/// Converts `Instant`s to CLOCK_MONOTONIC nanoseconds through one reference pair.
struct Clock {
    base: Instant,
    base_ns: i128,
}

impl Clock {
    fn new() -> Clock {
        let base = Instant::now();
        let base_ns = mono_now_ns();
        Clock { base, base_ns }
    }

    fn ns(&self, t: Instant) -> i128 {
        match t.checked_duration_since(self.base) {
            Some(d) => self.base_ns + d.as_nanos() as i128,
            None => self.base_ns - self.base.duration_since(t).as_nanos() as i128,
        }
    }
}

fn ms_arg(args: &[String], i: usize, name: &str) -> Duration {
    let v = args
        .get(i)
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| die(&format!("{name} (milliseconds) is missing or not a number")));
    Duration::from_millis(v)
}

fn die(msg: &str) -> ! {
    eprintln!("bench-loss-holder: {msg}");
    std::process::exit(2);
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn json_opt(v: Option<i128>) -> String {
    v.map_or_else(|| "null".to_string(), |n| n.to_string())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 6 {
        die("usage: bench-loss-holder ADDR KEY TTL_MS LOCK_DELAY_MS SIGNAL_TIMEOUT_MS");
    }
    let (addr, key) = (&args[1], &args[2]);
    let ttl = ms_arg(&args, 3, "TTL_MS");
    let lock_delay = ms_arg(&args, 4, "LOCK_DELAY_MS");
    let signal_timeout = ms_arg(&args, 5, "SIGNAL_TIMEOUT_MS");
    let clock = Clock::new();
    let client = Client::builder()
        .address(addr.as_str())
        .build()
        .unwrap_or_else(|e| die(&format!("client: {e}")));
    say("READY");
    let stdin = std::io::stdin();
    let mut episode = 0u32;
    for line in stdin.lock().lines() {
        let line = line.unwrap_or_else(|e| die(&format!("stdin: {e}")));
        match line.trim() {
            "acquire" => {}
            "quit" => break,
            other => die(&format!("unknown command {other:?}")),
        }
        episode += 1;
        let result = run_episode(
            &client,
            &clock,
            key,
            ttl,
            lock_delay,
            signal_timeout,
            episode,
        );
        say(&format!("RESULT {result}"));
    }
    client.close(Duration::from_secs(5));
}

fn run_episode(
    client: &Client,
    clock: &Clock,
    key: &str,
    ttl: Duration,
    lock_delay: Duration,
    signal_timeout: Duration,
    episode: u32,
) -> String {
    let session = client
        .create_session(
            &SessionOptions::new()
                .name("bench-loss-rust")
                .ttl(ttl)
                .lock_delay(lock_delay),
        )
        .unwrap_or_else(|e| die(&format!("session: {e}")));
    let lock = Arc::new(
        client
            .lock_with(key, LockOptions::new().session(session.clone()))
            .unwrap_or_else(|e| die(&format!("lock: {e}"))),
    );
    let (tx, rx) = mpsc::channel::<(&'static str, Instant, String)>();
    {
        let tx = tx.clone();
        lock.on_lost(move |why| {
            let _ = tx.send(("callback", Instant::now(), why.name().to_string()));
        });
    }
    match lock.acquire(Some(Duration::from_secs(60)), None) {
        Ok(true) => {}
        Ok(false) => die("not acquired within 60 s"),
        Err(e) => die(&format!("acquire: {e}")),
    }
    let acquired = Instant::now();
    let stop = CancelToken::new();
    let done = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    {
        let (lock, tx, stop) = (lock.clone(), tx.clone(), stop.clone());
        threads.push(thread::spawn(move || {
            if let Ok(why) = lock.wait_lost(None, Some(&stop)) {
                let _ = tx.send(("wait_lost", Instant::now(), why.name().to_string()));
            }
        }));
    }
    {
        let (token, tx, done) = (lock.cancel_token(), tx.clone(), done.clone());
        threads.push(thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                if token.wait_timeout(Duration::from_millis(20)) {
                    let _ = tx.send(("token", Instant::now(), String::new()));
                    return;
                }
            }
        }));
    }
    {
        let (lock, tx, done) = (lock.clone(), tx.clone(), done.clone());
        threads.push(thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                if !lock.is_held() {
                    let _ = tx.send(("is_held", Instant::now(), String::new()));
                    return;
                }
                thread::sleep(Duration::from_millis(1));
            }
        }));
    }
    drop(tx);
    say("HELD");

    // Until the first signal the driver bounds the wait; after it, every other signal has
    // SIGNAL_TIMEOUT_MS past the deadline.
    let mut got: Vec<(&'static str, Instant, String)> = Vec::new();
    let mut bound: Option<Instant> = None;
    while got.len() < 4 {
        let next = match bound {
            None => rx.recv().map_err(|_| ()),
            Some(b) => rx
                .recv_timeout(b.saturating_duration_since(Instant::now()))
                .map_err(|_| ()),
        };
        match next {
            Ok(s) => {
                if bound.is_none() {
                    let deadline = session.valid_until().unwrap_or(s.1);
                    bound = Some(deadline.max(s.1) + signal_timeout);
                }
                got.push(s);
            }
            Err(()) => break,
        }
    }
    done.store(true, Ordering::SeqCst);
    stop.cancel();
    for t in threads {
        let _ = t.join();
    }
    let deadline = session.valid_until().map(|d| clock.ns(d));
    let at = |name: &str| got.iter().find(|s| s.0 == name).map(|s| clock.ns(s.1));
    let why = |name: &str| {
        got.iter()
            .find(|s| s.0 == name)
            .map_or_else(String::new, |s| s.2.clone())
    };
    drop(lock);
    format!(
        "{{\"lang\":\"rust\",\"episode\":{episode},\"acquired\":{},\"deadline\":{},\
         \"is_held\":{},\"callback\":{},\"wait_lost\":{},\"token\":{},\
         \"callback_reason\":\"{}\",\"wait_lost_reason\":\"{}\",\"session_state\":\"{:?}\"}}",
        clock.ns(acquired),
        json_opt(deadline),
        json_opt(at("is_held")),
        json_opt(at("callback")),
        json_opt(at("wait_lost")),
        json_opt(at("token")),
        why("callback"),
        why("wait_lost"),
        session.state(),
    )
}
