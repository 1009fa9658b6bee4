//! The socket of a hostile server written in a test (`hostile.rs`, `hostile_answers.rs`): TCP,
//! a unix socket, or TLS over TCP, as `BATON_TEST_TRANSPORT` says, so that the answers no
//! Consul gives reach the client over each way it can connect. The server's bytes are the
//! test's own; only the connection under them changes.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use baton::ClientBuilder;

use super::{socket_path, test_pki, test_transport, Transport};

/// Where a hostile server listens.
pub enum RawListener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
    /// TLS over TCP: the server's config, the CA its clients trust, the certificates' directory.
    Tls(TcpListener, Arc<rustls::ServerConfig>, PathBuf, PathBuf),
}

/// One accepted connection (over TLS, the handshake is made by the first read or write).
pub enum RawConn {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Box<rustls::StreamOwned<rustls::ServerConnection, TcpStream>>),
}

impl RawListener {
    /// A listener of the suite's transport.
    pub fn bind() -> RawListener {
        match test_transport() {
            Transport::Tcp => RawListener::Tcp(TcpListener::bind("127.0.0.1:0").unwrap()),
            Transport::Unix => {
                let path = socket_path();
                let _ = std::fs::remove_file(&path);
                RawListener::Unix(UnixListener::bind(&path).unwrap(), path)
            }
            Transport::Https => {
                use rustls::pki_types::pem::PemObject;
                use rustls::pki_types::{CertificateDer, PrivateKeyDer};
                let (dir, ca, server) = test_pki();
                let certs = CertificateDer::pem_file_iter(&server.cert)
                    .unwrap()
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap();
                let key = PrivateKeyDer::from_pem_file(&server.key).unwrap();
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let config = rustls::ServerConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .unwrap()
                    .with_no_client_auth()
                    .with_single_cert(certs, key)
                    .unwrap();
                let listener = TcpListener::bind("127.0.0.1:0").unwrap();
                RawListener::Tls(listener, Arc::new(config), ca, dir)
            }
        }
    }

    /// The next connection.
    pub fn accept(&self) -> io::Result<RawConn> {
        Ok(match self {
            RawListener::Tcp(l) => RawConn::Tcp(l.accept()?.0),
            RawListener::Unix(l, _) => RawConn::Unix(l.accept()?.0),
            RawListener::Tls(l, config, _, _) => {
                let sock = l.accept()?.0;
                let conn =
                    rustls::ServerConnection::new(config.clone()).map_err(io::Error::other)?;
                RawConn::Tls(Box::new(rustls::StreamOwned::new(conn, sock)))
            }
        })
    }

    /// Connects to the listener, waking a thread blocked in [`RawListener::accept`].
    pub fn wake(&self) {
        match self {
            RawListener::Tcp(l) | RawListener::Tls(l, ..) => {
                let _ = TcpStream::connect(l.local_addr().unwrap());
            }
            RawListener::Unix(_, path) => {
                let _ = UnixStream::connect(path);
            }
        }
    }

    /// The agent's address as the client's messages show it.
    pub fn shown(&self) -> String {
        match self {
            RawListener::Tcp(l) => format!("http://{}", l.local_addr().unwrap()),
            RawListener::Unix(_, path) => format!("unix://{}", path.display()),
            RawListener::Tls(l, ..) => format!("https://{}", l.local_addr().unwrap()),
        }
    }

    /// A client builder aimed at the listener (trusting its CA over TLS).
    pub fn client_builder(&self) -> ClientBuilder {
        match self {
            RawListener::Tcp(l) => {
                ClientBuilder::new().address(l.local_addr().unwrap().to_string())
            }
            RawListener::Unix(_, path) => {
                ClientBuilder::new().address(format!("unix://{}", path.display()))
            }
            RawListener::Tls(l, _, ca, _) => ClientBuilder::new()
                .address(format!("https://{}", l.local_addr().unwrap()))
                .tls(baton::TlsSettings {
                    ca_file: Some(ca.clone()),
                    ..Default::default()
                }),
        }
    }
}

impl Drop for RawListener {
    fn drop(&mut self) {
        match self {
            RawListener::Unix(_, path) => {
                let _ = std::fs::remove_file(path);
            }
            RawListener::Tls(_, _, _, dir) => {
                let _ = std::fs::remove_dir_all(dir);
            }
            RawListener::Tcp(_) => {}
        }
    }
}

impl RawConn {
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            RawConn::Tcp(s) => s.set_read_timeout(t),
            RawConn::Unix(s) => s.set_read_timeout(t),
            RawConn::Tls(s) => s.sock.set_read_timeout(t),
        }
    }

    /// Ends the answer: the client reads to its end (over TLS, a `close_notify` first).
    pub fn shutdown_write(&mut self) -> io::Result<()> {
        match self {
            RawConn::Tcp(s) => s.shutdown(std::net::Shutdown::Write),
            RawConn::Unix(s) => s.shutdown(std::net::Shutdown::Write),
            RawConn::Tls(s) => {
                s.conn.send_close_notify();
                s.flush()?;
                s.sock.shutdown(std::net::Shutdown::Write)
            }
        }
    }
}

impl Read for RawConn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            RawConn::Tcp(s) => s.read(buf),
            RawConn::Unix(s) => s.read(buf),
            RawConn::Tls(s) => s.read(buf),
        }
    }
}

impl Write for RawConn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            RawConn::Tcp(s) => s.write(buf),
            RawConn::Unix(s) => s.write(buf),
            RawConn::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            RawConn::Tcp(s) => s.flush(),
            RawConn::Unix(s) => s.flush(),
            RawConn::Tls(s) => s.flush(),
        }
    }
}
