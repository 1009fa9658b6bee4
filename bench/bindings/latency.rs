//! A latency proxy for `make bench-bindings` (bench/bindings/run.py drives it): what a client
//! sends reaches the server DELAY_US microseconds later, as if the server took that much
//! longer to answer. Answers come back at once.
//!
//! ```text
//! bench-bindings-latency UPSTREAM DELAY_US    prints `BENCH_LATENCY_ADDR=127.0.0.1:PORT`
//! ```
//!
//! Why not the dev server's own latency fault (`PUT /_devserver/latency?d=300us`): it sleeps
//! on tokio's timer, whose resolution is a millisecond, rounded up: asked for 0.3 ms it adds
//! 1.5 ms on average, and its spread is wide (measured with the floor client). Here each
//! chunk a client sends is held until `arrival + DELAY_US` by a thread that sleeps with a 1 µs
//! timer slack, then forwarded: requests on one connection keep their order and their gaps.
//!
//! Each connection has two threads, `lat-up` (client -> server, delayed) and `lat-down`
//! (server -> client); the proxy itself ends, joining them all, when its standard input
//! closes (run.py holds it open while the proxy is in use).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Asks the kernel to end this thread's sleeps within a microsecond of when they are due
/// (the default slack, 50 µs, is a sixth of the shortest delay measured).
#[allow(unsafe_code)] // one libc call; the workspace denies unsafe for the library crates
fn tight_timer() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and touches no memory of ours.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0) };
    assert_eq!(rc, 0, "prctl(PR_SET_TIMERSLACK)");
}

/// Copies `from` to `to`, each chunk held until `delay` after it arrived; on end or error,
/// shuts both down (which ends the other direction's thread too).
fn pump(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    if !delay.is_zero() {
        tight_timer();
    }
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let due = Instant::now() + delay;
        let left = due.saturating_duration_since(Instant::now());
        if !left.is_zero() {
            std::thread::sleep(left);
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .expect("thread")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: bench-bindings-latency UPSTREAM DELAY_US");
        std::process::exit(2);
    }
    let upstream = args[1].trim_start_matches("http://").to_string();
    let delay = Duration::from_micros(args[2].parse().expect("DELAY_US must be a number"));
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    println!("BENCH_LATENCY_ADDR={addr}");
    std::io::stdout().flush().expect("stdout");

    // Ends the accept loop when standard input closes: sets `stop`, then connects once so
    // that `accept` returns.
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let stop = stop.clone();
        spawn("lat-stdin", move || {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            stop.store(true, Ordering::SeqCst);
            let _ = TcpStream::connect(addr);
        })
    };

    let mut conns: Vec<(TcpStream, JoinHandle<()>, JoinHandle<()>)> = Vec::new();
    for client in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(client) = client else { continue };
        let Ok(server) = TcpStream::connect(&upstream) else {
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let (c2, s2, keep) = (
            client.try_clone().expect("clone"),
            server.try_clone().expect("clone"),
            client.try_clone().expect("clone"),
        );
        let up = spawn("lat-up", move || pump(client, server, delay));
        let down = spawn("lat-down", move || pump(s2, c2, Duration::ZERO));
        conns.push((keep, up, down));
        // Join the connections that ended meanwhile.
        let (done, open): (Vec<_>, Vec<_>) = conns
            .into_iter()
            .partition(|(_, u, d)| u.is_finished() && d.is_finished());
        conns = open;
        for (_, u, d) in done {
            let _ = u.join();
            let _ = d.join();
        }
    }
    for (c, u, d) in conns {
        let _ = c.shutdown(Shutdown::Both);
        let _ = u.join();
        let _ = d.join();
    }
    let _ = watcher.join();
}
