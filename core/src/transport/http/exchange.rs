//! One request on a non-blocking connection: every request of the client is one, whoever
//! drives it. An event loop (Node, asyncio) writes the request and reads the answer itself
//! instead of waiting for a baton thread to hand the outcome over (see
//! `docs/src/performance.md`, "The loops' own floors"); the key hub's poller drives many at
//! once; a blocking call drives its own on its thread ([`drive_here`], `Transport::send_own`).
//!
//! Everything here is non-blocking: [`Exchange::advance`] writes what it can, reads what has
//! arrived, and says what it waits for next ([`Progress::Pending`]); the driver polls the
//! connection's socket for that and calls it again. The request carries the client's URL and
//! headers ([`Transport::render`](super::Transport)); rendering it and framing the answer
//! (`Content-Length`, chunked, or to the end of the connection) is `ureq-proto`'s, the
//! HTTP/1.1 state machine under ureq itself, and the answer is judged by the transport like
//! any other ([`Transport::conclude`](super::Transport)). The connection under it is TCP, a
//! unix socket or a proxy's tunnel, with TLS on top for HTTPS (`transport::net`); a `CONNECT` to a
//! proxy is an exchange too (`proxy`).

use std::io::ErrorKind as IoKind;
use std::sync::Arc;

use ureq_proto::client::state::{RecvBody, RecvResponse};
use ureq_proto::client::{Call, RecvBodyResult, RecvResponseResult, SendRequestResult};
use ureq_proto::http;
use ureq_proto::BodyMode;

use super::body::{too_large_message, MAX_RESPONSE_BYTES};
use super::message::parse_meta;
use super::Response;

pub(crate) use crate::transport::net::LoopConn;

/// Why an answer could not be framed (not HTTP, too large): the inner error of the I/O error
/// an exchange fails with then, told apart from a failed connection by [`framing_error`].
#[derive(Debug)]
struct Framing(String);

impl std::fmt::Display for Framing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Framing {}

/// What was wrong with the answer, when `io` failed an exchange for it (a bad answer, not a
/// failed connection).
pub(crate) fn framing_error(io: &std::io::Error) -> Option<&str> {
    io.get_ref()?
        .downcast_ref::<Framing>()
        .map(|f| f.0.as_str())
}

/// A request rendered for an [`Exchange`]: its bytes, and the state machine that frames its
/// answer.
#[derive(Debug)]
pub(crate) struct Outgoing {
    bytes: Vec<u8>,
    call: Call<RecvResponse>,
    /// A `CONNECT`: its connection becomes a tunnel, handed back with the answer.
    tunnel: bool,
}

impl Outgoing {
    /// Renders `request` with `body`, sent with a `Content-Length` (a PUT always has one,
    /// never a chunked body: Consul reads either, some proxies before it only the first).
    pub(crate) fn new(mut request: http::Request<()>, body: &[u8]) -> Result<Outgoing, String> {
        let protocol = |e: ureq_proto::Error| format!("HTTP protocol error: {e}");
        let tunnel = request.method() == http::Method::CONNECT;
        if request.method() == http::Method::PUT || !body.is_empty() {
            request
                .headers_mut()
                .insert(http::header::CONTENT_LENGTH, body.len().into());
        }
        let uri = request.uri();
        let head_room = 512
            + uri.authority().map_or(0, |a| a.as_str().len())
            + uri.path_and_query().map_or(0, |p| p.as_str().len())
            + request
                .headers()
                .iter()
                .map(|(n, v)| n.as_str().len() + v.len() + 4)
                .sum::<usize>();
        let mut bytes = vec![0u8; head_room + body.len()];
        let mut send = Call::new(request).map_err(protocol)?.proceed();
        let mut used = send.write(&mut bytes).map_err(protocol)?;
        let call = match send.proceed().map_err(protocol)? {
            Some(SendRequestResult::RecvResponse(call)) => call,
            Some(SendRequestResult::SendBody(mut call)) => {
                let mut at = 0;
                while !call.can_proceed() {
                    let (taken, n) = call
                        .write(&body[at..], &mut bytes[used..])
                        .map_err(protocol)?;
                    at += taken;
                    used += n;
                    if taken == 0 && n == 0 {
                        return Err("HTTP protocol error: the body did not fit".to_string());
                    }
                }
                call.proceed()
                    .ok_or_else(|| "HTTP protocol error: the body was not sent".to_string())?
            }
            Some(SendRequestResult::Await100(_)) | None => {
                return Err("HTTP protocol error: the request head was not sent".to_string())
            }
        };
        bytes.truncate(used);
        Ok(Outgoing {
            bytes,
            call,
            tunnel,
        })
    }

    /// The request as it goes on the wire.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
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

/// How far the answer has come.
#[derive(Debug)]
enum Reading {
    /// Its head.
    Head(Call<RecvResponse>),
    /// Its body, after this head.
    Body(Call<RecvBody>, Response),
    /// Over (answered or failed).
    Over,
}

/// One request in flight on a [`LoopConn`].
#[derive(Debug)]
pub(crate) struct Exchange {
    /// `None` once the exchange has ended.
    conn: Option<LoopConn>,
    out: Vec<u8>,
    /// How much of `out` has been written (plain) or handed to TLS.
    handed: usize,
    /// Whether all of the request is on the wire.
    sent: bool,
    /// Whether any byte went on the wire (then the request may have reached the agent).
    on_wire: bool,
    /// What has arrived and is not framed yet.
    inbuf: Vec<u8>,
    reading: Reading,
    /// The answer's `Content-Length`, once its head is read.
    declared: Option<u64>,
    /// A `CONNECT` ([`Outgoing::tunnel`]): the connection is handed back with the answer.
    tunnel: bool,
}

impl Exchange {
    /// An exchange that will write `request` on `conn`.
    pub(crate) fn new(conn: LoopConn, request: Outgoing) -> Exchange {
        Exchange {
            conn: Some(conn),
            out: request.bytes,
            handed: 0,
            sent: false,
            on_wire: false,
            inbuf: Vec::new(),
            reading: Reading::Head(request.call),
            declared: None,
            tunnel: request.tunnel,
        }
    }

    /// The socket, for the loop to poll.
    #[cfg(unix)]
    pub(crate) fn fd(&self) -> Option<std::os::fd::RawFd> {
        self.conn.as_ref().map(LoopConn::fd)
    }

    /// Which connection it runs on ([`LoopConn::id`]), while the exchange has not ended.
    pub(crate) fn conn_id(&self) -> Option<u64> {
        self.conn.as_ref().map(LoopConn::id)
    }

    /// The socket, while the exchange has not ended (for a readiness thread to wait on).
    pub(crate) fn socket(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        Some(self.conn.as_ref()?.stream.as_fd())
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
        if !self.sent {
            match conn.send(&self.out, &mut self.handed, &mut self.on_wire) {
                Ok(true) => self.sent = true,
                Ok(false) => return Progress::Pending(Interest::Write),
                Err(e) => return self.failed(e),
            }
            // The request has just left: its answer needs the agent to run first, so a read
            // now would only say "not yet" (one system call per request for nothing, seen
            // with strace). Wait for it; a failed connection shows when the socket polls.
            return Progress::Pending(Interest::Read);
        }
        loop {
            let Some(conn) = self.conn.as_mut() else {
                return Progress::Failed(IoKind::NotConnected.into(), false);
            };
            match conn.receive(&mut self.inbuf) {
                Ok(0) => return self.ended(),
                Ok(_) => match self.frame() {
                    Ok(Some(done)) => return done,
                    Ok(None) => {}
                    Err(e) => {
                        return self.failed(std::io::Error::new(IoKind::InvalidData, Framing(e)))
                    }
                },
                Err(e) if e.kind() == IoKind::WouldBlock => {
                    return Progress::Pending(Interest::Read)
                }
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return self.failed(e),
            }
        }
    }

    /// Frames what has arrived: the answer once it is whole (`None` while more is due).
    fn frame(&mut self) -> Result<Option<Progress>, String> {
        let protocol = |e: ureq_proto::Error| format!("HTTP protocol error: {e}");
        loop {
            match std::mem::replace(&mut self.reading, Reading::Over) {
                Reading::Head(mut call) => {
                    let (used, head) = call.try_response(&self.inbuf, false).map_err(protocol)?;
                    self.inbuf.drain(..used);
                    let Some(head) = head else {
                        self.reading = Reading::Head(call);
                        if used > 0 {
                            // An informational answer (100 Continue) went: the real one follows.
                            continue;
                        }
                        if self.inbuf.len() > 64 * 1024 {
                            return Err("HTTP protocol error: an answer head over 64 KiB".into());
                        }
                        return Ok(None);
                    };
                    let declared = head
                        .headers()
                        .get(http::header::CONTENT_LENGTH)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok());
                    if declared.is_some_and(|n| n > MAX_RESPONSE_BYTES as u64) {
                        return Err(too_large_message());
                    }
                    self.declared = declared;
                    // Nothing asks the agent to compress (Consul compresses only when asked).
                    if let Some(coding) = head
                        .headers()
                        .get(http::header::CONTENT_ENCODING)
                        .filter(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"))
                    {
                        return Err(format!(
                            "the answer is compressed (Content-Encoding: {}), which baton never \
                             asks for",
                            String::from_utf8_lossy(coding.as_bytes())
                        ));
                    }
                    let (meta, bad_meta) =
                        parse_meta(|name| head.headers().get(name).map(|v| v.as_bytes()));
                    let response = Response {
                        status: head.status().as_u16(),
                        body: Vec::new(),
                        meta,
                        bad_meta,
                        base: None,
                    };
                    match call.proceed() {
                        Some(RecvResponseResult::RecvBody(call)) => {
                            self.reading = Reading::Body(call, response);
                        }
                        Some(RecvResponseResult::Cleanup(call)) => {
                            return Ok(Some(self.answered(response, call.must_close_connection())))
                        }
                        // Consul never redirects; an answer that does is the answer, and its
                        // connection is not reused.
                        Some(RecvResponseResult::Redirect(_)) => {
                            return Ok(Some(self.answered(response, true)))
                        }
                        None => return Err("HTTP protocol error: an unfinished head".into()),
                    }
                }
                Reading::Body(mut call, mut response) => {
                    let had = response.body.len();
                    response.body.resize(had + self.inbuf.len(), 0);
                    let (used, n) = call
                        .read(&self.inbuf, &mut response.body[had..])
                        .map_err(protocol)?;
                    response.body.truncate(had + n);
                    self.inbuf.drain(..used);
                    if response.body.len() > MAX_RESPONSE_BYTES {
                        return Err(too_large_message());
                    }
                    // An answer without a length ends with its connection (`ended`).
                    if call.body_mode() == BodyMode::CloseDelimited || !call.can_proceed() {
                        self.reading = Reading::Body(call, response);
                        return Ok(None);
                    }
                    let close = match call.proceed() {
                        Some(RecvBodyResult::Cleanup(call)) => call.must_close_connection(),
                        _ => true,
                    };
                    return Ok(Some(self.answered(response, close)));
                }
                Reading::Over => return Err("HTTP protocol error: the exchange is over".into()),
            }
        }
    }

    /// The agent closed the connection: that ends an answer without a length, and fails
    /// anything else.
    fn ended(&mut self) -> Progress {
        match std::mem::replace(&mut self.reading, Reading::Over) {
            Reading::Body(call, response) if call.body_mode() == BodyMode::CloseDelimited => {
                let mut response = response;
                response.body.append(&mut self.inbuf);
                if response.body.len() > MAX_RESPONSE_BYTES {
                    return self.failed(std::io::Error::new(
                        IoKind::InvalidData,
                        Framing(too_large_message()),
                    ));
                }
                self.answered(response, true)
            }
            // Say how much came: it stays a connection failure, worth another try.
            Reading::Body(_, response) => {
                let of = self.declared.map_or(String::new(), |n| format!(" of {n}"));
                self.failed(std::io::Error::new(
                    IoKind::UnexpectedEof,
                    format!(
                        "the answer was cut off after {}{of} bytes: the connection ended",
                        response.body.len()
                    ),
                ))
            }
            _ => self.failed(IoKind::UnexpectedEof.into()),
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
            let _ = stream.shutdown();
        })
    }

    /// Whether any of the request has been written (then it may have reached the agent).
    pub(crate) fn sent_any(&self) -> bool {
        self.on_wire
    }

    fn failed(&mut self, e: std::io::Error) -> Progress {
        self.conn = None;
        self.reading = Reading::Over;
        Progress::Failed(e, !self.on_wire)
    }

    fn answered(&mut self, response: Response, close: bool) -> Progress {
        self.reading = Reading::Over;
        let conn = self
            .conn
            .take()
            // Whether the agent closed it since is checked when it is next taken
            // (`Transport::take_loop_conn`): one peek per request, not two.
            .filter(|_| (self.tunnel || !close) && self.inbuf.is_empty());
        Progress::Answered(response, conn)
    }
}

/// A step built on an exchange that a thread drives to its end ([`drive_here`]): the exchange
/// itself, or a call whose one request it is (`lock::warm`).
pub(crate) trait Drive {
    /// What a step that is no longer pending gives.
    type Out;
    /// One advance: the outcome, or the socket readiness it waits for.
    fn step(&mut self) -> std::result::Result<Self::Out, Interest>;
    /// The exchange in flight, to wait on and to interrupt.
    fn exchange(&self) -> &Exchange;
}

impl Drive for Exchange {
    type Out = Progress;
    fn step(&mut self) -> std::result::Result<Progress, Interest> {
        match self.advance() {
            Progress::Pending(interest) => Err(interest),
            done => Ok(done),
        }
    }
    fn exchange(&self) -> &Exchange {
        self
    }
}

/// Drives `d` on this thread, polling its socket between advances, until it is no longer
/// pending (`Some`), or `stop_at` passes or a token in `tokens` is cancelled (`None`: still in
/// flight, for the caller to abandon). Each token's cancel shuts the connection down, which
/// ends a wait at once. Nothing is written once the time is up.
pub(crate) fn drive_here<D: Drive>(
    d: &mut D,
    stop_at: std::time::Instant,
    tokens: &[&crate::foundations::cancel::CancelToken],
) -> Option<D::Out> {
    // Each hook shuts the connection down (ending the poll); dropped when this returns.
    let _hooks: Vec<_> = match d.exchange().interrupter() {
        Some(shut) => tokens.iter().map(|t| t.on_cancel(shut.clone())).collect(),
        None => Vec::new(),
    };
    if std::time::Instant::now() >= stop_at {
        return None;
    }
    loop {
        // Before advancing: a connection shut down by a hook is not the agent's failure.
        if tokens.iter().any(|t| t.is_cancelled()) {
            return None;
        }
        match d.step() {
            Ok(out) => return Some(out),
            Err(interest) => {
                let now = std::time::Instant::now();
                if now >= stop_at || !d.exchange().wait(interest, stop_at - now) {
                    return None;
                }
            }
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::transport::net::Stream;
    use std::io::{BufRead, BufReader, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::unix::net::UnixStream;

    fn get(path: &str) -> Outgoing {
        let req = http::Request::get(format!("http://localhost{path}"))
            .body(())
            .expect("request");
        Outgoing::new(req, &[]).expect("renders")
    }

    /// An exchange of a GET on one end of a socket pair; the other end plays the agent.
    fn pair() -> (Exchange, UnixStream) {
        let (ours, agent) = UnixStream::pair().expect("pair");
        let conn = LoopConn::new(Stream::Unix(ours)).expect("conn");
        (Exchange::new(conn, get("/v1/kv/a")), agent)
    }

    /// Advances until the exchange is no longer pending, waiting for the socket in between
    /// (the test's stand-in for a loop's poll).
    fn drive(ex: &mut Exchange) -> Progress {
        loop {
            match ex.advance() {
                Progress::Pending(interest) => {
                    assert!(ex.wait(interest, std::time::Duration::from_secs(10)));
                }
                done => return done,
            }
        }
    }

    /// What the exchange makes of `answer`, all of it arrived.
    fn outcome(answer: &[u8]) -> Progress {
        let (mut ex, mut agent) = pair();
        agent.write_all(answer).expect("answer");
        let p = drive(&mut ex);
        hang_up(agent);
        p
    }

    /// Closes the agent's end after reading the request (a unix socket closed with unread
    /// bytes resets the connection instead of ending it).
    fn hang_up(agent: UnixStream) {
        agent.set_nonblocking(true).expect("non-blocking");
        while matches!(std::io::Read::read(&mut &agent, &mut [0u8; 512]), Ok(n) if n > 0) {}
        drop(agent);
    }

    fn answered(p: Progress) -> (Response, bool) {
        match p {
            Progress::Answered(r, conn) => (r, conn.is_some()),
            other => panic!("expected an answer, got {other:?}"),
        }
    }

    fn failed(p: Progress) -> std::io::Error {
        match p {
            Progress::Failed(e, unsent) => {
                assert!(!unsent, "the request was written");
                e
            }
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn requests_carry_their_length_and_body() {
        let req = http::Request::put("http://localhost/v1/txn")
            .header("Content-Type", "application/json")
            .header("X-Consul-Token", "t")
            .body(())
            .expect("request");
        let out = Outgoing::new(req, b"[1]").expect("renders");
        let text = String::from_utf8(out.bytes().to_vec()).expect("text");
        let lower = text.to_ascii_lowercase();
        assert!(text.starts_with("PUT /v1/txn HTTP/1.1\r\n"), "{text}");
        assert!(lower.contains("\r\nhost: localhost\r\n"), "{text}");
        assert!(lower.contains("\r\ncontent-length: 3\r\n"), "{text}");
        assert!(lower.contains("\r\nx-consul-token: t\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\n[1]"), "{text}");
        let text = String::from_utf8(get("/v1/kv/a?index=3").bytes().to_vec()).expect("text");
        assert!(
            text.starts_with("GET /v1/kv/a?index=3 HTTP/1.1\r\n"),
            "{text}"
        );
        assert!(
            !text.to_ascii_lowercase().contains("content-length"),
            "{text}"
        );
        assert!(text.ends_with("\r\n\r\n"), "{text}");
    }

    #[test]
    fn answers_are_framed_by_length_chunks_or_end() {
        let (a, reusable) = answered(outcome(
            b"HTTP/1.1 200 OK\r\nX-Consul-Index: 42\r\nContent-Length: 4\r\n\r\ntrue",
        ));
        assert_eq!(
            (a.status, &a.body[..], a.meta.index),
            (200, &b"true"[..], 42)
        );
        assert!(reusable);

        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\ntru\r\n1\r\ne\r\n0\r\nT: 1\r\n\r\n";
        let (c, reusable) = answered(outcome(chunked));
        assert_eq!(&c.body[..], b"true");
        assert!(
            reusable,
            "a whole chunked answer leaves the connection usable"
        );

        let (closing, reusable) = answered(outcome(
            b"HTTP/1.1 500 x\r\nConnection: close\r\nContent-Length: 2\r\n\r\nno",
        ));
        assert_eq!((closing.status, &closing.body[..]), (500, &b"no"[..]));
        assert!(!reusable);

        // No length: the answer ends with the connection.
        let (mut ex, mut agent) = pair();
        agent
            .write_all(b"HTTP/1.0 200 OK\r\n\r\nfal")
            .expect("answer");
        assert!(matches!(
            drive_until_read(&mut ex),
            Progress::Pending(Interest::Read)
        ));
        agent.write_all(b"se").expect("answer");
        hang_up(agent);
        let (e, reusable) = answered(drive(&mut ex));
        assert_eq!(&e.body[..], b"false");
        assert!(!reusable);

        // More than was asked for: the answer, and the connection is not reused.
        let (_, reusable) = answered(outcome(
            b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ntrueHTTP/1.1",
        ));
        assert!(!reusable);
        // An informational answer before the real one is passed over.
        let (r, _) = answered(outcome(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
        ));
        assert_eq!((r.status, &r.body[..]), (200, &b"{}"[..]));
    }

    /// Advances until the exchange has written its request and read what there is.
    fn drive_until_read(ex: &mut Exchange) -> Progress {
        loop {
            match ex.advance() {
                Progress::Pending(Interest::Write) => {}
                Progress::Pending(Interest::Read) if ex.sent => {
                    return ex.advance();
                }
                Progress::Pending(Interest::Read) => {}
                done => return done,
            }
        }
    }

    #[test]
    fn an_answer_cut_short_waits_and_then_fails_when_the_connection_ends() {
        let whole: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ntrue";
        let chunked: &[u8] =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\ntrue\r\n0\r\n\r\n";
        for answer in [whole, chunked] {
            for cut in 0..answer.len() {
                let (mut ex, mut agent) = pair();
                agent.write_all(&answer[..cut]).expect("answer");
                assert!(
                    matches!(drive_until_read(&mut ex), Progress::Pending(Interest::Read)),
                    "cut at {cut}"
                );
                hang_up(agent);
                let e = failed(drive(&mut ex));
                assert_eq!(e.kind(), IoKind::UnexpectedEof, "cut at {cut}: {e}");
            }
        }
    }

    #[test]
    fn broken_answers_are_protocol_errors() {
        let big = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
            MAX_RESPONSE_BYTES + 1
        );
        for (answer, want) in [
            (
                &b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"[..],
                "HTTP protocol error",
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                "HTTP protocol error",
            ),
            (b"NOT HTTP\r\n\r\n", "HTTP protocol error"),
            (big.as_bytes(), "exceeds"),
        ] {
            let e = failed(outcome(answer));
            assert_eq!(e.kind(), IoKind::InvalidData, "{e}");
            assert!(e.to_string().contains(want), "{want}: {e}");
        }
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

    #[test]
    fn an_exchange_over_tcp_writes_the_request_and_reads_the_answer() {
        let (addr, server) =
            serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nX-Consul-Index: 7\r\n\r\ntrue");
        let conn =
            LoopConn::new(Stream::Tcp(TcpStream::connect(addr).expect("connect"))).expect("conn");
        let mut ex = Exchange::new(conn, get("/v1/kv/a"));
        let (r, _) = answered(drive(&mut ex));
        assert_eq!(
            (r.status, &r.body[..], r.meta.index),
            (200, &b"true"[..], 7)
        );
        let got = server.join().expect("server");
        assert!(got.starts_with(b"GET /v1/kv/a HTTP/1.1\r\n"));
    }
}
