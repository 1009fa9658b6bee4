//! The renewer: one thread per client renewing every managed session from a
//! timer heap, and moving sessions to Lost when their local deadline passes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver, Sender};

use crate::foundations::error::ErrorKind;
use crate::foundations::threads::Worker;
use crate::runtime::lease::SessionShared;
use crate::transport::conn::Conn;

/// Commands to the renewer thread.
pub(crate) enum Command {
    /// Start renewing a session.
    Add(Arc<SessionShared>),
}

struct Entry {
    at: Instant,
    seq: u64,
    session: Arc<SessionShared>,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// Handle to the renewer thread and the lease-timer thread.
///
/// The lease timer only moves sessions to Lost when their local deadline
/// passes, so that a renew blocked on a silent server never delays the loss
/// signals of other sessions.
#[derive(Debug)]
pub(crate) struct Renewer {
    tx: Sender<Command>,
    timer_tx: Sender<Arc<SessionShared>>,
    pub(crate) worker: Worker,
    pub(crate) timer: Worker,
}

impl Renewer {
    pub(crate) fn start(core: Arc<Conn>) -> std::io::Result<Renewer> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let (timer_tx, timer_rx) = crossbeam_channel::unbounded();
        let c = core.clone();
        let worker = Worker::spawn("baton-renewer", move || run(c, rx))?;
        let timer = Worker::spawn("baton-lease-timer", move || run_timer(core, timer_rx))?;
        Ok(Renewer {
            tx,
            timer_tx,
            worker,
            timer,
        })
    }

    pub(crate) fn add(&self, s: Arc<SessionShared>) {
        let _ = self.timer_tx.send(s.clone());
        let _ = self.tx.send(Command::Add(s));
    }
}

/// Fires each session's local deadline. One heap entry per session; when an
/// entry comes due and the session was renewed meanwhile, it is re-queued at
/// the new deadline.
fn run_timer(core: Arc<Conn>, rx: Receiver<Arc<SessionShared>>) {
    let closing = core.closing.receiver();
    let mut heap: BinaryHeap<Reverse<(Instant, u64)>> = BinaryHeap::new();
    let mut sessions: std::collections::HashMap<u64, Arc<SessionShared>> = Default::default();
    let mut seq = 0u64;
    loop {
        let timer = match heap.peek() {
            Some(Reverse((at, _))) => crossbeam_channel::at(*at),
            None => crossbeam_channel::never(),
        };
        select! {
            recv(rx) -> s => match s {
                Ok(s) => {
                    if let Some(until) = s.valid_until() {
                        seq += 1;
                        heap.push(Reverse((until, seq)));
                        sessions.insert(seq, s);
                    }
                }
                Err(_) => return,
            },
            recv(closing) -> _ => return,
            recv(timer) -> _ => {}
        }
        let now = Instant::now();
        while let Some(Reverse((at, id))) = heap.peek().copied() {
            if at > now {
                break;
            }
            heap.pop();
            let Some(s) = sessions.remove(&id) else {
                continue;
            };
            if core.closing.is_cancelled() {
                return;
            }
            if s.check_deadline() {
                continue;
            }
            if let Some(until) = s.valid_until() {
                seq += 1;
                heap.push(Reverse((until.max(at), seq)));
                sessions.insert(seq, s);
            }
        }
    }
}

/// A small xorshift generator for jitter (no need for a crypto RNG here).
struct Jitter(u64);

impl Jitter {
    fn new() -> Jitter {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9E37_79B9_7F4A_7C15)
            ^ (std::process::id() as u64) << 32;
        Jitter(seed | 1)
    }

    /// A factor in [0.9, 1.1).
    fn factor(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        0.9 + (self.0 % 10_000) as f64 / 50_000.0
    }
}

/// When to renew next after a success: about TTL/3, ±10 %.
fn renew_interval(ttl: Duration, jitter: &mut Jitter) -> Duration {
    // Consul's TTLs are at most 24 h; a larger one from a confused server must
    // not overflow the timer arithmetic.
    (ttl.min(MAX_TTL) / 3).mul_f64(jitter.factor())
}

/// Consul's largest session TTL (24 h).
const MAX_TTL: Duration = Duration::from_secs(24 * 3600);

/// How long to wait before retrying a failed renew.
fn retry_interval(ttl: Duration) -> Duration {
    (ttl / 10).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

fn run(core: Arc<Conn>, rx: Receiver<Command>) {
    let closing = core.closing.receiver();
    let mut heap: BinaryHeap<Reverse<Entry>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut jitter = Jitter::new();
    let mut push = |heap: &mut BinaryHeap<Reverse<Entry>>, at, session| {
        seq += 1;
        heap.push(Reverse(Entry { at, seq, session }));
    };
    loop {
        if core.closing.is_cancelled() {
            return;
        }
        let timer = match heap.peek() {
            Some(Reverse(e)) => crossbeam_channel::at(e.at),
            None => crossbeam_channel::never(),
        };
        select! {
            recv(rx) -> cmd => match cmd {
                Ok(Command::Add(s)) => {
                    if let Some(ttl) = s.ttl() {
                        push(&mut heap, Instant::now() + renew_interval(ttl, &mut jitter), s);
                    }
                }
                Err(_) => return,
            },
            recv(closing) -> _ => return,
            recv(timer) -> _ => {}
        }
        // Renew every session that is due.
        while heap.peek().is_some_and(|Reverse(e)| e.at <= Instant::now()) {
            let Reverse(e) = heap.pop().expect("peeked");
            if core.closing.is_cancelled() {
                return;
            }
            let s = e.session;
            if !s.is_renewing() || s.check_deadline() {
                continue;
            }
            let ttl = s.ttl().unwrap_or(Duration::from_secs(15)).min(MAX_TTL);
            let sent = Instant::now();
            let until = s.valid_until().unwrap_or(sent + ttl);
            // Never wait past a third of the TTL nor past the session's deadline.
            let timeout = core
                .request_timeout()
                .min(ttl / 3)
                .min(until.saturating_duration_since(sent))
                .max(Duration::from_millis(50));
            let mut req = crate::api::session_api::session_request("renew", &s.id);
            req.timeout = Some(timeout);
            let result = core
                .transport
                .send_on(&req, Some(&core.closing))
                .and_then(|resp| crate::api::session_api::renew_answer(&req, resp));
            // A renew the client's close interrupted is no renewal.
            if !result
                .as_ref()
                .is_err_and(|e| e.kind() == ErrorKind::Closed)
            {
                core.transport
                    .metrics
                    .renewal(result.is_ok(), sent.elapsed());
            }
            match result {
                Ok(entry) => {
                    s.renewed(sent, entry.ttl());
                    if let (Some(ttl), false) = (s.ttl(), s.is_lost()) {
                        push(&mut heap, sent + renew_interval(ttl, &mut jitter), s);
                    }
                }
                Err(err) if err.kind() == ErrorKind::Closed => return,
                Err(err) if err.kind() == ErrorKind::SessionInvalidated => {
                    s.lose(crate::runtime::lease::LostReason::Invalidated);
                }
                Err(err) => {
                    s.renew_failed(&err);
                    if !s.is_lost() {
                        push(&mut heap, Instant::now() + retry_interval(ttl), s);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_follow_ttl() {
        let mut j = Jitter::new();
        for _ in 0..1000 {
            let i = renew_interval(Duration::from_secs(15), &mut j);
            assert!(i >= Duration::from_millis(4500) && i < Duration::from_millis(5500));
        }
        assert_eq!(
            retry_interval(Duration::from_secs(15)),
            Duration::from_secs(1)
        );
        assert_eq!(
            retry_interval(Duration::from_millis(100)),
            Duration::from_millis(50)
        );
    }
}
