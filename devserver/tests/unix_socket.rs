//! HTTP on a unix socket (`Config::unix_socket`, `--addr unix:///path`, Consul's
//! `addresses.http = "unix:///path"`): the same endpoints, state and fault controls as over
//! TCP; a stale socket file is replaced, any other file refused, the socket removed on stop;
//! every unix-socket client counts as one client for the per-client connection cap, as Consul's
//! limiter (go-connlimit) keys them. Requests go through hyper's HTTP/1.1 client over
//! `tokio::net::UnixStream` (and `TcpStream`, to see the same state from TCP).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use baton_devserver::{Config, DevServer};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

/// Bound of one request (a failure, not a speed assertion: the machine may be loaded).
const TIMEOUT: Duration = Duration::from_secs(10);
/// Bound of "eventually" waits.
const PATIENCE: Duration = Duration::from_secs(10);

/// Where a request goes.
#[derive(Clone, Debug)]
enum Dest {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

/// An answer: status, headers, body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: hyper::HeaderMap,
    body: Bytes,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {} {:?}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn index(&self) -> u64 {
        self.headers
            .get("x-consul-index")
            .expect("X-Consul-Index")
            .to_str()
            .unwrap()
            .parse()
            .unwrap()
    }
}

/// One HTTP/1.1 connection (hyper's client), on a runtime of its own, so tests need no async.
struct Conn {
    rt: tokio::runtime::Runtime,
    sender: SendRequest<Full<Bytes>>,
}

impl Conn {
    fn open(dest: &Dest) -> std::io::Result<Conn> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let sender = rt.block_on(async {
            let handshake = async {
                match dest {
                    Dest::Unix(p) => {
                        let s = tokio::net::UnixStream::connect(p).await?;
                        hyper::client::conn::http1::handshake(TokioIo::new(s))
                            .await
                            .map(|(tx, conn)| {
                                tokio::spawn(conn);
                                tx
                            })
                            .map_err(std::io::Error::other)
                    }
                    Dest::Tcp(a) => {
                        let s = tokio::net::TcpStream::connect(a).await?;
                        hyper::client::conn::http1::handshake(TokioIo::new(s))
                            .await
                            .map(|(tx, conn)| {
                                tokio::spawn(conn);
                                tx
                            })
                            .map_err(std::io::Error::other)
                    }
                }
            };
            tokio::time::timeout(TIMEOUT, handshake)
                .await
                .map_err(|_| std::io::Error::other("no handshake in time"))?
        })?;
        Ok(Conn { rt, sender })
    }

    /// Sends a request and reads the whole answer, within `timeout`.
    fn send_within(
        &mut self,
        method: &str,
        target: &str,
        body: &[u8],
        timeout: Duration,
    ) -> Result<Answer, String> {
        let req = hyper::Request::builder()
            .method(method)
            .uri(target)
            .header("host", "localhost")
            .body(Full::new(Bytes::copy_from_slice(body)))
            .map_err(|e| e.to_string())?;
        let sender = &mut self.sender;
        self.rt.block_on(async {
            let exchange = async {
                sender.ready().await.map_err(|e| e.to_string())?;
                let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
                let (parts, body) = resp.into_parts();
                let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
                Ok(Answer {
                    status: parts.status.as_u16(),
                    headers: parts.headers,
                    body,
                })
            };
            tokio::time::timeout(timeout, exchange)
                .await
                .map_err(|_| format!("{method} {target}: no answer within {timeout:?}"))?
        })
    }

    fn send(&mut self, method: &str, target: &str, body: &[u8]) -> Answer {
        self.send_within(method, target, body, TIMEOUT)
            .unwrap_or_else(|e| panic!("{method} {target}: {e}"))
    }

    /// Whether the server has closed the connection (waits up to [`PATIENCE`] for it).
    fn closed_by_server(&mut self) -> bool {
        let sender = &mut self.sender;
        self.rt.block_on(async {
            let deadline = tokio::time::Instant::now() + PATIENCE;
            loop {
                if sender.is_closed() {
                    return true;
                }
                // Lets the connection's task read the end of the connection.
                match tokio::time::timeout_at(deadline, sender.ready()).await {
                    Ok(Err(_)) => return true,
                    Ok(Ok(())) if tokio::time::Instant::now() >= deadline => return false,
                    Ok(Ok(())) => tokio::time::sleep(Duration::from_millis(20)).await, // poll interval
                    Err(_) => return false,
                }
            }
        })
    }
}

/// One request on a connection of its own.
fn req(dest: &Dest, method: &str, target: &str, body: &[u8]) -> Answer {
    Conn::open(dest)
        .unwrap_or_else(|e| panic!("connect to {dest:?}: {e}"))
        .send(method, target, body)
}

/// A fresh directory for one test's socket (short: a socket path has a length limit).
fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("baton-unix-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn start_on(path: &Path) -> DevServer {
    DevServer::start(Config {
        unix_socket: Some(path.to_path_buf()),
        session_ttl_min: Duration::from_millis(200),
        ..Config::default()
    })
    .expect("dev server starts")
}

#[track_caller]
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !f() {
        assert!(Instant::now() < deadline, "not within {PATIENCE:?}: {what}");
        std::thread::sleep(Duration::from_millis(10)); // polling interval of the condition
    }
}

#[test]
fn kv_sessions_and_blocking_queries_work_over_the_unix_socket_with_the_tcp_state() {
    let dir = tmp("kv");
    let path = dir.join("consul.sock");
    let s = start_on(&path);
    assert_eq!(s.unix_socket(), Some(path.as_path()));
    assert_eq!(s.unix_url().unwrap(), format!("unix://{}", path.display()));
    assert!(s.unix_url().unwrap().starts_with("unix:///"));
    let unix = Dest::Unix(path.clone());
    let tcp = Dest::Tcp(s.addr());
    // A KV write and read over the socket; TCP sees the same store.
    let w = req(&unix, "PUT", "/v1/kv/app/config?flags=7", b"v1");
    assert_eq!((w.status, w.json()), (200, json!(true)));
    let r = req(&unix, "GET", "/v1/kv/app/config", b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.json()[0]["Key"], "app/config");
    assert_eq!(r.json()[0]["Flags"], 7);
    assert_eq!(req(&unix, "GET", "/v1/kv/app/config?raw", b"").body, "v1");
    assert_eq!(req(&tcp, "GET", "/v1/kv/app/config?raw", b"").body, "v1");
    // A session and a lock.
    let c = req(
        &unix,
        "PUT",
        "/v1/session/create",
        br#"{"TTL": "10s", "Name": "unix"}"#,
    );
    assert_eq!(c.status, 200, "{}", c.text());
    let sid = c.json()["ID"].as_str().unwrap().to_string();
    let a = req(&unix, "PUT", &format!("/v1/kv/lock?acquire={sid}"), b"held");
    assert_eq!((a.status, a.json()), (200, json!(true)));
    let held = req(&tcp, "GET", "/v1/kv/lock", b"").json();
    assert_eq!(held[0]["Session"], sid.as_str());
    assert_eq!(held[0]["LockIndex"], 1);
    let info = req(&unix, "GET", &format!("/v1/session/info/{sid}"), b"").json();
    assert_eq!(info[0]["Name"], "unix");
    // A blocking query over the socket, woken by a write over TCP.
    let index = req(&unix, "GET", "/v1/kv/app/config", b"").index();
    let waiter = {
        let unix = unix.clone();
        std::thread::spawn(move || {
            req(
                &unix,
                "GET",
                &format!("/v1/kv/app/config?index={index}&wait=30s"),
                b"",
            )
        })
    };
    eventually("the blocking query parked", || {
        s.request_counts()
            .blocking_by_route
            .get("GET /v1/kv")
            .is_some_and(|n| *n >= 1)
    });
    assert!(!waiter.is_finished(), "answered before any write");
    let w = req(&tcp, "PUT", "/v1/kv/app/config", b"v2");
    assert_eq!(w.status, 200);
    let woke = waiter.join().unwrap();
    assert_eq!(woke.status, 200);
    assert!(woke.index() > index, "{} <= {index}", woke.index());
    assert_eq!(woke.json()[0]["Value"], "djI="); // base64("v2")
    s.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fault_controls_counts_and_the_journal_cover_unix_connections() {
    let dir = tmp("faults");
    let path = dir.join("consul.sock");
    let s = start_on(&path);
    let unix = Dest::Unix(path.clone());
    s.record_requests(true);
    // Counts and the journal.
    req(&unix, "PUT", "/v1/kv/j?flags=1", b"x");
    let counts = s.request_counts();
    assert_eq!(counts.by_route.get("PUT /v1/kv"), Some(&1));
    let journal = s.journal();
    assert_eq!(journal.len(), 1, "{journal:?}");
    assert_eq!(
        (
            journal[0].method.as_str(),
            journal[0].path.as_str(),
            journal[0].query.as_str(),
            journal[0].body.as_str()
        ),
        ("PUT", "/v1/kv/j", "flags=1", "x")
    );
    // The control API answers over the socket too.
    let status = req(&unix, "GET", "/_devserver/status", b"").json();
    assert_eq!(status["paused"], false);
    // An open unix connection counts, and a pause holds its requests.
    let mut conn = Conn::open(&unix).unwrap();
    assert_eq!(conn.send("GET", "/v1/status/leader", b"").status, 200);
    eventually("the unix connection counted open", || {
        s.open_connections() >= 1
    });
    s.pause();
    let waiter = {
        let unix = unix.clone();
        std::thread::spawn(move || req(&unix, "GET", "/v1/kv/j?raw", b""))
    };
    eventually("the paused request arrived", || {
        s.request_counts().in_flight.get("GET /v1/kv/j") == Some(&1)
    });
    assert!(!waiter.is_finished(), "answered while paused");
    s.resume();
    assert_eq!(waiter.join().unwrap().body, "x");
    // A restart drops every unix connection that carried a Consul request, and loses state.
    s.restart();
    assert!(
        conn.closed_by_server(),
        "the unix connection survived a restart"
    );
    let gone = req(&unix, "GET", "/v1/kv/j", b"");
    assert_eq!(gone.status, 404);
    s.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unix_clients_share_one_connection_cap_apart_from_tcp_clients() {
    let dir = tmp("cap");
    let path = dir.join("consul.sock");
    let s = DevServer::start(Config {
        unix_socket: Some(path.clone()),
        max_conns_per_client: 2,
        ..Config::default()
    })
    .unwrap();
    let unix = Dest::Unix(path.clone());
    let mut held: Vec<Conn> = (0..2)
        .map(|_| {
            let mut c = Conn::open(&unix).unwrap();
            assert_eq!(c.send("GET", "/v1/status/leader", b"").status, 200);
            c
        })
        .collect();
    // Two different unix clients are one client to the cap (go-connlimit keys them all as
    // `unix/@`): the third is refused with the limiter's answer.
    let refused = req(&unix, "GET", "/v1/status/leader", b"");
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert_eq!(
        refused.text(),
        "Your IP is issuing too many concurrent connections, please rate limit your calls\n"
    );
    // TCP clients count apart.
    let tcp = Dest::Tcp(s.addr());
    let mut tcp_conns: Vec<Conn> = (0..2).map(|_| Conn::open(&tcp).unwrap()).collect();
    for c in &mut tcp_conns {
        assert_eq!(c.send("GET", "/v1/status/leader", b"").status, 200);
    }
    // A freed unix slot is usable again.
    drop(held.pop());
    eventually("a freed unix slot reusable", || {
        Conn::open(&unix)
            .ok()
            .and_then(|mut c| c.send_within("GET", "/v1/status/leader", b"", TIMEOUT).ok())
            .is_some_and(|a| a.status == 200)
    });
    s.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stale_socket_is_replaced_and_the_socket_file_goes_when_the_server_stops() {
    let dir = tmp("stale");
    let path = dir.join("consul.sock");
    // What a server killed without cleaning up leaves behind: a socket file nobody serves.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(std::fs::symlink_metadata(&path)
        .unwrap()
        .file_type()
        .is_socket());
    let s = start_on(&path);
    let w = req(&Dest::Unix(path.clone()), "PUT", "/v1/kv/k", b"v");
    assert_eq!((w.status, w.json()), (200, json!(true)));
    s.stop();
    assert!(!path.exists(), "the socket file is still there after stop");
    // Dropping the handle removes it too.
    let s = start_on(&path);
    assert!(path.exists());
    drop(s);
    assert!(!path.exists(), "the socket file is still there after drop");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_path_that_is_not_a_socket_is_refused_naming_it_and_left_alone() {
    let dir = tmp("file");
    let path = dir.join("data.txt");
    std::fs::write(&path, b"keep me").unwrap();
    let e = DevServer::start(Config {
        unix_socket: Some(path.clone()),
        ..Config::default()
    })
    .expect_err("a regular file at the socket path");
    let msg = e.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("not a socket"), "{msg}");
    assert!(msg.contains("regular file"), "{msg}");
    assert_eq!(std::fs::read(&path).unwrap(), b"keep me");
    // A directory too.
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let e = DevServer::start(Config {
        unix_socket: Some(sub.clone()),
        ..Config::default()
    })
    .expect_err("a directory at the socket path");
    assert!(e.to_string().contains("directory"), "{e}");
    assert!(sub.is_dir());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The lines the process prints on stdout until it has printed `want` of them.
fn start_binary(args: &[&str], want: usize) -> (Child, Vec<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_baton-devserver"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    for _ in 0..want {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        lines.push(line.trim_end().to_string());
    }
    (child, lines)
}

fn stop_binary(mut child: Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(child.wait().unwrap().success());
}

/// The TCP address and the unix socket path of the ready lines.
fn addresses(lines: &[String]) -> (SocketAddr, PathBuf) {
    let tcp = lines[0]
        .strip_prefix("BATON_DEVSERVER_ADDR=")
        .unwrap_or_else(|| panic!("first line {:?}", lines[0]))
        .parse()
        .unwrap();
    let unix = lines
        .last()
        .and_then(|l| l.strip_prefix(baton_devserver::cli::UNIX_ADDR_LINE))
        .and_then(|u| u.strip_prefix("unix://"))
        .unwrap_or_else(|| panic!("no unix line in {lines:?}"));
    (tcp, PathBuf::from(unix))
}

#[test]
fn the_command_line_serves_a_unix_addr_alone_or_beside_tcp() {
    let dir = tmp("cli");
    let path = dir.join("cli.sock");
    let addr = format!("unix://{}", path.display());
    // A unix --addr alone: the socket, and TCP on a free port (there is always a TCP
    // listener, and the first line still names it).
    let (child, lines) = start_binary(&["--addr", &addr, "--session-ttl-min", "1s"], 2);
    let (tcp, unix_path) = addresses(&lines);
    assert_eq!(unix_path, path);
    assert_eq!(lines[1], format!("BATON_DEVSERVER_UNIX_ADDR={addr}"));
    let unix = Dest::Unix(path.clone());
    let w = req(&unix, "PUT", "/v1/kv/cli", b"over-unix");
    assert_eq!((w.status, w.json()), (200, json!(true)));
    assert_eq!(
        req(&Dest::Tcp(tcp), "GET", "/v1/kv/cli?raw", b"").body,
        "over-unix"
    );
    stop_binary(child);
    assert!(!path.exists(), "the socket file outlived the process");
    // Both, with HTTPS absent: the TCP line first, then the unix one.
    let (child, lines) = start_binary(
        &[
            "--addr",
            "127.0.0.1:0",
            "--addr",
            &addr,
            "--unix-socket-mode",
            "0600",
        ],
        2,
    );
    let (tcp, _) = addresses(&lines);
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let me = req(&Dest::Tcp(tcp), "GET", "/v1/agent/self", b"").json();
    assert_eq!(me["Config"]["NodeName"], "baton-dev");
    assert_eq!(req(&unix, "GET", "/v1/status/leader", b"").status, 200);
    stop_binary(child);
    // Two unix sockets are refused.
    let out = Command::new(env!("CARGO_BIN_EXE_baton-devserver"))
        .args(["--addr", &addr, "--addr", "unix:///tmp/other.sock"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("a second unix socket"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A regular file at the path: the process says so and exits.
    std::fs::write(&path, b"x").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_baton-devserver"))
        .args(["--addr", &addr])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&path.display().to_string()) && err.contains("not a socket"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn consul_agent_addresses_http_may_name_a_unix_socket() {
    let dir = tmp("agent");
    let path = dir.join("agent.sock");
    // TCP and unix together, space-separated, as Consul's addresses.http takes them.
    let config = json!({
        "node_name": "node-unix",
        "addresses": {"http": format!("127.0.0.1 unix://{}", path.display())},
        "ports": {"http": 0, "serf_lan": 0, "serf_wan": 0},
        "unix_sockets": {"mode": "0700"}
    });
    let file = dir.join("config.json");
    std::fs::write(&file, serde_json::to_vec(&config).unwrap()).unwrap();
    let (child, lines) = start_binary(&["agent", "-config-file", file.to_str().unwrap()], 2);
    let (tcp, unix_path) = addresses(&lines);
    assert_eq!(unix_path, path);
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let unix = Dest::Unix(path.clone());
    let me = req(&unix, "GET", "/v1/agent/self", b"").json();
    assert_eq!(me["Config"]["NodeName"], "node-unix");
    req(&unix, "PUT", "/v1/kv/agent", b"1");
    assert_eq!(
        req(&Dest::Tcp(tcp), "GET", "/v1/kv/agent?raw", b"").body,
        "1"
    );
    stop_binary(child);
    assert!(!path.exists());
    // A unix socket alone.
    let config = json!({
        "addresses": {"http": format!("unix://{}", path.display())},
        "ports": {"serf_lan": 0, "serf_wan": 0}
    });
    std::fs::write(&file, serde_json::to_vec(&config).unwrap()).unwrap();
    let (child, lines) = start_binary(&["agent", "-config-file", file.to_str().unwrap()], 2);
    let (_, unix_path) = addresses(&lines);
    assert_eq!(unix_path, path);
    assert_eq!(req(&unix, "GET", "/v1/status/leader", b"").status, 200);
    stop_binary(child);
    // client_addr may not be a unix socket (Consul's error text).
    let config = json!({"client_addr": format!("unix://{}", path.display())});
    std::fs::write(&file, serde_json::to_vec(&config).unwrap()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_baton-devserver"))
        .args(["agent", "-config-file", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("client_addr cannot be a unix socket"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
