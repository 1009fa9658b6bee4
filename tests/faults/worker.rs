//! The Rust worker of the fault harness (`tests/faults/README.md` is its
//! protocol): contends for one lock through its own fault proxy, increments a
//! fenced counter while it believes it holds the lock, and prints every event
//! with CLOCK_MONOTONIC nanoseconds for the checker.
//!
//!     faults-worker NAME KEY COUNTER TTL_MS LOCK_DELAY_MS

#![allow(unsafe_code)] // clock_gettime, to share CLOCK_MONOTONIC with the other processes

use std::io::BufRead;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use baton::{Client, ErrorKind, KvOp, Lock, LockOptions, Session, SessionOptions};

const HOLD: Duration = Duration::from_millis(200);
const WORK: Duration = Duration::from_millis(20);
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(1);
const REQUEST_TIMEOUT: Duration = Duration::from_millis(2000);

/// CLOCK_MONOTONIC now, in nanoseconds (the clock `Instant` reads on Linux).
fn mono_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

fn emit(event: &str, fields: &str) {
    // println! locks stdout and flushes on the newline only for a terminal.
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "@{event} t={}{fields}", mono_ns());
    let _ = out.flush();
}

fn one_line(e: &baton::Error) -> String {
    e.to_string().replace(['\n', '\r'], " ")
}

/// The loss callback's time for the current holding (0: not yet).
struct LostAt {
    generation: AtomicU64,
    at: AtomicI64,
}

struct Args {
    name: String,
    key: String,
    counter: String,
    ttl: Duration,
    lock_delay: Duration,
}

fn parse_args() -> Result<Args, String> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() != 5 {
        return Err("usage: faults-worker NAME KEY COUNTER TTL_MS LOCK_DELAY_MS".into());
    }
    let ms = |s: &str, what: &str| {
        s.parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|e| format!("{what} {s:?}: {e}"))
    };
    Ok(Args {
        name: a[0].clone(),
        key: a[1].clone(),
        counter: a[2].clone(),
        ttl: ms(&a[3], "TTL_MS")?,
        lock_delay: ms(&a[4], "LOCK_DELAY_MS")?,
    })
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        // Not joined: it may sit in a read of stdin until the process exits.
        thread::Builder::new()
            .name("faults-stdin".into())
            .spawn(move || {
                for line in std::io::stdin().lock().lines() {
                    match line {
                        Ok(l) if l.trim() == "quit" => break,
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
                stop.store(true, Ordering::SeqCst);
            })
            .expect("stdin thread");
    }
    let client = match baton::ClientBuilder::from_env()
        .request_timeout(REQUEST_TIMEOUT)
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("faults-worker: {e}");
            std::process::exit(1);
        }
    };
    run(&client, &args, &stop);
    client.close(Duration::from_secs(5));
    emit("bye", "");
}

fn run(client: &Client, args: &Args, stop: &AtomicBool) {
    let lost_at = Arc::new(LostAt {
        generation: AtomicU64::new(0),
        at: AtomicI64::new(0),
    });
    let mut session: Option<Session> = None;
    let mut generation = 0u64;
    while !stop.load(Ordering::SeqCst) {
        // 1. A valid session.
        if !session.as_ref().is_some_and(Session::is_valid) {
            if let Some(old) = session.take() {
                let _ = old.destroy();
            }
            let options = SessionOptions::new()
                .name(format!("faults-{}", args.name))
                .ttl(args.ttl)
                .lock_delay(args.lock_delay);
            match client.create_session(&options) {
                Ok(s) => {
                    emit("session", &format!(" id={}", s.id()));
                    session = Some(s);
                }
                Err(e) => {
                    emit("error", &format!(" what=session: {}", one_line(&e)));
                    thread::sleep(Duration::from_millis(100));
                    continue;
                }
            }
        }
        let s = session.clone().expect("a session");
        // 2. Acquire.
        let lock = match client.lock_with(
            &args.key,
            LockOptions::new()
                .value(args.name.as_bytes().to_vec())
                .session(s.clone()),
        ) {
            Ok(l) => l,
            Err(e) => {
                emit("error", &format!(" what=lock: {}", one_line(&e)));
                thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        match lock.acquire(Some(ACQUIRE_TIMEOUT), None) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                emit("error", &format!(" what=acquire: {}", one_line(&e)));
                thread::sleep(Duration::from_millis(50));
                continue;
            }
        }
        generation += 1;
        lost_at.generation.store(generation, Ordering::SeqCst);
        lost_at.at.store(0, Ordering::SeqCst);
        {
            let lost_at = lost_at.clone();
            let mine = generation;
            lock.on_lost(move |_| {
                if lost_at.generation.load(Ordering::SeqCst) == mine {
                    let _ = lost_at.at.compare_exchange(
                        0,
                        mono_ns(),
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                    );
                }
            });
        }
        let Some(seq) = lock.sequencer() else {
            // Lost between the acquire and here: the callback has the time.
            emit("error", " what=acquired but no sequencer");
            continue;
        };
        emit(
            "start",
            &format!(
                " token={} lock_index={} session={}",
                seq.token,
                seq.lock_index,
                s.id()
            ),
        );
        hold(client, args, &lock, &s, &seq, &lost_at, stop);
        lost_at.generation.store(0, Ordering::SeqCst);
        let pause = (mono_ns() as u64 / 7) % 30;
        thread::sleep(Duration::from_millis(pause));
    }
    if let Some(s) = session {
        let _ = s.destroy();
    }
}

/// 3. and 4.: increments while held, then ends the holding with one `@end`.
fn hold(
    client: &Client,
    args: &Args,
    lock: &Lock,
    session: &Session,
    seq: &baton::Sequencer,
    lost_at: &LostAt,
    stop: &AtomicBool,
) {
    let started = Instant::now();
    let mut deadline: i64 = 0;
    loop {
        let lost_cb = lost_at.at.load(Ordering::SeqCst);
        if !lock.is_held() || lost_cb != 0 {
            let seen = mono_ns();
            let cb = lost_at.at.load(Ordering::SeqCst);
            let t = if cb != 0 { cb.min(seen) } else { seen };
            println_end(t, seq.token, "lost", deadline);
            return;
        }
        if started.elapsed() >= HOLD || stop.load(Ordering::SeqCst) {
            let t = mono_ns();
            println_end(t, seq.token, "released", deadline);
            if let Err(e) = lock.release() {
                emit("error", &format!(" what=release: {}", one_line(&e)));
            }
            return;
        }
        if let Some(until) = session.valid_until() {
            let left = until.saturating_duration_since(Instant::now());
            deadline = deadline.max(mono_ns() + left.as_nanos() as i64);
        }
        let current = match client.kv().get(&args.counter) {
            Ok(Some(p)) => {
                let text = String::from_utf8_lossy(p.value.as_deref().unwrap_or_default());
                match text.trim().parse::<u64>() {
                    Ok(n) => n,
                    Err(_) => {
                        emit("error", &format!(" what=counter holds {text:?}"));
                        return_end_on_error(lock, seq, deadline);
                        return;
                    }
                }
            }
            Ok(None) => 0,
            Err(e) => {
                emit("error", &format!(" what=read: {}", one_line(&e)));
                continue;
            }
        };
        thread::sleep(WORK);
        let next = current + 1;
        let op = KvOp::set(&args.counter, next.to_string().as_bytes(), 0);
        match client.guarded_txn(seq, &[op]) {
            Ok(_) => emit("inc", &format!(" value={next} token={}", seq.token)),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::Conflict | ErrorKind::SessionInvalidated
                ) =>
            {
                emit("fenced", &format!(" value={next} token={}", seq.token))
            }
            Err(e) => emit(
                "incunk",
                &format!(" value={next} token={} err={}", seq.token, e.kind().code()),
            ),
        }
    }
}

/// A counter we cannot parse: release and stop counting (the checker reports it).
fn return_end_on_error(lock: &Lock, seq: &baton::Sequencer, deadline: i64) {
    println_end(mono_ns(), seq.token, "released", deadline);
    let _ = lock.release();
}

fn println_end(t: i64, token: u64, why: &str, deadline: i64) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "@end t={t} token={token} why={why} deadline={deadline}"
    );
    let _ = out.flush();
}
