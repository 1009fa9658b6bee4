//! The Rust contender of the cross-language test (`tests/cross/run.py`):
//!
//! `cross_worker NAME LOCK_KEY SEM_PREFIX ROUNDS` holds the lock `ROUNDS` times and a
//! 2-slot semaphore `ROUNDS / 2` times, printing each holding as
//! `@hold kind=lock start=<µs> end=<µs> token=<N>` (microseconds of `CLOCK_MONOTONIC`, the
//! one clock every process of the machine shares whatever NTP does to the wall clock), and after
//! each lock round the leader it reads through the election API
//! (`@saw value=<name:pid> token=<N>`). Needs `CONSUL_HTTP_ADDR`.

use std::time::Duration;

use baton::{Client, LockOptions, SemaphoreOptions};

fn now_us() -> u128 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u128 * 1_000_000 + t.tv_nsec as u128 / 1_000
}

fn main() -> Result<(), baton::Error> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 || std::env::var_os("CONSUL_HTTP_ADDR").is_none() {
        eprintln!("usage: CONSUL_HTTP_ADDR=... cross_worker NAME LOCK_KEY SEM_PREFIX ROUNDS");
        std::process::exit(2);
    }
    let (name, key, prefix) = (&args[1], &args[2], &args[3]);
    let rounds: usize = args[4].parse().expect("ROUNDS is a number");
    let value = format!("{name}:{}", std::process::id());
    let client = Client::from_env()?;
    let lock = client.lock_with(key, LockOptions::new().value(value.as_bytes()))?;
    for _ in 0..rounds {
        assert!(
            lock.acquire(Some(Duration::from_secs(60)), None)?,
            "acquired in 60 s"
        );
        let start = now_us();
        let token = lock.sequencer().map_or(0, |s| s.token);
        std::thread::sleep(Duration::from_millis(1));
        let end = now_us();
        lock.release()?;
        println!("@hold kind=lock start={start} end={end} token={token}");
        if let Some(l) = client.leader(key)? {
            println!(
                "@saw value={} token={}",
                String::from_utf8_lossy(&l.value),
                l.token
            );
        }
    }
    let sem = client.semaphore_with(prefix, 2, SemaphoreOptions::new().value(value.as_bytes()))?;
    for _ in 0..rounds / 2 {
        assert!(
            sem.acquire(Some(Duration::from_secs(60)), None)?,
            "a slot in 60 s"
        );
        let start = now_us();
        std::thread::sleep(Duration::from_millis(2));
        let end = now_us();
        sem.release()?;
        println!("@hold kind=sem start={start} end={end}");
    }
    if !client.close(Duration::from_secs(5)) {
        eprintln!("cross_worker: the client did not close within 5 s");
    }
    println!("@done t={}", now_us() / 1000);
    Ok(())
}
