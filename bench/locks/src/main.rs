//! Bench: baton locks against a dev server running in its own process (so the
//! threads and memory printed are the client's alone).
//!
//! Prints:
//! * HTTP requests per uncontended (warm) acquire+release, counted by the server;
//! * acquire+release cycles per second on one key, one thread;
//! * the same for a semaphore (limit 2) beside a lock, in alternating rounds: requests per
//!   warm cycle and `ratio semaphore/lock` of cycles/s (the median over the rounds); and for
//!   a multi-key lock over 4 keys (`ratio multi-key lock (4 keys)/lock`) and a read-write
//!   lock's reader side alone (`ratio read-write lock (reader)/lock`);
//! * a read-write lock under contention: 8 reader threads and 1 writer thread, each with a
//!   client of its own, acquiring and releasing for a while: operations (acquire+release) per
//!   second, each side's, and requests per operation counted by the server;
//! * graceful handoff latency (holder releases → waiter holds), p50/p99;
//! * crash failover (holder's session destroyed → waiter holds) minus the lock-delay;
//! * OS threads and RSS growth of this process with 1,000 and 10,000 held locks.
//!
//! Usage: `make bench-locks`, or build `baton-devserver` and run
//! `bench-locks [--devserver PATH] [--held 1000,10000] [--cycles N] [--handoffs N] [--failovers N]
//! [--rw-secs S]`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton::{Client, LockOptions, SessionOptions};
use bench_common::{arg, counts, num, reset_counts, rss_kib, start_devserver as start_server};

fn threads() -> (usize, usize) {
    let mut all = 0;
    let mut baton = 0;
    if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
        for e in dir.flatten() {
            all += 1;
            let name = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            if name.trim().starts_with("baton-") {
                baton += 1;
            }
        }
    }
    (all, baton)
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn client(addr: &str, lock_delay: Duration) -> Client {
    Client::builder()
        .address(addr)
        .default_session(SessionOptions::default_for_client().lock_delay(lock_delay))
        .build()
        .expect("client")
}

fn requests_per_cycle(addr: &str, on: &str) {
    let c = client(addr, Duration::from_secs(15));
    let lock = c.lock("bench/cost").unwrap();
    // Cold acquire (reads the key first) and a release that makes the next one warm.
    assert!(lock.acquire(Some(Duration::from_secs(10)), None).unwrap());
    lock.release().unwrap();
    let n = 100;
    reset_counts(addr);
    for _ in 0..n {
        assert!(lock.acquire(Some(Duration::from_secs(10)), None).unwrap());
        lock.release().unwrap();
    }
    let v = counts(addr);
    let total = v["total"].as_u64().unwrap_or(0);
    let txn = v["by_route"]["PUT /v1/txn"].as_u64().unwrap_or(0);
    println!(
        "requests per warm acquire+release{on}: {:.2} (txn {:.2}, all routes over {n} cycles: {})",
        total as f64 / n as f64,
        txn as f64 / n as f64,
        v["by_route"]
    );
    // With a hold time, the key hub watches the held key: count that too.
    let n = 20;
    reset_counts(addr);
    for _ in 0..n {
        assert!(lock.acquire(Some(Duration::from_secs(10)), None).unwrap());
        std::thread::sleep(Duration::from_millis(20));
        lock.release().unwrap();
    }
    let v = counts(addr);
    let total = v["total"].as_u64().unwrap_or(0);
    println!(
        "  with a 20 ms hold (loss watch included): {:.2} requests per cycle ({})",
        total as f64 / n as f64,
        v["by_route"]
    );
    if on.is_empty() {
        println!("  (Go api.Lock: GET + PUT ?acquire per acquire, a monitor GET, PUT ?release per release, plus a session create/destroy per lock)");
    }
}

fn cycles_per_sec(addr: &str, cycles: usize) {
    let c = client(addr, Duration::from_secs(15));
    let lock = c.lock("bench/cycles").unwrap();
    assert!(lock.acquire(Some(Duration::from_secs(10)), None).unwrap());
    lock.release().unwrap();
    let t = Instant::now();
    for _ in 0..cycles {
        assert!(lock.acquire(Some(Duration::from_secs(10)), None).unwrap());
        lock.release().unwrap();
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "acquire+release cycles/s (one key, one thread): {:.0} ({cycles} cycles in {secs:.2} s)",
        cycles as f64 / secs
    );
}

/// Warm acquire+release cycles of `hold` (`acquire`, `release`) for `n` cycles: cycles/s.
fn rate(n: usize, mut cycle: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        cycle();
    }
    n as f64 / t.elapsed().as_secs_f64()
}

/// A semaphore's warm cycle beside a lock's (target: at least 0.80 of its cycles/s).
fn semaphore_vs_lock(addr: &str, cycles: usize, rounds: usize) {
    let c = client(addr, Duration::from_secs(15));
    let sem = c.semaphore("bench/sem-cycles", 2).unwrap();
    let t = Some(Duration::from_secs(10));
    let sem_cycle = || {
        assert!(sem.acquire(t, None).unwrap());
        assert!(sem.release().unwrap());
    };
    beside_lock(
        &c,
        addr,
        "semaphore",
        " (target >= 0.80)",
        sem_cycle,
        cycles,
        rounds,
    );
    c.close(Duration::from_secs(10));
}

/// A multi-key lock over 4 keys beside a lock: all four taken and given back in one
/// transaction each way.
fn multi_lock_vs_lock(addr: &str, cycles: usize, rounds: usize) {
    let c = client(addr, Duration::from_secs(15));
    let keys = [
        "bench/multi/a",
        "bench/multi/b",
        "bench/multi/c",
        "bench/multi/d",
    ];
    let multi = c.multi_lock(&keys).unwrap();
    let t = Some(Duration::from_secs(10));
    let multi_cycle = || {
        assert!(multi.acquire(t, None).unwrap());
        assert!(multi.release().unwrap());
    };
    beside_lock(
        &c,
        addr,
        "multi-key lock (4 keys)",
        "",
        multi_cycle,
        cycles,
        rounds,
    );
    c.close(Duration::from_secs(10));
}

/// A read-write lock's reader side alone beside a lock (a contender key created and deleted
/// per cycle).
fn rw_reader_vs_lock(addr: &str, cycles: usize, rounds: usize) {
    let c = client(addr, Duration::from_secs(15));
    let reader = c.read_lock("bench/rw-cycles").unwrap();
    let t = Some(Duration::from_secs(10));
    let reader_cycle = || {
        assert!(reader.acquire(t, None).unwrap());
        assert!(reader.release().unwrap());
    };
    beside_lock(
        &c,
        addr,
        "read-write lock (reader)",
        "",
        reader_cycle,
        cycles,
        rounds,
    );
    c.close(Duration::from_secs(10));
}

/// A read-write lock under contention: `readers` reader threads and one writer thread, each
/// with its own client (and session), acquiring and releasing as fast as they can for `secs`:
/// operations per second, each side's, and the requests per operation the server counted.
fn rw_contention(addr: &str, readers: usize, secs: f64) {
    let prefix = "bench/rw-contended";
    let t = Some(Duration::from_secs(30));
    let clients: Vec<Client> = (0..=readers)
        .map(|_| client(addr, Duration::from_secs(15)))
        .collect();
    // Warm: every client has its session before the count starts.
    for (i, c) in clients.iter().enumerate() {
        let side = if i == 0 {
            c.write_lock(prefix)
        } else {
            c.read_lock(prefix)
        }
        .unwrap();
        assert!(side.acquire(t, None).unwrap());
        assert!(side.release().unwrap());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let ops: Vec<Arc<AtomicU64>> = (0..=readers).map(|_| Arc::default()).collect();
    let barrier = Arc::new(std::sync::Barrier::new(readers + 2));
    let threads: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let side = if i == 0 {
                c.write_lock(prefix)
            } else {
                c.read_lock(prefix)
            }
            .unwrap();
            let (stop, ops, barrier) = (stop.clone(), ops[i].clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                while !stop.load(Ordering::Relaxed) {
                    assert!(side.acquire(t, None).unwrap());
                    assert!(side.release().unwrap());
                    ops.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    reset_counts(addr);
    barrier.wait();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    for th in threads {
        th.join().unwrap();
    }
    let took = start.elapsed().as_secs_f64();
    let v = counts(addr);
    let total = v["total"].as_u64().unwrap_or(0);
    let writes = ops[0].load(Ordering::Relaxed);
    let reads: u64 = ops[1..].iter().map(|o| o.load(Ordering::Relaxed)).sum();
    let all = reads + writes;
    println!(
        "read-write lock ({readers} readers, 1 writer, a client each) operations/s: {:.0} (readers {:.0}, writer {:.0}; {all} acquire+release in {took:.2} s)",
        all as f64 / took,
        reads as f64 / took,
        writes as f64 / took,
    );
    println!(
        "read-write lock ({readers} readers, 1 writer) requests per acquire+release: {:.2} (all routes over {all} operations: {})",
        total as f64 / all.max(1) as f64,
        v["by_route"]
    );
    for c in clients {
        c.close(Duration::from_secs(10));
    }
}

/// `what`'s warm `cycle` beside a lock's on client `c`: requests per cycle (the server's
/// count over 100 cycles), then cycles/s of each in alternating rounds and the median of
/// their ratio.
fn beside_lock(
    c: &baton::Client,
    addr: &str,
    what: &str,
    target: &str,
    cycle: impl Fn(),
    cycles: usize,
    rounds: usize,
) {
    let lock = c
        .lock(&format!("bench/vs-lock/{}", what.replace(' ', "-")))
        .unwrap();
    let t = Some(Duration::from_secs(10));
    let lock_cycle = || {
        assert!(lock.acquire(t, None).unwrap());
        assert!(lock.release().unwrap());
    };
    // Warm: each learns its keys (a semaphore `.lock`) from its releases.
    for _ in 0..3 {
        cycle();
        lock_cycle();
    }
    let n = 100;
    reset_counts(addr);
    for _ in 0..n {
        cycle();
    }
    let v = counts(addr);
    let total = v["total"].as_u64().unwrap_or(0);
    println!(
        "{what} requests per warm acquire+release: {:.2} (all routes over {n} cycles: {})",
        total as f64 / n as f64,
        v["by_route"]
    );
    let mut ratios = Vec::new();
    let (mut theirs, mut locks) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let l = rate(cycles, lock_cycle);
        let s = rate(cycles, &cycle);
        ratios.push(s / l);
        theirs.push(s);
        locks.push(l);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    println!(
        "{what} cycles/s {:.0}, lock cycles/s {:.0}, ratio {what}/lock {:.2} (median of {rounds} rounds of {cycles} cycles each{target})",
        median(&mut theirs),
        median(&mut locks),
        median(&mut ratios)
    );
}

fn handoff(addr: &str, rounds: usize) {
    let a = client(addr, Duration::from_secs(15));
    let b = client(addr, Duration::from_secs(15));
    let mut lat = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let (holder, waiter) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let hl = holder.lock("bench/handoff").unwrap();
        assert!(hl.acquire(Some(Duration::from_secs(10)), None).unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        let w = waiter.clone();
        let t = std::thread::spawn(move || {
            let wl = w.lock("bench/handoff").unwrap();
            tx.send(()).unwrap();
            assert!(wl.acquire(Some(Duration::from_secs(20)), None).unwrap());
            let at = Instant::now();
            wl.release().unwrap();
            at
        });
        rx.recv().unwrap();
        // Let the waiter park on the key (its first read sees the holder).
        std::thread::sleep(Duration::from_millis(20));
        let released = Instant::now();
        hl.release().unwrap();
        let acquired = t.join().unwrap();
        lat.push(acquired.saturating_duration_since(released));
    }
    lat.sort();
    println!(
        "graceful handoff latency over {rounds}: p50 {:?}, p99 {:?}, max {:?}",
        pct(&lat, 0.5),
        pct(&lat, 0.99),
        lat.last().copied().unwrap_or_default()
    );
}

fn failover(addr: &str, rounds: usize) {
    let delay = Duration::from_secs(1);
    let mut extra = Vec::with_capacity(rounds);
    let admin = client(addr, delay);
    for i in 0..rounds {
        let key = format!("bench/failover/{i}");
        let holder = client(addr, delay);
        let hl = holder.lock(&key).unwrap();
        assert!(hl.acquire(Some(Duration::from_secs(10)), None).unwrap());
        let sid = hl.sequencer().unwrap().session;
        let w = client(addr, delay);
        let (tx, rx) = std::sync::mpsc::channel();
        let k2 = key.clone();
        let t = std::thread::spawn(move || {
            let wl = w.lock(&k2).unwrap();
            tx.send(()).unwrap();
            assert!(wl.acquire(Some(Duration::from_secs(30)), None).unwrap());
            Instant::now()
        });
        rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let killed = Instant::now();
        admin.sessions().destroy(&sid).unwrap();
        let acquired = t.join().unwrap();
        extra.push(
            acquired
                .saturating_duration_since(killed)
                .saturating_sub(delay),
        );
        holder.close(Duration::from_secs(5));
    }
    extra.sort();
    println!(
        "crash failover minus lock-delay ({delay:?}) over {rounds}: p50 {:?}, max {:?}  (Go api.Lock: up to +5 s)",
        pct(&extra, 0.5),
        extra.last().copied().unwrap_or_default()
    );
}

fn held(addr: &str, n: usize) {
    let (t0, _) = threads();
    let rss0 = rss_kib();
    let c = client(addr, Duration::from_secs(15));
    let start = Instant::now();
    let locks: Vec<_> = (0..n)
        .map(|i| {
            let l = c
                .lock_with(&format!("bench/held{n}/{i}"), LockOptions::new())
                .unwrap();
            assert!(l.acquire(Some(Duration::from_secs(30)), None).unwrap());
            l
        })
        .collect();
    let took = start.elapsed();
    // Let the key hub settle on the whole set.
    std::thread::sleep(Duration::from_secs(1));
    let (t1, baton) = threads();
    let rss1 = rss_kib();
    assert!(locks.iter().all(|l| l.is_held()));
    println!(
        "{n:>6} held locks: os threads {t1} (+{}), baton threads {baton}, key-watch threads {}, rss +{} KiB ({:.0} B/lock), acquired in {:.2} s",
        t1 - t0,
        c.key_watch_threads(),
        rss1.saturating_sub(rss0),
        (rss1.saturating_sub(rss0) * 1024) as f64 / n as f64,
        took.as_secs_f64()
    );
    drop(locks);
    c.close(Duration::from_secs(10));
}

fn main() {
    let server = start_server(None);
    let addr = server.addr.clone();
    println!("bench-locks: dev server (own process) at {addr}");
    requests_per_cycle(&addr, "");
    // Before 1.6.2 a txn rounds the lock flag through a float64: locks write their key
    // with PUT ?acquire= / ?release= and read the entry back (README, compatibility).
    for version in ["1.6.1", "1.0.8"] {
        let old = start_server(Some(version));
        requests_per_cycle(&old.addr, &format!(" on Consul {version} (emulated)"));
    }
    cycles_per_sec(&addr, num("--cycles", 2000));
    semaphore_vs_lock(&addr, num("--cycles", 2000) / 4, 5);
    multi_lock_vs_lock(&addr, num("--cycles", 2000) / 4, 5);
    rw_reader_vs_lock(&addr, num("--cycles", 2000) / 4, 5);
    rw_contention(&addr, 8, num("--rw-secs", 3.0));
    handoff(&addr, num("--handoffs", 200));
    failover(&addr, num("--failovers", 5));
    for n in arg("--held")
        .unwrap_or_else(|| "1000,10000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
    {
        held(&addr, n);
    }
}
