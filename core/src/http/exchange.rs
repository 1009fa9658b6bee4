//! One request on a connection that an event loop polls: the warm path of the language
//! bindings' loops (Node, asyncio), where the loop writes the request and reads the answer
//! itself instead of waiting for a baton thread to hand the outcome over (see
//! `docs/src/performance.md`, "The loops' own floors").
//!
//! Everything here is non-blocking: [`Exchange::advance`] writes what it can, reads what has
//! arrived, and says what it waits for next ([`Progress::Pending`]); the loop polls the
//! connection's socket for that and calls it again. The request is rendered by the transport
//! ([`Transport::render`](super::Transport)) with the same URL and headers as the ureq path,
//! and the answer is framed here (`Content-Length`, chunked, or to the end of the connection)
//! and judged by the transport like any other ([`Transport::conclude`](super::Transport)).
//! Only plain HTTP without a proxy takes this path; TLS, proxies and every call that needs more
//! than one request stay on baton's threads.
//!
//! A blocking call drives the same exchange on its own thread ([`Exchange::wait`] polls the
//! socket between advances): the lock's direct path (`lock::direct`), which skips ureq's
//! per-request work for the two requests of a warm cycle.

use std::io::{ErrorKind as IoKind, Write};
use std::net::TcpStream;
use std::sync::Arc;

use super::body::{too_large_message, MAX_RESPONSE_BYTES};
use super::message::parse_meta;
use super::{QueryMeta, Response};

/// How much room each read of an answer asks for.
const READ_STEP: usize = 4 * 1024;

/// A keep-alive connection to the agent, non-blocking, for one exchange at a time.
#[derive(Debug)]
pub(crate) struct LoopConn {
    /// Shared only with an interrupter ([`Exchange::interrupter`]) while a thread waits on it.
    stream: Arc<TcpStream>,
}

impl LoopConn {
    /// Wraps a connected stream (made non-blocking here).
    pub(crate) fn new(stream: TcpStream) -> std::io::Result<LoopConn> {
        stream.set_nonblocking(true)?;
        stream.set_nodelay(true)?;
        Ok(LoopConn {
            stream: Arc::new(stream),
        })
    }

    /// Whether the connection can carry another request: nothing unasked-for has arrived
    /// and the agent has not closed it.
    pub(crate) fn reusable(&self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.stream.peek(&mut byte), Err(e) if e.kind() == IoKind::WouldBlock)
    }

    /// The socket, for the loop to poll.
    #[cfg(unix)]
    pub(crate) fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.stream.as_raw_fd()
    }
}

/// What an exchange waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interest {
    /// The socket to become readable (the answer).
    Read,
    /// The socket to become writable (the rest of the request).
    Write,
}

/// Where an exchange stands after [`Exchange::advance`].
#[derive(Debug)]
pub(crate) enum Progress {
    /// Poll the socket for this, then advance again.
    Pending(Interest),
    /// The whole answer, and the connection if it can carry the next request.
    Answered(Response, Option<LoopConn>),
    /// The connection failed. `unsent`: not a byte of the request was written, so the
    /// request certainly did not reach the agent.
    Failed(std::io::Error, bool),
}

/// One request in flight on a [`LoopConn`].
#[derive(Debug)]
pub(crate) struct Exchange {
    /// `None` once the exchange has ended.
    conn: Option<LoopConn>,
    out: Vec<u8>,
    sent: usize,
    inbuf: Vec<u8>,
}

impl Exchange {
    /// An exchange that will write `request` (rendered bytes) on `conn`.
    pub(crate) fn new(conn: LoopConn, request: Vec<u8>) -> Exchange {
        Exchange {
            conn: Some(conn),
            out: request,
            sent: 0,
            inbuf: Vec::new(),
        }
    }

    /// The socket, for the loop to poll.
    #[cfg(unix)]
    pub(crate) fn fd(&self) -> Option<std::os::fd::RawFd> {
        self.conn.as_ref().map(LoopConn::fd)
    }

    /// The socket as a `poll(2)` entry for `interest` (`None` once the exchange has ended),
    /// for a thread that waits on many exchanges at once.
    pub(crate) fn poll_fd(&self, interest: Interest) -> Option<rustix::event::PollFd<'_>> {
        use rustix::event::{PollFd, PollFlags};
        let flags = match interest {
            Interest::Read => PollFlags::IN,
            Interest::Write => PollFlags::OUT,
        };
        Some(PollFd::new(&*self.conn.as_ref()?.stream, flags))
    }

    /// Writes what it can, reads what has arrived; never blocks. After it has answered or
    /// failed, it only fails (`NotConnected`).
    pub(crate) fn advance(&mut self) -> Progress {
        let Some(conn) = self.conn.as_mut() else {
            return Progress::Failed(IoKind::NotConnected.into(), false);
        };
        let writing = self.sent < self.out.len();
        while self.sent < self.out.len() {
            match (&*conn.stream).write(&self.out[self.sent..]) {
                Ok(0) => return self.failed(IoKind::WriteZero.into()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == IoKind::WouldBlock => {
                    return Progress::Pending(Interest::Write)
                }
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return self.failed(e),
            }
        }
        if writing {
            // The request has just left: its answer needs the agent to run first, so a read
            // now would only say "not yet" (one system call per request for nothing, seen
            // with strace). Wait for it; a failed connection shows when the socket polls.
            return Progress::Pending(Interest::Read);
        }
        loop {
            match frame(&self.inbuf) {
                Ok(Some(framed)) => return self.answered(framed),
                Ok(None) => {}
                Err(e) => return self.failed(std::io::Error::new(IoKind::InvalidData, e)),
            }
            // Read straight into the buffer's spare room, growing it as it fills (a lock
            // call's answer is a few hundred bytes: zeroing a 16 KiB scratch buffer for
            // every read cost more than the read).
            self.inbuf.reserve(READ_STEP.max(self.inbuf.len()));
            let read = rustix::net::recv(
                &*conn.stream,
                rustix::buffer::spare_capacity(&mut self.inbuf),
                rustix::net::RecvFlags::empty(),
            )
            .map(|(n, _)| n)
            .map_err(std::io::Error::from);
            match read {
                Ok(0) => {
                    // The end of the connection: ends an answer without a length, and
                    // anything else early.
                    return match frame_at_end(&self.inbuf) {
                        Some(framed) => self.answered(framed),
                        None => self.failed(IoKind::UnexpectedEof.into()),
                    };
                }
                Ok(_) => {
                    if self.inbuf.len() > MAX_RESPONSE_BYTES + 64 * 1024 {
                        return self.failed(std::io::Error::new(
                            IoKind::InvalidData,
                            too_large_message(),
                        ));
                    }
                }
                Err(e) if e.kind() == IoKind::WouldBlock => {
                    return Progress::Pending(Interest::Read)
                }
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return self.failed(e),
            }
        }
    }

    /// Blocks the calling thread until the socket is ready for `interest`, `limit` has
    /// passed, or the connection is shut down ([`Exchange::interrupter`]); then advance again.
    /// Returns at once once the exchange has ended. `false` when `poll` itself failed (not
    /// interrupted by a signal): waiting again would only spin, so the caller gives up.
    #[cfg(unix)]
    pub(crate) fn wait(&self, interest: Interest, limit: std::time::Duration) -> bool {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let Some(conn) = &self.conn else {
            return true;
        };
        let flags = match interest {
            Interest::Read => PollFlags::IN,
            Interest::Write => PollFlags::OUT,
        };
        let mut fds = [PollFd::new(&*conn.stream, flags)];
        let limit = Timespec {
            tv_sec: limit.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: limit.subsec_nanos().into(),
        };
        // Readiness, a hang-up, the time passing and EINTR all end in the caller's next
        // `advance`, which sees what happened (and the caller's clock, whether time is up).
        !matches!(poll(&mut fds, Some(&limit)), Err(e) if e != rustix::io::Errno::INTR)
    }

    /// What shuts the connection down from another thread (a cancel or close hook): the
    /// waiting thread's poll then returns, and its next `advance` fails.
    pub(crate) fn interrupter(&self) -> Option<impl Fn() + Clone + Send + Sync + 'static> {
        let stream = Arc::clone(&self.conn.as_ref()?.stream);
        Some(move || {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        })
    }

    /// Whether any of the request has been written (then it may have reached the agent).
    pub(crate) fn sent_any(&self) -> bool {
        self.sent > 0
    }

    fn failed(&mut self, e: std::io::Error) -> Progress {
        self.conn = None;
        Progress::Failed(e, self.sent == 0)
    }

    fn answered(&mut self, framed: Framed) -> Progress {
        let conn = self
            .conn
            .take()
            // Whether the agent closed it since is checked when it is next taken
            // (`Transport::take_loop_conn`): one peek per request, not two.
            .filter(|_| framed.keep_alive && framed.used == self.inbuf.len());
        Progress::Answered(framed.response, conn)
    }
}

/// An answer framed out of the bytes read so far.
struct Framed {
    response: Response,
    /// How many bytes it took.
    used: usize,
    /// Whether the connection may carry another request after it.
    keep_alive: bool,
}

/// The head of an answer: status, query meta (and what was wrong with it), and where its
/// body starts.
struct Head {
    status: u16,
    meta: (QueryMeta, Option<String>),
    body_at: usize,
    length: BodyLength,
    close: bool,
}

enum BodyLength {
    None,
    Known(usize),
    Chunked,
    ToEnd,
}

fn head(buf: &[u8]) -> Result<Option<Head>, String> {
    let mut slots = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Response::new(&mut slots);
    let body_at = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("HTTP protocol error: {e}")),
    };
    let status = parsed.code.unwrap_or(0);
    // httparse has checked the names and values (tokens; no control bytes but tab).
    let has = |name: &str, token: &str| {
        values(parsed.headers, name).any(|v| {
            std::str::from_utf8(v)
                .is_ok_and(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    let close = has("connection", "close") || parsed.version == Some(0);
    let length = if (100..200).contains(&status) || status == 204 || status == 304 {
        BodyLength::None
    } else if has("transfer-encoding", "chunked") {
        BodyLength::Chunked
    } else if let Some(v) = values(parsed.headers, "content-length").next() {
        let n = std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .ok_or_else(|| {
                "HTTP protocol error: a Content-Length that is not a number".to_string()
            })?;
        if n > MAX_RESPONSE_BYTES {
            return Err(too_large_message());
        }
        BodyLength::Known(n)
    } else {
        BodyLength::ToEnd
    };
    let meta = parse_meta(|name| values(parsed.headers, name).next());
    Ok(Some(Head {
        status,
        meta,
        body_at,
        length,
        close,
    }))
}

/// Every value of the header `name`, in order (names compared without regard to case; a
/// header may come more than once).
fn values<'h, 'b: 'h>(
    headers: &'h [httparse::Header<'b>],
    name: &'h str,
) -> impl Iterator<Item = &'b [u8]> + 'h {
    headers
        .iter()
        .filter(move |h| h.name.eq_ignore_ascii_case(name))
        .map(|h| h.value)
}

/// Frames a whole answer out of `buf`, or `None` while more is needed.
fn frame(buf: &[u8]) -> Result<Option<Framed>, String> {
    let Some(h) = head(buf)? else { return Ok(None) };
    if (100..200).contains(&h.status) {
        return Err(format!(
            "HTTP protocol error: an unasked-for {} answer",
            h.status
        ));
    }
    let rest = &buf[h.body_at..];
    let (body, used) = match h.length {
        BodyLength::None => (Vec::new(), 0),
        BodyLength::Known(n) if rest.len() >= n => (rest[..n].to_vec(), n),
        BodyLength::Known(_) | BodyLength::ToEnd => return Ok(None),
        BodyLength::Chunked => match dechunk(rest)? {
            Some(x) => x,
            None => return Ok(None),
        },
    };
    Ok(Some(finish(h, body, used, true)))
}

/// Frames an answer whose connection has ended: one without a length ends here.
fn frame_at_end(buf: &[u8]) -> Option<Framed> {
    let h = head(buf).ok()??;
    if !matches!(h.length, BodyLength::ToEnd) {
        return None;
    }
    let body = buf[h.body_at..].to_vec();
    let used = body.len();
    Some(finish(h, body, used, false))
}

fn finish(h: Head, body: Vec<u8>, used: usize, keep: bool) -> Framed {
    let (meta, bad_meta) = h.meta;
    Framed {
        response: Response {
            status: h.status,
            body,
            meta,
            bad_meta,
            base: None,
        },
        used: h.body_at + used,
        keep_alive: keep && !h.close,
    }
}

/// Decodes a chunked body from the start of `buf`: the body and the bytes it took, or `None`
/// while it is incomplete.
fn dechunk(buf: &[u8]) -> Result<Option<(Vec<u8>, usize)>, String> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let Some(eol) = find_crlf(&buf[at..]) else {
            return Ok(None);
        };
        let line = std::str::from_utf8(&buf[at..at + eol])
            .map_err(|_| "HTTP protocol error: a chunk size that is not text".to_string())?;
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("HTTP protocol error: chunk size {size_text:?}"))?;
        at += eol + 2;
        if size == 0 {
            // Trailers, up to an empty line.
            loop {
                let Some(eol) = find_crlf(&buf[at..]) else {
                    return Ok(None);
                };
                at += eol + 2;
                if eol == 0 {
                    return Ok(Some((body, at)));
                }
            }
        }
        if body.len() + size > MAX_RESPONSE_BYTES {
            return Err(too_large_message());
        }
        if buf.len() < at + size + 2 {
            return Ok(None);
        }
        body.extend_from_slice(&buf[at..at + size]);
        if &buf[at + size..at + size + 2] != b"\r\n" {
            return Err("HTTP protocol error: a chunk without its line end".to_string());
        }
        at += size + 2;
    }
}

fn find_crlf(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::net::TcpListener;

    fn framed(text: &[u8]) -> Framed {
        frame(text).expect("valid").expect("complete")
    }

    #[test]
    fn answers_are_framed_by_length_chunks_or_end() {
        let a = framed(b"HTTP/1.1 200 OK\r\nX-Consul-Index: 42\r\nContent-Length: 4\r\n\r\ntrue");
        assert_eq!(
            (a.response.status, &a.response.body[..]),
            (200, &b"true"[..])
        );
        assert_eq!(a.response.meta.index, 42);
        assert!(a.keep_alive);

        let text = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\ntru\r\n1\r\ne\r\n0\r\nT: 1\r\n\r\n";
        let c = framed(text);
        assert_eq!(&c.response.body[..], b"true");
        assert_eq!(c.used, text.len());

        let closing = framed(b"HTTP/1.1 500 x\r\nConnection: close\r\nContent-Length: 2\r\n\r\nno");
        assert!(!closing.keep_alive);

        let to_end = b"HTTP/1.0 200 OK\r\n\r\nfalse";
        assert!(frame(to_end).expect("valid").is_none());
        let e = frame_at_end(to_end).expect("ends with the connection");
        assert_eq!(&e.response.body[..], b"false");
        assert!(!e.keep_alive);
    }

    #[test]
    fn partial_and_broken_answers_are_told_apart() {
        let whole = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ntrue";
        for cut in 0..whole.len() {
            assert!(
                frame(&whole[..cut]).expect("valid so far").is_none(),
                "cut at {cut}"
            );
            assert!(
                frame_at_end(&whole[..cut]).is_none(),
                "cut at {cut}, then closed"
            );
        }
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\ntrue\r\n0\r\n\r\n";
        for cut in 0..chunked.len() {
            assert!(
                frame(&chunked[..cut]).expect("valid so far").is_none(),
                "cut at {cut}"
            );
        }
        assert!(frame(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
        assert!(frame(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err());
        assert!(frame(b"NOT HTTP\r\n\r\n").is_err());
        let big = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
            MAX_RESPONSE_BYTES + 1
        );
        assert!(frame(big.as_bytes()).is_err());
    }

    /// A server that reads one request and answers it with `answer`, in two writes.
    fn serve_once(
        answer: &'static [u8],
    ) -> (std::net::SocketAddr, std::thread::JoinHandle<Vec<u8>>) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().expect("accept");
            let mut r = BufReader::new(s.try_clone().expect("clone"));
            let mut got = Vec::new();
            loop {
                let mut line = Vec::new();
                r.read_until(b'\n', &mut line).expect("read");
                got.extend_from_slice(&line);
                if line == b"\r\n" || line.is_empty() {
                    break;
                }
            }
            let mut s = s;
            let (a, b) = answer.split_at(answer.len() / 2);
            s.write_all(a).expect("write");
            s.flush().expect("flush");
            s.write_all(b).expect("write");
            got
        });
        (addr, t)
    }

    /// Advances until the exchange is no longer pending, waiting for the socket in between
    /// (the test's stand-in for a loop's poll).
    fn drive(ex: &mut Exchange) -> Progress {
        loop {
            match ex.advance() {
                Progress::Pending(_) => {
                    let s = &ex.conn.as_ref().expect("in flight").stream;
                    let mut byte = [0u8; 1];
                    s.set_nonblocking(false).expect("blocking");
                    let _ = s.peek(&mut byte);
                    s.set_nonblocking(true).expect("non-blocking");
                }
                done => return done,
            }
        }
    }

    #[test]
    fn an_exchange_writes_the_request_and_reads_the_answer_without_blocking() {
        let (addr, server) =
            serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nX-Consul-Index: 7\r\n\r\ntrue");
        let conn = LoopConn::new(TcpStream::connect(addr).expect("connect")).expect("conn");
        let mut ex = Exchange::new(conn, b"PUT /v1/kv/a HTTP/1.1\r\nHost: x\r\n\r\n".to_vec());
        match drive(&mut ex) {
            Progress::Answered(r, conn) => {
                assert_eq!(
                    (r.status, &r.body[..], r.meta.index),
                    (200, &b"true"[..], 7)
                );
                // The server has not closed yet or has: either way nothing unasked-for came.
                drop(conn);
            }
            other => panic!("expected an answer, got {other:?}"),
        }
        let got = server.join().expect("server");
        assert!(got.starts_with(b"PUT /v1/kv/a HTTP/1.1\r\n"));
    }

    #[test]
    fn a_closed_connection_fails_the_exchange() {
        let (addr, server) = serve_once(b"HTTP/1.1 200 OK\r\nContent-Le");
        let conn = LoopConn::new(TcpStream::connect(addr).expect("connect")).expect("conn");
        let mut ex = Exchange::new(conn, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec());
        let end = drive(&mut ex);
        server.join().expect("server");
        match end {
            Progress::Failed(e, unsent) => {
                assert_eq!(e.kind(), IoKind::UnexpectedEof);
                assert!(!unsent, "the request was written");
            }
            other => panic!("expected a failure, got {other:?}"),
        }
    }
}
