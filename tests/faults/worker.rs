//! The Rust worker of the fault harness (`tests/faults/README.md` is its
//! protocol): contends for one lock through its own fault proxy, increments a
//! fenced counter while it believes it holds the lock, and prints every event
//! with CLOCK_MONOTONIC nanoseconds for the checker.
//!
//!     faults-worker NAME KEY COUNTER TTL_MS LOCK_DELAY_MS [MODE]
//!
//! `MODE` picks what it contends for instead of the lock on `KEY`:
//! * a number `LIMIT`: a slot of the semaphore on the prefix `KEY`;
//! * `read` / `write`: the reader / writer side of the read-write lock on the
//!   prefix `KEY` (a writer increments `COUNTER`, fenced by its sequencer);
//! * `multi=K2,K3,...`: the multi-key lock over `KEY`, `K2`, `K3`, ...,
//!   incrementing `COUNTER` fenced by `KEY`'s sequencer (so it shares `KEY` and
//!   `COUNTER` with the plain lock's workers).

#![allow(unsafe_code)] // clock_gettime, to share CLOCK_MONOTONIC with the other processes

use std::io::BufRead;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use baton::{
    Client, ErrorKind, KvOp, Lock, LockOptions, MultiLock, MultiLockOptions, RwLock, RwMode,
    Semaphore, SemaphoreOptions, Sequencer, Session, SessionOptions,
};

const HOLD: Duration = Duration::from_millis(200);
const WORK: Duration = Duration::from_millis(20);
/// How often a semaphore holder looks whether it still holds its slot.
const SLOT_CHECK: Duration = Duration::from_millis(10);
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

/// What a worker contends for.
enum Mode {
    /// The lock on `KEY`.
    Lock,
    /// A slot of the semaphore on `KEY` with this limit.
    Slot(u64),
    /// One side of the read-write lock on `KEY`.
    Rw(RwMode),
    /// The multi-key lock over `KEY` and these keys.
    Multi(Vec<String>),
}

struct Args {
    name: String,
    key: String,
    counter: String,
    ttl: Duration,
    lock_delay: Duration,
    mode: Mode,
}

fn parse_mode(m: &str) -> Result<Mode, String> {
    match m {
        "read" => Ok(Mode::Rw(RwMode::Read)),
        "write" => Ok(Mode::Rw(RwMode::Write)),
        _ => {
            if let Some(keys) = m.strip_prefix("multi=") {
                let keys: Vec<String> = keys.split(',').map(str::to_string).collect();
                if keys.iter().any(String::is_empty) {
                    return Err(format!("MODE {m:?}: an empty key"));
                }
                return Ok(Mode::Multi(keys));
            }
            m.parse().map(Mode::Slot).map_err(|e| {
                format!("MODE {m:?}: neither read, write, multi=K2,... nor a limit ({e})")
            })
        }
    }
}

fn parse_args() -> Result<Args, String> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() != 5 && a.len() != 6 {
        return Err(
            "usage: faults-worker NAME KEY COUNTER TTL_MS LOCK_DELAY_MS [LIMIT|read|write|multi=K2,...]"
                .into(),
        );
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
        mode: match a.get(5) {
            Some(m) => parse_mode(m)?,
            None => Mode::Lock,
        },
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
    // A read-write lock holds with the client's default session: give it the
    // worker's session options (the other modes pass a session of their own).
    let client = match baton::ClientBuilder::from_env()
        .request_timeout(REQUEST_TIMEOUT)
        .default_session(session_options(&args))
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

fn session_options(args: &Args) -> SessionOptions {
    SessionOptions::new()
        .name(format!("faults-{}", args.name))
        .ttl(args.ttl)
        .lock_delay(args.lock_delay)
}

/// What a worker holds, with the sequencer its increments are fenced by.
enum Held {
    Lock(Lock, Sequencer),
    Slot(Semaphore),
    Rw(RwLock, Sequencer),
    /// The sequencer of `KEY`, from `sequencers()`.
    Multi(MultiLock, Sequencer),
}

impl Held {
    fn is_held(&self) -> bool {
        match self {
            Held::Lock(l, _) => l.is_held(),
            Held::Slot(s) => s.is_held(),
            Held::Rw(l, _) => l.is_held(),
            Held::Multi(l, _) => l.is_held(),
        }
    }

    fn release(&self) -> baton::Result<bool> {
        match self {
            Held::Lock(l, _) => l.release(),
            Held::Slot(s) => s.release(),
            Held::Rw(l, _) => l.release(),
            Held::Multi(l, _) => l.release(),
        }
    }

    /// The sequencer that fences this holding's increments: `None` for those
    /// that do not increment (a semaphore slot, a reader).
    fn fence(&self) -> Option<&Sequencer> {
        match self {
            Held::Lock(_, seq) | Held::Multi(_, seq) => Some(seq),
            Held::Rw(l, seq) if l.mode() == RwMode::Write => Some(seq),
            Held::Rw(..) | Held::Slot(_) => None,
        }
    }
}

fn run(client: &Client, args: &Args, stop: &AtomicBool) {
    let lost_at = Arc::new(LostAt {
        generation: AtomicU64::new(0),
        at: AtomicI64::new(0),
    });
    let mut session: Option<Session> = None;
    let mut generation = 0u64;
    while !stop.load(Ordering::SeqCst) {
        // 1. A valid session (a read-write lock's is the client's default
        // session, replaced by the client once lost).
        if !session.as_ref().is_some_and(Session::is_valid) {
            session = None;
            let made = match args.mode {
                Mode::Rw(_) => client.default_session(),
                _ => client.create_session(&session_options(args)),
            };
            match made {
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
        // 2. Acquire; the callback is registered first and knows its holding.
        let mine = generation + 1;
        lost_at.generation.store(mine, Ordering::SeqCst);
        lost_at.at.store(0, Ordering::SeqCst);
        let on_lost = {
            let lost_at = lost_at.clone();
            move || {
                if lost_at.generation.load(Ordering::SeqCst) == mine {
                    let _ = lost_at.at.compare_exchange(
                        0,
                        mono_ns(),
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                    );
                }
            }
        };
        let held = match acquire(client, args, &s, on_lost) {
            Ok(Some(h)) => h,
            Ok(None) => continue,
            Err(e) => {
                emit("error", &format!(" what=acquire: {}", one_line(&e)));
                thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        generation = mine;
        let token = match &held {
            Held::Lock(_, seq) | Held::Rw(_, seq) | Held::Multi(_, seq) => {
                if seq.session != s.id() {
                    // A read-write lock's default session was replaced meanwhile.
                    emit("session", &format!(" id={}", seq.session));
                }
                emit(
                    "start",
                    &format!(
                        " token={} lock_index={} session={}",
                        seq.token, seq.lock_index, seq.session
                    ),
                );
                seq.token
            }
            Held::Slot(_) => {
                emit("start", &format!(" token={mine} session={}", s.id()));
                mine
            }
        };
        // The session whose deadline the holding watches: the holding's own.
        let s = match &held {
            Held::Rw(l, _) => l.session().unwrap_or(s),
            _ => s,
        };
        hold(client, args, &held, token, &s, &lost_at, stop);
        lost_at.generation.store(0, Ordering::SeqCst);
        let pause = (mono_ns() as u64 / 7) % 30;
        thread::sleep(Duration::from_millis(pause));
    }
}

/// Acquires the lock (or a slot, a side of the read-write lock, the keys of the
/// multi-key lock) with a 1 s timeout: `None` when it timed out, or when the
/// holding was lost before it could be looked at.
fn acquire(
    client: &Client,
    args: &Args,
    session: &Session,
    on_lost: impl Fn() + Send + Sync + 'static,
) -> baton::Result<Option<Held>> {
    let value = args.name.as_bytes().to_vec();
    let held = match &args.mode {
        Mode::Lock => {
            let lock = client.lock_with(
                &args.key,
                LockOptions::new().value(value).session(session.clone()),
            )?;
            lock.on_lost(move |_| on_lost());
            if !lock.acquire(Some(ACQUIRE_TIMEOUT), None)? {
                return Ok(None);
            }
            let Some(seq) = lock.sequencer() else {
                emit("error", " what=acquired but no sequencer (lost at once)");
                return Ok(None);
            };
            Held::Lock(lock, seq)
        }
        Mode::Slot(limit) => {
            let sem = client.semaphore_with(
                &args.key,
                *limit,
                SemaphoreOptions::new()
                    .value(value)
                    .session(session.clone()),
            )?;
            sem.on_lost(move |_| on_lost());
            if !sem.acquire(Some(ACQUIRE_TIMEOUT), None)? {
                return Ok(None);
            }
            Held::Slot(sem)
        }
        Mode::Rw(mode) => {
            // Contender keys are the lock's own: its value is the mode.
            let rw = client.rw_lock(&args.key, *mode)?;
            rw.on_lost(move |_| on_lost());
            if !rw.acquire(Some(ACQUIRE_TIMEOUT), None)? {
                return Ok(None);
            }
            let Some(seq) = rw.sequencer() else {
                emit("error", " what=acquired but no sequencer (lost at once)");
                return Ok(None);
            };
            Held::Rw(rw, seq)
        }
        Mode::Multi(more) => {
            let mut keys: Vec<&str> = vec![args.key.as_str()];
            keys.extend(more.iter().map(String::as_str));
            let multi = client.multi_lock_with(
                &keys,
                MultiLockOptions::new()
                    .value(value)
                    .session(session.clone()),
            )?;
            multi.on_lost(move |_| on_lost());
            if !multi.acquire(Some(ACQUIRE_TIMEOUT), None)? {
                return Ok(None);
            }
            // One sequencer per key: the counter is fenced by KEY's, the key
            // the plain lock's workers contend for.
            let Some(seq) = multi.sequencers().into_iter().find(|q| q.key == args.key) else {
                emit("error", " what=acquired but no sequencer (lost at once)");
                return Ok(None);
            };
            Held::Multi(multi, seq)
        }
    };
    Ok(Some(held))
}

/// Steps 3 and 4: increments while the lock is held (a slot or a reader's
/// holding is only watched), then ends the holding with exactly one `@end`.
fn hold(
    client: &Client,
    args: &Args,
    held: &Held,
    token: u64,
    session: &Session,
    lost_at: &LostAt,
    stop: &AtomicBool,
) {
    let started = Instant::now();
    let mut deadline: i64 = 0;
    loop {
        if !held.is_held() || lost_at.at.load(Ordering::SeqCst) != 0 {
            let seen = mono_ns();
            let cb = lost_at.at.load(Ordering::SeqCst);
            let t = if cb != 0 { cb.min(seen) } else { seen };
            // The lease's last deadline, which a loss leaves as it was: the loop samples only
            // between increments, and one blocked across a renew (a partition's timed-out
            // request) would leave `deadline` a renew behind the real one.
            emit_end(t, token, "lost", deadline.max(deadline_ns(session)));
            return;
        }
        if started.elapsed() >= HOLD || stop.load(Ordering::SeqCst) {
            emit_end(mono_ns(), token, "released", deadline);
            if let Err(e) = held.release() {
                emit("error", &format!(" what=release: {}", one_line(&e)));
            }
            return;
        }
        deadline = deadline.max(deadline_ns(session));
        match held.fence() {
            None => thread::sleep(SLOT_CHECK),
            Some(seq) => increment(client, args, seq),
        }
    }
}

/// Read, "work", then a fenced write of the next value, not checking again.
fn increment(client: &Client, args: &Args, seq: &Sequencer) {
    let current = match client.kv().get(&args.counter) {
        Ok(Some(p)) => {
            let text = String::from_utf8_lossy(p.value.as_deref().unwrap_or_default());
            match text.trim().parse::<u64>() {
                Ok(n) => n,
                Err(_) => {
                    emit("error", &format!(" what=counter holds {text:?}"));
                    thread::sleep(WORK);
                    return;
                }
            }
        }
        Ok(None) => 0,
        Err(e) => {
            emit("error", &format!(" what=read: {}", one_line(&e)));
            thread::sleep(WORK);
            return;
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

/// The session's local lease deadline on the `mono_ns` clock (0 without one); it stays at the
/// last renew's once the session is lost.
fn deadline_ns(session: &Session) -> i64 {
    let Some(until) = session.valid_until() else {
        return 0;
    };
    let (now, at) = (Instant::now(), mono_ns());
    if until >= now {
        at + (until - now).as_nanos() as i64
    } else {
        at - (now - until).as_nanos() as i64
    }
}

fn emit_end(t: i64, token: u64, why: &str, deadline: i64) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "@end t={t} token={token} why={why} deadline={deadline}"
    );
    let _ = out.flush();
}
