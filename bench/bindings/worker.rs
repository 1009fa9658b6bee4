//! The Rust worker of `make bench-bindings` (bench/bindings/run.py drives it; the C, Python and
//! Node workers next to it do the same in their language).
//!
//! ```text
//! bench-bindings-rust ADDR cycles N KEY    N uncontended acquire+release cycles on KEY
//! bench-bindings-rust ADDR handoff N KEY   N hand-offs of KEY between two holders
//! ```
//!
//! Prints one line, `RESULT {json}`: for `cycles`, `{"cycles", "secs", "p50_us", "p99_us"}`
//! (the latency of each whole cycle); for `handoff`, `{"rounds", "p50_us", "p99_us"}` (from
//! the holder's `release()` call to the waiter's `acquire()` returning).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use baton::Client;

/// The `p` quantile (0..=1) of sorted microsecond figures.
fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn client(addr: &str) -> Client {
    Client::builder().address(addr).build().expect("client")
}

const LONG: Option<Duration> = Some(Duration::from_secs(30));

fn cycles(addr: &str, n: usize, key: &str) -> String {
    let c = client(addr);
    let lock = c.lock(key).expect("lock");
    // Warm: the session exists, the connection is open, the key is known (WARM: see run.py).
    for _ in 0..300 {
        assert!(lock.acquire(LONG, None).expect("acquire"));
        lock.release().expect("release");
    }
    let mut lat = Vec::with_capacity(n);
    let start = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        assert!(lock.acquire(LONG, None).expect("acquire"));
        lock.release().expect("release");
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let secs = start.elapsed().as_secs_f64();
    lat.sort_by(f64::total_cmp);
    c.close(Duration::from_secs(5));
    format!(
        r#"{{"cycles": {n}, "secs": {secs}, "p50_us": {}, "p99_us": {}}}"#,
        pct(&lat, 0.5),
        pct(&lat, 0.99)
    )
}

fn handoff(addr: &str, rounds: usize, key: &str) -> String {
    let (a, b) = (client(addr), client(addr));
    let la = a.lock(key).expect("lock");
    let lb = b.lock(key).expect("lock");
    assert!(la.acquire(LONG, None).expect("acquire"));
    let mut lat = Vec::with_capacity(rounds);
    let (mut holder, mut waiter) = (&la, &lb);
    for _ in 0..rounds {
        std::thread::scope(|s| {
            let (tx, rx) = mpsc::channel();
            let w = waiter;
            let t = std::thread::Builder::new()
                .name("bench-waiter".into())
                .spawn_scoped(s, move || {
                    tx.send(()).expect("started");
                    assert!(w.acquire(LONG, None).expect("acquire"));
                    Instant::now()
                })
                .expect("thread");
            rx.recv().expect("started");
            // Let the waiter find the key held and park on it.
            std::thread::sleep(Duration::from_millis(20));
            let released = Instant::now();
            assert!(holder.release().expect("release"));
            let acquired = t.join().expect("waiter");
            lat.push(acquired.saturating_duration_since(released).as_secs_f64() * 1e6);
        });
        std::mem::swap(&mut holder, &mut waiter);
    }
    holder.release().expect("release");
    lat.sort_by(f64::total_cmp);
    a.close(Duration::from_secs(5));
    b.close(Duration::from_secs(5));
    format!(
        r#"{{"rounds": {rounds}, "p50_us": {}, "p99_us": {}}}"#,
        pct(&lat, 0.5),
        pct(&lat, 0.99)
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: bench-bindings-rust ADDR cycles|handoff N KEY");
        std::process::exit(2);
    }
    let n: usize = args[3].parse().expect("N must be a number");
    let json = match args[2].as_str() {
        "cycles" => cycles(&args[1], n, &args[4]),
        "handoff" => handoff(&args[1], n, &args[4]),
        other => {
            eprintln!("unknown mode {other:?} (cycles or handoff)");
            std::process::exit(2);
        }
    };
    println!("RESULT {json}");
}
