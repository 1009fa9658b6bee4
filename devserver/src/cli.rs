//! The `baton-devserver` command line ([`run`]): the binary's `main`, and what the Python
//! package's `baton-devserver` entry point runs inside its extension module.
//!
//! Prints one line to stdout when ready, `BATON_DEVSERVER_ADDR=<host:port>`, so test fixtures
//! in any language can start it with `--port 0` and read the address, and with HTTPS on a
//! second one, `BATON_DEVSERVER_HTTPS_ADDR=<host:port>`, and with a unix socket
//! (`--addr unix:///path`) on the line after those, `BATON_DEVSERVER_UNIX_ADDR=unix:///path`
//! ([`UNIX_ADDR_LINE`]); everything else goes to stderr. The first line is always the TCP
//! address: a dev server always listens on TCP (with only a unix `--addr`, on a free port). Exits
//! cleanly on SIGINT or SIGTERM, and with `--exit-on-stdin-eof` when stdin reaches end of file
//! (see [`EXIT_ON_STDIN_EOF`]).
//!
//! `baton-devserver tls ...` writes a CA and certificates as `consul tls ca create` and
//! `consul tls cert create` do (`baton-devserver tls --help`).
//!
//! `baton-devserver proxy --to HOST:PORT` runs a fault proxy instead (see `FaultProxy`): it
//! prints `BATON_PROXY_ADDR=<host:port> BATON_PROXY_CONTROL=<host:port>` when ready and serves
//! the `/_proxy/` control API on the second address.

mod consul_cli;
mod tls_cli;

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use crate::{parse_go_duration, Config, ConsulVersion, DevServer, FaultProxy, TlsConfig};

const USAGE: &str = "usage: baton-devserver [options]
       baton-devserver proxy --to HOST:PORT [--listen HOST:PORT] [--control HOST:PORT]
       baton-devserver agent -config-file FILE.json [-dev] ...   (also as `consul agent ...`)
       baton-devserver tls ca create | cert create -server ... | self-signed create  (--help)

  --addr HOST:PORT           listen address (default 127.0.0.1:8500; port 0 picks a free port)
  --addr unix:///PATH        also serve HTTP on a unix socket (Consul's addresses.http
                             unix:///PATH; clients use CONSUL_HTTP_ADDR=unix:///PATH),
                             printed as BATON_DEVSERVER_UNIX_ADDR=unix:///PATH; give --addr twice
                             for TCP and unix; with only a unix --addr, TCP takes a free port
                             on 127.0.0.1 (there is always a TCP listener)
  --unix-socket-mode MODE    the socket file's permissions, octal (Consul's unix_sockets.mode)
  --port N                   shorthand for --addr 127.0.0.1:N
  --node NAME                the agent's node name (default baton-dev)
  --datacenter DC            the datacenter (default dc1)
  --session-ttl-min DUR      Consul's session_ttl_min (default 10s), e.g. 100ms for tests
  --acl-token TOKEN          enable ACLs (default deny); TOKEN is the management token
  --acl-token-rules S=RULES  with --acl-token: a token with secret S allowed what RULES grant
                             (Consul's policy language, e.g. 'key_prefix \"jobs/\" { policy =
                             \"write\" } session_prefix \"\" { policy = \"write\" }');
                             repeatable
  --max-conns-per-client N   Consul's limits.http_max_conns_per_client (0 = none); default that
                             of --consul-version: 200, 100 for 1.6.3 to 1.7.0, none before 1.6.3
  --kv-max-value-size N      Consul's kv_max_value_size in bytes (default 524288)
  --pretty                   indent JSON as `consul agent -dev` does
  --consul-version X.Y.Z     answer as that Consul release does where clients can tell
                             (default and `current`: {current}); e.g. 1.6.1 decodes txn numbers
                             through float64, below 1.7.0 sessions have only `Checks`,
                             below 1.17.0 every JSON body is pretty-printed as by `-dev`
  --https-port N             also serve HTTPS on 127.0.0.1:N (Consul's ports.https; 0 picks
                             a free port, printed as BATON_DEVSERVER_HTTPS_ADDR=<host:port>)
  --https-addr HOST:PORT     the same, on another address
  --tls-cert FILE            the HTTPS certificate (chain), PEM (Consul's cert_file)
  --tls-key FILE             its private key, PEM (Consul's key_file)
  --tls-ca FILE              CA certificates client certificates must chain to (ca_file)
  --verify-incoming          require a client certificate on HTTPS (mutual TLS); needs --tls-ca
  --exit-on-stdin-eof        shut down cleanly when stdin reaches end of file: a starter that
                             hands over a pipe and keeps its write end takes the server down
                             when it dies, however it dies (also with `proxy` and `agent`)
  -h, --help                 this text

Fault controls: PUT /_devserver/{pause,resume,restart,node/fail,node/heal},
PUT /_devserver/latency?d=50ms, PUT /_devserver/leader?present=false,
PUT /_devserver/session/invalidate/<id>, GET /_devserver/requests, GET /_devserver/status.

Faults for one client alone: run `baton-devserver proxy --to HOST:PORT` and point that client
at the proxy (`baton-devserver proxy --help` for its control API).";

const PROXY_USAGE: &str = "usage: baton-devserver proxy --to HOST:PORT [options]

A TCP fault proxy in front of a server (this dev server or a Consul agent): point one client at
it to cut that client off, slow it or break its connections while others talk to the server
directly. Prints one line to stdout when ready:
BATON_PROXY_ADDR=<host:port> BATON_PROXY_CONTROL=<host:port>

  --to HOST:PORT        the server to forward to (required)
  --listen HOST:PORT    where clients connect (default 127.0.0.1:0, a free port)
  --control HOST:PORT   the HTTP control API's address (default 127.0.0.1:0, a free port)
  --exit-on-stdin-eof   shut down when stdin reaches end of file (the starter is gone)
  -h, --help            this text

Control API (answers JSON `true`, or 400 with a message naming the bad parameter):
  PUT /_proxy/blackhole                 forward nothing either way, answer nothing; connections
                                        stay open and new ones are accepted (clients see silence)
  PUT /_proxy/delay?d=50ms[&jitter=20ms]  delay each forwarded chunk by d (± jitter), both ways;
                                        d=0s turns it off
  PUT /_proxy/drop-after?bytes=N        close each connection, open or new, after N more bytes
  PUT /_proxy/reset                     reset (RST) every open connection; later ones work
  PUT /_proxy/heal                      all faults off; bytes a blackhole held flow again on the
                                        same connections (nothing is closed)
  GET /_proxy/status                    {mode, upstream, delay, jitter, drop_after,
                                        connections: {accepted, open},
                                        bytes: {to_upstream, to_client}}";

/// The start of the line that names the unix socket, when there is one
/// (`BATON_DEVSERVER_UNIX_ADDR=unix:///abs/path`, after the HTTP and HTTPS lines).
pub const UNIX_ADDR_LINE: &str = "BATON_DEVSERVER_UNIX_ADDR=";

/// The flag that ties the server's life to its starter's: with it, a named thread reads stdin
/// and shuts the server down (as SIGTERM does) once stdin reaches end of file. A starter passes
/// a pipe as stdin and keeps the write end: the kernel closes that end when the starter
/// exits, whatever ends it (SIGKILL included), on Linux and macOS alike, so the server never
/// outlives it. Taken in any position and by every long-running mode (the server, `agent`,
/// `proxy`), so a wrapper can add it without knowing the rest of the command line.
pub const EXIT_ON_STDIN_EOF: &str = "--exit-on-stdin-eof";

/// Removes every [`EXIT_ON_STDIN_EOF`] from `args`; true when there was one.
fn take_exit_on_stdin_eof(args: &mut Vec<String>) -> bool {
    let before = args.len();
    args.retain(|a| a != EXIT_ON_STDIN_EOF);
    args.len() != before
}

/// Starts the thread that reads stdin to its end and then sends this process SIGTERM (taken
/// by [`Signals::wait`] like any other), logging why. Call after [`Signals::block`], so the
/// thread inherits the mask. The thread is not joined: a blocking read of stdin cannot be
/// cancelled portably, and it ends with the process (which exits once the server has
/// stopped); it holds nothing but stdin.
fn watch_stdin(what: &'static str) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("baton-devserver-stdin".into())
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = [0u8; 512];
            loop {
                match std::io::Read::read(&mut stdin, &mut buf) {
                    Ok(0) => break,
                    Ok(_) => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        log::warn!("{what}: reading stdin failed ({e}); taking it as closed");
                        break;
                    }
                }
            }
            log::info!("{what}: stdin closed (its starter is gone), shutting down");
            let _ =
                nix::sys::signal::kill(nix::unistd::Pid::this(), nix::sys::signal::Signal::SIGTERM);
        })
        .map(drop)
}

/// The main help text, with the default Consul version filled in.
fn usage() -> String {
    USAGE.replace("{current}", &ConsulVersion::CURRENT.to_string())
}

/// What `baton-devserver proxy` was asked for.
struct ProxyArgs {
    to: SocketAddr,
    listen: SocketAddr,
    control: SocketAddr,
}

/// `HOST:PORT` (a name is resolved; the first address wins).
fn socket_addr(flag: &str, v: &str) -> Result<SocketAddr, String> {
    v.to_socket_addrs()
        .map_err(|e| format!("{flag} {v:?}: {e} (want HOST:PORT)"))?
        .next()
        .ok_or_else(|| format!("{flag} {v:?}: no address (want HOST:PORT)"))
}

/// The path of a `unix://` address (Consul's `addresses.http` form and `CONSUL_HTTP_ADDR`'s:
/// `unix:///abs/path`, or `unix://rel/path` relative to the current directory); `None` for
/// any other address.
pub(crate) fn unix_socket_path(what: &str, v: &str) -> Result<Option<std::path::PathBuf>, String> {
    match v.strip_prefix("unix://") {
        None => Ok(None),
        Some("") => Err(format!("{what} {v:?}: no path after unix://")),
        Some(path) => Ok(Some(path.into())),
    }
}

/// A file mode in octal, as Consul's `unix_sockets.mode` (`"0700"`).
pub(crate) fn parse_mode(v: &str) -> Result<u32, String> {
    u32::from_str_radix(v, 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| format!("{v:?}: invalid mode specified (want octal, e.g. 0700)"))
}

fn parse_proxy_args(args: &[String]) -> Result<ProxyArgs, String> {
    let local = SocketAddr::from(([127, 0, 0, 1], 0));
    let (mut to, mut listen, mut control) = (None, local, local);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut value = || -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag {
            "-h" | "--help" => return Err(String::new()),
            "--to" => to = Some(socket_addr(flag, &value()?)?),
            "--listen" => listen = socket_addr(flag, &value()?)?,
            "--control" => control = socket_addr(flag, &value()?)?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let to = to.ok_or("--to HOST:PORT is required")?;
    Ok(ProxyArgs {
        to,
        listen,
        control,
    })
}

fn parse_args(args: &[String]) -> Result<Config, String> {
    let mut cfg = Config {
        addr: SocketAddr::from(([127, 0, 0, 1], 8500)),
        ..Config::default()
    };
    let mut tls = TlsConfig::default();
    // Whether --addr HOST:PORT or --port named the TCP address.
    let mut tcp_given = false;
    // --max-conns-per-client, when given; else the emulated version's default (after the loop,
    // so the flags may come in any order).
    let mut max_conns = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut value = || -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag {
            "-h" | "--help" => return Err(String::new()),
            "--addr" => {
                let v = value()?;
                if let Some(path) = unix_socket_path("--addr", &v)? {
                    if cfg.unix_socket.is_some() {
                        return Err(format!(
                            "--addr {v:?}: a second unix socket (the dev server serves one)"
                        ));
                    }
                    cfg.unix_socket = Some(path);
                } else {
                    // As before unix sockets: the last TCP --addr or --port wins.
                    tcp_given = true;
                    cfg.addr = v.parse().map_err(|e| {
                        format!("--addr {v:?}: {e} (want HOST:PORT or unix:///path)")
                    })?;
                }
            }
            "--port" => {
                let v = value()?;
                let p: u16 = v
                    .parse()
                    .map_err(|_| format!("--port {v:?}: not a port number"))?;
                tcp_given = true;
                cfg.addr = SocketAddr::from(([127, 0, 0, 1], p));
            }
            "--unix-socket-mode" => {
                let v = value()?;
                cfg.unix_socket_mode =
                    Some(parse_mode(&v).map_err(|e| format!("--unix-socket-mode {e}"))?);
            }
            "--node" => cfg.node_name = value()?,
            "--datacenter" => cfg.datacenter = value()?,
            "--session-ttl-min" => {
                let v = value()?;
                let ns = parse_go_duration(&v).map_err(|e| format!("--session-ttl-min: {e}"))?;
                if ns <= 0 {
                    return Err("--session-ttl-min must be positive".into());
                }
                cfg.session_ttl_min = Duration::from_nanos(ns as u64);
            }
            "--acl-token" => cfg.acl_token = Some(value()?),
            "--acl-token-rules" => {
                let v = value()?;
                let (secret, rules) = v
                    .split_once('=')
                    .ok_or_else(|| format!("--acl-token-rules {v:?}: want SECRET=RULES"))?;
                cfg.acl_tokens.push((secret.to_string(), rules.to_string()));
            }
            "--max-conns-per-client" => {
                let v = value()?;
                max_conns = Some(
                    v.parse()
                        .map_err(|_| format!("--max-conns-per-client {v:?}: not a number"))?,
                );
            }
            "--kv-max-value-size" => {
                let v = value()?;
                cfg.kv_max_value_size = v
                    .parse()
                    .map_err(|_| format!("--kv-max-value-size {v:?}: not a number"))?;
            }
            "--pretty" => cfg.pretty = true,
            "--https-port" => {
                let v = value()?;
                let p: u16 = v
                    .parse()
                    .map_err(|_| format!("--https-port {v:?}: not a port number"))?;
                cfg.https_addr = Some(SocketAddr::from(([127, 0, 0, 1], p)));
            }
            "--https-addr" => {
                let v = value()?;
                cfg.https_addr = Some(
                    v.parse()
                        .map_err(|e| format!("--https-addr {v:?}: {e} (want HOST:PORT)"))?,
                );
            }
            "--tls-cert" => tls.cert_file = value()?.into(),
            "--tls-key" => tls.key_file = value()?.into(),
            "--tls-ca" => tls.ca_file = Some(value()?.into()),
            "--verify-incoming" => tls.verify_incoming = true,
            "--consul-version" => {
                let v = value()?;
                cfg.consul_version =
                    ConsulVersion::parse(&v).map_err(|e| format!("--consul-version: {e}"))?;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    // Consul's default limit depends on the release (none before 1.6.3, 100 until 1.7.1); an
    // explicit --max-conns-per-client (0 included) wins.
    cfg.max_conns_per_client =
        max_conns.unwrap_or_else(|| cfg.consul_version.http_max_conns_per_client());
    if cfg.unix_socket.is_none() && cfg.unix_socket_mode.is_some() {
        return Err("--unix-socket-mode needs a unix socket: add --addr unix:///path".into());
    }
    if cfg.unix_socket.is_some() && !tcp_given {
        // Unix-only: the TCP listener, which every dev server has, takes a free port rather
        // than 8500, so it collides with nothing the caller did not ask for.
        cfg.addr = SocketAddr::from(([127, 0, 0, 1], 0));
    }
    if tls != TlsConfig::default() {
        if cfg.https_addr.is_none() {
            return Err(
                "TLS settings need an HTTPS listener: add --https-port N (as Consul's ports.https)"
                    .into(),
            );
        }
        cfg.tls = Some(tls);
    }
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

/// Runs `baton-devserver` with the arguments after the program name (`argv0`, which tells
/// whether it was invoked as `consul`) until SIGINT or SIGTERM, and gives the exit status.
/// Logs go to stderr (`RUST_LOG`, default `info`) unless a logger is already installed.
pub fn run(argv0: Option<&str>, mut args: Vec<String>) -> u8 {
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .target(env_logger::Target::Stderr)
        .try_init();
    let exit_on_stdin_eof = take_exit_on_stdin_eof(&mut args);
    if args.first().map(String::as_str) == Some("proxy") {
        return run_proxy(&args[1..], exit_on_stdin_eof);
    }
    if args.first().map(String::as_str) == Some("tls") {
        return match tls_cli::run(&args[1..]) {
            Ok(files) => {
                for f in files {
                    println!("==> Saved {}", f.display());
                }
                0
            }
            Err(e) if e.is_empty() => {
                println!("{}", tls_cli::USAGE);
                0
            }
            Err(e) => {
                eprintln!("baton-devserver tls: {e}");
                2
            }
        };
    }
    // `consul agent -config-file F` (the Go test harness), through a symlink named `consul`
    // or as `baton-devserver agent ...`.
    let invoked_as_consul = argv0
        .and_then(|a0| std::path::Path::new(a0).file_name().map(|f| f == "consul"))
        .unwrap_or(false);
    // `consul version [-format=json]`: how Consul's Go test harness learns the version.
    if invoked_as_consul && args.first().map(String::as_str) == Some("version") {
        return consul_cli::run_version(&args[1..]);
    }
    let parsed = if args.first().map(String::as_str) == Some("agent") {
        consul_cli::parse_agent_args(&args[1..])
    } else if invoked_as_consul {
        Err(format!(
            "as `consul`, only `consul agent ...` is supported (got {:?})",
            args.first().map(String::as_str).unwrap_or("")
        ))
    } else {
        parse_args(&args)
    };
    let cfg = match parsed {
        Ok(c) => c,
        Err(e) if e.is_empty() => {
            println!("{}", usage());
            return 0;
        }
        Err(e) => {
            eprintln!("baton-devserver: {e}\n\n{}", usage());
            return 2;
        }
    };
    // Block SIGINT/SIGTERM before any thread starts so every thread inherits the mask and the
    // signal is only ever taken by the waiter below.
    let signals = match Signals::block() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("baton-devserver: cannot set up signal handling: {e}");
            return 1;
        }
    };
    if exit_on_stdin_eof {
        if let Err(e) = watch_stdin("baton-devserver") {
            eprintln!("baton-devserver: cannot start the stdin watcher: {e}");
            return 1;
        }
    }
    let server = match DevServer::start(cfg.clone()) {
        Ok(s) => s,
        Err(e) => {
            let unix = cfg
                .unix_socket
                .as_ref()
                .map(|p| format!(" and unix://{}", p.display()))
                .unwrap_or_default();
            eprintln!("baton-devserver: cannot listen on {}{unix}: {e}", cfg.addr);
            return 1;
        }
    };
    // A `PUT /v1/agent/leave` stops the server; the process then exits, as a Consul agent's
    // does after leaving. Set before the address is out, so no leave can come first.
    server.on_left(|| {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::this(), nix::sys::signal::Signal::SIGTERM);
    });
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "BATON_DEVSERVER_ADDR={}", server.http_addr());
    if let Some(a) = server.https_addr() {
        let _ = writeln!(out, "BATON_DEVSERVER_HTTPS_ADDR={a}");
    }
    if let Some(u) = server.unix_url() {
        let _ = writeln!(out, "{UNIX_ADDR_LINE}{u}");
    }
    let _ = out.flush();
    drop(out);
    log::info!(
        "baton-devserver listening on {}{}{} (Consul {}, node {}, dc {}, session_ttl_min {:?}, acl {})",
        server.http_addr(),
        match (server.https_addr(), &cfg.tls) {
            (Some(a), Some(t)) => format!(
                " and https://{a}{}",
                if t.verify_incoming { " (verify_incoming)" } else { "" }
            ),
            _ => String::new(),
        },
        server
            .unix_url()
            .map(|u| format!(" and {u}"))
            .unwrap_or_default(),
        cfg.consul_version,
        cfg.node_name,
        cfg.datacenter,
        cfg.session_ttl_min,
        if cfg.acls_enabled() { "on" } else { "off" }
    );
    let sig = signals.wait();
    if server.has_left() {
        log::info!("baton-devserver: left the cluster, shutting down");
    } else {
        log::info!("baton-devserver: received {sig}, shutting down");
    }
    server.stop();
    0
}

/// `baton-devserver proxy ...`.
fn run_proxy(args: &[String], exit_on_stdin_eof: bool) -> u8 {
    let pa = match parse_proxy_args(args) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{PROXY_USAGE}");
            return 0;
        }
        Err(e) => {
            eprintln!("baton-devserver proxy: {e}\n\n{PROXY_USAGE}");
            return 2;
        }
    };
    let signals = match Signals::block() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("baton-devserver proxy: cannot set up signal handling: {e}");
            return 1;
        }
    };
    if exit_on_stdin_eof {
        if let Err(e) = watch_stdin("baton-devserver proxy") {
            eprintln!("baton-devserver proxy: cannot start the stdin watcher: {e}");
            return 1;
        }
    }
    let proxy = match FaultProxy::start(pa.to, pa.listen) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("baton-devserver proxy: cannot listen on {}: {e}", pa.listen);
            return 1;
        }
    };
    let control = match proxy.serve_control(pa.control) {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "baton-devserver proxy: cannot listen on {} (control): {e}",
                pa.control
            );
            return 1;
        }
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "BATON_PROXY_ADDR={} BATON_PROXY_CONTROL={control}",
        proxy.addr()
    );
    let _ = out.flush();
    drop(out);
    log::info!(
        "baton-devserver proxy listening on {}, forwarding to {}, control on {control}",
        proxy.addr(),
        pa.to
    );
    let sig = signals.wait();
    log::info!("baton-devserver proxy: received {sig}, shutting down");
    proxy.stop();
    0
}

/// SIGINT/SIGTERM handling without a handler function: the signals are blocked in every thread
/// and taken synchronously with `sigwait`.
struct Signals {
    set: nix::sys::signal::SigSet,
}

impl Signals {
    fn block() -> nix::Result<Signals> {
        use nix::sys::signal::{SigSet, Signal};
        let mut set = SigSet::empty();
        set.add(Signal::SIGINT);
        set.add(Signal::SIGTERM);
        set.thread_block()?;
        Ok(Signals { set })
    }

    fn wait(&self) -> String {
        match self.set.wait() {
            Ok(s) => s.as_str().to_string(),
            Err(e) => format!("error {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Config {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        parse_args(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    #[test]
    fn max_conns_per_client_defaults_to_the_emulated_versions() {
        assert_eq!(parse(&[]).max_conns_per_client, 200);
        for (version, conns) in [
            ("current", 200),
            ("1.6.1", 0),
            ("1.6.2", 0),
            ("1.6.3", 100),
            ("1.7.0", 100),
            ("1.7.1", 200),
        ] {
            let c = parse(&["--consul-version", version]);
            assert_eq!(c.max_conns_per_client, conns, "{version}");
            let c = parse(&[&format!("--consul-version={version}")]);
            assert_eq!(c.max_conns_per_client, conns, "{version}");
        }
        // The way the Python and Node test fixtures start it (make test-versions).
        let fixture = [
            "--port",
            "0",
            "--session-ttl-min",
            "100ms",
            "--consul-version",
            "1.0.8",
        ];
        assert_eq!(parse(&fixture).max_conns_per_client, 0);
    }

    #[test]
    fn an_explicit_max_conns_per_client_wins_in_either_order() {
        for args in [
            ["--max-conns-per-client", "5", "--consul-version", "1.6.1"],
            ["--consul-version", "1.6.1", "--max-conns-per-client", "5"],
            ["--max-conns-per-client", "5", "--consul-version", "1.7.0"],
            ["--consul-version", "current", "--max-conns-per-client", "5"],
        ] {
            assert_eq!(parse(&args).max_conns_per_client, 5, "{args:?}");
        }
        for args in [
            ["--max-conns-per-client", "0", "--consul-version", "current"],
            ["--consul-version", "1.7.0", "--max-conns-per-client", "0"],
        ] {
            assert_eq!(parse(&args).max_conns_per_client, 0, "{args:?}");
        }
        let c = parse(&["--max-conns-per-client=250", "--consul-version=1.6.1"]);
        assert_eq!(c.max_conns_per_client, 250);
        let e = parse_args(&["--max-conns-per-client".into(), "x".into()]).unwrap_err();
        assert!(e.contains("--max-conns-per-client \"x\""), "{e}");
    }

    #[test]
    fn help_names_the_versions_connection_limits() {
        let help = usage();
        assert!(help.contains("--max-conns-per-client N"), "{help}");
        assert!(help.contains("100 for 1.6.3 to 1.7.0"), "{help}");
        assert!(help.contains("none before 1.6.3"), "{help}");
    }
}
