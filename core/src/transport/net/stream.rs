//! The one connection type under every request: a TCP socket or, for an agent that serves
//! HTTP on a unix socket (Consul's `addresses.http = "unix:///path"`, `CONSUL_HTTP_ADDR=
//! unix:///path`), a unix stream socket. TLS, when asked for, is layered on top of either.
//!
//! [`Dial`] is where a client's connections go, decided once from its address; the engine
//! opens every connection through it.

use std::io;
use std::net::{Shutdown, TcpStream};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A connected socket to the agent.
#[derive(Debug)]
pub(crate) enum Stream {
    /// TCP (plain, or under TLS).
    Tcp(TcpStream),
    /// A unix stream socket.
    #[cfg(unix)]
    Unix(UnixStream),
}

/// Runs `$body` with `$s` bound to the inner socket, whichever kind it is.
macro_rules! each {
    ($stream:expr, $s:ident => $body:expr) => {
        match $stream {
            Stream::Tcp($s) => $body,
            #[cfg(unix)]
            Stream::Unix($s) => $body,
        }
    };
}

impl Stream {
    /// Makes reads and writes return `WouldBlock` instead of waiting (or wait again).
    pub(crate) fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        each!(self, s => s.set_nonblocking(on))
    }

    /// Sends small writes at once (TCP only: a unix socket has no Nagle to turn off).
    pub(crate) fn set_nodelay(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nodelay(true),
            #[cfg(unix)]
            Stream::Unix(_) => Ok(()),
        }
    }

    /// How long a blocking read may wait (`None`: for ever).
    pub(crate) fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        each!(self, s => s.set_read_timeout(t))
    }

    /// How long a blocking write may wait (`None`: for ever).
    pub(crate) fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        each!(self, s => s.set_write_timeout(t))
    }

    /// Ends both directions: a thread blocked on the socket returns at once.
    pub(crate) fn shutdown(&self) -> io::Result<()> {
        each!(self, s => s.shutdown(Shutdown::Both))
    }
}

impl io::Read for &Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        each!(*self, s => io::Read::read(&mut &*s, buf))
    }
}

impl io::Write for &Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        each!(*self, s => io::Write::write(&mut &*s, buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(unix)]
impl std::os::fd::AsFd for Stream {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        each!(self, s => s.as_fd())
    }
}

/// Where a client's connections go, decided once from its address: a TCP host and port (the
/// real host: a TLS server name only stands in the URL), or always the one unix socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Dial {
    /// TCP to this host (no brackets around an IPv6 one) and port.
    Tcp { host: String, port: u16 },
    /// The unix socket at this path, whatever the URL says (its host is `localhost`).
    Unix(PathBuf),
}

impl Dial {
    /// A connection to where this dials, blocking until `stop_at` at most. A socket file
    /// that is missing or refuses says so, with its path, as Consul's Go client does.
    pub(crate) fn connect(&self, stop_at: Instant) -> io::Result<Stream> {
        match self {
            Dial::Tcp { host, port } => connect_tcp(host, *port, stop_at),
            #[cfg(unix)]
            Dial::Unix(path) => UnixStream::connect(path).map(Stream::Unix).map_err(|e| {
                io::Error::new(e.kind(), format!("dial unix {}: {e}", path.display()))
            }),
            #[cfg(not(unix))]
            Dial::Unix(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "unix socket addresses need a unix system",
            )),
        }
    }

    /// `host:port` of a TCP target, as a proxy is asked to `CONNECT` to it.
    pub(crate) fn authority(&self) -> Option<String> {
        match self {
            Dial::Tcp { host, port } if host.contains(':') => Some(format!("[{host}]:{port}")),
            Dial::Tcp { host, port } => Some(format!("{host}:{port}")),
            Dial::Unix(_) => None,
        }
    }
}

/// A TCP connection to the first of `host`'s addresses that answers, each tried with what is
/// left until `stop_at`.
pub(crate) fn connect_tcp(host: &str, port: u16, stop_at: Instant) -> io::Result<Stream> {
    let addrs: Vec<std::net::SocketAddr> = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![std::net::SocketAddr::new(ip, port)],
        Err(_) => std::net::ToSocketAddrs::to_socket_addrs(&(host, port))?.collect(),
    };
    let mut last = io::Error::new(
        io::ErrorKind::NotFound,
        format!("{host} resolves to no address"),
    );
    for a in addrs.iter().take(16) {
        let left = stop_at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        match TcpStream::connect_timeout(a, left) {
            Ok(s) => return Ok(Stream::Tcp(s)),
            Err(e) => last = e,
        }
    }
    Err(last)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_unix_stream_reads_writes_and_shuts_down_like_tcp() {
        let dir = std::env::temp_dir().join(format!("baton-stream-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("s.sock");
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        let dial = Dial::Unix(path.clone());
        let soon = || std::time::Instant::now() + Duration::from_secs(1);
        let stream = dial.connect(soon()).expect("connect");
        let (mut server, _) = listener.accept().expect("accept");
        (&stream).write_all(b"ping").expect("write");
        let mut got = [0u8; 4];
        server.read_exact(&mut got).expect("read");
        assert_eq!(&got, b"ping");
        stream.shutdown().expect("shutdown");
        assert_eq!(server.read(&mut got).expect("eof"), 0);
        let _ = std::fs::remove_file(&path);
        let missing = Dial::Unix(dir.join("none.sock"))
            .connect(soon())
            .unwrap_err();
        assert!(missing.to_string().contains("none.sock"), "{missing}");
        assert_eq!(dial.authority(), None);
        let v6 = Dial::Tcp {
            host: "::1".into(),
            port: 8500,
        };
        assert_eq!(v6.authority().as_deref(), Some("[::1]:8500"));
    }
}
