//! Bench: one baton client renewing 1, 100 and 1000 sessions.
//!
//! Starts an in-process dev server, then for each session count creates the
//! sessions on one client, lets the renewer run for a while and prints the
//! process's OS threads (all, and the client's own `baton-*` ones), the RSS
//! growth, and the renew requests per second counted by the dev server.
//!
//! Usage: `cargo run --release -p bench-sessions -- [--secs N] [--ttl-secs T] [--counts 1,100,1000]`

use std::time::{Duration, Instant};

use baton::{Client, SessionOptions};
use baton_devserver::{Config, DevServer};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn threads() -> (usize, usize) {
    let mut all = 0;
    let mut client = 0;
    if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
        for e in dir.flatten() {
            all += 1;
            let name = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            let name = name.trim();
            if name.starts_with("baton-") && !name.starts_with("baton-devserver") {
                client += 1;
            }
        }
    }
    (all, client)
}

fn renews(dev: &DevServer) -> u64 {
    dev.request_counts()
        .by_route
        .get("PUT /v1/session/renew")
        .copied()
        .unwrap_or(0)
}

fn main() {
    let secs: u64 = arg("--secs").and_then(|s| s.parse().ok()).unwrap_or(60);
    let ttl = Duration::from_secs(arg("--ttl-secs").and_then(|s| s.parse().ok()).unwrap_or(10));
    let counts: Vec<usize> = arg("--counts")
        .unwrap_or_else(|| "1,100,1000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let dev = DevServer::start(Config {
        max_conns_per_client: 0,
        ..Config::default()
    })
    .expect("dev server starts");
    println!(
        "bench-sessions: TTL {ttl:?}, {secs} s per run, dev server at {}",
        dev.http_addr()
    );
    println!(
        "{:>9} {:>12} {:>13} {:>14} {:>16} {:>15} {:>11}",
        "sessions",
        "os_threads",
        "baton_threads",
        "rss_delta_kib",
        "renews_per_sec",
        "expected_per_s",
        "all_valid"
    );
    for n in counts {
        let client = Client::builder()
            .address(dev.http_addr())
            .build()
            .expect("client");
        let rss0 = rss_kib();
        let mut sessions = Vec::with_capacity(n);
        for i in 0..n {
            sessions.push(
                client
                    .create_session(&SessionOptions::new().name(format!("bench-{i}")).ttl(ttl))
                    .expect("create session"),
            );
        }
        // Let the first renewals start before measuring.
        std::thread::sleep(ttl / 2);
        let r0 = renews(&dev);
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs(secs));
        let r1 = renews(&dev);
        let elapsed = t0.elapsed().as_secs_f64();
        let (all, mine) = threads();
        let rss = rss_kib().saturating_sub(rss0);
        let valid = sessions.iter().all(|s| s.is_valid());
        println!(
            "{:>9} {:>12} {:>13} {:>14} {:>16.1} {:>15.1} {:>11}",
            n,
            all,
            mine,
            rss,
            (r1 - r0) as f64 / elapsed,
            n as f64 * 3.0 / ttl.as_secs_f64(),
            valid
        );
        let closed = client.close(Duration::from_secs(60));
        if !closed {
            println!("  (close did not finish in time)");
        }
    }
}
