//! `bench-devserver`: how `baton-devserver` holds up as the Consul every test and demo runs on.
//!
//! 1. Parks `--waiters` (default 5,000) blocking queries on one key, each on its own connection,
//!    then wakes them all with one write; prints wake-up latency (p50/p99/max, measured from just
//!    before the write is sent to each complete response) and how many woke.
//! 2. Prints RSS before and with the waiters parked, and the peak (VmHWM).
//! 3. Plain KV write throughput over one keep-alive connection and over 8.
//!
//! The server runs in-process with `max_conns_per_client = 0`: Consul caps connections per
//! client IP at 200 by default (`limits.http_max_conns_per_client`, the same knob), and every
//! waiter here comes from 127.0.0.1. Talks to 127.0.0.1 only; every socket operation has a
//! timeout, so the program always ends.

use std::time::{Duration, Instant};

use baton_devserver::{Config, DevServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const IO_TIMEOUT: Duration = Duration::from_secs(30);
const KEY: &str = "bench/key";

struct Args {
    waiters: usize,
    writes: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        waiters: 5000,
        writes: 20_000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut num = |name: &str| -> Result<usize, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a number"))
        };
        match flag.as_str() {
            "--waiters" => a.waiters = num("--waiters")?,
            "--writes" => a.writes = num("--writes")?,
            "-h" | "--help" => {
                return Err("usage: bench-devserver [--waiters N] [--writes N]".into())
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if a.waiters == 0 || a.writes == 0 {
        return Err("--waiters and --writes must be positive".into());
    }
    Ok(a)
}

/// One HTTP/1.1 response: status, the `X-Consul-Index` header, body length.
struct Resp {
    status: u16,
    index: u64,
}

/// Sends one request on a keep-alive connection and reads the whole response.
async fn request(
    conn: &mut TcpStream,
    method: &str,
    path: &str,
    body: &[u8],
) -> std::io::Result<Resp> {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut msg = head.into_bytes();
    msg.extend_from_slice(body);
    tokio::time::timeout(IO_TIMEOUT, conn.write_all(&msg)).await??;
    tokio::time::timeout(IO_TIMEOUT * 3, read_response(conn)).await?
}

async fn read_response(conn: &mut TcpStream) -> std::io::Result<Resp> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 4096];
    let header_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut len = 0usize;
    let mut index = 0u64;
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            let v = v.trim();
            if k.eq_ignore_ascii_case("content-length") {
                len = v.parse().unwrap_or(0);
            } else if k.eq_ignore_ascii_case("x-consul-index") {
                index = v.parse().unwrap_or(0);
            }
        }
    }
    let mut have = buf.len() - header_end;
    while have < len {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "short body",
            ));
        }
        have += n;
    }
    Ok(Resp { status, index })
}

async fn connect(addr: std::net::SocketAddr) -> std::io::Result<TcpStream> {
    let s = tokio::time::timeout(IO_TIMEOUT, TcpStream::connect(addr)).await??;
    s.set_nodelay(true)?;
    Ok(s)
}

/// `VmRSS` and `VmHWM` of this process, in MiB.
fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(f64::NAN, |kib| kib / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cores} cores, {cpu}")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// N sequential PUTs per connection over `conns` connections; returns writes per second.
async fn write_throughput(
    addr: std::net::SocketAddr,
    total: usize,
    conns: usize,
    same_key: bool,
) -> std::io::Result<f64> {
    let per = total / conns;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..conns {
        tasks.push(tokio::spawn(async move {
            let mut conn = connect(addr).await?;
            for i in 0..per {
                let path = if same_key {
                    "/v1/kv/bench/w/same".to_string()
                } else {
                    format!("/v1/kv/bench/w/{c}/{i}")
                };
                let r = request(&mut conn, "PUT", &path, format!("value-{i}").as_bytes()).await?;
                if r.status != 200 {
                    return Err(std::io::Error::other(format!("PUT answered {}", r.status)));
                }
            }
            Ok::<_, std::io::Error>(())
        }));
    }
    for t in tasks {
        t.await.map_err(std::io::Error::other)??;
    }
    Ok((per * conns) as f64 / start.elapsed().as_secs_f64())
}

async fn run(args: Args) -> Result<(), String> {
    // Client and server share this process: two descriptors per waiter, plus slack.
    let want = (args.waiters as u64) * 2 + 256;
    let (soft, hard) = rlimit::Resource::NOFILE.get().map_err(|e| e.to_string())?;
    if soft < want {
        rlimit::Resource::NOFILE
            .set(want.min(hard), hard)
            .map_err(|e| format!("cannot raise RLIMIT_NOFILE: {e}"))?;
    }
    let (soft, _) = rlimit::Resource::NOFILE.get().map_err(|e| e.to_string())?;
    if soft < want {
        return Err(format!(
            "RLIMIT_NOFILE is {soft}, need {want} for {} waiters",
            args.waiters
        ));
    }

    let server = DevServer::start(Config {
        max_conns_per_client: 0,
        ..Config::default()
    })
    .map_err(|e| e.to_string())?;
    let addr = server.addr();
    println!("bench-devserver on {}", machine());
    println!("dev server at {addr}");

    // --- write throughput ---
    let one = write_throughput(addr, args.writes, 1, false)
        .await
        .map_err(|e| e.to_string())?;
    let one_same = write_throughput(addr, args.writes, 1, true)
        .await
        .map_err(|e| e.to_string())?;
    let eight = write_throughput(addr, args.writes, 8, false)
        .await
        .map_err(|e| e.to_string())?;
    println!("KV PUT throughput: 1 connection {one:.0}/s (distinct keys), {one_same:.0}/s (one key); 8 connections {eight:.0}/s");

    // --- parked blocking queries ---
    let mut ctl = connect(addr).await.map_err(|e| e.to_string())?;
    request(&mut ctl, "PUT", &format!("/v1/kv/{KEY}"), b"v0")
        .await
        .map_err(|e| e.to_string())?;
    let index = request(&mut ctl, "GET", &format!("/v1/kv/{KEY}"), b"")
        .await
        .map_err(|e| e.to_string())?
        .index;
    let (rss_before, _) = rss_mib();
    server.reset_request_counts();
    let (done_tx, mut done_rx) =
        tokio::sync::mpsc::unbounded_channel::<std::io::Result<(Instant, u64)>>();
    let path = format!("/v1/kv/{KEY}?index={index}&wait=60s");
    let connect_start = Instant::now();
    let mut conns = Vec::with_capacity(args.waiters);
    for batch in (0..args.waiters).collect::<Vec<_>>().chunks(250) {
        let mut pending = Vec::new();
        for _ in batch {
            pending.push(tokio::spawn(connect(addr)));
        }
        for p in pending {
            conns.push(
                p.await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| format!("connect: {e}"))?,
            );
        }
    }
    for mut conn in conns {
        let tx = done_tx.clone();
        let path = path.clone();
        tokio::spawn(async move {
            let r = request(&mut conn, "GET", &path, b"")
                .await
                .map(|r| (Instant::now(), r.index));
            let _ = tx.send(r);
        });
    }
    drop(done_tx);
    // Parked = the server has routed every waiter's GET (it counts before blocking).
    let parked_by = Instant::now() + Duration::from_secs(60);
    loop {
        let n = server
            .request_counts()
            .by_route
            .get("GET /v1/kv")
            .copied()
            .unwrap_or(0);
        if n as usize >= args.waiters {
            break;
        }
        if Instant::now() > parked_by {
            return Err(format!(
                "only {n} of {} waiters reached the server",
                args.waiters
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let connect_time = connect_start.elapsed();
    if let Ok(Some(early)) = tokio::time::timeout(Duration::from_millis(200), done_rx.recv()).await
    {
        return Err(format!(
            "a waiter answered before the write: {:?}",
            early.map(|r| r.1)
        ));
    }
    let (rss_parked, _) = rss_mib();
    let t0 = Instant::now();
    request(&mut ctl, "PUT", &format!("/v1/kv/{KEY}"), b"v1")
        .await
        .map_err(|e| e.to_string())?;
    let mut lat = Vec::with_capacity(args.waiters);
    let mut failed = 0usize;
    let mut stale = 0usize;
    let collect_by = tokio::time::Instant::now() + Duration::from_secs(60);
    while lat.len() + failed < args.waiters {
        match tokio::time::timeout_at(collect_by, done_rx.recv()).await {
            Ok(Some(Ok((at, idx)))) => {
                if idx <= index {
                    stale += 1;
                }
                lat.push(at.duration_since(t0));
            }
            Ok(Some(Err(_))) => failed += 1,
            Ok(None) | Err(_) => break,
        }
    }
    let (_, hwm) = rss_mib();
    lat.sort();
    let p50 = percentile(&lat, 0.50);
    let p99 = percentile(&lat, 0.99);
    let max = lat.last().copied().unwrap_or_default();
    println!(
        "{} blocking queries on one key parked in {:.2}s; one PUT woke {} ({} with a stale index, {failed} failed)",
        args.waiters,
        connect_time.as_secs_f64(),
        lat.len(),
        stale
    );
    println!(
        "wake-up latency: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        ms(p50),
        ms(p99),
        ms(max)
    );
    println!(
        "RSS (client + server in one process): {rss_before:.1} MiB before, {rss_parked:.1} MiB with waiters parked, peak {hwm:.1} MiB"
    );
    println!(
        "bench-devserver: waiters={} woke={} wake_p50_ms={:.1} wake_p99_ms={:.1} peak_rss_mb={:.1} writes_per_s_1conn={:.0} writes_per_s_8conn={:.0}",
        args.waiters,
        lat.len(),
        ms(p50),
        ms(p99),
        hwm,
        one,
        eight
    );
    server.stop();
    if lat.len() != args.waiters || stale > 0 {
        return Err("not every waiter woke with the new index".into());
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return std::process::ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bench-devserver: cannot start runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-devserver: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
