//! A latency proxy for `make bench-bindings` (bench/bindings/run.py drives it): what a client
//! sends reaches the server DELAY_US microseconds later, as if the server took that much
//! longer to answer. Answers come back at once.
//!
//! ```text
//! bench-bindings-latency UPSTREAM DELAY_US [LISTEN]    prints `BENCH_LATENCY_ADDR=<address>`
//! ```
//!
//! UPSTREAM is `HOST:PORT` (or `http://HOST:PORT`) or `unix:///PATH`; LISTEN is where clients
//! connect, `HOST:PORT` (default `127.0.0.1:0`, a free port, printed as `127.0.0.1:PORT`) or
//! `unix:///PATH` (printed as given; the file is removed when the proxy ends). The proxy
//! forwards bytes untouched, so a TLS connection goes through it end to end (the client
//! verifies the dev server's certificate for `127.0.0.1`, the address of both), and a unix
//! client reaches a unix upstream through a unix listener.
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
use std::os::unix::net::{UnixListener, UnixStream};
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

/// One side of a proxied connection: TCP or a unix socket.
enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Conn {
    /// Connects to `addr` (`HOST:PORT`, `http://HOST:PORT` or `unix:///PATH`).
    fn connect(addr: &str) -> std::io::Result<Conn> {
        match addr.strip_prefix("unix://") {
            Some(path) => UnixStream::connect(path).map(Conn::Unix),
            None => {
                let s = TcpStream::connect(addr.trim_start_matches("http://"))?;
                s.set_nodelay(true)?;
                Ok(Conn::Tcp(s))
            }
        }
    }

    fn try_clone(&self) -> Conn {
        match self {
            Conn::Tcp(s) => Conn::Tcp(s.try_clone().expect("clone")),
            Conn::Unix(s) => Conn::Unix(s.try_clone().expect("clone")),
        }
    }

    fn shutdown(&self) {
        let _ = match self {
            Conn::Tcp(s) => s.shutdown(Shutdown::Both),
            Conn::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(buf),
            Conn::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.write(buf),
            Conn::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Where clients connect: a TCP port or a unix socket.
enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, String),
}

impl Listener {
    fn bind(addr: &str) -> Listener {
        match addr.strip_prefix("unix://") {
            Some(path) => {
                let l = UnixListener::bind(path)
                    .unwrap_or_else(|e| panic!("bind the unix socket {path}: {e}"));
                Listener::Unix(l, path.to_string())
            }
            None => Listener::Tcp(TcpListener::bind(addr).expect("bind")),
        }
    }

    /// The address to print, and to connect to (the stdin watcher's wake-up).
    fn address(&self) -> String {
        match self {
            Listener::Tcp(l) => l.local_addr().expect("address").to_string(),
            Listener::Unix(_, path) => format!("unix://{path}"),
        }
    }

    fn accept(&self) -> std::io::Result<Conn> {
        match self {
            Listener::Tcp(l) => {
                let (s, _) = l.accept()?;
                s.set_nodelay(true)?;
                Ok(Conn::Tcp(s))
            }
            Listener::Unix(l, _) => l.accept().map(|(s, _)| Conn::Unix(s)),
        }
    }
}

/// Copies `from` to `to` at once; on end or error, shuts both down (which ends the other
/// direction's threads too).
fn pump(mut from: Conn, mut to: Conn) {
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
    from.shutdown();
    to.shutdown();
}

/// Reads `from` and queues each chunk with its arrival time: the time is taken as it arrives,
/// not when the previous chunk's delay is over (a request written in two chunks, headers then
/// body, must not be delayed twice).
fn arrivals(mut from: Conn, to: Conn, queue: crossbeam_channel::Sender<(Instant, Vec<u8>)>) {
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
    from.shutdown();
    to.shutdown();
}

/// Writes each queued chunk to `to` once `delay` has passed since it arrived.
fn delayed(mut to: Conn, queue: crossbeam_channel::Receiver<(Instant, Vec<u8>)>, delay: Duration) {
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
    to.shutdown();
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .expect("thread")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 && args.len() != 4 {
        eprintln!("usage: bench-bindings-latency UPSTREAM DELAY_US [LISTEN]");
        std::process::exit(2);
    }
    let upstream = args[1].clone();
    let delay = Duration::from_micros(args[2].parse().expect("DELAY_US must be a number"));
    let listener = Listener::bind(args.get(3).map_or("127.0.0.1:0", String::as_str));
    let addr = listener.address();
    println!("BENCH_LATENCY_ADDR={addr}");
    std::io::stdout().flush().expect("stdout");

    // Ends the accept loop when standard input closes: sets `stop`, then connects once so
    // that `accept` returns.
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (stop, addr) = (stop.clone(), addr.clone());
        spawn("lat-stdin", move || {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            stop.store(true, Ordering::SeqCst);
            let _ = Conn::connect(&addr);
        })
    };

    let mut conns: Vec<(Conn, [JoinHandle<()>; 3])> = Vec::new();
    loop {
        let client = listener.accept();
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(client) = client else { continue };
        let Ok(server) = Conn::connect(&upstream) else {
            continue;
        };
        let (c2, s2, s3, keep) = (
            client.try_clone(),
            server.try_clone(),
            server.try_clone(),
            client.try_clone(),
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
        c.shutdown();
        for t in threads {
            let _ = t.join();
        }
    }
    let _ = watcher.join();
    if let Listener::Unix(_, path) = &listener {
        let _ = std::fs::remove_file(path);
    }
}
