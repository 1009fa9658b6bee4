//! Bench: what holders and waiters live through when their Consul cluster
//! elects a new raft leader, acted out by the dev server's "no leader" windows
//! (answers as a client agent gives them, requests held as `rpc_hold_timeout`
//! does).
//!
//! Each episode has two locks held by one client: `kept` stays held through
//! the window, `handed` is released in the middle of it (the release fails)
//! while a second client waits for it. Windows alternate between half the
//! session TTL (the holder should keep `kept`) and twice the TTL (the local
//! deadline passes: the holder must let go, and the key must come free once
//! Consul answers, not after Consul expires the session). Prints per window and
//! in sum: holdings kept, false losses (a loss signalled in a window shorter
//! than the lease), keys left held by a session nobody renews, and the time
//! from the new leader to the waiter holding `handed`.
//!
//! Usage: `make bench-failover`, or `bench-failover [--windows N] [--ttl-ms T] [--hold-ms H]`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton::{Client, SessionOptions};
use baton_devserver::{Config, DevServer, NoLeader, NoLeaderAnswers};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn num(name: &str, default: u64) -> u64 {
    arg(name).and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// How long after the new leader a key may take to come free before it counts
/// as left held (Consul itself would free it only 2×TTL + lock-delay later).
const SETTLE: Duration = Duration::from_secs(3);

fn client(addr: &str, ttl: Duration) -> Client {
    Client::builder()
        .address(addr.to_string())
        .default_session(
            SessionOptions::default_for_client()
                .ttl(ttl)
                .lock_delay(Duration::from_millis(500)),
        )
        .build()
        .expect("client")
}

/// Waits until `key` carries no session other than `allowed`, up to `within`.
fn free_within(c: &Client, key: &str, allowed: Option<&str>, within: Duration) -> bool {
    let end = Instant::now() + within;
    let mut index = 0;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let wait = left.min(Duration::from_millis(500));
        match c
            .kv()
            .get_with(key, &baton::QueryOptions::blocking(index, wait))
        {
            Ok((entry, meta)) => {
                let holder = entry.and_then(|p| p.session);
                if holder.is_none() || holder.as_deref() == allowed {
                    return true;
                }
                index = meta.index;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn main() {
    let windows = num("--windows", 10);
    let ttl = Duration::from_millis(num("--ttl-ms", 2000));
    let hold = Duration::from_millis(num("--hold-ms", 300));
    let dev = DevServer::start(Config {
        session_ttl_min: Duration::from_millis(500),
        ..Config::default()
    })
    .expect("dev server");
    let addr = dev.http_addr();
    let observer = Client::builder()
        .address(addr.clone())
        .build()
        .expect("client");
    println!(
        "bench-failover: {windows} no-leader windows (alternating TTL/2 and 2xTTL), session TTL {ttl:?}, requests held {hold:?} then client-agent 500s"
    );
    let (mut short, mut short_kept, mut false_losses, mut left_held) = (0, 0, 0, 0);
    let mut long_freed = 0;
    let mut long = 0;
    let mut next_holder_ms: Vec<f64> = Vec::new();
    let mut retries = 0;
    for w in 0..windows {
        let holder = client(&addr, ttl);
        let waiter = client(&addr, ttl);
        let kept_key = format!("bench/failover/{w}/kept");
        let handed_key = format!("bench/failover/{w}/handed");
        let kept = holder.lock(&kept_key).expect("lock");
        let handed = holder.lock(&handed_key).expect("lock");
        assert!(kept
            .acquire(Some(Duration::from_secs(10)), None)
            .expect("acquire"));
        assert!(handed
            .acquire(Some(Duration::from_secs(10)), None)
            .expect("acquire"));
        let losses = Arc::new(AtomicUsize::new(0));
        let l2 = losses.clone();
        kept.on_lost(move |_| {
            l2.fetch_add(1, Ordering::SeqCst);
        });
        let got_at = Arc::new(std::sync::Mutex::new(None::<Instant>));
        let waiting = {
            let waiter = waiter.clone();
            let key = handed_key.clone();
            let got_at = got_at.clone();
            std::thread::spawn(move || {
                let l = waiter.lock(&key).expect("lock");
                let ok = l
                    .acquire(Some(Duration::from_secs(60)), None)
                    .unwrap_or(false);
                if ok {
                    *got_at.lock().unwrap() = Some(Instant::now());
                }
                l
            })
        };
        let is_short = w % 2 == 0;
        let window = if is_short { ttl / 2 } else { ttl * 2 };
        dev.set_no_leader(NoLeader {
            hold,
            answers: NoLeaderAnswers::ClientAgent,
        });
        std::thread::sleep(window / 2);
        let release = handed.release();
        std::thread::sleep(window - window / 2);
        let healed = Instant::now();
        dev.end_no_leader();
        let waiter_lock = waiting.join().expect("waiter");
        let to_next = got_at
            .lock()
            .unwrap()
            .map(|t| t.saturating_duration_since(healed));
        let kept_session = kept.session().map(|s| s.id().to_string());
        let kept_held = kept.is_held();
        let lost = losses.load(Ordering::SeqCst);
        let (kind, kept_ok, kept_free) = if is_short {
            short += 1;
            if kept_held {
                short_kept += 1;
            }
            if lost > 0 {
                false_losses += 1;
            }
            (
                "TTL/2",
                kept_held,
                free_within(&observer, &kept_key, kept_session.as_deref(), SETTLE),
            )
        } else {
            long += 1;
            // The holder must have let go; the key must come free once Consul answers.
            let freed = free_within(&observer, &kept_key, None, SETTLE);
            if freed {
                long_freed += 1;
            }
            ("2xTTL", !kept_held, freed)
        };
        if !kept_free {
            left_held += 1;
        }
        if to_next.is_none() {
            left_held += 1;
        }
        if let Some(d) = to_next {
            next_holder_ms.push(d.as_secs_f64() * 1000.0);
        }
        retries += holder.transient_retries() + waiter.transient_retries();
        println!(
            "window {w:>2} ({kind}, {:>5} ms): release in window: {}; kept lock {}; loss signals {lost}; handed lock: next holder {} after the leader returned",
            window.as_millis(),
            match &release {
                Err(_) => "failed (retried in the background)",
                Ok(true) => "confirmed",
                Ok(false) => "not held any more (the lease had passed)",
            },
            if is_short {
                if kept_ok { "held through" } else { "LOST (false loss)" }
            } else if kept_ok {
                "let go at the local deadline"
            } else {
                "still believed held (BUG)"
            },
            to_next.map_or("NEVER".to_string(), |d| format!("{:.0} ms", d.as_secs_f64() * 1000.0)),
        );
        drop(waiter_lock);
        drop((kept, handed));
        holder.close(Duration::from_secs(5));
        waiter.close(Duration::from_secs(5));
    }
    next_holder_ms.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| -> f64 {
        if next_holder_ms.is_empty() {
            return f64::NAN;
        }
        let i = ((next_holder_ms.len() as f64 - 1.0) * p).round() as usize;
        next_holder_ms[i]
    };
    println!("holdings kept through TTL/2 windows: {short_kept}/{short}");
    println!("false losses: {false_losses}");
    println!("keys freed after 2xTTL windows (lease passed): {long_freed}/{long}");
    println!(
        "keys left held by a session nobody renews ({SETTLE:?} after the new leader): {left_held}"
    );
    println!(
        "time from the new leader to the next holder: p50 {:.0} ms, max {:.0} ms ({} windows)",
        pct(0.5),
        pct(1.0),
        next_holder_ms.len()
    );
    println!("transient failures ridden out (retries): {retries}");
    let sessions = observer
        .sessions()
        .list()
        .map(|l| l.len())
        .unwrap_or(usize::MAX);
    println!("sessions left at the server: {sessions}");
    observer.close(Duration::from_secs(5));
}
