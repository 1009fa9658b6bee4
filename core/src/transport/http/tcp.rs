//! Baton's TCP connections for ureq: what ureq's own TCP connector and transport do, with
//! fewer system calls per request.
//!
//! - **One write per request.** ureq hands a request's head and its body over separately;
//!   written as they come, every request with a body (a txn, a KV write, a session create)
//!   costs two segments, two system calls and, on the server, a wake-up for each. Here they are
//!   staged and written together when ureq first waits for the answer, which on a keep-alive
//!   HTTP/1.1 connection is always after the whole request (baton never asks for
//!   `100 Continue`). A body larger than half the output buffer goes out as it comes.
//! - **One system call per reuse check.** ureq checks a pooled connection before and after
//!   each request (nothing unread, not closed by the peer); its transport switches the socket
//!   to non-blocking and back around a read, three calls, where one non-blocking peek will do
//!   on Unix.
//!
//! [`Tcp`] connects as ureq's connector does: each resolved address in turn, each with a share
//! of the connect budget, no delay; the socket is shared (weakly) with the agent, which shuts it
//! down to interrupt a call from another thread.

use std::fmt;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use super::stream::{Dial, Stream};

use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, Transport,
};
use ureq::{Error, Timeout};

/// Opens plain TCP connections, or unix socket ones for a client whose address is a unix
/// socket (the part of ureq's default chain it replaces; a connection a proxy connector before
/// it already made is passed on untouched).
#[derive(Debug)]
pub(super) struct Tcp {
    pub(super) dial: Dial,
}

impl<In: Transport> Connector<In> for Tcp {
    type Out = Either<In, Connection>;

    fn connect(
        &self,
        details: &ConnectionDetails<'_>,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, Error> {
        if let Some(c) = chained {
            return Ok(Some(Either::A(c)));
        }
        let stream = Arc::new(match self.dial.connect_unix() {
            Some(unix) => unix.map_err(Error::Io)?,
            None => Stream::Tcp(connect_any(details)?),
        });
        let config = details.config;
        (details.register_shutdown)(Arc::downgrade(&stream) as _)?;
        let buffers = LazyBuffers::new(config.input_buffer_size(), config.output_buffer_size());
        Ok(Some(Either::B(Connection::new(stream, buffers))))
    }
}

/// Connects to the first of the resolved addresses that answers, the way ureq's TCP connector
/// does: each address gets half the share of the one before, the shares summing to the whole
/// connect budget (a single address gets all of it; no share is below 10 ms), and only an error
/// that concerns one address (refused, unreachable) moves on to the next.
fn connect_any(details: &ConnectionDetails<'_>) -> Result<TcpStream, Error> {
    const MIN_SHARE: std::time::Duration = std::time::Duration::from_millis(10);
    let addrs: &[SocketAddr] = &details.addrs;
    let budget: Option<std::time::Duration> = details.timeout.not_zero().map(|d| *d);
    let total = 2.0 * (1.0 - 0.5_f64.powi(addrs.len() as i32));
    let mut weight = 1.0_f64;
    let mut last: Option<Error> = None;
    let started = std::time::Instant::now();
    for addr in addrs {
        let share = budget.map(|b| b.mul_f64(weight / total).max(MIN_SHARE));
        weight /= 2.0;
        let attempt = match share {
            Some(d) => TcpStream::connect_timeout(addr, d),
            None => TcpStream::connect(addr),
        };
        match attempt {
            Ok(s) => {
                if details.config.no_delay() {
                    s.set_nodelay(true)?;
                }
                return Ok(s);
            }
            Err(e) if one_address(&e) => last = Some(Error::Io(e)),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                ) =>
            {
                if budget.is_some_and(|b| started.elapsed() >= b) {
                    return Err(Error::Timeout(details.timeout.reason));
                }
                last = Some(Error::Timeout(Timeout::Connect));
            }
            Err(e) => return Err(Error::Io(e)),
        }
    }
    Err(last.unwrap_or_else(|| {
        Error::Io(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            "Connection refused",
        ))
    }))
}

/// Whether a failed connect concerns only the address tried.
fn one_address(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::HostUnreachable
            | io::ErrorKind::NetworkUnreachable
            | io::ErrorKind::AddrNotAvailable
    )
}

/// A TCP or unix socket connection for ureq (see the module docs).
pub(super) struct Connection {
    /// The socket, shared (weakly) with the agent, which shuts it down to interrupt a call
    /// from another thread.
    stream: Arc<Stream>,
    buffers: LazyBuffers,
    /// Bytes of the request staged at the start of the output buffer, not written yet.
    staged: usize,
    /// The socket's read and write timeouts as last set (`None`: none).
    read_timeout: Option<std::time::Duration>,
    write_timeout: Option<std::time::Duration>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("peer", &self.stream.peer())
            .finish()
    }
}

/// Gives the socket the time `timeout` leaves (through `set`, only when it differs from
/// `current`, the value set last); a timeout error when none is left.
fn set_timeout(
    timeout: &NextTimeout,
    current: &mut Option<std::time::Duration>,
    set: impl FnOnce(Option<std::time::Duration>) -> io::Result<()>,
) -> Result<(), Error> {
    if timeout.after.is_zero() {
        return Err(Error::Timeout(timeout.reason));
    }
    let want = timeout.not_zero().map(|d| *d);
    if want != *current {
        set(want)?;
        *current = want;
    }
    Ok(())
}

/// A timeout error of ureq for an I/O error that means the socket's timeout passed.
fn io_error(e: io::Error, timeout: &NextTimeout) -> Error {
    match e.kind() {
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Error::Timeout(timeout.reason),
        _ => Error::Io(e),
    }
}

impl Connection {
    fn new(stream: Arc<Stream>, buffers: LazyBuffers) -> Connection {
        Connection {
            stream,
            buffers,
            staged: 0,
            read_timeout: None,
            write_timeout: None,
        }
    }

    /// Writes what is staged.
    fn flush(&mut self, timeout: NextTimeout) -> Result<(), Error> {
        if self.staged == 0 {
            return Ok(());
        }
        let timeout = timeout.for_write();
        let stream = &self.stream;
        set_timeout(&timeout, &mut self.write_timeout, |t| {
            stream.set_write_timeout(t)
        })?;
        let n = std::mem::take(&mut self.staged);
        let mut stream = &*self.stream;
        io::Write::write_all(&mut stream, &self.buffers.output()[..n])
            .map_err(|e| io_error(e, &timeout))
    }
}

impl Transport for Connection {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        self.staged += amount;
        // Keep at least half the buffer free for ureq's next piece.
        if self.staged >= self.buffers.output().len() / 2 {
            self.flush(timeout)?;
        }
        Ok(())
    }

    fn maybe_await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        self.flush(timeout)?;
        if self.buffers.can_use_input() {
            return Ok(true);
        }
        self.await_input(timeout)
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        self.flush(timeout)?;
        let timeout = timeout.for_read();
        let stream = &self.stream;
        set_timeout(&timeout, &mut self.read_timeout, |t| {
            stream.set_read_timeout(t)
        })?;
        let mut stream = &*self.stream;
        let amount = loop {
            match io::Read::read(&mut stream, self.buffers.input_append_buf()) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other.map_err(|e| io_error(e, &timeout))?,
            }
        };
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        // Open when nothing is waiting to be read and the peer has not closed: a byte there
        // (an answer nobody asked for) or the end of the stream means it is not reusable.
        let mut byte = [0u8; 1];
        #[cfg(unix)]
        let peeked = {
            use rustix::net::{recv, RecvFlags};
            recv(
                &*self.stream,
                &mut byte,
                RecvFlags::PEEK | RecvFlags::DONTWAIT,
            )
            .map_err(io::Error::from)
        };
        #[cfg(not(unix))]
        let peeked = (|| {
            let Stream::Tcp(s) = &*self.stream;
            s.set_nonblocking(true)?;
            let r = s.peek(&mut byte);
            s.set_nonblocking(false)?;
            r
        })();
        matches!(peeked, Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }
}

impl Buffers for Connection {
    fn output(&mut self) -> &mut [u8] {
        let staged = self.staged;
        &mut self.buffers.output()[staged..]
    }

    fn input(&self) -> &[u8] {
        self.buffers.input()
    }

    fn input_append_buf(&mut self) -> &mut [u8] {
        self.buffers.input_append_buf()
    }

    fn input_appended(&mut self, amount: usize) {
        self.buffers.input_appended(amount)
    }

    fn input_consume(&mut self, amount: usize) {
        self.buffers.input_consume(amount)
    }

    fn tmp_and_output(&mut self) -> (&mut [u8], &mut [u8]) {
        let staged = self.staged;
        let (tmp, output) = self.buffers.tmp_and_output();
        (tmp, &mut output[staged..])
    }

    fn can_use_input(&self) -> bool {
        self.buffers.can_use_input()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A connected pair: baton's transport on one end, the raw server socket on the other.
    fn pair() -> (Connection, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        (
            Connection::new(Arc::new(Stream::Tcp(client)), LazyBuffers::new(4096, 4096)),
            server,
        )
    }

    fn hand_over(t: &mut Connection, bytes: &[u8]) {
        t.buffers().output()[..bytes.len()].copy_from_slice(bytes);
        t.transmit_output(bytes.len(), NextTimeout::default())
            .expect("transmit");
    }

    /// Whether any byte reached `server` (without waiting for one: bytes in flight would pass
    /// unseen, so this can only miss a fault, never invent one).
    fn arrived(server: &TcpStream) -> bool {
        server.set_nonblocking(true).expect("nonblocking");
        let mut b = [0u8; 1];
        let got = server.peek(&mut b).map(|n| n > 0).unwrap_or(false);
        server.set_nonblocking(false).expect("blocking");
        got
    }

    #[test]
    fn a_request_goes_out_whole_when_the_answer_is_awaited() {
        let (mut t, mut server) = pair();
        hand_over(&mut t, b"PUT /v1/txn HTTP/1.1\r\ncontent-length: 2\r\n\r\n");
        hand_over(&mut t, b"[]");
        assert!(
            !arrived(&server),
            "bytes went out before the answer was awaited"
        );
        let answer = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut buf = [0u8; 256];
            while !got.ends_with(b"[]") {
                let n = server.read(&mut buf).expect("read");
                assert!(n > 0, "the client closed early");
                got.extend_from_slice(&buf[..n]);
            }
            server
                .write_all(b"HTTP/1.1 200 OK\r\n\r\n")
                .expect("answer");
            got
        });
        assert!(t.await_input(NextTimeout::default()).expect("await"));
        let sent = answer.join().expect("server thread");
        assert_eq!(
            sent,
            b"PUT /v1/txn HTTP/1.1\r\ncontent-length: 2\r\n\r\n[]".to_vec()
        );
        assert!(t.buffers().input().starts_with(b"HTTP/1.1 200 OK"));
    }

    #[test]
    fn a_body_larger_than_half_the_buffer_goes_out_as_it_comes() {
        let (mut t, server) = pair();
        hand_over(&mut t, &[b'x'; 3000]);
        server
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .expect("timeout");
        assert!(
            server.peek(&mut [0u8; 1]).is_ok_and(|n| n == 1),
            "a large piece stayed staged"
        );
    }

    /// A blocking peek at the client's socket.
    fn peek(t: &Connection) -> usize {
        match &*t.stream {
            Stream::Tcp(s) => s.peek(&mut [0u8; 1]).expect("peek"),
            #[cfg(unix)]
            Stream::Unix(_) => unreachable!("the test pair is TCP"),
        }
    }

    #[test]
    fn an_open_connection_is_reusable_and_a_closed_or_chatty_one_is_not() {
        let (mut t, server) = pair();
        assert!(t.is_open());
        (&server).write_all(b"?").expect("write");
        // Blocking peeks: each returns once what the server did has reached the client.
        assert_eq!(peek(&t), 1);
        assert!(
            !t.is_open(),
            "a connection with an unasked-for byte was reusable"
        );
        let (mut t, server) = pair();
        drop(server);
        assert_eq!(peek(&t), 0);
        assert!(!t.is_open(), "a connection the peer closed was reusable");
    }
}
