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
//! chunk a client sends is stamped as it arrives (`lat-up-read`), held until `arrival +
//! DELAY_US` by a thread that sleeps with a 1 µs timer slack (`lat-up-write`), then forwarded:
//! requests on one connection keep their order and their gaps, and a request written in
//! several chunks is delayed once. Answers go back at once (`lat-down`). The proxy ends,
//! joining every thread, when its standard input closes (run.py holds it open while in use).

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

/// Copies `from` to `to` at once; on end or error, shuts both down (which ends the other
/// direction's threads too).
fn pump(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// Reads `from` and queues each chunk with its arrival time: the time is taken as it arrives,
/// not when the previous chunk's delay is over (a request written in two chunks, headers then
/// body, must not be delayed twice).
fn arrivals(
    mut from: TcpStream,
    to: TcpStream,
    queue: crossbeam_channel::Sender<(Instant, Vec<u8>)>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if queue.send((Instant::now(), buf[..n].to_vec())).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// Writes each queued chunk to `to` once `delay` has passed since it arrived.
fn delayed(
    mut to: TcpStream,
    queue: crossbeam_channel::Receiver<(Instant, Vec<u8>)>,
    delay: Duration,
) {
    tight_timer();
    for (arrived, chunk) in queue {
        let left = (arrived + delay).saturating_duration_since(Instant::now());
        if !left.is_zero() {
            std::thread::sleep(left);
        }
        if to.write_all(&chunk).is_err() {
            break;
        }
    }
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

    let mut conns: Vec<(TcpStream, [JoinHandle<()>; 3])> = Vec::new();
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
        let clone = |s: &TcpStream| s.try_clone().expect("clone");
        let (c2, s2, s3, keep) = (
            clone(&client),
            clone(&server),
            clone(&server),
            clone(&client),
        );
        let (tx, rx) = crossbeam_channel::unbounded();
        let threads = [
            spawn("lat-up-read", move || arrivals(client, s3, tx)),
            spawn("lat-up-write", move || delayed(server, rx, delay)),
            spawn("lat-down", move || pump(s2, c2)),
        ];
        conns.push((keep, threads));
        // Join the connections that ended meanwhile.
        let (done, open): (Vec<_>, Vec<_>) = conns
            .into_iter()
            .partition(|(_, t)| t.iter().all(JoinHandle::is_finished));
        conns = open;
        for (_, threads) in done {
            for t in threads {
                let _ = t.join();
            }
        }
    }
    for (c, threads) in conns {
        let _ = c.shutdown(Shutdown::Both);
        for t in threads {
            let _ = t.join();
        }
    }
    let _ = watcher.join();
}
