//! Bench: baton's futures (`baton::aio`) against its blocking API, side by side
//! in one run, against a dev server in its own process.
//!
//! Prints:
//! * uncontended acquire+release cycles per second on one key: the blocking API
//!   on one thread, and the async API on a current-thread and a multi-thread
//!   tokio runtime (there as a spawned task, on a worker; their sockets waited on by
//!   tokio's own reactor: the core's `tokio` feature), on a current-thread runtime with
//!   the sockets waited on by the client's readiness thread instead (`BATON_AIO_TOKIO=0`:
//!   any executor but tokio), and, for comparison, with every try and release on a step
//!   thread (`BATON_AIO_WARM=0`: before the futures drove a warm lock call
//!   themselves), those step threads also parking at once (`BATON_STEP_BIND=0`);
//!   each run in a fresh child process, ROUNDS rounds in
//!   a rotating order, the median of each, the `ratio async/blocking` of the
//!   cost per cycle (goal <= 1.1) taken within each round, and the CPU time
//!   (user+system, all threads) per cycle;
//! * OS threads and RSS growth with 10,000 locks held through the blocking API,
//!   and with 10,000 async acquires pending on keys another session holds (goal:
//!   threads flat, as for the holdings). Each in a fresh child process, so one
//!   figure does not inherit the other's memory.
//!
//! Usage: `make bench-async`, or build `baton-devserver` and run
//! `bench-async [--devserver PATH] [--cycles N] [--rounds N] [--pending N]`.

use std::process::Command;
use std::time::{Duration, Instant};

use baton::aio::AsyncHold;
use baton::{Client, KvOp, SessionOptions, LOCK_FLAG_VALUE};
use bench_common::{arg, counts, num, proc_status as status, reset_counts, start_devserver};

/// User+system CPU time of the whole process so far (/proc/self/stat, in
/// clock ticks of 10 ms).
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the line: 11 and 12 after ')'.
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn client(addr: &str) -> Client {
    Client::builder()
        .address(addr)
        .default_session(SessionOptions::default_for_client().ttl(Duration::from_secs(15)))
        .build()
        .expect("client")
}

/// One measured run: cycles per second and CPU per cycle.
struct Figure {
    per_sec: f64,
    cpu_per_cycle: Duration,
}

const WARM: usize = 200;

fn blocking_cycles(addr: &str, n: usize) -> Figure {
    let c = client(addr);
    let lock = c.lock("bench/async/blocking").unwrap();
    for _ in 0..WARM {
        assert!(lock.acquire(Some(Duration::from_secs(10)), None).unwrap());
        assert!(lock.release().unwrap());
    }
    let (t0, cpu0) = (Instant::now(), cpu());
    for _ in 0..n {
        assert!(lock.acquire(Some(Duration::from_secs(10)), None).unwrap());
        assert!(lock.release().unwrap());
    }
    let figure = Figure {
        per_sec: n as f64 / t0.elapsed().as_secs_f64(),
        cpu_per_cycle: (cpu() - cpu0) / n as u32,
    };
    drop(lock);
    c.close(Duration::from_secs(5));
    figure
}

fn async_cycles(addr: &str, n: usize, multi: bool) -> Figure {
    let rt = if multi {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    }
    .unwrap();
    let c = client(addr);
    let key = if multi {
        "bench/async/multi"
    } else {
        "bench/async/current"
    };
    let lock = c.lock(key).unwrap();
    let work = async move {
        for _ in 0..WARM {
            assert!(lock
                .acquire_async(Some(Duration::from_secs(10)))
                .await
                .unwrap());
            assert!(lock.release_async().await.unwrap());
        }
        let (t0, cpu0) = (Instant::now(), cpu());
        for _ in 0..n {
            assert!(lock
                .acquire_async(Some(Duration::from_secs(10)))
                .await
                .unwrap());
            assert!(lock.release_async().await.unwrap());
        }
        let figure = Figure {
            per_sec: n as f64 / t0.elapsed().as_secs_f64(),
            cpu_per_cycle: (cpu() - cpu0) / n as u32,
        };
        (lock, figure)
    };
    // On the multi-thread runtime the cycles run as a spawned task, on a worker, as a
    // service's tasks do (`block_on`'s own future runs on the calling thread, which is not one).
    let (lock, figure) = if multi {
        rt.block_on(async { tokio::spawn(work).await.expect("the cycles' task") })
    } else {
        rt.block_on(work)
    };
    drop(lock);
    c.close(Duration::from_secs(5));
    figure
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The ways a cycle is run: (name, child mode, environment).
type Variant = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);
const VARIANTS: [Variant; 6] = [
    ("blocking", "blocking", &[]),
    ("async (tokio current-thread)", "current", &[]),
    ("async (tokio multi-thread)", "multi", &[]),
    // What any other executor gets: the sockets waited on by the client's readiness thread.
    (
        "async, readiness thread",
        "current",
        &[("BATON_AIO_TOKIO", "0")],
    ),
    // Before the futures drove a warm lock call themselves (`aio::warm`): every try and
    // release on a step thread.
    (
        "async, all on step threads",
        "current",
        &[("BATON_AIO_WARM", "0")],
    ),
    (
        "async, all on step threads parking at once",
        "current",
        &[("BATON_AIO_WARM", "0"), ("BATON_STEP_BIND", "0")],
    ),
];

/// Child: `n` cycles in `mode`; prints cycles/s and CPU per cycle.
fn child_cycles(addr: &str, mode: &str, n: usize) {
    let f = match mode {
        "blocking" => blocking_cycles(addr, n),
        "current" => async_cycles(addr, n, false),
        _ => async_cycles(addr, n, true),
    };
    println!(
        "RESULT {} {}",
        f.per_sec,
        f.cpu_per_cycle.as_secs_f64() * 1e6
    );
}

fn cycles(addr: &str, n: usize, rounds: usize) {
    let k = VARIANTS.len();
    let mut per_sec: Vec<Vec<f64>> = vec![Vec::new(); k];
    let mut cpu_us: Vec<Vec<f64>> = vec![Vec::new(); k];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); k];
    for round in 0..rounds {
        let mut got = vec![(0.0, 0.0); k];
        for j in 0..k {
            // A rotating order: a slow moment of a shared machine hits each alike.
            let which = (round + j) % k;
            let (_, mode, env) = VARIANTS[which];
            let out = run_child(
                addr,
                &[
                    "--child",
                    "cycles",
                    "--mode",
                    mode,
                    "--cycles",
                    &n.to_string(),
                ],
                env,
            );
            got[which] = (out[0], out[1]);
        }
        for (i, (ps, cpu)) in got.iter().enumerate() {
            per_sec[i].push(*ps);
            cpu_us[i].push(*cpu);
            ratios[i].push(got[0].0 / ps);
        }
    }
    for (i, (name, _, _)) in VARIANTS.iter().enumerate() {
        println!(
            "{name:<34} {:>7.0} cycles/s  cpu {:>4.0} us/cycle  ratio to blocking {:.2}  (medians of {rounds} rounds of {n})",
            median(per_sec[i].clone()),
            median(cpu_us[i].clone()),
            median(ratios[i].clone()),
        );
    }
    println!(
        "ratio async/blocking {:.2} (current-thread), {:.2} (multi-thread), {:.2} (readiness thread)  (cost per cycle; goal <= 1.1)",
        median(ratios[1].clone()),
        median(ratios[2].clone()),
        median(ratios[3].clone())
    );
}

/// Child: 10,000 locks held through the blocking API.
fn child_held(addr: &str, n: usize) {
    let c = client(addr);
    let (t0, rss0) = (status("Threads:"), status("VmRSS:"));
    let locks: Vec<_> = (0..n)
        .map(|i| {
            let l = c.lock(&format!("bench/async-held/{i}")).unwrap();
            assert!(l.acquire(Some(Duration::from_secs(30)), None).unwrap());
            l
        })
        .collect();
    let (t1, rss1) = (status("Threads:"), status("VmRSS:"));
    assert!(locks.iter().all(|l| l.is_held()));
    println!(
        "RESULT {} {} {}",
        t1,
        t1 as i64 - t0 as i64,
        rss1.saturating_sub(rss0)
    );
    c.close(Duration::from_secs(30));
}

/// Child: 10,000 async acquires pending on one tokio current-thread runtime,
/// on keys a session of another client holds.
fn child_pending(addr: &str, n: usize) {
    let holder = client(addr);
    let hs = holder
        .create_session(&SessionOptions::new().name("bench-async-holder"))
        .unwrap();
    let keys: Vec<String> = (0..n).map(|i| format!("bench/async-pending/{i}")).collect();
    for chunk in keys.chunks(64) {
        let ops: Vec<KvOp> = chunk
            .iter()
            .map(|k| KvOp::lock(k, b"", LOCK_FLAG_VALUE, hs.id()))
            .collect();
        holder.txn(&ops).unwrap();
    }
    let c = client(addr);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    reset_counts(addr);
    let (t0, rss0) = (status("Threads:"), status("VmRSS:"));
    let locks: std::sync::Arc<Vec<baton::Lock>> =
        std::sync::Arc::new(keys.iter().map(|k| c.lock(k).unwrap()).collect());
    rt.block_on(async {
        let tasks: Vec<_> = (0..n)
            .map(|i| {
                let locks = locks.clone();
                tokio::spawn(async move { locks[i].acquire_async(None).await })
            })
            .collect();
        // Once every first try was made and refused (each read its key), they all
        // wait: the dev server's count of key reads says when.
        while counts(addr)["by_route"]["GET /v1/kv"].as_u64().unwrap_or(0) < n as u64 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (t1, rss1) = (status("Threads:"), status("VmRSS:"));
        println!(
            "RESULT {} {} {}",
            t1,
            t1 as i64 - t0 as i64,
            rss1.saturating_sub(rss0)
        );
        for t in &tasks {
            assert!(!t.is_finished(), "an acquire ended while its key was held");
        }
        for t in tasks {
            t.abort();
        }
    });
    hs.destroy().unwrap();
    drop(locks);
    c.close(Duration::from_secs(30));
    holder.close(Duration::from_secs(30));
}

/// Runs this program as a child with `args` and `env`; returns the numbers of
/// its `RESULT` line.
fn run_child(addr: &str, args: &[&str], env: &[(&str, &str)]) -> Vec<f64> {
    let exe = std::env::current_exe().expect("own path");
    let out = Command::new(exe)
        .args(args)
        .args(["--addr", addr])
        .envs(env.iter().copied())
        .output()
        .expect("child runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| {
            panic!(
                "bench-async child {args:?} failed: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    line.split(' ').map(|v| v.parse().unwrap()).collect()
}

fn main() {
    let n = num("--pending", 10_000);
    if let (Some(what), Some(addr)) = (arg("--child"), arg("--addr")) {
        match what.as_str() {
            "held" => child_held(&addr, n),
            "pending" => child_pending(&addr, n),
            "cycles" => child_cycles(
                &addr,
                &arg("--mode").unwrap_or_default(),
                num("--cycles", 2000),
            ),
            other => panic!("unknown child mode {other}"),
        }
        return;
    }
    let server = start_devserver(None);
    let addr = server.addr.clone();
    println!("bench-async: dev server (own process) at {addr}");
    cycles(&addr, num("--cycles", 2000), num("--rounds", 5));
    let pending = n.to_string();
    let r = run_child(&addr, &["--child", "held", "--pending", &pending], &[]);
    let (t, dt, rss) = (r[0], r[1], r[2]);
    println!(
        "{n} locks held (blocking API):       os threads {t} (+{dt}), rss +{rss} KiB ({:.0} B each)",
        rss * 1024.0 / n as f64
    );
    let r = run_child(&addr, &["--child", "pending", "--pending", &pending], &[]);
    let (t, dt, rss) = (r[0], r[1], r[2]);
    println!(
        "{n} async acquires pending (tokio): os threads {t} (+{dt}), rss +{rss} KiB ({:.0} B each)",
        rss * 1024.0 / n as f64
    );
}
