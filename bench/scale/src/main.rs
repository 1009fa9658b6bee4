//! The Rust worker of `make bench-scale` (bench/scale/run.py drives it; same protocol as
//! worker.py and worker.js):
//!
//! ```text
//! bench-scale ADDR pending N KEY TIMEOUT   N baton::aio acquires of KEY (held by another
//!                                          process), TIMEOUT seconds each, all pending at once
//!                                          on one current-thread tokio runtime
//! bench-scale ADDR held N NAMES HOLD       N locks held for HOLD seconds (blocking API), named
//!                                          prefixed, flat or segments (see run.py)
//! bench-scale ADDR watched N NAMES 0       N prefix watches (`Client::watch_prefix`) so
//!                                          named, then a write under every 100th: how long
//!                                          until each of those watches sees it
//! ```
//!
//! Prints one line, `RESULT {json}`.

use std::time::{Duration, Instant};

use baton::aio::AsyncHold;
use baton::Client;
use bench_common::{proc_status, rss_kib};
use serde_json::json;

fn threads() -> u64 {
    proc_status("Threads:")
}

fn sockets() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
                })
                .count() as u64
        })
        .unwrap_or(0)
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn client(addr: &str) -> Client {
    Client::builder().address(addr).build().expect("client")
}

fn pending(addr: &str, n: usize, key: &str, timeout: f64) -> serde_json::Value {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let c = client(addr);
    let warm = c.lock(&format!("{key}-warm")).expect("lock");
    assert!(warm.acquire(Some(Duration::from_secs(10)), None).unwrap());
    warm.release().unwrap();
    let (threads_before, rss_before) = (threads(), rss_kib());
    let locks: Vec<_> = (0..n)
        .map(|_| std::sync::Arc::new(c.lock(key).expect("lock")))
        .collect();
    let t = Duration::from_secs_f64(timeout);
    let (got, ends, lags, peak_threads, peak_rss, start_secs) = rt.block_on(async {
        let started = Instant::now();
        // Each acquire a task of its own, as an application spawns them (a join that polls
        // every future on any wake-up would cost the loop O(n) per wake-up).
        let tasks: Vec<_> = locks
            .iter()
            .map(|lock| {
                let lock = lock.clone();
                tokio::spawn(async move {
                    let t0 = Instant::now();
                    let got = lock.acquire_async(Some(t)).await.unwrap_or(false);
                    (got, t0.elapsed().as_secs_f64() - timeout)
                })
            })
            .collect();
        let start_secs = started.elapsed().as_secs_f64();
        // The loop's lag: a thread of the bench wakes a task of the loop every 10 ms, stamped;
        // the lag is how long the woken task waits to run on the one thread it shares with
        // every acquire (tokio's timer, of 1 ms resolution, would add its own rounding).
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
        let span = Duration::from_secs_f64((timeout - 1.0).max(0.5));
        let stamper = std::thread::spawn(move || {
            let until = Instant::now() + span;
            while Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
                if tx.send(Instant::now()).is_err() {
                    return;
                }
            }
        });
        let (mut lags, mut pt, mut pr) = (Vec::new(), threads(), rss_kib());
        while let Some(stamp) = rx.recv().await {
            lags.push(stamp.elapsed().as_secs_f64() * 1e3);
            // Not counting the stamper, the bench's own thread.
            pt = pt.max(threads().saturating_sub(1));
            pr = pr.max(rss_kib());
        }
        stamper.join().expect("the lag stamper");
        let mut results = Vec::with_capacity(n);
        for task in tasks {
            results.push(task.await.expect("an acquire task panicked"));
        }
        let got = results.iter().filter(|r| r.0).count();
        let ends: Vec<f64> = results.iter().map(|r| r.1).collect();
        (got, ends, lags, pt, pr, start_secs)
    });
    let held_after = locks.iter().filter(|l| l.is_held()).count();
    drop(locks);
    assert!(c.close_report(Duration::from_secs(30)).is_complete());
    let (mut ends, mut lags) = (ends, lags);
    ends.sort_by(f64::total_cmp);
    lags.sort_by(f64::total_cmp);
    json!({
        "lang": "rust-aio", "mode": "pending", "n": n,
        "threads_before": threads_before, "threads_peak": peak_threads, "threads_after": threads(),
        "rss_before_kib": rss_before, "rss_peak_kib": peak_rss,
        "rss_per_call_kib": (peak_rss.saturating_sub(rss_before)) as f64 / n as f64,
        "start_secs": start_secs,
        "acquired": got, "held_after": held_after,
        "end_late_p50_ms": pct(&ends, 0.5) * 1e3, "end_late_max_ms": ends.last().copied().unwrap_or(0.0) * 1e3,
        "lag_p99_ms": pct(&lags, 0.99), "lag_max_ms": lags.last().copied().unwrap_or(0.0),
    })
}

/// A name shared with nothing: 32 hex digits from the clock, the process and a counter,
/// scrambled (no extra crate for a UUID).
fn random_name(i: usize) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_usize(i);
    let a = h.finish();
    h.write_u64(a);
    format!("{a:016x}{:016x}", h.finish())
}

fn name(names: &str, run: &str, i: usize) -> String {
    match names {
        "prefixed" => format!("scale/{run}/k-{i}"),
        "flat" => format!("{run}-k-{i}"),
        "random" => random_name(i),
        _ => format!("{run}-{i}/lock"),
    }
}

fn held(addr: &str, n: usize, names: &str, hold: f64) -> serde_json::Value {
    let run = format!("rs{}", std::process::id());
    let c = client(addr);
    let threads_before = threads();
    let locks: Vec<_> = (0..n)
        .map(|i| c.lock(&name(names, &run, i)).expect("lock"))
        .collect();
    let started = Instant::now();
    let mut failed = 0;
    for l in &locks {
        match l.acquire(Some(Duration::from_secs(30)), None) {
            Ok(true) => {}
            Ok(false) => failed += 1,
            Err(e) => {
                failed += 1;
                eprintln!("acquire failed: {e}");
            }
        }
    }
    let acquire_secs = started.elapsed().as_secs_f64();
    let (mut pt, mut ps, mut pr) = (threads(), sockets(), rss_kib());
    println!("HOLDING");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let end = Instant::now() + Duration::from_secs_f64(hold);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(200));
        pt = pt.max(threads());
        ps = ps.max(sockets());
        pr = pr.max(rss_kib());
    }
    println!("RELEASING");
    let _ = std::io::stdout().flush();
    let lost = locks.iter().filter(|l| !l.is_held()).count() - failed;
    let started = Instant::now();
    let mut release_failed = 0;
    for l in &locks {
        if let Err(e) = l.release() {
            release_failed += 1;
            eprintln!("release failed: {e}");
        }
    }
    let release_secs = started.elapsed().as_secs_f64();
    drop(locks);
    assert!(c.close_report(Duration::from_secs(30)).is_complete());
    json!({
        "lang": "rust", "mode": "held", "n": n, "names": names, "hold_secs": hold,
        "threads_before": threads_before, "threads_peak": pt, "threads_after": threads(),
        "sockets_peak": ps, "rss_peak_kib": pr,
        "acquire_failed": failed, "lost": lost, "release_failed": release_failed,
        "acquire_secs": acquire_secs, "release_secs": release_secs,
    })
}

fn watched(addr: &str, n: usize, names: &str) -> serde_json::Value {
    let run = format!("rsw{}", std::process::id());
    let (c, writer) = (client(addr), client(addr));
    let threads_before = threads();
    let started = Instant::now();
    let prefixes: Vec<String> = (0..n)
        .map(|i| format!("{}/", name(names, &run, i)))
        .collect();
    let mut watches: Vec<_> = prefixes
        .iter()
        .map(|p| c.watch_prefix(p).expect("watch"))
        .collect();
    for w in &mut watches {
        w.next(Some(Duration::from_secs(60)), None)
            .expect("first state");
    }
    let watch_secs = started.elapsed().as_secs_f64();
    let (mut pt, mut ps) = (threads(), sockets());
    let changed: Vec<usize> = (0..n).step_by(100).collect();
    let mut seen_ms = Vec::new();
    let mut missed = 0;
    for &i in &changed {
        let t0 = Instant::now();
        writer
            .kv()
            .put(&format!("{}w", prefixes[i]), b"v")
            .expect("write");
        match watches[i].next(Some(Duration::from_secs(30)), None) {
            Ok(ev) if ev.entries.len() == 1 => seen_ms.push(t0.elapsed().as_secs_f64() * 1e3),
            _ => missed += 1,
        }
        pt = pt.max(threads());
        ps = ps.max(sockets());
    }
    for &i in &changed {
        let _ = writer.kv().delete(&format!("{}w", prefixes[i]));
    }
    seen_ms.sort_by(f64::total_cmp);
    drop(watches);
    assert!(c.close_report(Duration::from_secs(30)).is_complete());
    assert!(writer.close_report(Duration::from_secs(30)).is_complete());
    json!({
        "lang": "rust", "mode": "watched", "n": n, "names": names,
        // Two clients: the watcher and the writer.
        "threads_before": threads_before, "threads_peak": pt, "threads_after": threads(),
        "sockets_peak": ps, "watch_secs": watch_secs,
        "changes": changed.len(), "missed": missed,
        "seen_p50_ms": pct(&seen_ms, 0.5), "seen_max_ms": seen_ms.last().copied().unwrap_or(0.0),
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 5 {
        eprintln!(
            "usage: bench-scale ADDR pending N KEY TIMEOUT | ADDR held N NAMES HOLD \
             | ADDR watched N NAMES 0"
        );
        std::process::exit(2);
    }
    let n: usize = args[2].parse().expect("N");
    let num: f64 = args[4].parse().expect("TIMEOUT or HOLD");
    let result = match args[1].as_str() {
        "pending" => pending(&args[0], n, &args[3], num),
        "held" => held(&args[0], n, &args[3], num),
        "watched" => watched(&args[0], n, &args[3]),
        other => {
            eprintln!("unknown mode {other:?}");
            std::process::exit(2);
        }
    };
    println!("RESULT {result}");
}
