//! The I/O of a connection baton drives itself ([`LoopConn`]): non-blocking writes and reads
//! on the socket, through TLS when the client speaks HTTPS. An `Exchange` (`http::exchange`)
//! sees bytes of HTTP either way; the socket a loop polls is the same.
//!
//! Over TLS the handshake is done when the connection is made (blocking, on a baton thread,
//! within the connect timeout: [`handshake`]); after it, a request's bytes are handed to rustls
//! and its records written as the socket takes them, and records are read and decrypted as they
//! come. Records that carry no data (a TLS 1.3 session ticket after the handshake) are taken in
//! when the connection is next checked for reuse, not mistaken for an unasked-for answer.

use std::io::{ErrorKind as IoKind, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::stream::Stream;

/// How much room each read of an answer asks for.
const READ_STEP: usize = 4 * 1024;

/// A keep-alive connection to the agent, non-blocking, for one exchange at a time.
#[derive(Debug)]
pub(crate) struct LoopConn {
    /// Declared first, so it runs before `stream` is dropped (see [`EndOnDrop`]).
    end: EndOnDrop,
    /// Unique in the process, never reused ([`LoopConn::id`]).
    id: u64,
    /// Shared only with an interrupter (`Exchange::interrupter`) while a thread waits on it.
    pub(crate) stream: Arc<Stream>,
    /// TLS over the socket, its handshake done (`None`: plain HTTP).
    tls: Option<Box<rustls::ClientConnection>>,
}

/// Ends the connection (`shutdown`) when its [`LoopConn`] is dropped, rather than leaving the
/// end to the last descriptor's close: an event loop may hold a duplicate of the socket
/// (`consul_baton.aio` keeps one registered between calls), and a connection baton drops must
/// end for the agent all the same. The loop then sees its duplicate readable and lets it go.
#[derive(Debug)]
struct EndOnDrop(std::sync::Weak<Stream>);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        if let Some(stream) = self.0.upgrade() {
            let _ = stream.shutdown();
        }
    }
}

/// The source of [`LoopConn::id`].
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Completes a TLS handshake on `stream` (blocking, each read and write within `budget`).
pub(crate) fn handshake(
    stream: Stream,
    config: Arc<rustls::ClientConfig>,
    name: rustls::pki_types::ServerName<'static>,
    budget: Duration,
) -> std::io::Result<LoopConn> {
    let mut tls = rustls::ClientConnection::new(config, name)
        .map_err(|e| std::io::Error::new(IoKind::InvalidData, e))?;
    stream.set_read_timeout(Some(budget))?;
    stream.set_write_timeout(Some(budget))?;
    let started = std::time::Instant::now();
    while tls.is_handshaking() {
        if started.elapsed() > budget {
            return Err(IoKind::TimedOut.into());
        }
        tls.complete_io(&mut &stream)?;
    }
    stream.set_read_timeout(None)?;
    stream.set_write_timeout(None)?;
    let mut conn = LoopConn::new(stream)?;
    conn.tls = Some(Box::new(tls));
    Ok(conn)
}

impl LoopConn {
    /// Wraps a connected stream, plain HTTP (made non-blocking here).
    pub(crate) fn new(stream: Stream) -> std::io::Result<LoopConn> {
        stream.set_nonblocking(true)?;
        stream.set_nodelay()?;
        let stream = Arc::new(stream);
        Ok(LoopConn {
            end: EndOnDrop(Arc::downgrade(&stream)),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            stream,
            tls: None,
        })
    }

    /// Which connection this is: unique in the process, so a loop that keeps a duplicate of a
    /// socket registered can tell the connection it belongs to from a later one that got the
    /// same descriptor number.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The socket of a plain connection, blocking again: a proxy's tunnel, which TLS to the
    /// agent may then wrap.
    pub(crate) fn into_stream(self) -> std::io::Result<Stream> {
        let LoopConn {
            mut end, stream, ..
        } = self;
        // The socket lives on as the tunnel: not ended here.
        end.0 = std::sync::Weak::new();
        let stream = Arc::try_unwrap(stream)
            .map_err(|_| std::io::Error::other("the connection is still shared"))?;
        stream.set_nonblocking(false)?;
        Ok(stream)
    }

    /// Whether the connection can carry another request: nothing unasked-for has arrived
    /// and the agent has not closed it. Over TLS, records without data that arrived since
    /// (session tickets) are taken in on the way.
    pub(crate) fn reusable(&mut self) -> bool {
        let Some(tls) = self.tls.as_mut() else {
            let mut byte = [0u8; 1];
            let peeked = rustix::net::recv(
                &*self.stream,
                &mut byte,
                rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT,
            );
            return matches!(peeked, Err(e) if std::io::Error::from(e).kind() == IoKind::WouldBlock);
        };
        loop {
            match tls.reader().read(&mut [0u8; 1]) {
                Err(e) if e.kind() == IoKind::WouldBlock => {}
                // Data nobody asked for, or the end of the connection.
                _ => return false,
            }
            match tls.read_tls(&mut &*self.stream) {
                Ok(0) => return false,
                Ok(_) => {
                    if tls.process_new_packets().is_err() {
                        return false;
                    }
                }
                Err(e) if e.kind() == IoKind::WouldBlock => return true,
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }

    /// The socket, for the loop to poll.
    #[cfg(unix)]
    pub(crate) fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::{AsFd, AsRawFd};
        self.stream.as_fd().as_raw_fd()
    }

    /// Writes what it can of `out` from `*handed` on (counting what it hands over there);
    /// `Ok(true)` once all of it is on the wire, `Ok(false)` when the socket takes no more
    /// for now. `on_wire` becomes true with the first byte written to the socket.
    pub(crate) fn send(
        &mut self,
        out: &[u8],
        handed: &mut usize,
        on_wire: &mut bool,
    ) -> std::io::Result<bool> {
        let stream = &*self.stream;
        let Some(tls) = self.tls.as_mut() else {
            while *handed < out.len() {
                match (&mut &*stream).write(&out[*handed..]) {
                    Ok(0) => return Err(IoKind::WriteZero.into()),
                    Ok(n) => {
                        *handed += n;
                        *on_wire = true;
                    }
                    Err(e) if e.kind() == IoKind::WouldBlock => return Ok(false),
                    Err(e) if e.kind() == IoKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            return Ok(true);
        };
        if *handed < out.len() {
            tls.writer().write_all(&out[*handed..])?;
            *handed = out.len();
        }
        while tls.wants_write() {
            match tls.write_tls(&mut &*stream) {
                Ok(0) => return Err(IoKind::WriteZero.into()),
                Ok(_) => *on_wire = true,
                Err(e) if e.kind() == IoKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Appends what has arrived to `inbuf`: how many bytes (0: the agent ended the
    /// connection), or `WouldBlock` when nothing has. Over TLS, the decrypted bytes.
    pub(crate) fn receive(&mut self, inbuf: &mut Vec<u8>) -> std::io::Result<usize> {
        inbuf.reserve(READ_STEP.max(inbuf.len()));
        let stream = &*self.stream;
        let Some(tls) = self.tls.as_mut() else {
            // Read straight into the buffer's spare room (a lock call's answer is a few
            // hundred bytes: zeroing a scratch buffer for every read cost more than the read).
            return rustix::net::recv(
                stream,
                rustix::buffer::spare_capacity(inbuf),
                rustix::net::RecvFlags::empty(),
            )
            .map(|(n, _)| n)
            .map_err(std::io::Error::from);
        };
        loop {
            let had = inbuf.len();
            inbuf.resize(had + READ_STEP, 0);
            let plain = tls.reader().read(&mut inbuf[had..]);
            inbuf.truncate(had + *plain.as_ref().unwrap_or(&0));
            match plain {
                // Ok(0): the agent's close_notify.
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == IoKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            match tls.read_tls(&mut &*stream)? {
                0 => return Ok(0),
                _ => {
                    tls.process_new_packets()
                        .map_err(|e| std::io::Error::new(IoKind::InvalidData, e))?;
                    // An alert or key update to answer: sent now if the socket takes it, else
                    // with the next request.
                    while tls.wants_write() {
                        match tls.write_tls(&mut &*stream) {
                            Ok(_) => {}
                            Err(e) if e.kind() == IoKind::WouldBlock => break,
                            Err(e) => return Err(e),
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};

    use super::*;

    /// A connected pair: (ours, wrapped as a `LoopConn`, with a duplicate of its socket kept
    /// aside as an event loop keeps one; the agent's end).
    fn pair() -> (LoopConn, TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let ours = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (agent, _) = listener.accept().expect("accept");
        let duplicate = ours.try_clone().expect("dup");
        let conn = LoopConn::new(Stream::Tcp(ours)).expect("conn");
        agent
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        (conn, duplicate, agent)
    }

    #[test]
    fn a_dropped_connection_ends_though_a_duplicate_of_its_socket_is_open() {
        let (conn, _duplicate, mut agent) = pair();
        drop(conn);
        assert_eq!(
            agent.read(&mut [0u8; 8]).expect("read"),
            0,
            "the agent saw no end"
        );
    }

    #[test]
    fn a_connection_made_a_tunnel_is_not_ended() {
        let (conn, _duplicate, mut agent) = pair();
        let tunnel = conn.into_stream().expect("stream");
        (&mut &tunnel).write_all(b"x").expect("write");
        let mut got = [0u8; 1];
        agent.read_exact(&mut got).expect("read");
        assert_eq!(&got, b"x");
    }

    #[test]
    fn connections_have_ids_of_their_own() {
        let (a, _, _agent_a) = pair();
        let (b, _, _agent_b) = pair();
        assert_ne!(a.id(), b.id());
    }
}
